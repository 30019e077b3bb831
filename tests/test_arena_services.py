"""The services the Leaderboard tab and ``python -m arena`` share: the board's read model
(:mod:`arena.board_view`) and the one CRSArena-Dial import (:func:`arena.crsarena_import.import_dial`),
on real SQLite files, through the arena functions, the command line and the tab's handlers."""

import json

import pytest
from click.testing import CliRunner

from arena.board_compute import PROVISIONAL_BATTLES, choose_scorer
from arena.board_view import board_view, display_table
from arena.crsarena_import import ImportRefused, import_dial, missing_catalog_message, missing_files_message
from commands import cli
from storage.battle_votes import latest_leaderboard_snapshot, save_battle, save_vote
from storage.conversations import save_conversation
from storage.db import get_db
from storage.evaluations import finish_evaluation, save_factor_score, start_evaluation
from storage.records import Battle, Conversation, Evaluation, FactorScore, Turn, Vote
from ui import leaderboard_tab, research_data_tab
from ui.render import safe_text
from ui.services import Services

DEMO = "llm:SmolLM2-135M-Instruct"


def battle(db, a: str, b: str, choice: str, n: int = 1, domain: str = "movies") -> None:
    for _ in range(n):
        saved = save_battle(db, Battle(system_a=a, system_b=b, conversation_a=None, conversation_b=None, domain=domain))
        save_vote(db, Vote(battle_id=saved.id, choice=choice))


def judged(db, system: str, scorer: str, overall: float) -> None:
    conversation = save_conversation(
        db,
        Conversation(system_id=system, source="import", turns=[Turn("user", "a comedy?"), Turn("system", "Heat?")]),
    )
    evaluation = start_evaluation(db, Evaluation(conversation_id=conversation.id, scorer=scorer))
    save_factor_score(db, evaluation.id, FactorScore("coherence", 2.0, "j", "core-1"))
    finish_evaluation(db, evaluation.id, overall=overall, metrics={})


@pytest.fixture
def board_db(db_path):
    db = get_db(db_path)
    battle(db, "x", "y", "a", PROVISIONAL_BATTLES + 2)
    battle(db, "z", "x", "b", 1)  # z: one battle, in x's group
    battle(db, "p", "q", "tie", 3, domain="books")  # a second group that never met the first
    judged(db, "x", "proxy", 70.0)
    judged(db, "y", "proxy", 30.0)
    for _ in range(3):
        judged(db, "x", DEMO, 99.0)  # the demo judge finished more, and is still never the default
    return db


def test_the_read_model_marks_provisional_ranks_and_shows_the_default_scorer(board_db):
    view = board_view(board_db)
    table = view.table.set_index("System")
    assert table.loc["x", "Rank"] == "1" and table.loc["x", "Judge overall"] == "70.0"
    assert table.loc["z", "Rank"].endswith("(provisional)") and not table.loc["z", "Rank"].startswith("1 ")
    assert table.loc["z", "Judge overall"] == ""  # never judged: blank, not "None"
    assert "Group" in view.table.columns  # two groups of systems that never met
    assert view.scorer == "proxy" and view.scorers == ["proxy", DEMO]
    assert view.domains == ["books", "movies"]
    assert "automatic scores from scorer `proxy`" in view.summary
    assert "**The votes form 2 groups of systems that never met**" in view.summary
    assert f"{PROVISIONAL_BATTLES + 2 + 1 + 3} votes among 5 systems" in view.summary


def test_the_read_model_falls_back_to_the_default_scorer_and_names_the_demo_judge(board_db):
    assert board_view(board_db, scorer="no such scorer").scorer == "proxy"
    demo = board_view(board_db, scorer=DEMO)
    assert demo.scorer == DEMO and demo.table.set_index("System").loc["x", "Judge overall"] == "99.0"
    assert "the 135M demo judge: not validated" in demo.summary
    assert choose_scorer([], "proxy") is None and choose_scorer(["a", "b"], "b") == "b"


def test_one_group_hides_the_group_column_and_filters_narrow_the_board(board_db):
    books = board_view(board_db, domain="books")
    assert sorted(books.table["System"]) == ["p", "q"] and "Group" not in books.table.columns
    assert display_table([]).empty


def test_the_tab_renders_what_the_read_model_returns(board_db, db_path):
    table, figure, summary, domains, scorers = leaderboard_tab.show_board(Services(db_path=db_path), "All", "All", DEMO)
    view = board_view(board_db, scorer=DEMO)
    assert table.equals(view.table) and summary == view.summary
    assert scorers.value == DEMO and domains.choices == [("All", "All"), ("books", "books"), ("movies", "movies")]
    assert '"heatmap"' in figure.to_json()


