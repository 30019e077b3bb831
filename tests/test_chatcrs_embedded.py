"""ChatCRS on the embedded model (SmolLM2-135M, constrained): it names only catalog candidates, every fact
it states is the catalog's, and it asks, recommends or explains as the conversation needs.

The batch runs the real model over the 20 scripted user turns of ``crs_backends.chatcrs_check.SCRIPTS``.
"""

import pytest
from fake_openai import Error

from catalog.catalog import Catalog, load_bundled
from catalog.items import Item
from crs_backends import chatcrs_embedded as cx
from crs_backends.chatcrs import ChatCRS
from crs_backends.chatcrs_check import SCRIPTS, fact_errors, invented_titles, run_batch, summary
from llm_clients.base import LLMClient
from llm_clients.prompts import prompt
from llm_clients.remote import OpenAICompatibleModel
from storage.records import Conversation, Turn


@pytest.fixture(scope="module")
def catalog():
    return load_bundled()


@pytest.fixture(scope="module")
def batch(embedded_model, catalog):
    crs = ChatCRS(LLMClient(embedded_model, role="crs", db_path=None), catalog)
    assert crs.constrained and "catalog titles" in crs.info.variant and crs.info.demo
    return run_batch(crs, catalog)


def test_every_title_in_the_batch_is_a_candidate(batch):
    assert len(batch) == sum(len(s) for s in SCRIPTS) == 20
    for c in batch:
        assert c.invented == [], (c.user, c.reply)
        assert set(c.chosen) <= set(c.candidates)
    assert summary(batch)["invented_titles"] == 0


def test_every_fact_in_the_batch_is_the_catalogs(batch, catalog):
    for c in batch:
        assert c.fact_errors == [], (c.user, c.reply)
        for name in c.chosen:  # the facts are really stated, so the check above is not vacuous
            item = catalog.match_name(name)
            assert name in c.reply and item.directors[0] in c.reply
            assert any(cx.GENRE_PHRASES.get(g, g.lower()) in c.reply.lower() for g in item.genres)


def test_replies_are_short_and_fit_the_turn(batch, catalog):
    by_user = {c.user: c for c in batch}
    for c in batch:
        assert c.reply.strip() and len(c.reply.split()) <= 100, c.reply
        assert c.metadata["mode"] == "constrained" and c.metadata["act"] in ("ask", "recommend", "explain", "answer")
        assert c.reply.rstrip().endswith("?")  # always hands the turn back with a question
    # no preference yet: a question from the list, no titles
    for greeting in ("Hello!", "Can you suggest a movie?"):
        ask = by_user[greeting]
        assert ask.act == "ask" and ask.chosen == [] and ask.reply in cx.lines(prompt("chatcrs", "questions"))
    # a vague answer after a question: recommend anyway, not a second question
    assert by_user["I don't know, anything"].act == "recommend"
    # a preference: recommend candidates that fit it
    for text, genre in [
        ("Something funny please", "Comedy"),
        ("Any good horror films from the 80s?", "Horror"),
        ("A western with Clint Eastwood please", "Western"),
    ]:
        turn = by_user[text]
        assert turn.act == "recommend" and turn.chosen
        assert all(genre in catalog.match_name(n).genres for n in turn.chosen), turn.reply
    assert all(
        1980 <= catalog.match_name(n).year <= 1989 for n in by_user["Any good horror films from the 80s?"].chosen
    )
    # "already seen that, something more recent": nothing named before, nothing older than ten years
    first, recent = by_user[SCRIPTS[0][0]], by_user[SCRIPTS[0][1]]
    assert not set(recent.candidates) & set(first.chosen)
    newest = max(i.year for i in catalog.items)
    assert all(catalog.match_name(n).year >= newest - 10 for n in recent.candidates)
    # "why?": the last recommendation explained from the catalog
    why = by_user["Why would I like it?"]
    assert why.act == "explain" and why.chosen and set(why.chosen) <= set(recent.chosen)
    # "who directed it?": the catalog's answer about the film named last, and no new recommendation
    horror = by_user["Any good horror films from the 80s?"]
    who = by_user["Who directed it?"]
    assert who.act == "answer" and who.chosen == horror.chosen[:1] and who.items == who.chosen
    assert who.reply.startswith(f"{who.chosen[0]} was directed by {catalog.match_name(who.chosen[0]).directors[0]}")
    # the model's choices are recorded with the probabilities it gave each option
    decided = [c for c in batch if c.metadata["decided_by"] == "model"]
    assert len(decided) >= 10
    for c in decided:
        for probs in c.metadata["option_probs"].values():
            assert abs(sum(probs.values()) - 1) < 0.01
    # the list beside the reply: the chosen titles first, then more from the catalog (an answer lists its film)
    for c in batch:
        if c.act == "answer":
            continue
        assert c.items[: len(c.chosen)] == c.chosen and len(c.items) == 10 and len(set(c.items)) == 10
        assert all(catalog.match_name(t) is not None for t in c.items)
    assert summary(batch)["acts"]["explain"] >= 3


