"""A small local version is a system of its own (#40): ``kbrd_small``, shown as "KBRD (small)", so that its votes
and scores never count as the published KBRD's. The registry answers under that id wherever the small version runs,
and the migration moves what was recorded under ``kbrd`` while a small version answered."""

from __future__ import annotations

import json

from sqlite_utils import Database

from crs_backends.neural.names import SMALL_IDS, SMALL_LABELS, SYSTEM_OF_SMALL_ID
from crs_backends.neural.sources import CheckpointSource
from storage.migrations import migrations

T0 = "2026-11-27T10:00:00+00:00"
BEFORE = "m007_small_versions_own_ids"


def test_a_small_source_has_its_own_id_and_name(tmp_path):
    small = CheckpointSource("kbrd", tmp_path, "bundled", tmp_path, "small local", "v5")
    published = CheckpointSource("kbrd", tmp_path, "redial", tmp_path, "archive", "CRS Arena archive")
    assert (small.system_id, small.label) == ("kbrd_small", "KBRD (small)")
    assert (published.system_id, published.label) == ("kbrd", "KBRD")
    assert SMALL_IDS["unicrs"] == "unicrs_small" and SMALL_LABELS["unicrs"] == "UniCRS (small)"
    assert SYSTEM_OF_SMALL_ID["barcor_small"] == "barcor"


def _conversation(db: Database, cid: str, system: str, origin: str | None, *, source: str = "arena") -> None:
    db.table("conversations").insert(
        {"id": cid, "system_id": system, "domain": "movies", "source": source, "status": "active", "created_at": T0}
    )
    turns = [("user", "A heist movie?", "{}")]
    if origin is not None:
        turns.append(("system", "Try Heat (1995).", json.dumps({"system": system, "origin": origin})))
    db.table("turns").insert_all(
        {
            "conversation_id": cid,
            "part": "interaction",
            "idx": idx,
            "role": role,
            "text": text,
            "metadata": meta,
            "created_at": T0,
        }
        for idx, (role, text, meta) in enumerate(turns)
    )


def test_the_migration_moves_what_a_small_version_answered_to_its_own_id():
    db = Database(memory=True)
    migrations.apply(db, stop_before=BEFORE)
    _conversation(db, "small-kbrd", "kbrd", "small local")
    _conversation(db, "published-kbrd", "kbrd", "archive")
    _conversation(db, "small-unicrs", "unicrs", "small local")
    _conversation(db, "no-answer", "barcor", None)  # a side that never answered: nothing says what ran
    _conversation(db, "upload", "kbrd", None, source="upload")  # an uploaded log under kbrd: no origin
    _conversation(db, "chat", "chatcrs", "")
    db.table("turns").insert(  # a turn whose metadata is not JSON is read as saying nothing
        {"conversation_id": "upload", "part": "interaction", "idx": 1, "role": "system", "text": "x",
         "metadata": "not json", "created_at": T0}
    )  # fmt: skip
    db.table("battles").insert_all(
        [
            {"id": "b1", "system_a": "kbrd", "system_b": "kbrd", "conversation_a": "small-kbrd",
             "conversation_b": "published-kbrd", "created_at": T0},
            {"id": "b2", "system_a": "barcor", "system_b": "unicrs", "conversation_a": "no-answer",
             "conversation_b": "small-unicrs", "created_at": T0},
        ]
    )  # fmt: skip
    db.execute("insert into votes (battle_id, choice, created_at) values ('b1', 'a', ?), ('b2', 'b', ?)", [T0, T0])
    db.table("human_labels").insert_all(
        {"conversation_id": cid, "system_id": system, "battle_id": "b1", "side": side, "rater": "r", "origin": "arena",
         "dialogue_overall": 3.0, "created_at": T0}
        for cid, system, side in (("small-kbrd", "kbrd", "a"), ("published-kbrd", "kbrd", "b"))
    )  # fmt: skip
    version = db.execute("select version from board_state").fetchone()[0]

    migrations.apply(db)

    systems = {r["id"]: r["system_id"] for r in db.query("select id, system_id from conversations")}
    assert systems == {
        "small-kbrd": "kbrd_small",
        "published-kbrd": "kbrd",
        "small-unicrs": "unicrs_small",
        "no-answer": "barcor",
        "upload": "kbrd",
        "chat": "chatcrs",
    }
    battles = {r["id"]: (r["system_a"], r["system_b"]) for r in db.query("select * from battles")}
    assert battles == {"b1": ("kbrd_small", "kbrd"), "b2": ("barcor", "unicrs_small")}
    labels = {r["conversation_id"]: r["system_id"] for r in db.query("select * from human_labels")}
    assert labels == {"small-kbrd": "kbrd_small", "published-kbrd": "kbrd"}
    assert db.execute("select count(*) from votes").fetchone()[0] == 2  # the votes stay; who they are about moved
    assert db.execute("select version from board_state").fetchone()[0] > version  # the board is computed again
