"""ChatCRS with a real endpoint reads the request through one structured call (tests/fake_openai.py plays the
endpoint): the JSON is validated and grounded in the catalog, a reply that is not valid falls back to the rules
reader and the turn says so, and the same ranking code honours the state."""

from __future__ import annotations

import json

import pytest
from fake_openai import Error, Reply

from catalog.catalog import load_bundled
from crs_backends.chatcrs import ChatCRS
from crs_backends.request_reading_llm import read_with_model
from llm_clients.base import LLMClient
from llm_clients.prompts import prompts_version
from llm_clients.remote import OpenAICompatibleModel
from llm_clients.types import LLMError
from storage.records import Conversation, Turn


@pytest.fixture(scope="module")
def catalog():
    return load_bundled()


def _client(fake, db_path) -> LLMClient:
    model = OpenAICompatibleModel("gpt-4o-mini", base_url=fake.base_url, api_key="k", timeout=3, max_retries=1)
    return LLMClient(model, role="crs", db_path=db_path)


def _conv(*texts: str) -> Conversation:
    return Conversation(
        system_id="chatcrs", turns=[Turn("user" if k % 2 == 0 else "system", t) for k, t in enumerate(texts)]
    )


def test_the_models_reading_is_validated_and_grounded_in_the_catalog(fake_openai, catalog, db_path):
    fake_openai.enqueue(
        Reply(
            json.dumps(
                {
                    "genres": ["comedy", "made-up genre"],
                    "not_genres": ["Horror"],
                    "people": ["Spielberg", "Zorblax Quuxington"],
                    "not_people": ["Adam Sandler"],
                    "liked": ["The Matrix", "A Film That Does Not Exist"],
                    "seen": ["Inception (2010)"],
                    "min_year": 1990,
                    "max_year": 1999,
                    "act": "recommend",
                    "about": None,
                    "subject": None,
                    "extra key": "ignored",
                }
            )
        )
    )
    conversation = _conv("I'm a fan of Spielberg, a comedy from the 90s, no horror, nothing with Adam Sandler")
    state = read_with_model(_client(fake_openai, db_path), conversation, catalog)
    assert state.read_by == "model" and not state.note
    assert state.genres == ("Comedy",) and state.not_genres == ("Horror",)
    assert state.people == ("Steven Spielberg", "Zorblax Quuxington") and state.not_people == ("Adam Sandler",)
    assert [i.name for i in state.liked] == ["The Matrix (1999)"] and [i.name for i in state.seen] == [
        "Inception (2010)"
    ]
    assert (state.min_year, state.max_year) == (1990, 1999)
    request = fake_openai.requests[0]["json"]
    assert request["response_format"] == {"type": "json_object"} and request["temperature"] == 0
    system, user = request["messages"][0]["content"], request["messages"][1]["content"]
    assert "Sci-Fi" in system and "JSON" in system and "Person: I'm a fan of Spielberg" in user


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ("Sure! The person wants a comedy.", "not JSON"),
        ('{"genres": "Comedy", "act": "recommend"}', "not the schema"),
        ('{"act": "dance"}', "not the schema"),
        ('{"act": "recommend", "min_year": 19999}', "not the schema"),
        ("[1, 2]", "not JSON"),
    ],
)
def test_an_invalid_reading_falls_back_to_the_rules_and_says_so(fake_openai, catalog, db_path, answer, why):
    fake_openai.enqueue(Reply(answer))
    state = read_with_model(_client(fake_openai, db_path), _conv("a comedy from the nineties, no horror"), catalog)
    assert state.read_by == "rules" and why in state.note
    assert state.genres == ("Comedy",) and state.not_genres == ("Horror",) and state.min_year == 1990
    assert why in state.summary()


def test_an_endpoint_failure_fails_the_turn_as_before(fake_openai, catalog, db_path):
    fake_openai.enqueue(Error(500), Error(500))
    with pytest.raises(LLMError):
        read_with_model(_client(fake_openai, db_path), _conv("a comedy"), catalog)


def test_free_chatcrs_ranks_by_the_models_reading(fake_openai, catalog, db_path):
    reading = {"genres": ["Comedy"], "not_people": ["Adam Sandler"], "min_year": 1990, "max_year": 1999}
    fake_openai.enqueue(
        Reply(json.dumps({**reading, "act": "recommend"})),
        Reply("Try Happy Gilmore (1996) or Groundhog Day (1993)."),  # the first is ruled out: never listed
    )
    crs = ChatCRS(_client(fake_openai, db_path), catalog, mode="free")
    turn = crs.respond(_conv("a 90s comedy, but I can't stand Adam Sandler"))
    items = [catalog.get(r.id) for r in turn.items]
    assert items[0].title == "Groundhog Day" and len(items) == 10
    assert all("Adam Sandler" not in i.cast for i in items)
    assert all(1990 <= i.year <= 1999 and "Comedy" in i.genres for i in items)
    assert turn.metadata["disliked_mentioned"] == ["Happy Gilmore (1996)"]
    assert turn.metadata["understood"]["read_by"] == "model"
    assert turn.metadata["reader_version"] == prompts_version("request_reader")
    candidates = fake_openai.requests[1]["json"]["messages"][0]["content"]
    assert "Happy Gilmore" not in candidates and "Candidate movies" in candidates


def test_free_chatcrs_answers_a_question_from_the_catalog_record(fake_openai, catalog, db_path):
    fake_openai.enqueue(
        Reply(json.dumps({"act": "ask_about", "about": "director", "subject": None})),
        Reply("Heat was directed by Michael Mann. Want something like it?"),
    )
    crs = ChatCRS(_client(fake_openai, db_path), catalog, mode="free")
    turn = crs.respond(_conv("a crime movie", "You might like Heat (1995), a crime film.", "who directed it?"))
    assert [r.title for r in turn.items] == ["Heat (1995)"] and turn.metadata["act"] == "answer"
    system = fake_openai.requests[1]["json"]["messages"][0]["content"]
    assert "Directed by: Michael Mann" in system and "Candidate movies" not in system


def test_free_chatcrs_on_an_unreadable_reading_still_honours_the_rules_reading(fake_openai, catalog, db_path):
    fake_openai.enqueue(Reply("no JSON here"), Reply("How about The Shining (1980)?"))
    crs = ChatCRS(_client(fake_openai, db_path), catalog, mode="free")
    turn = crs.respond(_conv("something to watch tonight, but no horror please"))
    assert all("Horror" not in catalog.get(r.id).genres for r in turn.items)
    understood = turn.metadata["understood"]
    assert understood["read_by"] == "rules" and "not JSON" in understood["note"] and "not JSON" in understood["summary"]
