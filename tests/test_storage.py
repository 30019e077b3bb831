import sqlite3
import threading

import pytest

from storage.battle_votes import (
    DuplicateVote,
    battle_counts,
    get_battle,
    get_vote,
    latest_leaderboard_snapshot,
    save_battle,
    save_leaderboard_snapshot,
    save_vote,
    voted_battles,
)
from storage.conversations import append_turns, get_conversation, list_conversations, save_conversation, set_status
from storage.db import get_db, open_db, schema_version, write_transaction
from storage.evaluations import (
    finish_evaluation,
    get_evaluation,
    save_debate_message,
    save_factor_score,
    start_evaluation,
)
from storage.llm_log import cache_get, cache_put, log_call, usage_summary
from storage.records import (
    Battle,
    Conversation,
    DebateMessage,
    Evaluation,
    FactorScore,
    ItemRef,
    Turn,
    Vote,
)


def _conversation(**kw) -> Conversation:
    return Conversation(
        system_id=kw.pop("system_id", "chatcrs"),
        history=[
            Turn("user", "I liked Heat"),
            Turn("system", "Try Ronin", items=[ItemRef("ronin-1998", "Ronin (1998)")]),
        ],
        turns=[
            Turn("user", "Something newer? 日本語 ✓ <b>x</b>"),
            Turn(
                "system",
                "Drive (2011)",
                items=[ItemRef("drive-2011", "Drive (2011)"), ItemRef("heat-1995", "Heat (1995)")],
                metadata={"unmatched_titles": ["Nope (1900)"]},
            ),
        ],
        targets=[ItemRef("drive-2011", "Drive (2011)")],
        metadata={"k": [1, 2]},
        **kw,
    )


def test_schema_wal_and_version(db_path):
    db = open_db(db_path)
    assert db.journal_mode == "wal"
    assert schema_version(db) >= 1
    for table in [
        "conversations",
        "turns",
        "evaluations",
        "factor_scores",
        "debate_messages",
        "battles",
        "votes",
        "leaderboard_snapshots",
        "llm_cache",
        "llm_calls",
    ]:
        assert db[table].exists(), table
    assert db.execute("pragma busy_timeout").fetchone()[0] >= 5000
    # reopening applies nothing twice
    again = open_db(db_path)
    assert schema_version(again) == schema_version(db)


def test_conversation_round_trip(db_path):
    db = get_db(db_path)
    c = save_conversation(db, _conversation())
    loaded = get_conversation(db, c.id)
    assert loaded == c
    assert loaded.turns[1].items[0] == ItemRef("drive-2011", "Drive (2011)")
    assert get_conversation(db, "missing") is None


def test_append_turns_creates_then_extends(db_path):
    db = get_db(db_path)
    c = Conversation(system_id="chatcrs")
    append_turns(db, c, [Turn("user", "hello")])
    append_turns(db, c, [Turn("system", "hi", items=[ItemRef("x", "X (2000)")])])
    loaded = get_conversation(db, c.id)
    assert [t.text for t in loaded.turns] == ["hello", "hi"]
    set_status(db, c.id, "done", note="ok")
    assert get_conversation(db, c.id).metadata == {"note": "ok"}
    assert [x.id for x in list_conversations(db, system_id="chatcrs")] == [c.id]


def test_evaluation_round_trip_keeps_errors_apart_from_zero(db_path):
    db = get_db(db_path)
    c = save_conversation(db, _conversation())
    ev = start_evaluation(db, Evaluation(conversation_id=c.id, scorer="llm:test", rubric_version="core-1"))
    save_factor_score(db, ev.id, FactorScore("coherence", 3.2, "m1", "core-1", {"0": 0.1, "4": 0.9}, "fine"))
    save_factor_score(db, ev.id, FactorScore("novelty", None, "m1", "core-1", error="rating_parse_failure"))
    save_factor_score(db, ev.id, FactorScore("coherence", 3.5, "m1", "core-1"))  # a retry replaces
    save_debate_message(db, ev.id, DebateMessage(1, "linguist", "m1", "Fluent.", 80.0))
    finish_evaluation(
        db, ev.id, overall=80.0, rounds_used=1, consensus=True, metrics={"recall@1": 1.0}, usage={"calls": 13}
    )
    got = get_evaluation(db, ev.id)
    assert got.metrics == {"recall@1": 1.0} and got.usage == {"calls": 13}
    scores = {f.factor: f for f in got.factor_scores}
    assert scores["coherence"].score == 3.5
    assert scores["novelty"].score is None and scores["novelty"].error == "rating_parse_failure"
    assert got.debate[0].statement == "Fluent."
    assert (got.status, got.overall, got.rounds_used, got.consensus) == ("done", 80.0, 1, True)


