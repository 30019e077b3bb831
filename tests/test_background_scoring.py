"""Every chat and arena conversation is scored in the background (evaluators/background.py): once idle or ended,
again when it grew, never twice at one length; a bounded queue that sheds scoring, never chat; a restart that
resumes; a failing judge that leaves the conversation unscored and tries again. Real SQLite, the real proxy."""

from __future__ import annotations

import threading
import time

import pytest

from evaluators.background import BackgroundScorer
from evaluators.scorer_setup import build_setup
from storage.conversations import append_turns, get_conversation, save_conversation
from storage.db import get_db
from storage.evaluations import evaluations_for, get_evaluation
from storage.records import Conversation, Turn
from storage.stats import unscored_conversations

WAIT_ROUNDS = 400  # polls of 0.05 s: a bound for every wait, never a timing assert


def _chat(db_path, *, source="chat", replies=1, text="Any good crime films?") -> str:
    turns = []
    for n in range(replies):
        turns += [
            Turn("user", text if n == 0 else "Another one?"),
            Turn("system", "You might like Heat (1995), a crime film."),
        ]
    return save_conversation(get_db(db_path), Conversation(system_id="retrieval", source=source, turns=turns)).id


def _wait(condition) -> bool:
    for _ in range(WAIT_ROUNDS):
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def _proxy(db_path):
    return build_setup(db_path=db_path, scorer="proxy")


def _evaluations(db_path, conversation_id, setup) -> list[str]:
    return evaluations_for(get_db(db_path), conversation_id, fingerprint=setup.fingerprint())


def test_a_conversation_is_scored_once_idle_and_again_when_it_grew(db_path):
    scorer = BackgroundScorer(db_path, idle_s=0.05).start()
    try:
        conversation_id = _chat(db_path)
        scorer.touch(conversation_id)
        setup = scorer.setup()
        assert _wait(lambda: scorer.counts.scored == 1)
        first = get_evaluation(get_db(db_path), _evaluations(db_path, conversation_id, setup)[-1])
        assert first.status == "done" and first.metrics["turns_judged"] == 2 and first.factor_scores
        scorer.touch(conversation_id)  # nothing new: no second evaluation
        assert _wait(lambda: scorer.counts.skipped == 1)
        assert len(_evaluations(db_path, conversation_id, setup)) == 1
        conversation = get_conversation(get_db(db_path), conversation_id)
        append_turns(get_db(db_path), conversation, [Turn("user", "Another one?"), Turn("system", "Try Alien (1979).")])
        scorer.touch(conversation_id)
        assert _wait(lambda: scorer.counts.scored == 2)
        latest = get_evaluation(get_db(db_path), _evaluations(db_path, conversation_id, setup)[-1])
        assert latest.metrics["turns_judged"] == 4 and len(_evaluations(db_path, conversation_id, setup)) == 2
    finally:
        scorer.stop()


def test_touch_returns_at_once_and_later_turns_move_the_time(db_path):
    now = [1000.0]  # the scorer's clock, moved by hand: when a conversation is due is checked without waiting
    scorer = BackgroundScorer(db_path, idle_s=30, clock=lambda: now[0])  # not started: touch only notes
    conversation_id = _chat(db_path)
    assert scorer.touch(conversation_id) and scorer.pending() == 1
    assert scorer.due(conversation_id) == pytest.approx(1030.0)  # idle_s after the turn
    now[0] = 1010.0
    assert scorer.touch(conversation_id) and scorer.pending() == 1  # once per conversation
    assert scorer.due(conversation_id) == pytest.approx(1040.0)  # a later turn moves the time later
    now[0] = 1005.0  # a touch can never move it earlier (a clock read out of order, a late thread)
    assert scorer.touch(conversation_id) and scorer.due(conversation_id) == pytest.approx(1040.0)
    now[0] = 1020.0
    assert scorer.touch(conversation_id, ended=True) and scorer.due(conversation_id) == pytest.approx(1020.0)  # now
    assert scorer.touch(None) and scorer.pending() == 1
    assert scorer.due("no-such-conversation") is None


