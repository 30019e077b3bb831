"""The leaderboard (ratings joined with automatic scores), snapshots, CRSArena-Dial import/export."""

import json

import pytest
from click.testing import CliRunner

from arena.board_compute import compute_leaderboard, dataset_of, scorers
from arena.crsarena_import import export_jsonl, import_crsarena
from commands import cli
from storage.battle_votes import latest_leaderboard_snapshot, save_battle, save_vote
from storage.conversations import save_conversation
from storage.db import get_db
from storage.evaluations import finish_evaluation, save_factor_score, start_evaluation
from storage.records import Battle, Conversation, Evaluation, FactorScore, Turn, Vote

# CRS Arena's published Elo (K = 16, CRSArena-Dial README / analysis notebook)
PUBLISHED_ELO = {
    "chatgpt_opendialkg": 1102,
    "chatgpt_redial": 1102,
    "barcor_redial": 1077,
    "kbrd_redial": 994,
    "barcor_opendialkg": 988,
    "unicrs_redial": 950,
    "unicrs_opendialkg": 937,
    "crbcrs_redial": 930,
    "kbrd_opendialkg": 920,
}


def conversation(db, system: str, *, source: str = "import", domain: str = "movies") -> str:
    c = Conversation(
        system_id=system,
        source=source,
        domain=domain,
        turns=[Turn("user", "a comedy?"), Turn("system", "Try Airplane! (1980).")],
    )
    return save_conversation(db, c).id


def evaluate(db, conversation_id: str, scorer: str, overall, factors: dict, metrics: dict | None = None) -> None:
    """One finished evaluation; ``factors`` maps factor → score or {judge: score}."""
    evaluation = start_evaluation(db, Evaluation(conversation_id=conversation_id, scorer=scorer))
    for factor, value in factors.items():
        for judge, score in (value if isinstance(value, dict) else {"j": value}).items():
            save_factor_score(db, evaluation.id, FactorScore(factor, score, judge, "core-1"))
    finish_evaluation(db, evaluation.id, overall=overall, metrics=metrics or {})


def battle(db, a: str, b: str, choice: str, n: int = 1, domain: str = "movies") -> None:
    for _ in range(n):
        saved = save_battle(db, Battle(system_a=a, system_b=b, conversation_a=None, conversation_b=None, domain=domain))
        save_vote(db, Vote(battle_id=saved.id, choice=choice))


@pytest.fixture
def populated(db_path):
    db = get_db(db_path)
    battle(db, "x", "y", "a", 6)
    battle(db, "y", "x", "a", 2)
    battle(db, "z", "x", "a", 1, domain="books")
    x1, x2, y1 = conversation(db, "x"), conversation(db, "x"), conversation(db, "y")
    evaluate(db, x1, "proxy", 60.0, {"coherence": 0.0})
    evaluate(db, x1, "proxy", 90.0, {"coherence": 3.0})  # a re-run: only this one counts
    evaluate(db, x2, "proxy", 80.0, {"coherence": {"m1": 1.0, "m2": 2.0}, "novelty": 2.0})  # two judges
    evaluate(db, y1, "proxy", 40.0, {"coherence": 2.0})
    evaluate(db, x1, "llm:judge", 10.0, {"coherence": 4.0})
    sim1, sim2 = conversation(db, "y", source="simulation"), conversation(db, "y", source="simulation")
    evaluate(db, sim1, "proxy", None, {}, {"recall@1": 0.0, "recall@10": 0.5, "recall@50": None})
    evaluate(db, sim2, "llm:judge", None, {}, {"recall@1": 1.0, "recall@10": 1.0})
    return db


def test_ratings_join_the_automatic_scores_of_one_scorer(populated):
    assert scorers(populated) == ["proxy", "llm:judge"]  # proxy finished 4 conversations, llm:judge 2
    rows, figures = compute_leaderboard(populated, domain="movies", rounds=200)
    by = {r["system"]: r for r in rows}
    assert [r["system"] for r in rows] == ["x", "y"]  # no z: its only battle is in another domain
    x, y = by["x"], by["y"]
    assert x["battles"] == 8 and (x["wins"], x["losses"]) == (6, 2) and x["rating"] > y["rating"]
    assert x["ci_low"] <= x["rating"] <= x["ci_high"] and x["rank"] == 1
    assert x["overall_mean"] == pytest.approx((90 + 80) / 2) and x["judged"] == 2
    assert x["overall_ci_low"] <= x["overall_mean"] <= x["overall_ci_high"]
    assert x["coherence"] == pytest.approx((3.0 + 1.5) / 2)  # judges averaged within a conversation first
    assert x["novelty"] == pytest.approx(2.0) and x["naturalness"] is None
    assert y["overall_mean"] == 40.0 and (y["overall_ci_low"], y["overall_ci_high"]) == (40.0, 40.0)
    assert y["judged"] == 2  # the simulated conversation was judged too (without an overall score)
    assert y["recall@1"] == pytest.approx(0.5) and y["recall@10"] == pytest.approx(0.75)
    assert y["recall@50"] is None and y["simulations"] == 2 and x["simulations"] is None
    heatmap = figures["win_rate"].data[0]
    assert list(heatmap.x) == ["x", "y"] and heatmap.z[0][1] == pytest.approx(6 / 8)


