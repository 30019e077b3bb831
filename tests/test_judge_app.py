"""The real app (`python app.py`) with the judge and the debaters on the fake OpenAI server,
driven with gradio_client: live judging in the Chat tab, bulk evaluation, settings.

The CRS stays on the embedded model; only the judge roles go to the fake. In the
rating-only judge mode (probability) a factor is one call whose log-probabilities at
the rating token give the distribution, and a debater reads the reply's JSON, so one
default reply serves both. The fake answers like a real endpoint: several tokens, top-20
alternatives per position, the rating's alternatives at the digit after <rating>.
"""

import csv
import json
import math
import time
import urllib.request

import pytest
from app_server import AppServer
from fake_openai import Error, FakeOpenAI, Held, Reply
from gradio_client import Client, handle_file

from evaluators.factors import FACTORS
from storage.conversations import save_conversation
from storage.db import open_db
from storage.records import Conversation
from ui.settings_tab import redact

SECRET = "sk-test-judge-secret-0123456789"
# 4: a rating every factor of the default rubric accepts (core-v3's Appropriateness is 4 or 0)
JUDGE_ANSWER = '{"evaluator": "x", "statement": "Fine. <rating>4</rating>", "score": 70}'
JUDGE_LOGPROBS = {"4": -0.2, "3": -1.8, "2": -3.0}
_MASS = {k: math.exp(v) for k, v in JUDGE_LOGPROBS.items()}
EXPECTED = sum(int(k) * m for k, m in _MASS.items()) / sum(_MASS.values())  # every factor's score but one:


def expected(factor_label: str) -> str:
    """The score shown for a factor: the rating's mean over its alternatives, except Appropriateness, whose levels
    under the default rubric are 4 and 0 alone (core-v3): the mass on 4 is all it reads."""
    return "4.00" if factor_label == "Appropriateness" else f"{EXPECTED:.2f}"


WAIT_ROUNDS = 1200  # polls of 0.1 s: a bound for a wait, never a timing assert


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    with FakeOpenAI() as fake:
        fake.default = Reply(JUDGE_ANSWER, at={"answer": _MASS})
        env = {
            "CRS_LLM_JUDGE_MODEL": "fake-judge",
            "CRS_LLM_JUDGE_BASE_URL": fake.base_url,
            "CRS_LLM_JUDGE_API_KEY": SECRET,
            "CRS_LLM_DEBATE_MODEL": "fake-debater",
            "CRS_LLM_DEBATE_BASE_URL": fake.base_url,
            "CRS_LLM_DEBATE_API_KEY": SECRET,
            "CRS_LLM_MAX_RETRIES": "0",
            "CRS_LLM_TIMEOUT": "20",
        }
        with AppServer(tmp_path_factory.mktemp("judge") / "app.db", env=env) as server:
            yield server, fake


def _chat(client: Client, text: str) -> str:
    *_, conversation_id, _ = client.predict(text, "chatcrs", api_name="/chat")
    assert conversation_id
    return conversation_id


def _text(content) -> str:
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return str(content)


