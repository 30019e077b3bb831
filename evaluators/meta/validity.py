"""The proxy scorer's validity report: its scores against human labels, beside the LLM judge and FACE.

:func:`validity_report` (``python -m evaluators meta --validity``) correlates with the human
``dialogue_overall`` of CRSArena-Eval: the proxy's calibrated overall (out of fold, refitted per fold
with :func:`evaluators.proxy.calibration.cross_validate`), its factor mean and each factor (fixed rules,
nothing fitted), the LLM judge's rows from ``evaluate --out``, and FACE's published figures
(:data:`FACE_PUBLISHED`), which are quoted from the paper, not computed here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import numpy as np

from evaluators.factors import FACTORS
from evaluators.meta.correlation import correlate, vote_agreement
from evaluators.proxy.calibration import N_SPLITS, SEED, TrainingData, cross_validate

# FACE (Joko & Hasibi), Llama-3.1-8B, on the full CRSArena-Eval (467 dialogues), as published:
# Table 1 (overall impression, dialogue level, per subset) and Table 2 (system level, mean of 7 aspects).
FACE_PUBLISHED: tuple[dict[str, Any], ...] = (
    {"score": "overall", "level": "dialogue (RD systems)", "n": None, "spearman": 0.668, "pearson": 0.712},
    {"score": "overall", "level": "dialogue (KG systems)", "n": None, "spearman": 0.679, "pearson": 0.766},
    {"score": "mean of 7 aspects", "level": "system", "n": 9, "spearman": 0.838, "pearson": 0.918},
)
_LEVEL_NAMES = {
    "dialogue": "dialogue",
    "dialogue_redial": "dialogue (RD systems)",
    "dialogue_opendialkg": "dialogue (KG systems)",
    "system": "system",
}


def _cell(c: dict[str, Any] | None) -> str:
    if not c or c.get("value") is None:
        return "–"
    interval = f" [{c['low']:.2f}, {c['high']:.2f}]" if c.get("low") is not None else ""
    return f"{c['value']:.3f}{interval}"


def _rows(scorer: str, score: str, fit: str, levels: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "scorer": scorer,
            "score": score,
            "fit": fit,
            "level": _LEVEL_NAMES[name],
            "n": level["n"],
            **{m: _cell(level[m]) for m in ("spearman", "pearson", "kendall")},
        }
        for name, level in levels.items()
        if name in _LEVEL_NAMES
    ]


def _correlations(
    scores: dict[str, float | None], data: TrainingData, *, subsets: bool, n_boot: int, seed: int
) -> dict[str, Any]:
    human = dict(zip(data.ids, data.y.tolist()))
    kept = {i: s for i, s in scores.items() if i in human}
    systems = dict(zip(data.ids, data.systems))
    levels = correlate(
        kept, {i: human[i] for i in kept}, systems={i: systems[i] for i in kept}, n_boot=n_boot, seed=seed
    )
    out = {name: {"n": lv.n, **{m: asdict(c) for m, c in lv.coefficients.items()}} for name, lv in levels.items()}
    if subsets:
        for dataset in ("redial", "opendialkg"):
            ids = [i for i, d in zip(data.ids, data.datasets) if d == dataset and i in kept]
            lv = correlate({i: kept[i] for i in ids}, {i: human[i] for i in ids}, n_boot=n_boot, seed=seed)["dialogue"]
            out[f"dialogue_{dataset}"] = {"n": lv.n, **{m: asdict(c) for m, c in lv.coefficients.items()}}
    return {k: out[k] for k in ("dialogue", "dialogue_redial", "dialogue_opendialkg", "system") if k in out}


def _factor_pick(factor: str) -> Callable[[dict[str, Any]], float | None]:
    return lambda row: (row.get("factors") or {}).get(factor)


def validity_report(
    data: TrainingData, *, llm_rows: list[dict[str, Any]] | None = None, seed: int = SEED, n_boot: int = 1000
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The validity table: the proxy's calibrated overall (out of fold), its factor mean and each factor
    (fixed rules, nothing fitted), the LLM judge's scores from ``evaluate --out`` rows, and FACE's
    published figures; all against the human ``dialogue_overall``. Also returns the proxy's vote agreement."""
    cv = cross_validate(data, seed=seed)
    ids = data.ids
    rows = _rows(
        "proxy",
        "overall (calibrated)",
        f"{N_SPLITS}-fold CV by user",
        _correlations(dict(zip(ids, cv.predictions.tolist())), data, subsets=True, n_boot=n_boot, seed=seed),
    )
    factor_scores = data.X[:, : len(FACTORS)]
    mean = np.nanmean(factor_scores, axis=1)
    rows += _rows(
        "proxy",
        "factor mean",
        "none",
        _correlations(dict(zip(ids, mean.tolist())), data, subsets=False, n_boot=n_boot, seed=seed),
    )
    for k, factor in enumerate(FACTORS):
        values = [None if math.isnan(v) else float(v) for v in factor_scores[:, k]]
        rows += _rows(
            "proxy",
            factor,
            "none (fixed rule)",
            _correlations(dict(zip(ids, values)), data, subsets=False, n_boot=n_boot, seed=seed),
        )
    if llm_rows:
        judged = {r["conversation_id"] for r in llm_rows}
        same = {i: p for i, p in zip(ids, cv.predictions.tolist()) if i in judged}
        rows += _rows(
            "proxy",
            f"overall (calibrated), on the {len(same)} dialogues of the LLM rows",
            f"{N_SPLITS}-fold CV by user",
            _correlations(same, data, subsets=True, n_boot=n_boot, seed=seed),
        )
        scorer = ", ".join(sorted({r.get("scorer", "llm") for r in llm_rows}))
        picks: dict[str, Callable[[dict[str, Any]], float | None]] = {
            "overall (debate)": lambda r: r.get("overall"),
            "factor mean": lambda r: r.get("factor_mean"),
        }
        picks.update({f: _factor_pick(f) for f in FACTORS})
        for score, pick in picks.items():
            llm_values = {r["conversation_id"]: pick(r) for r in llm_rows}
            rows += _rows(
                scorer,
                score,
                "none",
                _correlations(llm_values, data, subsets=score.startswith("overall"), n_boot=n_boot, seed=seed),
            )
    rows += [
        {
            "scorer": "FACE (published, Llama-3.1-8B, 467 dialogues)",
            "score": r["score"],
            "fit": "paper",
            "level": r["level"],
            "n": r["n"] or "–",
            "spearman": f"{r['spearman']:.3f}",
            "pearson": f"{r['pearson']:.3f}",
            "kendall": "–",
        }
        for r in FACE_PUBLISHED
    ]
    return rows, vote_agreement(cv.pair_scores, data.outcome, n_boot=n_boot, seed=seed)
