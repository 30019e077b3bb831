"""One evaluation of one conversation: twelve factors, the debate, metrics, persuasiveness, all stored.

:func:`evaluate_conversation` is what the UI and the command line call. It
stores each factor score and each debate message the moment it is ready, so an
interrupted or partly failed run keeps what it finished. Evaluations are keyed
by a *fingerprint* of the judge setup (models, mode, rubric and prompt
versions, debate settings): running the same setup again on the same
conversation reuses the stored evaluation, fills only its gaps (factors
without a score, a debate that did not finish), and a finished one costs no
LLM call at all.

With ``EvaluationSetup(proxy=ProxyJudge)`` (see :mod:`evaluators.calibration`)
the scorer is ``proxy`` instead: the twelve LLM-free factor proxies are stored
with judge ``proxy`` and the overall score is the calibrated 0-100 (no debate).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from catalog.catalog import Catalog, get_catalog
from evaluators.debate import DebateConfig, DebateResult, run_debate
from evaluators.factor_judge import JudgeConfig, judge_conversation, judge_name
from evaluators.factors import FACTORS
from evaluators.judge_input import render_log
from evaluators.metrics import compute_metrics
from evaluators.persuasiveness import score_persuasiveness
from evaluators.rubric import load_rubric
from llm_clients.base import LLMClient, UsageTotals
from llm_clients.prompts import prompts_version
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

if TYPE_CHECKING:
    from evaluators.calibration import ProxyJudge


@dataclass
class EvaluationSetup:
    """Everything that decides an evaluation's result.

    :param judge: the factor judge (mode, models, concurrency); None with ``proxy``
    :param debate: the four-persona debate; None skips it
    :param persuasiveness: the model asked, as the user, how persuasive the last
        explanation was (iEvaLM); None skips it
    :param catalog: items for metrics and item details (default: the bundled catalog)
    :param proxy: the LLM-free proxy scorer instead of ``judge`` (no debate, no persuasiveness)
    """

    judge: JudgeConfig | None = None
    debate: DebateConfig | None = None
    persuasiveness: LLMClient | None = None
    catalog: Catalog | None = None
    proxy: ProxyJudge | None = None

    def __post_init__(self) -> None:
        if (self.judge is None) == (self.proxy is None):
            raise ValueError("an evaluation setup needs either an LLM judge or the proxy scorer, not both")
        if self.proxy is not None and (self.debate is not None or self.persuasiveness is not None):
            raise ValueError("the proxy scorer runs no debate and no persuasiveness model")

    @property
    def scorer(self) -> str:
        """Name of the scorer, stored with every evaluation: ``proxy``, ``llm:<model>`` or ``ensemble(…)``."""
        return self.proxy.name if self.proxy is not None else judge_name(self.judge.clients)

    def describe(self) -> dict:
        """The judge configuration as stored with the evaluation (no keys, no endpoints' secrets)."""
        if self.proxy is not None:
            return {**self.proxy.describe(), "catalog": (self.catalog or get_catalog()).name}
        j = self.judge
        return {
            "mode": j.mode,
            "judges": [c.model.key for c in j.clients],
            "per_factor": {f: [c.model.key for c in cs] for f, cs in sorted(j.per_factor.items())},
            "temperature": j.temperature,
            "seed": j.seed,
            "rubric": load_rubric(j.rubric_version).version,
            "judge_prompts": prompts_version("judge"),
            "debate": None
            if self.debate is None
            else {
                "models": {role: c.model.key for role, c in sorted(self.debate.clients.items())},
                "max_rounds": self.debate.max_rounds,
                "tolerance": self.debate.tolerance,
                "sequential": self.debate.sequential,
                "domain": self.debate.domain,
                "prompts": prompts_version("debate"),
            },
            "persuasiveness": None if self.persuasiveness is None else self.persuasiveness.model.key,
            "catalog": (self.catalog or get_catalog()).name,
        }

    def fingerprint(self) -> str:
        canonical = json.dumps(self.describe(), sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    def fresh(self) -> tuple[EvaluationSetup, list[LLMClient]]:
        """A copy whose clients count usage from zero (one per evaluation), and those clients."""
        clones: dict[int, LLMClient] = {}

        def c(client: LLMClient) -> LLMClient:
            return clones.setdefault(id(client), client.clone())

        judge = replace(
            self.judge,
            clients=[c(x) for x in self.judge.clients],
            per_factor={f: [c(x) for x in cs] for f, cs in self.judge.per_factor.items()},
        )
        debate = (
            None
            if self.debate is None
            else replace(self.debate, clients={r: c(x) for r, x in self.debate.clients.items()})
        )
        setup = replace(
            self,
            judge=judge,
            debate=debate,
            persuasiveness=None if self.persuasiveness is None else c(self.persuasiveness),
        )
        return setup, list(clones.values())


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
    fingerprint = setup.fingerprint()
    evaluation = None
    if not force:
        earlier = evaluations_for(db, conversation.id, fingerprint=fingerprint)
        evaluation = get_evaluation(db, earlier[-1]) if earlier else None
    if evaluation is not None:
        evaluation = _in_factor_order(evaluation)
    if evaluation is not None and evaluation.status == "done":
        for score in evaluation.factor_scores:
            on_factor and on_factor(score)
        for message in evaluation.debate:
            on_debate and on_debate(message)
        return evaluation
    if setup.proxy is not None:
        return _evaluate_with_proxy(conversation, setup, catalog, fingerprint, evaluation, db_path, on_factor)
    run, clients = setup.fresh()
    if evaluation is None:
        evaluation = start_evaluation(
            db,
            Evaluation(
                conversation_id=conversation.id,
                scorer=setup.scorer,
                rubric_version=load_rubric(setup.judge.rubric_version).version,
                config=setup.describe(),
                fingerprint=fingerprint,
            ),
        )

    # factors: keep the scored ones, judge the rest
    scores = {s.factor: s for s in evaluation.factor_scores if s.score is not None}
    for score in scores.values():
        on_factor and on_factor(score)

    def store(score: FactorScore) -> None:
        save_factor_score(get_db(db_path), evaluation.id, score)
        scores[score.factor] = score
        on_factor and on_factor(score)

    missing = [f for f in FACTORS if f not in scores]
    if missing:
        judge_conversation(conversation, run.judge, catalog=catalog, factors=missing, on_result=store)
    factor_scores = [scores[f] for f in FACTORS]

    # debate: it needs all factor results, so it runs again whenever factors were
    # (re)judged in this run or an earlier debate gave no score; otherwise it is kept
    debate: DebateResult | None = None
    debate_done = evaluation.overall is not None and bool(evaluation.debate) and not missing
    if run.debate is not None and not debate_done:
        clear_debate(db, evaluation.id)

        def said(message: DebateMessage) -> None:
            save_debate_message(get_db(db_path), evaluation.id, message)
            on_debate and on_debate(message)

        log = render_log(
            conversation,
            catalog,
            max_turns=run.judge.max_turns,
            max_chars=run.judge.max_log_chars,
            max_items=run.judge.max_items,
        )
        debate = run_debate(log.text, factor_scores, run.debate, on_message=said, domain=conversation.domain)
    elif run.debate is not None:
        for message in evaluation.debate:
            on_debate and on_debate(message)
        debate = DebateResult(
            final_score=evaluation.overall,
            rounds_used=evaluation.rounds_used or 0,
            consensus=bool(evaluation.consensus),
            messages=evaluation.debate,
        )

    metrics = compute_metrics(conversation, catalog)
    if run.persuasiveness is not None:
        p = score_persuasiveness(conversation, run.persuasiveness)
        metrics.update(
            {
                "persuasiveness": p.score,
                "persuasiveness_expected": p.expected,
                "persuasiveness_error": p.error,
                "persuasiveness_distribution": p.distribution,
                "persuasiveness_prompts": p.prompt_version,
            }
        )

    failed = [s.factor for s in factor_scores if s.score is None]
    debate_failed = debate is not None and debate.final_score is None
    status = "done" if not failed and not debate_failed else "partial"
    error = None
    if status == "partial":
        parts = []
        if failed:
            parts.append(f"{len(failed)} factor(s) without a score: {', '.join(failed)}")
        if debate_failed:
            parts.append("the debate produced no valid score")
        error = "; ".join(parts) + ". Run again with the same settings to fill the gaps."
    usage = UsageTotals(**(evaluation.usage or {}))  # earlier runs of this evaluation
    for client in clients:
        usage = usage.add(client.totals)
    finish_evaluation(
        get_db(db_path),
        evaluation.id,
        status=status,
        overall=debate.final_score if debate else None,
        rounds_used=debate.rounds_used if debate else None,
        consensus=debate.consensus if debate else None,
        error=error,
        metrics=metrics,
        usage=usage.to_dict(),
    )
    return _in_factor_order(get_evaluation(get_db(db_path), evaluation.id))


def _evaluate_with_proxy(
    conversation: Conversation,
    setup: EvaluationSetup,
    catalog: Catalog,
    fingerprint: str,
    evaluation: Evaluation | None,
    db_path,
    on_factor,
) -> Evaluation:
    """The proxy scorer: twelve proxies stored with judge ``proxy``, the calibrated overall (0-100), no LLM.

    A factor the proxies cannot measure is stored with score None and the reason in ``error``;
    the evaluation is still ``done`` (running it again would give the same result).
    """
    db = get_db(db_path)
    rubric = load_rubric().version
    verdict = setup.proxy.score(conversation, catalog)
    if evaluation is None:
        evaluation = start_evaluation(
            db,
            Evaluation(
                conversation_id=conversation.id,
                scorer=setup.scorer,
                rubric_version=rubric,
                config=setup.describe(),
                fingerprint=fingerprint,
            ),
        )
    for factor in FACTORS:
        proxy = verdict.result.factors[factor]
        score = FactorScore(
            factor=factor,
            score=proxy.score,
            judge=setup.scorer,
            rubric_version=rubric,
            rationale=proxy.detail,
            error=None if proxy.score is not None else proxy.detail,
            metadata={"proxy_version": verdict.result.version, "value": proxy.value},
        )
        save_factor_score(db, evaluation.id, score)
        on_factor and on_factor(score)
    metrics = compute_metrics(conversation, catalog)
    metrics.update(
        {
            "proxy_overall_0_4": verdict.overall,
            "proxy_features": verdict.result.features,
            "proxy_notes": list(verdict.result.notes),
        }
    )
    finish_evaluation(
        db, evaluation.id, status="done", overall=verdict.overall_100, metrics=metrics, usage=UsageTotals().to_dict()
    )
    return _in_factor_order(get_evaluation(db, evaluation.id))


def _in_factor_order(evaluation: Evaluation) -> Evaluation:
    position = {f: i for i, f in enumerate(FACTORS)}
    evaluation.factor_scores.sort(key=lambda s: position.get(s.factor, len(position)))
    return evaluation


def factor_mean(evaluation: Evaluation) -> float | None:
    """Mean of the scored factors (0-4), None when none was scored."""
    values = [s.score for s in evaluation.factor_scores if s.score is not None]
    return sum(values) / len(values) if values else None
