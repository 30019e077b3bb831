"""CRS Arena's reply policy for KBRD / BARCOR / UniCRS (crs_backends.neural.policy) and the catalog facts of
the small versions (crs_backends.neural.reply_facts).

The policy is pinned three ways: the option maths on its own (the -1e5 penalty, added for KBRD/UniCRS and
set for BARCOR, as iai-group/iEvaLM-CRS ``src/model/*.py: get_response`` do); the adapter with a scripted
model whose option scores are given (the test double of the model interface); and a real tiny KBRD saved in
the published layout, whose first four turns must take each option once.
"""

from __future__ import annotations

import json

import pytest
from neural_fixtures import catalog, kg  # noqa: F401 (module fixtures)

from catalog.catalog import Catalog
from crs_backends.neural import policy, reply_facts
from crs_backends.neural.engine import TOP_K, NeuralModel
from crs_backends.neural.kg_reader import KGData
from crs_backends.neural.sources import CheckpointSource, SourceError
from crs_backends.neural.system import NeuralCRS, item_catalog_for, load_neural_system
from storage.records import Conversation, Turn

# ---------------------------------------------------------------- the option maths


def test_choice_adds_the_penalty_for_kbrd_and_unicrs():
    first = policy.choose([1.0, 5.0, 2.0, 9.0], None, "redial", rule="add")
    assert first.letter == "D" and first.attribute == "recommend" and first.recommend
    assert first.state_before == [0.0] * 4 and first.state_after == [0.0, 0.0, 0.0, -1e5]
    second = policy.choose([1.0, 5.0, 2.0, 9.0], first.state_after, "redial", rule="add")
    assert second.letter == "B" and not second.recommend
    # after every option was used once, all carry -1e5 and the raw scores decide again
    state = [-1e5, -1e5, -1e5, -1e5]
    again = policy.choose([1.0, 5.0, 2.0, 9.0], state, "redial", rule="add")
    assert again.letter == "D" and again.state_after == [-1e5, -1e5, -1e5, -2e5]


def test_choice_sets_the_penalty_for_barcor():
    state = [-1e5, -1e5, -1e5, -1e5]
    chosen = policy.choose([1.0, 5.0, 2.0, 9.0], state, "redial", rule="set")
    assert chosen.letter == "D" and chosen.state_after == [-1e5, -1e5, -1e5, -1e5]


def test_choice_menu_follows_the_dataset_and_resets_a_foreign_state():
    odkg = policy.choose([0, 0, 0, 0, 1], [-1e5, 0], "opendialkg")  # a state of the wrong length starts again
    assert odkg.letters == ["A", "B", "C", "D", "E"] and odkg.attribute == "recommend"
    assert odkg.state_before == [0.0] * 5
    tie = policy.choose([3.0, 3.0, 1.0, 3.0], None, "bundled")
    assert tie.letter == "A"  # torch.argmax takes the first maximum
    with pytest.raises(ValueError):
        policy.choose([1.0, 2.0], None, "redial")


def test_list_template_and_placeholders_as_published():
    text = policy.list_reply(["Heat (1995)", "Up (2009)", "Alien (1979)", "Jaws (1975)"])
    assert text == ("I would recommend the following items:  \n1: Heat (1995)  \n2: Up (2009)  \n3: Alien (1979)  \n")
    assert (
        policy.fill_placeholders("Have you seen <pad>? or <pad>", "<pad>", ["Heat (1995)"])
        == "Have you seen Heat (1995)? or "
    )
    with pytest.raises(ValueError):
        policy.check_policy("greedy")


# ---------------------------------------------------------------- the adapter, scripted model


class ScriptedModel(NeuralModel):
    """A model with a fixed ranking, a fixed generated reply and scripted option scores per turn."""

    system = "unicrs"

    def __init__(self, kg: KGData, order: list[int], reply: str, scores: list[list[float]] | None):
        self.kg = kg
        self.order = order
        self.reply = reply
        self.scores = list(scores) if scores is not None else None

    def recommend(self, inp, k=TOP_K):
        return [(e, float(-i)) for i, e in enumerate(self.order[:k])]

    def generate(self, inp, *, items=None):
        return self.reply

    def option_scores(self, inp, options):
        if self.scores is None:
            raise RuntimeError("no logits")
        return self.scores.pop(0)


