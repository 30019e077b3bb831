"""The board survives a Space's restart: the Hub dataset's export read back into an empty database
(arena/hub_restore.py) — whole or not at all, without duplicates, older exports brought forward — and the real app
doing it at start against a local fake Hub (tests/fake_hub.py) over real HTTP."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import pytest
from app_server import AppServer
from fake_hub import FakeHub

from arena.battle_tags import tag_missing
from arena.board_compute import compute_board
from arena.hub_restore import ExportRefused, read_export, restore_folder, restore_from_env
from arena.hub_sync import write_export
from storage.battle_votes import save_battle, save_vote
from storage.conversations import save_conversation
from storage.db import get_db, open_db
from storage.evaluations import finish_evaluation, save_factor_score, start_evaluation
from storage.human_labels import Rating, save_ratings
from storage.records import Battle, Conversation, Evaluation, FactorScore, ItemRef, Turn, Vote

DATASET = "me/crs-arena-data"
TOKEN = "hf_fake_restore_token_0123456789"


def _fill(db, *, battles: int = 12) -> None:
    """Conversations, votes among four systems, proxy judgments and people's ratings (two raters on one side)."""
    systems = ["chatcrs", "kbrd", "barcor", "retrieval"]
    for k in range(battles):
        a, b = systems[k % 4], systems[(k + 1 + k // 4) % 4]
        sides = []
        for system in (a, b):
            sides.append(
                save_conversation(
                    db,
                    Conversation(
                        system_id=system,
                        source="arena",
                        turns=[
                            Turn("user", f"a heist film please ({k})"),
                            Turn("system", f"Try Heat (1995), pick {k}.", items=[ItemRef("heat-1995", "Heat (1995)")]),
                        ],
                    ),
                )
            )
        battle = save_battle(db, Battle(a, b, sides[0].id, sides[1].id, session=f"s{k}"))
        save_vote(db, Vote(battle.id, ["a", "b", "tie", "both_bad", "a"][k % 5], feedback=f"f{k}", voter=f"person{k}"))
        for side in sides:
            e = start_evaluation(db, Evaluation(conversation_id=side.id, scorer="proxy", fingerprint="fp"))
            save_factor_score(db, e.id, FactorScore("coherence", 2.0 + k % 3, "proxy", "core-2"))
            finish_evaluation(db, e.id, status="done", overall=40.0 + 3 * k, metrics={"m": k})
        if k % 3 == 0:
            save_ratings(
                db,
                [
                    Rating(
                        sides[0].id,
                        a,
                        rater,
                        "arena",
                        {"understanding": 3.0 + n, "dialogue_overall": 2.0},
                        battle_id=battle.id,
                        side="a",
                    )
                    for n, rater in enumerate(("r1", "r2"))
                ],
            )


def _ratings(db_path) -> dict[str, float]:
    db = open_db(db_path)
    try:
        board = compute_board(db, rounds=20, seed=0)
        return {r["system"]: r["rating"] for r in board.rows if r["rating"] is not None}
    finally:
        db.close()


def _export(tmp_path: Path, **fill) -> Path:
    source = tmp_path / "before.db"
    _fill(get_db(source), **fill)
    tag_missing(get_db(source))  # as the app's refresh does: the export carries each vote's tag
    write_export(source, tmp_path / "export")
    return tmp_path / "export"


def test_a_restore_brings_back_the_same_board_and_the_same_export(tmp_path):
    folder = _export(tmp_path)
    counts = restore_folder(tmp_path / "after.db", folder)
    assert counts == {"conversations": 24, "votes": 12, "judgments": 24, "human_labels": 4}
    before, after = _ratings(tmp_path / "before.db"), _ratings(tmp_path / "after.db")
    assert before.keys() == after.keys() and len(before) == 4
    assert all(abs(before[s] - after[s]) < 1e-9 for s in before)
    write_export(tmp_path / "after.db", tmp_path / "again")
    for name in ("conversations.jsonl", "votes.jsonl", "judgments.jsonl", "manifest.json"):
        assert (tmp_path / "again" / name).read_bytes() == (folder / name).read_bytes(), name
    labels = [json.loads(line) for line in (tmp_path / "again" / "human_labels.jsonl").read_text().splitlines()]
    first = [json.loads(line) for line in (folder / "human_labels.jsonl").read_text().splitlines()]
    assert [(r["conv_id"], r["raters"]) for r in labels] == [(r["conv_id"], r["raters"]) for r in first]
    assert all(
        abs((x["dial_level_aggregated"]["understanding"] or 0) - (y["dial_level_aggregated"]["understanding"] or 0))
        < 1e-9
        for x, y in zip(labels, first, strict=True)
    )
    # ids keep duplicates out: a second restore adds nothing
    assert restore_folder(tmp_path / "after.db", folder) == dict.fromkeys(counts, 0)
    db = open_db(tmp_path / "after.db")
    try:
        assert db["votes"].count == 12 and db["conversations"].count == 24 and db["human_labels"].count == 8
        assert {r["voter"] for r in db.query("select voter from votes")} == {""}  # never exported, never invented
        # the restore skips SQLite's foreign-key lookups (read_export checked every reference): none is broken
        assert list(db.query("pragma foreign_key_check")) == []
    finally:
        db.close()


def test_the_restore_gives_the_connection_its_foreign_keys_and_cache_back(tmp_path):
    from arena.hub_restore import read_export, restore_export

    folder = _export(tmp_path)
    db = open_db(tmp_path / "after.db")
    try:
        cache = db.execute("pragma cache_size").fetchone()[0]
        restore_export(db, read_export(folder))
        assert db.execute("pragma foreign_keys").fetchone()[0] == 1
        assert db.execute("pragma cache_size").fetchone()[0] == cache
    finally:
        db.close()


def _rewrite(folder: Path, name: str, text: str, *, manifest: bool = True) -> None:
    (folder / name).write_text(text, encoding="utf-8")
    if manifest:  # a well-formed manifest for the changed file: the fault must be found in the rows themselves
        import hashlib

        m = json.loads((folder / "manifest.json").read_text())
        m["files"][name] = {"rows": len(text.splitlines()), "sha256": hashlib.sha256(text.encode()).hexdigest()}
        (folder / "manifest.json").write_text(json.dumps(m))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda f: (f / "votes.jsonl").unlink(), "votes.jsonl is missing"),
        (
            lambda f: (f / "votes.jsonl").write_text((f / "votes.jsonl").read_text()[:-40]),
            "does not match the manifest",
        ),
        (lambda f: _rewrite(f, "votes.jsonl", '{"battle_id": "x"\n'), "votes.jsonl line 1 is not JSON"),
        (
            lambda f: _rewrite(
                f,
                "votes.jsonl",
                (f / "votes.jsonl").read_text().replace('"choice": "a"', '"choice": "maybe"', 1),
            ),
            "vote must be one of",
        ),
        (
            lambda f: _rewrite(
                f,
                "judgments.jsonl",
                (f / "judgments.jsonl").read_text().replace('"conversation_id": "', '"conversation_id": "x', 1),
            ),
            "is not among the exported conversations",
        ),
        (lambda f: _rewrite(f, "conversations.jsonl", "[1, 2]\n"), "conversations.jsonl line 1 is not a JSON object"),
    ],
)
def test_a_partial_or_malformed_export_is_refused_whole(tmp_path, damage, message):
    folder = _export(tmp_path, battles=5)
    damage(folder)
    with pytest.raises(ExportRefused, match=message):
        restore_folder(tmp_path / "after.db", folder)
    db = open_db(tmp_path / "after.db")
    try:
        assert db["conversations"].count == 0 and db["votes"].count == 0 and db["evaluations"].count == 0
    finally:
        db.close()


