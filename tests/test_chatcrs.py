"""ChatCRS and chat sessions, on the remote path (scripted replies) and the embedded model."""

import json
import re

import pytest
from fake_openai import Error, Reply

from catalog.catalog import load_bundled
from crs_backends.chatcrs import ChatCRS
from crs_backends.session import MAX_MESSAGE_CHARS, ChatSession, EmptyMessage, prepare_user_message
from llm_clients.base import LLMClient
from llm_clients.remote import OpenAICompatibleModel
from llm_clients.types import LLMError
from storage.conversations import get_conversation
from storage.db import get_db
from storage.records import Conversation, Turn


@pytest.fixture(scope="module")
def catalog():
    return load_bundled()


def _remote_chatcrs(fake, catalog, db_path, **kw):
    model = OpenAICompatibleModel("gpt-4o-mini", base_url=fake.base_url, api_key="k", timeout=3, max_retries=1)
    return ChatCRS(LLMClient(model, role="crs", db_path=db_path), catalog, **kw)


def _reading(**slots) -> Reply:
    """The model's answer to ChatCRS's structured reading call (tests/fake_openai.py serves it first)."""
    return Reply(json.dumps({"act": "recommend", **slots}))


def _conv(*texts):
    turns = [Turn("user" if i % 2 == 0 else "system", t) for i, t in enumerate(texts)]
    return Conversation(system_id="chatcrs", turns=turns)


def test_mentioned_titles_lead_the_list_and_inventions_are_recorded(fake_openai, catalog, db_path):
    fake_openai.enqueue(
        _reading(liked=["The Matrix"]),
        Reply("Since you liked The Matrix (1999), try Inception (2010) and Gravity Falls Forever (2017)."),
    )
    crs = _remote_chatcrs(fake_openai, catalog, db_path)
    turn = crs.respond(_conv("I loved The Matrix. Something similar?"))
    names = [ref.title for ref in turn.items]
    assert names[0] == "Inception (2010)"
    assert "The Matrix (1999)" not in names  # the user's own title is not recommended back
    assert len(turn.items) == 10 and len(set(names)) == 10
    assert all(ref.id in catalog for ref in turn.items)  # nothing outside the catalog
    assert turn.metadata["unmatched_titles"] == ["Gravity Falls Forever (2017)"]
    assert turn.metadata["mode"] == "free" and not crs.constrained  # a remote model writes freely, as iEvaLM prompts it
    assert turn.metadata["understood"]["read_by"] == "model" and turn.metadata["understood"]["liked"] == [
        "The Matrix (1999)"
    ]
    # the model saw catalog candidates and the conversation
    sent = fake_openai.requests[1]["json"]["messages"]
    assert sent[0]["role"] == "system" and "Candidate movies" in sent[0]["content"]
    assert sent[-1] == {"role": "user", "content": "I loved The Matrix. Something similar?"}


def test_reply_without_titles_still_gets_a_grounded_list(fake_openai, catalog, db_path):
    fake_openai.enqueue(_reading(genres=["Horror"]), Reply("What kind of mood are you in?"))
    turn = _remote_chatcrs(fake_openai, catalog, db_path, list_size=5).respond(_conv("Hi, I want a scary film"))
    assert len(turn.items) == 5
    assert any("Horror" in catalog.get(r.id).genres for r in turn.items)


def test_session_saves_every_turn_and_keeps_the_user_turn_on_failure(fake_openai, catalog, db_path):
    crs = _remote_chatcrs(fake_openai, catalog, db_path)
    session = ChatSession(crs, db_path=db_path)
    fake_openai.enqueue(_reading(genres=["Crime", "Thriller"]), Reply("Try Heat (1995)."))
    list(session.send(prepare_user_message("A crime thriller please")))
    fake_openai.enqueue(Error(500), Error(500))  # the reading call fails: the turn fails, as any model failure does
    with pytest.raises(LLMError):
        list(session.send(prepare_user_message("Another one?")))
    stored = get_conversation(get_db(db_path), session.conversation.id)
    assert [t.role for t in stored.turns] == ["user", "system", "user"]
    assert stored.turns[1].items[0].title == "Heat (1995)"
    assert "HTTP 500" in stored.metadata["last_error"]


def test_message_validation():
    with pytest.raises(EmptyMessage):
        prepare_user_message("   \n ")
    with pytest.raises(EmptyMessage):
        prepare_user_message(None)
    long = prepare_user_message("é" * (MAX_MESSAGE_CHARS + 10))
    assert len(long.text) == MAX_MESSAGE_CHARS and "4,010" in long.notice
    assert prepare_user_message("  日本の映画 🎬 ").text == "日本の映画 🎬"


