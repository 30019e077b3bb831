"""Any registered system served over the ``crs-arena/1`` protocol: a model worker on FastAPI and uvicorn.

``crs-arena serve SYSTEM`` answers the same HTTP requests a researcher's server answers (``docs/remote-crs.md``), so
the heavy systems (KBRD, BARCOR, UniCRS, ChatCRS on a big model) can run on other machines or GPUs, as several
replicas, and the app reaches them through the systems file like any remote CRS (one entry may list several worker
URLs: the app spreads its turns over them). ``docs/deploy.md`` has the Compose recipe and the load model.

What a deployment tool needs from it:

- ``POST /`` (any path): one turn. The answer carries the system's shown list as ``items``, its whole ranking (when
  it keeps one: a neural model's top 50) as the optional ``ranking`` field, and its variant as ``system_version``;
  ``Server-Timing: crs;dur=…, worker;dur=…`` gives the system's own time and the worker's (waiting and parsing
  included), ``X-CRS-Worker`` the worker's name when it was given one.
- ``GET /health``: 200 once the system is loaded (it loads and warms up after the port opens), 503 with the status
  (``loading``, ``failed``, ``draining``) before and after.
- ``GET /metrics``: requests by status, errors, a latency histogram, turns in flight and queued, the model's load
  time, in the Prometheus text format (``crs_backends/worker_metrics.py``).
- **Back-pressure**: at most ``concurrency`` turns run at once and ``queue`` more wait; beyond that a turn is
  refused at once with 503 and ``Retry-After`` (whole seconds, and ``retry-after-ms``), never queued without bound.
- **Graceful shutdown** on SIGTERM (or Ctrl-C): the turns in flight are finished (up to ``grace`` seconds), new ones
  are refused (503, ``Connection: close``, then the port closes), and the process exits with 0.
- Requests larger than :data:`MAX_REQUEST_BYTES` get 413, malformed ones 400, a missing or wrong key 401 (with
  ``--key-env NAME`` it requires ``Authorization: Bearer <the key in NAME>``; the key is read from the environment,
  never from the command line, and never logged). No Python exception text reaches a client: a system that fails
  gets a 500 with a sentence, its traceback goes to the worker's log.

Binds to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import asyncio
import errno
import hmac
import json
import logging
import math
import signal
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import FrameType
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import Response

from crs_backends.base import CRSSystem
from crs_backends.worker_metrics import CONTENT_TYPE, WorkerMetrics
from storage.records import RANKING_MAX, Conversation, ItemRef, Turn

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 1_000_000
PROTOCOL = "crs-arena/1"
DEFAULT_CONCURRENCY = 4  # turns answered at once
DEFAULT_QUEUE = 16  # turns waiting for a slot before a 503
DEFAULT_GRACE_S = 30.0  # how long a shutdown waits for the turns in flight
LOADING_RETRY_S = 5  # Retry-After while the system loads
MAX_RETRY_AFTER_S = 30.0
WORKER_NAME_CHARS = 60


class WorkerError(RuntimeError):
    """The worker cannot start (the port is taken, the system cannot load); the message says what to do."""


def conversation_from_request(request: dict[str, Any]) -> Conversation:
    """The conversation a ``crs-arena/1`` request carries. Raises ValueError when its shape is wrong."""
    turns = request.get("turns")
    if not isinstance(turns, list):
        raise ValueError("'turns' must be a list")
    parsed: list[Turn] = []
    for n, raw in enumerate(turns, 1):
        if (
            not isinstance(raw, dict)
            or raw.get("role") not in ("user", "system")
            or not isinstance(raw.get("text"), str)
        ):
            raise ValueError(f"turn {n} must be an object with 'role' (user or system) and 'text'")
        items = raw.get("items") or []
        if not isinstance(items, list) or not all(isinstance(i, dict) and "id" in i for i in items):
            raise ValueError(f"turn {n}: 'items' must be a list of objects with an 'id'")
        parsed.append(Turn(raw["role"], raw["text"], items=[ItemRef.from_dict(i) for i in items]))
    conversation = Conversation(system_id="worker", turns=parsed)
    conversation_id = request.get("conversation_id")
    if isinstance(conversation_id, str) and conversation_id:
        conversation.id = conversation_id  # the app's id, so a system that keeps state per conversation finds it
    return conversation


def answer_of(turn: Turn, system: CRSSystem, max_items: int | None = None) -> dict[str, Any]:
    """The ``crs-arena/1`` answer for a system turn."""

    def entry(ref: ItemRef) -> dict[str, str]:
        return {"id": ref.id, "title": ref.title}

    items = turn.items[:max_items] if max_items else turn.items
    out: dict[str, Any] = {
        "text": turn.text,
        "items": [entry(r) for r in items],
        "system_version": system.info.variant[:100],
    }
    if turn.ranking:
        out["ranking"] = [entry(r) for r in turn.ranking[:RANKING_MAX] if r.id]
    return out


class WorkerState:
    """What the app and the threads around it share: the system once loaded, the status, the counters."""

    def __init__(self, system_id: str, *, concurrency: int, queue: int):
        self.system_id = system_id
        self.system: CRSSystem | None = None
        self.status = "loading"  # loading | ready | failed | draining
        self.failure: str | None = None
        self.concurrency = max(1, concurrency)
        self.queue = max(0, queue)
        self.metrics = WorkerMetrics(system_id)
        self._lock = threading.Lock()
        self.admitted = 0  # turns in flight or queued
        self.turn_seconds: float | None = None  # a moving average, for Retry-After

    def admit(self) -> bool:
        """Take a place for one turn, or say there is none (in flight and queued are full)."""
        with self._lock:
            if self.admitted >= self.concurrency + self.queue:
                return False
            self.admitted += 1
            self.metrics.queued = self.admitted - self.metrics.in_flight
            return True

    def started(self) -> None:
        with self._lock:
            self.metrics.in_flight += 1
            self.metrics.queued = self.admitted - self.metrics.in_flight

    def finished(self, *, started: bool, seconds: float | None) -> None:
        with self._lock:
            self.admitted -= 1
            if started:
                self.metrics.in_flight -= 1
            self.metrics.queued = max(0, self.admitted - self.metrics.in_flight)
            if seconds is not None:
                self.turn_seconds = seconds if self.turn_seconds is None else 0.8 * self.turn_seconds + 0.2 * seconds

    def retry_after(self) -> float:
        """Seconds until a slot is likely free: a turn's recent time for each round of the queue ahead."""
        with self._lock:
            per_turn = self.turn_seconds if self.turn_seconds is not None else 1.0
            rounds = max(1, self.admitted - self.concurrency + 1) / self.concurrency
        return min(MAX_RETRY_AFTER_S, max(0.05, per_turn * rounds))


