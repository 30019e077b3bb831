"""Ties as an outcome of their own: the Davidson (1970) extension of Bradley–Terry, beside the board's rule that a tie
(or *both bad*) is half a win each way (:mod:`arena.battle_outcomes`).

    P(i beats j) = π_i / (π_i + π_j + ν √(π_i π_j)),    P(tie) = ν √(π_i π_j) / (same denominator)

With ``π = exp(θ)`` and ``d = (θ_i − θ_j) / 2`` the three probabilities are ``e^d``, ``e^-d`` and ``ν`` over their
sum. ``ν`` is the **tie propensity**: between two equal systems a tie is ``ν / (2 + ν)`` likely. *Both bad* is a tie
unless ``both_bad_own=True`` gives it a second propensity ``ν_bad`` (measured in ``bench/leaderboard.py`` by a
likelihood-ratio test: the second parameter is warranted only if it improves the fit). Ratings are on the board's
scale (``1000 + 400 · log10 π``, mean 1000) with the same weak Gaussian prior, fitted by maximum likelihood
(``scipy.optimize``, L-BFGS-B, analytic gradient) over the votes' unique rows; the bootstrap reweights those rows
(multinomial, seeded) and refits from the data's optimum.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import minimize

from arena.battle_outcomes import OUTCOMES, as_frame
from arena.bradley_terry import ALPHA, BASE_RATING, PRIOR_SD, SCALE


@dataclass(frozen=True)
class DavidsonFit:
    """Ratings (row 0 the data, rows 1.. the bootstrap replicates; rating points), the tie propensity ``nu`` (and
    ``nu_bad`` with ``both_bad_own``) per row, and the data's log-likelihood."""

    systems: tuple[str, ...]
    ratings: np.ndarray
    nu: np.ndarray
    nu_bad: np.ndarray | None
    log_likelihood: float

    def table(self) -> pd.DataFrame:
        """One row per system, best first: rating and its 95% bootstrap interval."""
        low, high = (
            np.quantile(self.ratings[1:], [0.025, 0.975], axis=0)
            if len(self.ratings) > 1
            else (self.ratings[0], self.ratings[0])
        )
        frame = pd.DataFrame({"system": self.systems, "rating": self.ratings[0], "ci_low": low, "ci_high": high})
        return frame.sort_values("rating", ascending=False, kind="stable").reset_index(drop=True)

    def nu_interval(self) -> tuple[float, float]:
        values = self.nu[1:] if len(self.nu) > 1 else self.nu
        low, high = np.quantile(values, [0.025, 0.975])
        return float(low), float(high)