def _published(tmp_path, dataset="bundled") -> CheckpointSource:
    return CheckpointSource("unicrs", tmp_path, dataset, tmp_path, "local dir", "test set")


def _order(kg: KGData, catalog: Catalog, names: list[str]) -> list[int]:
    return [kg.entity2id[n] for n in names] + [e for e in kg.item_ids if kg.entity_name(e) not in names]


def test_recommend_choice_gives_exactly_the_list_template(kg, catalog, tmp_path):
    names = ["Heat (1995)", "Alien (1979)", "Jaws (1975)"]
    model = ScriptedModel(
        kg, _order(kg, catalog, names), "What genre do you like?", [[0.1, 0.2, 0.3, 4.0], [0.1, 0.2, 0.3, 4.0]]
    )
    crs = NeuralCRS(model, catalog, source=_published(tmp_path))
    conv = Conversation(system_id="unicrs", turns=[Turn(role="user", text="Hi, I like crime films")])
    turn = crs.respond(conv)
    assert turn.text == policy.list_reply(names)
    assert [r.title for r in turn.items] == names
    meta = turn.metadata
    assert meta["policy"] == "crs_arena_exact" and meta["recommended"] is True  # the published default
    assert meta["choice"]["letter"] == "D" and meta["choice"]["scores"] == {"A": 0.1, "B": 0.2, "C": 0.3, "D": 4.0}
    assert meta["choice"]["state_after"] == [0.0, 0.0, 0.0, -1e5]
    assert [t.title for t in turn.ranking[:3]] == names and len(turn.ranking) == TOP_K
    # the state carried on the stored turn penalises "recommend": the next turn answers with the generated text
    conv.turns += [turn, Turn(role="user", text="Something else?")]
    second = crs.respond(conv)
    assert second.metadata["choice"]["letter"] == "C" and second.text == "What genre do you like?"
    assert second.metadata["choice"]["state_before"] == [0.0, 0.0, 0.0, -1e5]


def test_generated_reply_fills_the_placeholder_with_the_ranking(kg, catalog, tmp_path):
    names = ["Heat (1995)", "Alien (1979)"]

    class PublishedUniCRS(ScriptedModel):
        placeholder = "<pad>"  # crs_fighter's movie_token for UniCRS

    model = PublishedUniCRS(kg, _order(kg, catalog, names), "Have you seen <pad>? It is like <pad>.", [[5, 0, 0, 0]])
    crs = NeuralCRS(model, catalog, source=_published(tmp_path))
    turn = crs.respond(Conversation(system_id="unicrs", turns=[Turn(role="user", text="hello")]))
    assert turn.text == "Have you seen Heat (1995)? It is like Alien (1979)."
    assert [r.title for r in turn.items] == names and turn.metadata["recommended"] is False


def test_a_small_version_whose_reply_fails_the_guards_offers_its_top_unnamed_title(kg, catalog, tmp_path):
    """Seen from the shipped small UniCRS: "I don't like Jim Carrey. Another one?" got "You're w the movie!" and
    no title; every clause fails the guards, so the model's best title not yet named is offered instead."""
    names = ["Alien (1979)", "Heat (1995)"]
    model = ScriptedModel(kg, _order(kg, catalog, names), "You're w the movie!", [[5, 0, 0, 0]])
    small = CheckpointSource("unicrs", tmp_path, "bundled", tmp_path, "small local", "v4")
    crs = NeuralCRS(model, catalog, source=small)
    conv = Conversation(system_id="unicrs", turns=[Turn(role="user", text="I don't like horror. Another one?")])
    turn = crs.respond(conv)  # Alien is horror: the dislike still holds for the offered title
    assert turn.text == "You might like Heat (1995)." and [r.title for r in turn.items] == ["Heat (1995)"]
    assert any("failed the text guards" in n for n in turn.metadata["notes"])
    assert turn.metadata["generated"] == "You're w the movie!"


