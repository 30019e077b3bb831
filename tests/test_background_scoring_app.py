"""Background scoring in the real app (`python app.py`, gradio_client): after a burst of chats and a voted battle,
every chat and arena conversation carries the default scorer's evaluation, exactly one per conversation at its
length, and the leaderboard's CoRE columns cover the systems the votes are about."""

from __future__ import annotations

import threading
import time

import pytest
from app_server import AppServer, scripted_chatcrs_env
from fake_openai import Reply
from gradio_client import Client

from storage.db import open_db

POLLS = 600  # of 0.1 s: the bound of the wait for the background scorer, never a timing assert


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    from fake_openai import FakeOpenAI

    with FakeOpenAI() as fake:
        fake.default = Reply("You might like Heat (1995), a tense crime film.")
        env = {
            **scripted_chatcrs_env(fake, tmp_path_factory.mktemp("no_data")),
            "CRS_ARENA_SCORING": "on",
            "CRS_ARENA_SCORING_IDLE_S": "0.3",
        }
        with AppServer(tmp_path_factory.mktemp("scoring") / "app.db", env=env) as server:
            yield server


def _unscored(db) -> list[dict]:
    """Conversations without a finished evaluation at their present length: a chat idle between its two messages is
    scored after the first exchange and again once it grew, so one evaluation alone does not end the wait (on a busy
    machine the wait used to end between the two and read the shorter one)."""
    return list(
        db.query(
            """select c.id, c.source from conversations c
               where c.source in ('chat', 'arena') and not exists (
                   select 1 from evaluations e
                   where e.conversation_id = c.id and e.status = 'done'
                     and json_extract(e.metrics, '$.turns_judged') = (
                         select count(*) from turns t where t.conversation_id = c.id and t.part = 'interaction'))"""
        )
    )


def test_every_chat_and_arena_conversation_ends_up_scored_once(app):
    def chat(n: int) -> None:
        client = Client(app.url, verbose=False)
        for text in (f"Any good crime films, number {n}?", "Another one?"):
            client.predict(text, "retrieval", api_name="/chat")

    threads = [threading.Thread(target=chat, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    arena = Client(app.url, verbose=False)
    arena.predict("I'd like a tense heist movie", api_name="/arena_send")
    arena.predict("Something from the 90s?", api_name="/arena_send")
    arena.predict("", api_name="/arena_vote_a")  # the vote answered at once: scoring comes after
    for t in threads:
        t.join(120)

    db = open_db(app.db_path)
    for _ in range(POLLS):
        if not _unscored(db):
            break
        time.sleep(0.1)
    assert _unscored(db) == []
    rows = list(
        db.query(
            """select c.source, count(e.id) as n, count(distinct json_extract(e.metrics, '$.turns_judged')) as lengths,
                      max(json_extract(e.metrics, '$.turns_judged')) as judged,
                      (select count(*) from turns t where t.conversation_id = c.id and t.part = 'interaction') as turns
               from conversations c join evaluations e on e.conversation_id = c.id
               where c.source in ('chat', 'arena') group by c.id"""
        )
    )
    assert sorted(r["source"] for r in rows) == ["arena", "arena"] + ["chat"] * 4
    # scored at its full length, and never twice at one length (a chat idle between its two messages was
    # scored after the first exchange too: it grew, so it was scored again)
    assert all(r["judged"] == r["turns"] == 4 and r["n"] == r["lengths"] for r in rows), rows
    assert {r["scorer"] for r in db.query("select scorer from evaluations")} == {"proxy"}

    table, _plot, _line, _, _ = Client(app.url, verbose=False).predict("All", "All", None, api_name="/leaderboard")
    headers = table["headers"]
    by_system = {row[headers.index("System")]: row for row in table["data"]}
    assert {"chatcrs", "retrieval"} <= set(by_system)
    for system in ("chatcrs", "retrieval"):
        assert by_system[system][headers.index("Judged")] not in ("", "0"), by_system[system]


def test_each_reply_shows_its_turn_scores_once_scored_and_the_arena_only_after_the_vote(app):
    db = open_db(app.db_path)
    client = Client(app.url, verbose=False)
    first = client.predict("Any good comedy films?", "retrieval", api_name="/chat")[0]
    assert "turn scores" not in str(first)  # not scored yet
    conversation_id = next(db.query("select id from conversations where source = 'chat' order by created_at desc"))[
        "id"
    ]
    for _ in range(POLLS):
        if list(db.query("select 1 from evaluations where conversation_id = ? and status = 'done'", [conversation_id])):
            break
        time.sleep(0.1)
    second = client.predict("Another one?", "retrieval", api_name="/chat")[0]
    assert "turn scores: relevance" in str(second[1]["content"])  # the first reply, scored while idle
    [metrics] = [
        r["metrics"] for r in db.query("select metrics from evaluations where conversation_id = ?", [conversation_id])
    ]
    assert '"turn_scores"' in metrics

    arena = Client(app.url, verbose=False)
    panes = arena.predict("I'd like a tense heist movie", api_name="/arena_send")
    assert "turn scores" not in str(panes[:2])
    arena.predict("", api_name="/arena_vote_b")
    battle = next(db.query("select * from battles order by created_at desc limit 1"))
    for _ in range(POLLS):
        done = list(
            db.query(
                "select 1 from evaluations where conversation_id in (?, ?) and status = 'done'",
                [battle["conversation_a"], battle["conversation_b"]],
            )
        )
        if len(done) == 2:
            break
        time.sleep(0.1)
    pane_a, pane_b, name_a, *_ = arena.predict(api_name="/arena_reveal")
    assert "System A was" in name_a
    assert "turn scores: relevance" in str(pane_a[1]["content"]) and "turn scores" in str(pane_b[1]["content"])
