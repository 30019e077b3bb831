"""Build the model and client for a role from its configuration."""

from __future__ import annotations

import os
import threading

from llm_clients.base import LLMClient, Model
from llm_clients.config import RoleConfig, role_config

_remote: dict[tuple, Model] = {}
_remote_lock = threading.Lock()


def model_for(config: RoleConfig) -> Model:
    """The model of a role's configuration. A remote model is built once per distinct setting and shared (its
    HTTP client is thread-safe): building one loads a TLS trust store, ~30 ms, which every judge setup paid
    five times over (the judge and four personas) on every evaluation."""
    if config.is_embedded:
        from llm_clients.embedded import get_embedded_model

        return get_embedded_model(config.gguf_path)
    from llm_clients.remote import OpenAICompatibleModel

    key = (config.model, config.base_url, config.api_key, config.timeout, config.max_retries, config.price)
    with _remote_lock:
        if key not in _remote:
            _remote[key] = OpenAICompatibleModel(
                config.model,
                base_url=config.base_url,
                api_key=config.api_key,
                timeout=config.timeout,
                max_retries=config.max_retries,
                price=config.price,
            )
        return _remote[key]


def client_for(role: str, *, db_path: str | os.PathLike | None = None, use_cache: bool = True) -> LLMClient:
    """The client for ``role`` (crs, simulator, judge, debate_*) as configured by the environment."""
    return LLMClient(model_for(role_config(role)), role=role, db_path=db_path, use_cache=use_cache)
