"""Meta-evaluation: how well an automatic score agrees with human labels, and how factors relate.

* :func:`correlate` — Pearson, Spearman and Kendall with SciPy's p-values and percentile bootstrap
  95% intervals, at dialogue level and (given each dialogue's system) at system level.
* :func:`factor_matrix` — the Spearman correlation matrix of the twelve CoRE factors (CoRE RQ1),
  as a DataFrame and a plotly heatmap.
* Human labels from CRSArena-Eval (:func:`crsarena_eval_labels`) or a plain CSV (:func:`read_csv_labels`).

Rules where the papers are silent:

* Pairs where either side is None (or NaN) are left out; ``n`` counts the pairs used.
* A coefficient that is undefined (fewer than three pairs, or a constant side) is None, not 0.
* Bootstrap: ``n_boot`` resamples (default 1000) from a seeded generator, percentile interval.
  Dialogue level resamples dialogues with replacement. System level resamples dialogues with
  replacement *within each system*, so every system keeps its place, then recomputes system
  means. Resamples whose coefficient is undefined (constant) are dropped; ``n_boot`` in the
  result says how many were used.
* System level correlates per-system means of the score and of the label over the dialogues where
  both exist. With nine CRS Arena systems n is 9: p-values and intervals are wide, read them so.
"""

from __future__ import annotations

import csv
import math
import os
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from scipy import stats

from evaluators.factors import FACTORS, LABELS
from evaluators.log_readers import read_crsarena_eval

METHODS = ("pearson", "spearman", "kendall")
DIALOGUE_ASPECTS = (
    "understanding",
    "task_completion",
    "interest_arousal",
    "efficiency",
    "dialogue_overall",
    "preference_elicitation",
    "explanation",
)
TURN_ASPECTS = ("relevance", "interestingness")
MIN_PAIRS = 3

_TESTS: dict[str, Callable] = {
    "pearson": stats.pearsonr,
    "spearman": stats.spearmanr,
    "kendall": stats.kendalltau,
}


@dataclass(frozen=True)
class Coefficient:
    """One correlation coefficient with its p-value and bootstrap 95% interval (None when undefined)."""

    value: float | None
    p: float | None
    low: float | None
    high: float | None


@dataclass
class LevelCorrelation:
    """Correlations at one level (``dialogue`` or ``system``) over ``n`` paired observations."""

    level: str
    n: int
    skipped: int
    n_boot: int
    coefficients: dict[str, Coefficient] = field(default_factory=dict)

    def __getitem__(self, method: str) -> Coefficient:
        return self.coefficients[method]

    def as_row(self) -> dict[str, float | int | str | None]:
        """Flat values for a table: level, n, then value/p/low/high per method."""
        row: dict[str, float | int | str | None] = {"level": self.level, "n": self.n}
        for method, c in self.coefficients.items():
            row.update({method: c.value, f"{method}_p": c.p, f"{method}_low": c.low, f"{method}_high": c.high})
        return row


def correlate(
    scores: Mapping[str, float | None],
    human: Mapping[str, float | None],
    *,
    systems: Mapping[str, str] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    methods: tuple[str, ...] = METHODS,
) -> dict[str, LevelCorrelation]:
    """Correlate ``scores`` with ``human`` labels, both keyed by dialogue id, by each of ``methods``.

    Returns ``{"dialogue": …}`` and, when ``systems`` maps dialogue ids to system ids, ``"system": …``.
    Ids present on one side only count as skipped. The resamples do not depend on ``methods``: a method's interval
    is the same whichever others are asked.
    """
    ids = sorted(set(scores) | set(human))
    kept = [i for i in ids if _present(scores.get(i)) and _present(human.get(i))]
    skipped = len(ids) - len(kept)
    x = np.array([float(scores[i]) for i in kept])  # type: ignore[arg-type]  # _present: not None
    y = np.array([float(human[i]) for i in kept])  # type: ignore[arg-type]
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(kept), (n_boot, len(kept)))
    out = {"dialogue": _level("dialogue", x, y, x[idx], y[idx], skipped, methods)}
    if systems is not None:
        missing = [i for i in kept if i not in systems]
        if missing:
            raise KeyError(f"no system given for dialogue(s) {missing[:5]}")
        names = sorted({systems[i] for i in kept})
        groups = [np.array([k for k, i in enumerate(kept) if systems[i] == name]) for name in names]
        draws = [g[rng.integers(0, len(g), (n_boot, len(g)))] for g in groups]
        out["system"] = _level(
            "system",
            np.array([x[g].mean() for g in groups]),
            np.array([y[g].mean() for g in groups]),
            np.stack([x[d].mean(axis=1) for d in draws], axis=1) if groups else np.empty((n_boot, 0)),
            np.stack([y[d].mean(axis=1) for d in draws], axis=1) if groups else np.empty((n_boot, 0)),
            skipped,
            methods,
        )
    return out


