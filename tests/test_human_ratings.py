"""People's ratings (#23): stored once per rater, refused with a reason, averaged, exported in CRSArena-Eval's layout,
and compared with the judge in the judge-versus-people panel exactly as a hand computation and `meta` compute it."""

from __future__ import annotations

import json
import threading

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from scipy import stats

from arena.battles import BattleNotReady, NotTheVoter, reveal, vote
from arena.human_ratings import RatingRefused, parse_items, rate_battle, rate_conversation
from arena.judge_agreement import MIN_DIALOGUES, TIE_MARGIN, judge_agreement, scatter
from commands import cli
from evaluators.log_readers import read_crsarena_eval
from storage.battle_votes import save_battle
from storage.conversations import save_conversation
from storage.db import close_thread_connections, get_db
from storage.evaluations import finish_evaluation, save_factor_score, start_evaluation
from storage.human_labels import CRSARENA_EVAL_SCALES, Rating, crsarena_eval_records, ratings, save_ratings
from storage.records import Battle, Conversation, Evaluation, FactorScore, Turn

ITEMS = ("understanding", "task_completion", "interest_arousal", "dialogue_overall")


def items(u, t, i, o) -> dict:
    return dict(zip(ITEMS, (u, t, i, o), strict=True))


def conversation(db, system: str, text: str = "Try Heat (1995).", source: str = "arena") -> str:
    turns = [Turn("user", "A heist movie?"), Turn("system", text)]
    return save_conversation(db, Conversation(system_id=system, source=source, turns=turns)).id


def voted_battle(db, a: str = "kbrd", b: str = "barcor", choice: str = "a", voter: str = "s1") -> Battle:
    battle = save_battle(db, Battle(a, b, conversation(db, a), conversation(db, b)))
    vote(db, battle.id, choice, voter=voter)
    return battle


def score(db, conversation_id: str, overall: float, factors: dict[str, float], scorer: str = "proxy") -> None:
    evaluation = start_evaluation(
        db, Evaluation(conversation_id=conversation_id, scorer=scorer, config={"scorer": scorer}, fingerprint="fp1")
    )
    for factor, value in factors.items():
        save_factor_score(db, evaluation.id, FactorScore(factor, value, "proxy", "core-v2"))
    finish_evaluation(db, evaluation.id, overall=overall)


def test_a_voter_rates_both_sides_once_and_a_second_submission_replaces_the_first(db_path):
    db = get_db(db_path)
    battle = voted_battle(db)
    receipt = rate_battle(db, battle.id, "s1", items(4, 3, 2, 3), items(1, 0, 1, 1))
    assert not receipt.replaced and "stored" in receipt.message()
    stored = ratings(db)
    assert [(r["side"], r["system_id"], r["dialogue_overall"], r["names_seen"]) for r in stored] == [
        ("a", "kbrd", 3.0, 0),
        ("b", "barcor", 1.0, 0),
    ]
    again = rate_battle(db, battle.id, "s1", items("2", 2, 2.0, 2), items(0, 0, 0, 0))
    assert again.replaced and "replaced" in again.message()
    assert [(r["side"], r["dialogue_overall"]) for r in ratings(db)] == [("a", 2.0), ("b", 0.0)]


@pytest.mark.parametrize(
    ("side_a", "why"),
    [
        (items(4, 3, 2, None), "missing “Overall”"),
        ({"understanding": 1}, "missing"),
        (items(5, 3, 2, 1), "from 0 to 4"),
        (items(-1, 3, 2, 1), "from 0 to 4"),
        (items(2.5, 3, 2, 1), "from 0 to 4"),
        (items(True, 3, 2, 1), "from 0 to 4"),
        (items("four", 3, 2, 1), "from 0 to 4"),
        ({**items(1, 1, 1, 1), "charm": 4}, "Unknown rating item"),
        ("4,4,4,4", "Expected the four ratings"),
    ],
)
def test_bad_ratings_are_refused_with_the_reason_and_nothing_is_stored(db_path, side_a, why):
    db = get_db(db_path)
    battle = voted_battle(db)
    with pytest.raises(RatingRefused, match=why):
        rate_battle(db, battle.id, "s1", side_a, items(1, 1, 1, 1))
    assert ratings(db) == []


