"""Ratings from pairwise battles: Bradley–Terry with bootstrap intervals, online Elo, win rates.

Input: battles as a DataFrame (or a list of dicts) with columns ``model_a``, ``model_b`` and
``winner`` in ``a | b | tie | both_bad``.

Outcomes (FastChat practice): a win scores 1 for the winner; a tie counts as half a win each way;
``both_bad`` is scored exactly like a tie (the vote says nothing about which side is better).

Bradley–Terry: ``P(A beats B) = 1 / (1 + 10 ** ((R_B - R_A) / 400))`` with ``R = 1000 + 400 * r``
(``r`` is the log10 strength). The fit maximises the log-likelihood plus a weak Gaussian prior
``r ~ N(0, (prior_sd / 400) ** 2)`` (default ``prior_sd`` = 400 points, worth about three quarters
of one even game), so a system that never lost keeps a finite rating. Anchoring: the prior's
gradient makes the ratings sum to zero at the optimum, so **the mean rating is exactly 1000**;
pass ``anchor=(system, value)`` to shift every rating so that one system has ``value`` instead.

Speed: votes are first reduced to counts of unique ``(a, b, outcome)`` rows, then to per-pair
totals; bootstrap replicates are multinomial reweightings of the unique rows (PR #3523 in
FastChat), and all replicates are solved together by a batched Newton iteration.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.sparse import coo_matrix, csr_matrix
from scipy.sparse.csgraph import connected_components
from threadpoolctl import threadpool_limits

SCALE = 400.0
BASE_RATING = 1000.0
ALPHA = np.log(10.0)  # natural-log odds per unit of r (one unit of r = 400 points)
PRIOR_SD = 400.0  # rating points
ELO_K = 16.0
OUTCOMES = ("a", "b", "tie", "both_bad")
SCORE_A = {"a": 1.0, "b": 0.0, "tie": 0.5, "both_bad": 0.5}  # points for side A

_MAX_STEP = 2.0  # largest Newton step per iteration, in units of r (800 points)
_TOL = 1e-8  # in units of r: 4e-6 rating points
_MAX_ITER = 100


class NoConvergence(RuntimeError):
    """The Newton iteration did not reach the optimum (it should, the problem is strictly concave)."""


@dataclass(frozen=True)
class Outcomes:
    """Battles reduced to counts of unique ``(a, b, outcome)`` rows.

    ``a`` and ``b`` index ``systems``; ``score`` is side A's points (1, 0.5 or 0); ``count`` how
    many battles had that row. At most ``n * (n - 1) * 3`` rows whatever the number of votes.
    """

    systems: tuple[str, ...]
    a: np.ndarray
    b: np.ndarray
    score: np.ndarray
    count: np.ndarray

    @property
    def n_battles(self) -> int:
        return int(self.count.sum())


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


def aggregate(battles: pd.DataFrame | Iterable[dict], systems: Iterable[str] | None = None) -> Outcomes:
    """Count unique ``(a, b, outcome)`` rows; ``systems`` fixes the order (default: sorted names)."""
    frame = as_frame(battles)
    codes, names = pd.factorize(pd.concat([frame["model_a"], frame["model_b"]], ignore_index=True))
    if systems is not None:
        order = tuple(systems)
        unknown = set(names) - set(order)
        if unknown:
            raise ValueError(f"battles name systems not in the list: {sorted(unknown)}")
    else:
        order = tuple(sorted(names))
    position = {s: i for i, s in enumerate(order)}
    codes = np.array([position[s] for s in names], dtype=np.int64)[codes]
    a, b = codes[: len(frame)], codes[len(frame) :]
    if (a == b).any():
        raise ValueError("a battle needs two different systems")
    level = pd.Categorical(frame["winner"], categories=OUTCOMES).codes  # a, b, tie, both_bad
    points = np.array([2, 0, 1, 1])[level]  # side A's points, doubled: 2 win, 1 tie, 0 loss
    n = len(order)
    counts = np.bincount((a * n + b) * 3 + points, minlength=n * n * 3)
    rows = np.flatnonzero(counts)
    return Outcomes(
        systems=order,
        a=rows // (3 * n),
        b=rows // 3 % n,
        score=(rows % 3) / 2.0,
        count=counts[rows].astype(float),
    )


@dataclass(frozen=True)
class _Pairs:
    """Unordered pairs ``i < j`` and the matrix mapping outcome rows onto them."""

    i: np.ndarray
    j: np.ndarray
    to_pair: csr_matrix  # rows x pairs: 1 where the row belongs to the pair (sparse: one 1 per row)
    points_i: np.ndarray  # per row: points of the pair's first system


def _pairs(outcomes: Outcomes) -> _Pairs:
    lo = np.minimum(outcomes.a, outcomes.b)
    hi = np.maximum(outcomes.a, outcomes.b)
    keys, pair_of_row = np.unique(lo * len(outcomes.systems) + hi, return_inverse=True)
    rows = len(outcomes.a)
    to_pair = csr_matrix((np.ones(rows), (np.arange(rows), pair_of_row)), shape=(rows, len(keys)))
    points_i = np.where(outcomes.a == lo, outcomes.score, 1.0 - outcomes.score)
    return _Pairs(keys // len(outcomes.systems), keys % len(outcomes.systems), to_pair, points_i)


def _newton(n: int, pairs: _Pairs, games: np.ndarray, points: np.ndarray, prior_sd: float) -> np.ndarray:
    """Maximise the penalised BT log-likelihood for every row of ``games``/``points`` at once.

    ``games[k, p]``: battles of pair ``p`` in replicate ``k``; ``points[k, p]``: points of the pair's
    first system. Returns ``r`` (replicates x systems), log10 strengths.
    """
    reps = games.shape[0]
    precision = (SCALE / prior_sd) ** 2
    design = np.zeros((len(pairs.i), n))  # +1 for the pair's first system, -1 for the second
    design[np.arange(len(pairs.i)), pairs.i] = 1.0
    design[np.arange(len(pairs.i)), pairs.j] = -1.0
    diagonal = np.arange(n)
    r = np.zeros((reps, n))
    for _ in range(_MAX_ITER):
        p = 1.0 / (1.0 + np.exp(-ALPHA * (r[:, pairs.i] - r[:, pairs.j])))  # P(first wins), reps x pairs
        gradient = ALPHA * (points - games * p) @ design - precision * r
        curvature = ALPHA**2 * games * p * (1.0 - p)
        hessian = np.zeros((reps, n, n))  # negative Hessian: the Laplacian of the curvature, plus the prior
        hessian[:, pairs.i, pairs.j] = -curvature
        hessian[:, pairs.j, pairs.i] = -curvature
        hessian[:, diagonal, diagonal] = curvature @ np.abs(design) + precision
        step = np.linalg.solve(hessian, gradient[..., None])[..., 0]
        largest = np.abs(step).max(axis=1, keepdims=True)
        step *= np.minimum(1.0, _MAX_STEP / np.maximum(largest, 1e-300))
        r += step
        if largest.max() < _TOL:
            return r
    raise NoConvergence(f"Bradley–Terry fit did not converge in {_MAX_ITER} Newton steps")


def _to_points(r: np.ndarray, systems: tuple[str, ...], anchor: tuple[str, float] | None) -> np.ndarray:
    ratings = BASE_RATING + SCALE * r
    if anchor is not None:
        name, value = anchor
        if name not in systems:
            raise ValueError(f"anchor system {name!r} has no battles")
        ratings = ratings + (value - ratings[..., systems.index(name)])[..., None]
    return ratings


def fit_bt(outcomes: Outcomes, *, prior_sd: float = PRIOR_SD, anchor: tuple[str, float] | None = None) -> np.ndarray:
    """Bradley–Terry ratings (points, in ``outcomes.systems`` order), maximum a posteriori."""
    return bootstrap_bt(outcomes, rounds=0, prior_sd=prior_sd, anchor=anchor)[0]


def bootstrap_weights(outcomes: Outcomes, rounds: int, seed: int) -> np.ndarray:
    """``rounds`` multinomial resamplings of the battles, as counts per unique outcome row."""
    rng = np.random.default_rng(seed)
    n = outcomes.n_battles
    return rng.multinomial(n, outcomes.count / n, size=rounds).astype(float)


def bootstrap_bt(
    outcomes: Outcomes,
    *,
    rounds: int = 200,
    seed: int = 0,
    prior_sd: float = PRIOR_SD,
    anchor: tuple[str, float] | None = None,
    weights: np.ndarray | None = None,
) -> np.ndarray:
    """Ratings for the data (row 0) and for each bootstrap replicate (rows 1..rounds).

    ``weights`` (replicates x outcome rows) replaces the seeded multinomial draw, e.g. to compare
    with another solver on the same replicates.
    """
    if not (0 < prior_sd < np.inf):
        raise ValueError("prior_sd must be a positive number of rating points")
    n = len(outcomes.systems)
    if n == 0:
        return np.zeros((1 + rounds, 0))
    if weights is None:
        weights = bootstrap_weights(outcomes, rounds, seed) if rounds else np.zeros((0, len(outcomes.count)))
    all_weights = np.vstack([outcomes.count[None, :], weights])
    pairs = _pairs(outcomes)
    # the matrices are small: threaded BLAS only adds hand-off latency (and stalls on a busy CPU)
    with threadpool_limits(limits=1, user_api="blas"):
        games = np.asarray((pairs.to_pair.T @ all_weights.T).T)
        points = np.asarray((pairs.to_pair.T @ (all_weights * pairs.points_i).T).T)
        r = _newton(n, pairs, games, points, prior_sd)
    return _to_points(r, outcomes.systems, anchor)


def rank_by_intervals(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Rank = 1 + the number of systems whose lower bound is above this system's upper bound.

    Systems whose intervals overlap share a rank (FastChat's "Rank (UB)").
    """
    low, high = np.asarray(low, float), np.asarray(high, float)
    return 1 + (low[None, :] > high[:, None]).sum(axis=1)