def _rows(frame: pd.DataFrame, systems: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Unique (a, b, outcome) rows and their counts; outcome 0 a, 1 b, 2 tie, 3 both_bad."""
    position = {s: k for k, s in enumerate(systems)}
    a = frame["model_a"].map(position).to_numpy(dtype=np.int64)
    b = frame["model_b"].map(position).to_numpy(dtype=np.int64)
    outcome = pd.Categorical(frame["winner"], categories=OUTCOMES).codes.astype(np.int64)
    n = len(systems)
    counts = np.bincount((a * n + b) * 4 + outcome, minlength=n * n * 4)
    rows = np.flatnonzero(counts)
    return rows // (4 * n), rows // 4 % n, rows % 4, counts[rows].astype(float)


def _negative_log_likelihood(params, a, b, outcome, weight, n, own, precision):
    """The penalised negative log-likelihood and its gradient. With ``own`` both-bad is a fourth outcome with its
    own propensity: every row's denominator is ``e^d + e^-d + ν + ν_bad``."""
    theta = params[:n]
    nu = np.exp(params[n])
    nu_bad = np.exp(params[n + 1]) if own else 0.0
    d = (theta[a] - theta[b]) / 2.0
    denominator = np.exp(d) + np.exp(-d) + nu + nu_bad
    is_bad = (outcome == 3) if own else np.zeros(len(outcome), dtype=bool)
    is_tie = (outcome >= 2) & ~is_bad
    numerator = np.where(
        outcome == 0, d, np.where(outcome == 1, -d, np.where(is_bad, np.log(nu_bad or 1.0), params[n]))
    )
    loss = -(weight * (numerator - np.log(denominator))).sum() + precision * theta @ theta / 2.0
    p_a, p_b = np.exp(d) / denominator, np.exp(-d) / denominator
    g_d = weight * (np.where(outcome == 0, 1.0, np.where(outcome == 1, -1.0, 0.0)) - (p_a - p_b)) / 2.0
    grad_theta = -(np.bincount(a, g_d, n) - np.bincount(b, g_d, n)) + precision * theta
    grad = [grad_theta, [-(weight * is_tie).sum() + (weight * nu / denominator).sum()]]
    if own:
        grad.append([-(weight * is_bad).sum() + (weight * nu_bad / denominator).sum()])
    return loss, np.concatenate(grad)


def fit_davidson(
    battles: pd.DataFrame, *, rounds: int = 200, seed: int = 0, both_bad_own: bool = False, prior_sd: float = PRIOR_SD
) -> DavidsonFit:
    """The Davidson fit of ``battles`` (``model_a, model_b, winner``) with ``rounds`` bootstrap replicates."""
    frame = as_frame(battles)
    systems = tuple(sorted(set(frame["model_a"]) | set(frame["model_b"])))
    n = len(systems)
    if frame.empty or n < 2:
        return DavidsonFit(systems, np.full((1, n), BASE_RATING), np.zeros(1), None, 0.0)
    a, b, outcome, count = _rows(frame, systems)
    own = bool(both_bad_own)
    # the prior on θ (natural log strength) matching the board's prior on rating points
    precision = (SCALE / (prior_sd * ALPHA)) ** 2
    start = np.zeros(n + 1 + own)

    def solve(weight: np.ndarray, x0: np.ndarray) -> tuple[np.ndarray, float]:
        result = minimize(
            _negative_log_likelihood,
            x0,
            args=(a, b, outcome, weight, n, own, precision),
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": 500, "gtol": 1e-6},
        )
        return result.x, float(result.fun)

    data, loss = solve(count, start)
    fits = [data]
    rng = np.random.default_rng(seed)
    total = int(count.sum())
    for weight in rng.multinomial(total, count / total, size=rounds).astype(float) if rounds else ():
        fits.append(solve(weight, data)[0])
    theta = np.vstack(fits)
    ratings = BASE_RATING + SCALE * (theta[:, :n] - theta[:, :n].mean(axis=1, keepdims=True)) / ALPHA
    log_likelihood = -(loss - precision * data[:n] @ data[:n] / 2.0)
    return DavidsonFit(
        systems=systems,
        ratings=ratings,
        nu=np.exp(theta[:, n]),
        nu_bad=np.exp(theta[:, n + 1]) if own else None,
        log_likelihood=log_likelihood,
    )


@dataclass(frozen=True)
class BothBadTest:
    """Whether *both bad* needs a propensity of its own: the likelihood-ratio statistic of the fit with ``ν_bad``
    against the fit where *both bad* and tie share one (twice the log-likelihood gained, chi-squared with one degree
    of freedom), its p-value, and both propensities. ``votes``: the both-bad votes (none: nothing to measure)."""

    votes: int
    statistic: float
    p_value: float
    nu: float
    nu_bad: float | None

    @property
    def warranted(self) -> bool:
        return self.votes > 0 and self.p_value < 0.05


def both_bad_test(battles: pd.DataFrame) -> BothBadTest:
    """:class:`BothBadTest` on ``battles``. The shared fit merges tie and both-bad into one outcome; as a model of the
    four outcomes it gives each half that probability, so its log-likelihood is the merged one less
    ``log 2`` per tie or both-bad vote."""
    from scipy.stats import chi2

    frame = as_frame(battles)
    bad = int((frame["winner"] == "both_bad").sum())
    shared = fit_davidson(frame, rounds=0)
    if bad == 0:
        return BothBadTest(0, 0.0, 1.0, float(shared.nu[0]), None)
    own = fit_davidson(frame, rounds=0, both_bad_own=True)
    tied = int(frame["winner"].isin(["tie", "both_bad"]).sum())
    statistic = max(0.0, 2.0 * (own.log_likelihood - (shared.log_likelihood - tied * np.log(2.0))))
    nu_bad = float(own.nu_bad[0]) if own.nu_bad is not None else None
    return BothBadTest(bad, float(statistic), float(chi2.sf(statistic, 1)), float(own.nu[0]), nu_bad)