def test_a_recall_no_list_could_measure_shows_a_dash_not_a_blank(populated):
    """iEvaLM Table 2 marks a recall the system's lists cannot measure "–" (issue #74, point 5): a simulated
    system's missing Recall@50 reads "–"; a system never simulated stays blank."""
    from arena.board_view import display_table, recall_label

    rows, _ = compute_leaderboard(populated, domain="movies", rounds=50)
    table = display_table(rows).set_index("System")
    assert table.loc["y", recall_label("recall@50")] == "–" and table.loc["y", recall_label("recall@10")] == "0.750"
    assert table.loc["x", recall_label("recall@50")] == ""


def test_a_column_never_mixes_scorers(populated):
    rows, _ = compute_leaderboard(populated, scorer="llm:judge", domain="movies")
    by = {r["system"]: r for r in rows}
    assert by["x"]["overall_mean"] == 10.0 and by["x"]["coherence"] == 4.0 and by["x"]["judged"] == 1
    assert by["y"]["judged"] == 1 and by["y"]["overall_mean"] is None and by["y"]["coherence"] is None
    assert by["y"]["recall@10"] == pytest.approx(0.75)  # recall does not depend on the judge
    everything, _ = compute_leaderboard(populated)
    assert {r["system"] for r in everything} == {"x", "y", "z"}


def test_reading_never_writes_and_a_snapshot_is_stored_only_on_change(populated):
    from arena.board_cache import read_board, refresh_board
    from storage.battle_votes import board_version, count_leaderboard_snapshots

    assert count_leaderboard_snapshots(populated) == 0
    version = board_version(populated)
    for _ in range(5):  # anonymous reads: no row, no version change
        board = read_board(populated, domain="movies")
    assert count_leaderboard_snapshots(populated) == 0 and board_version(populated) == version
    assert board.rows == compute_leaderboard(populated, domain="movies")[0]
    first = refresh_board(populated)
    assert first is not None and refresh_board(populated) is None  # unchanged data: nothing written
    snapshot = latest_leaderboard_snapshot(populated)
    # the refresh tagged the votes stored without a tag (arena.battle_tags), which moved the version once
    assert snapshot["id"] == first and snapshot["version"] == board_version(populated) > version
    assert snapshot["scorer"] == "proxy"
    assert read_board(populated).source in ("cache", "snapshot")
    battle(populated, "x", "y", "tie")  # a vote moves the version: the next refresh stores a new board
    assert board_version(populated) > version
    votes_before = {r["system"]: r["battles"] for r in read_board(populated).rows}
    assert votes_before["x"] == 10  # a read right after the vote already counts it (computed in memory)
    assert refresh_board(populated) == first + 1


def test_snapshots_are_kept_to_a_bounded_number(db_path):
    from arena.board_cache import refresh_board
    from storage.battle_votes import SNAPSHOTS_KEPT, count_leaderboard_snapshots

    db = get_db(db_path)
    for _ in range(SNAPSHOTS_KEPT + 5):
        battle(db, "x", "y", "a")
        refresh_board(db)
    assert count_leaderboard_snapshots(db) == SNAPSHOTS_KEPT


def test_few_battles_are_provisional_and_never_share_rank_one(db_path):
    db = get_db(db_path)
    battle(db, "a", "b", "tie", 12)
    battle(db, "a", "c", "tie", 6)
    battle(db, "c", "b", "a", 2)  # c: 8 battles, unbeaten against b, level with a
    rows = {r["system"]: r for r in compute_leaderboard(db)[0]}
    assert rows["c"]["provisional"] is True and rows["a"]["provisional"] is False
    assert rows["a"]["rank"] == 1 and rows["c"]["rank"] >= 2