def _level(
    level: str,
    x: np.ndarray,
    y: np.ndarray,
    bx: np.ndarray,
    by: np.ndarray,
    skipped: int,
    methods: tuple[str, ...] = METHODS,
) -> LevelCorrelation:
    """Point estimates on (x, y); intervals from the resampled rows of (bx, by)."""
    result = LevelCorrelation(level, len(x), skipped, 0)
    for method in methods:
        value, p = _coefficient(method, x, y)
        sample = _bootstrap(method, bx, by) if value is not None else np.empty(0)
        sample = sample[~np.isnan(sample)]
        low: float | None = None
        high: float | None = None
        if len(sample):
            low, high = float(np.percentile(sample, 2.5)), float(np.percentile(sample, 97.5))
        result.coefficients[method] = Coefficient(value, p, low, high)
        result.n_boot = max(result.n_boot, len(sample))
    return result


def _coefficient(method: str, x: np.ndarray, y: np.ndarray) -> tuple[float | None, float | None]:
    """SciPy's coefficient and p-value, or (None, None) when undefined."""
    if len(x) < MIN_PAIRS or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None, None
    res = _TESTS[method](x, y)
    value, p = float(res[0]), float(res[1])
    return (None, None) if math.isnan(value) else (value, None if math.isnan(p) else p)


def _bootstrap(method: str, bx: np.ndarray, by: np.ndarray) -> np.ndarray:
    """The coefficient of every resample (row); NaN where a resample is constant."""
    if method == "kendall":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return np.array([stats.kendalltau(a, b).statistic for a, b in zip(bx, by)], dtype=float)
    if method == "spearman":
        bx, by = stats.rankdata(bx, axis=1), stats.rankdata(by, axis=1)
    dx = bx - bx.mean(axis=1, keepdims=True)
    dy = by - by.mean(axis=1, keepdims=True)
    denominator = np.sqrt((dx * dx).sum(axis=1) * (dy * dy).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, (dx * dy).sum(axis=1) / denominator, np.nan)


