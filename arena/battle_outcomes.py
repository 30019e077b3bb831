"""Battles as counts: the votes of pairwise battles reduced to unique ``(a, b, outcome)`` rows, the input of every
fit (:mod:`arena.bradley_terry`, :mod:`arena.ratings`).

Input: battles as a DataFrame (or a list of dicts) with columns ``model_a``, ``model_b`` and
``winner`` in ``a | b | tie | both_bad``.

Outcomes (FastChat practice): a win scores 1 for the winner; a tie counts as half a win each way;
``both_bad`` is scored exactly like a tie (the vote says nothing about which side is better).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

OUTCOMES = ("a", "b", "tie", "both_bad")

SCORE_A = {"a": 1.0, "b": 0.0, "tie": 0.5, "both_bad": 0.5}  # points for side A


@dataclass(frozen=True)
class Outcomes:
    """Battles reduced to counts of unique ``(a, b, outcome)`` rows (with covariates: ``(a, b, outcome, x)``).

    ``a`` and ``b`` index ``systems``; ``score`` is side A's points (1, 0.5 or 0); ``count`` how
    many battles had that row. Without covariates, at most ``n * (n - 1) * 3`` rows whatever the number
    of votes. ``covariates`` (rows x k, or None) holds each row's style differences, side A's value minus
    side B's (:mod:`arena.style` builds them), named by ``covariate_names``.
    """

    systems: tuple[str, ...]
    a: np.ndarray
    b: np.ndarray
    score: np.ndarray
    count: np.ndarray
    covariates: np.ndarray | None = None
    covariate_names: tuple[str, ...] = ()

    @property
    def n_battles(self) -> int:
        return int(self.count.sum())

    @property
    def k(self) -> int:
        """The number of covariates (0: plain Bradley–Terry)."""
        return 0 if self.covariates is None else int(self.covariates.shape[1])


def as_frame(battles: pd.DataFrame | Iterable[dict]) -> pd.DataFrame:
    """Battles as a DataFrame with ``model_a, model_b, winner``; unknown winners raise ValueError."""
    frame = battles if isinstance(battles, pd.DataFrame) else pd.DataFrame(list(battles))
    if frame.empty:
        return pd.DataFrame({"model_a": [], "model_b": [], "winner": []}, dtype=object)
    missing = {"model_a", "model_b", "winner"} - set(frame.columns)
    if missing:
        raise ValueError(f"battles need columns model_a, model_b, winner; missing {sorted(missing)}")
    bad = ~frame["winner"].isin(OUTCOMES)
    if bad.any():
        raise ValueError(f"winner must be one of {OUTCOMES}; got {frame.loc[bad, 'winner'].iloc[0]!r}")
    return frame


def aggregate(
    battles: pd.DataFrame | Iterable[dict], systems: Iterable[str] | None = None, *, covariates: Sequence[str] = ()
) -> Outcomes:
    """Count unique ``(a, b, outcome)`` rows; ``systems`` fixes the order (default: sorted names).

    ``covariates`` names columns of ``battles`` holding per-battle differences (side A minus side B) to be
    fitted beside the ratings; they must be finite (the caller imputes missing values, see
    :func:`arena.style.battle_covariates`). Rows are then unique ``(a, b, outcome, covariates)``.
    """
    frame = as_frame(battles)
    names = tuple(covariates)
    if names:
        absent = set(names) - set(frame.columns)
        if absent and not frame.empty:
            raise ValueError(f"battles lack the covariate columns {sorted(absent)}")
    codes, labels = pd.factorize(pd.concat([frame["model_a"], frame["model_b"]], ignore_index=True))
    if systems is not None:
        order = tuple(systems)
        unknown = set(labels) - set(order)
        if unknown:
            raise ValueError(f"battles name systems not in the list: {sorted(unknown)}")
    else:
        order = tuple(sorted(labels))
    position = {s: i for i, s in enumerate(order)}
    codes = np.array([position[s] for s in labels], dtype=np.int64)[codes]
    a, b = codes[: len(frame)], codes[len(frame) :]
    if (a == b).any():
        raise ValueError("a battle needs two different systems")
    level = pd.Categorical(frame["winner"], categories=OUTCOMES).codes  # a, b, tie, both_bad
    points = np.array([2, 0, 1, 1])[level]  # side A's points, doubled: 2 win, 1 tie, 0 loss
    n = len(order)
    if not names:
        counts = np.bincount((a * n + b) * 3 + points, minlength=n * n * 3)
        rows = np.flatnonzero(counts)
        return Outcomes(
            systems=order,
            a=rows // (3 * n),
            b=rows // 3 % n,
            score=(rows % 3) / 2.0,
            count=counts[rows].astype(float),
        )
    values = frame[list(names)].to_numpy(dtype=float) if len(frame) else np.zeros((0, len(names)))
    if not np.isfinite(values).all():
        raise ValueError("covariates must be finite numbers: impute the missing ones first")
    # sorted by unordered pair first (the order the fit's units need), then (a, b, outcome), then the covariates
    key = np.column_stack([np.minimum(a, b) * n + np.maximum(a, b), (a * n + b) * 3 + points, values])
    key = key[np.lexsort(key.T[::-1])]
    first = np.flatnonzero(np.r_[True, (key[1:] != key[:-1]).any(axis=1)])  # where each unique row starts
    unique, counts = key[first], np.diff(np.r_[first, len(key)])
    code = unique[:, 1].astype(np.int64)
    return Outcomes(
        systems=order,
        a=code // (3 * n),
        b=code // 3 % n,
        score=(code % 3) / 2.0,
        count=counts.astype(float),
        covariates=unique[:, 2:],
        covariate_names=names,
    )
