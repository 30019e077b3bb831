"""Turning evaluation results into what people read: tables, charts, transcripts and report files.

Used by the app's Chat and Evaluate tabs (and usable from notebooks). Nothing
here calls a model or writes to the database; every function takes results
that :func:`evaluators.pipeline.evaluate_conversation` produced.

A factor without a score (the judge failed, or it is still running) is shown
as such, never as 0: its cells are empty, its error is spelled out, and charts
leave a gap.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

from evaluators.factors import DIMENSION_OF, FACTORS, LABELS
from evaluators.pipeline import EvaluationSetup, factor_mean
from evaluators.scorers import DEMO_NOTICE
from llm_clients.prompts import prompt
from storage.records import Conversation, DebateMessage, Evaluation, FactorScore

FACTOR_COLUMNS = ["factor", "dimension", "score", "distribution", "rationale", "error"]
RESULT_COLUMNS = ["conversation_id", "system", "status", "overall", "factor_mean", *FACTORS]
SCORER_CHOICES = [
    ("Auto: the proxy offline, the LLM judge when a capable model is configured", "auto"),
    ("Proxy: LLM-free, calibrated on human labels", "proxy"),
    ("LLM judge (+ debate)", "llm"),
]
PENDING = "…"


def result_row(conversation, evaluation, labels=None) -> dict:
    """One line of ``evaluate --out``: scores, metrics, usage and human labels if known."""
    factors = {s.factor: s.score for s in evaluation.factor_scores}
    return {
        "conversation_id": conversation.id,
        "system_id": conversation.system_id,
        "evaluation_id": evaluation.id,
        "scorer": evaluation.scorer,
        "status": evaluation.status,
        "overall": evaluation.overall,
        "rounds_used": evaluation.rounds_used,
        "consensus": evaluation.consensus,
        "factor_mean": factor_mean(evaluation),
        "factors": {f: factors.get(f) for f in FACTORS},
        "errors": {s.factor: s.error for s in evaluation.factor_scores if s.error},
        "metrics": evaluation.metrics,
        "usage": evaluation.usage,
        "human": labels.dialogue if labels else None,
    }


def scorer_label(setup: EvaluationSetup) -> str:
    """Who gives the scores, e.g. ``llm:gpt-4o-mini``, plainly flagged when a demo model takes part."""
    return setup.scorer.label()


def uses_demo_model(setup: EvaluationSetup) -> bool:
    """True when the judge or a debater is the embedded 135M demo model."""
    return setup.scorer.demo


# -- one conversation ---------------------------------------------------------


def distribution_text(distribution: dict[str, float] | None) -> str:
    """``{"0": .1, "1": .2, ...}`` as ``0:10% 1:20% …``; empty when there is none."""
    if not distribution:
        return ""
    return " ".join(f"{k}:{round(100 * v)}%" for k, v in sorted(distribution.items()))


def factor_table(scores: Iterable[FactorScore]) -> pd.DataFrame:
    """All twelve factors in rubric order, with the results known so far.

    ``score`` is text: the value with two decimals, ``…`` while pending, or
    ``failed`` (with the reason in ``error``).
    """
    by_factor = {s.factor: s for s in scores}
    rows = []
    for factor in FACTORS:
        s = by_factor.get(factor)
        if s is None:
            shown = PENDING
        elif s.score is None:
            shown = "failed"
        else:
            shown = f"{s.score:.2f}"
        rows.append(
            {
                "factor": LABELS[factor],
                "dimension": DIMENSION_OF[factor].replace("_", " "),
                "score": shown,
                "distribution": distribution_text(s.distribution) if s else "",
                "rationale": s.rationale if s else "",
                "error": (s.error or "") if s else "",
            }
        )
    return pd.DataFrame(rows, columns=FACTOR_COLUMNS)


def radar_figure(scores: Iterable[FactorScore], scorer: str = "", demo: bool = False) -> go.Figure:
    """A radar chart of the twelve factors on 0-4, titled with the scorer (and the demo-model
    notice when ``demo``); unscored factors leave a gap."""
    by_factor = {s.factor: s.score for s in scores}
    labels = [LABELS[f] for f in FACTORS]
    values = [by_factor.get(f) for f in FACTORS]
    title = scorer + (f"<br><sub>{DEMO_NOTICE}</sub>" if demo else "")
    figure = go.Figure(
        go.Scatterpolar(
            r=[*values, values[0]],
            theta=[*labels, labels[0]],
            fill="toself",
            connectgaps=False,
            name="score",
            hovertemplate="%{theta}: %{r:.2f}<extra></extra>",
        )
    )
    figure.update_layout(
        title={"text": title, "font": {"size": 13}} if title else None,
        polar={"radialaxis": {"range": [0, 4], "tickvals": [0, 1, 2, 3, 4]}},
        showlegend=False,
        margin={"l": 60, "r": 60, "t": 70 if title else 30, "b": 30},
        height=420,
    )
    return figure


def persona_label(role: str) -> str:
    """A debate role id (``debate_user``) as its persona's name (``Common User``)."""
    return prompt("debate", f"name_{role}")


