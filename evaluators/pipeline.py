"""One evaluation of one conversation with any scorer, everything stored as it happens.

:func:`evaluate_conversation` is what every batch, the UI and the command line end up calling (the
batch and streaming wrappers are in :mod:`evaluators.service`). It stores each factor score and each
debate message the moment the scorer gives it, so an interrupted or partly failed run keeps what it
finished. Evaluations are keyed by a *fingerprint* of the setup (the scorer's
:meth:`~evaluators.scorers.Scorer.describe` and the catalog): running the same setup again on the
same conversation reuses the stored evaluation, lets the scorer fill only its gaps, and a finished
one costs nothing at all.

What a scorer does is its own business (:mod:`evaluators.scorers`); this module does what they
share: the conversation row, reuse, the evaluation row, the deterministic metrics and the usage.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from catalog.catalog import Catalog, get_catalog
from evaluators.factors import FACTORS
from evaluators.metrics import compute_metrics
from evaluators.proxy.scorer import offline_turn_scores
from evaluators.scorers import Scorer
from llm_clients.base import UsageTotals
from storage.conversations import get_conversation, save_conversation
from storage.db import get_db
from storage.evaluations import (
    clear_debate,
    evaluations_for,
    finish_evaluation,
    get_evaluation,
    save_debate_message,
    save_factor_score,
    start_evaluation,
)
from storage.records import Conversation, DebateMessage, Evaluation, FactorScore


class EvaluationSetup:
    """Everything that decides an evaluation's result: the scorer and the catalog.

    Example::

        EvaluationSetup(load_proxy_judge(), catalog=get_catalog("redial"))
        EvaluationSetup(llm_judge(JudgeConfig(clients=[client])), catalog=get_catalog("redial"))

    :param scorer: any :class:`~evaluators.scorers.Scorer`; an LLM judge, its debate and its
        persuasiveness model are built into one by :func:`evaluators.judge.llm_scorer.llm_judge`
    :param catalog: items for metrics and item details (default: the bundled catalog)
    :raises ValueError: no scorer was given
    """

    def __init__(self, scorer: Scorer | None = None, catalog: Catalog | None = None) -> None:
        if scorer is None:
            raise ValueError("an evaluation setup needs a scorer: either an LLM judge or the proxy scorer")
        self.scorer: Scorer = scorer
        self.catalog = catalog

    @property
    def name(self) -> str:
        """The scorer's name, stored with every evaluation: ``proxy``, ``llm:<model>`` or ``ensemble(…)``."""
        return self.scorer.name

    def describe(self) -> dict[str, Any]:
        """The configuration stored with the evaluation (no keys, no endpoints' secrets)."""
        return {**self.scorer.describe(), "catalog": (self.catalog or get_catalog()).name}

    def fingerprint(self) -> str:
        canonical = json.dumps(self.describe(), sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]


class _Record:
    """The :class:`~evaluators.scorers.Recorder` of one evaluation: stores, then reports."""

    def __init__(
        self,
        db_path,
        evaluation: Evaluation | None,
        new: Callable[[], Evaluation],
        on_factor: Callable[[FactorScore], None] | None,
        on_debate: Callable[[DebateMessage], None] | None,
    ) -> None:
        self.db_path = db_path
        self.evaluation = evaluation
        self._new = new
        self._on_factor = on_factor
        self._on_debate = on_debate

    @property
    def evaluation_id(self) -> str:
        self.start()
        assert self.evaluation is not None
        return self.evaluation.id

    def start(self) -> None:
        if self.evaluation is None:
            self.evaluation = start_evaluation(get_db(self.db_path), self._new())

    def factor(self, score: FactorScore) -> None:
        save_factor_score(get_db(self.db_path), self.evaluation_id, score)
        self.show_factor(score)

    def show_factor(self, score: FactorScore) -> None:
        if self._on_factor is not None:
            self._on_factor(score)

    def debate(self, message: DebateMessage) -> None:
        save_debate_message(get_db(self.db_path), self.evaluation_id, message)
        self.show_debate(message)

    def show_debate(self, message: DebateMessage) -> None:
        if self._on_debate is not None:
            self._on_debate(message)

    def clear_debate(self) -> None:
        clear_debate(get_db(self.db_path), self.evaluation_id)


def evaluate_conversation(
    conversation: Conversation,
    setup: EvaluationSetup,
    *,
    db_path=None,
    on_factor: Callable[[FactorScore], None] | None = None,
    on_debate: Callable[[DebateMessage], None] | None = None,
    force: bool = False,
) -> Evaluation:
    """Evaluate ``conversation`` with ``setup``, storing everything as it happens.

    :param on_factor: called with each factor score as soon as it is ready
        (cached scores of an earlier run are replayed first)
    :param on_debate: called with each debate message as soon as it is ready
    :param force: start a new evaluation even if one with this setup exists
    :raises ValueError: the conversation has no system turn to judge
    """
    if not any(t.role == "system" for t in conversation.turns):
        raise ValueError("the conversation has no system turn to judge")
    db = get_db(db_path)
    if get_conversation(db, conversation.id) is None:
        save_conversation(db, conversation)
    catalog = setup.catalog or get_catalog()
    scorer = setup.scorer
    fingerprint = setup.fingerprint()
    evaluation = None
    if not force:
        earlier = evaluations_for(db, conversation.id, fingerprint=fingerprint)
        evaluation = get_evaluation(db, earlier[-1]) if earlier else None
    if evaluation is not None:
        evaluation = _in_factor_order(evaluation)
        if evaluation.status == "done":
            for score in evaluation.factor_scores:
                on_factor and on_factor(score)
            for message in evaluation.debate:
                on_debate and on_debate(message)
            return evaluation

    def new() -> Evaluation:
        return Evaluation(
            conversation_id=conversation.id,
            scorer=scorer.name,
            rubric_version=scorer.rubric_version,
            config=setup.describe(),
            fingerprint=fingerprint,
        )

    record = _Record(db_path, evaluation, new, on_factor, on_debate)
    outcome = scorer.run(conversation, evaluation, catalog=catalog, record=record)
    metrics = compute_metrics(conversation, catalog)
    metrics.update(outcome.metrics)
    if "turn_scores" not in metrics:  # the proxy gives its own; any other scorer gets the offline turn scorer's
        metrics["turn_scores"] = offline_turn_scores(conversation, catalog)
    metrics["turns_judged"] = len(conversation.turns)  # a conversation that grew after this is judged again
    usage = UsageTotals(**((evaluation.usage if evaluation else None) or {})).add(outcome.usage)  # earlier runs too
    finish_evaluation(
        get_db(db_path),
        record.evaluation_id,
        status=outcome.status,
        overall=outcome.overall,
        rounds_used=outcome.rounds_used,
        consensus=outcome.consensus,
        error=outcome.error,
        metrics=metrics,
        usage=usage.to_dict(),
    )
    finished = get_evaluation(get_db(db_path), record.evaluation_id)
    assert finished is not None
    return _in_factor_order(finished)


def _in_factor_order(evaluation: Evaluation) -> Evaluation:
    position = {f: i for i, f in enumerate(FACTORS)}
    evaluation.factor_scores.sort(key=lambda s: position.get(s.factor, len(position)))
    return evaluation


def factor_mean(evaluation: Evaluation) -> float | None:
    """Mean of the scored factors (0-4), None when none was scored."""
    values = [s.score for s in evaluation.factor_scores if s.score is not None]
    return sum(values) / len(values) if values else None
