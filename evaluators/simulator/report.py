"""The batch report: one row per dialogue, one per system, plotly charts, HTML and CSV.

Means are over finished (``done``) dialogues; failed and errored ones are counted, never averaged in
as zeros. A missing value (no evaluation, an unreadable persuasiveness answer) stays empty.

Two recalls, named by source (:mod:`evaluators.metrics`): ``recall@k`` is iEvaLM's (§2.2 and §4.4; the top k
of the recommender's ranking at the turn the dialogue ends on, its first hit among the first ``hit_k``, as iEvaLM
stops there; the whole ranking where the system keeps one, e.g. a neural model's top 50, not the titles it names;
iEvaLM reports k = 1, 10, 50 on ReDial and 1, 10, 25 on OpenDialKG),
``session_recall@k`` is over CoRE's session list (every system list concatenated, first occurrence
kept). Per system both are pooled over targets (each dialogue weighted by its number of targets), as
iEvaLM averages over (example, label) pairs. The leaderboard shows the same two.
"""

from __future__ import annotations

import csv
import html
import json
import math
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

from evaluators.factors import FACTORS, LABELS
from evaluators.metrics import KS, ievalm_ks, pooled_hallucination, recall_at_k, session_recall_at_k
from evaluators.pipeline import factor_mean
from storage.conversations import get_conversation
from storage.evaluations import get_evaluation

NOT_MEASURED = "–"  # a figure the dialogues could not measure (iEvaLM Table 2's mark, e.g. R@k beyond a list)
RECALLS = tuple(f"recall@{k}" for k in KS) + tuple(f"session_recall@{k}" for k in KS)
DIALOGUE_COLUMNS = (
    "case_id",
    "system",
    "status",
    "stop_reason",
    "system_turns",
    "first_hit_turn",
    *RECALLS,
    "targets",
    "persuasiveness",
    "persuasiveness_expected",
    "persuasiveness_error",
    "hallucination_rate",
    "recommended_items",
    "nonexistent_items",
    "persona",
    "leaks_regenerated",
    "leaks_redacted",
    "accepted",
    "deception_suspected",
    "reliability_overlap",
    "scorer",
    "overall",
    "factor_mean",
    *FACTORS,
    "conversation_id",
    "error",
)
SUMMARY_COLUMNS = (
    "system",
    "dialogues",
    "done",
    "failed",
    "error",
    "hit_rate",
    "mean_system_turns",
    *RECALLS,
    "persuasiveness",
    "persuasiveness_n",
    "persuasiveness_errors",
    "hallucination_pooled",
    "hallucination_mean",
    "overall",
    "factor_mean",
    *FACTORS,
    "leaks_regenerated",
    "leaks_redacted",
    "acceptances",
    "deception_suspected",
    "reliability_overlap",
    "reliability_n",
)
# the summary's columns a person reads first: the Simulate tab's table; the command line prints those that fit
# a terminal (TERMINAL_COLUMNS)
SHOWN_COLUMNS = (
    "system",
    "done",
    "failed",
    "error",
    "hit_rate",
    "mean_system_turns",
    "recall@1",
    "recall@5",
    "recall@10",
    "recall@25",
    "recall@50",
    "session_recall@10",
    "session_recall@50",
    "persuasiveness",
    "overall",
    "factor_mean",
    "leaks_regenerated",
    "leaks_redacted",
    "deception_suspected",
    "reliability_overlap",
)
TERMINAL_HIDDEN = {"mean_system_turns", "recall@5", "recall@25", "leaks_regenerated", "deception_suspected"}
TERMINAL_COLUMNS = tuple(c for c in SHOWN_COLUMNS if c not in TERMINAL_HIDDEN | {"reliability_overlap"})
DEMO_NOTE = (
    "The simulated user runs the embedded 135M demo model: its messages are weak and its persuasiveness "
    "scores are not meaningful. Configure CRS_LLM_SIMULATOR_MODEL for a real benchmark."
)


