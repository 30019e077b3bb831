"""The request reader: the labelled request set, negation with scope, what holds across a conversation, bad input,
and the ranking that honours the state (the retrieval baseline, which needs no model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from catalog.catalog import load_bundled
from catalog.items import Item
from crs_backends.request_reader import read_message, read_request, title_feelings
from crs_backends.request_state import LIST_SLOTS, VALUE_SLOTS, RequestState, micro_f1, slot_pairs
from crs_backends.state_check import load_scripts, respected_share, run_script
from crs_backends.tfidf_baseline import RetrievalCRS
from storage.records import Conversation, Turn
from ui.render import chat_messages, understood_line

DATA = Path(__file__).resolve().parent / "data"
NEGATION_CUES = (
    "not",
    "no",
    "never",
    "dont",
    "doesnt",
    "cant_stand",
    "hate",
    "not_into",
    "tired_of",
    "anything_but",
    "except",
    "without",
    "no_more",
)


@pytest.fixture(scope="module")
def catalog():
    return load_bundled()


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def _conversation(*texts: str) -> Conversation:
    """User and system texts taking turns, the user first."""
    return Conversation(
        system_id="test", turns=[Turn("user" if k % 2 == 0 else "system", t) for k, t in enumerate(texts)]
    )


def _read(catalog, *texts: str) -> RequestState:
    return read_request(_conversation(*texts), catalog)


def _talk(crs, texts):
    """Each user text in turn to ``crs``, in one conversation: (text, the system's turn) as they come."""
    conversation = Conversation(system_id="retrieval", turns=[])
    for text in texts:
        conversation.turns.append(Turn("user", text))
        turn = crs.respond(conversation)
        conversation.turns.append(turn)
        yield text, turn


def _labelled_conversation(row: dict) -> Conversation:
    turns = [Turn(t["role"], t["text"]) for t in row["context"]] + [Turn("user", row["message"])]
    return Conversation(system_id="test", turns=turns)


# -- the labelled request set ------------------------------------------------------------------------------------


def test_the_labelled_set_is_large_varied_and_one_fifth_held_out(catalog):
    tuned, held = _rows("requests_tuned.jsonl"), _rows("requests_held_out.jsonl")
    assert len(tuned) + len(held) >= 300
    assert abs(len(held) / (len(tuned) + len(held)) - 0.2) < 0.02
    assert len({r["message"] for r in tuned} & {r["message"] for r in held}) <= 3  # the parts are different requests
    names = {i.name for i in catalog.items}
    for row in tuned + held:
        assert set(row["expected"]) <= {*LIST_SLOTS, *VALUE_SLOTS}, row["id"]
        for slot in ("liked", "disliked", "seen"):
            assert set(row["expected"].get(slot, [])) <= names, row["id"]
    covers = {c for row in tuned + held for c in row["covers"]}
    for cue in NEGATION_CUES:  # every cue the issue names, in both parts
        assert f"neg:{cue}" in covers, cue
    for kind in ("misspelt", "lower", "non_english", "contradiction", "decade:words", "person:fan_of"):
        assert kind in covers, kind
    for slot in (*LIST_SLOTS, *VALUE_SLOTS):
        assert any(slot in row["expected"] for row in held), slot  # the held-out fifth covers every slot


def test_the_tuned_part_is_read_well(catalog):
    """The part the rules were written against: a floor, not a figure (bench/request_reader.py prints both parts)."""
    rows = _rows("requests_tuned.jsonl")
    pairs = [(slot_pairs(r["expected"]), read_request(_labelled_conversation(r), catalog).slot_pairs()) for r in rows]
    assert micro_f1(pairs)[2] >= 0.95


def test_the_held_out_part_is_read_well(catalog):
    """The fifth the rules were never tuned on, scored here as the bench scores it (micro-F1 over slot values): a
    floor, the README's target 0.90, which the bench's figure (0.998) is above; not the figure itself."""
    rows = _rows("requests_held_out.jsonl")
    pairs = [(slot_pairs(r["expected"]), read_request(_labelled_conversation(r), catalog).slot_pairs()) for r in rows]
    assert len(pairs) >= 50 and micro_f1(pairs)[2] >= 0.90


# -- negation with scope ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "wanted", "ruled_out"),
    [
        ("no horror, but something scary-funny is fine", {"Horror", "Comedy"}, set()),  # the later phrase wins
        ("I don't know, maybe a comedy", {"Comedy"}, set()),
        ("not sure, a thriller?", {"Thriller"}, set()),
        ("I hate musicals though I like romance", {"Romance"}, {"Musical"}),
        ("anything but horror", set(), {"Horror"}),
        ("any genre except westerns and musicals", set(), {"Western", "Musical"}),
        ("a comedy without Jim Carrey", {"Comedy"}, set()),
        ("no more war films, something funny instead", {"Comedy"}, {"War"}),
        ("I'm tired of sci-fi", set(), {"Sci-Fi"}),
        ("I'm not into animation, give me a drama", {"Drama"}, {"Animation"}),
        ("I can't stand romantic movies", set(), {"Romance"}),
        ("she doesn't like horror so keep it light", set(), {"Horror"}),
        ("I never liked westerns", set(), {"Western"}),
        ("Horror is not my thing", set(), {"Horror"}),
        ("I'd rather watch a comedy than a drama", {"Comedy"}, {"Drama"}),
    ],
)
def test_a_negation_governs_its_phrase_and_nothing_else(catalog, text, wanted, ruled_out):
    state = _read(catalog, text)
    assert set(state.genres) == wanted and set(state.not_genres) == ruled_out, state.summary()