def test_judging_streams_twelve_factors_then_the_debate_and_stores_them(app):
    server, fake = app
    client = Client(server.url, verbose=False)
    conversation_id = _chat(client, "A funny road trip movie, please")
    held = Held(Reply(JUDGE_ANSWER, at={"answer": _MASS}))  # one factor's answer waits until a partial table is seen
    fake.enqueue(held)

    def scored_per_update() -> list[int]:
        return [sum(row[2] not in ("…", "") for row in u[1]["data"]) for u in job.outputs()]

    job = client.submit(conversation_id, "probability", True, 4, api_name="/judge")
    try:
        for _ in range(WAIT_ROUNDS):  # bounded: the other eleven factors are answered at once
            if any(0 < n < len(FACTORS) for n in scored_per_update()) or job.done():
                break
            time.sleep(0.1)
        partial = scored_per_update()  # read while one factor is still unanswered: nothing here races a delay
    finally:
        held.release()
    status, factors, radar, debate = job.result()
    assert any(0 < n < len(FACTORS) for n in partial), partial  # partial tables were shown
    assert scored_per_update() == sorted(scored_per_update())
    rows = factors["data"]
    assert len(rows) == 12 and all(r[2] == expected(r[0]) for r in rows)
    assert all(r[3].startswith("0:0% 1:0% 2:") for r in rows)  # the distribution, compactly
    assert "llm:fake-judge" in status and "fake-debater" in status and "not validated" not in status
    assert "Overall 70.0/100 after 1 round, consensus reached" in status
    assert radar["type"] == "plotly" and "llm:fake-judge" in radar["plot"]

    statements = [m for m in debate if (m.get("metadata") or {}).get("title")]
    assert len(statements) == 4
    assert all(
        m["metadata"]["title"].startswith("Round 1 · ") and m["metadata"]["title"].endswith("70/100")
        for m in statements
    )
    shown = _text(statements[0]["content"])
    assert "&lt;rating&gt;" in shown and "<rating>" not in shown  # model text is escaped

    db = open_db(server.db_path)
    evaluation = db.execute(
        "select id, status, overall, rounds_used, consensus, scorer from evaluations where conversation_id = ?",
        [conversation_id],
    ).fetchone()
    assert evaluation[1:] == ("done", 70.0, 1, 1, "llm:fake-judge")
    scores = db.execute("select factor, score from factor_scores where evaluation_id = ?", [evaluation[0]]).fetchall()
    assert len(scores) == 12
    assert all(abs(s - (4.0 if f == "appropriateness" else EXPECTED)) < 1e-6 for f, s in scores)
    messages = db.execute("select count(*) from debate_messages where evaluation_id = ?", [evaluation[0]]).fetchone()
    assert messages[0] == 4


def test_a_failed_factor_is_shown_as_an_error_and_stored_without_a_score(app):
    server, fake = app
    conversation = Conversation.from_dict(_conversation("stored-earlier", "kbrd", "Heat (1995) is a fine heist film."))
    save_conversation(open_db(server.db_path), conversation)  # judged by id, as the Chat tab does
    fake.enqueue(Error(500, "judge exploded"))

    status, factors, _, _ = Client(server.url, verbose=False).predict(
        conversation.id, "probability", False, 1, api_name="/judge"
    )

    failed = [r for r in factors["data"] if r[2] == "failed"]
    assert len(failed) == 1 and "HTTP 500" in failed[0][5]
    assert all(r[2] == expected(r[0]) for r in factors["data"] if r[2] != "failed")
    assert "1 factor(s) without a score" in status and "No debate was run." in status
    rows = (
        open_db(server.db_path)
        .execute(
            "select f.score, f.error from factor_scores f join evaluations e on e.id = f.evaluation_id "
            "where e.conversation_id = ? and f.error is not null",
            [conversation.id],
        )
        .fetchall()
    )
    assert len(rows) == 1 and rows[0][0] is None


def test_judge_without_a_conversation_says_so(app):
    server, _ = app
    status, *_ = Client(server.url, verbose=False).predict("", "probability", True, 4, api_name="/judge")
    assert "no conversation to judge" in status


def _conversation(cid: str, system: str, reply: str) -> dict:
    return {
        "id": cid,
        "system_id": system,
        "turns": [
            {"role": "user", "text": "I want a heist movie."},
            {"role": "system", "text": reply, "items": [{"id": "title:Heat", "title": "Heat"}]},
        ],
    }