def test_a_small_version_says_goodbye_only_to_a_goodbye(kg, catalog, tmp_path):
    """Seen from the shipped small KBRD: "Something from the 2000s?" got "You're welcome, have fun!". A farewell to
    a person who asked on is replaced by the best title not yet named, of the asked years where the model ranked one
    (the model ranks Alien first); to "Thanks, bye!" it is the goodbye."""
    names = ["Alien (1979)", "Avatar (2009)", "Heat (1995)"]
    model = ScriptedModel(kg, _order(kg, catalog, names), "You're welcome, have fun!", [[5, 0, 0, 0]])
    small = CheckpointSource("kbrd", tmp_path, "bundled", tmp_path, "small local", "v5")
    crs = NeuralCRS(model, catalog, source=small)
    asked = crs.respond(Conversation(system_id="kbrd", turns=[Turn(role="user", text="Something from the 2000s?")]))
    assert asked.text == "You might like Avatar (2009)." and [r.title for r in asked.items] == ["Avatar (2009)"]
    assert any("said goodbye to a person who had not" in n for n in asked.metadata["notes"])
    assert asked.metadata["asked_years"] == "2000-2009"
    assert [r.title for r in asked.ranking[:2]] == ["Alien (1979)", "Avatar (2009)"]  # the model's own order
    leaving = crs.respond(Conversation(system_id="kbrd", turns=[Turn(role="user", text="Thanks, bye!")]))
    assert leaving.text == "You're welcome, have fun!" and leaving.items == []


def test_a_failing_option_choice_falls_back_to_the_generated_reply(kg, catalog, tmp_path):
    model = ScriptedModel(kg, list(kg.item_ids), "Which director do you like?", None)
    crs = NeuralCRS(model, catalog, source=_published(tmp_path))
    turn = crs.respond(Conversation(system_id="unicrs", turns=[Turn(role="user", text="hi")]))
    assert turn.text == "Which director do you like?" and turn.metadata["choice"] is None
    assert "option choice failed" in turn.metadata["notes"][0]


def test_the_enhanced_policy_stays_available(kg, catalog, tmp_path):
    model = ScriptedModel(kg, list(kg.item_ids), "You might like <movie>.", None)
    crs = NeuralCRS(model, catalog, source=_published(tmp_path), policy="enhanced")
    turn = crs.respond(Conversation(system_id="unicrs", turns=[Turn(role="user", text="hi")]))
    assert turn.metadata["policy"] == "enhanced" and len(turn.items) == crs.list_size
    assert turn.items[0].title in turn.text


# ---------------------------------------------------------------- the dataset's item set


def test_published_sets_rank_over_their_dataset_items(tmp_path, catalog, monkeypatch):
    monkeypatch.setenv("CRS_DATA_DIR", str(tmp_path / "no-data"))  # no other copy of the dataset files
    monkeypatch.setenv("CRS_ARENA_CACHE", str(tmp_path / "cache"))
    kg_dir = tmp_path / "kg_redial"
    kg_dir.mkdir()
    (kg_dir / "id2info.json").write_text(
        json.dumps(
            {
                "101": {"name": "Obscure Film (1971)", "genre": ["drama"], "director": ["A B"], "star": ["C D"]},
                "102": {"name": "Heat (1995)", "genre": ["crime"], "director": ["Michael Mann"], "star": ["Al Pacino"]},
            }
        )
    )
    (kg_dir / "entity2id.json").write_text(json.dumps({"Obscure Film (1971)": 0, "Heat (1995)": 1}))
    source = CheckpointSource("kbrd", tmp_path, "redial", kg_dir, "archive", "CRS Arena archive")
    items = item_catalog_for(source, catalog)
    assert {i.name for i in items.items} == {"Obscure Film (1971)", "Heat (1995)"}  # not the chat catalog
    (kg_dir / "id2info.json").unlink()
    with pytest.raises(SourceError) as err:
        item_catalog_for(CheckpointSource("kbrd", tmp_path, "opendialkg", kg_dir, "archive", "x"), catalog)
    assert "python -m crs_backends.neural.sources fetch" in str(err.value)
    small = CheckpointSource("kbrd", tmp_path, "bundled", kg_dir, "small local", "v2")
    assert item_catalog_for(small, catalog) is catalog


