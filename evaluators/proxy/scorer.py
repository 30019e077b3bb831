"""The ``proxy`` scorer at run time: the twelve factor proxies and the saved calibrated overall score.

:class:`ProxyJudge` scores a conversation with :func:`evaluators.proxy.proxy_scores` (no LLM) and
predicts its overall score with the ridge model saved in ``assets/calibration/proxy_<version>.json``
(:func:`load_calibration`). Reading that file and predicting need NumPy only; fitting it (scikit-learn,
the training data, cross-validation) is :mod:`evaluators.proxy.calibration`'s job, run offline with
``python -m evaluators calibrate``.

Prediction: clip(intercept + ((impute(x) - mean) / scale) . coef, 0, 4), where x is
:func:`feature_vector` (the factor proxies and the reaction and text features, NaN where not
measurable) followed by the four aggregates of the conversation's turn scores (:mod:`evaluators.proxy.turn_scores`,
whose fitted turn scorer the same file holds); the 0-4 value is reported as well on 0-100 (x 25). A calibration
fitted for another proxy version, similarity, feature list or turn-feature list is refused.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from catalog.catalog import Catalog
from evaluators.factors import FACTORS
from evaluators.judge.rubric import load_rubric
from evaluators.proxy.factor_proxies import PROXY_RUBRIC
from evaluators.proxy.features import FEATURES as REACTION_FEATURES
from evaluators.proxy.features import PROXY_VERSION, ProxyResult, proxy_scores
from evaluators.proxy.similarity import LEXICAL, MINILM, Embedder, load_embedder
from evaluators.proxy.turn_evidence import TurnEvidence
from evaluators.proxy.turn_scores import AGGREGATES as TURN_AGGREGATES
from evaluators.proxy.turn_scores import TurnModel, TurnScore, aggregate, linear, score_turns
from evaluators.scorers import Outcome, Recorder
from storage.records import Conversation, Evaluation, FactorScore

log = logging.getLogger(__name__)
CALIBRATION_DIR = Path(__file__).resolve().parents[2] / "assets" / "calibration"
FEATURES: tuple[str, ...] = (*FACTORS, *REACTION_FEATURES)  # what the proxies give each conversation
MODEL_FEATURES: tuple[str, ...] = (*FEATURES, *TURN_AGGREGATES)  # what the overall reads: those and the turn scores'


class CalibrationMismatch(ValueError):
    """A calibration file that was fitted for other proxies than the ones running."""


def default_path(version: str = PROXY_VERSION, similarity: str = LEXICAL) -> Path:
    """``assets/calibration/proxy_v1.json`` for proxy version ``proxy-v1`` (``proxy_v1_minilm.json`` with
    MiniLM similarity)."""
    suffix = "" if similarity == LEXICAL else f"_{similarity}"
    return CALIBRATION_DIR / f"{version.replace('-', '_')}{suffix}.json"


def feature_vector(result: ProxyResult) -> list[float]:
    """The model inputs of one conversation in :data:`FEATURES` order; NaN where not measurable."""
    values: dict[str, float | None] = {**{f: result.factors[f].score for f in FACTORS}, **result.features}
    return [math.nan if (v := values[f]) is None else float(v) for f in FEATURES]


@dataclass
class Model:
    """Fitted parameters: predict = clip(intercept + ((impute(x) - mean) / scale) . coef, 0, 4)."""

    impute: list[float]
    mean: list[float]
    scale: list[float]
    coef: list[float]
    intercept: float
    alpha: float

    def predict(self, X: Any) -> np.ndarray:
        X = np.atleast_2d(np.asarray(X, dtype=float))
        return linear(
            np.where(np.isnan(X), np.asarray(self.impute), X), self.mean, self.scale, self.coef, self.intercept, 4.0
        )


@dataclass
class Calibration:
    """A fitted calibration as saved: what it was fitted for, its parameters and its validation."""

    proxy_version: str
    similarity: str
    features: list[str]
    model: Model
    seed: int
    settings: dict[str, Any]
    training: dict[str, Any]
    cv: dict[str, Any]
    fitted_with: dict[str, str]
    turn_model: dict[str, Any]  # evaluators.proxy.turn_scores.TurnModel, as saved

    @property
    def turns(self) -> TurnModel:
        """The turn scorer fitted with this calibration."""
        cached = self.__dict__.get("_turns")
        if cached is None or cached[0] is not self.turn_model:
            cached = (self.turn_model, TurnModel.from_dict(self.turn_model))
            self.__dict__["_turns"] = cached
        return cached[1]

    def score_turns(self, result: ProxyResult) -> list[TurnScore]:
        """Each system turn's relevance and interestingness (0-2), as :mod:`evaluators.proxy.turn_scores` gives them."""
        self._check(result)
        return list(result.turn_scores) if result.turn_scores else score_turns(self.turns, result.turns)

    def score_evidence(self, evidence: tuple[TurnEvidence, ...]) -> list[TurnScore]:
        """The turn scorer on one conversation's evidence (what :func:`evaluators.proxy.proxy_scores` calls)."""
        return score_turns(self.turns, evidence)

    def predict(self, result: ProxyResult, turns: list[TurnScore] | None = None) -> float:
        """The calibrated overall score (0-4) of one conversation's proxies (and its turn scores, computed when
        not given)."""
        self._check(result)
        scores = self.score_turns(result) if turns is None else turns
        return float(self.model.predict([feature_vector(result) + aggregate(scores)])[0])

    def _check(self, result: ProxyResult) -> None:
        if result.version != self.proxy_version or result.similarity != self.similarity:
            raise CalibrationMismatch(
                f"this calibration was fitted on {self.proxy_version} proxies with {self.similarity} similarity; "
                f"got {result.version} with {result.similarity}"
            )

    @property
    def fingerprint(self) -> str:
        """A short hash of the fitted parameters (stored with every evaluation that uses them); computed once per
        parameter set (a conversation's scoring asked for it three times, 1 ms each)."""
        key = id(self.model), self.model.alpha, id(self.turn_model)
        cached = self.__dict__.get("_fingerprint")
        if cached is None or cached[0] != key:
            fitted = {"model": asdict(self.model), "turns": self.turn_model}
            digest = hashlib.sha256(json.dumps(fitted, sort_keys=True).encode()).hexdigest()[:12]
            cached = (key, digest)
            self.__dict__["_fingerprint"] = cached
        return cached[1]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def save(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=1) + "\n", encoding="utf-8")
        return path


