"""A system under test behind HTTP: the CRS Arena remote protocol (``crs-arena/1``), client side.

The app POSTs the conversation so far as JSON and reads back the reply text and a ranked item list
(docs/remote-crs.md has the protocol with examples). Everything the remote side sends is checked before
it becomes a :class:`~storage.records.Turn`: the body's size (read in pieces, stopped at the limit), that it
is JSON, every field's type and length, and every item is mapped onto the catalog (by id, else by title and
year); items that match nothing are left out of the list and only recorded. Whatever goes wrong becomes a
:class:`RemoteCRSError` (an :class:`~llm.types.LLMError`, so the chat, the arena and the simulator treat it as
they treat a failed model call) whose message is fit for a person: no URL, no key, no exception text.

Timeouts and retries follow the LLM endpoints (``llm_clients/remote.py``): ``CRS_LLM_TIMEOUT`` seconds per attempt
and ``CRS_LLM_MAX_RETRIES`` retries unless the systems file sets them; 408/409/429/5xx, timeouts and
connection errors are retried with exponential backoff (0.5 s doubling, at most 8 s, with jitter) honouring
``Retry-After`` up to 60 s. Redirects are never followed (the key goes to the configured URL only).

A worker that is full (``crs-arena serve``'s back-pressure: 503 with ``Retry-After``) is asked again after the wait
it named, as long as that ends within the turn's deadline (``timeout × (max_retries + 1)`` from the turn's start,
the longest the retries could take anyway); such a wait does not use up a retry. A system may have several URLs
(workers serving the same system): turns go round them in turn, a worker that failed (no connection, a timeout,
a 5xx) is skipped for :data:`WORKER_REST_S` seconds and one that said it is full until its ``Retry-After``, and a
retry goes to the next worker. The turn's metadata says which worker answered: its position in the list
(``worker``, from 1) and the name it gave itself (``worker_name``, ``X-CRS-Worker``); never its URL, which may be
an internal address and conversations are published.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import re
import threading
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import httpx

from catalog.catalog import Catalog
from catalog.items import Item, split_name
from crs_backends.base import DEFAULT_LIST_SIZE, CRSSystem, SystemInfo
from llm_clients.types import LLMError
from storage.records import Conversation, Turn, new_id

log = logging.getLogger(__name__)

PROTOCOL = "crs-arena/1"
USER_AGENT = "crs-arena-remote/1"

# What a response may hold. Over a limit, the response is refused (never cut and stored).
MAX_RESPONSE_BYTES = 1_000_000
MAX_TEXT_CHARS = 8_000
MAX_ITEMS = 100
MAX_ID_CHARS = 200
MAX_TITLE_CHARS = 300
MAX_EXPLANATION_CHARS = 1_000
MAX_VERSION_CHARS = 100
MAX_UNMAPPED_KEPT = 20  # unmapped titles recorded on a turn

RETRY_STATUSES = frozenset({408, 409, 429}) | frozenset(range(500, 600))
MAX_RETRY_AFTER = 60.0
BACKOFF_START, BACKOFF_MAX = 0.5, 8.0
WORKER_REST_S = 30.0  # a worker that failed is skipped this long (while another can answer)
MAX_BUSY_WAITS = 100  # answers "full, retry after …" one turn accepts, whatever its deadline
MAX_WORKER_NAME_CHARS = 60
_WORKER_NAME = re.compile(r"[^A-Za-z0-9._:@/-]")

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class RemoteCRSError(LLMError):
    """A remote (or plug-in) system gave no usable answer. ``str()`` is a message for people.

    ``kind``: timeout | rate_limit | busy | server | connection | auth | refused | redirect | too_large |
    bad_response | config | plugin.
    """


def http_url(url: str) -> str:
    """``url`` if it is an absolute http(s) URL without credentials in it; else ValueError saying why."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError("the URL is empty")
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"only http:// and https:// URLs are allowed, not {parts.scheme or 'a relative URL'}:")
    if not parts.hostname:
        raise ValueError("the URL has no host")
    if parts.username or parts.password:
        raise ValueError("the URL must not carry credentials: put the key in an environment variable (key_env)")
    try:
        parts.port  # noqa: B018 (raises on a bad port)
    except ValueError:
        raise ValueError("the URL has an invalid port") from None
    return url