@dataclass(frozen=True)
class DebateLine:
    """One persona's statement in one round, ready to display."""

    round: int
    persona: str
    model: str
    score: float | None
    statement: str
    error: str | None

    @property
    def title(self) -> str:
        score = "no valid score" if self.score is None else f"{self.score:g}/100"
        return f"Round {self.round} · {self.persona}: {score}"


def debate_lines(messages: Iterable[DebateMessage]) -> list[DebateLine]:
    """The debate round by round, in the order the messages were given within a round."""
    ordered = sorted(enumerate(messages), key=lambda pair: (pair[1].round, pair[0]))
    return [DebateLine(m.round, persona_label(m.role), m.model, m.score, m.statement, m.error) for _, m in ordered]


# -- many conversations -----------------------------------------------------


def result_table(results: Sequence[tuple[Conversation, Evaluation]]) -> pd.DataFrame:
    """One row per evaluated conversation: system, status, overall, factor mean and the twelve factors."""
    rows = []
    for conversation, evaluation in results:
        row = result_row(conversation, evaluation)
        rows.append(
            {
                "conversation_id": conversation.id,
                "system": conversation.system_id,
                "status": evaluation.status,
                "overall": _rounded(row["overall"], 1),
                "factor_mean": _rounded(row["factor_mean"], 2),
                **{f: _rounded(row["factors"][f], 2) for f in FACTORS},
            }
        )
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def system_factor_means(table: pd.DataFrame) -> pd.DataFrame:
    """Mean of each factor per system (rows: systems; unscored factors are left out of a mean)."""
    if table.empty:
        return pd.DataFrame(columns=list(FACTORS))
    return table.groupby("system")[list(FACTORS)].mean().round(2)


def factor_means_figure(table: pd.DataFrame) -> go.Figure:
    """Grouped bars: each factor's mean (0-4), one colour per system."""
    means = system_factor_means(table)
    figure = go.Figure(
        [
            go.Bar(name=str(system), x=[LABELS[f] for f in FACTORS], y=[_none_if_nan(v) for v in means.loc[system]])
            for system in means.index
        ]
    )
    figure.update_layout(
        title="Factor means per system",
        barmode="group",
        yaxis={"range": [0, 4], "title": "mean score (0-4)"},
        height=420,
        margin={"t": 50, "b": 120},
    )
    return figure


def overall_figure(table: pd.DataFrame) -> go.Figure:
    """Histogram of the overall (debate) scores, one trace per system."""
    figure = go.Figure(
        [
            go.Histogram(name=str(system), x=group["overall"].dropna(), xbins={"start": 0, "end": 100, "size": 10})
            for system, group in table.groupby("system")
        ]
    )
    figure.update_layout(
        title="Overall score distribution",
        barmode="group",
        xaxis={"range": [0, 100], "title": "overall (0-100)"},
        yaxis={"title": "conversations"},
        height=380,
    )
    return figure


