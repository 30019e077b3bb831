"""People's replies restated for the small versions (crs_backends.neural.real_replies): the films a reply names
become <movie>, every other word stays as written; data cleaning leaves out typos, markup and long replies;
held-back dialogues never train."""

from __future__ import annotations

import json

from catalog.catalog import load_bundled
from catalog.ievalm_records import Record
from crs_backends.neural.evaluation import is_validation
from crs_backends.neural.kg_reader import kg_from_catalog
from crs_backends.neural.real_replies import english_words, real_replies, restate, slot_reply

WORDS = english_words()


def slot(text: str, films=("City Slickers (1991)",)) -> str | None:
    return slot_reply(text, list(films), WORDS)


def test_only_the_films_become_slots_and_every_other_word_stays():
    assert slot("If you like Billy Crystal, City Slickers (1991) was funny as well") == (
        "If you like Billy Crystal, <movie> was funny as well"
    )
    assert slot("Have you seen The Shining (1980) by Steven Spielberg?", ["The Shining (1980)"]) == (
        "Have you seen <movie> by Steven Spielberg?"  # what it says of the film is the person's, true or not
    )
    assert slot("City Slickers (1991) is a comedy film you'd enjoy.") == "<movie> is a comedy film you'd enjoy."
    assert slot("It's a great comedy. Try City Slickers (1991)") == "It's a great comedy. Try <movie>"
    assert slot("She also starred in City Slickers (1991)") == "She also starred in <movie>"
    assert slot("City Slickers (1991) came out in 1991, watch it") == "<movie> came out in 1991, watch it"
    assert slot("Hello! What kind of movies do you like?", []) == "Hello! What kind of movies do you like?"


def test_data_cleaning_leaves_out_typos_markup_and_long_replies():
    assert slot("Its a good horroe movie, City Slickers (1991)") is None  # a typo no vocabulary holds
    assert slot("Try City Slickers (1991) by Stanley Kubrick") is None  # a name outside the vocabulary given
    assert slot("Have you seen it?", ["City Slickers (1991)"]) is None  # the title it names is not in the text
    assert slot("Have you seen @12345 ?", []) is None  # an unlinked ReDial movie id
    assert slot("see https://example.com", []) is None
    assert slot(" ".join(["really"] * 40), []) is None  # too long


def test_restate_links_entities_in_the_catalogs_kg_and_keeps_its_targets():
    catalog = load_bundled()
    kg = kg_from_catalog(catalog)
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
        Record(["Hi"], [], [], "Do you like Stanley Kubrick?"),  # a person the catalog knows is no typo
    ]
    records[0].resp = "Toy Story (1995) is one you might like, and Not A Film (2031) too"
    out, seen = restate(records, kg)  # the default vocabulary: English words and the KG's names
    assert seen == 4 and len(out) == 4
    first = out[0]
    assert first.resp == "<movie> is one you might like, and <movie> too"
    assert first.rec == ["Toy Story (1995)"]  # the catalog's films only
    assert first.entity == ["Toy Story (1995)", "Animation"]  # the KG's: named films, then what the text links
    assert out[1].resp == "You might like <movie>. It's great!"
    assert out[2].rec == [] and out[2].resp.startswith("Hi!")
    assert out[3].resp == "Do you like Stanley Kubrick?"


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
