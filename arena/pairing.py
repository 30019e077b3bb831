"""Which two systems the arena pits against each other next.

Two rules, chosen by the setting ``CRS_ARENA_PAIRING``:

* ``informative`` (the default): battles drawn where the next vote teaches the ranking most, in the spirit of
  LMArena's active sampling. While some pair of systems has never met, or no vote has come in yet, a pair with the
  fewest battles is drawn (every pair meets once first, as under the old rule). After that, from the votes so far:
  a Bradley–Terry fit and its Laplace covariance (:func:`arena.bradley_terry.bootstrap_fit`); for each pair of
  neighbours in the current order, how unsure their order is (the normal probability that it is the wrong way
  round: 0.5 when level, near 0 when settled); and for each candidate pair, how much one more vote between them
  would shrink the variance of each neighbour difference (a rank-one update of the covariance by the vote's Fisher
  information). A pair's weight is the sum over neighbours of unsureness times relative shrinkage, so votes go to
  the pairs whose intervals overlap and that have few votes, directly or through others. The pair with the largest
  weight is drawn, with a floor: :data:`FLOOR` of the draws are spread evenly over every pair, so every pair keeps
  being drawn (the ratings stay checked everywhere, and no pair is starved by a wrong early estimate). On the
  tuning seeds of ``bench/pairing.py``, drawing the best pair needed fewer votes than drawing in proportion to the
  weights (or to their square or cube), so that is the rule.
* ``fewest``: the rule before this one: a random pair among those with the fewest battles.

Sides are random in both. ``bench/pairing.py`` measures the votes each rule needs until every neighbour's order
is settled at 95%, on votes simulated from known strengths.
"""

from __future__ import annotations

import logging
import math
import os
import random
from collections.abc import Iterable, Mapping, Sequence
from itertools import combinations

import numpy as np

from arena.battle_outcomes import Outcomes
from arena.bradley_terry import ALPHA, BASE_RATING, SCALE, bootstrap_fit

log = logging.getLogger(__name__)

SETTING = "CRS_ARENA_PAIRING"
RULES = ("informative", "fewest")
DEFAULT_RULE = "informative"
FLOOR = 0.2  # share of draws spread evenly over every pair, whatever the weights say
POINTS = {"a": 2, "b": 0, "tie": 1, "both_bad": 1}  # side A's points, doubled (battle_outcomes.aggregate's coding)


def pairing_rule(env: Mapping[str, str] | None = None) -> str:
    """The rule ``CRS_ARENA_PAIRING`` names (:data:`RULES`); unset or unknown: :data:`DEFAULT_RULE` (an unknown value
    is logged, not fatal)."""
    raw = ((env if env is not None else os.environ).get(SETTING) or "").strip().lower()
    if raw in RULES:
        return raw
    if raw:
        log.warning("%s=%r is not one of %s; using %s", SETTING, raw, ", ".join(RULES), DEFAULT_RULE)
    return DEFAULT_RULE


