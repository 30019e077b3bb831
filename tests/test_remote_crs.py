"""The remote CRS client (crs-arena/1) against real HTTP servers on 127.0.0.1: the reference server in
examples/ and the same server with faults switched on (tests/crs_fault_server.py)."""

from __future__ import annotations

import json
import math
import re
import socket

import pytest
from crs_fault_server import MB, FaultServer

from catalog.catalog import get_catalog
from crs_backends.remote_crs import (
    MAX_ITEMS,
    MAX_TEXT_CHARS,
    PROTOCOL,
    InvalidResponse,
    RemoteConfig,
    RemoteCRS,
    RemoteCRSError,
    http_url,
    parse_response,
)
from crs_backends.session import ChatSession, UserMessage
from storage.conversations import get_conversation
from storage.db import get_db
from storage.records import Conversation, Turn
from ui.render import chat_messages

KEY = "sk-remote-test-5a1f0c"


@pytest.fixture(scope="module")
def catalog():
    return get_catalog("bundled")


def remote(url, catalog, *, key_env=None, env=None, **config) -> RemoteCRS:
    config.setdefault("max_retries", 0)
    config.setdefault("timeout", 5)
    return RemoteCRS(
        RemoteConfig(id="my_crs", label="My CRS", url=url, key_env=key_env, **config),
        catalog,
        backoff=0.01,
        env=env or {},
    )


def conversation(*texts: str) -> Conversation:
    return Conversation(system_id="my_crs", turns=[Turn("user", t) for t in texts])


def test_the_request_carries_the_conversation_ids_catalog_and_key(catalog):
    heat = catalog.match_name("Heat (1995)")
    conv = Conversation(
        system_id="my_crs",
        history=[Turn("user", "Hello"), Turn("system", "Hi! What do you like?")],
        turns=[
            Turn("user", "A heist movie"),
            Turn("system", "Try Heat (1995).", items=[heat.ref()]),
            Turn("user", "Something else, please"),
        ],
    )
    with FaultServer("ok") as server:
        system = remote(server.url, catalog, key_env="MY_CRS_KEY", env={"MY_CRS_KEY": KEY})
        turn = system.respond(conv)
    body, headers = server.bodies[0], {k.lower(): v for k, v in server.headers[0].items()}
    assert body["protocol"] == PROTOCOL and body["conversation_id"] == conv.id
    assert body["domain"] == "movies" and body["catalog"] == "bundled" and body["max_items"] == 10
    assert [(t["role"], t["text"]) for t in body["turns"]] == [(t.role, t.text) for t in conv.all_turns]
    assert body["turns"][3]["items"] == [{"id": "heat-1995", "title": "Heat (1995)"}]
    assert "items" not in body["turns"][0]
    assert headers["x-request-id"] == body["request_id"] == turn.metadata["request_id"]
    assert headers["authorization"] == f"Bearer {KEY}" and headers["content-type"] == "application/json"
    assert KEY not in json.dumps(turn.to_dict())


def test_a_reference_answer_becomes_a_turn_of_catalog_items(catalog):
    with FaultServer("ok") as server:
        system = remote(server.url, catalog)
        assert system.info.variant == "remote system (HTTP)"
        turn = system.respond(conversation("I love science fiction movies set in space with aliens"))
    assert turn.role == "system" and "sci-fi" in turn.text
    assert len(turn.items) == 10 and all(catalog.get(i.id) for i in turn.items)
    genres = [set(catalog.get(i.id).genres) for i in turn.items[:3]]
    assert all("Sci-Fi" in g for g in genres)
    meta = turn.metadata
    assert meta["remote"] and meta["system_version"] == "reference-crs 1.0" and meta["items_returned"] == 10
    assert meta["items_unmapped"] == 0 and meta["attempts"] == 1 and meta["server_ms"] >= 0
    assert set(meta["scores"]) == {i.id for i in turn.items} and meta["explanations"]
    assert system.info.variant == "remote system (HTTP) · version reference-crs 1.0"


