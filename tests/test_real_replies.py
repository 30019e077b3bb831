"""People's replies restated for the small versions (crs_backends.neural.real_replies): titles and facts become
slots the catalog fills; a reply saying what no slot can hold truly is left out; held-back dialogues never train."""

from __future__ import annotations

import json

from catalog.catalog import load_bundled
from catalog.ievalm_records import Record
from crs_backends.neural.evaluation import is_validation
from crs_backends.neural.kg_reader import kg_from_catalog
from crs_backends.neural.real_replies import english_words, real_replies, restate, slot_reply

INFO = {
    "City Slickers (1991)": {
        "name": "City Slickers (1991)",
        "genre": ["comedy", "western"],
        "director": ["Ron Underwood"],
        "star": ["Billy Crystal", "Daniel Stern", "Bruno Kirby"],
    },
    "The Shining (1980)": {
        "name": "The Shining (1980)",
        "genre": ["drama", "horror"],
        "director": ["Stanley Kubrick"],
        "star": ["Jack Nicholson", "Shelley Duvall"],
    },
}
WORDS = english_words()


def slot(text: str, films=("City Slickers (1991)",)) -> str | None:
    return slot_reply(text, list(films), INFO, WORDS)


def test_titles_and_their_facts_become_slots():
    assert slot("If you like Billy Crystal, City Slickers (1991) was funny as well") is None  # "funny": a genre claim
    assert slot("If you like Billy Crystal, City Slickers (1991) was great as well") == (
        "If you like <actor>, <movie> was great as well"
    )
    assert slot("Have you seen The Shining (1980) by Stanley Kubrick?", ["The Shining (1980)"]) == (
        "Have you seen <movie> by <director>?"
    )
    assert slot("City Slickers (1991) is a comedy film you'd enjoy.") == "<movie> is a <genre> film you'd enjoy."
    assert slot("Hello! What kind of movies do you like?", []) == "Hello! What kind of movies do you like?"
    assert slot("Any comedies you liked lately?", []) == "Any comedies you liked lately?"  # no title: no claim


def test_replies_that_no_slot_can_make_true_are_left_out():
    assert slot("City Slickers (1991) is a horror film.") is None  # a genre the film does not have
    assert slot("It's a great comedy. Try City Slickers (1991)") is None  # a genre said otherwise of a named film
    assert slot("Try City Slickers (1991), Disney made it") is None  # a name no slot holds
    assert slot("Try City Slickers (1991) with Tom Hanks") is None  # a person outside the film's record
    assert slot("She also starred in City Slickers (1991)") is None  # a person by pronoun
    assert slot("City Slickers (1991) came out in 1991, watch it") is None  # a number
    assert slot("Its a good horroe movie, City Slickers (1991)") is None  # a typo no vocabulary holds
    assert slot("Have you seen it?", ["City Slickers (1991)"]) is None  # the title it names is not in the text
    assert slot(" ".join(["really"] * 40), []) is None  # too long


def test_restate_links_entities_in_the_catalogs_kg_and_keeps_its_targets():
    catalog = load_bundled()
    kg = kg_from_catalog(catalog)
    info = {"Toy Story (1995)": {"name": "Toy Story (1995)", "genre": ["animation"], "director": [], "star": []}}
    records = [
        Record(
            ["I loved Toy Story (1995), any animated movies?"],
            ["Toy Story (1995)", "Not A Film (2031)"],  # the films the context names, as the raw reader lists them
            ["Toy Story (1995)", "Not A Film (2031)"],
            "x",
        ),
        Record(["Hi"], [], ["Toy Story (1995)"], "You might like Toy Story (1995). It's great!"),
        Record(["Hi"], [], [], "Hi! What kind of movies do you like?"),
        Record(["Hi"], [], [], ""),  # no reply: not a turn to learn from
    ]
    records[0].resp = "Toy Story (1995) is one you might like, and Not A Film (2031) too"
    out, seen = restate(records, kg, info, vocabulary=WORDS)
    assert seen == 3 and len(out) == 3
    first = out[0]
    assert first.resp == "<movie> is one you might like, and <movie> too"
    assert first.rec == ["Toy Story (1995)"]  # the catalog's films only
    assert first.entity == ["Toy Story (1995)", "Animation"]  # the KG's: named films, then what the text links
    assert out[1].resp == "You might like <movie>. It's great!"
    assert out[2].rec == [] and out[2].resp.startswith("Hi!")


def test_real_replies_leave_the_held_back_dialogues_out(tmp_path):
    (tmp_path / "redial").mkdir()
    (tmp_path / "redial" / "id2info.json").write_text(
        json.dumps({"1": {"name": "Toy Story (1995)", "genre": ["animation"], "director": [], "star": []}}),
        encoding="utf-8",
    )
    ids = [str(n) for n in range(40)]
    held = [i for i in ids if is_validation(i)]
    assert held and len(held) < len(ids)
    lines = []
    for i in ids:
        lines.append(
            json.dumps(
                {
                    "conversationId": i,
                    "initiatorWorkerId": 1,
                    "respondentWorkerId": 2,
                    "movieMentions": {"1": "Toy Story (1995)"},
                    "messages": [
                        {"senderWorkerId": 1, "text": "Hi, any good movies?"},
                        {"senderWorkerId": 2, "text": "Have you seen @1 ?"},
                    ],
                }
            )
        )
    (tmp_path / "redial" / "valid_data.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    kg = kg_from_catalog(load_bundled())
    got = real_replies(tmp_path, kg)
    assert {r.dialog_id for r in got.records} == set(ids) - set(held)
    assert all(r.resp == "Have you seen <movie>?" and r.rec == ["Toy Story (1995)"] for r in got.records)
    assert got.describe()["kept"] == len(ids) - len(held)
    assert real_replies(tmp_path / "nowhere", kg).records == []
