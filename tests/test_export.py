"""Exporting the database as JSON rows, the JSONL writer, and the Hub sync that stays off unless configured."""

import json
import logging
import time
from concurrent.futures import Future
from types import SimpleNamespace

from arena import hub_sync
from arena.hub_sync import ExportScheduler, hub_dataset, start_from_env, write_export
from storage.battle_votes import save_battle, save_vote
from storage.conversations import save_conversation
from storage.db import get_db
from storage.evaluations import finish_evaluation, save_debate_message, save_factor_score, start_evaluation
from storage.export import conversation_rows, judgment_rows, vote_rows
from storage.records import Battle, Conversation, DebateMessage, Evaluation, FactorScore, ItemRef, Turn, Vote

TOKEN = "hf_secret_token_value_123"


def _fill(db):
    a = save_conversation(
        db,
        Conversation(
            system_id="chatcrs",
            turns=[
                Turn("user", "A heist movie?"),
                Turn("system", "Heat (1995).", items=[ItemRef("heat-1995", "Heat (1995)")]),
            ],
        ),
    )
    b = save_conversation(db, Conversation(system_id="kbrd", turns=[Turn("user", "A heist movie?")]))
    battle = save_battle(db, Battle("chatcrs", "kbrd", a.id, b.id))
    save_vote(db, Vote(battle.id, "a", feedback="better list", voter="alice"))
    evaluation = start_evaluation(db, Evaluation(conversation_id=a.id, scorer="llm:j"))
    save_factor_score(db, evaluation.id, FactorScore("coherence", 3.0, "llm:j", "r1"))
    save_factor_score(db, evaluation.id, FactorScore("novelty", None, "llm:j", "r1", error="server: boom"))
    save_debate_message(db, evaluation.id, DebateMessage(1, "debate_user", "m", "Good.", 70.0))
    finish_evaluation(db, evaluation.id, status="partial", overall=70.0, rounds_used=1, consensus=True)
    return a, b, battle


def test_rows_are_json_ready_and_leave_out_the_voter(db_path):
    db = get_db(db_path)
    a, b, battle = _fill(db)
    conversations = list(conversation_rows(db))
    assert [c["id"] for c in conversations] == [a.id, b.id]
    assert conversations[0]["turns"][1]["items"] == [{"id": "heat-1995", "title": "Heat (1995)"}]
    votes = list(vote_rows(db))
    assert votes == [
        {
            "battle_id": battle.id,
            "domain": "movies",
            "system_a": "chatcrs",
            "system_b": "kbrd",
            "conversation_a": a.id,
            "conversation_b": b.id,
            "choice": "a",
            "feedback": "better list",
            "created_at": votes[0]["created_at"],
            "kinds": None,  # stored with save_vote: not tagged (arena.battles.vote tags; the board's refresh too)
            "read_by": None,
            "revealed_names": None,
        }
    ]
    judgments = list(judgment_rows(db))
    assert len(judgments) == 1 and judgments[0]["status"] == "partial" and judgments[0]["overall"] == 70.0
    assert {s["factor"]: s["score"] for s in judgments[0]["factor_scores"]} == {"coherence": 3.0, "novelty": None}
    assert judgments[0]["debate"][0]["statement"] == "Good."
    text = json.dumps([conversations, votes, judgments])
    assert "alice" not in text


def test_write_export_rewrites_only_files_that_changed(db_path, tmp_path):
    db = get_db(db_path)
    a, b, _ = _fill(db)
    folder = tmp_path / "export"
    assert write_export(db_path, folder) == {"conversations": 2, "votes": 1, "judgments": 1, "human_labels": 0}
    assert sorted(p.name for p in folder.iterdir()) == [
        "conversations.jsonl",
        "human_labels.jsonl",
        "judgments.jsonl",
        "manifest.json",
        "votes.jsonl",
    ]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["schema_version"] >= 7 and manifest["files"]["conversations.jsonl"]["rows"] == 2
    first = [json.loads(line) for line in (folder / "conversations.jsonl").read_text().splitlines()]
    assert [c["id"] for c in first] == [a.id, b.id]
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    time.sleep(0.01)
    write_export(db_path, folder)
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == before
    save_vote(db, Vote(save_battle(db, Battle("kbrd", "chatcrs", b.id, a.id)).id, "tie"))
    assert write_export(db_path, folder)["votes"] == 2
    after = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    assert [name for name in sorted(after) if after[name] != before[name]] == ["manifest.json", "votes.jsonl"]


def test_hub_sync_is_off_and_says_so_unless_both_variables_are_set(db_path, caplog):
    caplog.set_level(logging.INFO, logger=hub_sync.__name__)
    assert start_from_env(db_path, env={}) is None
    assert "Hub sync is off" in caplog.text
    caplog.clear()
    assert hub_dataset({"HF_TOKEN": TOKEN}) is None
    assert "HF_TOKEN is set but CRS_ARENA_HUB_DATASET is not" in caplog.text and TOKEN not in caplog.text
    assert hub_dataset({"CRS_ARENA_HUB_DATASET": "me/crs-arena-data"}) is None
    assert hub_dataset({"CRS_ARENA_HUB_DATASET": " me/crs-arena-data ", "HF_TOKEN": TOKEN}) == "me/crs-arena-data"
    assert not (db_path.parent / "hub_export").exists()


class _OfflineHub:
    """Just enough of ``HfApi`` for ``CommitScheduler``: it records commits instead of sending them."""

    def __init__(self):
        self.commits: list[list[str]] = []

    def create_repo(self, repo_id, **kwargs):
        return SimpleNamespace(repo_id=repo_id)

    def run_as_future(self, fn, *args, **kwargs):
        future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as e:
            future.set_exception(e)
        return future

    def create_commit(self, *, operations, **kwargs):
        self.commits.append(sorted(op.path_in_repo for op in operations))
        return SimpleNamespace(oid="c")


def test_the_scheduler_exports_before_each_commit_and_never_uploads_the_database(db_path, tmp_path):
    db = get_db(db_path)
    a, b, _ = _fill(db)
    hub = _OfflineHub()
    scheduler = ExportScheduler(
        db_path=db_path,
        repo_id="me/data",
        repo_type="dataset",
        folder_path=tmp_path / "hub",
        path_in_repo="data",
        every=60,
        hf_api=hub,
        allow_patterns=["*.jsonl"],
    )
    try:
        deadline = time.monotonic() + 10
        while not hub.commits and time.monotonic() < deadline:  # the first push starts at once, in its thread
            time.sleep(0.05)
        assert hub.commits == [
            ["data/conversations.jsonl", "data/human_labels.jsonl", "data/judgments.jsonl", "data/votes.jsonl"]
        ]
        scheduler.trigger().result()
        assert len(hub.commits) == 1  # nothing changed: no commit
        save_vote(db, Vote(save_battle(db, Battle("kbrd", "chatcrs", b.id, a.id)).id, "b"))
        scheduler.trigger().result()
        assert hub.commits[-1] == ["data/votes.jsonl"]
    finally:
        scheduler.stop()