def test_the_demo_judge_is_never_the_default_scorer(db_path):
    db = get_db(db_path)
    for _ in range(3):
        evaluate(db, conversation(db, "x"), "llm:SmolLM2-135M-Instruct", 50.0, {"coherence": 2.0})
    evaluate(db, conversation(db, "x"), "proxy", 40.0, {"coherence": 1.0})
    assert scorers(db) == ["proxy", "llm:SmolLM2-135M-Instruct"]
    rows, _ = compute_leaderboard(db)
    assert rows[0]["overall_mean"] == 40.0


def test_uploads_stay_off_the_board_unless_the_operator_imports_them(db_path, monkeypatch):
    from storage.stats import promote_uploads

    db = get_db(db_path)
    evaluate(db, conversation(db, "upload:fake", source="upload"), "proxy", 99.0, {"coherence": 4.0})
    evaluate(db, conversation(db, "kbrd"), "proxy", 30.0, {"coherence": 1.0})
    assert {r["system"] for r in compute_leaderboard(db)[0]} == {"kbrd"}
    monkeypatch.setenv("CRS_ARENA_LEADERBOARD_UPLOADS", "1")
    assert {r["system"] for r in compute_leaderboard(db)[0]} == {"kbrd", "upload:fake"}
    monkeypatch.delenv("CRS_ARENA_LEADERBOARD_UPLOADS")
    result = CliRunner().invoke(cli, ["promote-uploads", "--system", "upload:fake", "--db", str(db_path)])
    assert result.exit_code == 0 and "1 uploaded conversation(s)" in result.output
    assert {r["system"] for r in compute_leaderboard(db)[0]} == {"kbrd", "upload:fake"}
    assert promote_uploads(db) == 0


def test_dataset_filter_keeps_battles_within_one_training_set(db_path):
    db = get_db(db_path)
    battle(db, "kbrd_redial", "barcor_redial", "a", 3)
    battle(db, "kbrd_redial", "kbrd_opendialkg", "b", 3)
    battle(db, "chatcrs", "retrieval", "tie", 2)
    rows, _ = compute_leaderboard(db, dataset="redial")
    assert {r["system"] for r in rows} == {"kbrd_redial", "barcor_redial"}
    assert all(r["dataset"] == "redial" and r["battles"] == 3 and r["group"] == 1 for r in rows)
    rows, _ = compute_leaderboard(db, dataset="other")
    assert {r["system"] for r in rows} == {"chatcrs", "retrieval"} and all(r["dataset"] is None for r in rows)
    groups = {r["system"]: r["group"] for r in compute_leaderboard(db)[0]}
    assert groups["chatcrs"] == groups["retrieval"] != groups["kbrd_redial"]
    assert dataset_of("unicrs_opendialkg") == "opendialkg" and dataset_of("chatcrs") is None


def test_empty_database_gives_an_empty_board(db_path):
    from arena.board_cache import refresh_board

    rows, figures = compute_leaderboard(get_db(db_path))
    assert rows == [] and "win_rate" in figures
    refresh_board(get_db(db_path))
    assert latest_leaderboard_snapshot(get_db(db_path))["rows"] == []


def test_crsarena_import_is_idempotent_and_puts_chatgpt_first(db_path, shared_data, tmp_path):
    db = get_db(db_path)
    report = import_crsarena(db, shared_data / "crsarena")
    assert (report.conversations_read, report.conversations_added) == (474, 474)
    assert (report.vote_rows, report.battles, report.battles_added, report.votes_added) == (185, 184, 184, 184)
    assert report.repeated_rows == 1 and report.sides_without_conversation == 3
    again = CliRunner().invoke(
        cli, ["import-crsarena", str(shared_data / "crsarena"), "--catalog", "none", "--no-score", "--db", str(db_path)]
    )
    assert again.exit_code == 0, again.output
    assert "0 of 474 conversations added; 0 of 184 battles and 0 votes added" in again.output
    assert db["votes"].count == 184 and db["battles"].count == 184 and db["conversations"].count == 474

    rows, _ = compute_leaderboard(db)
    assert {r["system"] for r in rows[:2]} == {"chatgpt_opendialkg", "chatgpt_redial"}
    assert rows[0]["rank"] == 1 and rows[1]["rank"] == 1 and rows[-1]["system"] == "kbrd_opendialkg"
    for r in rows:  # the same votes in the same order reproduce the published Elo column
        assert abs(r["elo"] - PUBLISHED_ELO[r["system"]]) < 10, r["system"]

    out = tmp_path / "arena.jsonl"
    result = CliRunner().invoke(cli, ["export", "--out", str(out), "--db", str(db_path)])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    kinds = [line["type"] for line in lines]
    assert (kinds.count("conversation"), kinds.count("vote"), kinds.count("judgment")) == (474, 184, 0)
    vote = next(line for line in lines if line["type"] == "vote")
    assert vote["choice"] in ("a", "b", "tie") and "voter" not in vote
    assert export_jsonl(db, tmp_path / "again.jsonl") == {
        "conversations": 474,
        "votes": 184,
        "judgments": 0,
        "human_labels": 0,
    }


