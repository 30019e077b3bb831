"""Bad input, as a careful hostile user sends it, against the real app (`python app.py`, gradio_client).

One table: each row does one thing through the app's API and states the message the user gets and
what the database holds afterwards. Rows run in order against one app and one database file; each
row's database check compares the table counts before and after it.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from app_server import AppServer
from gradio_client import Client, handle_file

from storage.db import open_db

TABLES = ("conversations", "turns", "evaluations", "factor_scores", "battles", "votes", "leaderboard_snapshots")
PYTHON_ERRORS = re.compile(
    r"Traceback|Error\(|codec can't|maximum recursion|object has no attribute|KeyError|"
    r"TypeError|ValueError|sqlite3|File \""
)


def _text(content) -> str:
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return str(content)


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bad_input")
    with AppServer(folder / "bad.db") as server:
        server.files = folder
        # one real chat conversation, judged by the proxy: uploads must never touch it
        client = Client(server.url, verbose=False)
        client.predict("A heist thriller please", "retrieval", api_name="/chat")
        _, _, _, conversation_id, _ = client.predict("Something with Al Pacino?", "retrieval", api_name="/chat")
        client.predict(conversation_id, "probability", False, 1, "proxy", api_name="/judge")
        server.real_id = conversation_id
        yield server


def state(app) -> dict[str, Any]:
    db = open_db(app.db_path)
    try:
        counts = {t: db[t].count for t in TABLES}
        counts["board_version"] = next(db.query("select version from board_state"))["version"]
        real = list(
            db.query("select role, text from turns where conversation_id = ? order by part, idx", [app.real_id])
        )
        counts["real_turns"] = [(r["role"], r["text"]) for r in real]
        counts["real_evaluations"] = [
            (r["id"], r["status"], r["overall"])
            for r in db.query(
                "select id, status, overall from evaluations where conversation_id = ? order by id", [app.real_id]
            )
        ]
        return counts
    finally:
        db.close()


def query(app, sql: str, args=()) -> list[dict]:
    db = open_db(app.db_path)
    try:
        return list(db.query(sql, list(args)))
    finally:
        db.close()


# -- ways in -------------------------------------------------------------------------------------------


def chat(app, text, system="retrieval") -> dict:
    chat_, items, status, conversation_id, box = Client(app.url, verbose=False).predict(text, system, api_name="/chat")
    return {"msg": status, "chat": chat_, "conversation_id": conversation_id}


def raw_call(app, api: str, data: list) -> dict:
    """POST /gradio_api/call/<api> with JSON escapes as sent (``\\ud800`` stays an escape), read the result."""
    body = json.dumps({"data": data}, ensure_ascii=True).encode()
    request = urllib.request.Request(
        f"{app.url}gradio_api/call/{api}", data=body, headers={"Content-Type": "application/json"}
    )
    # quiet: each case's whole exchange takes 0.02-5 s; the bound below is 10x that or more
    with urllib.request.urlopen(request, timeout=60) as r:
        event_id = json.loads(r.read())["event_id"]
    with urllib.request.urlopen(f"{app.url}gradio_api/call/{api}/{event_id}", timeout=120) as r:
        stream = r.read().decode("utf-8", "replace")
    events = re.findall(r"event: (\w+)\ndata: (.*)", stream)
    kind, data_text = events[-1]
    payload = json.loads(data_text) if data_text.strip() not in ("", "null") else None
    if kind == "error":
        return {"msg": str(payload), "error": True}
    return {"msg": payload[2] if api == "chat" else payload[0], "data": payload}


def upload(app, name: str, content: str | bytes, fmt: str = "auto", *more: tuple[str, str | bytes]) -> dict:
    paths = []
    for file_name, data in ((name, content), *more):
        path = Path(app.files) / file_name
        path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass"))
        paths.append(handle_file(str(path)))
    try:
        status, table, *_ = Client(app.url, verbose=False).predict(
            paths, fmt, "probability", False, 1, 0, "proxy", api_name="/evaluate"
        )
    except Exception as e:  # gradio_client raises AppError for a refused request
        return {"msg": str(e), "error": True}
    return {"msg": status, "table": table}


def judge(app, conversation_id) -> dict:
    status, *_ = Client(app.url, verbose=False).predict(
        conversation_id, "probability", False, 1, "proxy", api_name="/judge"
    )
    return {"msg": status}


def conversation_line(id_: str, system: str, reply: str, *, user: str = "any heist movie?", turns=None) -> str:
    record = {
        "id": id_,
        "system_id": system,
        "turns": turns or [{"role": "user", "text": user}, {"role": "system", "text": reply}],
    }
    return json.dumps(record) + "\n"


def vote_battle(app, client: Client | None = None):
    """A battle in a fresh session with both sides answered; returns the session's client."""
    client = client or Client(app.url, verbose=False)
    client.predict("A funny film for tonight?", api_name="/arena_send")
    return client