def test_the_queue_is_bounded_and_a_sweep_picks_up_what_was_shed(db_path):
    ids = [_chat(db_path) for _ in range(3)]
    scorer = BackgroundScorer(db_path, idle_s=3600, max_pending=2)
    assert [scorer.touch(i) for i in ids] == [True, True, False]
    assert scorer.counts.shed == 1 and scorer.pending() == 2
    for i in ids[:2]:
        assert scorer.score(i)
    assert unscored_conversations(get_db(db_path), fingerprint=scorer.setup().fingerprint()) == [ids[2]]
    fresh = BackgroundScorer(db_path, idle_s=3600, max_pending=2)
    assert fresh.sweep() == 1 and fresh.score(ids[2])
    assert unscored_conversations(get_db(db_path), fingerprint=fresh.setup().fingerprint()) == []


def test_a_restart_resumes_what_was_left_and_only_chat_and_arena_are_scored(db_path):
    chat, arena = _chat(db_path), _chat(db_path, source="arena")
    upload, simulated = _chat(db_path, source="upload"), _chat(db_path, source="simulation")
    silent = save_conversation(get_db(db_path), Conversation(system_id="retrieval", turns=[Turn("user", "hi")])).id
    scorer = BackgroundScorer(db_path, idle_s=3600).start()  # started: its first act is a sweep
    try:
        assert _wait(lambda: scorer.counts.scored == 2)
        setup = scorer.setup()
        assert _evaluations(db_path, chat, setup) and _evaluations(db_path, arena, setup)
        for other in (upload, simulated, silent):
            assert not _evaluations(db_path, other, setup)
    finally:
        scorer.stop()


class _FlakyScorer:
    """Wraps the proxy: the first ``fail`` runs raise as a judge that timed out would."""

    def __init__(self, inner, fail: int) -> None:
        self.inner, self.fail, self.calls = inner, fail, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def run(self, *args, **kwargs):
        self.calls += 1
        if self.calls <= self.fail:
            raise TimeoutError("the judge timed out")
        return self.inner.run(*args, **kwargs)


def test_a_failing_judge_leaves_the_conversation_unscored_and_it_is_tried_again(db_path):
    get_db(db_path)  # the file exists before the scorer's thread opens it too (storage/db.py waits, bounded, if not)
    setup = _proxy(db_path)
    setup.scorer = _FlakyScorer(setup.scorer, fail=1)
    scorer = BackgroundScorer(db_path, idle_s=0.01, retry_s=0.2, setup_factory=lambda: setup).start()
    try:
        conversation_id = _chat(db_path)
        before = get_conversation(get_db(db_path), conversation_id)
        scorer.touch(conversation_id)
        assert _wait(lambda: scorer.counts.failed == 1)
        assert "timed out" in scorer.counts.last_error
        assert get_conversation(get_db(db_path), conversation_id).turns == before.turns  # nothing lost
        assert _wait(lambda: scorer.counts.scored == 1)  # the retry
        assert _evaluations(db_path, conversation_id, setup)
    finally:
        scorer.stop()


def test_a_burst_of_conversations_from_many_threads_ends_up_scored_once_each(db_path):
    scorer = BackgroundScorer(db_path, idle_s=0.05).start()
    ids: list[str] = []
    lock = threading.Lock()

    def session(n: int) -> None:
        conversation_id = _chat(db_path, replies=1 + n % 3, text=f"Any good films number {n}?")
        with lock:
            ids.append(conversation_id)
        for _ in range(3):
            scorer.touch(conversation_id)

    threads = [threading.Thread(target=session, args=(n,)) for n in range(12)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        setup = scorer.setup()
        assert _wait(lambda: not unscored_conversations(get_db(db_path), fingerprint=setup.fingerprint()))
        assert len(ids) == 12 and all(len(_evaluations(db_path, i, setup)) == 1 for i in ids)
        assert scorer.counts.scored == 12 and scorer.counts.failed == 0
    finally:
        scorer.stop()


@pytest.mark.parametrize("bad", ["", None])
def test_nothing_to_score_is_not_an_error(db_path, bad):
    scorer = BackgroundScorer(db_path)
    assert scorer.touch(bad) and not scorer.score("no-such-conversation") and scorer.counts.failed == 0
