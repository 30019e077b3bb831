"""Uploads' namespace, the input limits against the real datasets, degenerate text, safe rendering,
the CRSArena-Dial import's proxy scores and the database path check (issue #12)."""

from __future__ import annotations

import json

import pytest

from arena.crsarena_import import import_crsarena
from catalog.catalog import get_catalog
from evaluators.log_readers import LIMITS, LogFormatError, read_logs
from evaluators.proxy.scorer import load_proxy_judge
from storage.conversations import get_conversation, save_conversation
from storage.db import DatabasePathError, default_db_path, get_db
from storage.records import Conversation, Turn
from storage.uploads import UploadRefused, store, upload_system_id
from ui.render import safe_markdown


def _conversation(id_: str, system: str, reply: str) -> Conversation:
    return Conversation(
        id=id_, system_id=system, source="import", turns=[Turn("user", "a heist movie?"), Turn("system", reply)]
    )


def test_an_upload_never_touches_a_stored_conversation(db_path):
    db = get_db(db_path)
    real = save_conversation(
        db,
        Conversation(system_id="kbrd", source="chat", turns=[Turn("user", "hi"), Turn("system", "Try Heat (1995).")]),
    )
    report = store(db, [_conversation(real.id, "kbrd", "Fake praise.")])
    (stored,) = report.conversations
    assert report.renamed == [(real.id, stored.id)] and stored.id.startswith(real.id + "~")
    assert stored.system_id == "upload:kbrd" and stored.source == "upload"
    assert get_conversation(db, real.id).turns[1].text == "Try Heat (1995)."  # untouched
    again = store(db, [_conversation(real.id, "kbrd", "Fake praise.")])  # a second upload of the same file
    assert again.reused == 0 and len(again.renamed) == 1  # the real id is still taken by the real one
    same = store(db, [_conversation("new-id", "kbrd", "A reply.")])
    assert store(db, [_conversation("new-id", "kbrd", "A reply.")]).reused == 1  # identical: reused
    assert db["conversations"].count == 4 and same.conversations[0].id == "new-id"


@pytest.mark.parametrize("bad", ["<img src=x onerror=alert(1)>", "k" * 41, "", "-dash", "has space", "ü"])
def test_uploaded_system_names_are_checked(db_path, bad):
    with pytest.raises(UploadRefused):
        upload_system_id(bad)
    db = get_db(db_path)
    with pytest.raises(UploadRefused):
        store(db, [_conversation("ok", "kbrd", "x"), _conversation("b", bad, "x")])
    assert db["conversations"].count == 0  # refused whole


def test_every_real_dataset_is_read_whole_under_the_limits(shared_data):
    catalog = get_catalog("redial")
    for name, n in (
        ("crs_arena_dial_open.json", 254),
        ("crs_arena_dial_closed.json", 220),
        ("crs_arena_eval_dev.json", 93),
    ):
        result = read_logs(shared_data / "crsarena" / name, "auto", catalog)
        assert len(result.conversations) == n
        assert max(len(c.all_turns) for c in result.conversations) <= LIMITS.turns // 5
        assert max(len(t.text) for c in result.conversations for t in c.all_turns) <= LIMITS.turn_chars // 7
    for folder in ("redial_eval", "opendialkg_eval"):
        for path in (shared_data / folder).glob("*.jsonl"):
            assert path.stat().st_size < LIMITS.file_bytes
            longest = max(len(line.encode()) for line in path.open(encoding="utf-8"))
            assert longest < LIMITS.line_bytes / 100
            assert max(len(json.loads(line)["context"]) for line in path.open(encoding="utf-8")) < LIMITS.turns


def test_limits_name_the_place_and_the_value(tmp_path):
    path = tmp_path / "log.jsonl"
    turns = [{"role": "user", "text": "x"}, {"role": "system", "text": "y" * (LIMITS.turn_chars + 1)}]
    path.write_text(json.dumps({"id": "a", "system_id": "kbrd", "turns": turns}) + "\n")
    with pytest.raises(
        LogFormatError,
        match=r"conversation 'a', turn 2: expected at most 10,000 characters "
        r"per turn \(it has 10,001\)",
    ):
        read_logs(path)
    path.write_text("[" * 5000 + "]" * 5000)
    with pytest.raises(LogFormatError, match="nested"):
        read_logs(path, "jsonl")