# --- CRSArena-Dial: one import, one message for each thing that stops it ---------------------------------


def dial_folder(root):
    """A two-dialogue CRSArena-Dial folder (one vote) at ``root/crsarena``."""
    folder = root / "crsarena"
    folder.mkdir(parents=True)
    dialogues = [
        {
            "conversation ID": f"{system}_u1",
            "agent": {"id": system, "type": "AGENT"},
            "user": {"id": "u1", "type": "USER"},
            "conversation": [
                {"participant": "USER", "utterance": "a heist movie?"},
                {"participant": "AGENT", "utterance": "Try Heat (1995)."},
            ],
        }
        for system in ("kbrd_redial", "barcor_redial")
    ]
    (folder / "crs_arena_dial_open.json").write_text(json.dumps(dialogues), encoding="utf-8")
    (folder / "votes_open.csv").write_text(
        "session_id,user_id,crs1,crs2,vote,feedback\n2024-09-08 23:01:08,u1,kbrd_redial,barcor_redial,kbrd_redial,\n",
        encoding="utf-8",
    )
    return folder


@pytest.fixture
def data_dir_without_catalog(tmp_path, monkeypatch):
    """CRS_DATA_DIR holds the CRSArena-Dial files but no ReDial catalog (and no catalog is cached)."""
    monkeypatch.setenv("CRS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr("catalog.catalog._loaded", {})
    dial_folder(tmp_path / "data")
    return tmp_path / "data"


def ui_import(db_path) -> str:
    return research_data_tab.import_crsarena(Services(db_path=db_path))


def test_a_missing_catalog_is_refused_with_the_same_message_from_the_cli_and_the_app(db_path, data_dir_without_catalog):
    message = missing_catalog_message("redial")
    assert str(data_dir_without_catalog) in message and "CRS_DATA_DIR" in message
    with pytest.raises(ImportRefused, match="catalog was not found") as refused:
        import_dial(get_db(db_path))
    assert refused.value.reason == "catalog" and str(refused.value) == message

    result = CliRunner().invoke(cli, ["import-crsarena", "--no-score", "--db", str(db_path)])
    assert result.exit_code != 0 and message in result.output and "--catalog none" in result.output
    assert ui_import(db_path) == safe_text(message)
    db = get_db(db_path)
    assert db["conversations"].count == 0 and db["votes"].count == 0  # refused means nothing was imported

    kept = CliRunner().invoke(cli, ["import-crsarena", "--catalog", "none", "--no-score", "--db", str(db_path)])
    assert kept.exit_code == 0, kept.output  # the operator may still ask for titles as written
    assert "2 of 2 conversations added; 1 of 1 battles and 1 votes added" in kept.output


def test_missing_files_give_the_same_message_from_the_cli_and_the_app(db_path, tmp_path, monkeypatch):
    monkeypatch.setenv("CRS_DATA_DIR", str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    message = missing_files_message(tmp_path / "empty" / "crsarena")
    assert message.startswith("CRSArena-Dial files not found in ") and "CRS_DATA_DIR" in message
    result = CliRunner().invoke(cli, ["import-crsarena", "--catalog", "none", "--db", str(db_path)])
    assert result.exit_code != 0 and message in result.output
    assert ui_import(db_path) == safe_text(message)
    with pytest.raises(ImportRefused) as refused:
        import_dial(get_db(db_path), catalog_name=None)
    assert refused.value.reason == "files" and str(refused.value) == message


def test_a_broken_file_is_refused_without_python_text(db_path, data_dir_without_catalog):
    (data_dir_without_catalog / "crsarena" / "votes_open.csv").write_text("session_id,user_id\n1,2\n", encoding="utf-8")
    with pytest.raises(ImportRefused) as refused:
        import_dial(get_db(db_path), catalog_name=None, score=False)
    assert refused.value.reason == "format" and str(refused.value).startswith("Import failed: ")
    assert "Traceback" not in str(refused.value) and "missing crs1" in str(refused.value)


def test_the_import_stores_scores_and_a_fresh_board(db_path, data_dir_without_catalog):
    db = get_db(db_path)
    report = import_dial(db, data_dir_without_catalog / "crsarena", catalog_name=None, score=True)
    assert (report.conversations_added, report.votes_added, report.scored) == (2, 1, 2)
    snapshot = latest_leaderboard_snapshot(db)
    assert snapshot is not None and {r["system"] for r in snapshot["rows"]} == {"kbrd_redial", "barcor_redial"}
    again = import_dial(db, data_dir_without_catalog / "crsarena", catalog_name=None, score=False)
    assert (again.conversations_added, again.votes_added) == (0, 0)