# ---------------------------------------------------------------- a real tiny KBRD in the published layout


@pytest.fixture(scope="module")
def kbrd_set(tmp_path_factory, catalog, kg):
    from crs_backends.neural.kbrd import KBRD

    texts = [f"I like {i.name}. You should watch {i.name}" for i in catalog.items[:200]]
    model = KBRD.create(kg, texts, size="small", seed=0)
    root = tmp_path_factory.mktemp("models")
    model.save(root, "bundled")
    kg.save(root / "kg_bundled")
    return root


def test_real_kbrd_takes_each_option_once_in_its_first_four_turns(kbrd_set, catalog, monkeypatch, tmp_path):
    monkeypatch.setenv("CRS_MODELS_DIR", str(kbrd_set))
    monkeypatch.setenv("CRS_MODELS_DATASET", "bundled")
    monkeypatch.setenv("CRS_ARENA_CACHE", str(tmp_path / "cache"))
    crs = load_neural_system("kbrd", catalog)
    assert crs.policy == "crs_arena"
    conv = Conversation(system_id="kbrd", turns=[])
    letters = []
    for text in (
        "Hi! I love crime movies like Heat (1995)",
        "Something with Al Pacino?",
        "I've seen it.",
        "Anything more recent?",
    ):
        conv.turns.append(Turn(role="user", text=text))
        turn = crs.respond(conv)
        choice = turn.metadata["choice"]
        letters.append(choice["letter"])
        ranked = [t.title for t in turn.ranking]
        # a small model: the list is its ranking without the titles the conversation named, the asked genre's
        # titles first (both ours)
        unnamed = [t for t in ranked if t not in turn.metadata["entities"]]
        asked = set(turn.metadata.get("asked_genres", []))
        fits = [t for t in unnamed if (item := catalog.match_name(t)) is not None and asked & set(item.genres)]
        top3 = (fits + [t for t in unnamed if t not in fits])[:3]
        if choice["letter"] == "D":
            assert turn.text == policy.list_reply(top3) and [r.title for r in turn.items] == top3
        elif turn.metadata["generated"].strip():
            assert turn.text == turn.metadata["generated"] or "<movie>" in turn.metadata["generated"]
        else:  # an untrained model may generate nothing: a question is shown, and the turn says so
            assert turn.text.startswith("Could you tell me") and "empty reply" in turn.metadata["notes"][-1]
        conv.turns.append(turn)
    assert sorted(letters) == ["A", "B", "C", "D"]  # the -1e5 penalty cycles through the menu


# ---------------------------------------------------------------- facts of the small versions


def test_fact_slots_are_filled_from_the_catalog(catalog):
    heat = catalog.match_name("Heat (1995)")
    alien = catalog.match_name("Alien (1979)")
    text = reply_facts.fill(
        "You might like <movie>: it is a <genre> film directed by <director>, with <actor>. Or <movie>, from <year>.",
        [heat, alien],
        [heat.name, alien.name],
    )
    assert text.startswith(f"You might like {heat.name}: it is a") and f"directed by {heat.directors[0]}" in text
    assert f"with {heat.cast[0]}" in text and f"{alien.name}, from {alien.year}." in text
    assert not reply_facts.contradictions(text, catalog) and not reply_facts.stutters(text)


def test_missing_fact_values_drop_their_phrase(catalog):
    item = catalog.match_name("Heat (1995)")
    bare = type(item)(id="x", title="Nameless", year=None)
    text = reply_facts.fill(
        "Try <movie>: it is a <genre> film directed by <director>, from <year>.", [bare], ["Nameless"]
    )
    assert text == "Try Nameless: it is a film."


