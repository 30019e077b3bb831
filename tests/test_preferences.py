"""Dislikes and goodbyes: read from the person's words, honoured by every system that writes its own text."""

from __future__ import annotations

import pytest

from catalog.catalog import load_bundled
from crs_backends.preferences import dislike_spans, is_goodbye, read_dislikes, without_dislikes
from crs_backends.tfidf_baseline import RetrievalCRS
from storage.records import Conversation, Turn


@pytest.fixture(scope="module")
def catalog():
    return load_bundled()


@pytest.mark.parametrize(
    ("text", "span"),
    [
        ("I don't like Christopher Nolan films", "Christopher Nolan films"),
        ("Not a fan of Jonah Hill. Another one?", "Jonah Hill"),
        ("I hate horror, but I love comedies", "horror"),
        ("No horror please", "horror"),
        ("I'm not into musicals anymore", "musicals"),
        ("i dont really like Tom Cruise", "Tom Cruise"),
    ],
)
def test_the_object_of_a_dislike_is_read(text, span):
    assert dislike_spans(text) == [span]


@pytest.mark.parametrize("text", ["No, I meant a comedy", "No problem!", "I like Heat (1995)", "Nothing yet"])
def test_what_is_not_a_dislike(text):
    assert dislike_spans(text) == []


def test_dislikes_match_people_genres_and_titles(catalog):
    d = read_dislikes(
        ["I don't like Christopher Nolan films", "not a fan of Jonah Hill", "I hated Titanic", "no horror please"],
        catalog,
    )
    assert "Christopher Nolan" in d.people and "Jonah Hill" in d.people
    assert "Horror" in d.genres
    assert any(t.startswith("Titanic") for t in d.titles)
    nolan = [i for i in catalog.items if "Christopher Nolan" in i.directors]
    assert nolan and all(d.excludes(i) for i in nolan)


def test_a_surname_alone_finds_a_person_only_one_catalog_person_has(catalog):
    assert read_dislikes(["I can't stand Tarantino"], catalog).people == {"Quentin Tarantino"}
    # two catalog people are called Nolan: the name is honoured as text, which still excludes both Nolans' films
    nolan = read_dislikes(["I can't stand Nolan"], catalog)
    assert not nolan.people and nolan.phrases == ("nolan",)
    assert all(nolan.excludes(i) for i in catalog.items if "Christopher Nolan" in i.directors)


def test_a_surname_with_another_given_name_is_another_person(catalog):
    """Seen: "I don't like Stephen King" was read as the catalog's Adrienne King (the only King), whose films were
    then left out while Stephen King was not honoured at all."""
    king = read_dislikes(["I do not like Stephen King. Something scary?"], catalog)
    assert not king.people and king.phrases == ("stephen king",)
    assert king.mentions_disliked("It is based on a Stephen King novel.")
    from catalog.items import Item

    novel = Item(id="misery", title="Misery", year=1990, description="A novelist held captive; a Stephen King book.")
    assert king.excludes(novel)  # the record read for a phrase includes the item's description
    assert read_dislikes(["nothing by Tarantino please"], catalog).people == {"Quentin Tarantino"}
    assert read_dislikes(["I don't like quentin tarantino"], catalog).people == {"Quentin Tarantino"}


def test_a_dislike_the_catalog_cannot_match_is_honoured_by_text(catalog):
    d = read_dislikes(["I don't like Zorblax Quuxington"], catalog)
    assert d.phrases == ("zorblax quuxington",) and not d.people
    assert not any(d.excludes(i) for i in catalog.items)  # nobody in the catalog has that name
    assert d.mentions_disliked("a film starring Zorblax Quuxington")


def test_without_dislikes_keeps_what_is_wanted():
    assert without_dislikes("Not a fan of Jonah Hill. Another one?") == "Another one?"
    assert "comedies" in without_dislikes("I hate horror, but I love comedies")


@pytest.mark.parametrize(
    "text",
    [
        "Thanks, bye!",
        "Great, that's all. See you!",
        "ok thank you, goodbye",
        "Perfect, I'll watch it tonight.",
        "Great, thanks!",
        "thanks",
        "Cool, thank you so much. I'll check it out!",
        "Great, I'll watch it. Thanks!",
    ],
)
def test_goodbyes(text):
    assert is_goodbye(text)


