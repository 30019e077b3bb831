"""Every chat and arena conversation is scored, in the background, by the default judge setup.

The leaderboard's vote ratings come from arena battles and its CoRE columns from evaluations; without this,
only conversations someone judged by hand were scored, so the two described different conversations. Here a
conversation is scored when it goes idle (no new turn for ``idle_s``) or ends (a vote, a new conversation),
and again when it has grown since. A reply or a vote never waits: :meth:`BackgroundScorer.touch` only notes
the conversation.

* **The setup** is :func:`evaluators.scorer_setup.build_setup` with ``scorer="auto"``: the proxy when no
  capable LLM is configured, the configured LLM judge otherwise (its 12 factors; the debate is not run in the
  background, it is the expensive part and the overall of the LLM judge comes from it only when asked for).
* **Bounded.** At most ``max_pending`` conversations wait; a new one beyond that is shed (counted, logged)
  and picked up by the next sweep, so a flood of conversations sheds scoring, never chat.
* **Restart and faults.** :meth:`sweep` (at start, then every ``sweep_s`` when nothing waits) finds every
  conversation whose latest evaluation by the setup is missing or judged fewer turns than it has now
  (:func:`storage.stats.unscored_conversations`), so a restart resumes what was left. A judge that fails or
  times out leaves the conversation unscored (nothing of it is lost), and it is tried again after
  ``retry_s``, then by later sweeps.
"""

from __future__ import annotations

import heapq
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from storage.conversations import get_conversation
from storage.db import get_db
from storage.stats import unscored_conversations

if TYPE_CHECKING:
    from evaluators.pipeline import EvaluationSetup

log = logging.getLogger(__name__)


@dataclass
class ScoringCounts:
    scored: int = 0
    failed: int = 0
    shed: int = 0
    skipped: int = 0  # nothing to score (no system turn, or already scored at this length)
    last_error: str = ""


