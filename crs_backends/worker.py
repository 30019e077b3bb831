"""Any registered system served over the ``crs-arena/1`` protocol: a model worker.

``python -m crs_backends serve SYSTEM`` answers the same HTTP requests a researcher's server answers
(``docs/remote-crs.md``), so the heavy systems (KBRD, BARCOR, UniCRS, ChatCRS on a big model) can run on other
machines or GPUs, as several replicas behind any HTTP load balancer, and the app reaches them through the systems
file like any remote CRS (FastChat's model workers, on a protocol we already have).

Each answer carries the system's shown list as ``items``, its whole ranking (when it keeps one: a neural model's
top 50) as the optional ``ranking`` field, and its variant as ``system_version``; the app keeps the ranking for
iEvaLM's Recall@k. Binds to 127.0.0.1 unless told otherwise; with ``--key-env NAME`` it requires
``Authorization: Bearer <the key in NAME>`` (the key is read from the environment, never from the command line).
"""

from __future__ import annotations

import errno
import hmac
import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from crs_backends.base import CRSSystem
from storage.records import RANKING_MAX, Conversation, ItemRef, Turn

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 1_000_000
PROTOCOL = "crs-arena/1"


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


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the app reuses connections
    disable_nagle_algorithm = True  # headers and body in one go
    server: WorkerServer

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/health":
            self._send(200, {"ok": True, "system_version": self.server.system.info.variant[:100]})
        else:
            self._send(404, {"error": f"POST a {PROTOCOL} request to this server"})

    def do_POST(self) -> None:
        start = time.perf_counter()
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0 or length > MAX_REQUEST_BYTES:
            self._send(
                413, {"error": f"the request must announce a length of at most {MAX_REQUEST_BYTES} bytes"}, close=True
            )
            return
        body = self.rfile.read(length)
        given = self.headers.get("Authorization") or ""
        if self.server.key and not hmac.compare_digest(given.encode(), f"Bearer {self.server.key}".encode()):
            self._send(401, {"error": "a valid key is required"})
            return
        try:
            request = json.loads(body)
            if not isinstance(request, dict):
                raise ValueError("the body must be a JSON object")
            conversation = conversation_from_request(request)
        except (ValueError, UnicodeDecodeError) as e:
            self._send(400, {"error": str(e) if isinstance(e, ValueError) and str(e) else "the body must be JSON"})
            return
        max_items = request.get("max_items")
        max_items = (
            max_items if isinstance(max_items, int) and not isinstance(max_items, bool) and max_items > 0 else None
        )
        try:
            turn = self.server.system.respond(conversation)
        except Exception:  # the details stay in the worker's log; the app shows its own message
            log.exception("%s failed to answer request %s", self.server.system_id, request.get("request_id"))
            self._send(500, {"error": "the system failed to answer (the worker's log has the details)"})
            return
        self._send(200, answer_of(turn, self.server.system, max_items), timing=(time.perf_counter() - start) * 1000)

    def _send(self, status: int, payload: dict, *, timing: float | None = None, close: bool = False) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        if timing is not None:  # the system's own time: the app stores it beside its latency
            self.send_header("Server-Timing", f"crs;dur={timing:.2f}")
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(data)


class WorkerServer(ThreadingHTTPServer):
    """A system behind ``crs-arena/1``; :meth:`start` serves in a thread (tests, benches), :meth:`serve_forever`
    in the foreground (the command)."""

    daemon_threads = True
    allow_reuse_address = False  # two workers on one port: the second is refused, not silently sharing it

    def __init__(
        self, system: CRSSystem, system_id: str, *, host: str = "127.0.0.1", port: int = 0, key: str | None = None
    ):
        self.system, self.system_id, self.key = system, system_id, key
        try:
            super().__init__((host, port), _Handler)
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise WorkerError(f"port {port} on {host} is already in use (another worker?); choose --port") from None
            raise WorkerError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else str(host)
        return f"http://{host}:{port}/"

    def start(self) -> WorkerServer:
        threading.Thread(target=self.serve_forever, name=f"worker-{self.system_id}", daemon=True).start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    def __enter__(self) -> WorkerServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
