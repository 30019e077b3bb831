"""The model interface every backend implements, and the caching client over it.

Backends implement three primitives (``_chat``, ``_stream``, ``_score``). The
:class:`LLMClient` adds what every caller wants and no backend should repeat:
the SQLite cache keyed by (model, messages, parameters), the call log with
tokens, cost and latency, and the role name the call was made for.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from llm_clients.probability import MIN_MASS, TOP_LOGPROBS, check_mass, explicit, find_answer, read_logprobs
from llm_clients.types import Completion, Distribution, LLMError, Message, Usage
from storage.db import get_db
from storage.llm_log import cache_get, cache_put, log_call

log = logging.getLogger(__name__)

DEFAULT_OPTIONS = ("0", "1", "2", "3", "4")


class Model(ABC):
    """One model behind one backend."""

    backend: str = "abstract"
    # True when the backend can give the next-token distribution after any text (the embedded model):
    # an answer's distribution is then read from logits at the answer token, not from log-probabilities.
    reads_logits: bool = False

    def __init__(self, name: str):
        self.name = name

    @property
    def key(self) -> str:
        """Identity used in cache keys: backend, endpoint and model name."""
        return f"{self.backend}:{self.name}"

    @abstractmethod
    def _chat(self, messages: list[Message], params: dict[str, Any]) -> Completion: ...

    def _stream(self, messages: list[Message], params: dict[str, Any]) -> Iterator[str | Completion]:
        """Yield text pieces, then the final :class:`Completion`. Default: no streaming."""
        completion = self._chat(messages, params)
        yield completion.text
        yield completion

    @abstractmethod
    def _score(self, messages: list[Message], options: Sequence[str], params: dict[str, Any]) -> Distribution: ...

    def cost(self, usage: Usage) -> float:
        return 0.0

    def health(self) -> tuple[bool, str]:
        """Does the model answer? (ok, human-readable detail)."""
        start = time.perf_counter()
        try:
            self._chat(
                [{"role": "system", "content": "Reply with OK."}, {"role": "user", "content": "ping"}],
                {"max_tokens": 4, "temperature": 0.0},
            )
        except LLMError as e:
            return False, str(e)
        return True, f"answered in {_ms(start)} ms"

    @property
    def is_demo(self) -> bool:
        """True for tiny local models whose judgements are not meaningful."""
        return False

    def describe(self) -> str:
        return self.key


def cache_key(model: Model, kind: str, messages: Sequence[Message], params: dict[str, Any]) -> str:
    payload = {"model": model.key, "kind": kind, "messages": list(messages), "params": params}
    canonical = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def clean_messages(messages: Sequence[dict]) -> list[Message]:
    """Keep only role and content; content blocks (Gradio 6) become plain text."""
    cleaned: list[Message] = []
    for m in messages:
        role = m.get("role")
        if role not in ("system", "user", "assistant"):
            raise ValueError(f"unknown message role {role!r}")
        content = m.get("content", "")
        if isinstance(content, list):
            content = "".join(block.get("text", "") if isinstance(block, dict) else str(block) for block in content)
        cleaned.append({"role": role, "content": str(content)})
    return cleaned


@dataclass
class UsageTotals:
    """What one client spent: calls, cache hits, errors, tokens and cost."""

    calls: int = 0
    cache_hits: int = 0
    errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, other: UsageTotals) -> UsageTotals:
        return UsageTotals(**{k: getattr(self, k) + getattr(other, k) for k in asdict(self)})

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "cost_usd": round(self.cost_usd, 6)}


class LLMClient:
    """A model used for one role, with caching and call logging.

    :param model: the backend model
    :param role: the role name recorded with each call (crs, judge, ...)
    :param db_path: SQLite file for the cache and call log; None disables both
    :param use_cache: turn the cache off while keeping the call log
    """

    def __init__(self, model: Model, *, role: str = "default", db_path=None, use_cache: bool = True):
        self.model = model
        self.role = role
        self.db_path = db_path
        self.use_cache = use_cache and db_path is not None
        self.totals = UsageTotals()
        self._totals_lock = threading.Lock()

    def clone(self) -> LLMClient:
        """The same model, role and cache, with its own usage totals (e.g. one per evaluation)."""
        return LLMClient(self.model, role=self.role, db_path=self.db_path, use_cache=self.use_cache)

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def is_demo(self) -> bool:
        return self.model.is_demo

    def describe(self) -> str:
        return self.model.describe()

    # -- public API --------------------------------------------------------

    def chat(
        self,
        messages: Sequence[dict],
        *,
        temperature: float = 0.7,
        max_tokens: int = 512,
        seed: int | None = 0,
        stop: Sequence[str] | None = None,
        sample: int | None = None,
        grammar: str | None = None,
        json_mode: bool = False,
        logprobs: int | None = None,
    ) -> Completion:
        """Complete a chat.

        :param sample: separates repeated samples in the cache
        :param grammar: a GBNF grammar the answer must follow; the embedded model
            enforces it, remote endpoints ignore it (describe the format in the prompt too)
        :param json_mode: ask remote endpoints for a JSON object (``response_format``)
        :param logprobs: ask remote endpoints for this many top log-probabilities per
            generated token (``Completion.logprobs``; None when the endpoint gives none).
            The embedded model ignores it: :meth:`read_answer` reads its logits instead.
        """
        messages = clean_messages(messages)
        if self.model.reads_logits:
            logprobs = None
        params = _params(
            temperature=temperature,
            max_tokens=max_tokens,
            seed=seed,
            stop=stop,
            sample=sample,
            grammar=grammar,
            json_mode=json_mode or None,
            logprobs=logprobs,
        )
        *_, completion = self._complete(messages, params, streaming=False)
        assert isinstance(completion, Completion)  # without streaming, _complete yields the Completion alone
        return completion

    def stream(
        self,
        messages: Sequence[dict],
        *,
        temperature: float = 0.7,
        max_tokens: int = 512,
        seed: int | None = 0,
        stop: Sequence[str] | None = None,
        grammar: str | None = None,
    ) -> Iterator[str | Completion]:
        """Yield text pieces as they are generated, then the final :class:`Completion`."""
        messages = clean_messages(messages)
        params = _params(
            temperature=temperature, max_tokens=max_tokens, seed=seed, stop=stop, sample=None, grammar=grammar
        )
        yield from self._complete(messages, params, streaming=True)

    def _complete(
        self, messages: list[Message], params: dict[str, Any], *, streaming: bool
    ) -> Iterator[str | Completion]:
        """The cache, the backend call and the log around one chat; pieces only when streaming."""
        key = cache_key(self.model, "chat", messages, params)
        cached = self._cache_get(key)
        if cached is not None:
            hit = Completion.from_cache(cached)
            self._log("chat", hit.usage, 0, cache_hit=True)
            if streaming:
                yield hit.text
            yield hit
            return
        start = time.perf_counter()
        completion: Completion | None = None
        try:
            if streaming:
                for piece in self.model._stream(messages, _backend_params(params)):
                    if isinstance(piece, Completion):
                        completion = piece
                    else:
                        yield piece
            else:
                completion = self.model._chat(messages, _backend_params(params))
        except LLMError as e:
            self._log("chat", Usage(), _ms(start), error=str(e))
            raise
        assert completion is not None, "backend ended without a completion"
        completion.duration_ms = _ms(start)
        completion.usage.cost_usd = self.model.cost(completion.usage)
        self._cache_put(key, messages, params, completion.to_cache())
        self._log("chat", completion.usage, completion.duration_ms)
        yield completion

    def score(
        self,
        messages: Sequence[dict],
        options: Sequence[str] = DEFAULT_OPTIONS,
        *,
        prefix: str = "",
        samples: int = 10,
        min_mass: float | None = MIN_MASS,
    ) -> Distribution:
        """Probability of each option being the model's (short) answer: option scoring.

        Read at the answer token (:mod:`llm_clients.probability`): remote endpoints generate the answer
        with log-probabilities and the alternatives of the token that holds the option are read;
        the embedded model's next-token logits after ``prefix`` are read. Where the options hold
        less than ``min_mass`` of the probability there, the written answer is used instead
        (``method="explicit"``, ``fallback`` says why); an embedded answer that names no option is
        then an :class:`LLMError`. Endpoints without log-probabilities are sampled ``samples`` times.
        ``prefix`` is text the answer starts with (e.g. ``"<rating>"``): the embedded model continues
        after it; remote endpoints are asked to begin with it. The result records ``method``,
        ``mass``, ``position`` and ``parsed`` (:meth:`Distribution.record`).
        """
        messages = clean_messages(messages)
        options = [str(o) for o in options]
        if len(set(options)) != len(options) or not options:
            raise ValueError("options must be distinct and non-empty")
        params = {"options": options, "prefix": prefix, "samples": samples, "min_mass": min_mass}
        key = cache_key(self.model, "score", messages, params)
        cached = self._cache_get(key)
        if cached is not None:
            dist = Distribution.from_cache(cached)
            self._log("score", Usage(), 0, cache_hit=True)
            return dist
        start = time.perf_counter()
        try:
            dist = self.model._score(messages, options, {"prefix": prefix, "samples": samples, "min_mass": min_mass})
        except LLMError as e:
            self._log("score", Usage(), _ms(start), error=str(e))
            raise
        self._cache_put(key, messages, params, dist.to_cache())
        self._log("score", Usage(), _ms(start))
        return dist

    def read_answer(
        self,
        messages: Sequence[dict],
        completion: Completion,
        options: Sequence[str] = DEFAULT_OPTIONS,
        *,
        tag: str | None = "rating",
        min_mass: float | None = MIN_MASS,
    ) -> Distribution | None:
        """The distribution over ``options`` at the token of the answer ``completion`` wrote.

        ``completion`` is this client's answer to ``messages`` (asked with ``logprobs=TOP_LOGPROBS``
        on remote endpoints). The answer is the last ``<tag>…</tag>`` (or, with ``tag=None``, the
        first stand-alone option). Remote: the returned alternatives of that token; embedded: the
        next-token logits after the prompt and the answer up to that token. Below ``min_mass`` on
        the options, or without log-probabilities, the written answer is used (``explicit``).

        :returns: None when the answer names no option (a parse failure: the caller's error)
        """
        options = [str(o) for o in options]
        found = find_answer(completion.text, options, tag=tag)
        if found is None:
            return None
        option, offset = found
        if self.model.reads_logits:
            before = completion.text.encode("utf-8")[:offset].decode("utf-8", "ignore")
            try:
                dist = self.score(messages, options, prefix=before, min_mass=None)
            except LLMError as e:
                return explicit(option, options, f"the model's probabilities could not be read: {e}")
            dist = check_mass(dist, option, options, min_mass)
        else:
            dist = read_logprobs(completion.logprobs, completion.text, option, offset, options, min_mass=min_mass)
        dist.model = self.model.name
        return dist

    def rate(
        self,
        messages: Sequence[dict],
        options: Sequence[str] = DEFAULT_OPTIONS,
        *,
        tag: str = "rating",
        min_mass: float | None = MIN_MASS,
        temperature: float = 0.0,
        max_tokens: int = 512,
        seed: int | None = 0,
        grammar: str | None = None,
    ) -> tuple[Completion, Distribution | None]:
        """One answer that ends with ``<tag>option</tag>`` (reasoning first, as CoRE §4.1 asks) and its
        distribution read at the answer token (:meth:`read_answer`); None when no tag holds an option."""
        completion = self.chat(
            messages, temperature=temperature, max_tokens=max_tokens, seed=seed, grammar=grammar, logprobs=TOP_LOGPROBS
        )
        return completion, self.read_answer(messages, completion, options, tag=tag, min_mass=min_mass)

    def health(self) -> tuple[bool, str]:
        return self.model.health()

    # -- cache and log -----------------------------------------------------

    def _cache_get(self, key: str) -> dict | None:
        if not self.use_cache:
            return None
        return cache_get(get_db(self.db_path), key)

    def _cache_put(self, key: str, messages, params, response: dict) -> None:
        if not self.use_cache:
            return
        cache_put(
            get_db(self.db_path),
            key,
            model=self.model.key,
            request={"messages": messages, "params": params},
            response=response,
        )

    def _log(self, kind: str, usage: Usage, duration_ms: int, *, cache_hit=False, error=None) -> None:
        with self._totals_lock:
            t = self.totals
            t.calls += 1
            t.cache_hits += int(cache_hit)
            t.errors += int(error is not None)
            if not cache_hit:
                t.prompt_tokens += usage.prompt_tokens
                t.completion_tokens += usage.completion_tokens
                t.cost_usd += usage.cost_usd
        if self.db_path is None:
            return
        try:
            log_call(
                get_db(self.db_path),
                role=self.role,
                model=self.model.name,
                backend=self.model.backend,
                kind=kind,
                duration_ms=duration_ms,
                prompt_tokens=usage.prompt_tokens,
                completion_tokens=usage.completion_tokens,
                cost_usd=usage.cost_usd,
                cache_hit=cache_hit,
                error=error,
            )
        except Exception:  # the log must never break a call
            log.exception("could not write the LLM call log")


def _params(**params) -> dict[str, Any]:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in params.items() if v is not None}


def _backend_params(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if k != "sample"}


def _ms(start: float) -> int:
    return int((time.perf_counter() - start) * 1000)