def test_one_vote_per_battle_is_enforced_by_the_database(db_path):
    db = get_db(db_path)
    a, b = save_conversation(db, _conversation()), save_conversation(db, _conversation(system_id="kbrd"))
    battle = save_battle(db, Battle("chatcrs", "kbrd", a.id, b.id))
    save_vote(db, Vote(battle.id, "a", feedback="better"))
    with pytest.raises(DuplicateVote):
        save_vote(db, Vote(battle.id, "b"))
    with pytest.raises(sqlite3.IntegrityError):  # the CHECK constraint, below the Python check
        db.execute("insert into votes (battle_id, choice, created_at) values ('zz', 'maybe', 'now')")
    assert get_vote(db, battle.id).choice == "a"
    assert get_battle(db, battle.id).system_b == "kbrd"
    assert voted_battles(db)[0]["choice"] == "a"
    assert battle_counts(db) == {("chatcrs", "kbrd"): 1}


def test_leaderboard_snapshot_and_cache(db_path):
    db = get_db(db_path)
    save_leaderboard_snapshot(db, [{"system": "chatcrs", "rating": 1000}], scorer="proxy")
    assert latest_leaderboard_snapshot(db)["rows"][0]["system"] == "chatcrs"
    assert cache_get(db, "k") is None
    cache_put(db, "k", model="m", request={"a": 1}, response={"text": "x"})
    cache_put(db, "k", model="m", request={"a": 1}, response={"text": "other"})  # first one stays
    assert cache_get(db, "k") == {"text": "x"}
    log_call(
        db,
        role="judge",
        model="m",
        backend="openai",
        kind="chat",
        duration_ms=5,
        prompt_tokens=3,
        completion_tokens=2,
        cost_usd=0.001,
    )
    assert usage_summary(db)[0]["prompt_tokens"] == 3


def test_write_transaction_rolls_back(db_path):
    db = get_db(db_path)
    with pytest.raises(RuntimeError):
        with write_transaction(db):
            db["llm_calls"].insert({"role": "x", "created_at": "now"})
            raise RuntimeError("boom")
    assert db["llm_calls"].count == 0


def test_eight_threads_writing_concurrently_lose_nothing(db_path):
    get_db(db_path)  # migrate once up front
    errors: list[BaseException] = []
    per_thread = 40

    def worker(n: int) -> None:
        try:
            db = get_db(db_path)
            for i in range(per_thread):
                c = Conversation(system_id=f"s{n}")
                append_turns(db, c, [Turn("user", f"{n}-{i}")])
                append_turns(db, c, [Turn("system", "ok", items=[ItemRef("x", "X")])])
                # read-then-write under BEGIN IMMEDIATE
                with write_transaction(db):
                    count = db["llm_calls"].count
                    db["llm_calls"].insert({"role": "counter", "duration_ms": count, "created_at": "now"})
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    db = get_db(db_path)
    assert db["conversations"].count == 8 * per_thread
    assert db["turns"].count == 8 * per_thread * 2
    # the counter saw every previous write: values 0..N-1, each once
    seen = sorted(r["duration_ms"] for r in db["llm_calls"].rows)
    assert seen == list(range(8 * per_thread))


def test_threads_opening_a_brand_new_file_at_once_all_get_a_wal_database(tmp_path):
    """Switching to WAL does not wait on the busy timeout: a second thread opening the same new file while the first
    creates it was told "database is locked" (seen when the background scorer started beside a test)."""
    import threading

    from storage.db import open_db

    path = tmp_path / "fresh.db"
    start = threading.Barrier(8)
    errors: list[str] = []

    def opener() -> None:
        start.wait(30)
        try:
            db = open_db(path)
            assert db.journal_mode == "wal"
            db.close()
        except Exception as e:  # collected: the assertion below names it
            errors.append(f"{type(e).__name__}: {e}")

    threads = [threading.Thread(target=opener) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