def _json(status: int, payload: dict, headers: dict[str, str] | None = None) -> Response:
    return Response(
        json.dumps(payload, ensure_ascii=False).encode("utf-8"),
        status_code=status,
        headers=headers,
        media_type="application/json; charset=utf-8",
    )


def create_app(
    state: WorkerState,
    *,
    key: str | None = None,
    name: str | None = None,
    executor: ThreadPoolExecutor | None = None,
) -> FastAPI:
    """The ASGI app of a worker around ``state`` (its system is loaded elsewhere: :class:`WorkerServer`).

    ``executor`` runs the turns (the system's ``respond`` blocks); by default one with ``state.concurrency`` threads.
    """
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    pool = executor or ThreadPoolExecutor(max_workers=state.concurrency, thread_name_prefix=f"turn-{state.system_id}")
    expected = f"Bearer {key}".encode() if key else None
    extra = {"X-CRS-Worker": name} if name else {}
    metrics = state.metrics

    def reply(status: int, payload: dict, headers: dict[str, str] | None = None) -> Response:
        metrics.answered(status)
        return _json(status, payload, {**extra, **(headers or {})})

    def busy(message: str, seconds: float, *, close: bool = False) -> Response:
        headers = {"Retry-After": str(max(1, math.ceil(seconds))), "retry-after-ms": str(int(seconds * 1000))}
        if close:
            headers["Connection"] = "close"
        return reply(503, {"error": message}, headers)

    async def not_here(request: Request, exc: Exception) -> Response:  # a path or method the worker does not serve
        message = f"POST a {PROTOCOL} request to this server (or GET /health, /metrics)"
        return _json(getattr(exc, "status_code", 404), {"error": message}, getattr(exc, "headers", None))

    app.add_exception_handler(404, not_here)
    app.add_exception_handler(405, not_here)

    @app.exception_handler(Exception)
    async def failure(request: Request, exc: Exception) -> Response:  # the log has it; the client gets a sentence
        log.error("worker %s: unexpected %s", state.system_id, type(exc).__name__)
        return _json(500, {"error": "the worker failed on this request (its log has the details)"})

    @app.get("/health")
    async def health() -> Response:
        if state.status == "ready" and state.system is not None:
            return _json(
                200,
                {
                    "ok": True,
                    "status": "ready",
                    "system": state.system_id,
                    "system_version": state.system.info.variant[:100],
                    "in_flight": metrics.in_flight,
                    "queued": metrics.queued,
                },
            )
        return _json(503, {"ok": False, "status": state.status, "system": state.system_id})

    @app.get("/metrics")
    async def prometheus() -> Response:
        metrics.ready = state.status == "ready"
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    async def turn(request: Request) -> Response:
        start = time.perf_counter()
        announced = request.headers.get("content-length")
        too_large = {"error": f"the request must be at most {MAX_REQUEST_BYTES:,} bytes"}
        if announced is not None and (not announced.strip().isdigit() or int(announced) > MAX_REQUEST_BYTES):
            return reply(413, too_large, {"Connection": "close"})  # the body is never read
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_REQUEST_BYTES:
                return reply(413, too_large, {"Connection": "close"})
        given = (request.headers.get("authorization") or "").encode()
        if expected is not None and not hmac.compare_digest(given, expected):
            return reply(401, {"error": "a valid key is required"})
        system = state.system
        if state.status == "draining":
            return busy("the worker is shutting down; send this turn to another worker", 1.0, close=True)
        if state.status == "failed":
            return reply(503, {"error": "the system could not be loaded (the worker's log has the details)"})
        if state.status != "ready" or system is None:
            return busy("the system is still loading; try again shortly", LOADING_RETRY_S)
        try:
            data = json.loads(bytes(body))
            if not isinstance(data, dict):
                raise ValueError("the body must be a JSON object")
            conversation = conversation_from_request(data)
        except (ValueError, UnicodeDecodeError) as e:
            message = str(e) if isinstance(e, ValueError) and not isinstance(e, json.JSONDecodeError) else ""
            return reply(400, {"error": message or "the body must be JSON"})
        max_items = data.get("max_items")
        max_items = (
            max_items if isinstance(max_items, int) and not isinstance(max_items, bool) and max_items > 0 else None
        )
        if not state.admit():
            metrics.reject()
            return busy(
                f"the worker is answering {state.concurrency} turns and {state.queue} more are waiting; try again "
                "shortly, or another worker",
                state.retry_after(),
            )
        started = [False]
        own = [0.0]  # the system's own time, in the thread

        def answer() -> Turn:
            started[0] = True
            state.started()
            began = time.perf_counter()
            try:
                return system.respond(conversation)
            finally:
                own[0] = time.perf_counter() - began

        seconds = None
        try:
            result = await asyncio.get_running_loop().run_in_executor(pool, answer)
            seconds = time.perf_counter() - start
        except Exception:  # the details stay in the worker's log; the app shows its own message
            log.exception("%s failed to answer request %r", state.system_id, str(data.get("request_id"))[:64])
            metrics.failed()
            return reply(500, {"error": "the system failed to answer (the worker's log has the details)"})
        finally:
            state.finished(started=started[0], seconds=seconds)
        metrics.observe(seconds)
        # the system's own time (the app stores it beside its latency), and the worker's, queue and parsing included
        timing = {"Server-Timing": f"crs;dur={own[0] * 1000:.2f}, worker;dur={seconds * 1000:.2f}"}
        return reply(200, answer_of(result, system, max_items), timing)

    app.add_api_route("/", turn, methods=["POST"])
    app.add_api_route("/{path:path}", turn, methods=["POST"])
    return app