def test_only_the_voter_rates_and_only_after_the_vote(db_path):
    db = get_db(db_path)
    unvoted = save_battle(db, Battle("kbrd", "barcor", conversation(db, "kbrd"), conversation(db, "barcor")))
    with pytest.raises(RatingRefused, match="Vote first"):
        rate_battle(db, unvoted.id, "s1", items(1, 1, 1, 1), items(1, 1, 1, 1))
    with pytest.raises(RatingRefused, match="no battle"):
        rate_battle(db, "no-such-battle", "s1", items(1, 1, 1, 1), items(1, 1, 1, 1))
    with pytest.raises(RatingRefused, match="no battle"):
        rate_battle(db, None, "s1", items(1, 1, 1, 1), items(1, 1, 1, 1))
    battle = voted_battle(db, voter="s1")
    with pytest.raises(RatingRefused, match="Only the person who voted"):
        rate_battle(db, battle.id, "someone-else", items(1, 1, 1, 1), items(1, 1, 1, 1))
    with pytest.raises(BattleNotReady):
        reveal(db, unvoted.id, "s1")
    with pytest.raises(NotTheVoter):
        reveal(db, battle.id, "someone-else")
    assert ratings(db) == []


def test_a_rating_after_the_reveal_is_kept_but_counts_nowhere(db_path):
    db = get_db(db_path)
    battle = voted_battle(db)
    shown = reveal(db, battle.id, "s1")
    assert (shown.system_a, shown.system_b) == ("kbrd", "barcor")
    rate_battle(db, battle.id, "s1", items(4, 4, 4, 4), items(0, 0, 0, 0))
    assert [r["names_seen"] for r in ratings(db)] == [1, 1]
    assert ratings(db, blind_only=True) == [] and list(crsarena_eval_records(db)) == []