@dataclass(frozen=True)
class RemoteConfig:
    """One remote system, as the systems file describes it (the key itself is read from ``key_env``).

    ``url`` is where turns go; ``urls``, when given, lists every worker serving the system (``url`` first or not:
    :attr:`targets` puts it first and drops repeats).
    """

    id: str
    label: str
    url: str
    description: str = ""
    key_env: str | None = None
    catalog: str | None = None  # catalog name sent to the system; None: the app's catalog
    timeout: float = 60.0
    max_retries: int = 3
    list_size: int = DEFAULT_LIST_SIZE
    urls: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        http_url(self.url)
        for url in self.urls:
            http_url(url)

    @property
    def targets(self) -> tuple[str, ...]:
        """Every URL serving the system, ``url`` first, each once."""
        return tuple(dict.fromkeys((self.url, *self.urls)))


def default_timeout(env=os.environ) -> float:
    """``CRS_LLM_TIMEOUT`` (the LLM endpoints' timeout), else 60 s."""
    return _number(env.get("CRS_LLM_TIMEOUT"), 60.0, float)


def default_retries(env=os.environ) -> int:
    """``CRS_LLM_MAX_RETRIES`` (the LLM endpoints' retries), else 3."""
    return _number(env.get("CRS_LLM_MAX_RETRIES"), 3, int)


def _number(value, default, kind):
    try:
        return kind(value) if value not in (None, "") else default
    except ValueError:
        return default


def build_request(
    conversation: Conversation, *, request_id: str, catalog: str, domain: str, max_items: int
) -> dict[str, Any]:
    """The JSON body of one request: the conversation so far (history first), ids and the catalog."""
    turns = []
    for turn in conversation.all_turns:
        entry: dict[str, Any] = {"role": turn.role, "text": turn.text}
        if turn.role == "system":
            entry["items"] = [{"id": ref.id, "title": ref.title} for ref in turn.items]
        turns.append(entry)
    return {
        "protocol": PROTOCOL,
        "request_id": request_id,
        "conversation_id": conversation.id,
        "domain": domain,
        "catalog": catalog,
        "max_items": max_items,
        "turns": turns,
    }


@dataclass
class ParsedReply:
    """A response that passed validation, items already on the catalog."""

    text: str
    items: list[Item]
    returned: int  # items the system sent
    unmapped: list[dict[str, str]] = field(default_factory=list)  # those that matched no catalog item (first few)
    unmapped_count: int = 0
    ranking: list[Item] = field(default_factory=list)  # its 'ranking' mapped, else every mapped item (at most 100)
    ranking_sent: bool = False  # the answer carried a 'ranking' of its own
    scores: dict[str, float] = field(default_factory=dict)
    explanations: dict[str, str] = field(default_factory=dict)
    system_version: str | None = None

    @property
    def mapped_share(self) -> float | None:
        return None if not self.returned else (self.returned - self.unmapped_count) / self.returned


class InvalidResponse(ValueError):
    """The response's shape is wrong; the message (ours, never the remote's text) says where."""


def clean_text(text: str) -> str:
    """Text as it may be stored: NFC, control characters (but newlines and tabs) removed, trimmed."""
    return _CONTROL.sub("", unicodedata.normalize("NFC", text)).strip()


