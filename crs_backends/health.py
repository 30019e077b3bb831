"""Which systems failed to answer a moment ago, so the arena does not draw them into new battles.

A battle whose side cannot answer cannot be voted on: the person typed for nothing, and a system that is
down (a remote endpoint that times out, a plug-in that raises) would keep being drawn, since the pair choice
favours the pairs with the fewest battles, which a failing system's pairs soon are. So every answer's outcome
is noted here (the chat session notes each one; the arena also notes a system that could not even be loaded),
and a system whose latest answer failed less than :data:`REST_SECONDS` ago rests: the arena leaves it out
of new battles until then, or until it answers someone in the Chat tab. Battles already running keep both
systems (the person may retry), and nothing here touches stored data or the board.

In-process and in memory, like the loaded systems themselves: a restart forgets it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass

log = logging.getLogger(__name__)

DEFAULT_REST_SECONDS = 300.0


def _rest_seconds(raw: str | None) -> float:
    """``CRS_ARENA_REST_SECONDS``: a number of seconds (0 turns resting off); anything else is the default."""
    try:
        value = float(raw) if raw not in (None, "") else DEFAULT_REST_SECONDS
    except ValueError:
        log.warning("CRS_ARENA_REST_SECONDS=%r is not a number of seconds; using %g", raw, DEFAULT_REST_SECONDS)
        return DEFAULT_REST_SECONDS
    return value if value >= 0 and value == value else DEFAULT_REST_SECONDS


REST_SECONDS = _rest_seconds(os.environ.get("CRS_ARENA_REST_SECONDS"))


@dataclass(frozen=True)
class Outcome:
    ok: bool
    at: float  # time.monotonic()


_latest: dict[str, Outcome] = {}
_lock = threading.Lock()


def note(system_id: str, ok: bool) -> None:
    """Record the outcome of one answer."""
    with _lock:
        _latest[system_id] = Outcome(ok, time.monotonic())


def resting(system_id: str, now: float | None = None) -> bool:
    """Whether the system's latest answer failed less than :data:`REST_SECONDS` ago."""
    with _lock:
        outcome = _latest.get(system_id)
    if outcome is None or outcome.ok:
        return False
    return (time.monotonic() if now is None else now) - outcome.at < REST_SECONDS


def resting_ids(system_ids, now: float | None = None) -> list[str]:
    return [s for s in system_ids if resting(s, now)]


def forget() -> None:
    """Clear every outcome (tests; a fresh process starts empty)."""
    with _lock:
        _latest.clear()
