"""Votes count for the set that earned them (#72): a small local version's row carries the set that answered
(``kbrd_small@v8``), read from what its turns recorded, so an earlier set's votes and scores never count for a newer
set under the same name; the arena's pair choice counts the battles of what runs now."""

from __future__ import annotations

import random

from arena.battles import choose_pair
from arena.board_compute import compute_leaderboard
from arena.board_view import board_view
from crs_backends import registry
from storage.battle_votes import battle_counts, save_battle, save_vote, voted_battles
from storage.board_inputs import vote_tallies
from storage.conversations import save_conversation
from storage.db import get_db
from storage.evaluations import finish_evaluation, save_factor_score, start_evaluation
from storage.records import Battle, Conversation, Evaluation, FactorScore, Turn, Vote
from storage.stats import latest_evaluations


def _conversation(db, system: str, version: str | None) -> str:
    """A conversation of ``system``; with ``version``, its system turn says a small local version of that set
    answered, as every neural turn records."""
    metadata = {"origin": "small local", "version": version, "system": system} if version else {"origin": ""}
    turns = [Turn("user", "a comedy?"), Turn("system", "Try Airplane! (1980).", metadata=metadata)]
    return save_conversation(db, Conversation(system_id=system, source="arena", turns=turns)).id


def _battle(db, small_version: str | None, choice: str, n: int = 1, *, against: str = "chatcrs") -> None:
    for _ in range(n):
        a, b = _conversation(db, "kbrd_small", small_version), _conversation(db, against, None)
        saved = save_battle(db, Battle(system_a="kbrd_small", system_b=against, conversation_a=a, conversation_b=b))
        save_vote(db, Vote(battle_id=saved.id, choice=choice))


def _evaluate(db, conversation_id: str, overall: float) -> None:
    evaluation = start_evaluation(db, Evaluation(conversation_id=conversation_id, scorer="proxy"))
    save_factor_score(db, evaluation.id, FactorScore("coherence", 3.0, "j", "core-1"))
    finish_evaluation(db, evaluation.id, overall=overall, metrics={})


def test_each_set_has_its_own_row_with_its_own_votes_and_scores(db_path):
    db = get_db(db_path)
    _battle(db, "v7", "b", 5)  # the earlier set lost every vote
    _battle(db, "v8", "a", 3)  # the newer one won its three
    _evaluate(db, _conversation(db, "kbrd_small", "v7"), 20.0)
    _evaluate(db, _conversation(db, "kbrd_small", "v8"), 70.0)
    sides = {b["system_a"] for b in voted_battles(db)}
    assert sides == {"kbrd_small@v7", "kbrd_small@v8"}
    assert {(t["system_a"], t["choice"], t["n"]) for t in vote_tallies(db)} == {
        ("kbrd_small@v7", "b", 5),
        ("kbrd_small@v8", "a", 3),
    }
    rows = {r["system"]: r for r in compute_leaderboard(db, rounds=50, scorer="proxy")[0]}
    v7, v8 = rows["kbrd_small@v7"], rows["kbrd_small@v8"]
    assert (v7["battles"], v7["losses"]) == (5, 5) and (v8["battles"], v8["wins"]) == (3, 3)
    assert v7["overall_mean"] == 20.0 and v8["overall_mean"] == 70.0
    assert "kbrd_small" not in rows and rows["chatcrs"]["battles"] == 8
    assert {e["system_id"] for e in latest_evaluations(db, scorer="proxy")} == {"kbrd_small@v7", "kbrd_small@v8"}
    summary = board_view(db).summary
    assert "`kbrd_small@v7`, `kbrd_small@v8`" in summary and "never count for a newer set" in summary


def test_a_conversation_that_records_no_set_keeps_its_id(db_path):
    db = get_db(db_path)
    plain = _conversation(db, "chatcrs", None)
    saved = save_battle(
        db, Battle(system_a="kbrd_small", system_b="chatcrs", conversation_a=None, conversation_b=plain)
    )
    save_vote(db, Vote(battle_id=saved.id, choice="tie"))
    assert {(b["system_a"], b["system_b"]) for b in voted_battles(db)} == {("kbrd_small", "chatcrs")}
    assert "Small local versions by set" not in board_view(db).summary


def test_the_pair_choice_counts_the_battles_of_what_runs_now(db_path):
    """Battles of the set that runs count for ``kbrd_small``, an earlier set's never: with the set that runs met
    chatcrs four times and an earlier set met retrieval four times, the fewest-battles pair is kbrd_small and
    retrieval."""
    db = get_db(db_path)
    running = registry.board_id("kbrd_small")
    assert "@" in running  # the shipped set runs
    now = running.split("@")[1]
    earlier = "v1" if now != "v1" else "v0"
    _battle(db, now, "a", 4)
    _battle(db, earlier, "b", 4, against="retrieval")
    other = save_battle(db, Battle("chatcrs", "retrieval", None, None))
    save_vote(db, Vote(battle_id=other.id, choice="a"))
    assert battle_counts(db)[("kbrd_small@" + earlier, "retrieval")] == 4
    for n in range(10):
        pair = choose_pair(db, ["kbrd_small", "chatcrs", "retrieval"], random.Random(n), rule="fewest")
        assert sorted(pair) == ["kbrd_small", "retrieval"]
