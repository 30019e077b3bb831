"""Which model serves which role, read from environment variables.

Every role (the CRS, the user simulator, the factor judge and each debate
persona) resolves its model the same way, first match wins:

1. ``CRS_LLM_<ROLE>_MODEL`` / ``_BASE_URL`` / ``_API_KEY`` (e.g. ``CRS_LLM_JUDGE_MODEL``);
2. for a debate persona, the shared ``CRS_LLM_DEBATE_*`` variables;
3. the global ``CRS_LLM_MODEL`` / ``CRS_LLM_BASE_URL`` / ``CRS_LLM_API_KEY``;
4. the embedded SmolLM2-135M model (no network, no key).

A model name of ``embedded`` selects the embedded model explicitly. With no
base URL the endpoint is OpenAI's and the key may come from ``OPENAI_API_KEY``;
an endpoint with its own base URL never receives ``OPENAI_API_KEY``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

ROLES = (
    "crs",
    "simulator",
    "judge",
    "debate_user",
    "debate_expert",
    "debate_linguist",
    "debate_hci",
)
EMBEDDED = "embedded"


@dataclass(frozen=True)
class RoleConfig:
    """Where one role's calls go. ``api_key`` is never shown: see :meth:`public`."""

    role: str
    model: str
    base_url: str | None = None
    api_key: str | None = None
    source: str = "default"  # the variable prefix the model came from
    timeout: float = 60.0
    max_retries: int = 3
    price: tuple[float, float] | None = None
    gguf_path: str | None = None

    @property
    def is_embedded(self) -> bool:
        return self.model == EMBEDDED

    def public(self) -> dict:
        """What may be displayed: everything but the key (only whether one is set)."""
        return {
            "role": self.role,
            "model": self.model,
            "endpoint": "in-process (llama.cpp)"
            if self.is_embedded
            else (self.base_url or "https://api.openai.com/v1"),
            "api_key": "set" if self.api_key else "not set",
            "configured_by": self.source,
        }


def _prefixes(role: str) -> list[str]:
    prefixes = [f"CRS_LLM_{role.upper()}_"]
    if role.startswith("debate_"):
        prefixes.append("CRS_LLM_DEBATE_")
    prefixes.append("CRS_LLM_")
    return prefixes


def role_config(role: str, env: Mapping[str, str] | None = None) -> RoleConfig:
    """Resolve the configuration of one role."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; roles are {', '.join(ROLES)}")
    env = os.environ if env is None else env
    timeout = float(env.get("CRS_LLM_TIMEOUT", "60"))
    max_retries = int(env.get("CRS_LLM_MAX_RETRIES", "3"))
    gguf = env.get("CRS_LLM_GGUF") or None
    for prefix in _prefixes(role):
        model = (env.get(prefix + "MODEL") or "").strip()
        if not model:
            continue
        if model == EMBEDDED:
            return RoleConfig(role, EMBEDDED, source=prefix + "MODEL", gguf_path=gguf)
        base_url = (env.get(prefix + "BASE_URL") or "").strip() or None
        api_key = env.get(prefix + "API_KEY") or None
        if api_key is None and base_url is None:
            api_key = env.get("OPENAI_API_KEY") or None
        return RoleConfig(
            role,
            model,
            base_url=base_url,
            api_key=api_key,
            source=prefix + "MODEL",
            timeout=timeout,
            max_retries=max_retries,
            price=_price(env.get(prefix + "PRICE")),
        )
    return RoleConfig(role, EMBEDDED, source="default", gguf_path=gguf)


def all_role_configs(env: Mapping[str, str] | None = None) -> list[RoleConfig]:
    return [role_config(r, env) for r in ROLES]


def _price(text: str | None) -> tuple[float, float] | None:
    """``"0.15,0.60"`` → USD per million (input, output) tokens."""
    if not text:
        return None
    try:
        inp, out = (float(x) for x in text.split(","))
    except ValueError:
        raise ValueError(
            f"a price must look like '0.15,0.60' (USD per million input,output tokens), got {text!r}"
        ) from None
    return inp, out