def test_embedded_chatcrs_turn(embedded_model, catalog, db_path):
    crs = ChatCRS(LLMClient(embedded_model, role="crs", db_path=db_path), catalog)
    session = ChatSession(crs, db_path=db_path)
    pieces = list(session.send(prepare_user_message("I want a funny animated movie for kids.")))
    turn = pieces[-1]
    assert turn.text.strip() and turn.role == "system"
    assert 1 <= len(turn.items) <= 10
    assert all(ref.id in catalog for ref in turn.items)
    assert crs.info.demo
    assert len(get_conversation(get_db(db_path), session.conversation.id).turns) == 2


def test_retrieval_baseline(catalog):
    from crs_backends.tfidf_baseline import RetrievalCRS

    crs = RetrievalCRS(catalog)
    conv = _conv("I loved The Matrix, something with robots and action please")
    first = crs.respond(conv)
    assert len(first.items) == 10 and all(ref.id in catalog for ref in first.items)
    assert "The Matrix (1999)" not in [r.title for r in first.items]
    assert first.items[0].title in first.text
    conv.turns += [first, Turn("user", "More like that?")]
    second = crs.respond(conv)
    assert not {r.id for r in second.items} & {r.id for r in first.items}  # nothing repeated
    # each named title's reason is written as a sentence would have it ("an action …", never "a action")
    for reply in (first.text, second.text):
        assert not re.search(r"\ba [aeiou]", reply, re.IGNORECASE), reply
    action = next(i for i in catalog.items if i.genres[:1] == ("Action",))
    from crs_backends.tfidf_baseline import _reason

    assert _reason(action).startswith("an action")


def test_the_retrieval_baseline_says_when_it_has_nothing_to_go_on(catalog):
    """ "Hi!" or "I want a movie" say no preference: the baseline offers well-known films as that, not "based on
    what you said" (its raw-text query once gave The Lego Movie for "I want a movie"), and asks what the person
    likes; a second vague turn gets the next well-known films, never the same ones."""
    from crs_backends.tfidf_baseline import RetrievalCRS

    crs = RetrievalCRS(catalog)
    popular = [i.id for i in catalog.popular(len(catalog))]
    for text in ("Hi!", "I want a movie", "hello, can you help me?"):
        turn = crs.respond(_conv(text))
        assert "based on what you said" not in turn.text.lower(), turn.text
        assert "what kind of movie" in turn.text.lower() and turn.text.count("?") == 1, turn.text
        assert turn.metadata["reason"] == "no preference yet: well-known films"
        assert [r.id for r in turn.items[:2]] == popular[:2], [r.title for r in turn.items]
    conv = _conv("Hi!")
    first = crs.respond(conv)
    conv.turns += [first, Turn("user", "hmm, not sure")]
    second = crs.respond(conv)
    assert not {r.id for r in second.items} & {r.id for r in first.items}
    assert second.text.startswith("Here are two more well-loved films"), second.text
    conv.turns += [second, Turn("user", "Any good comedy films?")]
    third = crs.respond(conv)  # once a wish is said, it is what counts
    assert third.text.startswith("Here is something else you might like"), third.text
    assert all("Comedy" in catalog.get(r.id).genres for r in third.items[:3])
    assert "reason" not in third.metadata


@pytest.mark.parametrize(
    ("request_text", "genre"),
    [
        ("Any good comedy films?", "Comedy"),
        ("Any good science fiction films? Space, aliens", "Sci-Fi"),
        ("a real horror film", "Horror"),
        ("an animated movie my kids will love", "Animation"),
        ("a funny movie like Superbad", "Comedy"),
    ],
)
def test_the_retrieval_baseline_follows_a_plainly_stated_genre(catalog, request_text, genre):
    """Generic words ("good", "movie") are not the query: "Any good comedy films?" once gave Good Will Hunting
    and The Good, the Bad and the Ugly. The reply names the asked genre first."""
    from crs_backends.tfidf_baseline import RetrievalCRS

    turn = RetrievalCRS(catalog).respond(_conv(request_text))
    genres = [catalog.get(r.id).genres for r in turn.items]
    assert sum(genre in g for g in genres) >= 8, [r.title for r in turn.items]
    assert all(genre in g for g in genres[:3]), [r.title for r in turn.items]
    assert turn.metadata["understood"]["genres"][0] == genre  # "my kids" reads as Family too
    assert "good" not in " ".join(r.title.lower() for r in turn.items[:3])
