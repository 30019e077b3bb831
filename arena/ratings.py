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

Style control (LMArena's method, "Does style matter?", 2024): covariates are extra columns of the same
Newton solve. Each battle carries differences between its two sides (side A minus side B, normalised by
:mod:`arena.style`), and ``P(A beats B) = 1 / (1 + 10 ** -((r_A - r_B) + beta . x))`` is fitted jointly, so a
rating is what remains of a system's strength once its style is accounted for. Covariates are divided by their
standard deviation over the battles; one that is constant, or collinear with which systems met, is dropped
(:func:`usable_covariates`), and with none left the fit is plain Bradley–Terry. With no covariates the solve
is exactly the plain one: the units are the pairs' totals.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.sparse import coo_matrix, csr_matrix
from scipy.sparse.csgraph import connected_components
from threadpoolctl import ThreadpoolController

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


@functools.cache
def _blas() -> ThreadpoolController:
    """The process's BLAS libraries, found once (looking them up costs milliseconds, more than a small fit)."""
    return ThreadpoolController()


class NoConvergence(RuntimeError):
    """The Newton iteration did not reach the optimum (it should, the problem is strictly concave)."""


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


@dataclass(frozen=True)
class _Units:
    """What one Newton solve runs over.

    Pairs ``i < j`` carry the ratings' design. Units carry the outcomes: without covariates one unit per pair
    (every battle of a pair has the same odds, so the pair's totals are all the fit needs), with covariates one
    unit per outcome row, sorted by pair (``order``: the rows in unit order, None when they are in it already;
    ``bounds``: each pair's slice of units), with its covariates ``x`` oriented to the pair's first system.
    """

    i: np.ndarray
    j: np.ndarray
    design: np.ndarray  # pairs x systems: +1 for the pair's first system, -1 for the second
    to_pair: csr_matrix | None  # plain: rows x pairs, 1 where the row belongs to the pair (one 1 per row)
    points_i: np.ndarray  # per row: points of its pair's first system
    x: np.ndarray  # units x k (k = 0: plain Bradley–Terry)
    order: np.ndarray | None = None  # with covariates: the outcome row of each unit (None: the same order)
    bounds: tuple[tuple[int, int], ...] = ()  # with covariates: each pair's units, [start, end)
    basis: np.ndarray | None = None  # with covariates, per unit: [1, x] (pair sums, then the coefficients' sums)
    curvature_basis: np.ndarray | None = None  # [1, x, x x^T]: the Hessian's sums

    @property
    def k(self) -> int:
        return int(self.x.shape[1])

    def games_and_points(self, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Battles and points of the pair's first system per unit, for replicates weighting the outcome rows."""
        if self.to_pair is not None:
            games = np.asarray((self.to_pair.T @ weights.T).T)
            return games, np.asarray((self.to_pair.T @ (weights * self.points_i).T).T)
        if self.order is None:
            return weights, weights * self.points_i
        games = weights[:, self.order]
        return games, games * self.points_i[self.order]


def _units(outcomes: Outcomes) -> _Units:
    n = len(outcomes.systems)
    lo = np.minimum(outcomes.a, outcomes.b)
    hi = np.maximum(outcomes.a, outcomes.b)
    keys, pair_of_row = np.unique(lo * n + hi, return_inverse=True)
    pair_of_row = pair_of_row.reshape(-1)
    rows = len(outcomes.a)
    points_i = np.where(outcomes.a == lo, outcomes.score, 1.0 - outcomes.score)
    i, j = keys // n, keys % n
    design = np.zeros((len(keys), n))
    design[np.arange(len(keys)), i] = 1.0
    design[np.arange(len(keys)), j] = -1.0
    if outcomes.k == 0 or outcomes.covariates is None:
        to_pair = csr_matrix((np.ones(rows), (np.arange(rows), pair_of_row)), shape=(rows, len(keys)))
        return _Units(i, j, design, to_pair, points_i, np.zeros((len(keys), 0)))
    order: np.ndarray | None = np.argsort(pair_of_row, kind="stable")
    sign = np.where(outcomes.a == lo, 1.0, -1.0)  # a difference A minus B, seen from the pair's first system
    x = outcomes.covariates * sign[:, None]
    if order is not None and np.array_equal(order, np.arange(rows)):
        order = None  # aggregate() sorts by pair already
    else:
        x = x[order]
    lengths = np.bincount(pair_of_row, minlength=len(keys))
    ends = np.cumsum(lengths)
    k = x.shape[1]
    basis = np.hstack([np.ones((len(x), 1)), x])
    products = (x[:, :, None] * x[:, None, :]).reshape(len(x), k * k)
    return _Units(
        i,
        j,
        design,
        None,
        points_i,
        x,
        order,
        tuple(zip((ends - lengths).tolist(), ends.tolist())),
        basis,
        np.hstack([basis, products]),
    )


def _pair_sums(
    theta: np.ndarray, n: int, units: _Units, games: np.ndarray, points: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """With covariates: per replicate and pair, the residuals (points - games * p) summed against [1, x] and the
    curvature (alpha^2 games p (1 - p)) against [1, x, x x^T]. One pair at a time, so each step's arrays stay in
    the processor's cache (a pass over a whole replicates x battles array costs more in memory traffic)."""
    assert units.basis is not None and units.curvature_basis is not None
    reps, k = games.shape[0], units.k
    r = theta[:, :n]
    minus_eta = -ALPHA * (r[:, units.i] - r[:, units.j])  # reps x pairs
    minus_beta = -ALPHA * theta[:, n:]
    x_t = units.x.T
    residual_sums = np.empty((reps, len(units.i), 1 + k))
    curvature_sums = np.empty((reps, len(units.i), units.curvature_basis.shape[1]))
    for pair, (start, end) in enumerate(units.bounds):
        p = minus_beta @ x_t[:, start:end]
        p += minus_eta[:, pair, None]
        np.exp(p, out=p)
        p += 1.0
        np.reciprocal(p, out=p)  # P(the pair's first system wins)
        won = games[:, start:end] * p  # expected points
        residual = np.subtract(points[:, start:end], won)
        np.subtract(1.0, p, out=p)
        won *= p  # games p (1 - p)
        residual_sums[:, pair] = residual @ units.basis[start:end]
        curvature_sums[:, pair] = won @ units.curvature_basis[start:end]
    curvature_sums *= ALPHA**2
    return residual_sums, curvature_sums


def _newton(
    n: int,
    units: _Units,
    games: np.ndarray,
    points: np.ndarray,
    prior_sd: float,
    start: np.ndarray | None = None,
    tol: float = _TOL,
) -> tuple[np.ndarray, np.ndarray]:
    """Maximise the penalised BT log-likelihood for every row of ``games``/``points`` at once.

    ``games[k, u]``: battles of unit ``u`` in replicate ``k``; ``points[k, u]``: points of the unit's pair's
    first system. The parameters are the ``n`` log10 strengths, then one coefficient per covariate (both under the
    same weak prior); ``start`` (replicates x parameters) is where the iteration starts (default zero). It stops
    once no parameter moved more than ``tol``. Returns the parameters and each replicate's negative Hessian at the
    last step.
    """
    reps, k = games.shape[0], units.k
    size = n + k
    precision = (SCALE / prior_sd) ** 2
    design = units.design
    diagonal = np.arange(n)
    theta = np.zeros((reps, size)) if start is None else np.array(start, dtype=float)
    for _ in range(_MAX_ITER):
        r = theta[:, :n]
        if k:
            residual_sums, curvature_sums = _pair_sums(theta, n, units, games, points)
            pair_residual, pair_curvature = residual_sums[..., 0], curvature_sums[..., 0]
        else:  # the units are the pairs
            p = 1.0 / (1.0 + np.exp(-ALPHA * (r[:, units.i] - r[:, units.j])))  # P(first wins), reps x pairs
            pair_residual = points - games * p
            pair_curvature = ALPHA**2 * games * p * (1.0 - p)
        gradient = np.empty((reps, size))
        gradient[:, :n] = ALPHA * pair_residual @ design - precision * r
        hessian = np.zeros((reps, size, size))  # negative Hessian: the Laplacian of the curvature, plus the prior
        hessian[:, units.i, units.j] = -pair_curvature
        hessian[:, units.j, units.i] = -pair_curvature
        hessian[:, diagonal, diagonal] = pair_curvature @ np.abs(design) + precision
        if k:
            gradient[:, n:] = ALPHA * residual_sums[..., 1:].sum(axis=1) - precision * theta[:, n:]
            cross = np.swapaxes(curvature_sums[..., 1 : 1 + k], 1, 2) @ design  # reps x k x n
            hessian[:, n:, :n] = cross
            hessian[:, :n, n:] = np.swapaxes(cross, 1, 2)
            hessian[:, n:, n:] = curvature_sums[..., 1 + k :].sum(axis=1).reshape(reps, k, k) + precision * np.eye(k)
        step = np.linalg.solve(hessian, gradient[..., None])[..., 0]
        largest = np.abs(step).max(axis=1, keepdims=True)
        step *= np.minimum(1.0, _MAX_STEP / np.maximum(largest, 1e-300))
        theta += step
        if largest.max() < tol:
            return theta, hessian
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
    """``rounds`` multinomial resamplings of the battles, as counts per unique outcome row: exactly the weights
    :func:`bootstrap_fit` draws for ``seed``."""
    if rounds == 0:
        return np.zeros((0, len(outcomes.count)))
    return np.vstack(list(_weight_chunks(outcomes, rounds, seed)))


def _weight_chunks(outcomes: Outcomes, rounds: int, seed: int) -> Iterator[np.ndarray]:
    """:func:`bootstrap_weights` a chunk of replicates at a time (with covariates, :func:`_chunk` of them).

    Without covariates the rows are few and numpy's multinomial draws all the counts at once. With covariates
    nearly every battle is its own row, so the same distribution is drawn battle by battle (``n`` indices per
    replicate, then counted), a chunk at a time: the multinomial's per-row loop, or one replicates x battles
    array, would cost far more.
    """
    rng = np.random.default_rng(seed)
    n = outcomes.n_battles
    rows = len(outcomes.count)
    if outcomes.k == 0:
        yield rng.multinomial(n, outcomes.count / n, size=rounds).astype(float)
        return
    counts = outcomes.count.astype(np.int64)
    row_of_battle = None if (counts == 1).all() else np.repeat(np.arange(rows), counts)  # None: battle i is row i
    chunk = _chunk(rows)
    for first in range(0, rounds, chunk):
        size = min(chunk, rounds - first)
        drawn = rng.integers(0, n, size=(size, n))
        if row_of_battle is not None:
            drawn = row_of_battle[drawn]
        yield np.stack([np.bincount(replicate, minlength=rows) for replicate in drawn]).astype(float)


def _chunk(units: int) -> int:
    """Replicates per Newton solve when each has ``units`` units: arrays of about :data:`_CHUNK_CELLS` cells, small
    enough for the allocator to reuse (a fresh array of hundreds of MB costs more in page faults than the maths)."""
    return max(1, _CHUNK_CELLS // max(1, units))


@dataclass(frozen=True)
class Fit:
    """A Bradley–Terry fit, with covariates when some were usable, for the data and its bootstrap replicates.

    ``ratings``: points, row 0 the data and rows 1.. the replicates, columns in ``systems`` order.
    ``coefficients``: one column per covariate in ``covariate_names`` (those fitted), in log10-odds (r units)
    per standard deviation of the covariate (``scales`` holds each standard deviation). ``dropped``: covariates
    asked for but left out, with the reason (``constant``: the same in every battle; ``collinear``: explained by
    which systems met, or by the other covariates). ``covariance``: the inverse negative Hessian of the data's fit
    (ratings then coefficients, r units): the Laplace approximation the arena's pair choice reads.
    """

    systems: tuple[str, ...]
    ratings: np.ndarray
    coefficients: np.ndarray
    covariate_names: tuple[str, ...]
    scales: np.ndarray
    dropped: tuple[tuple[str, str], ...]
    covariance: np.ndarray


def usable_covariates(outcomes: Outcomes) -> tuple[Outcomes, tuple[tuple[str, str], ...], np.ndarray]:
    """The covariates a fit can use, each divided by its standard deviation over the battles (not centred: 0
    still means both sides alike); returns (outcomes with those, the dropped ones with their reason, the
    standard deviations).

    Dropped: a covariate that is the same in every battle (``constant``), and one that is (numerically) a linear
    function of which systems met and the covariates kept before it (``collinear``): its coefficient could not be
    told apart from the ratings. The rows stay as they are, so bootstrap weights drawn for ``outcomes`` still apply.
    """
    if outcomes.k == 0 or outcomes.covariates is None:
        return outcomes, (), np.zeros(0)
    weight = outcomes.count
    total = weight.sum()
    values = outcomes.covariates
    dropped: list[tuple[str, str]] = []
    if total <= 0:
        plain = Outcomes(outcomes.systems, outcomes.a, outcomes.b, outcomes.score, outcomes.count)
        return plain, tuple((name, "constant") for name in outcomes.covariate_names), np.zeros(0)
    mean = weight @ values / total
    sd = np.sqrt(weight @ (values - mean) ** 2 / total)
    varying = [c for c in range(outcomes.k) if sd[c] > 1e-12 * max(1.0, abs(mean[c]))]
    dropped += [(outcomes.covariate_names[c], "constant") for c in range(outcomes.k) if c not in varying]
    if not varying:
        plain = Outcomes(outcomes.systems, outcomes.a, outcomes.b, outcomes.score, outcomes.count)
        return plain, tuple(dropped), np.zeros(0)
    scaled = values[:, varying] / sd[varying]
    # the weighted Gram matrix of [which systems met (+1 side A, -1 side B), the scaled covariates]
    n = len(outcomes.systems)
    laplacian = np.zeros((n, n))
    np.add.at(laplacian, (outcomes.a, outcomes.a), weight)
    np.add.at(laplacian, (outcomes.b, outcomes.b), weight)
    np.add.at(laplacian, (outcomes.a, outcomes.b), -weight)
    np.add.at(laplacian, (outcomes.b, outcomes.a), -weight)
    weighted = scaled * weight[:, None]
    system_cross = np.stack(
        [
            np.bincount(outcomes.a, weighted[:, c], n) - np.bincount(outcomes.b, weighted[:, c], n)
            for c in range(len(varying))
        ],
        axis=1,
    )
    gram = np.block([[laplacian, system_cross], [system_cross.T, weighted.T @ scaled]])
    kept: list[int] = []  # positions in ``varying``
    for position in range(len(varying)):
        basis = list(range(n)) + [n + q for q in kept]
        column = n + position
        fitted = np.linalg.lstsq(gram[np.ix_(basis, basis)], gram[basis, column], rcond=1e-10)[0]
        remaining = gram[column, column] - gram[column, basis] @ fitted
        if remaining <= 1e-9 * gram[column, column]:
            dropped.append((outcomes.covariate_names[varying[position]], "collinear"))
        else:
            kept.append(position)
    if not kept:
        plain = Outcomes(outcomes.systems, outcomes.a, outcomes.b, outcomes.score, outcomes.count)
        return plain, tuple(dropped), np.zeros(0)
    columns = [varying[q] for q in kept]
    used = Outcomes(
        outcomes.systems,
        outcomes.a,
        outcomes.b,
        outcomes.score,
        outcomes.count,
        covariates=scaled[:, kept],
        covariate_names=tuple(outcomes.covariate_names[c] for c in columns),
    )
    return used, tuple(dropped), sd[columns]


def bootstrap_fit(
    outcomes: Outcomes,
    *,
    rounds: int = 200,
    seed: int = 0,
    prior_sd: float = PRIOR_SD,
    anchor: tuple[str, float] | None = None,
    weights: np.ndarray | None = None,
) -> Fit:
    """Ratings, and the coefficients of the usable covariates (:func:`usable_covariates`), for the data (row 0)
    and each bootstrap replicate (rows 1..rounds), all from one batched Newton solve.

    The data is solved first; the replicates then start from its optimum, in chunks that keep the arrays
    small (with covariates there is one unit per battle). With no covariates the solve is plain
    Bradley–Terry on the pairs' totals. ``weights`` (replicates x outcome rows) replaces the seeded
    multinomial draw (:func:`bootstrap_weights`), e.g. to compare with another solver on the same replicates.
    """
    if not (0 < prior_sd < np.inf):
        raise ValueError("prior_sd must be a positive number of rating points")
    n = len(outcomes.systems)
    if n == 0:
        dropped = tuple((name, "constant") for name in outcomes.covariate_names)
        return Fit((), np.zeros((1 + rounds, 0)), np.zeros((1 + rounds, 0)), (), np.zeros(0), dropped, np.zeros((0, 0)))
    used, dropped, scales = usable_covariates(outcomes)
    names = used.covariate_names
    units = _units(used)
    if weights is not None:
        chunk = _chunk(len(units.x)) if outcomes.k else max(1, len(weights))
        chunks: Iterable[np.ndarray] = (weights[first : first + chunk] for first in range(0, len(weights), chunk))
    else:
        chunks = _weight_chunks(outcomes, rounds, seed) if rounds else ()
    # the matrices are small: threaded BLAS only adds hand-off latency (and stalls on a busy CPU)
    with _blas().limit(limits=1, user_api="blas"):
        games, points = units.games_and_points(used.count[None, :])
        data, hessian = _newton(n, units, games, points, prior_sd)
        thetas = [data]
        first_step = _one_step(n, units, data[0], hessian[0], prior_sd) if units.k else None
        # The replicates start from the data's optimum. With covariates (one unit per battle) they go a chunk at a
        # time, first one step with the data's Hessian (cheap: the gradient at the data's optimum is linear in the
        # weights), then Newton steps until a step is below _TOL_REPLICATE.
        for replicates in chunks:
            games, points = units.games_and_points(replicates)
            start = np.tile(data[0], (len(games), 1))
            if first_step is not None:
                start += first_step(games, points)
            thetas.append(_newton(n, units, games, points, prior_sd, start, _TOL_REPLICATE if units.k else _TOL)[0])
    theta = np.vstack(thetas)
    return Fit(
        systems=used.systems,
        ratings=_to_points(theta[:, :n], used.systems, anchor),
        coefficients=theta[:, n:],
        covariate_names=names,
        scales=scales,
        dropped=dropped,
        covariance=np.linalg.inv(hessian[0]),
    )


_CHUNK_CELLS = 1_000_000  # replicates x units per Newton solve with covariates (about 8 MB per array)
# Replicates with covariates stop after a Newton step below this (r units): Newton converges quadratically, so what
# remains is of the order of its square (measured: under 0.001 rating points on 100,000 votes), while one more pass
# over every battle of every replicate would cost a third of the fit.
_TOL_REPLICATE = 1e-3


def _one_step(n: int, units: _Units, optimum: np.ndarray, hessian: np.ndarray, prior_sd: float):
    """A function giving each replicate's first step from the data's optimum, with the data's Hessian: ``H^-1 g``,
    where ``g``, the replicate's gradient there, is linear in its games and points (the odds at the optimum are
    fixed, so they are computed once)."""
    assert units.basis is not None
    precision = (SCALE / prior_sd) ** 2
    r = optimum[:n]
    lengths = np.array([end - start for start, end in units.bounds])
    eta = np.repeat(r[units.i] - r[units.j], lengths) + units.x @ optimum[n:]
    basis = units.basis
    expected = basis / (1.0 + np.exp(-ALPHA * eta))[:, None]  # [1, x] times P(the pair's first system wins)

    def step(games: np.ndarray, points: np.ndarray) -> np.ndarray:
        sums = np.empty((len(games), len(units.i), basis.shape[1]))  # points - games * p against [1, x]
        for pair, (start, end) in enumerate(units.bounds):
            sums[:, pair] = points[:, start:end] @ basis[start:end] - games[:, start:end] @ expected[start:end]
        gradient = np.hstack([ALPHA * sums[..., 0] @ units.design, ALPHA * sums[..., 1:].sum(axis=1)])
        return np.linalg.solve(hessian, (gradient - precision * optimum).T).T

    return step


def bootstrap_bt(outcomes: Outcomes, **options: Any) -> np.ndarray:
    """Ratings for the data (row 0) and for each bootstrap replicate (rows 1..rounds) (:func:`bootstrap_fit`, whose
    keyword options it takes: ``rounds``, ``seed``, ``prior_sd``, ``anchor``, ``weights``).

    ``weights`` (replicates x outcome rows) replaces the seeded multinomial draw, e.g. to compare
    with another solver on the same replicates.
    """
    return bootstrap_fit(outcomes, **options).ratings


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


RATING_TABLE_COLUMNS = (
    "system",
    "rating",
    "ci_low",
    "ci_high",
    "rank",
    "group",
    "battles",
    "wins",
    "ties",
    "losses",
    "elo",
    "p_above_next",
)
COEFFICIENT_COLUMNS = ("covariate", "coefficient", "ci_low", "ci_high", "points_per_sd", "sd")
RESOLVED = 0.95  # a pair's order counts as resolved once the bootstrap puts it this likely
Z_RESOLVED = 1.6448536269514722  # the normal quantile of RESOLVED


@dataclass(frozen=True)
class RatingFit:
    """What :func:`fit_ratings` reports: the table, the covariates' coefficients, what was left out, the closest pair.

    ``coefficients`` (one row per fitted covariate, :data:`COEFFICIENT_COLUMNS`): ``coefficient`` and its 95%
    bootstrap interval in natural log-odds of side A winning per standard deviation of the covariate (LMArena's
    unit), ``points_per_sd`` the same in rating points, ``sd`` the standard deviation the covariate was divided
    by. ``dropped``: covariates asked for but not fitted, with the reason (:func:`usable_covariates`).
    ``closest``: the adjacent pair (same group) whose order the bootstrap is least sure of, or None.
    """

    table: pd.DataFrame
    coefficients: pd.DataFrame
    covariates: tuple[str, ...]  # those asked for
    dropped: tuple[tuple[str, str], ...]
    closest: ClosestPair | None

    @property
    def fitted(self) -> tuple[str, ...]:
        return tuple(self.coefficients["covariate"])


@dataclass(frozen=True)
class ClosestPair:
    """Two systems next to each other on the board: how sure the bootstrap is of their order, and about how many
    more votes, in the mix of pairs seen so far, would make it :data:`RESOLVED` (None: already resolved; inf: the
    two are level, no number of votes is likely to separate them)."""

    upper: str
    lower: str
    p_above: float
    votes: int
    more_votes: float | None


def fit_ratings(
    battles: pd.DataFrame | Iterable[dict],
    *,
    rounds: int = 200,
    seed: int = 0,
    prior_sd: float = PRIOR_SD,
    anchor: tuple[str, float] | None = None,
    k: float = ELO_K,
    covariates: Sequence[str] = (),
) -> RatingFit:
    """The ratings table (:func:`compute_ratings`) from one fit, with ``covariates`` (columns of ``battles``,
    :func:`aggregate`) fitted beside the ratings when any is usable; otherwise, and with none asked, plain
    Bradley–Terry. The table's ``p_above_next`` is the share of bootstrap replicates in which the system is rated
    above the next one down of its group (ties half); None for the last of a group.
    """
    frame = as_frame(battles)
    names = tuple(covariates)
    empty_coefficients = pd.DataFrame(columns=list(COEFFICIENT_COLUMNS))
    if frame.empty:
        dropped = tuple((name, "constant") for name in names)
        return RatingFit(pd.DataFrame(columns=list(RATING_TABLE_COLUMNS)), empty_coefficients, names, dropped, None)
    if rounds < 1:
        raise ValueError("bootstrap intervals need at least one round")
    outcomes = aggregate(frame, covariates=names)
    fit = bootstrap_fit(outcomes, rounds=rounds, seed=seed, prior_sd=prior_sd, anchor=anchor)
    fits = fit.ratings
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
    order = table.index.to_numpy()  # positions in outcomes.systems, best first
    above = np.full(len(order), np.nan)
    closest: ClosestPair | None = None
    groups = table["group"].to_numpy()
    neighbours = [  # (row, row of the next one down of the same group), in the table's order
        (t, u) for g in dict.fromkeys(groups.tolist()) for t, u in itertools.pairwise(np.flatnonzero(groups == g))
    ]
    for t, u in neighbours:
        upper, lower = order[t], order[u]
        difference = fits[1:, upper] - fits[1:, lower]
        above[t] = float(np.mean(difference > 0) + 0.5 * np.mean(difference == 0))
        if closest is None or above[t] < closest.p_above:
            closest = ClosestPair(
                upper=outcomes.systems[upper],
                lower=outcomes.systems[lower],
                p_above=above[t],
                votes=outcomes.n_battles,
                more_votes=_more_votes(fits[0, upper] - fits[0, lower], difference, above[t], outcomes.n_battles),
            )
    table["p_above_next"] = above
    scale = ALPHA  # r units -> natural log-odds
    coefficient_low, coefficient_high = (
        np.quantile(fit.coefficients[1:], [0.025, 0.975], axis=0) if len(fit.coefficients) > 1 else (None, None)
    )
    coefficients = pd.DataFrame(
        {
            "covariate": list(fit.covariate_names),
            "coefficient": scale * fit.coefficients[0],
            "ci_low": scale * coefficient_low if coefficient_low is not None else np.nan,
            "ci_high": scale * coefficient_high if coefficient_high is not None else np.nan,
            "points_per_sd": SCALE * fit.coefficients[0],
            "sd": fit.scales,
        },
        columns=list(COEFFICIENT_COLUMNS),
    )
    return RatingFit(
        table[list(RATING_TABLE_COLUMNS)].reset_index(drop=True), coefficients, names, fit.dropped, closest
    )


def _more_votes(estimate: float, replicates: np.ndarray, p_above: float, votes: int) -> float | None:
    """About how many more votes make the pair's order :data:`RESOLVED`, if votes keep coming in today's mix.

    The bootstrap spread of the difference shrinks as one over the square root of the votes, so the order is
    resolved once ``|difference| / spread`` reaches :data:`Z_RESOLVED`: at ``votes * (Z * spread / |d|) ** 2``
    votes. None when it is resolved already; inf when the two are level (no estimate can be made).
    """
    if max(p_above, 1.0 - p_above) >= RESOLVED:
        return None
    spread = float(np.std(replicates))
    if abs(estimate) < 1e-9 or spread <= 0:
        return math.inf
    needed = votes * (Z_RESOLVED * spread / abs(estimate)) ** 2
    return max(0.0, needed - votes)


def compute_ratings(battles: pd.DataFrame | Iterable[dict], **options: Any) -> pd.DataFrame:
    """One row per system, best first: ``system, rating, ci_low, ci_high, rank, group, battles, wins,
    ties, losses, elo, p_above_next`` (:func:`fit_ratings`, whose keyword options it takes and which also gives the
    covariates' coefficients).

    ``rating`` is the full-data fit; ``ci_low``/``ci_high`` the 2.5% / 97.5% quantiles of ``rounds``
    seeded bootstrap replicates; ``group`` numbers the sets of systems connected by battles
    (:func:`comparison_groups`; group 1 holds the top system); ``ties`` include both_bad votes;
    ``elo`` is online Elo with ``k``; ``p_above_next`` how sure the bootstrap is that the system is above
    the next one down.
    """
    return fit_ratings(battles, **options).table


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
