"""Leaderboard maths at scale: Bradley–Terry + 200 bootstrap rounds on 100,000 votes among 20 systems.

Times the batched fit (votes reduced to unique outcome counts, multinomial replicates, one batched
Newton solve) against refitting every replicate with ``scipy.optimize.minimize`` (L-BFGS-B on the
same counts, FastChat's method), and reports how far apart their 95% intervals are.

Style control: the same fit with four style covariates beside the ratings (reply length, items listed,
questions, latency; every battle its own row), on 100,000 simulated votes where length sways people, with
200 bootstrap rounds. When the research data is present (``CRS_DATA_DIR``, else ``../shared/data``), also
CRSArena-Dial's 184 real votes, imported as the Research data tab imports them into a temporary database:
the ranking with and without style control side by side, the coefficients with their 95% intervals, and
Kendall's tau between the two orders.

    python bench/leaderboard.py
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.optimize import minimize
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from synthetic_votes import styled_votes, synthetic_votes

from arena.battle_outcomes import aggregate
from arena.bradley_terry import (
    ALPHA,
    PRIOR_SD,
    SCALE,
    bootstrap_bt,
    bootstrap_fit,
    bootstrap_weights,
)
from arena.style import FEATURES, LABELS

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
    style_control()
    crsarena_dial()


def style_control() -> None:
    """The style-controlled fit's time: aggregate + joint fit + 200 bootstrap rounds, four covariates, 100k votes."""
    votes, _ = styled_votes(N_SYSTEMS, N_VOTES, SEED, name="system_{i:02d}")
    votes["latency"] = np.random.default_rng(SEED).normal(0, 0.3, len(votes))  # recorded here: four covariates
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        outcomes = aggregate(votes, covariates=FEATURES)
        fit = bootstrap_fit(outcomes, rounds=ROUNDS, seed=SEED)
        times.append(time.perf_counter() - start)
    fit_s = statistics.median(times)
    low, high = np.quantile(ALPHA * fit.coefficients[1:], [0.025, 0.975], axis=0)
    coefficients = ", ".join(
        f"{name} {ALPHA * value:+.3f} [{lo:+.3f}, {hi:+.3f}]"
        for name, value, lo, hi in zip(fit.covariate_names, fit.coefficients[0], low, high)
    )
    print(
        f"style control: {N_VOTES:,} votes, {len(outcomes.count):,} unique rows, "
        f"{fit.coefficients.shape[1]} covariates fitted; aggregate + fit + {ROUNDS} bootstrap rounds, "
        f"median of {REPEATS}: {fit_s:.3f} s (runs: {', '.join(f'{t:.3f}' for t in times)})"
    )
    print(f"style coefficients (log-odds per SD, 95% CI): {coefficients}")
    print(f"BENCH style_control_fit_s {fit_s:.3f} s target <= 1.0")


def crsarena_dial() -> None:
    """CRSArena-Dial's votes with and without style control, when the research data is present."""
    from scipy.stats import kendalltau

    from arena.board_compute import compute_board
    from arena.crsarena_import import ImportRefused, import_dial
    from storage.db import close_thread_connections, get_db

    with tempfile.TemporaryDirectory() as folder:
        db = get_db(Path(folder) / "crsarena.db")
        try:
            report = import_dial(db, score=False)  # the votes and dialogues: scoring adds no vote
        except ImportRefused as e:
            print(f"CRSArena-Dial: not measured ({e})")
            close_thread_connections()
            return
        plain, styled = compute_board(db), compute_board(db, style=True)
        close_thread_connections()
    print(f"CRSArena-Dial: {report.summary()}")
    print(f"{'plain rank':>10} {'system':<20} {'rating':>15} | {'style rank':>10} {'system':<20} {'rating':>15}")
    for p, s in zip(plain.rows, styled.rows):
        print(
            f"{p['rank']:>10} {p['system']:<20} {p['rating']:6.0f} [{p['ci_low']:4.0f}, {p['ci_high']:4.0f}] | "
            f"{s['rank']:>10} {s['system']:<20} {s['rating']:6.0f} [{s['ci_low']:4.0f}, {s['ci_high']:4.0f}]"
        )
    for c in styled.fit["coefficients"]:
        print(
            f"  {LABELS[c['covariate']]:<28} {c['coefficient']:+.3f} log-odds per SD, 95% CI "
            f"[{c['ci_low']:+.3f}, {c['ci_high']:+.3f}] ({c['points_per_sd']:+.0f} rating points per SD)"
        )
    for note in styled.fit["notes"]:
        print(f"  note: {note}")
    position = {r["system"]: k for k, r in enumerate(styled.rows)}
    tau = kendalltau(range(len(plain.rows)), [position[r["system"]] for r in plain.rows]).statistic
    print(f"CRSArena-Dial: Kendall's tau between the plain and the style-controlled order: {tau:.3f}")


if __name__ == "__main__":
    main()
