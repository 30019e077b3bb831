"""One client interface over OpenAI-compatible endpoints and the embedded local model.

>>> from llm import client_for
>>> judge = client_for("judge")
>>> judge.chat([{"role": "user", "content": "Hi"}]).text
"""

from llm.base import LLMClient, Model, UsageTotals
from llm.config import ROLES, RoleConfig, all_role_configs, role_config
from llm.registry import client_for, model_for
from llm.types import Completion, Distribution, LLMError, Usage

__all__ = [
    "Completion",
    "Distribution",
    "LLMClient",
    "LLMError",
    "Model",
    "ROLES",
    "RoleConfig",
    "Usage",
    "UsageTotals",
    "all_role_configs",
    "client_for",
    "model_for",
    "role_config",
]