def test_people_titles_and_years(catalog):
    state = _read(catalog, "I'm a fan of Spielberg's films from the eighties, but not Tom Cruise")
    assert state.people == ("Steven Spielberg",) and state.not_people == ("Tom Cruise",)
    assert (state.min_year, state.max_year) == (1980, 1989)
    assert _read(catalog, "Scorcese movies from the '90s").people == ("Martin Scorsese",)  # misspelt
    state = _read(catalog, "I loved Heat and Casino, but Goodfellas bored me. Seen The Departed already")
    assert [i.title for i in state.liked] == ["Heat", "Casino"]
    assert [i.title for i in state.disliked] == ["Goodfellas"] and [i.title for i in state.seen] == ["The Departed"]
    for text, years in [
        ("from 1994", (1994, 1994)),
        ("between 1985 and 1995", (1985, 1995)),
        ("the 2000s", (2000, 2009)),
        ("the nineties", (1990, 1999)),
        ("something recent", (2009, None)),
        ("an old classic", (None, 1979)),
        ("nothing before 1990", (1990, None)),
        ("a movie for my 8 year old", (None, None)),
    ]:
        state = _read(catalog, text)
        assert (state.min_year, state.max_year) == years, text


def test_questions_about_the_film_named_last(catalog):
    state = _read(catalog, "a crime movie", "You might like Heat (1995), a crime film.", "Who directed it?")
    assert state.act == "ask_about" and state.about == "director" and state.subject.title == "Heat"
    assert state.genres == ("Crime",)  # the question asks for nothing new
    state = _read(catalog, "What is Inception about?")
    assert (state.act, state.about, state.subject.title) == ("ask_about", "plot", "Inception")
    assert _read(catalog, "who is in it?").subject is None  # nothing named yet: which film?
    assert _read(catalog, "What about something from the 90s?").act == "recommend"


def test_what_holds_across_a_conversation(catalog):
    said = ["something to watch tonight", "You might like Titanic (1997).", "no horror please", "Maybe Heat (1995)?"]
    state = _read(catalog, *said, "ok cool")
    assert state.not_genres == ("Horror",) and state.act == "accept"  # a ruled-out genre holds
    state = _read(catalog, *said, "actually, horror is fine")
    assert state.genres == ("Horror",) and not state.not_genres  # until the person takes it back
    state = _read(catalog, "a comedy", "You might like Superbad (2007). Or Step Brothers (2008).", "seen both")
    assert {i.title for i in state.seen} == {"Superbad", "Step Brothers"} and state.act == "reject"
    state = _read(catalog, "a horror film", "Try Alien (1979).", "Could it be funny as well?")
    assert state.genres == ("Horror", "Comedy")


def test_a_name_the_catalog_lacks_is_honoured_by_text(catalog):
    state = _read(catalog, "I don't like Stephen King")
    assert state.not_people == ("Stephen King",)
    novel = Item(id="misery", title="Misery", year=1990, description="A novelist held captive; a Stephen King book.")
    assert not state.allows(novel) and state.rules_out(novel) == "person ruled out"
    assert state.allows(catalog.match("Heat"))


@pytest.mark.parametrize(
    "text",
    [
        "no horror " * 1000,
        "Quiero una comedia de los noventa, sin terror",
        "日本のアニメ映画を見たいです",
        "\x00\ud800 ",
        "",
    ],
)
def test_bad_input_gives_a_state_with_nothing_read(catalog, text):
    state = _read(catalog, text)
    assert not state.genres and not state.not_genres and not state.people and state.act == "none"


def test_title_feelings_for_titles_found_elsewhere():
    text = "I loved Qfilm and Qfilm, but Qfilm was boring. I haven't seen Qfilm. Have you seen Qfilm?"
    spans = [(m, m + 5) for m in range(len(text)) if text.startswith("Qfilm", m)]
    assert title_feelings(text, spans) == ["+", "+", "-", "unseen", "seen"]


