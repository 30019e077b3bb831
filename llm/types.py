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

    def to_cache(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "model": self.model,
            "finish_reason": self.finish_reason,
            "usage": {"prompt_tokens": self.usage.prompt_tokens, "completion_tokens": self.usage.completion_tokens},
        }

    @classmethod
    def from_cache(cls, data: dict[str, Any]) -> "Completion":
        usage = data.get("usage") or {}
        return cls(
            text=data["text"],
            model=data["model"],
            usage=Usage(usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)),
            finish_reason=data.get("finish_reason", "stop"),
            cache_hit=True,
        )


@dataclass
class Distribution:
    """A probability distribution over a fixed set of option strings.

    ``method`` says how it was obtained: ``logprobs`` (token log-probabilities),
    ``logits`` (the embedded model's next-token logits) or ``sampling``
    (repeated sampling; ``samples`` answers were drawn, ``invalid`` of them
    matched no option). ``mass`` is the probability the model put on the
    options before renormalisation (1.0 for sampling).
    """

    probs: dict[str, float]
    method: str
    mass: float = 1.0
    samples: int = 0
    invalid: int = 0
    model: str = ""
    cache_hit: bool = False

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
        }

    @classmethod
    def from_cache(cls, data: dict[str, Any]) -> "Distribution":
        return cls(**data, cache_hit=True)


class LLMError(Exception):
    """A model call failed after retries. ``str()`` is a message fit for a user."""

    def __init__(self, message: str, *, kind: str = "error", model: str = ""):
        super().__init__(message)
        self.kind = kind  # timeout | rate_limit | server | connection | bad_response | config
        self.model = model