def test_an_export_from_a_newer_app_is_refused_and_one_without_a_manifest_is_read(tmp_path):
    folder = _export(tmp_path, battles=3)
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**manifest, "schema_version": 99}))
    with pytest.raises(ExportRefused, match="schema version 99, newer"):
        restore_folder(tmp_path / "after.db", folder)
    (folder / "manifest.json").unlink()  # as the app wrote it before manifests existed
    assert read_export(folder).schema_version is None
    assert restore_folder(tmp_path / "after.db", folder)["votes"] == 3


def test_an_export_written_before_a_row_migration_gets_it(tmp_path):
    """Schema 6 had the small local KBRD answer as ``kbrd``; m007 moved those to ``kbrd_small``. An export written at
    6 and restored under 7 gets the move, as the file itself would have on upgrade."""
    folder = _export(tmp_path, battles=2)
    lines = (folder / "conversations.jsonl").read_text().splitlines()
    moved = []
    for i, line in enumerate(lines):
        row = json.loads(line)
        if row["system_id"] == "kbrd":
            row["turns"][1]["metadata"] = {"origin": "small local"}
            moved.append(row["id"])
        lines[i] = json.dumps(row, sort_keys=True)
    assert moved
    _rewrite(folder, "conversations.jsonl", "\n".join(lines) + "\n")
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**manifest, "schema_version": 6}))
    restore_folder(tmp_path / "after.db", folder)
    db = open_db(tmp_path / "after.db")
    try:
        assert {db["conversations"].get(c)["system_id"] for c in moved} == {"kbrd_small"}
        sides = list(db.query("select system_a, system_b from battles"))
        assert "kbrd" not in {s for row in sides for s in row.values()}
    finally:
        db.close()