def test_contradictions_and_stutters_are_found(catalog):
    heat = catalog.match_name("Heat (1995)")
    wrong = f"You might like {heat.name}: it is a comedy film directed by David Fincher, from 1972."
    problems = reply_facts.contradictions(wrong, catalog)
    assert any("comedy" in p for p in problems) and any("Fincher" in p for p in problems)
    assert any("1972" in p for p in problems)
    assert reply_facts.stutters("You should watch The The Godfather") == ["The"]


def test_the_simulator_attribute_mode_uses_the_models_own_choice(kg, catalog, tmp_path):
    from evaluators.simulator.protocols import Protocol, choose_action

    model = ScriptedModel(kg, list(kg.item_ids), "hi", [[1.0, 5.0, 2.0, 0.0], [1.0, 5.0, 2.0, 9.0]])
    crs = NeuralCRS(model, catalog, source=_published(tmp_path))
    conv = Conversation(system_id="unicrs", turns=[Turn(role="user", text="I want a movie")])
    protocol = Protocol.named("attr")
    # actor was asked already: the best remaining letter is C (director), as ask.py's state would leave it
    assert choose_action(crs, conv, protocol, ["genre", "director", "recommend"], ["actor"], "movies") == (
        "director",
        "system",
    )
    assert crs.choose_action(conv, ["genre", "recommend"]) == "recommend"


def test_articles_agree_with_the_filled_genre(catalog):
    for name in ("Heat (1995)", "Alien (1979)", "Toy Story (1995)"):
        item = catalog.match_name(name)
        word = reply_facts.genre_word(item.genres[0])
        article = "an" if word[0] in "aeiou" else "a"
        assert (
            reply_facts.fill("Try <movie>: it is a <genre> film.", [item], [item.name])
            == f"Try {item.name}: it is {article} {word} film."
        )


def test_the_phrase_decides_what_a_slot_states(catalog):
    """A small model may write the wrong slot token; 'directed by' still gets the director."""
    item = catalog.match_name("The Apartment (1960)") or catalog.match_name("Heat (1995)")
    text = reply_facts.fill(
        "How about <movie>: it is a <movie> film directed by <actor>, with <genre>.", [item], [item.name]
    )
    word = reply_facts.genre_word(item.genres[0])
    assert f"directed by {item.directors[0]}, with {item.cast[0]}." in text and f" {word} film" in text
    assert not reply_facts.contradictions(text, catalog)
    # "it is a <movie>." (seen from the small UniCRS: "it is a Batman (1989).") states the genre, names no film
    assert (
        reply_facts.fill("How about <movie>? It is a <movie>.", [item], [item.name])
        == f"How about {item.name}? It is {'an' if word[0] in 'aeiou' else 'a'} {word}."
    )


def test_a_title_that_repeats_a_word_is_no_stutter_but_a_real_repeat_around_it_is():
    titles = ["La La Land (2016)", "It (2017)"]
    assert reply_facts.stutters("You should watch La La Land (2016): it is a comedy.", titles) == []
    assert reply_facts.stutters("Then how about It (2017)? It is a horror film.", titles) == []
    assert reply_facts.stutters("I couldn or that, that, try It (2017).", titles) == ["that"]
    assert reply_facts.stutters("You should watch La La Land (2016).") == ["La"]  # without the titles it would count
    assert reply_facts.stutters("It is a comedy film, from 1939, from you mentioned.") == []  # a year between them


def test_a_filled_value_ending_in_a_period_does_not_double_the_stop():
    from catalog.catalog import Item

    item = Item(id="x", title="Chaplin", year=1992, genres=("Drama",), directors=(), cast=("Robert Downey Jr.",))
    assert reply_facts.fill("You might like <movie>, with <actor>.", [item], ["Chaplin (1992)"]) == (
        "You might like Chaplin (1992), with Robert Downey Jr."
    )
    assert reply_facts.fill("Hmm... <movie>?", [item], ["Chaplin (1992)"]) == "Hmm... Chaplin (1992)?"