def vote(client: Client, choice: str = "a") -> str:
    try:
        return client.predict("", api_name=f"/arena_vote_{choice}")[2]
    except Exception as e:
        return str(e)


def call(fn) -> dict:
    """The message of an API call: its status output, or the error the app answered with."""
    try:
        return {"msg": fn()}
    except Exception as e:
        return {"msg": str(e), "error": True}


def racing_votes(app) -> dict:
    client = vote_battle(app)
    results: list[str] = []
    threads = [
        threading.Thread(target=lambda c=choice: results.append(vote(client, c)))
        for choice in ("a", "b", "tie", "both_bad") * 2
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return {"msg": " | ".join(results), "results": results}


def double_vote(app) -> dict:
    client = vote_battle(app)
    first = vote(client, "a")
    return {"msg": vote(client, "b"), "first": first}


def leaderboard_reads(app) -> dict:
    client = Client(app.url, verbose=False)
    for _ in range(5):
        table, _, status, _, _ = client.predict("All", "All", None, api_name="/leaderboard")
    return {"msg": status, "table": table}


def no_user_reply_conversation(app) -> dict:
    db = open_db(app.db_path)
    try:
        from storage.conversations import save_conversation
        from storage.records import Conversation, Turn

        saved = save_conversation(db, Conversation(system_id="retrieval", turns=[Turn("user", "hello?")]))
    finally:
        db.close()
    return judge(app, saved.id)


NESTED = "[" * 10_000 + "]" * 10_000
HEAT = "Heat (1995) is great. "


def diff(before: dict, after: dict) -> dict[str, int]:
    return {t: after[t] - before[t] for t in TABLES}


def nothing_stored(before, after, result) -> bool:
    d = diff(before, after)
    return all(d[t] == 0 for t in ("conversations", "turns", "evaluations", "factor_scores", "battles", "votes"))


def real_untouched(before, after, result) -> bool:
    return before["real_turns"] == after["real_turns"] and before["real_evaluations"] == after["real_evaluations"]


def all_of(*checks):
    return lambda before, after, result: all(c(before, after, result) for c in checks)


def added(**expected: int):
    def check(before, after, result):
        d = diff(before, after)
        return all(d[t] == n for t, n in expected.items())

    return check


def stored_text(app, contains: str):
    def check(before, after, result):
        rows = query(app, "select text from turns order by id desc limit 4")
        return any(contains in r["text"] for r in rows)

    return check


@dataclass
class Case:
    name: str
    action: Callable[[Any], dict]
    message: str  # regular expression the user's message must match (case-insensitive)
    db: Callable[..., bool]


def cases(app) -> list[Case]:
    real = app.real_id
    return [
        # -- chat -----------------------------------------------------------------------------------------
        Case("empty chat", lambda a: chat(a, ""), r"empty message", nothing_stored),
        Case("whitespace chat", lambda a: chat(a, "  \n\t "), r"empty message", nothing_stored),
        Case("zero-width chat", lambda a: chat(a, "\u200b\u200b\ufeff"), r"empty message", nothing_stored),
        Case(
            "lone surrogate chat (raw JSON)",
            lambda a: raw_call(a, "chat", ["movie \ud800 please", "retrieval"]),
            r"could not be stored and were replaced",
            all_of(added(conversations=1, turns=2), stored_text(app, "movie \ufffd please")),
        ),
        Case(
            "control characters in chat",
            lambda a: chat(a, "a\x07b\x1bc heist movie"),
            r"could not be stored",
            all_of(added(turns=2), stored_text(app, "abc heist movie")),
        ),
        Case(
            "huge chat message",
            lambda a: chat(a, "heist " * 50_000),
            r"only the first 4,000 were sent",
            lambda b, af, r: (
                added(turns=2)(b, af, r)
                and any(len(x["text"]) == 4000 for x in query(app, "select text from turns order by id desc limit 2"))
            ),
        ),
        Case(
            "HTML in chat",
            lambda a: chat(a, '<script>alert(1)</script><img src=x onerror="alert(2)"> thriller?'),
            r"^$",
            lambda b, af, r: (
                added(turns=2)(b, af, r)
                and "<script>" not in _text(r["chat"][0]["content"])
                and "&lt;script&gt;" in _text(r["chat"][0]["content"])
            ),
        ),
        Case(
            "markdown injection in chat",
            lambda a: chat(a, "![x](http://127.0.0.1:9/x.png) [click](javascript:alert(1))"),
            r"^$",
            lambda b, af, r: added(turns=2)(b, af, r) and not re.search(r"(?<!\\)\]\(", _text(r["chat"][0]["content"])),
        ),
        Case(
            "odd Unicode chat",
            lambda a: chat(a, "\u202efilm\u202c 🎬 e\u0301te\u0301 映画 please"),
            r"^$",
            all_of(added(turns=2), stored_text(app, "🎬 e\u0301te\u0301 映画")),
        ),
        Case(
            "unknown system",
            lambda a: raw_call(a, "chat", ["a comedy", "no-such-system"]),
            r"unknown system|not in the list|value",
            nothing_stored,
        ),
        # -- judge ----------------------------------------------------------------------------------------
        Case("judge unknown id", lambda a: judge(a, "does-not-exist"), r"no conversation with the id", nothing_stored),
        Case("judge empty id", lambda a: judge(a, ""), r"chat first", nothing_stored),
        Case(
            "judge surrogate id (raw JSON)",
            lambda a: raw_call(a, "judge", ["x\ud800", "probability", False, 1, "proxy"]),
            r"no conversation with the id",
            nothing_stored,
        ),
        Case(
            "judge a conversation without a reply",
            no_user_reply_conversation,
            r"no system reply",
            added(conversations=1, evaluations=0),
        ),
        # -- uploads --------------------------------------------------------------------------------------
        Case(
            "upload with the id of a real conversation",
            lambda a: upload(a, "collide.jsonl", conversation_line(real, "kbrd", "Heat (1995) is the best film ever.")),
            r"already taken by other conversations and got new ids",
            all_of(
                real_untouched,
                added(conversations=1, evaluations=1),
                lambda b, af, r: (
                    query(
                        app,
                        "select count(*) as n from conversations where id like ? and "
                        "system_id = 'upload:kbrd' and source = 'upload'",
                        [real + "~%"],
                    )[0]["n"]
                    == 1
                ),
            ),
        ),
        Case(
            "upload with script as system id",
            lambda a: upload(
                a, "xss.jsonl", conversation_line("x1", "<img src=x onerror=alert(1)>", "Try Heat (1995).")
            ),
            r"upload refused.*system id",
            nothing_stored,
        ),
        Case(
            "upload with a 300-character system id",
            lambda a: upload(a, "long.jsonl", conversation_line("x2", "k" * 300, "Try Heat (1995).")),
            r"upload refused.*1–40",
            nothing_stored,
        ),
        Case(
            "same upload three times with changed ids",
            lambda a: [
                upload(a, f"again{k}.jsonl", conversation_line(f"again-{k}", "kbrd", "Heat (1995)! Great!"))
                for k in range(3)
            ][-1],
            r"evaluated \*\*1\*\*",
            lambda b, af, r: (
                added(conversations=3)(b, af, r)
                and real_untouched(b, af, r)
                and not any("upload:" in str(row) for row in leaderboard_reads(app)["table"]["data"])
            ),
        ),
        Case(
            "upload of a 5 MB line",
            lambda a: upload(a, "heat.jsonl", conversation_line("heat", "kbrd", HEAT * 238_000)),
            r"could not read.*lines of at most 1 MB",
            nothing_stored,
        ),
        Case(
            "upload of a 20,000-character turn",
            lambda a: upload(a, "turn.jsonl", conversation_line("t20k", "kbrd", HEAT * 900)),
            r"at most 10,000 characters per turn",
            nothing_stored,
        ),
        Case(
            "upload of 300 turns",
            lambda a: upload(
                a,
                "turns.jsonl",
                conversation_line(
                    "t300",
                    "kbrd",
                    "",
                    turns=[{"role": "user" if k % 2 == 0 else "system", "text": f"turn {k}"} for k in range(300)],
                ),
            ),
            r"at most 200 turns per conversation",
            nothing_stored,
        ),
        Case(
            "upload of 10,000 nested brackets (.json)",
            lambda a: upload(a, "deep.json", NESTED),
            r"could not read.*nested",
            nothing_stored,
        ),
        Case(
            "upload of 10,000 nested brackets (.jsonl)",
            lambda a: upload(a, "deep.jsonl", NESTED + "\n"),
            r"could not read.*nested",
            nothing_stored,
        ),
        Case(
            "upload of malformed JSON",
            lambda a: upload(a, "broken.jsonl", '{"id": "a", "system_id": \n'),
            r"could not read.*line 1.*one JSON object per line",
            nothing_stored,
        ),
        Case(
            "upload that is not UTF-8",
            lambda a: upload(a, "latin.jsonl", b'{"id": "\xe9\xff"}\n'),
            r"could not read.*UTF-8",
            nothing_stored,
        ),
        Case(
            "mixed upload: one good file, one bad",
            lambda a: upload(
                a,
                "good.jsonl",
                conversation_line("mixed-good", "kbrd", "Try Heat (1995)."),
                "auto",
                ("bad.jsonl", "not json\n"),
            ),
            r"could not read `bad.jsonl`",
            nothing_stored,
        ),
        Case(
            "mixed records in one file",
            lambda a: upload(a, "mixed.jsonl", conversation_line("m1", "kbrd", "Try Heat (1995).") + "[1, 2]\n"),
            r"could not read.*line 2.*JSON object",
            nothing_stored,
        ),
        Case(
            "empty upload file",
            lambda a: upload(a, "empty.jsonl", ""),
            r"no conversation with a system turn",
            nothing_stored,
        ),
        Case(
            "wrong field types",
            lambda a: upload(a, "types.jsonl", json.dumps({"system_id": 5, "turns": "abc"}) + "\n"),
            r"could not read.*expected",
            nothing_stored,
        ),
        Case(
            "surrogate escapes inside an upload",
            lambda a: upload(a, "sur.jsonl", conversation_line("sur", "kbrd", "Try Heat (1995) \ud800 now.")),
            r"evaluated \*\*1\*\*",
            all_of(added(conversations=1, evaluations=1), stored_text(app, "Heat (1995) \ufffd now")),
        ),
        Case(
            "unknown format",
            lambda a: upload(a, "fmt.jsonl", conversation_line("f", "kbrd", "Heat (1995)."), "xml"),
            r"unknown format|not in the list|value",
            nothing_stored,
        ),
        Case(
            "wrong format forced",
            lambda a: upload(a, "forced.jsonl", conversation_line("f2", "kbrd", "Heat (1995)."), "crsarena_eval"),
            r"could not read",
            nothing_stored,
        ),
        Case(
            "upload over 20 MB",
            lambda a: upload(a, "big.jsonl", conversation_line("big", "kbrd", "x") * 400_000),
            r"too large|at most 20 MB|exceeds",
            nothing_stored,
        ),
        # -- arena and the leaderboard --------------------------------------------------------------------
        Case(
            "vote without a battle",
            lambda a: {"msg": vote(Client(a.url, verbose=False), "a")},
            r"no battle yet",
            nothing_stored,
        ),
        Case(
            "empty arena message",
            lambda a: {"msg": Client(a.url, verbose=False).predict(" ", api_name="/arena_send")[2]},
            r"empty message",
            nothing_stored,
        ),
        Case(
            "double vote",
            double_vote,
            r"already has its vote",
            lambda b, af, r: added(votes=1, battles=1)(b, af, r) and "recorded" in r["first"],
        ),
        Case(
            "racing votes",
            racing_votes,
            r"already has its vote",
            lambda b, af, r: (
                added(votes=1, battles=1)(b, af, r)
                and sum("recorded" in x for x in r["results"]) == 1
                and len(r["results"]) == 8
            ),
        ),
        Case(
            "leaderboard reads write nothing",
            leaderboard_reads,
            r"votes? among",
            lambda b, af, r: diff(b, af)["leaderboard_snapshots"] == 0 and b["board_version"] == af["board_version"],
        ),
        Case(
            "leaderboard with odd filters",
            lambda a: call(
                lambda: Client(a.url, verbose=False).predict(
                    "<script>", "All", "no-such-scorer", api_name="/leaderboard"
                )[2]
            ),
            r"votes? among|not in the list",
            lambda b, af, r: diff(b, af)["leaderboard_snapshots"] == 0,
        ),
    ]


CASE_NAMES = [c.name for c in cases(type("A", (), {"real_id": "x"})())]


def test_the_table_has_at_least_thirty_cases():
    assert len(CASE_NAMES) >= 30


def settled(app, polls: int = 200) -> None:
    """Wait (bounded) until the board refresher has stored the board of the current data version: an earlier
    case's vote is snapshotted up to a second later (refreshes coalesce), and must not land in this case's window."""
    db = open_db(app.db_path)
    try:
        for _ in range(polls):
            version = next(db.query("select version from board_state"))["version"]
            stored = list(db.query("select version from leaderboard_snapshots order by id desc limit 1"))
            if stored and stored[0]["version"] == version:
                return
            time.sleep(0.05)
    finally:
        db.close()


@pytest.mark.parametrize("name", CASE_NAMES)
def test_bad_input(app, name):
    case = next(c for c in cases(app) if c.name == name)
    settled(app)
    before = state(app)
    result = case.action(app)
    after = state(app)
    message = str(result.get("msg") or "")
    assert re.search(case.message, message, re.IGNORECASE | re.DOTALL), f"{name}: message was {message!r}"
    assert not PYTHON_ERRORS.search(message), f"{name}: Python error text reached the user: {message!r}"
    assert case.db(before, after, result), f"{name}: database afterwards {diff(before, after)}"
    assert real_untouched(before, after, result), f"{name}: the real conversation changed"
    log = Path(app.log_path).read_text(errors="replace")
    assert "sk-" not in log