@pytest.mark.parametrize(
    "text",
    ["Thanks! Anything else like it?", "Great!", "ok", "Any good heist movies?", "", "bye bye birdie is a musical?"],
)
def test_not_goodbyes(text):
    assert not is_goodbye(text)


def _conversation(*user_texts: str) -> Conversation:
    turns = []
    for text in user_texts:
        turns.append(Turn(role="user", text=text))
        turns.append(Turn(role="system", text="Okay."))
    return Conversation(system_id="retrieval", turns=turns[:-1])


def test_the_retrieval_baseline_never_recommends_a_dislike(catalog):
    crs = RetrievalCRS(catalog)
    turn = crs.respond(_conversation("I like mind-bending science fiction", "I don't like Christopher Nolan films"))
    items = [catalog.get(r.id) for r in turn.items]
    assert items and not any("Christopher Nolan" in i.directors for i in items if i)
    assert "Christopher Nolan" not in turn.text
    assert turn.metadata["understood"]["not_people"] == ["Christopher Nolan"]


@pytest.mark.parametrize("leaving", ["Thanks, bye!", "Great, thanks!"])
def test_the_retrieval_baseline_says_goodbye(catalog, leaving):
    turn = RetrievalCRS(catalog).respond(_conversation("Any good comedy films?", leaving))
    assert turn.items == [] and turn.metadata["act"] == "goodbye"
    assert "enjoy" in turn.text.lower()


def _chat(crs, catalog, *user_texts: str) -> list[Turn]:
    """Talk to ``crs`` message by message, as the app does; the system turns it gave."""
    conversation = Conversation(system_id=crs.info.id, turns=[])
    out = []
    for text in user_texts:
        conversation.turns.append(Turn(role="user", text=text))
        turn = crs.respond(conversation)
        conversation.turns.append(turn)
        out.append(turn)
    return out


def _named(turn: Turn, catalog) -> list:
    return [catalog.get(r.id) for r in turn.items if catalog.get(r.id)] + [
        m.item for m in catalog.mentions(turn.text) if m.item is not None
    ]


@pytest.fixture(scope="module")
def chatcrs(embedded_model, catalog):
    from crs_backends.chatcrs import ChatCRS
    from llm_clients.base import LLMClient

    crs = ChatCRS(LLMClient(embedded_model, role="crs", db_path=None), catalog)
    assert crs.constrained
    return crs


def test_chatcrs_offline_never_recommends_a_disliked_person_again(chatcrs, catalog):
    for first, dislike, person in [
        ("A funny movie for tonight?", "Not a fan of Jonah Hill. Another one?", "Jonah Hill"),
        ("I want a mind-bending sci-fi movie", "I don't like Christopher Nolan films", "Christopher Nolan"),
    ]:
        turns = _chat(chatcrs, catalog, first, dislike, "Something else?")
        for turn in turns[1:]:
            assert turn.metadata["act"] in ("recommend", "ask")
            assert person not in turn.text, turn.text
            for item in _named(turn, catalog):
                assert person not in (*item.directors, *item.cast, *item.writers), (item.name, turn.text)
        assert person in turns[1].metadata["understood"]["not_people"]


@pytest.mark.parametrize("leaving", ["Thanks, bye!", "Great, thanks!"])
def test_chatcrs_offline_says_goodbye_without_recommending(chatcrs, catalog, leaving):
    goodbye = _chat(chatcrs, catalog, "Any good comedy films?", leaving)[-1]
    assert goodbye.metadata["act"] == "goodbye" and goodbye.items == []
    assert catalog.mentions(goodbye.text) == [] and "?" not in goodbye.text


def test_a_disliked_genre_is_not_searched_for(chatcrs, catalog):
    turn = _chat(chatcrs, catalog, "I hate horror, but I love comedies")[-1]
    assert turn.metadata["understood"]["genres"] == ["Comedy"]
    assert turn.metadata["understood"]["not_genres"] == ["Horror"]
    assert not any("Horror" in i.genres for i in _named(turn, catalog))
