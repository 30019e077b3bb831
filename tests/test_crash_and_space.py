"""Crashes and Space start: the real app killed with SIGKILL mid-judgement and restarted on the same
file; the app started as a Hugging Face Space does it; configuration mistakes refused at start."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from app_server import ROOT, AppServer
from click.testing import CliRunner
from fake_openai import Delay, FakeOpenAI, Reply
from gradio_client import Client

from commands import cli
from evaluators.factors import FACTORS
from storage.conversations import save_conversation
from storage.db import get_db, open_db
from storage.evaluations import save_factor_score, start_evaluation
from storage.records import Conversation, Evaluation, FactorScore, Turn

# 4: a rating every factor of the default rubric accepts (core-v3's Appropriateness is 4 or 0)
JUDGE_ANSWER = '{"evaluator": "x", "statement": "Fine. <rating>4</rating>", "score": 70}'
JUDGE_LOGPROBS = {"4": -0.2, "3": -1.8, "2": -3.0}


def _rows(db_path, sql, args=()):
    db = open_db(db_path)
    try:
        return list(db.query(sql, list(args)))
    finally:
        db.close()


def test_kill_9_during_a_judgement_then_restart_and_resume(tmp_path):
    db_path = tmp_path / "crash.db"
    with FakeOpenAI() as fake:
        fake.default = Reply(JUDGE_ANSWER, logprobs=JUDGE_LOGPROBS)
        env = {
            "CRS_LLM_JUDGE_MODEL": "fake-judge",
            "CRS_LLM_JUDGE_BASE_URL": fake.base_url,
            "CRS_LLM_JUDGE_API_KEY": "sk-test-crash-0000",
            "CRS_LLM_MAX_RETRIES": "0",
            "CRS_LLM_TIMEOUT": "60",
        }
        server = AppServer(db_path, env=env)
        with server:
            client = Client(server.url, verbose=False)
            *_, conversation_id, _ = client.predict("A heist thriller please", "retrieval", api_name="/chat")
            # four factors answer at once, the other eight hang until the app is killed
            fake.enqueue(
                *[Reply(JUDGE_ANSWER, logprobs=JUDGE_LOGPROBS)] * 4,
                *[Delay(60, Reply(JUDGE_ANSWER, logprobs=JUDGE_LOGPROBS))] * 8,
            )
            client.submit(conversation_id, "probability", False, 1, "llm", api_name="/judge")
            # quiet: the judging starts within a few seconds (the whole test: 17 s); the bound below is 10x that or more
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                scored = _rows(db_path, "select count(*) as n from factor_scores")[0]["n"]
                if scored >= 4:
                    break
                time.sleep(0.2)
            assert scored == 4
            os.kill(server.proc.pid, signal.SIGKILL)  # mid-judgement: 4 factors stored, 8 in flight
            server.proc.wait(10)
        evaluation = _rows(db_path, "select id, status from evaluations")
        assert [e["status"] for e in evaluation] == ["running"]
        assert _rows(db_path, "pragma integrity_check")[0]["integrity_check"] == "ok"
        before = {r["factor"]: (r["id"], r["score"]) for r in _rows(db_path, "select * from factor_scores")}

        with fake._lock:
            fake._queue.clear()  # the hung answers died with the app
        with AppServer(db_path, env=env) as server:
            assert _rows(db_path, "select status from evaluations")[0]["status"] == "interrupted"
            client = Client(server.url, verbose=False)
            shown = client.predict(api_name="/interrupted")
            assert "1 evaluation(s) interrupted" in shown and "4/12 factors" in shown
            calls_before = len(fake.requests)
            result = client.predict(api_name="/resume_interrupted")
            assert "1 interrupted evaluation(s) resumed" in result and "No interrupted evaluations" in result
            assert len(fake.requests) - calls_before == 8  # only the gaps were judged
        rows = _rows(db_path, "select * from factor_scores order by factor")
        assert sorted(r["factor"] for r in rows) == sorted(FACTORS)  # each factor once: no duplicates
        assert {r["factor"]: (r["id"], r["score"]) for r in rows if r["factor"] in before} == before
        assert _rows(db_path, "select status from evaluations")[0]["status"] == "done"
        assert _rows(db_path, "pragma integrity_check")[0]["integrity_check"] == "ok"


def test_the_command_line_resumes_an_interrupted_proxy_evaluation(db_path):
    db = get_db(db_path)
    conversation = save_conversation(
        db,
        Conversation(
            system_id="kbrd",
            source="import",
            turns=[Turn("user", "a heist movie?"), Turn("system", "Try Heat (1995), a tense crime thriller.")],
        ),
    )
    from evaluators.scorer_setup import build_setup

    setup = build_setup(db_path=db_path, scorer="proxy")
    evaluation = start_evaluation(
        db,
        Evaluation(
            conversation_id=conversation.id, scorer="proxy", config=setup.describe(), fingerprint=setup.fingerprint()
        ),
    )
    save_factor_score(db, evaluation.id, FactorScore("coherence", 4.0, "proxy", "core-1"))
    result = CliRunner().invoke(cli, ["resume", "--db", str(db_path)])
    assert result.exit_code == 0 and "no interrupted evaluation" in result.output  # running is not touched
    result = CliRunner().invoke(cli, ["resume", "--include-running", "--db", str(db_path)])
    assert result.exit_code == 0, result.output
    assert "1 interrupted evaluation(s) resumed" in result.output
    rows = list(db.query("select factor from factor_scores where evaluation_id = ?", [evaluation.id]))
    assert sorted(r["factor"] for r in rows) == sorted(FACTORS)
    assert db["evaluations"].get(evaluation.id)["status"] == "done" and db["evaluations"].count == 1


def test_space_start_with_a_persistent_data_folder(tmp_path):
    """As a Space starts it: SPACE_ID and SYSTEM set, no CRS_ARENA_DB, a writable /data-like folder."""
    data = tmp_path / "data"
    data.mkdir()
    env = {
        "SPACE_ID": "someone/crs-arena",
        "SYSTEM": "spaces",
        "CRS_ARENA_DB": "",
        "CRS_ARENA_PERSISTENT_DIR": str(data),
    }
    with AppServer(tmp_path / "space.db", env=env) as server:
        chat, items, status, conversation_id, _ = Client(server.url, verbose=False).predict(
            "A space adventure please", "retrieval", api_name="/chat"
        )
        assert chat[-1]["role"] == "assistant" and items["data"]
    assert (data / "crs_arena.db").exists() and not (tmp_path / "space.db").exists()
    turns = _rows(data / "crs_arena.db", "select role from turns where conversation_id = ?", [conversation_id])
    assert [t["role"] for t in turns] == ["user", "system"]


def _start(env: dict, tmp_path) -> subprocess.CompletedProcess:
    full = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CRS_LLM_")},
        "CRS_NEURAL_BUILD": "never",
        "HF_HUB_OFFLINE": "1",
        "GRADIO_SERVER_PORT": "1",
        **env,
    }
    # quiet: 5 s (importing the app in a fresh interpreter); the bound below is 10x that or more
    return subprocess.run(
        [sys.executable, "-c", "import app"], cwd=ROOT, env=full, capture_output=True, text=True, timeout=120
    )


def test_a_database_in_a_missing_folder_is_refused_at_start(tmp_path):
    missing = tmp_path / "nonexistent" / "dir" / "x.db"
    done = _start({"CRS_ARENA_DB": str(missing)}, tmp_path)
    assert done.returncode == 2
    assert "CRS_ARENA_DB" in done.stderr and "does not exist" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "nonexistent").exists()


def test_an_endpoint_without_a_model_uses_the_listed_one_or_is_refused(tmp_path, fake_openai):
    from ui.startup import ConfigError, resolve_endpoint_models

    env = {"CRS_LLM_BASE_URL": fake_openai.base_url, "CRS_LLM_API_KEY": "sk-test-x"}
    notices = resolve_endpoint_models(env)
    assert env["CRS_LLM_MODEL"] == "fake-model" and "fake-model" in notices[0] and "sk-test" not in notices[0]
    with pytest.raises(ConfigError, match="CRS_LLM_MODEL"):
        resolve_endpoint_models({"CRS_LLM_BASE_URL": "http://127.0.0.1:9/v1"})
    done = _start(
        {
            "CRS_ARENA_DB": str(tmp_path / "x.db"),
            "CRS_LLM_BASE_URL": "http://127.0.0.1:9/v1",
            "CRS_LLM_API_KEY": "sk-test-secret-1",
        },
        tmp_path,
    )
    assert done.returncode == 2 and "CRS_LLM_MODEL" in done.stderr and "sk-test-secret-1" not in done.stderr


def test_bulk_uploads_cannot_starve_live_judging(tmp_path):
    """Two uploads judged by a slow LLM judge hold the bulk queue; a proxy judgement from the Chat
    tab must still come back at once (they used to share two slots: it waited 44 s)."""
    from gradio_client import handle_file

    with FakeOpenAI() as fake:
        fake.default = Delay(20, Reply(JUDGE_ANSWER, logprobs=JUDGE_LOGPROBS))  # every judge call is slow
        env = {
            "CRS_LLM_JUDGE_MODEL": "fake-judge",
            "CRS_LLM_JUDGE_BASE_URL": fake.base_url,
            "CRS_LLM_JUDGE_API_KEY": "sk-test-slow-0000",
            "CRS_LLM_MAX_RETRIES": "0",
            "CRS_LLM_TIMEOUT": "60",
        }
        with AppServer(tmp_path / "starve.db", env=env) as server:
            client = Client(server.url, verbose=False)
            *_, conversation_id, _ = client.predict("A heist thriller please", "retrieval", api_name="/chat")
            jobs = []
            for k in range(2):
                path = tmp_path / f"bulk{k}.jsonl"
                path.write_text(
                    "".join(
                        json.dumps(
                            {
                                "id": f"bulk-{k}-{i}",
                                "system_id": "kbrd",
                                "turns": [
                                    {"role": "user", "text": "any heist movie?"},
                                    {"role": "system", "text": "Try Heat (1995)."},
                                ],
                            }
                        )
                        + "\n"
                        for i in range(3)
                    )
                )
                jobs.append(
                    Client(server.url, verbose=False).submit(
                        [handle_file(str(path))], "auto", "probability", False, 1, 0, "llm", api_name="/evaluate"
                    )
                )
            # quiet: the bulk judging is under way within seconds (the whole test: 11 s); bound 10x
            deadline = time.monotonic() + 120
            while len(fake.requests) < 2 and time.monotonic() < deadline:  # the bulk judging is under way
                time.sleep(0.2)
            assert fake.requests
            status, factors, *_ = client.predict(conversation_id, "probability", False, 1, "proxy", api_name="/judge")
            assert "Overall" in status and len(factors["data"]) == 12
            # it came back while the bulk judging still holds its calls (each answered after 20 s): not behind them
            assert not any(job.done() for job in jobs), "live judging waited for the bulk uploads to finish"
            for job in jobs:
                job.cancel()