def evaluation_summary(db, evaluation_id: str | None) -> dict | None:
    """Scorer, overall, factor mean, factors and metrics of a stored evaluation (None when absent)."""
    if not evaluation_id:
        return None
    evaluation = get_evaluation(db, evaluation_id)
    if evaluation is None:
        return None
    return {
        "id": evaluation.id,
        "scorer": evaluation.scorer,
        "status": evaluation.status,
        "overall": evaluation.overall,
        "factor_mean": factor_mean(evaluation),
        "factors": {s.factor: s.score for s in evaluation.factor_scores},
        "metrics": evaluation.metrics,
    }


def dialogue_rows(rows: list[dict], db, *, hit_k: int = 50) -> list[dict]:
    out = []
    for row in rows:
        result = row.get("result") or {}
        record = dict.fromkeys(DIALOGUE_COLUMNS) | {
            "case_id": row["case_id"],
            "system": row["system_id"],
            "status": row["status"],
            "stop_reason": result.get("stop_reason"),
            "system_turns": result.get("system_turns"),
            "first_hit_turn": result.get("first_hit_turn"),
            "persona": result.get("persona"),
            "leaks_regenerated": result.get("leaks_regenerated"),
            "leaks_redacted": result.get("leaks_redacted"),
            "conversation_id": row.get("conversation_id"),
            "error": row.get("error"),
        }
        p = result.get("persuasiveness") or {}
        record["persuasiveness"] = p.get("score")
        record["persuasiveness_expected"] = p.get("expected")
        record["persuasiveness_error"] = p.get("error")  # absent where it was not asked (the protocol's choice)
        sincerity = result.get("sincerity") or {}
        record["accepted"] = sincerity.get("accepted")
        record["deception_suspected"] = sincerity.get("deception_suspected")
        record["reliability_overlap"] = (result.get("reliability") or {}).get("overlap")
        if row["status"] == "done":
            conversation = get_conversation(db, row["conversation_id"])
            recall = recall_at_k(conversation, hit_k=hit_k) if conversation is not None else None
            session = session_recall_at_k(conversation) if conversation is not None else None
            for k in KS:
                record[f"recall@{k}"] = recall[k] if recall else None
                record[f"session_recall@{k}"] = session[k] if session else None
            record["targets"] = len({t.id for t in conversation.targets}) if conversation is not None else None
        evaluation = evaluation_summary(db, row.get("evaluation_id"))
        if evaluation is not None:
            record.update(
                {
                    "scorer": evaluation["scorer"],
                    "overall": evaluation["overall"],
                    "factor_mean": evaluation["factor_mean"],
                    **{f: evaluation["factors"].get(f) for f in FACTORS},
                }
            )
            metrics = evaluation["metrics"] or {}
            record["hallucination_rate"] = metrics.get("hallucination_rate")
            record["recommended_items"] = metrics.get("recommended_items")
            record["nonexistent_items"] = len(metrics.get("nonexistent_items") or ())
        out.append(record)
    return out


