"""Checks made once when the app starts, so configuration mistakes fail loudly instead of silently.

* ``CRS_ARENA_DB`` whose folder does not exist is refused (:func:`storage.db.default_db_path`);
  the default path's folder is still created.
* An endpoint given without a model (``CRS_LLM_BASE_URL`` without ``CRS_LLM_MODEL``, and the same
  for every role prefix) would otherwise be ignored, every role silently running the 135M demo
  model. The endpoint's ``/models`` list is asked instead: its first model is used, and the app says
  so; an endpoint that lists none, or cannot be reached, stops the start with a message naming the
  variable to set.
"""

from __future__ import annotations

import logging
import os
from collections.abc import MutableMapping

import httpx

from llm_clients.config import ROLES

log = logging.getLogger(__name__)


class ConfigError(RuntimeError):
    """A setting the app cannot start with; the message names the variable and the fix."""


def prefixes() -> list[str]:
    return ["CRS_LLM_", "CRS_LLM_DEBATE_", *(f"CRS_LLM_{role.upper()}_" for role in ROLES)]


def list_models(base_url: str, api_key: str | None, *, timeout: float = 10.0) -> list[str]:
    """The model ids ``GET <base_url>/models`` lists (OpenAI-compatible endpoints all serve it)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    response = httpx.get(base_url.rstrip("/") + "/models", headers=headers, timeout=timeout)
    response.raise_for_status()
    data = response.json().get("data") or []
    return [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str) and m["id"]]


def resolve_endpoint_models(env: MutableMapping[str, str] | None = None) -> list[str]:
    """Give every ``<prefix>BASE_URL`` without ``<prefix>MODEL`` the first model its endpoint lists
    (written into ``env``, so every role resolves it). Returns notices for people (no keys in them).

    :raises ConfigError: an endpoint without a model lists none or cannot be reached
    """
    env = os.environ if env is None else env
    notices = []
    for prefix in prefixes():
        base_url = (env.get(prefix + "BASE_URL") or "").strip()
        if not base_url or (env.get(prefix + "MODEL") or "").strip():
            continue
        try:
            models = list_models(base_url, env.get(prefix + "API_KEY") or None)
        except (httpx.HTTPError, ValueError) as e:
            raise ConfigError(
                f"{prefix}BASE_URL is set ({base_url}) but {prefix}MODEL is not, and the endpoint's model list "
                f"could not be read ({type(e).__name__}). Set {prefix}MODEL to the model to use "
                f"(or unset {prefix}BASE_URL)."
            ) from None
        if not models:
            raise ConfigError(
                f"{prefix}BASE_URL is set ({base_url}) but {prefix}MODEL is not, and the endpoint lists "
                f"no model. Set {prefix}MODEL to the model to use."
            )
        env[prefix + "MODEL"] = models[0]
        more = f" (it lists {len(models)}; set {prefix}MODEL to choose another)" if len(models) > 1 else ""
        notices.append(f"{prefix}MODEL was not set: using {models[0]}, the model {base_url} lists{more}.")
    return notices
