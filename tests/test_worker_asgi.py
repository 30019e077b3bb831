"""The worker on FastAPI and uvicorn (``crs_backends/worker.py``), over real HTTP on 127.0.0.1: health that waits for
the model, Prometheus metrics, back-pressure (503 with Retry-After, never an unbounded queue) and the app's client
honouring it, bad input answered with a sentence (400, 401, 413, 500: never a traceback), a slow worker past the
client's deadline, a graceful stop on SIGTERM and a worker killed mid-turn (both in their own process)."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner

from catalog.catalog import get_catalog
from crs_backends import __main__ as command_line
from crs_backends import worker
from crs_backends.base import CRSSystem, SystemInfo
from crs_backends.registry import SystemUnavailable
from crs_backends.remote_crs import RemoteConfig, RemoteCRS, RemoteCRSError
from crs_backends.session import ChatSession, UserMessage
from crs_backends.worker import WorkerError, WorkerServer
from storage.conversations import get_conversation
from storage.db import get_db
from storage.records import Conversation, Turn

ROOT = Path(__file__).resolve().parent.parent
KEY = "sk-worker-asgi-3f9a1c"
TURN = {"protocol": "crs-arena/1", "request_id": "r1", "turns": [{"role": "user", "text": "A heist film?"}]}
# generous upper bounds for things that take well under a second on a quiet machine (never asserted as times)
WAIT_S = 60.0


class GatedSystem(CRSSystem):
    """Answers with three popular titles once ``gate`` is open, so a test can hold turns in flight."""

    def __init__(self, gate: threading.Event | None = None, *, fail: bool = False):
        self.gate = gate or threading.Event()
        if gate is None:
            self.gate.set()
        self.fail = fail
        self.catalog = get_catalog("bundled")

    @property
    def info(self) -> SystemInfo:
        return SystemInfo(id="gated", label="Gated", variant="a test system")

    def respond(self, conversation: Conversation) -> Turn:
        if not self.gate.wait(WAIT_S):
            raise RuntimeError("the gate never opened")
        if self.fail:
            raise RuntimeError("secret internal detail at /srv/models/kbrd.pt")
        return Turn("system", "Try these.", items=[i.ref() for i in self.catalog.popular(3)])


def call(url: str, data: bytes | None = None, headers: dict | None = None, timeout: float = WAIT_S):
    """(status, headers, body) of one request; HTTP errors are answers too."""
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def post(url: str, payload=TURN, headers: dict | None = None):
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return call(url, data, {"Content-Type": "application/json", **(headers or {})})


def until(condition, what: str) -> None:
    """Wait (bounded) until ``condition()`` holds."""
    end = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > end:
            pytest.fail(f"waited {WAIT_S:g} s for {what}")
        time.sleep(0.02)


def in_background(function, *args):
    """Run ``function(*args)`` in a thread; the returned list gets its result (or the exception it raised)."""
    out: list = []

    def run():
        try:
            out.append(function(*args))
        except Exception as e:  # the test looks at it
            out.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def metric(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        match = re.match(r"^([a-z_]+)(?:\{([^}]*)\})? (\S+)$", line)
        if match and match.group(1) == name:
            have = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
            if all(have.get(k) == v for k, v in labels.items()):
                return float(match.group(3))
    raise AssertionError(f"no {name} {labels} in the metrics")


def test_health_waits_for_the_model_and_metrics_count_what_happened():
    gate = threading.Event()

    def load():
        assert gate.wait(WAIT_S)
        return GatedSystem()

    server = WorkerServer(load, "gated", name="gated-1").start(wait=False)
    try:
        status, _, body = call(server.url + "health")
        assert status == 503 and json.loads(body) == {"ok": False, "status": "loading", "system": "gated"}
        status, headers, body = post(server.url)
        assert status == 503 and int(headers["Retry-After"]) >= 1 and "still loading" in json.loads(body)["error"]
        gate.set()
        server.wait_ready()
        status, _, body = call(server.url + "health")
        assert status == 200 and json.loads(body)["ok"] is True and json.loads(body)["status"] == "ready"
        for _ in range(3):
            status, headers, body = post(server.url)
            assert status == 200 and headers["X-CRS-Worker"] == "gated-1" and "crs;dur=" in headers["Server-Timing"]
        assert post(server.url, b"{not json")[0] == 400
        status, headers, body = call(server.url + "metrics")
    finally:
        server.stop()
    text = body.decode()
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    for line in text.splitlines():  # the exposition format: comments, or "name{labels} value"
        assert line.startswith(("# HELP ", "# TYPE ")) or re.match(r"^[a-z_]+(\{[^}]*\})? [-+0-9.eInf]+$", line), line
    assert metric(text, "crs_worker_requests_total", code="200") == 3
    assert metric(text, "crs_worker_requests_total", code="400") == 1
    assert metric(text, "crs_worker_requests_total", code="503") == 1  # the turn sent while loading
    assert metric(text, "crs_worker_turn_seconds_count") == 3
    assert metric(text, "crs_worker_turn_seconds_bucket", le="+Inf") == 3
    assert metric(text, "crs_worker_in_flight") == 0 and metric(text, "crs_worker_ready") == 1
    assert metric(text, "crs_worker_model_load_seconds") > 0
    assert metric(text, "crs_worker_errors_total") == 0 and metric(text, "crs_worker_rejected_total") == 0


def test_a_system_that_cannot_load_stops_the_worker_with_its_reason():
    def load():
        raise SystemUnavailable("KBRD has no checkpoint here: run crs-arena checkpoints fetch")

    with pytest.raises(WorkerError, match="gated cannot be served: KBRD has no checkpoint here"):
        WorkerServer(load, "gated").start()


def test_bad_input_gets_a_sentence_never_a_traceback():
    failing = WorkerServer(GatedSystem(fail=True), "failing")
    with WorkerServer(GatedSystem(), "gated", key=KEY) as server, failing:
        auth = {"Authorization": f"Bearer {KEY}"}
        answers = {
            "no key": post(server.url),
            "wrong key": post(server.url, headers={"Authorization": "Bearer sk-guess"}),
            "not JSON": post(server.url, b"{'turns': [", auth),
            "not UTF-8": post(server.url, b"\xff\xfe{}", auth),
            "an array": post(server.url, b"[1, 2]", auth),
            "turns not a list": post(server.url, {"turns": "hello"}, auth),
            "a bad turn": post(server.url, {"turns": [{"role": "robot", "text": 3}]}, auth),
            "bad items": post(server.url, {"turns": [{"role": "system", "text": "x", "items": ["Heat"]}]}, auth),
            "a GET": call(server.url),
            "a failing system": post(failing.url),
        }
        expected = {"no key": 401, "wrong key": 401, "a GET": 405, "a failing system": 500}
        for what, (status, _headers, body) in answers.items():
            message = json.loads(body)["error"]
            assert status == expected.get(what, 400), (what, status, body)
            assert message and "Traceback" not in message and "secret" not in message and KEY not in message, what
        assert "must be JSON" in json.loads(answers["not JSON"][2])["error"]
        assert "turn 1 must be an object" in json.loads(answers["a bad turn"][2])["error"]
        assert "the system failed to answer" in json.loads(answers["a failing system"][2])["error"]
        host, port = urlsplit(server.url).hostname, urlsplit(server.url).port
        # announced too large: refused on the header, the body never read
        connection = http.client.HTTPConnection(host, port, timeout=WAIT_S)
        connection.putrequest("POST", "/")
        connection.putheader("Content-Length", str(worker.MAX_REQUEST_BYTES + 1))
        connection.putheader("Authorization", f"Bearer {KEY}")
        connection.endheaders()
        response = connection.getresponse()
        assert response.status == 413 and "at most 1,000,000 bytes" in json.loads(response.read())["error"]
        connection.close()
        # too large without a length (chunked): read up to the limit, then refused
        connection = http.client.HTTPConnection(host, port, timeout=WAIT_S)
        chunks = (b" " * 65536 for _ in range(worker.MAX_REQUEST_BYTES // 65536 + 2))
        try:
            connection.request("POST", "/", body=chunks, headers={"Transfer-Encoding": "chunked"}, encode_chunked=True)
        except OSError:  # the worker may close before the client has sent it all
            pass
        response = connection.getresponse()
        assert response.status == 413
        connection.close()
        assert post(server.url, headers=auth)[0] == 200  # and the worker still serves


def test_a_flood_beyond_the_limit_gets_503_and_the_worker_serves_again_after():
    gate = threading.Event()
    with WorkerServer(GatedSystem(gate), "gated", concurrency=1, queue=1) as server:
        held = [in_background(post, server.url) for _ in range(2)]  # one answering, one waiting
        until(lambda: server.state.metrics.in_flight == 1 and server.state.metrics.queued == 1, "two turns admitted")
        flood = [post(server.url) for _ in range(6)]
        for status, headers, body in flood:
            assert status == 503 and int(headers["Retry-After"]) >= 1 and int(headers["retry-after-ms"]) > 0
            assert "try again" in json.loads(body)["error"]
        assert call(server.url + "health")[0] == 200  # up all along
        gate.set()
        for thread, out in held:
            thread.join(WAIT_S)
            assert out[0][0] == 200
        assert post(server.url)[0] == 200
        text = call(server.url + "metrics")[2].decode()
    assert metric(text, "crs_worker_rejected_total") == 6 and metric(text, "crs_worker_requests_total", code="200") == 3


def remote(url: str, **config) -> RemoteCRS:
    return RemoteCRS(RemoteConfig(id="gated", label="Gated", url=url, **config), get_catalog("bundled"), env={})


def test_the_app_waits_out_a_full_worker_within_its_deadline():
    gate = threading.Event()
    with WorkerServer(GatedSystem(gate), "gated", concurrency=1, queue=0, name="gated-1") as server:
        holder, _ = in_background(post, server.url)
        until(lambda: server.state.metrics.in_flight == 1, "a turn in flight")
        system = remote(server.url, timeout=WAIT_S, max_retries=0)  # no retries: waiting for room is not a retry
        thread, out = in_background(system.respond, Conversation(system_id="gated", turns=[Turn("user", "Hi")]))
        until(lambda: server.state.metrics.rejected >= 1, "the app's turn refused once")
        gate.set()
        thread.join(WAIT_S)
        holder.join(WAIT_S)
    turn = out[0]
    assert isinstance(turn, Turn) and turn.items, turn
    assert turn.metadata["busy_waits"] >= 1 and turn.metadata["attempts"] == turn.metadata["busy_waits"] + 1
    assert turn.metadata["worker_name"] == "gated-1"


def test_a_worker_slower_than_the_deadline_times_out_and_keeps_serving():
    gate = threading.Event()
    with WorkerServer(GatedSystem(gate), "gated") as server:
        with pytest.raises(RemoteCRSError) as err:
            remote(server.url, timeout=0.5, max_retries=0).respond(
                Conversation(system_id="gated", turns=[Turn("user", "Hi")])
            )
        assert err.value.kind == "timeout" and "did not answer within 0.5 s" in str(err.value)
        gate.set()
        assert post(server.url)[0] == 200


def start_process(*args: str) -> tuple[subprocess.Popen, str]:
    """A worker process (``tests/worker_process.py`` or the command) and its URL, once it answers /health."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "CRS_NEURAL_BUILD": "never"}
    proc = subprocess.Popen(
        [sys.executable, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    found = re.search(r"http://127\.0\.0\.1:\d+/", first)
    if not found:
        proc.kill()
        pytest.fail(f"no URL from the worker: {first!r} {proc.stderr.read() if proc.stderr else ''}")
    url = found.group(0)

    def ready() -> bool:
        try:
            return call(url + "health", timeout=5)[0] == 200
        except OSError:
            return False

    until(ready, "the worker's /health")
    return proc, url


def refused(url: str) -> bool:
    """Whether a new turn is refused: no connection, or 503."""
    try:
        return post(url)[0] == 503
    except OSError:
        return True


def test_sigterm_finishes_the_turn_in_flight_refuses_new_ones_and_exits_0():
    proc, url = start_process("tests/worker_process.py", "--delay", "3", "--name", "slow-1")
    try:
        thread, out = in_background(post, url)
        until(lambda: metric(call(url + "metrics")[2].decode(), "crs_worker_in_flight") == 1, "a turn in flight")
        proc.send_signal(signal.SIGTERM)
        until(lambda: refused(url), "new turns refused")
        thread.join(WAIT_S)
        stdout, stderr = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    status, headers, body = out[0]
    assert status == 200 and json.loads(body)["items"] and headers["X-CRS-Worker"] == "slow-1"
    assert proc.returncode == 0 and "stopped" in stdout and "Traceback" not in stderr, stderr[-2000:]


def test_a_worker_killed_mid_turn_fails_the_turn_cleanly(db_path):
    proc, url = start_process("tests/worker_process.py", "--delay", "30")
    try:
        session = ChatSession(remote(url, timeout=WAIT_S, max_retries=1), db_path=db_path)
        thread, out = in_background(lambda: list(session.send(UserMessage("A heist film?"))))
        until(lambda: metric(call(url + "metrics")[2].decode(), "crs_worker_in_flight") == 1, "a turn in flight")
        proc.kill()
        thread.join(WAIT_S)
    finally:
        proc.kill()
        proc.communicate()
    error = out[0]
    assert isinstance(error, RemoteCRSError) and error.kind == "connection", error
    assert str(error).startswith("Gated could not be reached") and "127.0.0.1" not in str(error)
    stored = get_conversation(get_db(db_path), session.conversation.id)
    assert [t.role for t in stored.turns] == ["user"]  # the person's message kept, no half answer
    assert "could not be reached" in stored.metadata["last_error"] and "Traceback" not in stored.metadata["last_error"]


def test_crs_arena_serve_starts_answers_and_stops_on_sigterm():
    proc, url = start_process("commands.py", "serve", "retrieval", "--port", "0", "--name", "retrieval-1")
    try:
        status, headers, body = post(url)
        assert status == 200 and headers["X-CRS-Worker"] == "retrieval-1" and json.loads(body)["items"]
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0 and "retrieval worker stopped" in stdout and "Traceback" not in stderr


def test_serve_refuses_an_unknown_system_and_a_missing_key_variable(monkeypatch):
    monkeypatch.delenv("NO_SUCH_WORKER_KEY", raising=False)
    unknown = CliRunner().invoke(command_line.cli, ["serve", "nope", "--port", "0"])
    assert unknown.exit_code == 2 and "unknown system 'nope'" in unknown.output
    no_key = CliRunner().invoke(
        command_line.cli, ["serve", "retrieval", "--port", "0", "--key-env", "NO_SUCH_WORKER_KEY"]
    )
    assert no_key.exit_code == 2 and "NO_SUCH_WORKER_KEY: that variable is not set" in no_key.output


def test_the_commands_defaults_are_the_workers():
    assert command_line.DEFAULT_CONCURRENCY == worker.DEFAULT_CONCURRENCY
    assert command_line.DEFAULT_QUEUE == worker.DEFAULT_QUEUE
    assert command_line.DEFAULT_GRACE_S == worker.DEFAULT_GRACE_S