def test_attribute_linker_finds_genres_by_their_wording_and_people_by_full_name():
    from crs_backends.neural.mentions import AttributeLinker

    names = {"Heat (1995)": 0, "Sci-Fi": 1, "Horror": 2, "Tom Hanks": 3, "Al Pacino": 4, "Ed": 5, "Drama [genre]": 6}
    link = AttributeLinker(names, [0])
    assert link("Any SCIENCE FICTION or scary movies? Tom Hanks, or al pacino, maybe a drama") == [
        "Sci-Fi",
        "Horror",
        "Tom Hanks",
        "Al Pacino",
        "Drama [genre]",
    ]
    assert link("Heat was great; Edward and Hanks") == []  # items are the catalog's job; no partial names
    # one of them, as people ask for a single film: the singular and the replies' adjective before "movie"
    assert link("I want a scary movie tonight") == ["Horror"]
    assert link("a sci-fi film, or a horror flick") == ["Sci-Fi", "Horror"]
    assert link("comedies please, or a funny movie") == []  # no Comedy entity in this KG
    assert link("") == [] and AttributeLinker({}, [])("horror") == []


def test_attribute_linker_reads_a_text_as_one_whole_word_expression_of_its_phrases_would():
    """The linker finds phrases by their first word rather than with one regular expression of all of them (which
    took a millisecond a message over ReDial's 20,000 names); it must find what that expression finds: whole words,
    the longest phrase at a place, matches not overlapping."""
    import re

    from crs_backends.neural.mentions import AttributeLinker

    names = {"Tom Hanks": 0, "Tom Hanks Jr": 1, "Hanks Jr Sr": 2, "Al Pacino": 3, "Sci-Fi": 4, "Horror": 5}
    link = AttributeLinker(names, [])
    phrases = sorted(link.phrases, key=len, reverse=True)
    expression = re.compile(r"(?<!\w)(" + "|".join(map(re.escape, phrases)) + r")(?!\w)")
    texts = [
        "tom hanks jr sr and Tom Hanks, Al Pacino's film",
        "atom hanks; tom hanksy; sci-fiction; sci-fi_; _horror; horror-comedy; (horror)",
        "Tom  Hanks, tom hanks jr., hanks jr sr",
        "SCI-FI! al pacino al pacino",
    ]
    for text in texts:
        expected = list(dict.fromkeys(link.phrases[m.group(1)] for m in expression.finditer(text.lower())))
        assert link(text) == expected, text


def test_clauses_with_words_the_training_replies_never_used_are_dropped(catalog):
    """Seen from the shipped small KBRD and UniCRS (6 and 14 of 300 held-back replies): a word ban in decoding
    steers the model into a suffix, "withs", "starringight"; the clause holding such a word goes."""
    from crs_backends.neural.synthetic import reply_lexicon

    lexicon = reply_lexicon(catalog)
    assert {"with", "starring", "recommend", "léon", "mcconaughey"} <= lexicon and "withs" not in lexicon
    seen = {
        "I couldn't find exactly that, but you might like Seven (1995): it is a crime film directed by David Fincher, "
        "with Brad Pitt, withs you mentioned.": "I couldn't find exactly that, but you might like Seven (1995): it is "
        "a crime film directed by David Fincher, with Brad Pitt.",
        "I'd recommend Ghostbusters (1984). It is an action film directed by Ivan Reitman, starring Bill Murray, "
        "starrings? It is another option.": "I'd recommend Ghostbusters (1984). It is an action film directed by "
        "Ivan Reitman, starring Bill Murray. It is another option.",
        "Thun! try Léon: The Professional (1994), so it should be close.": "Try Léon: The Professional (1994), so it "
        "should be close.",
        "withs": "",
    }
    for garbled, shown in seen.items():
        assert reply_facts.unknown_words(garbled, lexicon)
        assert reply_facts.drop_unknown_clauses(garbled, lexicon) == shown
        assert not reply_facts.unknown_words(shown, lexicon)
    clean = "How about Mr. Smith Goes to Washington (1939)? It is a drama film, from 1939."
    assert reply_facts.drop_unknown_clauses(clean, lexicon) == clean  # periods inside a title split nothing away