def test_the_local_file_wins_and_nothing_is_asked_of_the_hub(tmp_path):
    _fill(get_db(tmp_path / "kept.db"), battles=1)
    env = {"CRS_ARENA_HUB_DATASET": DATASET, "HF_TOKEN": TOKEN}
    with FakeHub() as hub:
        report = restore_from_env(tmp_path / "kept.db", env)
        assert report.state == "kept" and report.sync_allowed and hub.requests == []
    assert restore_from_env(tmp_path / "kept.db", {}).state == "off"


def _dataset_files(folder: Path) -> dict[str, bytes]:
    return {f"data/{p.name}": p.read_bytes() for p in folder.iterdir() if p.is_file()}


def _settings_text(url: str) -> str:
    with urllib.request.urlopen(url + "config", timeout=30) as r:
        return r.read().decode("utf-8")


def _app_env(hub: FakeHub) -> dict[str, str]:
    return {
        "HF_ENDPOINT": hub.url,
        "HF_HUB_OFFLINE": "0",
        "HF_HUB_DISABLE_XET": "1",
        "CRS_ARENA_HUB_DATASET": DATASET,
        "HF_TOKEN": TOKEN,
        "CRS_ARENA_HUB_EVERY": "60",
        "HF_HOME": "",
    }


@pytest.mark.slow
def test_the_app_restores_the_board_at_start_and_publishes_the_same_export(tmp_path):
    folder = _export(tmp_path)
    before = _ratings(tmp_path / "before.db")
    with FakeHub() as hub:
        hub.add_repo(DATASET, "dataset", _dataset_files(folder))
        env = {**_app_env(hub), "HF_HOME": str(tmp_path / "hf_home")}
        with AppServer(tmp_path / "space.db", env=env) as server:
            assert "was restored from" in _settings_text(server.url)
            after = _ratings(tmp_path / "space.db")
            assert after.keys() == before.keys() and all(abs(after[s] - before[s]) < 1e-9 for s in before)
            # the scheduler's first push starts at once (about 1 s here): it sends back what was restored
            deadline = time.monotonic() + 60
            while not hub.repos[DATASET].commits and time.monotonic() < deadline:
                time.sleep(0.2)
            assert hub.repos[DATASET].commits, "the app did not publish after restoring"
        assert hub.repos[DATASET].files["data/votes.jsonl"] == (folder / "votes.jsonl").read_bytes()
        log = (tmp_path / "app.log").read_text()
        assert TOKEN not in log


@pytest.mark.slow
def test_the_app_refuses_a_malformed_export_with_one_line_and_starts_empty(tmp_path):
    folder = _export(tmp_path, battles=3)
    files = _dataset_files(folder)
    files["data/votes.jsonl"] = files["data/votes.jsonl"][:-30]  # torn
    with FakeHub() as hub:
        hub.add_repo(DATASET, "dataset", files)
        env = {**_app_env(hub), "HF_HOME": str(tmp_path / "hf_home")}
        with AppServer(tmp_path / "space.db", env=env) as server:
            assert "was refused" in _settings_text(server.url)
            db = open_db(tmp_path / "space.db")
            try:
                assert db["votes"].count == 0 and db["conversations"].count == 0
            finally:
                db.close()
        refused = [line for line in (tmp_path / "app.log").read_text().splitlines() if "Hub restore" in line]
        assert len(refused) == 1 and "votes.jsonl does not match the manifest" in refused[0]
        # publishing stayed off: an empty board never replaced the dataset's votes
        assert hub.repos[DATASET].commits == [] and hub.repos[DATASET].files == files
