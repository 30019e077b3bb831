"""Which model serves which role, read from environment variables.

Every role (the CRS, the user simulator, the factor judge and each debate persona) reads the same chain
of variable prefixes, most specific first:

1. ``CRS_LLM_<ROLE>_`` (e.g. ``CRS_LLM_JUDGE_``);
2. for a debate persona, the shared ``CRS_LLM_DEBATE_``;
3. the global ``CRS_LLM_``.

The **model** is the first ``<prefix>MODEL`` set along the chain; with none, the embedded SmolLM2-135M
model (no network, no key). A model name of ``embedded`` selects it explicitly.

The **endpoint** (base URL and key, as one set) is the first prefix along the same chain that sets
``BASE_URL`` or ``API_KEY``: a role that names only its model keeps the endpoint configured above it, so
``CRS_LLM_BASE_URL=http://127.0.0.1:11434/v1`` with ``CRS_LLM_JUDGE_MODEL=qwen2.5`` sends the judge to that
server, not to OpenAI. A prefix that sets a key without a base URL means OpenAI's endpoint with that key.
With no endpoint anywhere, the endpoint is OpenAI's and the key comes from ``OPENAI_API_KEY``, which is
only ever sent to OpenAI's own endpoint.
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
            "endpoint": "in-process (llama.cpp)" if self.is_embedded else (self.base_url or OPENAI_ENDPOINT),
            "api_key": "set" if self.api_key else "not set",
            "configured_by": self.source,
        }


def _prefixes(role: str) -> list[str]:
    prefixes = [f"CRS_LLM_{role.upper()}_"]
    if role.startswith("debate_"):
        prefixes.append("CRS_LLM_DEBATE_")
    prefixes.append("CRS_LLM_")
    return prefixes


OPENAI_ENDPOINT = "https://api.openai.com/v1"


def role_config(role: str, env: Mapping[str, str] | None = None) -> RoleConfig:
    """Resolve the configuration of one role (see the module docstring for the precedence)."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; roles are {', '.join(ROLES)}")
    env = os.environ if env is None else env
    timeout = float(env.get("CRS_LLM_TIMEOUT", "60"))
    max_retries = int(env.get("CRS_LLM_MAX_RETRIES", "3"))
    gguf = env.get("CRS_LLM_GGUF") or None
    prefixes = _prefixes(role)
    chosen = next((p for p in prefixes if (env.get(p + "MODEL") or "").strip()), None)
    if chosen is None:
        return RoleConfig(role, EMBEDDED, source="default", gguf_path=gguf)
    model = (env.get(chosen + "MODEL") or "").strip()
    if model == EMBEDDED:
        return RoleConfig(role, EMBEDDED, source=chosen + "MODEL", gguf_path=gguf)
    base_url, api_key = _endpoint(prefixes, env)
    return RoleConfig(
        role,
        model,
        base_url=base_url,
        api_key=api_key,
        source=chosen + "MODEL",
        timeout=timeout,
        max_retries=max_retries,
        price=_price(next((env[p + "PRICE"] for p in prefixes if env.get(p + "PRICE")), None)),
    )


def _endpoint(prefixes: list[str], env: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(base URL, key) of the first prefix that sets either; OpenAI's with ``OPENAI_API_KEY`` otherwise."""
    for prefix in prefixes:
        base_url = (env.get(prefix + "BASE_URL") or "").strip() or None
        api_key = env.get(prefix + "API_KEY") or None
        if base_url or api_key:
            if api_key is None and is_openai(base_url):
                api_key = env.get("OPENAI_API_KEY") or None
            return base_url, api_key
    return None, env.get("OPENAI_API_KEY") or None


def is_openai(base_url: str | None) -> bool:
    """Whether ``base_url`` is OpenAI's own API (None means it is)."""
    return base_url is None or base_url.rstrip("/").startswith("https://api.openai.com")


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