def test_the_reading_is_the_same_each_time(catalog):
    first = read_message("I'm a fan of Nolan, no horror", catalog)
    assert read_message("I'm a fan of Nolan, no horror", catalog) == first


# -- the ranking honours the state: the retrieval baseline ---------------------------------------------------------


def test_the_baseline_respects_every_scripted_conversation(catalog):
    crs = RetrievalCRS(catalog)
    checked = [c for script in load_scripts() for c in run_script(crs, script, catalog)]
    assert respected_share(checked) >= 0.95, [(c.user, c.problems) for c in checked if c.problems]


def test_the_baseline_no_longer_answers_a_ruled_out_genre_with_it(catalog):
    """Seen: after "something to watch with my girlfriend tonight", a message ruling horror out got Insidious, The
    Omen, Get Out and Scream, and "ok cool" brought more horror."""
    said = ("something to watch with my girlfriend tonight", "she hates horror, nothing scary", "ok cool")
    for text, turn in _talk(RetrievalCRS(catalog), said):
        if text != "something to watch with my girlfriend tonight":  # the first turn: well-known films, any genre
            assert not any("Horror" in catalog.get(r.id).genres for r in turn.items), text
    assert turn.metadata["understood"]["not_genres"] == ["Horror"]
    assert "not horror" in turn.metadata["understood"]["summary"]


def test_the_baseline_answers_a_question_about_the_film_it_named(catalog):
    crs = RetrievalCRS(catalog)
    conversation = Conversation(system_id="retrieval", turns=[Turn("user", "a crime movie")])
    first = crs.respond(conversation)
    conversation.turns += [first, Turn("user", "who directed it?")]
    answer = crs.respond(conversation)
    film = catalog.get(first.items[0].id)
    assert answer.metadata["act"] == "answer" and [r.id for r in answer.items] == [film.id]
    assert answer.text.startswith(f"{film.name} was directed by {film.directors[0]}")
    assert "something else you might like" not in answer.text.lower() and answer.text.endswith("?")
    conversation.turns += [answer, Turn("user", "what's it about?")]
    assert film.description in crs.respond(conversation).text


def test_a_decade_in_words_and_a_director_as_a_fan_of(catalog):
    crs = RetrievalCRS(catalog)
    turn = crs.respond(_conversation("a comedy from the nineties"))
    items = [catalog.get(r.id) for r in turn.items]
    assert all(1990 <= i.year <= 1999 and "Comedy" in i.genres for i in items)
    turn = crs.respond(_conversation("I'm a fan of Spielberg"))
    assert all("Steven Spielberg" in catalog.get(r.id).directors for r in turn.items[:3])


def test_the_understood_line_is_shown_and_escaped(catalog):
    turn = RetrievalCRS(catalog).respond(_conversation("I don't like <b>Zorblax</b> Quux, a comedy from the 90s"))
    line = understood_line(turn.metadata)
    assert line.startswith("*understood: comedy · 1990s") and "<b>" not in line
    conversation = Conversation(system_id="retrieval", turns=[Turn("user", "a comedy from the 90s"), turn])
    assert chat_messages(conversation)[-1]["content"].endswith(line)
    assert understood_line({}) == "" and understood_line({"understood": {"summary": 3}}) == ""


@pytest.mark.parametrize(
    ("text", "wanted", "ruled_out"),
    [
        ("something fun for my kid tonight", {"Family", "Comedy"}, set()),
        ("I need a movie for my 8 year old daughter", {"Family"}, set()),
        ("a film to watch with my son, he is 10", {"Family"}, set()),
        ("something for the little ones", {"Family"}, set()),
        ("a movie for my 16 year old son", set(), set()),  # a stated age over 12: no family film asked for
        ("something for our little girl", {"Family"}, set()),
        ("a comedy to watch with my girls", {"Comedy"}, set()),  # "my girls" may be friends
        ("not for my kid, it is for me: a horror film", {"Horror"}, {"Family"}),
    ],
)
def test_a_young_audience_asks_for_family_films(catalog, text, wanted, ruled_out):
    state = _read(catalog, text)
    assert set(state.genres) == wanted and set(state.not_genres) == ruled_out


def test_the_baseline_keeps_a_film_for_a_child_across_the_conversation(catalog):
    """Seen (2026-11-27): "for my kid" was not read, so by the third turn the suggestions were Saving Private Ryan
    and Pulp Fiction."""
    said = ("something fun for my kid", "maybe something from the nineties?", "another one?")
    for text, turn in _talk(RetrievalCRS(catalog), said):
        assert turn.items and all("Family" in catalog.get(r.id).genres for r in turn.items), text
    assert "family" in turn.metadata["understood"]["summary"]
