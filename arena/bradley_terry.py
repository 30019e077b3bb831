"""The Bradley–Terry fit of battle outcomes (:class:`arena.battle_outcomes.Outcomes`), with bootstrap replicates
and, when asked, style covariates.

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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.sparse import csr_matrix
from threadpoolctl import ThreadpoolController

from arena.battle_outcomes import Outcomes

SCALE = 400.0

BASE_RATING = 1000.0

ALPHA = np.log(10.0)  # natural-log odds per unit of r (one unit of r = 400 points)

PRIOR_SD = 400.0  # rating points

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
        # every replicate's counts in one bincount (replicate r's rows offset by r * rows): the same counts as one
        # bincount per replicate, without a Python loop over the replicates
        offsets = (np.arange(size, dtype=np.int64) * rows)[:, None]
        yield np.bincount((drawn + offsets).ravel(), minlength=size * rows).reshape(size, rows).astype(float)


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
# remains is of the order of its square, while one more pass over every battle of every replicate costs a third of
# the fit. At 3e-2 against 1e-3 (2026-12-02, bench/leaderboard.py's kind boards: 100,000 styled votes, 200 rounds,
# every kind's fit) no replicate's rating moved more than 0.19 rating points and no 95% interval end more than 0.03,
# while the boards of every kind took 0.69 s instead of 0.90 s (the all-votes fit alone, which converges sooner,
# did not move at all)
_TOL_REPLICATE = 3e-2


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
