"""One client interface over OpenAI-compatible endpoints and the embedded local model.

>>> from llm_clients import client_for
>>> judge = client_for("judge")
>>> judge.chat([{"role": "user", "content": "Hi"}]).text

Probabilities are always read at the answer token (:mod:`llm_clients.probability`):

* ``client.score(messages, options)`` — option scoring (a rating, a persuasiveness answer, an option
  letter): the answer is generated with top-20 log-probabilities and the alternatives of the token
  holding the option are read (the embedded model: its logits after the prompt and ``prefix``).
  Below ``min_mass`` (0.5) on the options there, the written answer is used (``method="explicit"``).
  Take ``dist.parsed`` as the answer when it is set, else the most probable option;
  ``dist.record()`` is what to store with it.
* ``client.rate(messages, options, tag="rating")`` — one answer that reasons and ends with
  ``<rating>n</rating>``, and its distribution at the rating token (None: no valid tag).
* ``client.read_answer(messages, completion, options)`` — the same reading for an answer in hand.
"""

from llm_clients.base import LLMClient, Model, UsageTotals
from llm_clients.config import ROLES, RoleConfig, all_role_configs, role_config
from llm_clients.registry import client_for, model_for
from llm_clients.types import Completion, Distribution, LLMError, Usage

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
