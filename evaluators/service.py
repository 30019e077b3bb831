"""Evaluation as a service for the command line and the app: many conversations, or one streamed.

* :func:`select` and :func:`evaluate_many`: a batch (``python -m evaluators evaluate`` and the
  Evaluate tab). Duplicate conversation ids are judged once, conversations without a system turn
  are skipped with a note, conversations are judged a few at a time, progress is reported after
  each one, and a conversation whose evaluation fails is recorded with the reason while the batch
  goes on.
* :func:`judge_stream`: one conversation judged in a worker thread, as a plain generator of events
  (each factor score as it arrives, each debate message, then the finished evaluation or the
  failure), which the Chat tab iterates to redraw.

Reasons given for a failure are safe to show: the message of an expected error (an LLM endpoint's,
a ``ValueError``), or "an internal error (it is logged)" for anything else, which is logged with
its traceback.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace

from evaluators.pipeline import EvaluationSetup, evaluate_conversation
from llm_clients.types import LLMError
from storage.records import Conversation, DebateMessage, Evaluation, FactorScore

log = logging.getLogger(__name__)
INTERNAL_ERROR = "an internal error (it is logged)"


def failure_reason(error: BaseException, conversation_id: str) -> str:
    """What to tell people about a failed evaluation (an unexpected error is logged, not shown)."""
    if isinstance(error, (LLMError, ValueError)):
        return str(error)
    log.error("evaluating %s failed", conversation_id, exc_info=error)
    return INTERNAL_ERROR


# -- many conversations --------------------------------------------------------------------------------


def select(conversations: Iterable[Conversation], *, limit: int | None = None) -> tuple[list[Conversation], list[str]]:
    """The conversations to judge, in order, and a note for each one left out.

    A repeated id is judged once (its first occurrence); a conversation without a system turn has
    nothing to judge. ``limit`` (when positive) keeps the first that many judgeable ones.
    """
    judgeable: list[Conversation] = []
    skipped: list[str] = []
    seen: set[str] = set()
    for c in conversations:
        if c.id in seen:
            skipped.append(f"{c.id}: uploaded more than once (judged once)")
        elif not any(t.role == "system" for t in c.turns):
            skipped.append(f"{c.id}: no system turn to judge")
        else:
            judgeable.append(c)
        seen.add(c.id)
    if limit is not None and limit > 0:
        judgeable = judgeable[:limit]
    return judgeable, skipped


@dataclass
class Judged:
    """One conversation of a batch: its evaluation, or why it has none."""

    conversation: Conversation
    evaluation: Evaluation | None = None
    error: str | None = None


@dataclass
class BatchResult:
    """A batch's outcome, in the order the conversations were given."""

    items: list[Judged] = field(default_factory=list)

    @property
    def results(self) -> list[tuple[Conversation, Evaluation]]:
        """The evaluated conversations with their evaluations."""
        return [(j.conversation, j.evaluation) for j in self.items if j.evaluation is not None]

    @property
    def failures(self) -> list[tuple[Conversation, str]]:
        """The conversations whose evaluation failed, with the reason."""
        return [(j.conversation, j.error or INTERNAL_ERROR) for j in self.items if j.evaluation is None]

    @property
    def complete(self) -> int:
        return sum(1 for _, e in self.results if e.status == "done")


def evaluate_many(
    conversations: list[Conversation],
    setup: EvaluationSetup,
    *,
    db_path=None,
    workers: int = 1,
    force: bool = False,
    on_result: Callable[[Judged], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> BatchResult:
    """Evaluate each conversation (see :func:`select` for which), ``workers`` at a time.

    A conversation whose evaluation raises is recorded with the reason (:func:`failure_reason`) and
    the others go on; what it finished before failing is stored.

    :param on_result: called with each conversation's outcome as soon as it is known
    :param progress: called with (finished, total) before the first and after each conversation
    :param force: start new evaluations instead of reusing stored ones
    """
    total = len(conversations)
    outcomes: dict[int, Judged] = {}
    if progress:
        progress(0, total)
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="evaluate") as pool:
        futures = {
            pool.submit(evaluate_conversation, c, setup, db_path=db_path, force=force): (i, c)
            for i, c in enumerate(conversations)
        }
        for n, future in enumerate(as_completed(futures), 1):
            index, conversation = futures[future]
            try:
                judged = Judged(conversation, evaluation=future.result())
            except Exception as e:  # one failed conversation must not stop the batch
                judged = Judged(conversation, error=failure_reason(e, conversation.id))
            outcomes[index] = judged
            if on_result:
                on_result(judged)
            if progress:
                progress(n, total)
    return BatchResult([outcomes[i] for i in range(total)])


# -- one conversation, streamed ------------------------------------------------------------------------


@dataclass(frozen=True)
class FactorScored:
    """A factor score is ready (or was kept from an earlier run)."""

    score: FactorScore
    settled: bool = True  # nothing else is ready right now: a good moment to redraw


@dataclass(frozen=True)
class DebateSaid:
    """A debate statement is ready."""

    message: DebateMessage
    settled: bool = True


@dataclass(frozen=True)
class Finished:
    """The evaluation is finished and stored (``status`` says whether it has gaps)."""

    evaluation: Evaluation
    settled: bool = True


@dataclass(frozen=True)
class Failed:
    """Judging stopped; what finished is stored. ``reason`` is safe to show."""

    reason: str
    settled: bool = True


JudgeEvent = FactorScored | DebateSaid | Finished | Failed


def judge_stream(
    conversation: Conversation, setup: EvaluationSetup, *, db_path=None, force: bool = False
) -> Iterator[JudgeEvent]:
    """Judge ``conversation`` in a worker thread, yielding each result as it arrives.

    The last event is :class:`Finished` or :class:`Failed`. An event's ``settled`` is False when
    more events are already waiting, so a view can redraw once per burst.
    """
    events: queue.Queue[JudgeEvent] = queue.Queue()

    def work() -> None:
        try:
            evaluation = evaluate_conversation(
                conversation,
                setup,
                db_path=db_path,
                force=force,
                on_factor=lambda score: events.put(FactorScored(score)),
                on_debate=lambda message: events.put(DebateSaid(message)),
            )
            events.put(Finished(evaluation))
        except Exception as e:  # the worker must always report back
            events.put(Failed(failure_reason(e, conversation.id)))

    threading.Thread(target=work, name="judge", daemon=True).start()
    while True:
        event = events.get()
        if not isinstance(event, (Finished, Failed)):
            event = _with_settled(event, events.empty())
        yield event
        if isinstance(event, (Finished, Failed)):
            return


def _with_settled(event: FactorScored | DebateSaid, settled: bool) -> FactorScored | DebateSaid:
    return replace(event, settled=settled)
