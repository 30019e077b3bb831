"""A small, real HTTP server that speaks enough of the OpenAI Chat Completions API
for tests of clients built on the ``openai`` package.

Standard library only. Binds to 127.0.0.1 on a free port; nothing else.

Usage::

    with FakeOpenAI() as fake:
        fake.enqueue(Reply("hello there"), Error(500), Delay(2.0, Reply("late")))
        client = openai.OpenAI(base_url=fake.base_url, api_key="sk-test")
        ...
        assert fake.requests[0]["headers"]["authorization"] == "Bearer sk-test"

Log-probabilities behave like a real endpoint's: when a request asks for them, the answer text is
split into tokens the way BPE tokenizers split it (words with their leading space, digits one by
one, tags in pieces: ``<rating>`` is ``<`` ``rating`` ``>``, ``</rating>`` is ``</`` ``rating`` ``>``;
see :func:`tokenize`), and every position gets up to 20 alternatives: the sampled token first, filler
words after it, and **stray digits among the alternatives of the first positions** (a real model
always gives a "4" some tiny probability somewhere). ``Reply(at={...})`` sets a position's
alternatives, by index or as ``"answer"``: the token holding the content of the last ``<tag>…</tag>``
(e.g. the digit of ``<rating>2</rating>``). A digit at an answer position with no ``at`` entry gets
0.85 and its neighbours the rest. ``Reply(logprobs={...})`` is the old one-position form (the whole
text is one token); ``Reply(no_logprobs=True)`` ignores the request, as some endpoints do.
``n`` in a request returns that many choices (the next queued replies, or the same one repeated).
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeOpenAI", "Reply", "Error", "Delay", "Held", "Together", "Garbage", "tokenize", "answer_position"]

_HOST = "127.0.0.1"


# ---------------------------------------------------------------------------
# Scripted responses
# ---------------------------------------------------------------------------


@dataclass
class Reply:
    """A successful chat completion."""

    text: str
    logprobs: dict[str, float] | None = None  # the old form: one position, the whole text as one token
    prompt_tokens: int = 10
    completion_tokens: int | None = None  # None: number of words of text
    finish_reason: str = "stop"
    at: dict[int | str, dict[str, float]] | None = None  # alternatives (probabilities) per position
    no_logprobs: bool = False  # answer without log-probabilities even when asked

    def n_completion_tokens(self) -> int:
        if self.completion_tokens is not None:
            return self.completion_tokens
        return len(self.text.split())


@dataclass
class Error:
    """An HTTP error with an OpenAI-style JSON body (e.g. 429, 500)."""

    status: int
    message: str = "fake error"
    retry_after: float | None = None


@dataclass
class Delay:
    """Sleep ``seconds`` (aborting early if the server stops), then answer ``then``."""

    seconds: float
    then: Reply


@dataclass
class Together:
    """Hold each request until ``n`` requests scripted with this same object are in flight together, then answer
    ``then``; when they are not all there within ``timeout`` seconds (a bound, not a measurement), answer HTTP 503.

    Proves concurrency by behaviour: a client that sends one request at a time gets 503s, never a slow pass."""

    n: int
    then: Reply
    timeout: float = 30.0
    barrier: threading.Barrier = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.barrier = threading.Barrier(self.n)

    def wait(self) -> bool:
        try:
            self.barrier.wait(self.timeout)
        except threading.BrokenBarrierError:
            return False
        return True


@dataclass
class Held:
    """Hold the request until the test calls :meth:`release`, then answer ``then``; when it is not released within
    ``timeout`` seconds (a bound, not a measurement), answer HTTP 503.

    Keeps one answer provably outstanding while the test looks at what the client shows meanwhile (e.g. a table
    streamed before its last row), where a :class:`Delay` would race the rest of the work."""

    then: Reply
    timeout: float = 120.0
    released: threading.Event = field(init=False, repr=False, default_factory=threading.Event)

    def release(self) -> None:
        self.released.set()


@dataclass
class Garbage:
    """A non-JSON body.

    Sent as ``application/json`` by default (a broken body that claims to be
    JSON), so the openai client fails parsing it. With another ``content_type``
    (e.g. ``"text/html"``) the openai client does not raise: it returns the body
    as a plain ``str`` instead of a parsed object.
    """

    body: str = "not json"
    status: int = 200
    content_type: str = "application/json"


_ERROR_TYPES = {
    400: ("invalid_request_error", "invalid_request"),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", "permission_denied"),
    404: ("invalid_request_error", "not_found"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}


def _error_body(status: int, message: str) -> dict[str, Any]:
    etype, code = _ERROR_TYPES.get(status, ("server_error" if status >= 500 else "invalid_request_error", None))
    return {"error": {"message": message, "type": etype, "param": None, "code": code}}


def _split_pieces(text: str, n: int = 3) -> list[str]:
    """Split text into about ``n`` pieces on word boundaries; pieces join back to text."""
    if not text:
        return []
    # Keep whitespace attached so "".join(pieces) == text.
    words: list[str] = []
    cur = ""
    for ch in text:
        if ch.isspace() and cur and not cur[-1].isspace():
            words.append(cur)
            cur = ch
        else:
            cur += ch
    if cur:
        words.append(cur)
    if len(words) <= n:
        return words
    size = -(-len(words) // n)  # ceil
    return ["".join(words[i : i + size]) for i in range(0, len(words), size)]


_TOKEN = re.compile(r"</|<|>|\s?\d|\s?[A-Za-z]+|\s+|[^\sA-Za-z\d]")
_FILLERS = (
    " the",
    " a",
    " and",
    " of",
    " it",
    " to",
    " is",
    " in",
    " this",
    " that",
    " for",
    " with",
    " on",
    " user",
    " system",
    " but",
    ".",
    ",",
    " not",
    " as",
    " be",
    " The",
    " I",
)
_STRAY = {"4": 0.0006, "3": 0.0003}  # digits a real model leaves among early alternatives


def tokenize(text: str) -> list[str]:
    """Tokens the way BPE tokenizers cut chat answers; they join back to ``text``."""
    tokens = _TOKEN.findall(text)
    assert "".join(tokens) == text, "the fake's tokenizer lost characters"
    return tokens


def answer_position(tokens: list[str], text: str) -> int | None:
    """Index of the token holding the content of the last ``<tag>…</tag>`` of ``text``."""
    found = list(re.finditer(r"<(\w+)>\s*(.*?)</\1>", text, re.DOTALL))
    if not found:
        return None
    offset = found[-1].start(2)
    start = 0
    for index, token in enumerate(tokens):
        if start <= offset < start + len(token):
            return index
        start += len(token)
    return None


def _alternatives(reply: Reply, tokens: list[str], index: int, answer: int | None) -> dict[str, float]:
    token = tokens[index]
    given = (reply.at or {}).get(index)
    if given is None and index == answer:
        given = (reply.at or {}).get("answer")
    if given is not None:
        probs = dict(given)
        if token not in probs:
            probs[token] = max(1e-6, 1.0 - sum(probs.values()))
        return probs
    if index == answer and token.strip().isdigit():
        d = int(token.strip())
        near = [str(v) for v in (d - 1, d + 1) if 0 <= v <= 9]
        probs = {token: 0.85}
        probs.update({token[:-1] + n: 0.15 / len(near) for n in near})
        return probs
    probs = {token: 0.92}
    if index < 3:
        probs.update({k: v for k, v in _STRAY.items() if k != token.strip()})
    return probs


def _position(token: str, probs: dict[str, float], top_n: int | None) -> dict[str, Any]:
    ranked = sorted(probs.items(), key=lambda kv: kv[1], reverse=True)
    filler = 0.9 * min(p for _, p in ranked) if ranked else 0.01
    for word in _FILLERS:  # fill the list to 20, as real endpoints do
        if len(ranked) >= 20:
            break
        if word not in probs:
            filler *= 0.5
            ranked.append((word, filler))
    entries = ranked[:20] if top_n is None else ranked[: max(0, min(top_n, 20))]
    return {
        "token": token,
        "logprob": math.log(probs[token]),
        "bytes": list(token.encode("utf-8")),
        "top_logprobs": [{"token": t, "logprob": math.log(p), "bytes": list(t.encode("utf-8"))} for t, p in entries],
    }


def _logprobs_payload(reply: Reply, top_n: int | None) -> dict[str, Any] | None:
    if reply.no_logprobs:
        return None
    if reply.logprobs is None:
        tokens = tokenize(reply.text)
        answer = answer_position(tokens, reply.text)
        return {
            "content": [_position(t, _alternatives(reply, tokens, i, answer), top_n) for i, t in enumerate(tokens)],
            "refusal": None,
        }
    ranked = sorted(reply.logprobs.items(), key=lambda kv: kv[1], reverse=True)
    if not ranked:
        return {"content": []}
    top_token, top_lp = ranked[0]
    entries = ranked if top_n is None else ranked[: max(0, top_n)]
    return {
        "content": [
            {
                "token": top_token,
                "logprob": top_lp,
                "bytes": list(top_token.encode("utf-8")),
                "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode("utf-8"))} for t, lp in entries],
            }
        ],
        "refusal": None,
    }


# ---------------------------------------------------------------------------
# HTTP handler
# ---------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # headers and body go out in two writes: with Nagle's algorithm on, the body then waits for the client's
    # delayed ACK of the headers (tens of ms per response on loopback), which the benches counted as latency
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def log_error(self, format: str, *args: Any) -> None:
        pass

    # -- helpers ----------------------------------------------------------

    @property
    def fake(self) -> FakeOpenAI:
        return self.server.fake

    def _read_json(self) -> Any:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return None

    def _record(self, body: Any) -> None:
        path = self.path.split("?", 1)[0]
        headers = {k.lower(): v for k, v in self.headers.items()}
        with self.fake._lock:
            self.fake.requests.append({"path": path, "headers": headers, "json": body, "received": time.monotonic()})

    def _send(
        self,
        status: int,
        body: bytes,
        content_type: str = "application/json",
        extra_headers: dict[str, str] | None = None,
    ) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (extra_headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True

    def _send_json(self, status: int, obj: Any, extra_headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(obj).encode("utf-8"), extra_headers=extra_headers)

    def _not_found(self) -> None:
        self._send_json(404, _error_body(404, f"Unknown endpoint: {self.command} {self.path}"))

    # -- verbs ----------------------------------------------------------------

    def do_GET(self) -> None:
        self._record(None)
        if self.path.split("?", 1)[0].rstrip("/") == "/v1/models":
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": [
                        {
                            "id": "fake-model",
                            "object": "model",
                            "created": 1700000000,
                            "owned_by": "fake-openai",
                        }
                    ],
                },
            )
        else:
            self._not_found()

    def do_POST(self) -> None:
        body = self._read_json()
        self._record(body)
        if self.path.split("?", 1)[0].rstrip("/") != "/v1/chat/completions":
            self._not_found()
            return
        if not isinstance(body, dict):
            self._send_json(400, _error_body(400, "Request body must be a JSON object"))
            return

        n = body.get("n") or 1
        try:
            n = max(1, int(n))
        except (TypeError, ValueError):
            n = 1
        first = self.fake._next()

        if isinstance(first, Delay):
            if not self.fake._sleep(first.seconds):
                self.close_connection = True
                return
            first = first.then
        if isinstance(first, Held):
            if not self.fake._hold(first):
                if self.fake._stopping.is_set():
                    self.close_connection = True
                else:
                    self._send_json(503, _error_body(503, "the held answer was never released"))
                return
            first = first.then
        if isinstance(first, Together):
            if not first.wait():
                self._send_json(503, _error_body(503, f"fewer than {first.n} requests were in flight together"))
                return
            first = first.then
        if isinstance(first, Error):
            headers = {}
            if first.retry_after is not None:
                ra = first.retry_after
                headers["retry-after"] = str(int(ra)) if float(ra).is_integer() else str(ra)
            self._send_json(first.status, _error_body(first.status, first.message), headers)
            return
        if isinstance(first, Garbage):
            self._send(first.status, first.body.encode("utf-8"), content_type=first.content_type)
            return
        if not isinstance(first, Reply):
            self._send_json(500, _error_body(500, f"Bad scripted response: {first!r}"))
            return

        replies = [first]
        while len(replies) < n:
            nxt = self.fake._next_reply_or_none()
            replies.append(nxt if nxt is not None else replies[-1])

        if body.get("stream"):
            self._stream(body, replies)
        else:
            self._send_json(200, self._completion(body, replies))

    def do_PUT(self) -> None:
        self._read_json()
        self._record(None)
        self._not_found()

    do_DELETE = do_PUT
    do_PATCH = do_PUT

    # -- bodies -----------------------------------------------------------

    @staticmethod
    def _top_n(body: dict[str, Any]) -> int | None:
        v = body.get("top_logprobs")
        return int(v) if isinstance(v, (int, float)) else None

    def _usage(self, replies: list[Reply]) -> dict[str, int]:
        prompt = replies[0].prompt_tokens
        completion = sum(r.n_completion_tokens() for r in replies)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    def _completion(self, body: dict[str, Any], replies: list[Reply]) -> dict[str, Any]:
        top_n = self._top_n(body)
        return {
            "id": "chatcmpl-" + uuid.uuid4().hex[:24],
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake-model"),
            "system_fingerprint": "fp_fake",
            "choices": [
                {
                    "index": i,
                    "message": {"role": "assistant", "content": r.text, "refusal": None},
                    "finish_reason": r.finish_reason,
                    "logprobs": _logprobs_payload(r, top_n) if body.get("logprobs") else None,
                }
                for i, r in enumerate(replies)
            ],
            "usage": self._usage(replies),
        }

    def _stream(self, body: dict[str, Any], replies: list[Reply]) -> None:
        cid = "chatcmpl-" + uuid.uuid4().hex[:24]
        created = int(time.time())
        model = body.get("model", "fake-model")
        top_n = self._top_n(body)
        opts = body.get("stream_options") or {}
        include_usage = isinstance(opts, dict) and bool(opts.get("include_usage"))

        def chunk(choices: list[dict[str, Any]], usage: Any = None, with_usage: bool = False) -> dict[str, Any]:
            c: dict[str, Any] = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": "fp_fake",
                "choices": choices,
            }
            if with_usage:
                c["usage"] = usage
            return c

        events: list[dict[str, Any]] = []
        for i, r in enumerate(replies):
            events.append(
                chunk(
                    [
                        {
                            "index": i,
                            "delta": {"role": "assistant", "content": ""},
                            "logprobs": None,
                            "finish_reason": None,
                        }
                    ],
                    with_usage=include_usage,
                )
            )
            for j, piece in enumerate(_split_pieces(r.text)):
                lp = _logprobs_payload(r, top_n) if j == 0 and body.get("logprobs") and r.logprobs else None
                events.append(
                    chunk(
                        [{"index": i, "delta": {"content": piece}, "logprobs": lp, "finish_reason": None}],
                        with_usage=include_usage,
                    )
                )
            events.append(
                chunk(
                    [{"index": i, "delta": {}, "logprobs": None, "finish_reason": r.finish_reason}],
                    with_usage=include_usage,
                )
            )
        if include_usage:
            events.append(chunk([], usage=self._usage(replies), with_usage=True))

        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            for ev in events:
                self.wfile.write(b"data: " + json.dumps(ev).encode("utf-8") + b"\n\n")
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver listens with a backlog of 5: a burst of 12+ parallel clients then
    # sees dropped connection attempts retried about a second later by the kernel
    request_queue_size = 128
    fake: FakeOpenAI

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Keep stderr quiet (client disconnects during Delay etc.).
        pass


# ---------------------------------------------------------------------------
# Public server object
# ---------------------------------------------------------------------------


class FakeOpenAI:
    """A fake OpenAI HTTP server on 127.0.0.1 with scripted responses."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.default: Reply = Reply(text="OK")
        self._queue: deque[Any] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------

    def start(self) -> FakeOpenAI:
        if self._server is not None:
            return self
        self._stopping.clear()
        server = _Server((_HOST, 0), _Handler)
        server.fake = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="FakeOpenAI", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        server, thread = self._server, self._thread
        self._server = None
        self._thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- addresses ------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeOpenAI is not started")
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://{_HOST}:{self.port}/v1"

    # -- scripting ------------------------------------------------------------

    def enqueue(self, *responses: Any) -> None:
        for r in responses:
            if not isinstance(r, (Reply, Error, Delay, Held, Together, Garbage)):
                raise TypeError(f"not a scripted response: {r!r}")
        with self._lock:
            self._queue.extend(responses)

    def _next(self) -> Any:
        with self._lock:
            return self._queue.popleft() if self._queue else self.default

    def _next_reply_or_none(self) -> Reply | None:
        """For n > 1: the next queued item if it is a Reply, else None."""
        with self._lock:
            if self._queue and isinstance(self._queue[0], Reply):
                return self._queue.popleft()
            return None

    def _hold(self, held: Held) -> bool:
        """Wait, in small steps, until ``held`` is released; False if its bound passed or the server began stopping."""
        deadline = time.monotonic() + held.timeout
        while not held.released.is_set():
            left = deadline - time.monotonic()
            if left <= 0 or self._stopping.wait(min(0.05, left)):
                return False
        return True

    def _sleep(self, seconds: float) -> bool:
        """Sleep in small steps; False if the server began stopping."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            if self._stopping.wait(min(0.05, left)):
                return False