def test_the_key_is_required_by_the_reference_server(catalog):
    from reference_crs import ReferenceServer

    with ReferenceServer(("127.0.0.1", 0), key=KEY) as server:
        with pytest.raises(RemoteCRSError) as err:
            remote(server.url, catalog, key_env="MY_CRS_KEY", env={"MY_CRS_KEY": "wrong"}).respond(conversation("hi"))
        assert err.value.kind == "auth" and "MY_CRS_KEY" in str(err.value) and "wrong" not in str(err.value)
        with pytest.raises(RemoteCRSError) as err:
            remote(server.url, catalog, key_env="MY_CRS_KEY", env={}).respond(conversation("hi"))
        assert err.value.kind == "config" and "MY_CRS_KEY is not set" in str(err.value)
        ok = remote(server.url, catalog, key_env="MY_CRS_KEY", env={"MY_CRS_KEY": KEY}).respond(conversation("hi"))
        assert ok.items


@pytest.mark.parametrize(
    "fault, kind, says, requests",
    [
        ("status:500", "server", "failed with HTTP 500 (after 3 attempts)", 3),
        ("status:503", "server", "failed with HTTP 503 (after 3 attempts)", 3),
        ("status:429", "rate_limit", "rate-limiting requests (HTTP 429, after 3 attempts)", 3),
        ("status:404", "refused", "refused the request (HTTP 404)", 1),
        ("status:401", "auth", "names no key variable", 1),
        ("invalid_json", "bad_response", "not valid JSON; nothing was stored", 1),
        ("wrong_types", "bad_response", "'text' is missing or not a string", 1),
        ("empty_text", "bad_response", "'text' is empty", 1),
        ("redirect", "redirect", "redirect (HTTP 302), which is not followed", 1),
        ("drop", "connection", "could not be reached (after 3 attempts)", 3),
    ],
)
def test_faults_become_clear_messages(catalog, fault, kind, says, requests):
    with FaultServer(fault) as server:
        system = remote(server.url, catalog, max_retries=2)
        with pytest.raises(RemoteCRSError) as err:
            system.respond(conversation("A heist movie?"))
    message = str(err.value)
    assert err.value.kind == kind and says in message, message
    assert message.startswith("My CRS ") and "127.0.0.1" not in message and "Traceback" not in message
    assert server.requests == requests


def test_a_flaky_server_is_retried_until_it_answers(catalog):
    with FaultServer("flaky:2") as server:
        turn = remote(server.url, catalog, max_retries=2).respond(conversation("A comedy"))
    assert turn.metadata["attempts"] == 3 and server.requests == 3 and turn.items


def test_a_slow_server_times_out_on_every_attempt(catalog):
    with FaultServer("slow:3") as server:  # answers, but 3 s late: a client that waited would get a reply
        with pytest.raises(RemoteCRSError) as err:
            remote(server.url, catalog, timeout=0.4, max_retries=1).respond(conversation("A comedy"))
    assert err.value.kind == "timeout" and "did not answer within 0.4 s (after 2 attempts)" in str(err.value)
    assert server.requests == 2


def test_a_server_that_is_down(catalog):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket is closed
    with pytest.raises(RemoteCRSError) as err:
        remote(f"http://127.0.0.1:{port}/", catalog, max_retries=1).respond(conversation("hi"))
    assert err.value.kind == "connection" and "could not be reached (after 2 attempts)" in str(err.value)


@pytest.mark.parametrize("fault", ["huge", "huge_chunked"])
def test_a_50_mb_body_is_refused_without_reading_it(catalog, fault):
    with FaultServer(fault) as server:
        with pytest.raises(RemoteCRSError) as err:
            remote(server.url, catalog).respond(conversation("hi"))
    assert err.value.kind == "too_large" and "nothing was" in str(err.value)
    # refused on its announced length, or read in pieces and stopped at the limit: the server could not send it all
    assert server.sent < 20 * MB


def test_items_matching_nothing_are_left_out_and_recorded(catalog):
    with FaultServer("unmapped") as server:
        turn = remote(server.url, catalog).respond(conversation("Something old"))
    assert turn.items == [] and turn.text
    assert turn.metadata["items_returned"] == 5 and turn.metadata["items_unmapped"] == 5
    assert turn.metadata["unmapped"][0] == {"title": "A Film Nobody Made 0 (1931)"}