def parse_response(data: Any, catalog: Catalog, *, list_size: int = DEFAULT_LIST_SIZE) -> ParsedReply:
    """Validate a decoded response and map its items onto ``catalog``. Raises :class:`InvalidResponse`."""
    if not isinstance(data, dict):
        raise InvalidResponse("the response is not a JSON object")
    text = data.get("text")
    if not isinstance(text, str):
        raise InvalidResponse("'text' is missing or not a string")
    if len(text) > MAX_TEXT_CHARS:
        raise InvalidResponse(f"'text' is longer than {MAX_TEXT_CHARS:,} characters")
    text = clean_text(text)
    if not text:
        raise InvalidResponse("'text' is empty")
    version = data.get("system_version")
    if version is not None and (not isinstance(version, str) or len(version) > MAX_VERSION_CHARS):
        raise InvalidResponse(f"'system_version' must be a string of at most {MAX_VERSION_CHARS} characters")
    raw_items = data.get("items", [])
    if raw_items is None:
        raw_items = []
    if not isinstance(raw_items, list):
        raise InvalidResponse("'items' is not a list")
    if len(raw_items) > MAX_ITEMS:
        raise InvalidResponse(f"'items' has {len(raw_items)} entries; at most {MAX_ITEMS} are accepted")
    reply = ParsedReply(
        text=text, items=[], returned=len(raw_items), system_version=clean_text(version) or None if version else None
    )
    seen: set[str] = set()
    for n, raw in enumerate(raw_items, 1):
        item_id, title, year, score, explanation = _item_fields(n, raw)
        item = _map_item(catalog, item_id, title, year)
        if item is None:
            reply.unmapped_count += 1
            if len(reply.unmapped) < MAX_UNMAPPED_KEPT:
                reply.unmapped.append({k: v for k, v in (("id", item_id), ("title", _name(title, year))) if v})
            continue
        if item.id in seen:
            continue
        seen.add(item.id)
        reply.ranking.append(item)
        if len(reply.items) < list_size:
            reply.items.append(item)
            if score is not None:
                reply.scores[item.id] = score
            if explanation:
                reply.explanations[item.id] = explanation
    raw_ranking = data.get("ranking")
    if raw_ranking is not None:  # optional: the whole ranking when the items are only what the reply shows
        if not isinstance(raw_ranking, list):
            raise InvalidResponse("'ranking' is not a list")
        if len(raw_ranking) > MAX_ITEMS:
            raise InvalidResponse(f"'ranking' has {len(raw_ranking)} entries; at most {MAX_ITEMS} are accepted")
        ranked: list[Item] = []
        ranked_ids: set[str] = set()
        for n, raw in enumerate(raw_ranking, 1):
            try:
                item_id, title, year, _score, _explanation = _item_fields(n, raw)
            except InvalidResponse as e:
                raise InvalidResponse(f"in 'ranking': {e}") from None
            item = _map_item(catalog, item_id, title, year)
            if item is not None and item.id not in ranked_ids:
                ranked_ids.add(item.id)
                ranked.append(item)
        reply.ranking, reply.ranking_sent = ranked, True
    return reply


def _item_fields(n: int, raw: Any):
    if not isinstance(raw, dict):
        raise InvalidResponse(f"item {n} is not an object")
    item_id = raw.get("id")
    if isinstance(item_id, int) and not isinstance(item_id, bool):
        item_id = str(item_id)
    if item_id is not None and (not isinstance(item_id, str) or len(item_id) > MAX_ID_CHARS):
        raise InvalidResponse(f"item {n}: 'id' must be a string of at most {MAX_ID_CHARS} characters")
    title = raw.get("title")
    if title is not None and (not isinstance(title, str) or len(title) > MAX_TITLE_CHARS):
        raise InvalidResponse(f"item {n}: 'title' must be a string of at most {MAX_TITLE_CHARS} characters")
    year = raw.get("year")
    if year is not None and (isinstance(year, bool) or not isinstance(year, int) or not 1800 <= year <= 2200):
        raise InvalidResponse(f"item {n}: 'year' must be a whole number such as 1995")
    score = raw.get("score")
    if score is not None:
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
            raise InvalidResponse(f"item {n}: 'score' must be a finite number")
        score = float(score)
    explanation = raw.get("explanation")
    if explanation is not None and (not isinstance(explanation, str) or len(explanation) > MAX_EXPLANATION_CHARS):
        raise InvalidResponse(f"item {n}: 'explanation' must be a string of at most {MAX_EXPLANATION_CHARS} characters")
    item_id = clean_text(item_id) if item_id else None
    title = clean_text(title) if title else None
    if not item_id and not title:
        raise InvalidResponse(f"item {n} has neither 'id' nor 'title'")
    return item_id, title, year, score, clean_text(explanation) if explanation else None


def _name(title: str | None, year: int | None) -> str | None:
    if not title:
        return None
    if year is not None and split_name(title)[1] is None:
        return f"{title} ({year})"
    return title


def _map_item(catalog: Catalog, item_id: str | None, title: str | None, year: int | None) -> Item | None:
    """The catalog item an entry denotes: its id if the catalog has it, else its title (and year)."""
    if item_id:
        item = catalog.get(item_id)
        if item is not None:
            return item
    name = _name(title, year)
    return catalog.match_name(name) if name else None