def test_evaluate_an_upload_gives_rows_plots_and_downloads(app, tmp_path):
    server, _ = app
    logs = tmp_path / "logs.jsonl"
    logs.write_text(
        "\n".join(
            json.dumps(c)
            for c in [
                _conversation("upload-a", "kbrd", "Try Heat (1995), a tense heist film."),
                _conversation("upload-b", "chatcrs", "You could watch Heat (1995): a classic heist."),
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    client = Client(server.url, verbose=False)

    status, table, bars, overall, files = client.predict(
        [handle_file(str(logs))], "auto", "probability", True, 2, 0, api_name="/evaluate"
    )

    assert "Evaluated **2** conversation(s): 2 complete" in status
    assert table["headers"][:5] == ["conversation_id", "system", "status", "overall", "factor_mean"]
    # uploads are anonymous: their systems live in the upload: namespace (issue #12)
    assert [r[:4] for r in table["data"]] == [
        ["upload-a", "upload:kbrd", "done", 70.0],
        ["upload-b", "upload:chatcrs", "done", 70.0],
    ]
    assert bars["type"] == "plotly" and overall["type"] == "plotly"
    by_name = {f.rsplit("/", 1)[-1]: f for f in files}
    assert set(by_name) == {"results.csv", "results.jsonl"}
    with open(by_name["results.csv"], encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [r["conversation_id"] for r in rows] == ["upload-a", "upload-b"] and rows[0]["overall"] == "70.0"
    with open(by_name["results.jsonl"], encoding="utf-8") as f:
        lines = [json.loads(line) for line in f]
    assert len(lines) == 2 and set(lines[0]["factors"]) == set(FACTORS) and lines[0]["scorer"] == "llm:fake-judge"


def test_a_malformed_upload_gives_a_clear_message(app, tmp_path):
    server, _ = app
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(_conversation("ok", "kbrd", "Heat (1995).")) + "\n{not json\n", encoding="utf-8")
    unknown = tmp_path / "mystery.json"
    unknown.write_text('{"hello": "world"}', encoding="utf-8")
    client = Client(server.url, verbose=False)

    status, *_ = client.predict([handle_file(str(bad))], "auto", "probability", True, 1, 0, api_name="/evaluate")
    assert "Could not read `bad.jsonl`" in status and "line 2" in status and "Nothing was evaluated" in status
    status, *_ = client.predict([handle_file(str(unknown))], "auto", "probability", True, 1, 0, api_name="/evaluate")
    assert "Could not read `mystery.json`" in status and "top level" in status
    assert open_db(server.db_path).execute("select count(*) from conversations where id = 'ok'").fetchone()[0] == 0


def test_settings_health_checks_each_model_and_never_shows_a_key(app):
    server, fake = app
    fake.enqueue(Error(401, "bad key"))
    client = Client(server.url, verbose=False)
    api = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    assert {"/judge", "/evaluate", "/settings_health"} <= set(api)

    health = client.predict(api_name="/settings_health")

    by_model = {row[0]: row for row in health["data"]}
    assert set(by_model) == {"embedded", "fake-judge", "fake-debater"}
    assert by_model["embedded"][3] == "ok"
    statuses = sorted(by_model[m][3] for m in ("fake-judge", "fake-debater"))
    assert statuses == ["failed", "ok"]  # the 401 went to one of them, with its message
    assert health["headers"] == ["model", "endpoint", "roles", "status", "seconds", "detail"]
    assert any("HTTP 401" in row[5] for row in health["data"])
    with urllib.request.urlopen(server.url) as page:
        html = page.read().decode()
    for shown in (json.dumps(health), json.dumps(client.config), html):
        assert SECRET not in shown
    assert "CRS_LLM_JUDGE_MODEL" in json.dumps(client.config)  # the settings table is on the page


def test_health_messages_have_keys_blanked_out():
    echoed = f"Incorrect API key provided: {SECRET}; also hf_abcdefghijkl and sk-proj-XYZ123456"
    assert redact(echoed, [SECRET]) == "Incorrect API key provided: ***; also *** and ***"
    plain = "HTTP 500 from 127.0.0.1:8080 (after 1 attempt)"
    assert redact(plain, [SECRET]) == plain