def test_a_clause_with_a_stray_letter_is_dropped_before_the_slots_are_filled():
    """Seen from the shipped small UniCRS: "I don't like Jim Carrey. Another one?" got "You're w the movie!" (a
    word ban cut "welcome" short). Titles and initials put every letter in the lexicon, so the lone letter is
    caught in the generated text itself, before a title such as "V for Vendetta" fills a slot."""
    assert reply_facts.drop_stray_letters("You're w the movie!") == ""
    assert reply_facts.drop_stray_letters("I'd suggest <movie>. It is a <genre> film. You're w the movie!") == (
        "I'd suggest <movie>. It is a <genre> film."
    )
    kept = "I don't know, but <movie> is a good one. A classic, I think."
    assert reply_facts.drop_stray_letters(kept) == kept  # "a", "I" and "don't" are no stray letters


def test_a_slot_written_twice_back_to_back_is_filled_once(catalog):
    """Seen from a small UniCRS: "It is a <genre> <genre>!" filled as "a biographical biographical" (the decoding
    guard against "The The" cannot see a slot: it is no word until filled)."""
    from crs_backends.neural.synthetic import reply_lexicon

    seven = catalog.match_name("Seven (1995)")
    shown = reply_facts.small_reply(
        "How about <movie>? It is a <genre> <genre>, with <actor><actor>!",
        [seven],
        [seven.name],
        [],
        reply_lexicon(catalog),
    )
    assert shown == f"How about Seven (1995)? It is a {reply_facts.genre_word(seven.genres[0])}, with {seven.cast[0]}!"
    assert not reply_facts.stutters(shown, [seven.name])
    # a reply ends with a sentence mark (the small BARCOR wrote "I hope you like John Wick (2014)")
    lexicon = reply_lexicon(catalog) | {"hope"}
    assert reply_facts.small_reply("I hope you like <movie>", [seven], [seven.name], [], lexicon) == (
        "I hope you like Seven (1995)."
    )


def test_a_small_versions_list_skips_titles_the_conversation_named(kg, catalog):
    names = ["Heat (1995)", "Alien (1979)", "Jaws (1975)"]
    order = _order(kg, catalog, names)
    model = ScriptedModel(kg, order, "What genre do you like?", [[0.1, 0.2, 0.3, 4.0]])
    model.size = "small"
    crs = NeuralCRS(model, catalog)
    assert crs.small
    conv = Conversation(system_id="kbrd", turns=[Turn(role="user", text="I loved Heat (1995). Something like it?")])
    turn = crs.respond(conv)
    fourth = kg.entity_name(order[3])
    assert "Heat (1995)" in turn.metadata["entities"] and turn.metadata["recommended"] is True
    assert turn.text == policy.list_reply(["Alien (1979)", "Jaws (1975)", fourth])
    assert [r.title for r in turn.items] == ["Alien (1979)", "Jaws (1975)", fourth]
    assert [t.title for t in turn.ranking[:3]] == names  # the model's own ranking, as it was


def test_published_replies_get_the_decode_clean_up_of_transformers_4_28():
    """CRS Arena pins transformers 4.28, whose BART and GPT-2 tokenizers removed the space before punctuation
    and contractions when decoding; transformers 5 does not, so the published BARCOR and UniCRS would say
    "Heat ." where CRS Arena showed "Heat.". The order matters: " ' " goes before " 's"."""
    from crs_backends.neural.engine import legacy_cleanup

    assert legacy_cleanup("Have you seen Heat (1995) ? It 's great , and you 're going to love it !") == (
        "Have you seen Heat (1995)? It's great, and you're going to love it!"
    )
    assert legacy_cleanup("I do n't know . I 'm sure you 've seen it") == "I don't know. I'm sure you've seen it"
    assert legacy_cleanup("the ' Heat ' movie") == "the'Heat'movie"  # 4.28's own quirk, reproduced
    assert legacy_cleanup("Fine.") == "Fine."


