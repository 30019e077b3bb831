"""Leaderboard maths at scale: Bradley–Terry + 200 bootstrap rounds on 100,000 votes among 20 systems.

Times the batched fit (votes reduced to unique outcome counts, multinomial replicates, one batched
Newton solve) against refitting every replicate with ``scipy.optimize.minimize`` (L-BFGS-B on the
same counts, FastChat's method), and reports how far apart their 95% intervals are.

    python bench/leaderboard.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np
from scipy.optimize import minimize
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from synthetic_votes import synthetic_votes

from arena.ratings import (
    ALPHA,
    PRIOR_SD,
    SCALE,
    aggregate,
    bootstrap_bt,
    bootstrap_weights,
)

N_SYSTEMS, N_VOTES, ROUNDS, SEED, REPEATS = 20, 100_000, 200, 0, 5


def scipy_fit(outcomes, weights: np.ndarray) -> np.ndarray:
    """One replicate: the penalised BT likelihood over the weighted outcome rows, by L-BFGS-B."""
    n = len(outcomes.systems)
    precision = (SCALE / PRIOR_SD) ** 2

    def loss(r):
        d = ALPHA * (r[outcomes.a] - r[outcomes.b])
        y = outcomes.score
        nll = (weights * (y * np.logaddexp(0, -d) + (1 - y) * np.logaddexp(0, d))).sum() + precision * r @ r / 2
        g = weights * ALPHA * (y - 1 / (1 + np.exp(-d)))
        return nll, -np.bincount(outcomes.a, g, n) + np.bincount(outcomes.b, g, n) + precision * r

    result = minimize(
        loss, np.zeros(n), jac=True, method="L-BFGS-B", options={"gtol": 1e-9, "ftol": 1e-14, "maxiter": 5000}
    )
    return 1000 + SCALE * result.x


def main() -> None:
    votes = synthetic_votes(N_SYSTEMS, N_VOTES, SEED, name="system_{i:02d}")
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        outcomes = aggregate(votes)
        batched = bootstrap_bt(outcomes, rounds=ROUNDS, seed=SEED)
        times.append(time.perf_counter() - start)
    fit_s = statistics.median(times)

    weights = bootstrap_weights(outcomes, ROUNDS, SEED)  # the replicates bootstrap_bt drew
    start = time.perf_counter()
    with threadpool_limits(limits=1, user_api="blas"):  # fairest setting for many tiny solves
        looped = np.array([scipy_fit(outcomes, w) for w in weights])
    looped_s = time.perf_counter() - start

    batched_ci = np.quantile(batched[1:], [0.025, 0.975], axis=0)
    looped_ci = np.quantile(looped, [0.025, 0.975], axis=0)
    ci_diff = float(np.abs(batched_ci - looped_ci).max())
    print(f"{N_VOTES:,} votes among {N_SYSTEMS} systems -> {len(outcomes.count)} unique outcome rows")
    print(
        f"batched: aggregate + fit + {ROUNDS} bootstrap rounds, median of {REPEATS}: {fit_s:.3f} s "
        f"(runs: {', '.join(f'{t:.3f}' for t in times)})"
    )
    print(
        f"looped scipy.optimize.minimize, {ROUNDS} replicates (without aggregation): {looped_s:.2f} s "
        f"-> batched is {looped_s / fit_s:.1f}x faster"
    )
    print(f"largest rating difference on one replicate: {np.abs(batched[1:] - looped).max():.4f} points")
    print(f"BENCH leaderboard_fit_s {fit_s:.3f} s target <= 0.5")
    print(f"BENCH leaderboard_ci_max_diff {ci_diff:.4f} points target <= 1")


if __name__ == "__main__":
    main()
