"""Building an evaluation setup from plain options, the roles' models coming from the environment.

Used by the command line and the app, so both judge the same way. Scorers are looked up by name in
:data:`SCORER_KINDS`: ``proxy`` (LLM-free proxies with a calibrated overall score), ``llm`` (the CoRE
factor judge and debate, named ``llm:<model>`` or ``ensemble(…)``); ``auto`` is the LLM judge when a
capable model is configured, the proxy when the judge role would run the embedded 135M demo model.
Each kind also says how to rebuild the options of an evaluation it stored
(:func:`stored_options`), which is how :mod:`evaluators.resume` finds a setup again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from catalog.catalog import get_catalog
from evaluators.factors import PERSONA_FACTORS
from evaluators.judge.debate import DebateConfig
from evaluators.judge.factor_judge import DEFAULT_MODE, JudgeConfig
from evaluators.judge.llm_scorer import llm_judge
from evaluators.pipeline import EvaluationSetup
from evaluators.scorers import Scorer
from llm_clients.base import LLMClient
from llm_clients.config import EMBEDDED, role_config
from llm_clients.embedded import SMOLLM2_FILE
from llm_clients.registry import model_for


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
    """The judge mode the tabs preselect: reasoned+probability (CoRE's reasons, G-Eval's reading of the rating),
    except for the embedded 135M demo judge, which gets the fast rating-only ``probability`` (its scores are
    not meaningful either way, and twelve reasoned answers cost it minutes on two cores)."""
    return "probability" if judge_is_demo(judge_models) else DEFAULT_MODE


def default_scorer(judge_models: tuple[str, ...] = ()) -> str:
    """``proxy`` when the judge would be the embedded demo model, else ``llm``."""
    return "proxy" if judge_is_demo(judge_models) else "llm"


@dataclass(frozen=True)
class ScorerKind:
    """A scorer that can be chosen by name.

    :param build: the scorer from command-line style options (it ignores the ones it has no use for)
    :param stores: whether a stored scorer name (``proxy``, ``llm:<model>``) is one of this kind's
    :param stored_options: the option sets that could have built a stored evaluation's configuration,
        most likely first
    """

    build: Callable[..., Scorer]
    stores: Callable[[str], bool]
    stored_options: Callable[[dict[str, Any]], list[dict[str, Any]]]


def _proxy(*, proxy_calibration=None, embeddings: bool = False, **_: Any) -> Scorer:
    from evaluators.proxy.scorer import load_proxy_judge

    return load_proxy_judge(proxy_calibration, embeddings=embeddings)


def _llm(
    *,
    db_path,
    judge_models: tuple[str, ...] = (),
    mode: str = DEFAULT_MODE,
    debate: bool = True,
    debate_model: str | None = None,
    rounds: int = 4,
    tolerance: float = 0.0,
    sequential: bool = False,
    debate_reading: str = "own",
    rubric: str = "core",
    persuasiveness: bool = False,
    concurrency: int = 6,
    domain: str = "movies",
    **_: Any,
) -> Scorer:
    judges = [role_client("judge", m, db_path) for m in judge_models] or [role_client("judge", None, db_path)]
    debate_config = None
    if debate:
        debate_config = DebateConfig(
            clients={role: role_client(role, debate_model, db_path) for role in PERSONA_FACTORS},
            max_rounds=rounds,
            tolerance=tolerance,
            sequential=sequential,
            domain=domain,
            reading=debate_reading,
        )
    return llm_judge(
        JudgeConfig(clients=judges, mode=mode, max_concurrency=concurrency, rubric_version=rubric),
        debate_config,
        role_client("simulator", None, db_path) if persuasiveness else None,
    )


def _proxy_options(config: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"embeddings": config.get("similarity") == "minilm"}]


def _llm_options(config: dict[str, Any]) -> list[dict[str, Any]]:
    debate = config.get("debate")
    common = dict(
        mode=config.get("mode", "probability"),
        debate=debate is not None,
        rounds=(debate or {}).get("max_rounds", 4),
        tolerance=(debate or {}).get("tolerance", 0.0),
        sequential=(debate or {}).get("sequential", False),
        debate_reading=(debate or {}).get("reading", "all"),  # evaluations stored before the setting read all
        rubric=config.get("rubric") or "core",  # the stored version: resume judges with the same rubric
        persuasiveness=config.get("persuasiveness") is not None,
    )
    names = tuple(key.split(":", 1)[-1] for key in config.get("judges") or [])
    return [dict(common), dict(common, judge_models=names)]


SCORER_KINDS: dict[str, ScorerKind] = {
    "proxy": ScorerKind(_proxy, lambda name: name == "proxy", _proxy_options),
    "llm": ScorerKind(_llm, lambda name: name.startswith(("llm:", "ensemble(")), _llm_options),
}
SCORERS = ("auto", *SCORER_KINDS)
OPTIONS = frozenset(
    {
        "judge_models",
        "mode",
        "debate",
        "debate_model",
        "rounds",
        "tolerance",
        "sequential",
        "debate_reading",
        "rubric",
        "persuasiveness",
        "concurrency",
        "domain",
        "proxy_calibration",
        "embeddings",
    }
)


def build_setup(*, db_path, scorer: str = "llm", catalog_name: str = "bundled", **options: Any) -> EvaluationSetup:
    """An evaluation setup from command-line style options (roles from the environment).

    :param scorer: a name in :data:`SCORER_KINDS`, or ``auto`` (:func:`default_scorer`); a scorer
        ignores the options it has no use for (the proxy: the judge, debate and persuasiveness ones)
    :param options: ``judge_models``, ``mode``, ``debate``, ``debate_model``, ``rounds``,
        ``tolerance``, ``sequential``, ``debate_reading`` (``own``: CoRE §4.2; ``own+scores``; ``all``),
        ``rubric`` (a name of ``RUBRIC_NAMES``, ``core`` by default, or a stored version such as ``core-v2``),
        ``persuasiveness``, ``concurrency``, ``domain`` (LLM judge);
        ``proxy_calibration`` (the proxy's calibration file; default: the one shipped for its
        version), ``embeddings`` (the proxy uses MiniLM sentence similarity, lexical when it cannot load)
    :raises ValueError: an unknown scorer name
    """
    unknown = set(options) - OPTIONS
    if unknown:
        raise TypeError(f"build_setup got unknown option(s): {', '.join(sorted(unknown))}")
    if scorer == "auto":
        scorer = default_scorer(tuple(options.get("judge_models") or ()))
    kind = SCORER_KINDS.get(scorer)
    if kind is None:
        raise ValueError(f"unknown scorer {scorer!r}; use one of {', '.join(SCORERS)}")
    return EvaluationSetup(kind.build(db_path=db_path, **options), catalog=get_catalog(catalog_name))


def stored_options(scorer_name: str, config: dict[str, Any]) -> list[dict[str, Any]]:
    """The :func:`build_setup` options that could give a stored evaluation's setup again, most likely
    first (empty for a scorer name no kind stores)."""
    catalog = config.get("catalog") or "bundled"
    for name, kind in SCORER_KINDS.items():
        if kind.stores(scorer_name):
            return [dict(options, scorer=name, catalog_name=catalog) for options in kind.stored_options(config)]
    return []


def auto_reason(judge_models: tuple[str, ...] = ()) -> str:
    """Why ``auto`` picks the scorer it picks."""
    return "no capable LLM configured" if judge_is_demo(judge_models) else "a capable LLM judge is configured"
