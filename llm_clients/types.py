"""Values the LLM layer hands back: completions, usage, score distributions, errors."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Message = dict[str, str]  # {"role": "system"|"user"|"assistant", "content": str}


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class Completion:
    """The answer to one chat call."""

    text: str
    model: str
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"
    cache_hit: bool = False
    duration_ms: int = 0
    # Per generated token, when asked for (``chat(logprobs=k)``) and the endpoint gave them:
    # {"token": str, "bytes": int (UTF-8 length), "logprob": float, "top": [[token, logprob], ...]}.
    # None: not asked for, or the endpoint returned none.
    logprobs: list[dict[str, Any]] | None = None

    def to_cache(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "text": self.text,
            "model": self.model,
            "finish_reason": self.finish_reason,
            "usage": {"prompt_tokens": self.usage.prompt_tokens, "completion_tokens": self.usage.completion_tokens},
        }
        if self.logprobs is not None:
            data["logprobs"] = _compact(self.logprobs)
        return data

    @classmethod
    def from_cache(cls, data: dict[str, Any]) -> Completion:
        usage = data.get("usage") or {}
        return cls(
            text=data["text"],
            model=data["model"],
            usage=Usage(usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)),
            finish_reason=data.get("finish_reason", "stop"),
            cache_hit=True,
            logprobs=data.get("logprobs"),
        )


CACHED_TAIL = 16  # positions at the end of an answer whose alternatives the cache keeps in full


def _compact(logprobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Log-probabilities as cached: every token with its length and log-probability (for offsets), but
    top alternatives only where an answer can be read (:mod:`llm_clients.probability`): tokens holding a digit,
    and the last :data:`CACHED_TAIL` positions (a rating tag ends the answer; short answers are kept
    whole). A 600-token reasoned answer with 20 alternatives per token would otherwise cost ~0.5 MB."""
    n = len(logprobs)
    return [
        entry if i >= n - CACHED_TAIL or any(c.isdigit() for c in entry["token"]) else {**entry, "top": []}
        for i, entry in enumerate(logprobs)
    ]


@dataclass
class Distribution:
    """A probability distribution over a fixed set of option strings.

    ``method`` says how it was obtained: ``logprobs`` (the endpoint's top
    log-probabilities at the answer token), ``logits`` (the embedded model's
    next-token logits at the answer position), ``sampling`` (repeated sampling;
    ``samples`` answers were drawn, ``invalid`` of them matched no option) or
    ``explicit`` (the written answer alone, all probability on it: used when the
    probabilities at the answer token could not be trusted; ``fallback`` says why).

    ``mass`` is the probability the model put on the options at the answer token
    before renormalisation (1.0 for sampling); ``position`` is that token's index
    in the generated answer (None where no answer was generated, e.g. logits read
    after a prefix); ``parsed`` is the option the answer wrote, when one was read.
    See :mod:`llm_clients.probability`.
    """

    probs: dict[str, float]
    method: str
    mass: float = 1.0
    samples: int = 0
    invalid: int = 0
    model: str = ""
    cache_hit: bool = False
    parsed: str | None = None
    position: int | None = None
    fallback: str | None = None

    def expected(self, values: dict[str, float] | None = None) -> float:
        """Expected value; option strings are read as numbers unless ``values`` maps them."""
        return sum(p * (values[o] if values else float(o)) for o, p in self.probs.items())

    def to_cache(self) -> dict[str, Any]:
        return {
            "probs": self.probs,
            "method": self.method,
            "mass": self.mass,
            "samples": self.samples,
            "invalid": self.invalid,
            "model": self.model,
            "parsed": self.parsed,
            "position": self.position,
            "fallback": self.fallback,
        }

    def record(self) -> dict[str, Any]:
        """What a score stores about how it was read: method, answer position, option mass, parsed answer."""
        out: dict[str, Any] = {
            "method": self.method,
            "mass": round(self.mass, 6),
            "position": self.position,
            "parsed": self.parsed,
        }
        if self.fallback:
            out["fallback"] = self.fallback
        if self.method == "sampling":
            out.update(samples=self.samples, invalid=self.invalid)
        return out

    @classmethod
    def from_cache(cls, data: dict[str, Any]) -> Distribution:
        return cls(**data, cache_hit=True)


class LLMError(Exception):
    """A model call failed after retries. ``str()`` is a message fit for a user."""

    def __init__(self, message: str, *, kind: str = "error", model: str = ""):
        super().__init__(message)
        self.kind = kind  # timeout | rate_limit | server | connection | bad_response | config
        self.model = model
