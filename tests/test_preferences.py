"""Goodbyes (crs_backends.preferences.is_goodbye) and dislikes, read by the request reader and honoured by every
system that writes its own text (ChatCRS offline, the retrieval baseline)."""

from __future__ import annotations

import pytest

from catalog.catalog import load_bundled
from crs_backends.preferences import is_goodbye
from crs_backends.tfidf_baseline import RetrievalCRS
from storage.records import Conversation, Turn


@pytest.fixture(scope="module")
def catalog():
    return load_bundled()


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
