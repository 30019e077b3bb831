"""Any OpenAI-compatible chat endpoint (OpenAI, vLLM, Ollama, llama.cpp server, HF router)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

import openai
from openai.types.chat import ChatCompletion

from llm_clients.base import Model
from llm_clients.probability import TOP_LOGPROBS, find_answer, logprobs_from_openai, read_logprobs
from llm_clients.types import Completion, Distribution, LLMError, Message, Usage

# USD per million tokens (input, output). Unknown models cost 0 unless priced
# through CRS_LLM_PRICE (see llm.config).
KNOWN_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-3.5-turbo": (0.50, 1.50),
}


class OpenAICompatibleModel(Model):
    """A model behind an OpenAI-compatible ``/v1/chat/completions`` endpoint.

    Retries (with exponential backoff, honouring ``Retry-After``) are the
    ``openai`` package's own; what still fails becomes an :class:`LLMError`
    whose message says what happened without echoing any credential.
    """

    backend = "openai"

    def __init__(
        self,
        name: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        price: tuple[float, float] | None = None,
    ):
        super().__init__(name)
        self.base_url = base_url
        self.timeout = timeout
        self.max_retries = max_retries
        self.price = price or KNOWN_PRICES.get(name)
        self._client = openai.OpenAI(
            api_key=api_key or "not-needed",
            base_url=base_url,
            timeout=timeout,
            max_retries=max_retries,
        )

    @property
    def key(self) -> str:
        return f"openai:{self.base_url or 'api.openai.com'}:{self.name}"

    def describe(self) -> str:
        host = re.sub(r"^https?://", "", self.base_url or "api.openai.com").split("/")[0]
        return f"{self.name} @ {host}"

    def cost(self, usage: Usage) -> float:
        if not self.price:
            return 0.0
        return (usage.prompt_tokens * self.price[0] + usage.completion_tokens * self.price[1]) / 1e6

    def _request(self, messages: list[Message], params: dict[str, Any]) -> dict[str, Any]:
        request: dict[str, Any] = {"model": self.name, "messages": messages}
        if "temperature" in params:
            request["temperature"] = params["temperature"]
        if "max_tokens" in params:
            request["max_tokens"] = params["max_tokens"]
        if params.get("seed") is not None:
            request["seed"] = params["seed"]
        if params.get("stop"):
            request["stop"] = list(params["stop"])
        if params.get("json_mode"):
            request["response_format"] = {"type": "json_object"}
        return request

    def _create(self, request: dict[str, Any]) -> ChatCompletion:
        """``chat.completions.create`` without the SDK's recursive parameter transform. Our requests are plain
        JSON (strings, numbers, lists of message dicts), which the transform hands back unchanged after
        inspecting every key's type: about 15 ms of CPU per call, a tenth of a second of a 28-call evaluation
        spent with the interpreter held (bench/eval_latency.py). The response is parsed as ``create`` parses it."""
        return self._client.post("/chat/completions", body=request, cast_to=ChatCompletion)

    def _chat(self, messages: list[Message], params: dict[str, Any]) -> Completion:
        request = self._request(messages, params)
        top = params.get("logprobs")
        if top:
            request.update(logprobs=True, top_logprobs=int(top))
        try:
            with _errors(self):
                response = self._create(request)
        except LLMError as e:
            if not top or e.kind != "bad_request":
                raise
            # the endpoint refuses log-probabilities (HTTP 400): the plain answer, without them
            request.pop("logprobs"), request.pop("top_logprobs")
            with _errors(self):
                response = self._create(request)
        choice = _first_choice(self, response)
        logprobs = None
        if top:
            logprobs = logprobs_from_openai(getattr(getattr(choice, "logprobs", None), "content", None))
        return Completion(
            text=choice.message.content or "",
            model=getattr(response, "model", None) or self.name,
            usage=_usage(response),
            finish_reason=choice.finish_reason or "stop",
            logprobs=logprobs,
        )

    def _stream(self, messages: list[Message], params: dict[str, Any]) -> Iterator[str | Completion]:
        request = self._request(messages, params)
        pieces: list[str] = []
        usage = Usage()
        finish = "stop"
        model = self.name
        with _errors(self):
            stream = self._client.chat.completions.create(
                **request, stream=True, stream_options={"include_usage": True}
            )
            for chunk in stream:
                model = getattr(chunk, "model", None) or model
                if getattr(chunk, "usage", None):
                    usage = _usage(chunk)
                for choice in chunk.choices or []:
                    delta = choice.delta.content if choice.delta else None
                    if delta:
                        pieces.append(delta)
                        yield delta
                    if choice.finish_reason:
                        finish = choice.finish_reason
        yield Completion(text="".join(pieces), model=model, usage=usage, finish_reason=finish)

    def _score(self, messages: list[Message], options: Sequence[str], params: dict[str, Any]) -> Distribution:
        """The answer is generated with log-probabilities and read at the token holding the option
        (:mod:`llm_clients.probability`); endpoints without log-probabilities are sampled instead."""
        prefix = params.get("prefix") or ""
        min_mass = params.get("min_mass")
        if prefix:
            messages = [
                *messages[:-1],
                {
                    **messages[-1],
                    "content": messages[-1]["content"]
                    + f"\n\nBegin your answer with {prefix} followed directly by the answer.",
                },
            ]
        longest = max(len(o) for o in options)
        try:
            answer = self._chat(
                messages,
                {"temperature": 0.0, "max_tokens": max(8, len(prefix) + longest + 6), "logprobs": TOP_LOGPROBS},
            )
        except LLMError as e:
            if e.kind != "bad_request":
                raise
            answer = None
        if answer is not None and answer.logprobs:
            found = find_answer(answer.text, options, prefix=prefix)
            if found is not None:
                option, offset = found
                dist = read_logprobs(answer.logprobs, answer.text, option, offset, options, min_mass=min_mass)
                dist.model = self.name
                return dist
        # no log-probabilities, or an answer that names no option: sample
        return self._score_by_sampling(messages, options, prefix, int(params.get("samples") or 10))

    def _score_by_sampling(self, messages, options, prefix, samples: int) -> Distribution:
        """``samples`` answers at temperature 1, asked for in one request (``n``); an endpoint that
        returns fewer choices is asked again, one answer per request, for the rest."""
        counts = dict.fromkeys(options, 0)
        texts: list[str] = []
        request = {**self._request(messages, {"temperature": 1.0, "max_tokens": 16, "seed": 0}), "n": samples}
        try:
            with _errors(self):
                response = self._create(request)
            texts = [c.message.content or "" for c in (response.choices or [])][:samples]
        except LLMError as e:
            if e.kind != "bad_request":
                raise
        for i in range(len(texts), samples):
            texts.append(self._chat(messages, {"temperature": 1.0, "max_tokens": 16, "seed": i}).text)
        invalid = 0
        for text in texts:
            found = find_answer(text, options, prefix=prefix)
            if found is None:
                invalid += 1
            else:
                counts[found[0]] += 1
        valid = samples - invalid
        if valid == 0:
            raise LLMError(
                f"{self.name} gave no answer among {list(options)} in {samples} samples",
                kind="bad_response",
                model=self.name,
            )
        return Distribution(
            probs={o: c / valid for o, c in counts.items()},
            method="sampling",
            samples=samples,
            invalid=invalid,
            model=self.name,
        )


def _first_choice(model: Model, response):
    if not getattr(response, "choices", None):
        raise LLMError(f"{model.name} returned a response with no choices", kind="bad_response", model=model.name)
    return response.choices[0]


def _usage(response) -> Usage:
    u = getattr(response, "usage", None)
    if not u:
        return Usage()
    return Usage(prompt_tokens=u.prompt_tokens or 0, completion_tokens=u.completion_tokens or 0)


# openai exception -> (kind, message); the first matching row wins, so subclasses come first.
_ERRORS: list[tuple[type[Exception] | tuple[type[Exception], ...], str, str]] = [
    (openai.APITimeoutError, "timeout", "{where} did not answer within {timeout:g} s ({tries})."),
    (openai.RateLimitError, "rate_limit", "{where} is rate-limiting requests (HTTP 429, {tries}). Try again later."),
    (
        openai.AuthenticationError,
        "auth",
        "{where} rejected the API key (HTTP 401). Check the key variable for this role.",
    ),
    (openai.BadRequestError, "bad_request", "{where} rejected the request (HTTP 400): {detail}"),
    (openai.APIStatusError, "server", "{where} failed with HTTP {status} ({tries})."),
    (openai.APIConnectionError, "connection", "{where} could not be reached ({tries})."),
    (
        (openai.APIResponseValidationError, ValueError, KeyError, TypeError, AttributeError),
        "bad_response",
        "{where} returned a response that could not be read.",
    ),
    (openai.OpenAIError, "error", "{where} failed: {name}."),
]


class _errors:
    """Turn ``openai`` exceptions into :class:`LLMError` with a plain message (never a key)."""

    def __init__(self, model: OpenAICompatibleModel):
        self.model = model

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is None or isinstance(exc, LLMError):
            return False
        m = self.model
        for types, kind, template in _ERRORS:
            if isinstance(exc, types):
                message = template.format(
                    where=m.describe(),
                    timeout=m.timeout,
                    name=type(exc).__name__,
                    tries=f"after {m.max_retries + 1} attempt{'s' if m.max_retries else ''}",
                    status=getattr(exc, "status_code", "?"),
                    detail=_short(exc),
                )
                raise LLMError(message, kind=kind, model=m.name) from None
        return False


def _short(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    message = body.get("message") if isinstance(body, dict) else None
    return (message or type(exc).__name__)[:200]
