"""Boards by kind of request and votes that revealed a name (#75): the kinds a first message makes, the name check on
the replies (measured on a set labelled before the check was written), the tags stored beside the vote, the board of
one kind with the overall rank beside it, the set-aside count, the command line and the export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_migrations import _version_one

from arena.battle_tags import battle_tag, tag_missing
from arena.battles import vote
from arena.board_cache import refresh_board
from arena.board_compute import MIN_KIND_VOTES, compute_board, kind_counts
from arena.board_view import OVERALL_RANK, board_view
from arena.name_reveal import names_in, system_names
from arena.request_kinds import FAMILY, KINDS, kinds_of, tag_first_message
from catalog.catalog import get_catalog
from crs_backends import request_state
from storage.battle_tags import battle_tags, untagged_voted_battles
from storage.battle_votes import board_version, save_battle, save_vote
from storage.conversations import save_conversation
from storage.db import get_db
from storage.export import vote_rows
from storage.records import Battle, Conversation, Turn, Vote

LABELLED = Path(__file__).parent / "data" / "name_reveal_replies.jsonl"


def labelled_replies() -> list[dict]:
    rows = [json.loads(line) for line in LABELLED.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert "header" in rows[0] and "BEFORE" in rows[0]["header"]
    return rows[1:]


@pytest.fixture(scope="module")
def catalog():
    return get_catalog("bundled")


def test_the_kinds_of_a_request_state():
    assert kinds_of({"genres": ["Comedy"], "min_year": 1990, "max_year": 1999}) == ("genre", "years")
    assert kinds_of({"people": ["Christopher Nolan"]}) == ("person",)
    assert kinds_of({"liked": ["Heat (1995)"]}) == ("title",)
    assert kinds_of({"not_genres": ["Horror"]}) == ("ruled_out",)
    assert kinds_of({"not_phrases": ["gore"]}) == ("ruled_out",)
    assert kinds_of({"act": "ask_about", "about": "director"}) == ("question",)
    assert kinds_of({"genres": [FAMILY]}) == ("audience",)
    assert kinds_of({"genres": [FAMILY, "Comedy"]}) == ("genre", "audience")
    assert kinds_of({}) == ("open",) and kinds_of(None) == ("open",) and kinds_of("junk") == ("open",)  # type: ignore[arg-type]
    assert kinds_of({"genres": "Comedy", "people": None}) == ("open",)  # malformed slots are no slots
    assert FAMILY == request_state.FAMILY and set(KINDS) >= {"genre", "open"}


def test_first_messages_are_read_by_the_request_reader(catalog):
    def kinds(text: str) -> tuple[str, ...]:
        return tag_first_message([[Turn("user", text), Turn("system", "Sure.")]], catalog)[0]

    assert "genre" in kinds("I'd like a comedy")
    assert "years" in kinds("a movie from the 1990s")
    assert "ruled_out" in kinds("anything but no horror please")
    assert "audience" in kinds("something for my kid")
    assert kinds("hi") == ("open",)


@pytest.mark.parametrize(
    "text",
    ["", "   ", "\x00\x01\x02", "<script>alert(1)</script>", "a" * 100_000, "🎬" * 3000, "ñ" * 2000, "?" * 50],
)
def test_a_message_that_reads_as_nothing_or_is_hostile_is_open_never_an_error(catalog, text):
    kinds, read_by = tag_first_message([[Turn("user", text), Turn("system", "ok")]], catalog)
    assert kinds == ("open",) and read_by in ("rules", "unread")


def test_the_reading_a_reply_recorded_is_used_with_how_it_was_read(catalog):
    understood = {"genres": ["Horror"], "read_by": "model"}
    turns = [
        Turn("user", "something to keep me up at night"),
        Turn("system", "Try It.", metadata={"understood": understood}),
    ]
    assert tag_first_message([turns], catalog) == (("genre",), "model")
    no_side = tag_first_message([[], []], catalog)
    assert no_side == (("open",), "none")


def test_the_name_check_on_the_labelled_replies():
    """The labelled file was written in full before arena/name_reveal.py; both figures at least 0.95."""
    rows = labelled_replies()
    extra = system_names({"chatcrs": "ChatCRS", "retrieval": "Retrieval baseline", "kbrd_small": "KBRD (small)"})
    positives = [r for r in rows if r["names_system"]]
    negatives = [r for r in rows if not r["names_system"]]
    assert len(rows) >= 200 and len(positives) >= 100 and len(negatives) >= 100
    found = {r["id"]: bool(names_in(r["text"], extra)) for r in rows}
    true_positive = sum(found[r["id"]] for r in positives)
    false_positive = sum(found[r["id"]] for r in negatives)
    assert true_positive / len(positives) >= 0.95
    assert true_positive / (true_positive + false_positive) >= 0.95


def test_names_from_the_registry_and_the_settings():
    names = system_names(
        {"retrieval": "Retrieval baseline", "movie_bot_2": "MovieBot", "heat": "heat"},
        ["embedded", "HuggingFaceTB/SmolLM2-135M-Instruct", "/models/my-judge-q4.gguf", "gpt"],
    )
    assert "retrieval" not in names and "heat" not in names and "embedded" not in names  # plain words are no names
    assert {"Retrieval baseline", "movie_bot_2", "MovieBot", "SmolLM2-135M-Instruct", "my-judge-q4"} <= set(names)
    assert names_in("Hello from MovieBot! Try Heat.", names) == ["MovieBot"]
    assert names_in("The Retrieval (2013) is a quiet drama.", names) == []
    assert names_in("x" * 10_000_000 + " I'm ChatGPT") == []  # read up to a bound: a huge reply costs little


def _conversation(db, system: str, texts: list[tuple[str, str]]) -> Conversation:
    return save_conversation(
        db, Conversation(system_id=system, source="arena", turns=[Turn(role, text) for role, text in texts])
    )


def _battle(
    db, a: str, b: str, first: str, reply_a: str = "Try Heat (1995).", reply_b: str = "Try Alien (1979)."
) -> str:
    side_a = _conversation(db, a, [("user", first), ("system", reply_a)])
    side_b = _conversation(db, b, [("user", first), ("system", reply_b)])
    return save_battle(db, Battle(a, b, side_a.id, side_b.id)).id


def test_a_vote_is_tagged_when_stored_and_a_revealed_name_sets_it_aside(tmp_path):
    db = get_db(tmp_path / "arena.db")
    ids = []
    for k in range(MIN_KIND_VOTES + 2):
        a, b = ("chatcrs", "kbrd") if k % 2 else ("kbrd", "retrieval")
        battle_id = _battle(db, a, b, "a comedy from the 1990s please")
        vote(db, battle_id, "a" if k % 3 else "b")
        ids.append(battle_id)
    named = _battle(db, "chatcrs", "retrieval", "hi", reply_a="I'm ChatGPT, made by OpenAI. Try Heat.")
    vote(db, named, "a")
    asked = _battle(db, "kbrd", "chatcrs", "Are you ChatGPT? Who directed Heat?")  # the person names it: not a reveal
    vote(db, asked, "tie")

    tags = battle_tags(db)
    assert set(tags) == {*ids, named, asked} and not untagged_voted_battles(db)
    assert tags[ids[0]].kinds == ("genre", "years") and tags[ids[0]].read_by == "rules" and not tags[ids[0]].revealed
    assert tags[named].kinds == ("open",) and tags[named].revealed and "ChatGPT" in tags[named].names
    assert not tags[asked].revealed

    everything = compute_board(db, rounds=20)
    assert everything.fit["set_aside"] == 1 and everything.fit["votes"] == len(ids) + 1  # the named vote is not rated
    with_named = compute_board(db, rounds=20, revealed=True)
    assert with_named.fit["votes"] == len(ids) + 2 and with_named.fit["set_aside"] == 1
    assert kind_counts(db)["genre"] == len(ids) and kind_counts(db)["open"] == 0
    assert kind_counts(db, revealed=True)["open"] == 1

    genre = compute_board(db, rounds=20, kind="genre")
    assert genre.fit["kind_votes"] == len(ids) and not genre.fit["too_few"]
    rated = [r for r in genre.rows if r["rating"] is not None]
    assert {r["system"] for r in rated} == {"chatcrs", "kbrd", "retrieval"}
    assert all(r["overall_rank"] is not None for r in rated)

    view = board_view(db, kind="genre")
    assert OVERALL_RANK in view.table.columns and "1 vote set aside" not in view.summary  # none of genre's named
    assert "**1 vote set aside**" in board_view(db).summary
    assert OVERALL_RANK not in board_view(db).table.columns
    question = board_view(db, kind="question")
    assert "too few votes (1;" in question.summary and all(r["rating"] is None for r in question.rows)
    assert "no votes yet" in board_view(db, kind="audience").summary

    exported = {r["battle_id"]: r for r in vote_rows(db)}
    assert exported[named]["revealed_names"] and exported[named]["kinds"] == ["open"]
    assert exported[ids[0]]["kinds"] == ["genre", "years"] and exported[ids[0]]["read_by"] == "rules"


def test_the_command_line_prints_a_kinds_board(tmp_path):
    from commands import cli

    db = get_db(tmp_path / "arena.db")
    for k in range(MIN_KIND_VOTES):
        vote(db, _battle(db, "chatcrs", "kbrd", "a horror movie"), "a" if k % 4 else "b")
    runner = CliRunner()
    result = runner.invoke(cli, ["board", "--kind", "genre", "--db", str(tmp_path / "arena.db")])
    assert result.exit_code == 0, result.output
    assert "genre 20" in result.output and "overall rank" in result.output
    result = runner.invoke(cli, ["board", "--kind", "question", "--db", str(tmp_path / "arena.db")])
    assert result.exit_code == 0 and "no votes yet" in result.output and "no ratings" in result.output
    assert runner.invoke(cli, ["board", "--kind", "nonsense", "--db", str(tmp_path / "arena.db")]).exit_code == 2


def test_battles_voted_before_the_tags_are_tagged_by_the_refresh(tmp_path):
    path = tmp_path / "old.db"
    _version_one(path)  # one vote, stored before the tags existed
    db = get_db(path)
    assert db.execute("select battle_id, kinds from battle_tags").fetchall() == [("b1", None)]
    assert untagged_voted_battles(db) == ["b1"]
    refresh_board(db)
    assert battle_tags(db)["b1"].kinds and not untagged_voted_battles(db)
    before = board_version(db)
    assert tag_missing(db) == 0 and board_version(db) == before  # nothing left: nothing written


def test_a_vote_stored_without_tagging_is_on_every_kinds_board_only_once_tagged(tmp_path):
    db = get_db(tmp_path / "arena.db")
    battle_id = _battle(db, "chatcrs", "kbrd", "a comedy please")
    save_vote(db, Vote(battle_id, "a"))  # as a restore stores it: no tag yet
    assert kind_counts(db)["genre"] == 0 and compute_board(db, rounds=5).fit["votes"] == 1
    tag_missing(db)
    assert kind_counts(db)["genre"] == 1


def test_a_tag_from_turns_reads_every_reply_of_both_sides(catalog):
    sides = [
        [Turn("user", "a thriller"), Turn("system", "Try Heat."), Turn("user", "more"), Turn("system", "UniCRS here!")],
        [Turn("user", "a thriller"), Turn("system", "Try Alien.")],
    ]
    tag = battle_tag("b", sides, catalog)
    assert tag.kinds == ("genre",) and tag.names == ("UniCRS",)