def comparison_groups(outcomes: Outcomes) -> np.ndarray:
    """Per system, the number of its group of systems connected by battles (directly or through others).

    Ratings compare systems only within a group: two groups that never met are each centred by the
    prior, not measured against each other. Groups are numbered from 1 in the order of ``systems``.
    """
    n = len(outcomes.systems)
    graph = coo_matrix((np.ones(len(outcomes.a)), (outcomes.a, outcomes.b)), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    first_seen = {label: k for k, label in enumerate(dict.fromkeys(labels.tolist()), 1)}
    return np.array([first_seen[label] for label in labels.tolist()], dtype=int)


def online_elo(battles: pd.DataFrame | Iterable[dict], *, k: float = ELO_K) -> dict[str, float]:
    """Sequential Elo in the given order (start 1000, base 10, scale 400, tie and both_bad = 0.5).

    Order-dependent by nature; kept as a secondary column (CRS Arena's published ranking used it).
    """
    frame = as_frame(battles)
    codes, names = pd.factorize(pd.concat([frame["model_a"], frame["model_b"]], ignore_index=True))
    ratings = [BASE_RATING] * len(names)
    points = frame["winner"].map(SCORE_A).tolist()
    for a, b, score in zip(codes[: len(frame)].tolist(), codes[len(frame) :].tolist(), points):
        expected_a = 1.0 / (1.0 + 10.0 ** ((ratings[b] - ratings[a]) / SCALE))
        delta = k * (score - expected_a)
        ratings[a] += delta
        ratings[b] -= delta
    return dict(zip(names, ratings))


def win_rate_matrix(battles: pd.DataFrame | Iterable[dict], systems: Iterable[str] | None = None) -> pd.DataFrame:
    """Row system's points per battle against the column system (ties half); NaN where they never met."""
    outcomes = aggregate(battles, systems)
    n = len(outcomes.systems)
    points = np.zeros((n, n))
    games = np.zeros((n, n))
    np.add.at(points, (outcomes.a, outcomes.b), outcomes.score * outcomes.count)
    np.add.at(points, (outcomes.b, outcomes.a), (1.0 - outcomes.score) * outcomes.count)
    np.add.at(games, (outcomes.a, outcomes.b), outcomes.count)
    np.add.at(games, (outcomes.b, outcomes.a), outcomes.count)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(games > 0, points / np.where(games > 0, games, 1.0), np.nan)
    return pd.DataFrame(rate, index=list(outcomes.systems), columns=list(outcomes.systems))


def compute_ratings(
    battles: pd.DataFrame | Iterable[dict],
    *,
    rounds: int = 200,
    seed: int = 0,
    prior_sd: float = PRIOR_SD,
    anchor: tuple[str, float] | None = None,
    k: float = ELO_K,
) -> pd.DataFrame:
    """One row per system, best first: ``system, rating, ci_low, ci_high, rank, group, battles, wins,
    ties, losses, elo``.

    ``rating`` is the full-data fit; ``ci_low``/``ci_high`` the 2.5% / 97.5% quantiles of ``rounds``
    seeded bootstrap replicates; ``group`` numbers the sets of systems connected by battles
    (:func:`comparison_groups`; group 1 holds the top system); ``ties`` include both_bad votes;
    ``elo`` is online Elo with ``k``.
    """
    frame = as_frame(battles)
    columns = ["system", "rating", "ci_low", "ci_high", "rank", "group", "battles", "wins", "ties", "losses", "elo"]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    if rounds < 1:
        raise ValueError("bootstrap intervals need at least one round")
    outcomes = aggregate(frame)
    fits = bootstrap_bt(outcomes, rounds=rounds, seed=seed, prior_sd=prior_sd, anchor=anchor)
    low, high = np.quantile(fits[1:], [0.025, 0.975], axis=0)
    elo = online_elo(frame, k=k)
    tally = _tally(outcomes)
    table = pd.DataFrame(
        {
            "system": list(outcomes.systems),
            "rating": fits[0],
            "ci_low": low,
            "ci_high": high,
            "rank": rank_by_intervals(low, high),
            "group": comparison_groups(outcomes),
            "elo": [elo[s] for s in outcomes.systems],
        }
    ).join(tally, on="system")
    table = table.sort_values(["rank", "rating"], ascending=[True, False], kind="stable")
    table["group"] = pd.factorize(table["group"])[0] + 1  # group 1 holds the top system
    return table[columns].reset_index(drop=True)


def _tally(outcomes: Outcomes) -> pd.DataFrame:
    """Battles, wins, ties (incl. both_bad) and losses per system, indexed by system."""
    n = len(outcomes.systems)

    def per_system(mask_a: np.ndarray, mask_b: np.ndarray) -> np.ndarray:
        return np.bincount(outcomes.a, outcomes.count * mask_a, n) + np.bincount(outcomes.b, outcomes.count * mask_b, n)

    win, tie, loss = outcomes.score == 1.0, outcomes.score == 0.5, outcomes.score == 0.0
    wins, ties, losses = per_system(win, loss), per_system(tie, tie), per_system(loss, win)
    return pd.DataFrame(
        {"battles": wins + ties + losses, "wins": wins, "ties": ties, "losses": losses},
        index=pd.Index(outcomes.systems, name="system"),
    ).astype(int)