def load_calibration(path: str | os.PathLike | None = None, *, similarity: str = LEXICAL) -> Calibration:
    """Read a calibration file (default: the one for :data:`PROXY_VERSION` and ``similarity``).

    :raises FileNotFoundError: no such file (refit with ``python -m evaluators calibrate``)
    :raises CalibrationMismatch: the file was fitted for another proxy version, similarity or feature list
    """
    path = Path(path) if path else default_path(similarity=similarity)
    if not path.exists():
        raise FileNotFoundError(f"no proxy calibration at {path}; fit one with `python -m evaluators calibrate`")
    data = json.loads(path.read_text(encoding="utf-8"))
    refit = f"refit it with `python -m evaluators calibrate --out {path}" + (
        " --embeddings`" if similarity != LEXICAL else "`"
    )
    if data.get("proxy_version") != PROXY_VERSION:
        raise CalibrationMismatch(
            f"{path} was fitted for proxy version {data.get('proxy_version')!r}, but the "
            f"proxies are {PROXY_VERSION!r}: {refit}"
        )
    if data.get("similarity") != similarity:
        raise CalibrationMismatch(
            f"{path} was fitted on proxies with {data.get('similarity')!r} similarity, not {similarity!r}: {refit}"
        )
    if data.get("features") != list(MODEL_FEATURES):
        raise CalibrationMismatch(f"{path} lists other features than the proxies give: {refit}")
    turn_model = data.get("turn_model")
    if not isinstance(turn_model, dict) or not TurnModel.from_dict(turn_model).current:
        raise CalibrationMismatch(f"{path} has no turn scorer for the turn features the proxies give: {refit}")
    return Calibration(**{**data, "model": Model(**data["model"])})


@dataclass
class ProxyVerdict:
    """The proxy scorer's result for one conversation."""

    result: ProxyResult
    overall: float  # 0-4
    overall_100: float  # 0-100
    turns: list[TurnScore]