def test_a_small_version_keeps_to_the_genre_the_person_asked_for(kg, catalog, tmp_path):
    """Seen from the shipped small KBRD: "I'd like a horror movie", then "I don't like Stanley Kubrick. Another
    one?" got Die Hard; the asked genre's titles now come first (the turn's ranking stays the model's own)."""
    names = ["Die Hard (1988)", "It (2017)", "Heat (1995)"]
    small = CheckpointSource("kbrd", tmp_path, "bundled", tmp_path, "small local", "v4")
    model = ScriptedModel(kg, _order(kg, catalog, names), "You might like <movie>.", [[5, 0, 0, 0]])
    crs = NeuralCRS(model, catalog, source=small)
    conv = Conversation(
        system_id="kbrd",
        turns=[
            Turn(role="user", text="I'd like a horror movie, something really scary"),
            Turn(role="system", text="You might like Psycho (1960)."),
            Turn(role="user", text="I don't like Stanley Kubrick. Another one?"),
        ],
    )
    turn = crs.respond(conv)
    assert turn.text == "You might like It (2017)." and [r.title for r in turn.items] == ["It (2017)"]
    assert turn.metadata["asked_genres"] == ["Horror"] and any("asked genres" in n for n in turn.metadata["notes"])
    assert [r.title for r in turn.ranking[:2]] == names[:2]  # the model's order, as it ranked
    # a disliked genre is no wish, and a genre the person did not ask for reorders nothing
    conv.turns[0] = Turn(role="user", text="I don't like horror. Something good?")
    again = crs.respond(conv)
    assert "asked_genres" not in again.metadata and "It (2017)" not in again.text


def test_a_sentence_ends_with_the_mark_its_opening_calls_for():
    """Seen from the small UniCRS: "You should watch The Conjuring (2013)? It is a horror film…"."""
    from crs_backends.neural.reply_facts import mend_sentence_marks

    assert mend_sentence_marks("You should watch <movie>? It is a <genre> film.") == (
        "You should watch <movie>. It is a <genre> film."
    )
    assert mend_sentence_marks("Have you seen <movie>. It is great!") == "Have you seen <movie>? It is great!"
    for kept in ("What a great movie.", "You might like <movie>!", "Why not?", "Is it good?? Really", ""):
        assert mend_sentence_marks(kept) == kept


def test_the_running_small_versions_read_their_reply_words_from_their_set(catalog, tmp_path):
    """The shipped set holds the words its replies were trained on (reply_words.json, and UniCRS's own file where it
    trained on other replies; written by the builder); the running system reads them there and never imports the
    training-data generator."""
    import subprocess
    import sys
    from pathlib import Path

    from crs_backends.neural.names import SHIPPED_SMALL_ROOT
    from crs_backends.neural.reply_words import ReplyWords
    from crs_backends.neural.synthetic import training_words

    shipped = ReplyWords.read(SHIPPED_SMALL_ROOT)
    synthetic = training_words(catalog)
    assert shipped is not None and shipped.words > synthetic.words  # KBRD and BARCOR learnt people's words too
    assert ReplyWords.read(SHIPPED_SMALL_ROOT, "kbrd") == shipped  # no file of its own: the set's
    assert ReplyWords.read(SHIPPED_SMALL_ROOT, "unicrs") == synthetic  # trained on the synthetic replies alone
    code = (
        "import sys; from catalog.catalog import get_catalog; from crs_backends.neural.system import "
        "load_neural_system; [load_neural_system(s, get_catalog('bundled')) for s in ('kbrd', 'unicrs')]; "
        "print('crs_backends.neural.synthetic' in sys.modules)"
    )
    root = Path(__file__).resolve().parent.parent
    # quiet: 22 s (the shipped small set loaded in a fresh interpreter); the bound below is 10x that or more
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().splitlines()[-1] == "False", done.stderr[-800:]
    assert ReplyWords.read(tmp_path) is None  # a set without the file: the words are recomputed