def test_html_in_the_text_is_stored_as_sent_and_shown_as_text(catalog, db_path):
    with FaultServer("html") as server:
        session = ChatSession(remote(server.url, catalog), db_path=db_path)
        *_, turn = session.send(UserMessage("A comedy, please"))
    assert "<script>" in turn.text  # the record keeps what the system said
    shown = chat_messages(session.conversation)[-1]["content"]
    assert "<script>" not in shown and "&lt;script&gt;" in shown


def test_a_bad_response_stores_no_system_turn(catalog, db_path):
    with FaultServer("invalid_json") as server:
        session = ChatSession(remote(server.url, catalog), db_path=db_path)
        with pytest.raises(RemoteCRSError):
            list(session.send(UserMessage("A comedy, please")))
    stored = get_conversation(get_db(db_path), session.conversation.id)
    assert [t.role for t in stored.turns] == ["user"]
    assert "not valid JSON" in stored.metadata["last_error"] and "<html>" not in stored.metadata["last_error"]


def test_parse_response_checks_types_and_limits(catalog):
    ok = parse_response(
        {
            "text": " Try Heat. ",
            "items": [
                {"title": "Heat", "year": 1995, "score": 0.9, "explanation": "tense"},
                {"id": "heat-1995"},  # the same item again: listed once
                {"title": "The Matrix (1999)"},
                {"id": "not-in-catalog", "title": "Matrix, The"},  # an unknown id falls back to the title
                {"title": "Nothing Like This Exists"},
            ],
            "system_version": "v2",
            "extra": "ignored",
        },
        catalog,
        list_size=10,
    )
    assert ok.text == "Try Heat." and [i.id for i in ok.items] == ["heat-1995", "the-matrix-1999"]
    assert ok.returned == 5 and ok.unmapped_count == 1 and ok.mapped_share == pytest.approx(0.8)
    assert ok.scores == {"heat-1995": 0.9} and ok.explanations == {"heat-1995": "tense"}
    assert (
        parse_response({"text": "x", "items": [{"id": i.id} for i in catalog.items[:30]]}, catalog, list_size=5).items
        == catalog.items[:5]
    )
    assert parse_response({"text": "a\x00b\x07", "items": None}, catalog).text == "ab"
    bad = [
        ([], "not a JSON object"),
        ({"items": []}, "'text' is missing"),
        ({"text": "x" * (MAX_TEXT_CHARS + 1)}, "longer than"),
        ({"text": "x", "items": {"id": "heat-1995"}}, "'items' is not a list"),
        ({"text": "x", "items": [{"id": "heat-1995"}] * (MAX_ITEMS + 1)}, "at most 100"),
        ({"text": "x", "items": ["Heat"]}, "item 1 is not an object"),
        ({"text": "x", "items": [{}]}, "neither 'id' nor 'title'"),
        ({"text": "x", "items": [{"title": "Heat", "year": "1995"}]}, "'year' must be"),
        ({"text": "x", "items": [{"title": "Heat", "score": math.nan}]}, "'score' must be a finite number"),
        ({"text": "x", "items": [{"title": "Heat", "score": True}]}, "'score' must be a finite number"),
        ({"text": "x", "items": [{"title": "x" * 400}]}, "'title' must be"),
        ({"text": "x", "system_version": 3}, "'system_version'"),
    ]
    for data, says in bad:
        with pytest.raises(InvalidResponse, match=says):
            parse_response(data, catalog)


@pytest.mark.parametrize(
    "url, says",
    [
        ("ftp://127.0.0.1/crs", "only http:// and https://"),
        ("file:///etc/passwd", "only http:// and https://"),
        ("javascript:alert(1)", "only http:// and https://"),
        ("127.0.0.1:8800/", "only http:// and https://"),
        ("http://user:secret@127.0.0.1/", "must not carry credentials"),
        ("http:///path", "no host"),
        ("", "empty"),
    ],
)
def test_only_http_urls_are_accepted(url, says):
    with pytest.raises(ValueError, match=says) as err:
        http_url(url)
    assert "secret" not in str(err.value)
    with pytest.raises(ValueError):
        RemoteConfig(id="x", label="X", url=url)


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/"  # nothing listens here once the socket is closed


