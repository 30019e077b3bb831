"""Pair choice (arena.pairing, arena.battles.choose_pair): the informative rule, its floor, the setting that keeps
the fewest-battles rule; on real SQLite through the arena's own function."""

import random
from collections import Counter
from itertools import combinations

import numpy as np
import pytest

from arena import battles as arena
from arena.pairing import (
    DEFAULT_RULE,
    FLOOR,
    informative_weights,
    outcomes_from_tallies,
    pair_probabilities,
    pairing_rule,
)
from storage.battle_votes import save_battle, save_vote
from storage.db import get_db
from storage.records import Battle, Vote

SYSTEMS = ["a", "b", "c", "d"]


def vote(db, a: str, b: str, choice: str, n: int = 1) -> None:
    for _ in range(n):
        battle = save_battle(db, Battle(system_a=a, system_b=b, conversation_a=None, conversation_b=None))
        save_vote(db, Vote(battle_id=battle.id, choice=choice))


def test_the_setting_keeps_the_old_rule_and_an_unknown_value_falls_back():
    assert pairing_rule({}) == DEFAULT_RULE == "informative"
    assert pairing_rule({"CRS_ARENA_PAIRING": " Fewest "}) == "fewest"
    assert pairing_rule({"CRS_ARENA_PAIRING": "bogus"}) == DEFAULT_RULE


# (system_a, system_b, choice, votes): a far above everyone, b and c level and barely compared, d far below
LOPSIDED = [
    ("a", "b", "a", 40),
    ("a", "c", "a", 40),
    ("a", "d", "a", 40),
    ("b", "d", "a", 30),
    ("c", "d", "a", 30),
    ("b", "c", "a", 1),
    ("b", "c", "b", 1),
]


def test_the_next_vote_goes_where_the_order_is_unsure_and_every_pair_keeps_a_floor():
    outcomes = outcomes_from_tallies(SYSTEMS, LOPSIDED)
    pairs = list(combinations(SYSTEMS, 2))
    weights = dict(zip(pairs, informative_weights(outcomes)))
    assert max(weights, key=weights.__getitem__) == ("b", "c")  # level neighbours with two votes between them
    assert weights[("b", "c")] > 10 * weights[("a", "d")]  # a settled pair that is not even neighbours
    probabilities = dict(zip(pairs, pair_probabilities(outcomes)))
    assert sum(probabilities.values()) == pytest.approx(1.0)
    floor = FLOOR / len(pairs)
    assert all(p >= floor - 1e-12 for p in probabilities.values())  # every pair keeps being drawn
    assert probabilities[("b", "c")] == pytest.approx(1 - FLOOR + floor)
    assert pair_probabilities(outcomes, floor=0.5)[pairs.index(("a", "d"))] == pytest.approx(0.5 / len(pairs))


def test_with_nothing_unsure_or_no_votes_every_pair_is_as_likely():
    assert np.allclose(pair_probabilities(outcomes_from_tallies(SYSTEMS, [])), 1 / 6)
    assert outcomes_from_tallies(SYSTEMS, [("a", "zz", "a", 3), ("a", "b", "nonsense", 1)]).n_battles == 0


def test_the_arena_lets_every_pair_meet_once_then_draws_where_votes_teach(db_path):
    db = get_db(db_path)
    rng = random.Random(3)
    for a, b, choice, n in LOPSIDED[:-2]:  # (b, c) has never met
        vote(db, a, b, choice, n)
    assert {tuple(sorted(arena.choose_pair(db, SYSTEMS, rng))) for _ in range(20)} == {("b", "c")}
    vote(db, "b", "c", "a")
    vote(db, "c", "b", "a")
    drawn = Counter(tuple(sorted(arena.choose_pair(db, SYSTEMS, rng))) for _ in range(600))
    assert set(drawn) == set(combinations(SYSTEMS, 2))  # the floor: every pair is still drawn
    assert drawn[("b", "c")] > 400  # about 1 - FLOOR + FLOOR / 6 of the draws
    assert {side for pair in drawn.elements() for side in pair} == set(SYSTEMS)
    # the setting keeps the old rule: fewest battles first, whatever the votes say
    fewest = Counter(tuple(sorted(arena.choose_pair(db, SYSTEMS, rng, rule="fewest"))) for _ in range(50))
    assert set(fewest) == {("b", "c")}  # 2 battles against 30 or 40


def test_sides_stay_random_under_the_informative_rule(db_path):
    db = get_db(db_path)
    for a, b, choice, n in LOPSIDED:
        vote(db, a, b, choice, n)
    rng = random.Random(5)
    drawn = Counter(arena.choose_pair(db, SYSTEMS, rng) for _ in range(400))
    assert drawn[("b", "c")] > 100 and drawn[("c", "b")] > 100