class _Uvicorn(uvicorn.Server):
    """uvicorn's server, but a signal starts the worker's drain and is not raised again afterwards (the command
    exits with 0 after a graceful stop); a second Ctrl-C still forces the exit."""

    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None]):
        super().__init__(config)
        self._on_exit = on_exit

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._on_exit()
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        else:
            self.should_exit = True


class WorkerServer:
    """A system behind ``crs-arena/1`` on uvicorn. :meth:`start` serves in a thread and waits until the system is
    loaded (tests, benches); :meth:`serve_forever` serves in the foreground and loads the system after the port
    opens (the command: ``/health`` says ``loading`` meanwhile), until SIGTERM or Ctrl-C.

    ``system`` is the system, or a function that builds it (called in a thread once the port is open). Either way
    its ``warm_up()`` runs before the worker takes turns, and the time it all took is ``crs_worker_model_load_seconds``.
    The port is bound here, so a port in use raises :class:`WorkerError` at once.
    """

    def __init__(
        self,
        system: CRSSystem | Callable[[], CRSSystem],
        system_id: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        key: str | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
        queue: int = DEFAULT_QUEUE,
        name: str | None = None,
        grace: float = DEFAULT_GRACE_S,
    ):
        self.system_id, self.key = system_id, key
        self._loader: Callable[[], CRSSystem] = (lambda: system) if isinstance(system, CRSSystem) else system
        self.state = WorkerState(system_id, concurrency=concurrency, queue=queue)
        self.name = (name or "").strip()[:WORKER_NAME_CHARS] or None
        self._executor = ThreadPoolExecutor(max_workers=self.state.concurrency, thread_name_prefix=f"turn-{system_id}")
        self.app = create_app(self.state, key=key, name=self.name, executor=self._executor)
        self._socket = self._bind(host, port)
        self.host = host
        config = uvicorn.Config(
            self.app,
            host=host,
            port=self.server_address[1],
            lifespan="off",
            http="h11",
            loop="asyncio",
            log_config=None,  # the process's logging as it is (the command sets it up; tests keep theirs)
            access_log=False,
            server_header=False,
            timeout_keep_alive=75,  # longer than a load balancer's or the app's idle connections
            timeout_graceful_shutdown=max(1, int(grace)),
        )
        self._server = _Uvicorn(config, self.drain)
        self._thread: threading.Thread | None = None
        self._loading: threading.Thread | None = None
        self._exit_on_failure = False

    @staticmethod
    def _bind(host: str, port: int) -> socket.socket:
        try:
            family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
            sock = socket.socket(family, kind, proto)
        except OSError as e:
            raise WorkerError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
        try:
            # a restarted worker may reuse the port at once; two listening workers on one port are still refused
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(2048)
        except OSError as e:
            sock.close()
            if e.errno == errno.EADDRINUSE:
                raise WorkerError(f"port {port} on {host} is already in use (another worker?); choose --port") from None
            raise WorkerError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
        return sock

    @property
    def server_address(self) -> tuple[str, int]:
        host, port = self._socket.getsockname()[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.server_address
        return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"

    @property
    def system(self) -> CRSSystem | None:
        return self.state.system

    def drain(self) -> None:
        """Refuse new turns from now on (the ones in flight finish); the server stops next."""
        if self.state.status != "failed":
            self.state.status = "draining"

    def _load(self) -> None:
        start = time.perf_counter()
        try:
            system = self._loader()
            prepare = getattr(system, "warm_up", None)
            if prepare:
                prepare()
        except Exception as e:  # KeyError, SystemUnavailable (a sentence), or anything a model's loading raises
            log.exception("worker %s: the system could not be loaded", self.system_id)
            reason = e.args[0] if isinstance(e, KeyError) and e.args else e
            self.state.failure = f"{self.system_id} cannot be served: {reason}"
            self.state.status = "failed"
            if self._exit_on_failure:
                self._server.should_exit = True
            return
        self.state.metrics.model_load_seconds = time.perf_counter() - start
        self.state.system = system
        if self.state.status == "loading":
            self.state.status = "ready"
        self.state.metrics.ready = self.state.status == "ready"

    def _start_loading(self) -> None:
        self._loading = threading.Thread(target=self._load, name=f"load-{self.system_id}", daemon=True)
        self._loading.start()

    def wait_ready(self, timeout: float = 600.0) -> WorkerServer:
        """Block until the system is loaded (or raise :class:`WorkerError` saying why it is not)."""
        if self._loading is not None:
            self._loading.join(timeout)
        if self.state.status == "failed":
            raise WorkerError(self.state.failure or f"{self.system_id} cannot be served")
        if self.state.status != "ready":
            raise WorkerError(f"{self.system_id} did not load within {timeout:g} s")
        return self

    def start(self, *, wait: bool = True) -> WorkerServer:
        """Serve in a thread; with ``wait``, return once the port answers and the system is loaded."""
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, name=f"worker-{self.system_id}", daemon=True
        )
        self._thread.start()
        self._start_loading()
        deadline = time.monotonic() + 60  # the server is up within milliseconds; this bound is for a stuck machine
        while not self._server.started and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not self._server.started:
            self.stop()
            raise WorkerError(f"the worker for {self.system_id} did not start")
        if wait:
            try:
                self.wait_ready()
            except WorkerError:
                self.stop()
                raise
        return self

    def serve_forever(self) -> None:
        """Serve in the foreground until SIGTERM or Ctrl-C (then drain); load the system meanwhile. Raises
        :class:`WorkerError` when the system cannot be loaded (the worker stops at once then)."""
        self._exit_on_failure = True
        self._start_loading()
        try:
            self._server.run(sockets=[self._socket])
        finally:
            self._close()
        if self.state.status == "failed":
            raise WorkerError(self.state.failure or f"{self.system_id} cannot be served")

    def stop(self) -> None:
        """Drain and stop: the turns in flight finish first (up to the grace period)."""
        self.drain()
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join((self._server.config.timeout_graceful_shutdown or DEFAULT_GRACE_S) + 10)
        self._close()

    def _close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._socket.close()

    def __enter__(self) -> WorkerServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