def test_import_refuses_a_folder_without_the_files(db_path, tmp_path):
    with pytest.raises(FileNotFoundError, match="CRSArena-Dial"):
        import_crsarena(get_db(db_path), tmp_path)
    result = CliRunner().invoke(cli, ["import-crsarena", str(tmp_path), "--catalog", "none", "--db", str(db_path)])
    assert result.exit_code != 0 and f"CRSArena-Dial files not found in {tmp_path}" in result.output


def test_the_refresher_coalesces_a_burst_of_votes_and_stores_the_last_board(db_path):
    """A poke per vote (as the arena does) must not mean a refresh per vote: pokes within a refresh's minimum gap
    wait for it, and a burst of pokes is answered by one refresh, which stores the board counting every vote. Shown
    by counts, never by a clock: the first refresher's gap is an hour, so nothing can refresh inside it however
    slowly the votes are written; the second's is none, and its pokes all come after the vote they announce."""
    import time

    from arena.board_cache import Refresher
    from storage.battle_votes import board_version

    def until(condition) -> bool:
        for _ in range(400):  # bounded wait (polls of 0.05 s), never a timing assert
            if condition():
                return True
            time.sleep(0.05)
        return condition()

    db = get_db(db_path)
    pokes = 60
    waiting = Refresher(db_path, every=3600.0, min_gap=3600.0).start()
    try:
        assert until(lambda: waiting.refreshes == 1)  # the refresh at start; its gap has begun
        stored = latest_leaderboard_snapshot(db)["version"]
        for _ in range(pokes):
            battle(db, "x", "y", "a")
            waiting.poke()
        assert board_version(db) != stored
        assert waiting.refreshes == 1 and latest_leaderboard_snapshot(db)["version"] == stored  # no refresh per vote
    finally:
        waiting.stop()

    answering = Refresher(db_path, every=3600.0, min_gap=0.0).start()
    try:
        assert until(lambda: answering.refreshes == 1)  # at start: the board of the votes above
        battle(db, "x", "y", "a")
        for _ in range(pokes):
            answering.poke()
        assert until(lambda: latest_leaderboard_snapshot(db)["version"] == board_version(db))
        snapshot = latest_leaderboard_snapshot(db)
        assert {r["system"]: r["battles"] for r in snapshot["rows"]} == {"x": pokes + 1, "y": pokes + 1}
        assert answering.refreshes == 2  # one refresh answered the burst of pokes
    finally:
        answering.stop()


def test_each_rank_says_how_sure_the_order_is(populated):
    from arena.board_view import ABOVE_NEXT, board_view

    battle(populated, "x", "y", "a", 3)  # past the provisional 10 battles each (with one the line says "not yet")
    battle(populated, "y", "x", "a", 1)
    rows, _ = compute_leaderboard(populated, domain="movies")
    x, y = rows
    assert 0.5 < x["p_above_next"] <= 1 and y["p_above_next"] is None  # y is last: nothing below it
    view = board_view(populated, domain="movies")
    assert view.table.loc[0, ABOVE_NEXT] == f"{x['p_above_next']:.2f}" and view.table.loc[1, ABOVE_NEXT] == ""
    assert "How far to trust the order" in view.summary and "`x`" in view.summary
    assert view.fit["method"] == "bradley-terry" and view.fit["closest"]["upper"] == "x"


def test_one_vote_gives_no_probability_of_the_order(db_path):
    """One vote resampled by the bootstrap always gives the same winner (1.00): with a provisional system on the board
    neither the column nor the line claims how sure the order is."""
    from arena.board_view import ABOVE_NEXT, board_view

    db = get_db(db_path)
    battle(db, "x", "y", "a")
    view = board_view(db)
    assert list(view.table[ABOVE_NEXT]) == ["", ""]
    assert "not yet" in view.summary and "95%" not in view.summary