@dataclass
class BackgroundScorer:
    db_path: str | os.PathLike[Any]
    idle_s: float = 30.0
    max_pending: int = 1000
    retry_s: float = 300.0
    sweep_s: float = 600.0
    catalog_name: str = "bundled"
    pace: float = 1.0  # rest after each conversation, as a multiple of the time it took
    on_scored: Callable[[str], None] | None = None  # e.g. poke the leaderboard's refresher
    setup_factory: Callable[[], EvaluationSetup] | None = None  # tests: a setup whose judge fails, or is slow
    counts: ScoringCounts = field(default_factory=ScoringCounts)
    # when a conversation is due is read from this clock (tests: one they move, so "a later turn moves it later" is
    # checked without waiting); the worker's waits are real time either way
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        self._due: dict[str, float] = {}  # conversation id -> when to score it
        self._heap: list[tuple[float, str]] = []
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._setup: EvaluationSetup | None = None
        self._last_sweep = 0.0

    # -- what the app calls ----------------------------------------------------------------------------

    def touch(self, conversation_id: str | None, *, ended: bool = False) -> bool:
        """Note that a conversation changed (``ended``: it will not go on, score it now). Returns False when
        it was shed because ``max_pending`` conversations already wait."""
        if not conversation_id:
            return True
        due = self.clock() + (0.0 if ended else self.idle_s)
        with self._cond:
            if conversation_id not in self._due and len(self._due) >= self.max_pending:
                self.counts.shed += 1
                log.warning("background scoring is full (%d waiting): %s shed", self.max_pending, conversation_id)
                return False
            if conversation_id in self._due and not ended:
                due = max(due, self._due[conversation_id])  # a later turn moves it later
            elif conversation_id in self._due:
                due = min(due, self._due[conversation_id])
            self._due[conversation_id] = due
            heapq.heappush(self._heap, (due, conversation_id))
            self._cond.notify()
        return True

    def start(self) -> BackgroundScorer:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="background-scoring", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    def pending(self) -> int:
        with self._cond:
            return len(self._due)

    def due(self, conversation_id: str) -> float | None:
        """When the conversation will be scored (on :attr:`clock`), or None when it does not wait."""
        with self._cond:
            return self._due.get(conversation_id)

    def sweep(self) -> int:
        """Queue every chat and arena conversation the setup has not scored at its current length; returns how
        many were queued (those beyond ``max_pending`` wait for the next sweep)."""
        self._last_sweep = self.clock()
        try:
            setup = self.setup()
            ids = unscored_conversations(get_db(self.db_path), fingerprint=setup.fingerprint(), limit=self.max_pending)
        except Exception as e:  # the judge cannot even be set up: say so, chat goes on
            self.counts.last_error = f"{type(e).__name__}: {e}"
            log.warning("background scoring cannot sweep: %s", self.counts.last_error)
            return 0
        return sum(1 for i in ids if self.touch(i, ended=True))

    def setup(self) -> EvaluationSetup:
        if self._setup is None:
            if self.setup_factory is not None:
                self._setup = self.setup_factory()
            else:
                from evaluators.scorer_setup import build_setup

                self._setup = build_setup(
                    db_path=self.db_path, scorer="auto", debate=False, catalog_name=self.catalog_name
                )
        return self._setup

    # -- the worker ------------------------------------------------------------------------------------

    def _run(self) -> None:
        self.sweep()
        while not self._stop.is_set():
            conversation_id = self._next()
            if conversation_id is None:
                continue
            start = time.monotonic()
            self.score(conversation_id)
            # background work yields: after each conversation, rest as long as it took (at most half of a core
            # goes to scoring, so a burst of conversations to score slows chat less; bench/load.py measures it)
            self._stop.wait(min(self.pace * (time.monotonic() - start), 2.0))

    def _next(self) -> str | None:
        """The next conversation whose time has come, waiting for it (None: woke up for another reason)."""
        with self._cond:
            while self._heap:
                due, conversation_id = self._heap[0]
                if self._due.get(conversation_id) != due:  # a stale entry: the conversation was touched again
                    heapq.heappop(self._heap)
                    continue
                wait = due - self.clock()
                if wait <= 0:
                    heapq.heappop(self._heap)
                    del self._due[conversation_id]
                    return conversation_id
                self._cond.wait(min(wait, 1.0))
                return None
            self._cond.wait(1.0)
        if self.clock() - self._last_sweep >= self.sweep_s and not self._stop.is_set():
            self.sweep()
        return None

    def score(self, conversation_id: str) -> bool:
        """Score one conversation now if it needs it; never raises. True when an evaluation was stored."""
        from evaluators.pipeline import evaluate_conversation

        try:
            setup = self.setup()
            db = get_db(self.db_path)
            if not unscored_conversations(db, fingerprint=setup.fingerprint(), conversation_id=conversation_id):
                self.counts.skipped += 1  # no system turn yet, or already scored at this length
                return False
            conversation = get_conversation(db, conversation_id)
            if conversation is None:
                self.counts.skipped += 1
                return False
            evaluation = evaluate_conversation(conversation, setup, db_path=self.db_path, force=True)
        except Exception as e:  # the judge failed or timed out: kept unscored, tried again later
            self.counts.failed += 1
            self.counts.last_error = f"{type(e).__name__}: {e}"
            log.warning("background scoring of %s failed: %s", conversation_id, self.counts.last_error)
            self._retry_later(conversation_id)
            return False
        if evaluation.status not in ("done", "partial"):
            self.counts.failed += 1
            self.counts.last_error = evaluation.error or evaluation.status
            self._retry_later(conversation_id)
            return False
        self.counts.scored += 1
        if self.on_scored is not None:
            self.on_scored(conversation_id)
        return True

    def _retry_later(self, conversation_id: str) -> None:
        with self._cond:
            if conversation_id not in self._due and len(self._due) < self.max_pending:
                due = self.clock() + self.retry_s
                self._due[conversation_id] = due
                heapq.heappush(self._heap, (due, conversation_id))