def test_nothing_fits_gives_a_question_not_an_empty_choice(embedded_model, catalog, db_path):
    # the whole catalog named by the user: the retrieval has nothing left to offer
    tiny = Catalog(
        [
            Item("heat-1995", "Heat", 1995, ("Crime",), ("Michael Mann",), ("Al Pacino",)),
            Item("alien-1979", "Alien", 1979, ("Horror",), ("Ridley Scott",), ("Sigourney Weaver",)),
        ],
        name="tiny",
    )
    crs = ChatCRS(LLMClient(embedded_model, role="crs", db_path=db_path), tiny)
    conversation = Conversation(system_id="chatcrs", turns=[Turn("user", "I loved Heat (1995) and Alien (1979)")])
    turn = crs.respond(conversation)
    assert turn.metadata["act"] == "ask" and turn.metadata["candidates"] == [] and turn.metadata["chosen"] == []
    assert turn.text in cx.lines(prompt("chatcrs", "no_match"))
    assert invented_titles(turn.text, tiny, []) == []
    # and a year nothing in the catalog has
    turn = ChatCRS(LLMClient(embedded_model, role="crs", db_path=db_path), catalog).respond(
        Conversation(system_id="chatcrs", turns=[Turn("user", "A comedy from the 2050s please")])
    )
    assert turn.metadata["act"] == "ask" and turn.metadata["candidates"] == []
    assert turn.text in cx.lines(prompt("chatcrs", "no_match"))


def test_several_asked_genres_leave_only_titles_of_them_all_to_choose(embedded_model, catalog, db_path):
    """Horror, then "Could it be funny as well?": the model chooses among horror comedies (it once chose The Shining
    from four horror-only candidates); the list goes on with the other fitting titles."""
    crs = ChatCRS(LLMClient(embedded_model, role="crs", db_path=db_path), catalog)
    conversation = Conversation(system_id="chatcrs", turns=[])
    for text in ("I want a horror film", "Could it be funny as well?"):
        conversation.turns.append(Turn("user", text))
        turn = crs.respond(conversation)
        conversation.turns.append(turn)
    both = {"Horror", "Comedy"}
    by_name = {i.name: i for i in catalog.items}
    candidates = [by_name[name] for name in turn.metadata["candidates"]]
    assert candidates and all(both <= set(i.genres) for i in candidates), turn.metadata["candidates"]
    assert turn.metadata["act_reason"].endswith("every asked genre")
    assert both <= set(catalog.get(turn.items[0].id).genres), turn.text
    assert len(turn.items) > len(candidates)  # the rest of the list: horror or comedy titles


def test_a_failing_model_gives_a_clear_grounded_reply(fake_openai, catalog, db_path):
    model = OpenAICompatibleModel("gpt-4o-mini", base_url=fake_openai.base_url, api_key="k", timeout=3, max_retries=1)
    crs = ChatCRS(LLMClient(model, role="crs", db_path=db_path), catalog, mode="constrained")
    fake_openai.enqueue(*[Error(500)] * 6)
    turn = crs.respond(Conversation(system_id="chatcrs", turns=[Turn("user", "A crime thriller please")]))
    assert turn.text.startswith(prompt("chatcrs", "model_failed"))
    assert "500" not in turn.text and "Error" not in turn.text and "Traceback" not in turn.text
    assert turn.metadata["decided_by"] == "fallback" and "could not choose" in turn.metadata["error"]
    assert turn.metadata["chosen"] == turn.metadata["candidates"][:1]
    assert turn.items[0].title == turn.metadata["chosen"][0]
    assert invented_titles(turn.text, catalog, turn.metadata["candidates"]) == []
    assert fact_errors(turn.text, catalog, turn.metadata["candidates"]) == []


def test_the_checks_find_inventions_and_wrong_facts(catalog):
    heat, alien = catalog.match_name("Heat (1995)"), catalog.match_name("Alien (1979)")
    good = (
        "I'd suggest Heat (1995), a crime and drama film directed by Michael Mann, starring Al Pacino. "
        "Or Alien (1979), a horror and sci-fi film directed by Ridley Scott, starring Sigourney Weaver. "
        "Would you like something different?"
    )
    assert invented_titles(good, catalog, [heat, alien]) == [] and fact_errors(good, catalog, [heat, alien]) == []
    bad = (
        "You might like The Terminator: Teraion (2013) or The Last Kingdoms, a sequel to Heat (1995), "
        "a comedy film directed by Ridley Scott, starring Tom Hanks. Also Inception."
    )
    assert set(invented_titles(bad, catalog, [heat])) == {
        "The Terminator: Teraion (2013)",
        "The Last Kingdoms",
        "Inception (2010)",
    }
    assert invented_titles(good, catalog, [heat]) == ["Alien (1979)"]  # real, but not offered this turn
    errors = " | ".join(fact_errors(bad, catalog, [heat]))
    assert "'comedy'" in errors and "'Ridley Scott'" in errors and "'Tom Hanks'" in errors


def test_choosing_helpers():
    import random

    assert cx.distinct_prefixes(
        ["The Shining (1980)", "The Thing (1982)", "John Wick (2014)", "John Wick: Chapter 2 (2017)"]
    ) == {
        "The Shining": "The Shining (1980)",
        "The Thing": "The Thing (1982)",
        "John Wick (2014)": "John Wick (2014)",
        "John Wick:": "John Wick: Chapter 2 (2017)",
    }
    probs = {"a": 0.7, "b": 0.25, "c": 0.05}
    assert cx.sample(probs, random.Random(1), 0) == "a"
    assert [cx.sample(probs, random.Random(s)) for s in range(5)] == [
        cx.sample(probs, random.Random(s)) for s in range(5)
    ]
    assert cx.second_choice(probs, "a", random.Random(0)) == "b"  # c is under a quarter of a
    with pytest.raises(ValueError):
        cx.sample({}, random.Random(0))
