"""A database written by the first schema version opens with today's code: upgraded, its data intact."""

from __future__ import annotations

import json
import sqlite3

import pytest
from sqlite_utils import Database

from storage.battle_votes import (
    DuplicateVote,
    board_version,
    get_battle,
    get_vote,
    latest_leaderboard_snapshot,
    save_vote,
)
from storage.conversations import get_conversation
from storage.db import get_db, schema_version
from storage.evaluations import get_evaluation
from storage.migrations import migrations
from storage.records import Vote

NAMES = [m.name for m in migrations.pending(Database(memory=True))]  # every migration, in order
T0 = "2024-05-01T10:00:00+00:00"


def _version_one(path) -> None:
    """A file holding schema version 1 (only the first migration) and rows as that version stored them."""
    db = Database(sqlite3.connect(str(path)))
    migrations.apply(db, stop_before=NAMES[1])
    assert [m.name for m in migrations.applied(db)] == NAMES[:1]
    db.table("conversations").insert_all(
        [
            {
                "id": f"c{n}",
                "system_id": system,
                "domain": "movies",
                "source": "arena",
                "status": "done",
                "targets": json.dumps([{"id": "heat-1995", "title": "Heat (1995)"}]),
                "metadata": json.dumps({"model": system, "note": "日本語 ✓"}),
                "created_at": T0,
                "updated_at": T0,
            }
            for n, system in ((1, "kbrd"), (2, "chatcrs"))
        ]
    )
    db.table("turns").insert_all(
        [
            {
                "conversation_id": cid,
                "part": "interaction",
                "idx": idx,
                "role": role,
                "text": text,
                "items": json.dumps(items),
                "metadata": "{}",
                "created_at": T0,
            }
            for cid in ("c1", "c2")
            for idx, (role, text, items) in enumerate(
                [
                    ("user", "A heist movie?", []),
                    ("system", "Try Heat (1995)", [{"id": "heat-1995", "title": "Heat (1995)"}]),
                ]
            )
        ]
    )
    db.table("evaluations").insert(
        {
            "id": "e1",
            "conversation_id": "c1",
            "scorer": "proxy",
            "rubric_version": "core-v1",
            "config": json.dumps({"judge": "proxy"}),
            "status": "done",
            "overall": 62.5,
            "rounds_used": 0,
            "consensus": 1,
            "created_at": T0,
            "finished_at": T0,
        }
    )
    scores: list[dict[str, object]] = [
        {"evaluation_id": "e1", "factor": "coherence", "judge": "proxy", "score": 3.0, "created_at": T0},
        {"evaluation_id": "e1", "factor": "novelty", "judge": "proxy", "score": None, "error": "timeout"},
    ]
    db.table("factor_scores").insert_all(scores)
    db.table("battles").insert(
        {
            "id": "b1",
            "system_a": "kbrd",
            "system_b": "chatcrs",
            "conversation_a": "c1",
            "conversation_b": "c2",
            "domain": "movies",
            "session": "s1",
            "created_at": T0,
        }
    )
    db.execute(
        "insert into votes (battle_id, choice, feedback, created_at) values ('b1', 'a', 'kbrd knew it', ?)", [T0]
    )
    db.table("leaderboard_snapshots").insert(
        {"created_at": T0, "filters": "{}", "scorer": "votes", "rows": json.dumps([{"system": "kbrd", "elo": 1016}])}
    )
    db.conn.commit()
    db.close()


def test_a_version_one_database_is_upgraded_with_its_data_intact(tmp_path):
    assert len(NAMES) >= 2, "only one migration: nothing to upgrade"
    path = tmp_path / "old.db"
    _version_one(path)
    db = get_db(path)
    assert schema_version(db) == len(NAMES)
    assert [m.name for m in migrations.applied(db)] == NAMES

    conversation = get_conversation(db, "c1")
    assert conversation is not None and conversation.system_id == "kbrd" and conversation.status == "done"
    assert conversation.metadata == {"model": "kbrd", "note": "日本語 ✓"}
    assert [t.id for t in conversation.targets] == ["heat-1995"]
    assert [(t.role, t.text) for t in conversation.turns] == [("user", "A heist movie?"), ("system", "Try Heat (1995)")]
    assert [i.title for i in conversation.turns[1].items] == ["Heat (1995)"]

    evaluation = get_evaluation(db, "e1")
    assert evaluation is not None and evaluation.overall == 62.5 and evaluation.consensus is True
    assert evaluation.fingerprint == "" and evaluation.metrics == {} and evaluation.usage == {}  # added in m002
    scores = {s.factor: (s.score, s.error) for s in evaluation.factor_scores}
    assert scores == {"coherence": (3.0, None), "novelty": (None, "timeout")}  # a failed score stays apart from 0

    battle, vote = get_battle(db, "b1"), get_vote(db, "b1")
    assert battle is not None and (battle.system_a, battle.system_b, battle.session) == ("kbrd", "chatcrs", "s1")
    assert vote is not None and (vote.choice, vote.feedback) == ("a", "kbrd knew it")
    snapshot = latest_leaderboard_snapshot(db)
    assert (
        snapshot is not None and snapshot["rows"] == [{"system": "kbrd", "elo": 1016}] and snapshot["version"] is None
    )
    assert db["sim_runs"].exists() and db["sim_dialogues"].exists()  # m003

    # the upgraded file works as a new one does: its triggers count a new vote, the one-vote rule still holds
    before = board_version(db)
    db.table("battles").insert({"id": "b2", "system_a": "kbrd", "system_b": "chatcrs", "created_at": T0})
    save_vote(db, Vote(battle_id="b2", choice="tie"))
    assert board_version(db) == before + 1
    with pytest.raises(DuplicateVote):
        save_vote(db, Vote(battle_id="b1", choice="b"))


def test_an_upgraded_database_opens_again_without_changes(tmp_path):
    path = tmp_path / "old.db"
    _version_one(path)
    first = get_db(path)
    tables = sorted(first.table_names())
    plain = Database(sqlite3.connect(str(path)))  # a second connection, as another process would open it
    assert schema_version(plain) == len(NAMES) and sorted(plain.table_names()) == tables
    assert migrations.pending(plain) == []