def _present(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


# -- factor matrix --------------------------------------------------------------------


def factor_matrix(score_table) -> tuple[pd.DataFrame, go.Figure]:
    """Spearman correlations between the twelve factors, and a heatmap of them (CoRE RQ1).

    ``score_table``: one row per conversation with a column per factor id — a DataFrame, a list of
    ``{factor: score}`` dicts or a ``{conversation id: {factor: score}}`` dict. Missing scores (None)
    are left out pair by pair; a factor absent from the table gives an all-NaN row and column, so the
    matrix is always 12×12 in :data:`FACTORS` order.
    """
    if isinstance(score_table, Mapping):
        score_table = list(score_table.values())
    frame = pd.DataFrame(score_table)
    unknown = sorted(set(frame.columns) - set(FACTORS))
    if unknown:
        raise ValueError(f"unknown factor column(s) {unknown}; expected ids from {FACTORS}")
    frame = frame.reindex(columns=list(FACTORS)).apply(pd.to_numeric, errors="coerce")
    matrix = frame.corr(method="spearman", min_periods=MIN_PAIRS)
    labels = [LABELS[f] for f in FACTORS]
    figure = go.Figure(
        go.Heatmap(
            z=matrix.to_numpy(),
            x=labels,
            y=labels,
            zmin=-1,
            zmax=1,
            colorscale="RdBu",
            text=matrix.round(2).to_numpy(),
            texttemplate="%{text}",
            hovertemplate="%{y} / %{x}: %{z:.2f}<extra></extra>",
        )
    )
    figure.update_layout(
        title=f"Spearman correlation between factors (n = {len(frame)})", yaxis_autorange="reversed", height=600
    )
    return matrix, figure


def vote_agreement(
    pair_scores: np.ndarray, outcome: np.ndarray, *, n_boot: int = 1000, seed: int = 0, tie_margin: float | None = None
) -> dict[str, Any]:
    """How scores agree with votes (``outcome`` +1: A won, -1: B won, 0: tie or both bad).

    ``accuracy``: the share of decisive votes whose winner scores higher (equal scores count half), with a
    bootstrap 95% interval; the mean score gap on tied votes and on decisive ones. With ``tie_margin`` also
    ``accuracy_with_ties``, MT-Bench's agreement with ties as a third class: the scores call a tie when they
    differ by less than ``tie_margin``, and a vote agrees when both name the same one of A, B and tie.
    """
    decisive = outcome != 0
    result: dict[str, Any] = {
        "decisive": int(decisive.sum()),
        "ties": int((~decisive).sum()),
        "accuracy": None,
        "accuracy_low": None,
        "accuracy_high": None,
        "tie_gap": None,
        "decisive_gap": None,
    }
    if tie_margin is not None:
        result.update(with_ties=int(len(outcome)), accuracy_with_ties=None, with_ties_low=None, with_ties_high=None)
    if not len(outcome):
        return result
    rng = np.random.default_rng(seed)

    def interval(hits: np.ndarray) -> tuple[float, float]:
        draws = hits[rng.integers(0, len(hits), (n_boot, len(hits)))].mean(axis=1)
        return float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))

    diff = (pair_scores[:, 0] - pair_scores[:, 1]) * np.where(decisive, outcome, 1)
    hits = np.where(diff[decisive] > 0, 1.0, np.where(diff[decisive] == 0, 0.5, 0.0))
    gap = np.abs(pair_scores[:, 0] - pair_scores[:, 1])
    if len(hits):
        result["accuracy"] = float(hits.mean())
        result["accuracy_low"], result["accuracy_high"] = interval(hits)
    result["tie_gap"] = float(gap[~decisive].mean()) if (~decisive).any() else None
    result["decisive_gap"] = float(gap[decisive].mean()) if decisive.any() else None
    if tie_margin is not None:
        raw = pair_scores[:, 0] - pair_scores[:, 1]
        called = np.where(np.abs(raw) < tie_margin, 0, np.sign(raw))
        agree = (called == np.sign(outcome)).astype(float)
        result["accuracy_with_ties"] = float(agree.mean())
        result["with_ties_low"], result["with_ties_high"] = interval(agree)
    return result


# -- human labels --------------------------------------------------------------------------


def crsarena_eval_labels(path: str | os.PathLike, aspect: str = "dialogue_overall") -> dict[str, float | None]:
    """One human aspect from a CRSArena-Eval file.

    Dialogue aspects (:data:`DIALOGUE_ASPECTS`) are keyed by conversation id; turn aspects
    (:data:`TURN_ASPECTS`) by ``"<conversation id>#<turn index in Conversation.turns>"``. A dialogue
    or turn without that label maps to None.
    """
    if aspect not in DIALOGUE_ASPECTS + TURN_ASPECTS:
        raise ValueError(f"unknown aspect {aspect!r}; expected one of {DIALOGUE_ASPECTS + TURN_ASPECTS}")
    result = read_crsarena_eval(path)
    if aspect in DIALOGUE_ASPECTS:
        return {cid: labels.dialogue.get(aspect) for cid, labels in result.labels.items()}
    return {
        f"{c.id}#{k}": result.labels[c.id].turns.get(k, {}).get(aspect)
        for c in result.conversations
        for k, turn in enumerate(c.turns)
        if turn.role == "system"
    }


def read_csv_labels(
    path: str | os.PathLike, *, id_column: str = "id", value_column: str = "value"
) -> dict[str, float | None]:
    """Labels from a CSV with a header row; an empty value cell is None.

    Raises ValueError naming the line for a missing column, a non-numeric value or a repeated id.
    """
    path = Path(path)
    labels: dict[str, float | None] = {}
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        for column in (id_column, value_column):
            if column not in (reader.fieldnames or []):
                raise ValueError(f"{path}: line 1: expected a header with column {column!r}, got {reader.fieldnames}")
        for row in reader:
            line = reader.line_num
            key = (row[id_column] or "").strip()
            raw = (row[value_column] or "").strip()
            if not key:
                raise ValueError(f"{path}: line {line}: expected an id in column {id_column!r}")
            if key in labels:
                raise ValueError(f"{path}: line {line}: id {key!r} appears twice")
            try:
                labels[key] = float(raw) if raw else None
            except ValueError:
                raise ValueError(
                    f"{path}: line {line}: expected a number in column {value_column!r}, got {raw!r}"
                ) from None
    return labels