def _mean(values) -> float | None:
    values = [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return sum(values) / len(values) if values else None


def _pooled(dialogues: list[dict], column: str) -> float | None:
    """Recall pooled over targets: iEvaLM's mean over (example, label) pairs."""
    pairs = [(d[column], d["targets"] or 1) for d in dialogues if d[column] is not None]
    weight = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / weight if weight else None


def _hallucination(dialogues: list[dict]) -> dict[str, float | None]:
    pooled = pooled_hallucination(
        [
            {
                "hallucination_rate": d.get("hallucination_rate"),
                "recommended_items": d.get("recommended_items"),
                "nonexistent_items": [None] * (d.get("nonexistent_items") or 0),
            }
            for d in dialogues
        ]
    )
    return {"hallucination_pooled": pooled.pooled, "hallucination_mean": pooled.mean}


def summary_rows(dialogues: list[dict], systems: list[str]) -> list[dict]:
    out = []
    for system in systems:
        mine = [d for d in dialogues if d["system"] == system]
        done = [d for d in mine if d["status"] == "done"]
        accepted = [d for d in done if d["accepted"]]
        reliable = [d["reliability_overlap"] for d in done if d["reliability_overlap"] is not None]
        persuasive = [d["persuasiveness"] for d in done if d["persuasiveness"] is not None]
        out.append(
            {
                "system": system,
                "dialogues": len(mine),
                "done": len(done),
                "failed": sum(1 for d in mine if d["status"] == "failed"),
                "error": sum(1 for d in mine if d["status"] not in ("done", "failed")),
                "hit_rate": _mean([1.0 if d["first_hit_turn"] is not None else 0.0 for d in done]),
                "mean_system_turns": _mean([d["system_turns"] for d in done]),
                **{r: _pooled(done, r) for r in RECALLS},
                "persuasiveness": _mean(persuasive),
                "persuasiveness_n": len(persuasive),
                "persuasiveness_errors": sum(1 for d in done if d.get("persuasiveness_error")),
                # CONCEPT reports the ratio pooled per system (§3.2, A.2.4); the per-conversation mean beside it
                **_hallucination(done),
                "overall": _mean([d["overall"] for d in done]),
                "factor_mean": _mean([d["factor_mean"] for d in done]),
                **{f: _mean([d[f] for d in done]) for f in FACTORS},
                "leaks_regenerated": sum(d["leaks_regenerated"] or 0 for d in mine),
                "leaks_redacted": sum(d["leaks_redacted"] or 0 for d in mine),
                "acceptances": len(accepted),
                "deception_suspected": sum(1 for d in accepted if d["deception_suspected"]),
                "reliability_overlap": _mean(reliable),
                "reliability_n": len(reliable),
            }
        )
    return out


def factor_figure(summary: list[dict]) -> go.Figure:
    figure = go.Figure(
        [go.Bar(name=r["system"], x=[LABELS[f] for f in FACTORS], y=[r[f] for f in FACTORS]) for r in summary]
    )
    figure.update_layout(
        title="CoRE factor means per system (0-4)",
        barmode="group",
        height=420,
        yaxis={"range": [0, 4], "title": "mean score"},
        margin={"t": 50, "b": 120},
    )
    return figure


def overall_figure(summary: list[dict]) -> go.Figure:
    figure = go.Figure(
        go.Bar(
            x=[r["system"] for r in summary],
            y=[r["overall"] for r in summary],
            text=[("" if r["overall"] is None else f"{r['overall']:.1f}") for r in summary],
            textposition="outside",
        )
    )
    figure.update_layout(
        title="Overall score per system (0-100)", yaxis={"range": [0, 100], "title": "mean"}, height=360
    )
    return figure


def recall_figure(summary: list[dict], ks: tuple[int, ...] = KS) -> go.Figure:
    """Recall at ``ks`` (iEvaLM's for the dataset); the tables keep every stored k."""
    columns = [f"recall@{k}" for k in ks] + [f"session_recall@{k}" for k in ks]
    labels = [c.replace("session_recall", "session R").replace("recall", "iEvaLM R") for c in columns]
    figure = go.Figure([go.Bar(name=r["system"], x=labels, y=[r[c] for c in columns]) for r in summary])
    figure.update_layout(
        title="Recall@k per system: iEvaLM (the list the dialogue ended on) and over the session list",
        barmode="group",
        height=360,
        yaxis={"range": [0, 1], "title": "recall"},
    )
    return figure


def build_report(rows: list[dict], db, *, config: dict, selection: dict, demo: bool = False) -> dict:
    systems = list(config.get("systems") or dict.fromkeys(r["system_id"] for r in rows))
    dialogues = dialogue_rows(rows, db, hit_k=int(config.get("hit_k") or 50))
    summary = summary_rows(dialogues, systems)
    notes = list(selection.get("notes") or [])
    scorers = sorted({d["scorer"] for d in dialogues if d["scorer"]})
    if scorers:
        notes.append("Scores from scorer(s): " + ", ".join(scorers) + ".")
    ks = ievalm_ks(config.get("dataset"))
    if ks != KS:
        notes.append(
            f"iEvaLM reports Recall@{', @'.join(map(str, ks))} on {config.get('dataset')} (§2.2); the chart "
            "shows those, the tables every stored k. Recall reads each turn's whole ranking where the system "
            "kept one (the neural systems' top 50), else the items it named."
        )
    if config.get("persuasiveness") in (None, "off"):
        notes.append(
            "Persuasiveness was not asked: iEvaLM reports it for the free-form protocol only "
            "(ask with --persuasiveness probability|reasoned)."
        )
    if demo:
        notes.append(DEMO_NOTE)
    return {
        "config": config,
        "selection": selection,
        "notes": notes,
        "systems": systems,
        "summary": pd.DataFrame(summary, columns=list(SUMMARY_COLUMNS)),
        "summary_records": summary,
        "dialogues": pd.DataFrame(dialogues, columns=list(DIALOGUE_COLUMNS)),
        "figures": {
            "factors": factor_figure(summary),
            "overall": overall_figure(summary),
            "recall": recall_figure(summary, ks),
        },
    }


def _csv(frame: pd.DataFrame, path: Path) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(frame.columns)
        for row in frame.itertuples(index=False):
            writer.writerow(
                [
                    ""
                    if v is None or (isinstance(v, float) and math.isnan(v))
                    else (round(v, 4) if isinstance(v, float) else v)
                    for v in row
                ]
            )


def write_report(report: dict, folder: str | Path, rows: list[dict], db) -> list[Path]:
    """``report.html``, ``summary.csv``, ``dialogues.csv`` and ``conversations.jsonl`` (one line per pair:
    outcome, conversation with history, targets and per-turn lists, evaluation)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    summary_path, dialogues_path = folder / "summary.csv", folder / "dialogues.csv"
    _csv(report["summary"], summary_path)
    _csv(report["dialogues"], dialogues_path)
    jsonl = folder / "conversations.jsonl"
    with open(jsonl, "w", encoding="utf-8") as f:
        for row in rows:
            conversation = get_conversation(db, row["conversation_id"]) if row.get("conversation_id") else None
            f.write(
                json.dumps(
                    {
                        "run_id": row["run_id"],
                        "case_id": row["case_id"],
                        "system_id": row["system_id"],
                        "status": row["status"],
                        "error": row.get("error"),
                        "result": row.get("result"),
                        "conversation": conversation.to_dict() if conversation is not None else None,
                        "evaluation": evaluation_summary(db, row.get("evaluation_id")),
                    },
                    ensure_ascii=False,
                    default=str,
                )
                + "\n"
            )
    page = folder / "report.html"
    page.write_text(render_html(report), encoding="utf-8")
    return [page, summary_path, dialogues_path, jsonl]


def render_html(report: dict) -> str:
    config = report["config"]
    head = (
        f"Simulated-user benchmark — protocol {config.get('protocol')}, records {config.get('records')}, "
        f"seed {config.get('seed')}"
    )
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(head)}</title>",
        "<style>body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;"
        "font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#eee}</style>",
        "</head><body>",
        f"<h1>{html.escape(head)}</h1>",
        "<h2>Setup</h2><ul>",
        *(
            f"<li><b>{html.escape(str(k))}</b>: {html.escape(str(v))}</li>"
            for k, v in sorted(config.items())
            if k not in ("out_dir",)
        ),
        "</ul><h2>Records and notes</h2><ul>",
        *(f"<li>{html.escape(n)}</li>" for n in report["notes"]),
        "</ul><h2>Per system</h2>",
        report["summary"].round(3).to_html(index=False, na_rep=NOT_MEASURED, border=0),
    ]
    for n, figure in enumerate(report["figures"].values()):
        parts.append(figure.to_html(full_html=False, include_plotlyjs=(n == 0)))
    parts += [
        "<h2>Per dialogue</h2>",
        report["dialogues"].round(3).to_html(index=False, na_rep=NOT_MEASURED, border=0),
        "</body></html>",
    ]
    return "\n".join(parts)