def outcomes_from_tallies(systems: Sequence[str], tallies: Iterable[tuple[str, str, str, float]]) -> Outcomes:
    """The votes among ``systems`` as :class:`arena.battle_outcomes.Outcomes`, from ``(system_a, system_b, choice, n)``
    counts (votes naming another system are left out)."""
    position = {s: i for i, s in enumerate(systems)}
    n = len(systems)
    counts = np.zeros(n * n * 3)
    for a, b, choice, votes in tallies:
        if a in position and b in position and a != b and choice in POINTS:
            counts[(position[a] * n + position[b]) * 3 + POINTS[choice]] += votes
    rows = np.flatnonzero(counts)
    return Outcomes(tuple(systems), rows // (3 * n), rows // 3 % n, (rows % 3) / 2.0, counts[rows])


def informative_weights(outcomes: Outcomes) -> np.ndarray:
    """Per pair ``(i, j)`` of ``outcomes.systems`` (``itertools.combinations`` order), how much one more vote
    between them would settle the order of neighbours (see the module's docstring); all zeros when nothing is
    unsure or there are no votes."""
    n = len(outcomes.systems)
    pairs = list(combinations(range(n), 2))
    if n < 2 or outcomes.n_battles == 0:
        return np.zeros(len(pairs))
    fit = bootstrap_fit(outcomes, rounds=0)
    r = (fit.ratings[0] - BASE_RATING) / SCALE
    covariance = fit.covariance[:n, :n]
    order = np.argsort(-r, kind="stable")
    upper, lower = order[:-1], order[1:]
    neighbours = np.zeros((n - 1, n))  # e_upper - e_lower for each pair of neighbours
    neighbours[np.arange(n - 1), upper] = 1.0
    neighbours[np.arange(n - 1), lower] = -1.0
    spread = neighbours @ covariance  # (n-1) x n
    variance = np.einsum("an,an->a", spread, neighbours)
    gap = r[upper] - r[lower]
    unsure = np.array([_normal_tail(g / math.sqrt(v)) for g, v in zip(gap, variance)])  # P(the wrong way round)
    candidates = np.zeros((len(pairs), n))
    first, second = np.array(pairs).T
    candidates[np.arange(len(pairs)), first] = 1.0
    candidates[np.arange(len(pairs)), second] = -1.0
    p = 1.0 / (1.0 + np.exp(-ALPHA * (r[first] - r[second])))
    information = ALPHA**2 * p * (1.0 - p)  # Fisher information of one vote, r units
    own = np.einsum("pn,nm,pm->p", candidates, covariance, candidates)  # variance of each candidate's difference
    shared = spread @ candidates.T  # (n-1) x pairs: covariance of each neighbour difference with each candidate's
    shrink = information * shared**2 / (1.0 + information * own)  # variance removed by one vote
    return unsure @ (shrink / variance[:, None])


def pair_probabilities(outcomes: Outcomes, *, floor: float = FLOOR) -> np.ndarray:
    """The informative rule's probability of drawing each pair (``combinations`` order of ``outcomes.systems``):
    ``floor`` spread evenly over every pair, the rest on the pair whose next vote teaches most (the largest of
    :func:`informative_weights`; shared when several are as large, all even when nothing is unsure)."""
    weights = informative_weights(outcomes)
    even = np.full(len(weights), 1.0 / max(1, len(weights)))
    if len(weights) == 0 or not np.isfinite(weights).all() or weights.max() <= 0:
        return even
    best = (weights >= weights.max() * (1.0 - 1e-9)).astype(float)
    return floor * even + (1.0 - floor) * best / best.sum()


def fewest_battles(pairs: Sequence[tuple[str, str]], counts: Mapping[tuple[str, str], int]) -> list[tuple[str, str]]:
    """The pairs (keys sorted) with the fewest battles so far."""
    fewest = min(counts.get(p, 0) for p in pairs)
    return [p for p in pairs if counts.get(p, 0) == fewest]


def draw_pair(
    systems: Sequence[str],
    counts: Mapping[tuple[str, str], int],
    tallies: Iterable[tuple[str, str, str, float]],
    rng: random.Random,
    *,
    rule: str = DEFAULT_RULE,
) -> tuple[str, str]:
    """An unordered pair (names sorted) of ``systems`` (sorted, distinct, at least two) by ``rule``: ``counts`` are
    battles per pair, ``tallies`` the votes (``(system_a, system_b, choice, n)``)."""
    pairs = list(combinations(systems, 2))
    if rule == "informative" and min(counts.get(p, 0) for p in pairs) > 0:  # every pair has met: learn where it pays
        votes = outcomes_from_tallies(systems, tallies)
        if votes.n_battles:  # with no vote yet only the battle counts tell pairs apart
            return rng.choices(pairs, weights=pair_probabilities(votes).tolist())[0]
    return rng.choice(fewest_battles(pairs, counts))


def _normal_tail(z: float) -> float:
    """P(Z > z) for a standard normal Z."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))