def test_degenerate_repetition_cannot_score_high(shared_data):
    judge, catalog = load_proxy_judge(), get_catalog(str(shared_data / "redial"))
    for text in ("Heat (1995) is great. " * 400, "movie " * 300):
        conversation = _conversation("d", "kbrd", text)
        verdict = judge.score(conversation, catalog)
        assert verdict.overall_100 < 25
        assert verdict.result.factors["naturalness"].score == 0
    fine = _conversation("f", "kbrd", "You might enjoy Heat (1995), a tense crime thriller with Al Pacino. Seen it?")
    assert judge.score(fine, catalog).result.factors["naturalness"].score == 4


def test_safe_markdown_shows_markup_as_written_and_runs_nothing():
    assert safe_markdown("a <discussion> b") == "a &lt;discussion&gt; b"
    assert safe_markdown("code `<discussion>` stays") == "code `<discussion>` stays"  # shown literally by Markdown
    assert safe_markdown("```\n<b>x</b>\n```") == "```\n<b>x</b>\n```"
    assert safe_markdown('<img src=x onerror="alert(1)">') == '&lt;img src=x onerror="alert(1)"&gt;'
    assert safe_markdown("![x](http://e/x.png)") == "!\\[x\\](http://e/x.png)"
    assert safe_markdown("[a](javascript:x) [r][1] [1]: http://e") == "[a\\](javascript:x) [r\\]\\[1] [1\\]: http://e"
    assert safe_markdown("[name hidden] said") == "[name hidden] said"
    assert safe_markdown("unclosed ` <script>") == "unclosed ` &lt;script&gt;"


def test_importing_crsarena_dial_scores_every_conversation_with_the_proxy(db_path, shared_data):
    from arena.board_cache import read_board

    db = get_db(db_path)
    report = import_crsarena(db, shared_data / "crsarena", catalog=get_catalog("redial"), score=True)
    assert (report.scored, report.score_failed) == (472, 2)  # two dialogues have no system reply
    assert "472 of 474 conversations scored with the proxy (2 could not be scored: no system reply" in report.summary()
    board = read_board(db)
    assert board.scorer.startswith("proxy")
    assert all(r["judged"] and r["overall_mean"] is not None and r["rating"] is not None for r in board.rows)
    evaluations = db["evaluations"].count
    again = import_crsarena(db, shared_data / "crsarena", catalog=get_catalog("redial"), score=True)
    assert again.scored == 472 and db["evaluations"].count == evaluations  # finished ones are reused


def test_a_configured_database_in_a_missing_folder_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("CRS_ARENA_DB", str(tmp_path / "nonexistent" / "x.db"))
    with pytest.raises(DatabasePathError, match="does not exist"):
        default_db_path()
    assert not (tmp_path / "nonexistent").exists()
    monkeypatch.setenv("CRS_ARENA_DB", str(tmp_path))
    with pytest.raises(DatabasePathError, match="is a folder"):
        default_db_path()
    monkeypatch.delenv("CRS_ARENA_DB")
    assert default_db_path().name == "crs_arena.db"  # the default may still be created


def test_the_operators_import_keeps_published_system_ids(db_path):
    db = get_db(db_path)
    report = store(db, [_conversation("p1", "chatgpt(0613) redial", "Try Heat (1995).")], upload=False)
    assert report.conversations[0].system_id == "chatgpt(0613) redial"
    assert report.conversations[0].source == "import"
    with pytest.raises(UploadRefused):
        store(db, [_conversation("p2", "<b>x</b>", "y")], upload=False)


@pytest.mark.parametrize(
    "content",
    [
        b"session_id,user_id,crs1,crs2,vote,feedback\n\xff\xfe,u,a,b,a,\n",
        b"session_id,user_id,crs1,crs2,vote,feedback\n2024-01-01,u,a\n",
    ],
)
def test_a_broken_vote_file_is_refused_with_a_message(db_path, tmp_path, content):
    (tmp_path / "votes_open.csv").write_bytes(content)
    with pytest.raises(LogFormatError, match="line 2|byte"):
        import_crsarena(get_db(db_path), tmp_path)
    assert get_db(db_path)["votes"].count == 0