class Workers:
    """The URLs serving one system, taken in turn; a worker that failed rests a while, one that said it is full
    until the time it named. Shared by every conversation with the system (thread-safe)."""

    def __init__(
        self, urls: tuple[str, ...], *, rest: float = WORKER_REST_S, clock: Callable[[], float] = time.monotonic
    ):
        self.urls = urls
        self.rest = rest
        self._clock = clock
        self._next = 0
        self._down_until: dict[int, float] = {}
        self._busy_until: dict[int, float] = {}
        self._lock = threading.Lock()

    def pick(self) -> tuple[int, float]:
        """The next worker to ask and how long to wait first (0 unless every worker is resting).

        Round the list from where the last turn left off: the first worker neither failed nor full; else the
        full worker that is free soonest (with its wait); else, every worker having failed, the next one at once
        (the retry's backoff paces it).
        """
        with self._lock:
            now = self._clock()
            n = len(self.urls)
            order = [(self._next + k) % n for k in range(n)]
            up = [i for i in order if self._down_until.get(i, 0.0) <= now]
            free = [i for i in up if self._busy_until.get(i, 0.0) <= now]
            if free:
                chosen, wait = free[0], 0.0
            elif up:
                chosen = min(up, key=lambda i: self._busy_until.get(i, 0.0))
                wait = self._busy_until[chosen] - now
            else:
                chosen, wait = order[0], 0.0
            self._next = (chosen + 1) % n
            return chosen, max(0.0, wait)

    def failed(self, index: int) -> None:
        with self._lock:
            self._down_until[index] = self._clock() + self.rest

    def full(self, index: int, seconds: float) -> None:
        with self._lock:
            self._busy_until[index] = max(self._busy_until.get(index, 0.0), self._clock() + seconds)

    def answered(self, index: int) -> None:
        with self._lock:
            self._down_until.pop(index, None)
            self._busy_until.pop(index, None)


@dataclass
class _Answer:
    body: bytes
    attempts: int
    server_ms: float | None
    worker: int  # position in the system's URLs, from 0
    worker_name: str | None
    busy_waits: int


