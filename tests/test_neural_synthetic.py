"""The synthetic dialogue generator the small local versions train on."""

from __future__ import annotations

import pytest

from catalog.catalog import load_bundled
from crs_backends.neural.engine import MOVIE_SLOT
from crs_backends.neural.kg_reader import kg_from_catalog
from crs_backends.neural.synthetic import (
    KINDS,
    describe,
    generate_dialogues,
    movie_template,
    record_template,
    record_texts,
    synthetic_records,
)


@pytest.fixture(scope="module")
def catalog():
    return load_bundled()


@pytest.fixture(scope="module")
def kg(catalog):
    return kg_from_catalog(catalog)


@pytest.fixture(scope="module")
def dialogues(catalog, kg):
    return generate_dialogues(catalog, 2000, seed=0, entity2id=kg.entity2id)


@pytest.fixture(scope="module")
def records(dialogues):
    return [r for d in dialogues for r in d.records()]


def test_deterministic_for_a_seed_and_different_across_seeds(catalog, kg, records):
    again = synthetic_records(catalog, 2000, seed=0, kg=kg)
    assert again == records
    other = synthetic_records(catalog, 50, seed=1, kg=kg)
    assert [r.resp for r in other] != [r.resp for r in records[: len(other)]]


def test_every_preference_kind_and_act_appears(dialogues, records):
    kinds = {k for d in dialogues for k in d.kinds}
    assert kinds == set(KINDS)
    for d in dialogues:
        assert 4 <= len(d.turns) <= 8 and len(d.turns) % 2 == 0  # 2-4 exchanges, user first, alternating
        assert [t.role for t in d.turns] == ["user", "system"] * (len(d.turns) // 2)
    users = [t.text.lower() for d in dialogues for t in d.turns if t.role == "user"]
    assert any("seen" in u or "saw" in u for u in users)
    assert any("older" in u for u in users) and any("recent" in u or "newer" in u for u in users)
    assert any("like" in u and "(" in u for u in users)  # "something like Heat (1995)"
    questions = [r for r in records if not r.rec and r.resp.endswith("?")]
    assert len(questions) > 100  # the system also asks
    assert sum(1 for r in records if r.rec) > 0.5 * len(records)
    # wording varies: lower-cased and typo'd user turns exist, many distinct user utterances
    assert any(
        u == u.lower() and any(c.isalpha() for c in u)
        for u in (t.text for d in dialogues for t in d.turns if t.role == "user")
    )
    assert len(set(users)) > 1000


def test_records_follow_the_ievalm_layout(records, kg, catalog):
    names = {i.name for i in catalog.items}
    items = {kg.entity_name(i) for i in kg.item_ids}
    for r in records:
        assert r.context and len(r.context) % 2 == 1  # user first, the system answers
        assert r.turn_id == len(r.context)
        for name in r.rec:
            assert name in names and name in items  # recommended items exist in the catalog and the KG
        # the target names titles by slots only: one <movie> per recommended item, no title
        assert r.resp.count(MOVIE_SLOT) == len(r.rec) and not any(name in r.resp for name in r.rec)
        assert all(e in kg.entity2id for e in r.entity)
        assert len(set(r.entity)) == len(r.entity)
    # entities accumulate: each record's entities start with those of the previous turn of its dialogue
    by_dialog: dict[str, list] = {}
    for r in records:
        by_dialog.setdefault(r.dialog_id, []).append(r)
    for rs in list(by_dialog.values())[:200]:
        for a, b in zip(rs, rs[1:]):
            assert b.entity[: len(a.entity)] == a.entity
            assert set(a.rec) <= set(b.entity)  # recommended items are mentioned, so they are entities later


def test_user_mentions_become_entities(dialogues):
    d = next(d for d in dialogues if d.kinds[0] == "similar")
    first = d.turns[0] if d.turns[0].entities else d.turns[2]
    assert first.entities and first.entities[0].endswith(")")  # "Title (Year)"
    rec = d.records()[-1]
    assert first.entities[0] in rec.entity


def test_system_turns_state_their_facts_in_words_and_only_titles_as_slots(dialogues, catalog):
    """The spoken text names titles and true facts; the training target is that text with each title as <movie>,
    its facts written out (no fact slot: nothing fills one)."""
    from crs_backends.neural.reply_facts import contradictions
    from crs_backends.neural.synthetic import movie_template

    turns = [t for d in dialogues[:400] for t in d.turns if t.role == "system" and t.items]
    assert turns and all(t.template for t in turns)
    for t in turns:
        assert not contradictions(t.text, catalog), t.text
        assert t.template == movie_template(t.text, t.items), (t.text, t.template)
        assert not any(slot in t.template for slot in ("<genre>", "<director>", "<actor>", "<year>")), t.template
    assert sum(1 for t in turns if "directed by" in t.template) > 0.2 * len(turns)


def test_templates_put_movie_slots_where_titles_were(records):
    with_rec = [r for r in records if r.rec]
    for r in with_rec[:500]:
        t = record_template(r)
        assert t.count(MOVIE_SLOT) == len(r.rec)
        assert not any(name in t for name in r.rec)
    assert record_template(next(r for r in records if not r.rec)).count(MOVIE_SLOT) == 0
    assert (
        movie_template("Try Heat (1995) or Heat 2 (2026).", ["Heat (1995)", "Heat 2 (2026)"])
        == f"Try {MOVIE_SLOT} or {MOVIE_SLOT}."
    )


def test_texts_and_description(records):
    texts = record_texts(records[:100])
    assert len(texts) == len(set(texts)) and any(MOVIE_SLOT in t for t in texts)
    d = describe(records)
    assert d["dialogues"] == 2000 and d["records"] == len(records) and d["items"] > 300
