"""Pair choice: votes until every neighbour's order on the board is settled at 95%, the informative rule against the
fewest-battles rule, on votes simulated from known strengths.

For each seed: eight systems whose neighbours are 30 to 90 rating points apart (``spaced_strengths``), votes drawn
from the synthetic vote model (80% decisive with Bradley–Terry odds, 10% ties, 10% both bad). Each rule draws
pairs one vote at a time (the informative rule refreshes its weights every ``REFRESH`` votes, as it would when
several battles run between votes); every ``CHECK`` votes the board is checked: settled when, in the order of the
fitted ratings, every system is above the next one in at least 95% of 200 bootstrap rounds (the board's own
``P(above next)``; the Laplace approximation only skips checks that are clearly short). A run stops at
``MAX_VOTES``. Both rules see the same strengths; the votes each draws differ.

The rule's form (weights, floor) was chosen on the seeds in ``TUNING_SEEDS``; the figures are reported on
``REPORT_SEEDS``, which the choice never saw.

    python bench/pairing.py            # the reported seeds
    python bench/pairing.py --tuning   # the seeds the rule was chosen on
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from itertools import combinations
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from synthetic_votes import spaced_strengths, winners

from arena.battle_outcomes import Outcomes
from arena.bradley_terry import SCALE, bootstrap_fit
from arena.pairing import FLOOR, pair_probabilities
from arena.ratings import RESOLVED, Z_RESOLVED

N_SYSTEMS = 8
CHECK = 20  # votes between checks of the board
REFRESH = 10  # votes between refreshes of the informative rule's weights
MAX_VOTES = 20_000
ROUNDS = 200
STREAMS = 2  # vote streams per seed (runs are noisy: the stopping time of one run varies a lot)
TUNING_SEEDS = tuple(range(100, 108))
REPORT_SEEDS = tuple(range(12))


def outcomes(tally: np.ndarray, systems: tuple[str, ...]) -> Outcomes:
    """The votes so far (``tally[a, b, points]``, points doubled: 0, 1, 2) as outcome rows."""
    n = len(systems)
    flat = tally.reshape(-1)
    rows = np.flatnonzero(flat)
    return Outcomes(systems, rows // (3 * n), rows // 3 % n, (rows % 3) / 2.0, flat[rows])


def settled(data: Outcomes, seed: int) -> bool:
    """Every system above the next one down (fitted order) in at least 95% of the bootstrap rounds."""
    fit = bootstrap_fit(data, rounds=0)
    r = fit.ratings[0]
    order = np.argsort(-r, kind="stable")
    n = len(order)
    covariance = fit.covariance[:n, :n] * SCALE**2
    for upper, lower in zip(order[:-1], order[1:]):  # the Laplace approximation: skip checks clearly short
        variance = covariance[upper, upper] + covariance[lower, lower] - 2 * covariance[upper, lower]
        if (r[upper] - r[lower]) / math.sqrt(variance) < 0.9 * Z_RESOLVED:
            return False
    ratings = bootstrap_fit(data, rounds=ROUNDS, seed=seed).ratings[1:]
    return all(np.mean(ratings[:, u] > ratings[:, v]) >= RESOLVED for u, v in zip(order[:-1], order[1:]))


def run(rule: str, seed: int, stream: int = 0) -> tuple[int, bool]:
    """Votes until the board is settled under ``rule`` (``MAX_VOTES`` if never), and whether its order is the true
    one then: the strengths of ``seed``, the votes of ``stream``."""
    strength = spaced_strengths(N_SYSTEMS, seed)
    systems = tuple(f"s{i}" for i in range(N_SYSTEMS))
    pairs = np.array(list(combinations(range(N_SYSTEMS), 2)))
    rng = np.random.default_rng([seed, stream, 0 if rule == "fewest" else 1])
    tally = np.zeros((N_SYSTEMS, N_SYSTEMS, 3))
    battles = np.zeros(len(pairs))
    probabilities = np.full(len(pairs), 1.0 / len(pairs))
    refreshed = -REFRESH  # the vote at which the informative weights were last computed
    for vote in range(1, MAX_VOTES + 1):
        fewest = np.flatnonzero(battles == battles.min())
        if rule == "fewest" or battles.min() == 0:  # the informative rule, too, lets every pair meet once first
            chosen = rng.choice(fewest)
        else:
            if vote - refreshed >= REFRESH:
                probabilities, refreshed = pair_probabilities(outcomes(tally, systems)), vote
            chosen = rng.choice(len(pairs), p=probabilities)
        a, b = pairs[chosen] if rng.random() < 0.5 else pairs[chosen][::-1]
        p_a = 1 / (1 + 10 ** ((strength[b] - strength[a]) / 400))
        points = {"a": 2, "b": 0, "tie": 1, "both_bad": 1}[str(winners(rng.random(1), np.array([p_a]))[0])]
        tally[a, b, points] += 1
        battles[chosen] += 1
        if vote % CHECK == 0 and battles.min() > 0 and settled(outcomes(tally, systems), seed):
            fitted = bootstrap_fit(outcomes(tally, systems), rounds=0).ratings[0]
            return vote, bool((np.argsort(-fitted) == np.argsort(-strength)).all())
    return MAX_VOTES, False


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tuning", action="store_true", help="run the seeds the rule was chosen on instead")
    args = parser.parse_args(argv)
    seeds = TUNING_SEEDS if args.tuning else REPORT_SEEDS
    start = time.perf_counter()
    results: dict[str, list[tuple[int, bool]]] = {"fewest": [], "informative": []}
    for seed in seeds:
        for stream in range(STREAMS):
            for rule in results:
                results[rule].append(run(rule, seed, stream))
            old, new = results["fewest"][-1][0], results["informative"][-1][0]
            print(f"seed {seed:3d}.{stream}: fewest {old:6,d} votes, informative {new:6,d} votes ({new / old:.2f})")
    totals = {rule: sum(v for v, _ in outcome) for rule, outcome in results.items()}
    ratio = totals["informative"] / totals["fewest"]
    per_seed = [n[0] / o[0] for n, o in zip(results["informative"], results["fewest"])]
    capped = sum(v == MAX_VOTES for outcome in results.values() for v, _ in outcome)
    right = {rule: sum(ok for _, ok in outcome) for rule, outcome in results.items()}
    runs = len(seeds) * STREAMS
    print(
        f"{len(seeds)} {'tuning' if args.tuning else 'reported'} seeds x {STREAMS} vote streams, {N_SYSTEMS} systems, "
        f"floor {FLOOR}: "
        f"fewest {totals['fewest']:,} votes in all, informative {totals['informative']:,}; median per-seed ratio "
        f"{statistics.median(per_seed):.2f}; runs that hit {MAX_VOTES:,} votes: {capped}; "
        f"settled order = true order: fewest {right['fewest']}/{runs}, informative "
        f"{right['informative']}/{runs}; {time.perf_counter() - start:.0f} s"
    )
    print(f"BENCH votes_to_resolve_ratio {ratio:.3f} ratio target <= 0.8")


if __name__ == "__main__":
    main()
