"""Turn scores: how relevant and how interesting each system turn is, 0-2 as CRSArena-Eval labels them (#28).

People judged CRSArena-Eval's turns on *relevance* (does the reply make sense and meet the user's interests) and
*interestingness* (does it make the user want to go on), 0-2. The mean of a dialogue's human turn-relevance labels
alone correlates with its human overall at Spearman 0.805, so a judge that reads turns the way those people did
carries most of what the overall needs (FACE's approach: fine-grained signals aggregated into the dialogue score).

Each system turn's evidence (:class:`evaluators.proxy.TurnEvidence`, :data:`evaluators.proxy.TURN_FEATURES`: the
user's reaction, the request before it and how close the reply is to it, whether the items it names have the genres
the user asked for, its text statistics, and four facts about the whole conversation) goes through two ridge
regressions fitted on the 433 labelled turns of the CRSArena-Eval development slice
(:func:`evaluators.proxy.calibration.fit_turn_model`, saved in the calibration file). Guards:

* a turn that cannot be read (an empty reply; a reply mostly outside the English word list) is not scored: its
  scores are None with the reason, and it counts as 0 in the conversation's aggregates;
* a degenerate reply (gibberish, massive repetition, a repeat of an earlier reply) scores at most
  :data:`DEGENERATE_CAP`, whatever the regression says.

Aggregation (:data:`AGGREGATES`): the conversation's mean and lowest turn relevance, its mean interestingness and
the relevance of its last system turn are four more inputs of the calibrated overall
(:mod:`evaluators.proxy.scorer`). Of the twelve factor proxies, coherence also reads them: a reply under
:data:`evaluators.proxy.factor_proxies.LOW_RELEVANCE` that the user did not accept counts as misaligned (out of
fold it raised the factor's agreement with the human overall from 0.29 to 0.39); effectiveness was tried the same
way and did not gain, and the others count only what CoRE's rubric counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evaluators.proxy.turn_evidence import TURN_FEATURES, TurnEvidence

ASPECTS: tuple[str, ...] = ("relevance", "interestingness")
TOP = 2.0  # CRSArena-Eval's turn labels run 0-2
DEGENERATE_CAP = 0.5
AGGREGATES: tuple[str, ...] = ("turn_relevance_mean", "turn_relevance_min", "turn_interest_mean", "turn_relevance_last")


def linear(
    X: Any, mean: Sequence[float], scale: Sequence[float], coef: Sequence[float], intercept: float, top: float
) -> np.ndarray:
    """clip(intercept + ((x - mean) / scale) . coef, 0, top) for each row x of ``X``: how every fitted model of the
    proxy predicts."""
    z = (np.atleast_2d(np.asarray(X, dtype=float)) - np.asarray(mean)) / np.asarray(scale)
    return np.clip(intercept + z @ np.asarray(coef), 0.0, top)


@dataclass
class Linear:
    """One fitted aspect: predict = clip(intercept + ((x - mean) / scale) . coef, 0, 2)."""

    mean: list[float]
    scale: list[float]
    coef: list[float]
    intercept: float
    alpha: float

    def predict(self, X: Any) -> np.ndarray:
        return linear(X, self.mean, self.scale, self.coef, self.intercept, TOP)


@dataclass
class TurnModel:
    """The two fitted aspects and the feature list they were fitted on."""

    features: list[str]
    relevance: Linear
    interestingness: Linear

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TurnModel:
        return cls(
            features=list(data["features"]),
            relevance=Linear(**data["relevance"]),
            interestingness=Linear(**data["interestingness"]),
        )

    @property
    def current(self) -> bool:
        """Fitted on the features the proxies give now."""
        return self.features == list(TURN_FEATURES)


@dataclass(frozen=True)
class TurnScore:
    """One system turn's scores (0-2; None when it cannot be scored, with the reason in ``note``)."""

    index: int  # in Conversation.turns
    relevance: float | None
    interestingness: float | None
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "turn": self.index,
            "relevance": self.relevance,
            "interestingness": self.interestingness,
            **({"note": self.note} if self.note else {}),
        }


def score_turns(model: TurnModel, turns: Sequence[TurnEvidence]) -> list[TurnScore]:
    """Every system turn's scores, with the guards of the module's docstring."""
    scorable = [t for t in turns if t.unscorable is None]
    predicted: dict[int, tuple[float, float]] = {}
    if scorable:
        X = np.array([t.features for t in scorable], dtype=float)
        for t, r, i in zip(scorable, model.relevance.predict(X), model.interestingness.predict(X), strict=True):
            predicted[t.index] = (float(r), float(i))
    scores = []
    for t in turns:
        if t.unscorable is not None:
            scores.append(TurnScore(t.index, None, None, f"not scorable: {t.unscorable}"))
            continue
        relevance, interest = predicted[t.index]
        if t.degenerate is not None:
            relevance, interest = min(relevance, DEGENERATE_CAP), min(interest, DEGENERATE_CAP)
        scores.append(TurnScore(t.index, relevance, interest, t.degenerate or ""))
    return scores


def aggregate(scores: Sequence[TurnScore]) -> list[float]:
    """:data:`AGGREGATES` of one conversation (NaN without a system turn); an unscorable turn counts as 0."""
    if not scores:
        return [float("nan")] * len(AGGREGATES)
    relevance = [s.relevance or 0.0 for s in scores]
    interest = [s.interestingness or 0.0 for s in scores]
    return [float(np.mean(relevance)), float(min(relevance)), float(np.mean(interest)), relevance[-1]]