def write_reports(
    results: Sequence[tuple[Conversation, Evaluation]], folder: str | Path, labels: dict | None = None
) -> tuple[Path, Path]:
    """Write ``results.csv`` (the result table) and ``results.jsonl`` (one full result per line,
    as ``python -m evaluators evaluate --out`` writes) into ``folder``; returns both paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    csv_path, jsonl_path = folder / "results.csv", folder / "results.jsonl"
    table = result_table(results)
    with open(csv_path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(table.columns)
        for row in table.itertuples(index=False):
            writer.writerow(["" if _is_missing(v) else v for v in row])
    with open(jsonl_path, "w", encoding="utf-8") as f:
        for conversation, evaluation in results:
            label = (labels or {}).get(conversation.id)
            f.write(json.dumps(result_row(conversation, evaluation, label), ensure_ascii=False) + "\n")
    return csv_path, jsonl_path


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _is_missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _none_if_nan(value) -> float | None:
    return None if _is_missing(value) else float(value)


# -- the command line's reports (``crs-arena meta``, ``meta --validity``, ``calibrate``) ----------------------------


def correlation_text(
    table: pd.DataFrame, matrix: pd.DataFrame, *, score_key: str, scorers: Sequence[str], aspect: str
) -> str:
    """``meta``: the correlation table of ``score_key`` against the human ``aspect``, then the factors' matrix."""
    return (
        f"{score_key} ({', '.join(scorers)}) vs human {aspect}\n{table.to_string(index=False)}\n"
        f"\nfactor correlation matrix (Spearman):\n{matrix.round(2).to_string()}"
    )


def validity_text(
    frame: pd.DataFrame, votes: dict, data, *, source: str, boot: int, folds: int, llm_rows: int = 0
) -> str:
    """``meta --validity``: the proxy's cross-validated validity table and its agreement with held-out votes."""
    lines = [
        f"validity against human dialogue_overall on {len(data.y)} dialogues ({source}); "
        f"[95% bootstrap interval], {boot} resamples; proxy overall fitted on labels and {len(data.outcome)} "
        f"votes in {folds} folds by user, every figure out of fold"
    ]
    if llm_rows:
        lines.append(f"LLM judge rows: {llm_rows} result line(s) from the --scores file")
    lines.append(frame.to_string(index=False))
    if votes["accuracy"] is not None:
        lines.append(
            f"\nproxy vs held-out votes: winner scored higher in {votes['accuracy']:.1%} "
            f"[{votes['accuracy_low']:.1%}, {votes['accuracy_high']:.1%}] of {votes['decisive']} decisive votes; "
            f"mean score gap {votes['tie_gap']:.2f} on {votes['ties']} ties vs {votes['decisive_gap']:.2f} "
            "on decisive votes (0-4 scale)"
        )
    return "\n".join(lines)


def calibration_text(result, data) -> str:
    """``calibrate``: what the refit was fitted on and its cross-validated figures, per similarity and level."""
    lines = [
        f"fitted on {len(data.y)} labelled dialogues and {len(data.outcome)} votes "
        f"({int((data.outcome == 0).sum())} ties, {data.skipped_votes} skipped); alpha {result.model.alpha:g}"
    ]
    for name, cv in result.cv.items():
        lines.append(f"{name} ({result.settings['n_splits']}-fold CV by user, out of fold):")
        for level, c in cv.items():
            if level == "votes":
                if c["accuracy"] is not None:
                    lines.append(
                        f"  votes: winner higher in {c['accuracy']:.1%} [{c['accuracy_low']:.1%}, "
                        f"{c['accuracy_high']:.1%}] of {c['decisive']}; gap {c['tie_gap']:.2f} on ties vs "
                        f"{c['decisive_gap']:.2f} on decisive votes"
                    )
                continue
            figures = "  ".join(
                f"{m} {c[m]['value']:.3f} [{c[m]['low']:.2f}, {c[m]['high']:.2f}]"
                if c[m]["value"] is not None
                else f"{m} –"
                for m in ("spearman", "pearson", "kendall")
            )
            lines.append(f"  {level:20s} n={c['n']:3d}  {figures}")
    return "\n".join(lines)
