"""A remote CRS that misbehaves on purpose, over real HTTP on 127.0.0.1: the reference server
(examples/reference_crs.py) with one fault switched on.

    with FaultServer("html") as server:      # every answer's text carries a <script>
        ...server.url, server.requests (how many POSTs arrived), server.bodies (the JSON bodies)

Faults: ``ok`` (no fault), ``html``, ``empty_slot``, ``same_list`` (one list whatever the user says),
``no_items``, ``unmapped`` (titles no catalog has), ``rejected_again``, ``wrong_types``, ``empty_text``,
``invalid_json``, ``huge`` (50 MB announced in Content-Length), ``huge_chunked`` (50 MB, no length),
``status:<code>`` (e.g. ``status:500``; 429 carries ``Retry-After: 0``), ``flaky:<n>`` (HTTP 500 for the first
n requests, then answers), ``busy:<n>:<ms>`` (a full worker: 503 with ``Retry-After`` and ``retry-after-ms: <ms>``
for the first n requests, then answers), ``slow:<seconds>``, ``redirect``, ``drop`` (closes the connection
unanswered).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

from reference_crs import Handler, ReferenceServer

MB = 1_000_000


class FaultHandler(Handler):
    server: FaultServer

    def do_POST(self):
        start = time.perf_counter()
        fault, _, arg = self.server.fault.partition(":")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        with self.server.lock:
            self.server.requests += 1
            count = self.server.requests
            try:
                self.server.bodies.append(json.loads(body))
            except ValueError:
                self.server.bodies.append(None)
            self.server.headers.append(dict(self.headers))
        if fault == "busy" and count <= int(arg.split(":")[0]):
            ms = int(arg.split(":")[1])
            data = b'{"error": "the worker is full"}'
            self.send_response(503)
            self.send_header("Retry-After", str(max(1, -(-ms // 1000))))
            self.send_header("retry-after-ms", str(ms))
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if fault == "status" or (fault == "flaky" and count <= int(arg)):
            status = int(arg) if fault == "status" else 500
            self.send_response(status)
            if status == 429:
                self.send_header("Retry-After", "0")
            data = b'{"error": "scripted failure"}'
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if fault == "slow":
            time.sleep(float(arg))
        if fault == "drop":
            self.close_connection = True
            return
        if fault == "redirect":
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.1:9/elsewhere")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if fault == "invalid_json":
            return self._raw(b"<html><body>Internal error</body></html>", "text/html")
        if fault in ("huge", "huge_chunked"):
            return self._huge(chunked=fault == "huge_chunked")
        answer = self.server.crs.answer(json.loads(body))
        if fault == "html":
            answer["text"] = f"<script>alert('x')</script><b>{answer['text']}</b>"
        elif fault == "empty_slot":
            answer["text"] = "Have you seen ? It is a great <movie>."
        elif fault == "same_list":
            answer = self.server.crs.answer({"turns": [{"role": "user", "text": "anything"}]})
        elif fault == "no_items":
            answer["items"] = []
        elif fault == "unmapped":
            answer["items"] = [{"title": f"A Film Nobody Made {n}", "year": 1931} for n in range(5)]
        elif fault == "rejected_again":
            answer["items"].insert(0, {"id": "the-godfather-1972", "title": "The Godfather", "year": 1972})
        elif fault == "wrong_types":
            answer["text"] = 42
        elif fault == "empty_text":
            answer["text"] = "   "
        self._send(200, answer, timing=(time.perf_counter() - start) * 1000)

    def _raw(self, data: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _huge(self, *, chunked: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if chunked:
            self.send_header("Connection", "close")
            self.close_connection = True
        else:
            self.send_header("Content-Length", str(50 * MB))
        self.end_headers()
        try:
            self.wfile.write(b'{"text": "')
            block = b"x" * 65536
            for _ in range(50 * MB // len(block)):  # bounded: 50 MB at most, stops when the client hangs up
                self.wfile.write(block)
                with self.server.lock:
                    self.server.sent += len(block)
        except OSError:
            pass


class FaultServer(ReferenceServer):
    def __init__(self, fault: str = "ok", *, key: str | None = None):
        super().__init__(("127.0.0.1", 0), key=key, handler=FaultHandler)
        self.fault = fault
        self.lock = threading.Lock()
        self.requests = 0
        self.sent = 0
        self.bodies: list = []
        self.headers: list[dict] = []
