"""Building an evaluation setup from plain options, the roles' models coming from the environment.

Used by the command line and the app, so both judge the same way.
"""

from __future__ import annotations

from dataclasses import replace

from catalog.catalog import get_catalog
from evaluators.debate import DebateConfig
from evaluators.factor_judge import JudgeConfig
from evaluators.factors import PERSONA_FACTORS
from evaluators.pipeline import EvaluationSetup
from llm.base import LLMClient
from llm.config import EMBEDDED, role_config
from llm.registry import model_for


def role_client(role: str, model: str | None, db_path) -> LLMClient:
    """The client for ``role``; ``model`` overrides the configured model name on the same endpoint."""
    config = role_config(role)
    if model:
        config = replace(config, model=model) if model != EMBEDDED else replace(
            config, model=EMBEDDED, base_url=None, api_key=None)
    return LLMClient(model_for(config), role=role, db_path=db_path)


def build_setup(
    *,
    db_path,
    judge_models: tuple[str, ...] = (),
    mode: str = "probability",
    debate: bool = True,
    debate_model: str | None = None,
    rounds: int = 4,
    tolerance: float = 0.0,
    sequential: bool = False,
    persuasiveness: bool = False,
    catalog_name: str = "bundled",
    concurrency: int = 6,
    domain: str = "movies",
) -> EvaluationSetup:
    """An evaluation setup from command-line style options (roles from the environment)."""
    judges = [role_client("judge", m, db_path) for m in judge_models] or [role_client("judge", None, db_path)]
    debate_config = None
    if debate:
        debate_config = DebateConfig(
            clients={role: role_client(role, debate_model, db_path) for role in PERSONA_FACTORS},
            max_rounds=rounds, tolerance=tolerance, sequential=sequential, domain=domain,
        )
    return EvaluationSetup(
        judge=JudgeConfig(clients=judges, mode=mode, max_concurrency=concurrency),
        debate=debate_config,
        persuasiveness=role_client("simulator", None, db_path) if persuasiveness else None,
        catalog=get_catalog(catalog_name),
    )