class RemoteCRS(CRSSystem):
    """A system that answers over HTTP with the ``crs-arena/1`` protocol.

    Building one costs nothing (no request is sent until the first turn). ``client`` and ``sleep`` are
    there for tests and benchmarks; ``backoff`` scales the retry waits.
    """

    def __init__(
        self,
        config: RemoteConfig,
        catalog: Catalog,
        *,
        client: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
        backoff: float = 1.0,
        env=os.environ,
    ):
        self.config = config
        self.catalog = catalog
        self.list_size = config.list_size
        self._sleep = sleep
        self._backoff = backoff
        self._env = env
        self._version: str | None = None
        self.workers = Workers(config.targets)
        self._client = client or httpx.Client(
            timeout=httpx.Timeout(config.timeout),
            follow_redirects=False,
            trust_env=False,
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
            headers={"User-Agent": USER_AGENT},
        )

    @property
    def info(self) -> SystemInfo:
        variant = self.config.description or "remote system (HTTP)"
        if self._version:
            variant = f"{variant} · version {self._version}"
        return SystemInfo(id=self.config.id, label=self.config.label, variant=variant)

    def close(self) -> None:
        self._client.close()

    def _error(self, message: str, kind: str, request_id: str | None = None) -> RemoteCRSError:
        ref = f" (request {request_id[:8]})" if request_id else ""
        return RemoteCRSError(f"{self.config.label} {message}{ref}", kind=kind, model=self.config.id)

    def _headers(self, request_id: str) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json", "X-Request-Id": request_id}
        if self.config.key_env:
            key = (self._env.get(self.config.key_env) or "").strip()
            if not key:
                raise self._error(
                    f"cannot be called: its key variable {self.config.key_env} is not set on the server.", "config"
                )
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def respond(self, conversation: Conversation) -> Turn:
        request_id = new_id()
        catalog_name = self.config.catalog or self.catalog.name
        payload = build_request(
            conversation,
            request_id=request_id,
            catalog=catalog_name,
            domain=self.catalog.domain,
            max_items=self.list_size,
        )
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        headers = self._headers(request_id)
        start = time.perf_counter()
        answer = self._post(body, headers, request_id)
        raw = answer.body
        try:
            data = json.loads(raw)
        except (UnicodeDecodeError, ValueError):
            log.warning("remote system %s: response to %s is not JSON (%d bytes)", self.config.id, request_id, len(raw))
            raise self._error(
                "sent a response that is not valid JSON; nothing was stored.", "bad_response", request_id
            ) from None
        try:
            reply = parse_response(data, self.catalog, list_size=self.list_size)
        except InvalidResponse as e:
            log.warning("remote system %s: invalid response to %s: %s", self.config.id, request_id, e)
            raise self._error(
                f"sent an invalid response ({e}); nothing was stored.", "bad_response", request_id
            ) from None
        if reply.system_version:
            self._version = reply.system_version
        metadata: dict[str, Any] = {
            "system": self.config.id,
            "remote": True,
            "request_id": request_id,
            "catalog": catalog_name,
            "latency_ms": round((time.perf_counter() - start) * 1000, 1),
            "attempts": answer.attempts,
            "items_returned": reply.returned,
            "items_unmapped": reply.unmapped_count,
        }
        if len(self.workers.urls) > 1:
            metadata["worker"] = answer.worker + 1
            metadata["workers"] = len(self.workers.urls)
        if answer.worker_name:
            metadata["worker_name"] = answer.worker_name
        if answer.busy_waits:
            metadata["busy_waits"] = answer.busy_waits
        if answer.server_ms is not None:
            metadata["server_ms"] = answer.server_ms
        if reply.unmapped:
            metadata["unmapped"] = reply.unmapped
        if reply.system_version:
            metadata["system_version"] = reply.system_version
        if reply.scores:
            metadata["scores"] = reply.scores
        if reply.explanations:
            metadata["explanations"] = reply.explanations
        # the whole ranking is kept when the system sent more than it shows (iEvaLM's recall reads it)
        sent_more = reply.ranking_sent or len(reply.ranking) > len(reply.items)
        ranking = [i.ref() for i in reply.ranking] if sent_more else []
        return Turn(
            role="system", text=reply.text, items=[i.ref() for i in reply.items], metadata=metadata, ranking=ranking
        )

    # -- transport ---------------------------------------------------------------------------------

    def _post(self, body: bytes, headers: dict[str, str], request_id: str) -> _Answer:
        """POST ``body`` to the system's workers in turn until one answers; raises :class:`RemoteCRSError` when no
        usable answer came.

        Failures (408/409/429/5xx, timeouts, connection errors) are retried as the LLM endpoints do, up to
        ``max_retries`` times, each on the next worker. "Full, retry after" (503 with ``Retry-After``) is waited out
        (on another worker if one is free) while the wait ends before the turn's deadline, without using a retry.
        """
        retries = max(0, self.config.max_retries)
        deadline = time.monotonic() + self.config.timeout * (retries + 1)
        attempts = failures = busy_waits = 0
        tries = lambda n: f"after {n} attempt{'s' if n > 1 else ''}"  # noqa: E731
        while True:
            index, until_free = self.workers.pick()
            if until_free > 0:
                if time.monotonic() + until_free > deadline:
                    said = f"HTTP 503, {tries(attempts)}" if attempts else "HTTP 503"
                    raise self._error(
                        f"is busy: every worker asked to wait longer than the turn's time limit allows ({said}). "
                        "Try again in a moment.",
                        "busy",
                        request_id,
                    )
                # with jitter, so that the turns told to wait do not all come back at once
                self._sleep(until_free * (1 + 0.25 * random.random()))
            url = self.workers.urls[index]
            attempts += 1
            wait: float | None = None
            attempt_deadline = time.perf_counter() + self.config.timeout  # for the whole answer, body included
            try:
                with self._client.stream(
                    "POST", url, content=body, headers=headers, timeout=self.config.timeout
                ) as response:
                    status = response.status_code
                    if 200 <= status < 300:
                        raw = self._read(response, request_id, attempt_deadline)
                        self.workers.answered(index)
                        return _Answer(
                            raw,
                            attempts,
                            _server_ms(response.headers),
                            index,
                            _worker_name(response.headers),
                            busy_waits,
                        )
                    after = _retry_after(response.headers) if status == 503 else None
                    if after is not None and busy_waits < MAX_BUSY_WAITS:  # back-pressure: full, not failing
                        self.workers.full(index, after)
                        busy_waits += 1
                        continue
                    if status in RETRY_STATUSES and failures < retries:
                        wait = _retry_after(response.headers)
                        if status >= 500:
                            self.workers.failed(index)
                    else:
                        raise self._status_error(status, tries(attempts), request_id)
            except httpx.TimeoutException:
                self.workers.failed(index)
                if failures >= retries:
                    raise self._error(
                        f"did not answer within {self.config.timeout:g} s ({tries(attempts)}).",
                        "timeout",
                        request_id,
                    ) from None
            except httpx.TransportError as e:
                log.info("remote system %s: %s on attempt %d", self.config.id, type(e).__name__, attempts)
                self.workers.failed(index)
                if failures >= retries:
                    raise self._error(f"could not be reached ({tries(attempts)}).", "connection", request_id) from None
            if wait is None:
                wait = min(BACKOFF_START * 2**failures, BACKOFF_MAX) * (1 - 0.25 * random.random())
            failures += 1
            self._sleep(wait * self._backoff)

    def _read(self, response: httpx.Response, request_id: str, deadline: float) -> bytes:
        """The body, refused beyond :data:`MAX_RESPONSE_BYTES` (announced or actual) or past the deadline."""
        limit = MAX_RESPONSE_BYTES
        announced = response.headers.get("content-length")
        if announced and announced.strip().isdigit() and int(announced) > limit:
            raise self._error(
                f"sent a response of {int(announced):,} bytes; at most {limit:,} are accepted, so "
                "nothing was read or stored.",
                "too_large",
                request_id,
            )
        chunks, size = [], 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > limit:
                raise self._error(
                    f"sent a response larger than {limit:,} bytes; it was not read further and nothing was stored.",
                    "too_large",
                    request_id,
                )
            if time.perf_counter() > deadline:
                raise httpx.ReadTimeout("the body took too long")
            chunks.append(chunk)
        return b"".join(chunks)

    def _status_error(self, status: int, tries: str, request_id: str) -> RemoteCRSError:
        if status == 429:
            return self._error(
                f"is rate-limiting requests (HTTP 429, {tries}). Try again later.", "rate_limit", request_id
            )
        if status in (401, 403):
            how = (
                f"check the variable {self.config.key_env}"
                if self.config.key_env
                else "its systems-file entry names no key variable (key_env)"
            )
            return self._error(f"refused the request's key (HTTP {status}): {how}.", "auth", request_id)
        if 300 <= status < 400:
            return self._error(
                f"answered with a redirect (HTTP {status}), which is not followed: the systems file "
                "should give the final URL.",
                "redirect",
                request_id,
            )
        if status >= 500 or status in RETRY_STATUSES:
            return self._error(f"failed with HTTP {status} ({tries}).", "server", request_id)
        return self._error(f"refused the request (HTTP {status}).", "refused", request_id)


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds the server asked to wait (``retry-after-ms`` or ``Retry-After``), if between 0 and 60."""
    value = None
    try:
        if headers.get("retry-after-ms"):
            value = float(headers["retry-after-ms"]) / 1000
        elif headers.get("retry-after"):
            text = headers["retry-after"].strip()
            try:
                value = float(text)
            except ValueError:
                value = parsedate_to_datetime(text).timestamp() - time.time()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if value is None or not 0 <= value <= MAX_RETRY_AFTER:
        return None
    return value


def _server_ms(headers: httpx.Headers) -> float | None:
    """The system's own processing time from a ``Server-Timing: crs;dur=12.3`` header, if it sent one."""
    match = re.search(r"(?:^|,)\s*crs\s*;[^,]*?dur=([0-9.]+)", headers.get("server-timing", ""))
    try:
        return float(match.group(1)) if match else None
    except ValueError:
        return None


def _worker_name(headers: httpx.Headers) -> str | None:
    """The name a worker gave itself (``X-CRS-Worker``), cleaned and cut short; None when it gave none."""
    name = _WORKER_NAME.sub("", headers.get("x-crs-worker", ""))[:MAX_WORKER_NAME_CHARS]
    return name or None
