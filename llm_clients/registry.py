"""Build the model and client for a role from its configuration."""

from __future__ import annotations

import os

from llm_clients.base import LLMClient, Model
from llm_clients.config import RoleConfig, role_config


def model_for(config: RoleConfig) -> Model:
    if config.is_embedded:
        from llm_clients.embedded import get_embedded_model

        return get_embedded_model(config.gguf_path)
    from llm_clients.remote import OpenAICompatibleModel

    return OpenAICompatibleModel(
        config.model,
        base_url=config.base_url,
        api_key=config.api_key,
        timeout=config.timeout,
        max_retries=config.max_retries,
        price=config.price,
    )


def client_for(role: str, *, db_path: str | os.PathLike | None = None, use_cache: bool = True) -> LLMClient:
    """The client for ``role`` (crs, simulator, judge, debate_*) as configured by the environment."""
    return LLMClient(model_for(role_config(role)), role=role, db_path=db_path, use_cache=use_cache)