@dataclass
class ProxyJudge:
    """The ``proxy`` scorer: the twelve factor proxies and the calibrated overall score, no LLM.

    A factor the proxies cannot measure is stored with score None and the reason in ``error``; the
    evaluation is still ``done`` (running it again would give the same result).

    :param calibration: the fitted overall model (its similarity must match ``embedder``'s)
    :param embedder: sentence embedder for the proxies; None: lexical similarity
    :param notes: how the proxies were set up (e.g. which similarity), for operators
    """

    calibration: Calibration
    embedder: Embedder | None = None
    notes: tuple[str, ...] = ()
    name: str = "proxy"
    demo: bool = False

    def __post_init__(self) -> None:
        used = LEXICAL if self.embedder is None else MINILM
        if used != self.calibration.similarity:
            raise CalibrationMismatch(
                f"the calibration was fitted on {self.calibration.similarity} similarity, the proxies would use {used}"
            )

    @property
    def rubric_version(self) -> str:
        return load_rubric(PROXY_RUBRIC).version

    def describe(self) -> dict[str, Any]:
        """What decides this scorer's results (stored with each evaluation)."""
        return {
            "scorer": self.name,
            "proxy_version": self.calibration.proxy_version,
            "similarity": self.calibration.similarity,
            "calibration": self.calibration.fingerprint,
            "rubric": self.rubric_version,
        }

    def label(self) -> str:
        return f"{self.name} (LLM-free factor proxies, overall calibrated on human labels)"

    def notices(self, why: str = "") -> list[str]:
        reason = f" ({why})" if why else ""
        return [
            f"scorer: {self.name}{reason}: LLM-free factor proxies, overall calibrated on human labels; "
            + "; ".join(self.notes)
        ]

    def summary(self, evaluation: Evaluation) -> str:
        if evaluation.overall is None:
            return "The proxy could not compute an overall score."
        return f"Overall {evaluation.overall:.1f}/100, calibrated on human labels (proxy scorer, no debate)."

    def score(self, conversation: Conversation, catalog: Catalog) -> ProxyVerdict:
        """The proxies and the calibrated overall of one conversation (nothing stored)."""
        result = proxy_scores(
            conversation, catalog, embedder=self.embedder, turn_scorer=self.calibration.score_evidence
        )
        turns = self.calibration.score_turns(result)
        overall = self.calibration.predict(result, turns)
        return ProxyVerdict(result, overall, overall * 25.0, turns)

    def run(
        self, conversation: Conversation, earlier: Evaluation | None, *, catalog: Catalog, record: Recorder
    ) -> Outcome:
        verdict = self.score(conversation, catalog)  # before anything is stored: a failure leaves no row
        rubric = self.rubric_version
        for factor in FACTORS:  # coherence as it reads the turn scores too
            proxy = verdict.result.informed.get(factor) or verdict.result.factors[factor]
            record.factor(
                FactorScore(
                    factor=factor,
                    score=proxy.score,
                    judge=self.name,
                    rubric_version=rubric,
                    rationale=proxy.detail,
                    error=None if proxy.score is not None else proxy.detail,
                    metadata={"proxy_version": verdict.result.version, "value": proxy.value},
                )
            )
        return Outcome(
            overall=verdict.overall_100,
            metrics={
                "proxy_overall_0_4": verdict.overall,
                "proxy_features": verdict.result.features,
                "turn_scores": [score.as_dict() for score in verdict.turns],
                "proxy_notes": list(verdict.result.notes),
            },
        )


@lru_cache(maxsize=1)
def _shipped() -> Calibration:
    return load_calibration()


def offline_turn_scores(conversation: Conversation, catalog: Catalog) -> list[dict[str, Any]] | None:
    """Each system turn's scores from the shipped proxy calibration's turn scorer (lexical, about 10 ms), for a
    conversation another scorer judged, so that every scored conversation carries turn scores; None (logged) when
    the calibration cannot be read or the conversation has no system turn."""
    try:
        calibration = _shipped()
        result = proxy_scores(conversation, catalog, turn_scorer=calibration.score_evidence)
    except (OSError, ValueError) as e:
        log.warning("no turn scores for conversation %s: %s", conversation.id, e)
        return None
    return [score.as_dict() for score in calibration.score_turns(result)]


def load_proxy_judge(path: str | os.PathLike | None = None, *, embeddings: bool = False) -> ProxyJudge:
    """The proxy scorer with the saved calibration; with ``embeddings``, MiniLM similarity when it loads
    (else lexical, said in :attr:`ProxyJudge.notes`, and the calibration must then be lexical)."""
    embedder, note = load_embedder() if embeddings else (None, "similarity: lexical")
    calibration = load_calibration(path, similarity=LEXICAL if embedder is None else MINILM)
    return ProxyJudge(calibration, embedder, (note,))
