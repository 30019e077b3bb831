"""Building an evaluation setup from plain options, the roles' models coming from the environment.

Used by the command line and the app, so both judge the same way. Scorers: ``proxy`` (LLM-free
proxies with a calibrated overall score), ``llm`` (the CoRE factor judge and debate, named
``llm:<model>`` or ``ensemble(…)``), and ``auto``: the LLM judge when a capable model is configured,
the proxy when the judge role would run the embedded 135M demo model.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from catalog.catalog import get_catalog
from evaluators.debate import DebateConfig
from evaluators.factor_judge import DEFAULT_MODE, JudgeConfig
from evaluators.factors import PERSONA_FACTORS
from evaluators.pipeline import EvaluationSetup
from llm_clients.base import LLMClient
from llm_clients.config import EMBEDDED, role_config
from llm_clients.embedded import SMOLLM2_FILE
from llm_clients.registry import model_for

SCORERS = ("auto", "proxy", "llm")


def role_client(role: str, model: str | None, db_path) -> LLMClient:
    """The client for ``role``; ``model`` overrides the configured model name on the same endpoint."""
    config = role_config(role)
    if model:
        config = (
            replace(config, model=model)
            if model != EMBEDDED
            else replace(config, model=EMBEDDED, base_url=None, api_key=None)
        )
    return LLMClient(model_for(config), role=role, db_path=db_path)


def judge_is_demo(judge_models: tuple[str, ...] = ()) -> bool:
    """Would the LLM judge run the embedded 135M demo model (nothing capable configured)?"""
    config = role_config("judge")
    embedded = all(m == EMBEDDED for m in judge_models) if judge_models else config.is_embedded
    return embedded and (config.gguf_path is None or Path(config.gguf_path).name == SMOLLM2_FILE)


def default_mode(judge_models: tuple[str, ...] = ()) -> str:
    """The judge mode the tabs preselect: CoRE's reasoned+probability, except for the embedded 135M demo
    judge, which gets the fast rating-only ``probability`` (its scores are not meaningful either way, and
    twelve reasoned answers cost it minutes on two cores)."""
    return "probability" if judge_is_demo(judge_models) else DEFAULT_MODE


def default_scorer(judge_models: tuple[str, ...] = ()) -> str:
    """``proxy`` when the judge would be the embedded demo model, else ``llm``."""
    return "proxy" if judge_is_demo(judge_models) else "llm"


def build_setup(
    *,
    db_path,
    scorer: str = "llm",
    judge_models: tuple[str, ...] = (),
    mode: str = DEFAULT_MODE,
    debate: bool = True,
    debate_model: str | None = None,
    rounds: int = 4,
    tolerance: float = 0.0,
    sequential: bool = False,
    persuasiveness: bool = False,
    catalog_name: str = "bundled",
    concurrency: int = 6,
    domain: str = "movies",
    proxy_calibration=None,
    embeddings: bool = False,
) -> EvaluationSetup:
    """An evaluation setup from command-line style options (roles from the environment).

    :param scorer: ``llm``, ``proxy`` or ``auto`` (:func:`default_scorer`); the proxy ignores the
        judge, debate and persuasiveness options
    :param proxy_calibration: the proxy's calibration file (default: the one shipped for its version)
    :param embeddings: the proxy uses MiniLM sentence similarity (lexical when it cannot load)
    """
    if scorer not in SCORERS:
        raise ValueError(f"unknown scorer {scorer!r}; use one of {', '.join(SCORERS)}")
    if scorer == "auto":
        scorer = default_scorer(judge_models)
    if scorer == "proxy":
        from evaluators.calibration import load_proxy_judge

        return EvaluationSetup(
            proxy=load_proxy_judge(proxy_calibration, embeddings=embeddings), catalog=get_catalog(catalog_name)
        )
    judges = [role_client("judge", m, db_path) for m in judge_models] or [role_client("judge", None, db_path)]
    debate_config = None
    if debate:
        debate_config = DebateConfig(
            clients={role: role_client(role, debate_model, db_path) for role in PERSONA_FACTORS},
            max_rounds=rounds,
            tolerance=tolerance,
            sequential=sequential,
            domain=domain,
        )
    return EvaluationSetup(
        judge=JudgeConfig(clients=judges, mode=mode, max_concurrency=concurrency),
        debate=debate_config,
        persuasiveness=role_client("simulator", None, db_path) if persuasiveness else None,
        catalog=get_catalog(catalog_name),
    )