def test_turns_go_round_the_workers_of_one_system(catalog):
    with FaultServer("ok") as a, FaultServer("ok") as b:
        system = remote(a.url, catalog, urls=(a.url, b.url))
        turns = [system.respond(conversation("A comedy")) for _ in range(4)]
    assert a.requests == 2 and b.requests == 2
    assert [t.metadata["worker"] for t in turns] == [1, 2, 1, 2] and {t.metadata["workers"] for t in turns} == {2}
    assert not any("127.0.0.1" in json.dumps(t.metadata) for t in turns)  # which worker, never its address


def test_a_worker_that_failed_is_skipped_for_a_while(catalog):
    with FaultServer("ok") as up:
        system = remote(closed_port_url(), catalog, urls=(up.url,), max_retries=1)
        system.workers.rest = 600  # longer than the test, whatever the machine's speed
        first = system.respond(conversation("A comedy"))
        later = [system.respond(conversation("A comedy")) for _ in range(3)]
    assert first.metadata["attempts"] == 2 and first.metadata["worker"] == 2  # the retry went to the other worker
    assert [(t.metadata["worker"], t.metadata["attempts"]) for t in later] == [(2, 1)] * 3
    assert up.requests == 4


def test_a_full_worker_is_asked_again_after_its_retry_after_without_using_a_retry(catalog):
    with FaultServer("busy:2:20") as server:
        turn = remote(server.url, catalog, max_retries=0).respond(conversation("A comedy"))
    assert server.requests == 3 and turn.items
    assert turn.metadata["attempts"] == 3 and turn.metadata["busy_waits"] == 2


def test_a_full_worker_sends_the_turn_to_the_next_one_at_once(catalog):
    slept: list[float] = []
    with FaultServer("busy:99:5000") as full, FaultServer("ok") as free:
        config = RemoteConfig(id="my_crs", label="My CRS", url=full.url, urls=(free.url,), timeout=5, max_retries=0)
        system = RemoteCRS(config, catalog, sleep=slept.append, env={})
        turns = [system.respond(conversation("A comedy")) for _ in range(3)]
    assert full.requests == 1 and free.requests == 3 and slept == []  # the full one is left alone for its 5 s
    assert turns[0].metadata["busy_waits"] == 1 and [t.metadata["worker"] for t in turns] == [2, 2, 2]


def test_a_wait_longer_than_the_deadline_fails_at_once_with_a_message(catalog):
    slept: list[float] = []
    with FaultServer("busy:9:20000") as server:  # "come back in 20 s" to a turn allowed 2 s
        config = RemoteConfig(id="my_crs", label="My CRS", url=server.url, timeout=2, max_retries=0)
        with pytest.raises(RemoteCRSError) as err:
            RemoteCRS(config, catalog, sleep=slept.append, env={}).respond(conversation("A comedy"))
    message = str(err.value)
    assert err.value.kind == "busy" and message.startswith("My CRS is busy") and "after 1 attempt" in message
    assert "127.0.0.1" not in message and server.requests == 1 and slept == []


def test_a_systems_file_entry_may_list_several_workers(tmp_path):
    from crs_backends.command_line import SystemsFileError
    from crs_backends.systems_file import load_systems_file

    path = tmp_path / "systems.toml"
    path.write_text(
        '[[system]]\nid = "kbrd_workers"\nlabel = "KBRD"\nurl = ["http://10.0.0.5:8801/", "http://10.0.0.6:8801/"]\n',
        encoding="utf-8",
    )
    (entry,) = load_systems_file(path)
    assert entry.url == "http://10.0.0.5:8801/" and entry.urls == ("http://10.0.0.5:8801/", "http://10.0.0.6:8801/")
    assert entry.remote_config().targets == entry.urls
    for value, says in (
        ("[]", "a list of 1 to 16 URLs"),
        ('["http://a:1/", "http://a:1/"]', "the same URL twice (entry 2)"),
        ('["http://a:1/", "ftp://b/"]', "'url' (entry 2): only http:// and https://"),
    ):
        path.write_text(f'[[system]]\nid = "x"\nlabel = "X"\nurl = {value}\n', encoding="utf-8")
        with pytest.raises(SystemsFileError, match=re.escape(says)):
            load_systems_file(path)