def test_concurrent_submissions_leave_one_rating_per_side(db_path):
    get_db(db_path)
    battle = voted_battle(get_db(db_path))
    errors = []

    def submit(n: int) -> None:
        try:
            rate_battle(get_db(db_path), battle.id, "s1", items(n % 5, 1, 1, n % 5), items(1, 1, 1, 1))
        except Exception as e:
            errors.append(e)
        finally:
            close_thread_connections()

    threads = [threading.Thread(target=submit, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert sorted(r["side"] for r in ratings(get_db(db_path))) == ["a", "b"]


def test_a_chat_conversation_is_rated_by_its_viewer_once_it_has_a_reply(db_path):
    db = get_db(db_path)
    chat = conversation(db, "kbrd", source="chat")
    receipt = rate_conversation(db, chat, "viewer", items(3, 3, 2, 3))
    assert receipt.rated == 1 and not receipt.replaced
    assert rate_conversation(db, chat, "viewer", items(2, 3, 2, 3)).replaced
    [row] = ratings(db)
    assert (row["origin"], row["understanding"], row["names_seen"]) == ("chat", 2.0, 1)
    empty = save_conversation(db, Conversation(system_id="kbrd", source="chat", turns=[Turn("user", "hi")])).id
    with pytest.raises(RatingRefused, match="not answered"):
        rate_conversation(db, empty, "viewer", items(1, 1, 1, 1))
    with pytest.raises(RatingRefused, match="chat first"):
        rate_conversation(db, conversation(db, "kbrd", source="arena"), "viewer", items(1, 1, 1, 1))
    with pytest.raises(RatingRefused, match="chat first"):
        rate_conversation(db, "", "viewer", items(1, 1, 1, 1))


def test_parse_items_accepts_the_radio_values_and_names_the_side():
    assert parse_items(items("0", 4, 2.0, " 3 ")) == items(0.0, 4.0, 2.0, 3.0)
    with pytest.raises(RatingRefused, match="for System B"):
        parse_items(items(9, 1, 1, 1), who="System B")


# -- the panel, by hand ----------------------------------------------------------------------------

JUDGE = [  # (system, judge overall, coherence, semantic relevance, explainability, people's four items)
    ("kbrd", 80.0, 3.5, 3.0, 2.0, (4, 4, 3, 4)),
    ("barcor", 30.0, 1.0, 1.5, 1.0, (1, 0, 1, 1)),
    ("unicrs", 55.0, 2.0, 2.5, 3.0, (2, 3, 2, 2)),
    ("kbrd", 70.0, 3.0, 3.5, 2.5, (3, 3, 4, 4)),
    ("barcor", 20.0, 0.5, 1.0, 0.5, (0, 1, 0, 0)),
    ("unicrs", 60.0, 2.5, 2.0, 1.5, (3, 2, 1, 2)),
]


@pytest.fixture
def rated(db_path):
    """Three voted battles, both sides rated (two raters on the first), every conversation scored."""
    db = get_db(db_path)
    ids = []
    for k in range(0, len(JUDGE), 2):
        first, second = JUDGE[k], JUDGE[k + 1]
        battle = voted_battle(db, first[0], second[0], choice="a" if first[1] > second[1] else "b", voter=f"v{k}")
        rate_battle(db, battle.id, f"v{k}", items(*first[5]), items(*second[5]))
        for row, cid in ((first, battle.conversation_a), (second, battle.conversation_b)):
            score(db, cid, row[1], {"coherence": row[2], "semantic_relevance": row[3], "explainability": row[4]})
            ids.append(cid)
    # a second rater of the first battle's two conversations (as a second annotator would): averaged with the first
    first = next(db.query("select battle_id, conversation_id, system_id from human_labels order by id limit 1"))
    battle_row = next(db.query("select * from battles where id = ?", [first["battle_id"]]))
    save_ratings(
        db,
        [
            Rating(
                battle_row["conversation_a"],
                battle_row["system_a"],
                "v-second",
                "arena",
                items(2, 2, 1, 2),
                battle_row["id"],
                "a",
            ),
            Rating(
                battle_row["conversation_b"],
                battle_row["system_b"],
                "v-second",
                "arena",
                items(1, 2, 1, 3),
                battle_row["id"],
                "b",
            ),
        ],
    )
    return db, ids


def _value(rows, measure_start: str, evidence: str = "this app") -> dict:
    [row] = [r for r in rows if r["Measure"].startswith(measure_start) and r["Evidence"] == evidence]
    return row


def test_the_panel_equals_a_hand_computation(rated):
    db, ids = rated
    found = judge_agreement(db)
    assert len(found.setups) == 1 and found.setups[0].startswith("proxy")
    people = [np.array(row[5], dtype=float) for row in JUDGE]
    people[0] = (people[0] + np.array((2, 2, 1, 2))) / 2  # the first conversation's two raters, averaged
    people[1] = (people[1] + np.array((1, 2, 1, 3))) / 2
    judge = np.array([row[1] for row in JUDGE])
    overall = _value(found.rows, "overall vs “overall”")
    assert overall["n"] == len(JUDGE) >= MIN_DIALOGUES
    assert overall["Value"] == f"{stats.spearmanr(judge, [p[3] for p in people]).statistic:.2f}"
    assert overall["95% interval"].startswith("[")
    for column, measure, item in ((2, "coherence", 0), (3, "semantic relevance", 1), (4, "explainability", 2)):
        row = _value(found.rows, measure)
        expected = stats.spearmanr([r[column] for r in JUDGE], [p[item] for p in people]).statistic
        assert row["Value"] == f"{expected:.2f}" and row["n"] == len(JUDGE)
    systems = ("barcor", "kbrd", "unicrs")
    means = [
        (
            judge[[r[0] == s for r in JUDGE]].mean(),
            np.mean([p[3] for p, r in zip(people, JUDGE, strict=True) if r[0] == s]),
        )
        for s in systems
    ]
    system_row = _value(found.rows, "overall vs people's overall (systems")
    assert system_row["n"] == 3
    assert system_row["Value"] == f"{stats.spearmanr(*zip(*means, strict=True)).statistic:.2f}"
    votes = _value(found.rows, "vote agreement without ties")  # 3 votes < MIN_BATTLES
    assert votes["n"] == 3 and "too few votes yet" in votes["Value"]
    assert all(r["Value"].startswith("too few") for r in found.rows if r["Evidence"] != "this app")
    figure = scatter(found, found.setups[0])
    assert sum(len(trace.x) for trace in figure.data) == len(JUDGE)


def test_vote_agreement_counts_ties_mt_bench_s_way(db_path):
    db = get_db(db_path)
    # (judge A, judge B, vote): 5 decisive votes (4 agree), 2 ties (one the judge also calls a tie)
    cases = [
        (80, 20, "a"),
        (30, 60, "b"),
        (70, 50, "a"),
        (40, 90, "a"),
        (90, 10, "a"),
        (50, 50 + TIE_MARGIN / 2, "tie"),
        (10, 90, "both_bad"),
    ]
    for a_score, b_score, choice in cases:
        battle = voted_battle(db, choice=choice, voter="")
        score(db, battle.conversation_a, a_score, {})
        score(db, battle.conversation_b, b_score, {})
    rows = judge_agreement(db).rows
    without = _value(rows, "vote agreement without ties")
    assert (without["Value"], without["n"]) == ("80%", 5)
    with_ties = _value(rows, "vote agreement with ties")
    assert (with_ties["Value"], with_ties["n"]) == (f"{5 / 7:.0%}", 7)
    assert "too few ratings yet" in _value(rows, "overall vs “overall”")["Value"]


def test_the_export_reads_back_in_meta_and_reproduces_the_panel(rated, db_path, tmp_path):
    db, ids = rated
    labels, scores = tmp_path / "labels.json", tmp_path / "scores.jsonl"
    result = CliRunner().invoke(
        cli, ["export-labels", "--out", str(labels), "--scores-out", str(scores), "--db", str(db_path)]
    )
    assert result.exit_code == 0, result.output
    assert "6 rated conversation(s)" in result.output and "6 scored" in result.output
    records = json.loads(labels.read_text())
    assert {"conv_id", "dialogue", "dial_level_aggregated"} <= set(records[0])
    assert "v0" not in labels.read_text() and "v-second" not in labels.read_text()  # no rater ids
    assert (
        records[0]["dial_level_aggregated"]["understanding"] == (4 + 2) / 2 * CRSARENA_EVAL_SCALES["understanding"] / 4
    )
    read = read_crsarena_eval(labels)
    assert {c.system_id for c in read.conversations} == {"kbrd", "barcor", "unicrs"}
    a_side, b_side = records[0]["conv_id"], records[1]["conv_id"]
    assert a_side.split("_", 1)[1] == b_side.split("_", 1)[1]  # both sides of a battle share its uuid (one user)

    out = tmp_path / "meta"
    for aspect, measure in (("dialogue_overall", "overall vs “overall”"), ("understanding", "coherence")):
        key = "overall" if aspect == "dialogue_overall" else "coherence"
        result = CliRunner().invoke(
            cli,
            [
                "meta",
                "--scores",
                str(scores),
                "--human",
                str(labels),
                "--aspect",
                aspect,
                "--score",
                key,
                "--out-dir",
                str(out),
            ],
        )
        assert result.exit_code == 0, result.output
        table = pd.read_csv(out / "correlations.csv").set_index("level")
        panel = _value(judge_agreement(db).rows, measure)
        assert f"{table.loc['dialogue', 'spearman']:.2f}" == panel["Value"]
        low, high = table.loc["dialogue", "spearman_low"], table.loc["dialogue", "spearman_high"]
        assert f"[{low:.2f}, {high:.2f}]" == panel["95% interval"]
        assert int(table.loc["dialogue", "n"]) == panel["n"]
        if aspect == "dialogue_overall":
            system = _value(judge_agreement(db).rows, "overall vs people's overall (systems")
            assert f"{table.loc['system', 'spearman']:.2f}" == system["Value"]


def test_export_labels_refuses_an_unknown_scorer_and_writes_an_empty_list_when_nobody_rated(db_path, tmp_path):
    get_db(db_path)
    out = tmp_path / "labels.json"
    result = CliRunner().invoke(cli, ["export-labels", "--out", str(out), "--db", str(db_path)])
    assert result.exit_code == 0 and json.loads(out.read_text()) == []
    result = CliRunner().invoke(
        cli,
        [
            "export-labels",
            "--out",
            str(out),
            "--scores-out",
            str(tmp_path / "s.jsonl"),
            "--scorer",
            "llm:nope",
            "--db",
            str(db_path),
        ],
    )
    assert result.exit_code != 0 and "no judge setup 'llm:nope'" in result.output and "Traceback" not in result.output


def test_a_battle_voted_before_a_restart_is_rated_after_it(db_path):
    db = get_db(db_path)
    battle = voted_battle(db)
    db.close()
    close_thread_connections()  # the process ends; a new one opens the same file
    again = get_db(db_path)
    assert not rate_battle(again, battle.id, "s1", items(3, 3, 3, 3), items(2, 2, 2, 2)).replaced
    assert len(ratings(again)) == 2


def test_calibrate_refits_on_the_exported_labels_beside_the_shipped_ones(rated, db_path, shared_data, tmp_path):
    from evaluators.proxy.scorer import default_path, load_calibration

    labels, refit = tmp_path / "labels.json", tmp_path / "proxy.refit.json"
    assert CliRunner().invoke(cli, ["export-labels", "--out", str(labels), "--db", str(db_path)]).exit_code == 0
    crsarena = shared_data / "crsarena"
    before = default_path().read_bytes()
    result = CliRunner().invoke(
        cli,
        [
            "calibrate",
            "--eval",
            str(crsarena / "crs_arena_eval_dev.json"),
            "--votes",
            str(crsarena),
            "--labels",
            str(labels),
            "--out",
            str(refit),
            "--boot",
            "20",
        ],
    )
    assert result.exit_code == 0, result.output
    before_part, after_part = result.output.split("AFTER:")
    assert "BEFORE: crs_arena_eval_dev.json alone" in before_part and "fitted on 93 labelled dialogues" in before_part
    assert "with 6 labelled dialogue(s) from labels.json" in after_part and "fitted on 99 labelled" in after_part
    assert "score with it: python -m evaluators evaluate" in result.output
    saved = load_calibration(refit)
    assert saved.training["dialogues"] == 99 and saved.training["labels"] == ["labels.json"]
    assert saved.fingerprint != load_calibration().fingerprint  # a new scorer version on the board
    assert default_path().read_bytes() == before  # the shipped calibration is untouched


def test_imported_crsarena_eval_labels_show_apart_from_the_app_s_own(db_path, shared_data):
    from arena.crsarena_import import ImportRefused, import_eval_labels

    db = get_db(db_path)
    first = import_eval_labels(db, shared_data / "crsarena" / "crs_arena_eval_dev.json")
    assert (first.conversations_added, first.labelled, first.scored) == (93, 93, 93)
    again = import_eval_labels(db, shared_data / "crsarena" / "crs_arena_eval_dev.json")
    assert again.conversations_added == 0 and len(ratings(db, origins=("crsarena_eval",))) == 93
    assert ratings(db) == []  # the app's own evidence stays empty
    rows = judge_agreement(db).rows
    imported = _value(rows, "overall vs “overall”", evidence="imported (CRSArena)")
    assert imported["n"] == 93 and -1 <= float(imported["Value"]) <= 1 and imported["95% interval"].startswith("[")
    assert "too few" in _value(rows, "overall vs “overall”")["Value"]
    with pytest.raises(ImportRefused, match="CRSArena-Eval file not found"):
        import_eval_labels(db, shared_data / "nowhere.json")


# -- satisfied / frustrated (#26 item 4) -----------------------------------------------------------


def test_a_conversation_ends_satisfied_or_frustrated_and_a_second_choice_replaces_the_first(db_path):
    from arena.human_ratings import end_with_sentiment
    from storage.conversations import get_conversation

    db = get_db(db_path)
    chat = conversation(db, "kbrd", source="chat")
    assert end_with_sentiment(db, "satisfied", conversation_id=chat) == "Recorded: 😊 Satisfied."
    assert "Changed to 😠 Frustrated" in end_with_sentiment(db, "frustrated", conversation_id=chat)
    assert get_conversation(db, chat).metadata["sentiment"] == "frustrated"
    battle = save_battle(
        db, Battle("kbrd", "barcor", conversation(db, "kbrd"), conversation(db, "barcor"), session="s1")
    )
    assert "Recorded" in end_with_sentiment(db, "satisfied", battle_id=battle.id, side="b", session="s1")
    assert get_conversation(db, battle.conversation_b).metadata["sentiment"] == "satisfied"
    assert "sentiment" not in get_conversation(db, battle.conversation_a).metadata
    for kwargs, why in (
        ({"conversation_id": chat, "sentiment": "meh"}, "satisfied or frustrated"),
        ({"battle_id": battle.id, "side": "a", "session": "other", "sentiment": "satisfied"}, "Only the person"),
        ({"battle_id": battle.id, "side": "c", "session": "s1", "sentiment": "satisfied"}, "no battle"),
        ({"conversation_id": battle.conversation_a, "sentiment": "satisfied"}, "chat first"),  # not a chat
        ({"conversation_id": "", "sentiment": "satisfied"}, "chat first"),
    ):
        sentiment = kwargs.pop("sentiment")
        with pytest.raises(RatingRefused, match=why):
            end_with_sentiment(db, sentiment, **kwargs)
    empty = save_conversation(db, Conversation(system_id="kbrd", source="chat", turns=[Turn("user", "hi")])).id
    with pytest.raises(RatingRefused, match="not answered"):
        end_with_sentiment(db, "satisfied", conversation_id=empty)


def test_the_dial_export_reads_back_with_its_endings_and_votes(db_path, tmp_path):
    from arena.crsarena_import import DIAL_EXPORT
    from arena.human_ratings import end_with_sentiment
    from evaluators.log_readers import read_crsarena_dial
    from evaluators.proxy.calibration import read_votes

    db = get_db(db_path)
    battle = voted_battle(db, choice="both_bad")
    end_with_sentiment(db, "frustrated", battle_id=battle.id, side="a")
    chat = conversation(db, "unicrs", source="chat")
    end_with_sentiment(db, "satisfied", conversation_id=chat)
    out = tmp_path / "dial"
    result = CliRunner().invoke(cli, ["export-dial", "--out-dir", str(out), "--db", str(db_path)])
    assert result.exit_code == 0 and "3 conversation(s), 1 vote(s)" in result.output, result.output
    read = read_crsarena_dial(out / DIAL_EXPORT)
    by_system = {c.system_id: c for c in read.conversations}
    assert set(by_system) == {"kbrd", "barcor", "unicrs"} and not read.skipped
    assert by_system["kbrd"].metadata["sentiment"] == "frustrated" and "sentiment" not in by_system["barcor"].metadata
    assert by_system["unicrs"].metadata["sentiment"] == "satisfied"
    assert by_system["kbrd"].metadata["user_id"] == by_system["barcor"].metadata["user_id"]  # one battle, one user
    [row] = read_votes(out)  # votes_app.csv: read as the published votes_*.csv are
    assert (row["crs1"], row["crs2"], row["vote"]) == ("kbrd", "barcor", "tie")  # both bad: a tie in CRS Arena
    assert f"{row['crs1']}_{row['user_id']}" in {c.id for c in read.conversations}
    assert "s1" not in (out / DIAL_EXPORT).read_text()  # no voter or session id


def test_the_panel_reads_the_endings_as_an_auc(db_path):
    from arena.human_ratings import end_with_sentiment

    db = get_db(db_path)
    judged = {"satisfied": (70.0, 60.0, 50.0, 40.0), "frustrated": (45.0, 30.0, 20.0)}
    for sentiment, overalls in judged.items():
        for overall in overalls:
            cid = conversation(db, "kbrd", source="chat")
            end_with_sentiment(db, sentiment, conversation_id=cid)
            score(db, cid, overall, {})
    row = _value(judge_agreement(db).rows, "overall: satisfied above frustrated")
    pairs = [(h, f) for h in judged["satisfied"] for f in judged["frustrated"]]
    assert row["n"] == 7 and row["Value"] == f"{sum(h > f for h, f in pairs) / len(pairs):.2f}"
    assert row["95% interval"].startswith("[")
