"""The LLM scorers: the CoRE factor judge with the four-persona debate, one judge model or several.

:class:`LLMJudge` judges the twelve factors with one model (stored as ``llm:<model>``);
:class:`EnsembleJudge` asks several models and averages them per factor (``ensemble(<a>+<b>)``).
Both may run the debate, which gives the overall score, and the iEvaLM persuasiveness question.
:func:`llm_judge` picks the one that fits a judge configuration. An evaluation that stopped
half-way keeps its scored factors: only the gaps are judged again, and the debate runs again
whenever a factor was (re)judged or an earlier debate gave no score.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from catalog.catalog import Catalog
from evaluators.factors import FACTORS
from evaluators.judge.debate import (
    DebateConfig,
    DebateResult,
    missing_personas,
    overall_formed,
    persona_names,
    run_debate,
)
from evaluators.judge.factor_judge import JudgeConfig, judge_conversation, judge_name
from evaluators.judge.inputs import render_log
from evaluators.judge.persuasiveness import score_persuasiveness
from evaluators.judge.rubric import load_rubric
from evaluators.scorers import DEMO_NOTICE, Outcome, Recorder
from llm_clients.base import LLMClient, UsageTotals
from llm_clients.prompts import prompts_version
from storage.records import Conversation, Evaluation, FactorScore


@dataclass
class LLMJudge:
    """The CoRE judge with one judge model (``llm:<model>``), the debate and persuasiveness optional.

    :param judge: the factor judge (mode, model, concurrency)
    :param debate: the four-persona debate; None skips it (and leaves the overall score empty)
    :param persuasiveness: the model asked, as the user, how persuasive the last explanation was
        (iEvaLM); None skips it
    """

    judge: JudgeConfig
    debate: DebateConfig | None = None
    persuasiveness: LLMClient | None = None

    def __post_init__(self) -> None:
        self._check_models(len(self.judge.clients))

    def _check_models(self, n: int) -> None:
        if n != 1:
            raise ValueError("LLMJudge takes one judge model; several are an EnsembleJudge")

    @property
    def name(self) -> str:
        return judge_name(self.judge.clients)

    @property
    def rubric_version(self) -> str:
        return load_rubric(self.judge.rubric_version).version

    @property
    def demo(self) -> bool:
        judges = [*self.judge.clients, *(c for cs in self.judge.per_factor.values() for c in cs)]
        debaters = list(self.debate.clients.values()) if self.debate is not None else []
        return any(c.is_demo for c in [*judges, *debaters])

    def describe(self) -> dict[str, Any]:
        j = self.judge
        return {
            "mode": j.mode,
            "judges": [c.model.key for c in j.clients],
            "per_factor": {f: [c.model.key for c in cs] for f, cs in sorted(j.per_factor.items())},
            "temperature": j.temperature,
            "seed": j.seed,
            "rubric": self.rubric_version,
            "judge_prompts": prompts_version("judge"),
            "debate": None
            if self.debate is None
            else {
                "models": {role: c.model.key for role, c in sorted(self.debate.clients.items())},
                "max_rounds": self.debate.max_rounds,
                "tolerance": self.debate.tolerance,
                "sequential": self.debate.sequential,
                "domain": self.debate.domain,
                "reading": self.debate.reading,
                "prompts": prompts_version("debate"),
            },
            "persuasiveness": None if self.persuasiveness is None else self.persuasiveness.model.key,
        }

    def label(self) -> str:
        label = self.name
        if self.debate is not None:
            label += f"; debate: {', '.join(sorted({c.name for c in self.debate.clients.values()}))}"
        if self.demo:
            label += f" ({DEMO_NOTICE})"
        return label

    def notices(self, why: str = "") -> list[str]:
        if not any(c.is_demo for c in self.judge.clients):
            return []
        return [
            "note: the judge is the embedded 135M demo model — not validated; its scores are not "
            "meaningful (use --scorer proxy, or configure a capable model)."
        ]

    def summary(self, evaluation: Evaluation) -> str:
        return debate_summary(evaluation)

    def fresh(self) -> tuple[LLMJudge, list[LLMClient]]:
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
        run = replace(
            self,
            judge=judge,
            debate=debate,
            persuasiveness=None if self.persuasiveness is None else c(self.persuasiveness),
        )
        return run, list(clones.values())

    def run(
        self, conversation: Conversation, earlier: Evaluation | None, *, catalog: Catalog, record: Recorder
    ) -> Outcome:
        run, clients = self.fresh()
        record.start()  # an interrupted run leaves its row, so it can be resumed

        # factors: keep the scored ones, judge the rest
        kept = earlier.factor_scores if earlier is not None else []
        scores = {s.factor: s for s in kept if s.score is not None}
        for score in scores.values():
            record.show_factor(score)

        def store(score: FactorScore) -> None:
            record.factor(score)
            scores[score.factor] = score

        missing = [f for f in FACTORS if f not in scores]
        if missing:
            judge_conversation(conversation, run.judge, catalog=catalog, factors=missing, on_result=store)
        factor_scores = [scores[f] for f in FACTORS]

        # debate: it needs all factor results, so it runs again whenever factors were
        # (re)judged in this run or an earlier debate gave no score; otherwise it is kept
        debate: DebateResult | None = None
        # a debate that a persona missed is debated again (CoRE's overall is all four personas')
        debate_done = (
            earlier is not None
            and earlier.overall is not None
            and bool(earlier.debate)
            and not missing
            and not missing_personas(earlier.debate)
        )
        if run.debate is not None and not debate_done:
            record.clear_debate()
            log = render_log(
                conversation,
                catalog,
                max_turns=run.judge.max_turns,
                max_chars=run.judge.max_log_chars,
                max_items=run.judge.max_items,
            )
            debate = run_debate(
                log.text,
                factor_scores,
                run.debate,
                on_message=record.debate,
                domain=conversation.domain,
                targets=log.target_lines,  # CoRE App. D: the common user reads <groundtruth_item>
            )
        elif run.debate is not None and earlier is not None:
            for message in earlier.debate:
                record.show_debate(message)
            debate = DebateResult(
                final_score=earlier.overall,
                rounds_used=earlier.rounds_used or 0,
                consensus=bool(earlier.consensus),
                messages=earlier.debate,
                missing=missing_personas(earlier.debate),
            )

        metrics: dict[str, Any] = {}
        if run.persuasiveness is not None:
            p = score_persuasiveness(conversation, run.persuasiveness)
            metrics.update(
                {
                    "persuasiveness": p.score,
                    "persuasiveness_expected": p.expected,
                    "persuasiveness_error": p.error,
                    "persuasiveness_distribution": p.distribution,
                    "persuasiveness_prompts": p.prompt_version,
                    "persuasiveness_variant": p.variant,  # which list reading produced the figure
                }
            )

        failed = [s.factor for s in factor_scores if s.score is None]
        debate_failed = debate is not None and debate.final_score is None
        absent = debate.missing if debate is not None and not debate_failed else ()
        error = None
        if failed or debate_failed or absent:
            parts = []
            if failed:
                parts.append(f"{len(failed)} factor(s) without a score: {', '.join(failed)}")
            if debate_failed:
                parts.append("the debate produced no valid score")
            if absent:
                # CoRE §4.2's overall is the whole panel's: a mean without a persona is not it
                parts.append(
                    f"the debate lacks the {persona_names(absent)} (no valid score in the last round); "
                    "the overall is the other personas' mean"
                )
            error = "; ".join(parts) + ". Run again with the same settings to fill the gaps."
        usage = UsageTotals()
        for client in clients:
            usage = usage.add(client.totals)
        return Outcome(
            status="partial" if error else "done",
            overall=debate.final_score if debate else None,
            rounds_used=debate.rounds_used if debate else None,
            consensus=debate.consensus if debate else None,
            error=error,
            metrics=metrics,
            usage=usage,
        )


@dataclass
class EnsembleJudge(LLMJudge):
    """The CoRE judge with several judge models, averaged per factor (``ensemble(<a>+<b>…)``)."""

    def _check_models(self, n: int) -> None:
        if n < 2:
            raise ValueError("an EnsembleJudge needs at least two judge models")


def llm_judge(
    judge: JudgeConfig, debate: DebateConfig | None = None, persuasiveness: LLMClient | None = None
) -> LLMJudge:
    """:class:`LLMJudge` for one judge model, :class:`EnsembleJudge` for several."""
    kind = EnsembleJudge if len(judge.clients) > 1 else LLMJudge
    return kind(judge, debate, persuasiveness)


def debate_summary(evaluation: Evaluation) -> str:
    """The outcome in one line: final score, rounds used, consensus (or why there is no score)."""
    if evaluation.overall is None:
        if evaluation.config.get("debate") is None:
            return "No debate was run."
        return "The debate produced no valid score."
    rounds = evaluation.rounds_used or 0
    consensus = "consensus reached" if evaluation.consensus else "no consensus (mean of the last round)"
    formed = overall_formed(evaluation.debate)
    formed = f" The overall is {formed}." if formed else ""
    return (
        f"Overall {evaluation.overall:.1f}/100 after {rounds} round{'s' if rounds != 1 else ''}, {consensus}.{formed}"
    )
