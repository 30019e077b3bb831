"""Judge versus people: how far each judge setup agrees with the people who rated and voted (#23).

For every judge setup on the board (scorer and configuration fingerprint, labelled as on the leaderboard) and for
two bodies of human evidence kept apart,

* **this app**: ratings people gave after their arena vote or in the Chat tab, and the arena's own votes;
* **imported**: CRSArena-Eval's labels and CRSArena-Dial's votes, once imported (the shipped proxy was fitted on
  them, so its figures there are in-sample and say so),

the panel gives

* dialogue level: Spearman between the judge's overall and people's overall (each conversation's ratings averaged
  over its raters), and between each rated item and the CoRE factor that asks the same (:data:`ITEM_FACTORS`);
* system level: Spearman between the systems' mean judge overall and mean people's overall;
* vote agreement: the share of decisive votes whose winner the judge scored higher (equal scores count half), and
  MT-Bench's agreement with ties as a third class, the judge calling a tie when the two overalls differ by less
  than :data:`TIE_MARGIN` points of 100 (a tie and *both bad* are people's ties, as in FastChat);
* endings: how well the judge's overall separates conversations people ended *satisfied* from *frustrated* (CRS
  Arena's two buttons, ``metadata.sentiment``): the AUC, 0.5 being chance;
* bootstrap 95% intervals (:func:`evaluators.meta.correlate`, :func:`evaluators.meta.vote_agreement`), and ``n``.

A figure resting on fewer than :data:`MIN_DIALOGUES` rated conversations (:data:`MIN_SYSTEMS` systems,
:data:`MIN_BATTLES` votes, :data:`MIN_ENDINGS` endings of each kind) is not given: the cell says "too few … yet".
An arena rating given after the battle's reveal does not count (a Chat-tab rating names its system by design and
counts). Nothing is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import plotly.graph_objects as go
from sqlite_utils import Database

from arena.board_compute import is_demo_scorer, setup_label
from evaluators.factors import FACTORS, LABELS
from evaluators.meta.correlation import LevelCorrelation, correlate, vote_agreement
from storage.battle_votes import voted_battles
from storage.human_labels import APP_ORIGINS, IMPORTED_ORIGIN, export_keys, mean_labels, ratings
from storage.jsonutil import loads
from storage.stats import conversation_sentiments, judge_setups, latest_scores

# Each rated item and the judge score that asks the same question. "overall" is the judge's overall (0-100).
ITEM_FACTORS: dict[str, str] = {
    "dialogue_overall": "overall",
    "understanding": "coherence",  # CoRE: the system understands the user's intent and acts on it
    "task_completion": "semantic_relevance",  # CoRE: the items match what the user asked for
    "interest_arousal": "explainability",  # CoRE: the system says why an item suits, which is what arouses interest
}
ITEM_QUESTIONS: dict[str, str] = {
    "understanding": "understood what I wanted",
    "task_completion": "the recommendations fit",
    "interest_arousal": "made me want to watch something",
    "dialogue_overall": "overall",
}
TIE_MARGIN = 2.5  # points of the 0-100 overall: closer than this, the judge calls a battle a tie
MIN_DIALOGUES = 5
MIN_SYSTEMS = 3
MIN_BATTLES = 5
N_BOOT = 1000
COLUMNS = ["Judge setup", "Evidence", "Measure", "Value", "95% interval", "n"]
EVIDENCE: dict[str, tuple[tuple[str, ...], str]] = {  # name -> (label origins, source of the voted conversations)
    "this app": (APP_ORIGINS, "arena"),
    "imported (CRSArena)": ((IMPORTED_ORIGIN,), "import"),
}
ENDING_SOURCES: dict[str, tuple[str, ...]] = {"this app": ("chat", "arena"), "imported (CRSArena)": ("import",)}
MIN_ENDINGS = 3  # conversations of each ending
TOO_FEW = "too few ratings yet"


@dataclass
class Agreement:
    """The panel: one row per setup, evidence and measure (see :data:`COLUMNS`), and the scatter's points."""

    rows: list[dict] = field(default_factory=list)
    points: dict[str, list[dict]] = field(default_factory=dict)  # setup label -> {system, judge, people, evidence}
    setups: list[str] = field(default_factory=list)


def judge_agreement(db: Database, *, n_boot: int = N_BOOT, seed: int = 0) -> Agreement:
    """Every judge setup against people's ratings and votes (see the module's docstring)."""
    result = Agreement()
    labelled = {name: _labels(db, origins) for name, (origins, _) in EVIDENCE.items()}
    votes = {name: voted_battles(db, source=source) for name, (_, source) in EVIDENCE.items()}
    endings = {name: conversation_sentiments(db, sources=sources) for name, sources in ENDING_SOURCES.items()}
    for label, scorer, fingerprint in setups(db):
        scores = latest_scores(db, scorer=scorer, fingerprint=fingerprint)
        if not scores:
            continue
        result.setups.append(label)
        result.points[label] = []
        for evidence, (labels, systems, conversations) in labelled.items():
            keyed = {key: scores[cid] for key, cid in conversations.items() if cid in scores}
            result.rows += _rating_rows(label, evidence, keyed, labels, systems, n_boot=n_boot, seed=seed)
            result.rows += _vote_rows(label, evidence, scores, votes[evidence], n_boot=n_boot, seed=seed)
            result.rows.append(_ending_row(label, evidence, scores, endings[evidence], n_boot=n_boot, seed=seed))
            result.points[label] += [
                {
                    "system": systems[key],
                    "judge": keyed[key]["overall"],
                    "people": values["dialogue_overall"],
                    "evidence": evidence,
                }
                for key, values in labels.items()
                if key in keyed and keyed[key]["overall"] is not None and values["dialogue_overall"] is not None
            ]
    return result


def _labels(
    db: Database, origins: tuple[str, ...]
) -> tuple[dict[str, dict[str, float | None]], dict[str, str], dict[str, str]]:
    """(labels, systems, keys): each rated conversation's mean items and system, both keyed by its export key
    (:func:`storage.human_labels.export_keys`), and the conversation id of each key."""
    rows = ratings(db, origins=origins, blind_only=True)
    keys = export_keys(rows)
    means = mean_labels(rows)
    return (
        {keys[cid]: values for cid, values in means.items()},
        {keys[r["conversation_id"]]: r["system_id"] for r in rows},
        {key: cid for cid, key in keys.items()},
    )


def _judge_value(score: dict, key: str) -> float | None:
    return score["overall"] if key == "overall" else score["factors"].get(key)


def _rating_rows(
    label: str,
    evidence: str,
    scores: Mapping[str, dict],
    labels: Mapping[str, dict[str, float | None]],
    systems: Mapping[str, str],
    *,
    n_boot: int,
    seed: int,
) -> list[dict]:
    rows = []
    for item, key in ITEM_FACTORS.items():
        judge = {cid: _judge_value(scores[cid], key) for cid in labels if cid in scores}
        people = {cid: labels[cid][item] for cid in judge}
        judge_name = "overall" if key == "overall" else LABELS[key].lower()
        paired = [cid for cid in judge if judge[cid] is not None and people[cid] is not None]
        measure = f"{judge_name} vs “{ITEM_QUESTIONS[item]}” (dialogues, Spearman)"
        system_measure = "overall vs people's overall (systems, Spearman)"
        n_systems = len({systems[cid] for cid in paired})
        if len(paired) < MIN_DIALOGUES:  # also keeps correlate() from resampling nothing
            rows.append(_cell(label, evidence, measure, f"{TOO_FEW} (need {MIN_DIALOGUES})", "", len(paired)))
            if item == "dialogue_overall":
                rows.append(
                    _cell(label, evidence, system_measure, f"{TOO_FEW} (need {MIN_SYSTEMS} systems)", "", n_systems)
                )
            continue
        levels = correlate(
            judge, people, systems={cid: systems[cid] for cid in judge}, n_boot=n_boot, seed=seed, methods=("spearman",)
        )
        rows.append(_row(label, evidence, measure, levels["dialogue"], MIN_DIALOGUES))
        if item == "dialogue_overall":
            rows.append(_row(label, evidence, system_measure, levels["system"], MIN_SYSTEMS, unit=" systems"))
    return rows


def _row(label: str, evidence: str, measure: str, level: LevelCorrelation, minimum: int, unit: str = "") -> dict:
    c = level["spearman"]
    if level.n < minimum or c.value is None:
        why = f"{TOO_FEW} (need {minimum}{unit})" if level.n < minimum else "undefined (every value the same)"
        return _cell(label, evidence, measure, why, "", level.n)
    interval = "" if c.low is None else f"[{c.low:.2f}, {c.high:.2f}]"
    return _cell(label, evidence, measure, f"{c.value:.2f}", interval, level.n)


def _vote_rows(
    label: str, evidence: str, scores: Mapping[str, dict], votes: list[dict], *, n_boot: int, seed: int
) -> list[dict]:
    pairs, outcome = [], []
    for v in votes:
        a, b = scores.get(v["conversation_a"]), scores.get(v["conversation_b"])
        if a is None or b is None or a["overall"] is None or b["overall"] is None:
            continue
        pairs.append((a["overall"], b["overall"]))
        outcome.append({"a": 1, "b": -1}.get(v["choice"], 0))
    found = vote_agreement(
        np.array(pairs, dtype=float).reshape(len(pairs), 2),
        np.array(outcome, dtype=float),
        n_boot=n_boot,
        seed=seed,
        tie_margin=TIE_MARGIN,
    )
    rows = []
    for measure, value, low, high, n in (
        (
            "vote agreement without ties (winner scored higher)",
            found["accuracy"],
            found["accuracy_low"],
            found["accuracy_high"],
            found["decisive"],
        ),
        (
            f"vote agreement with ties (MT-Bench; tie when < {TIE_MARGIN:g} apart)",
            found["accuracy_with_ties"],
            found["with_ties_low"],
            found["with_ties_high"],
            found["with_ties"],
        ),
    ):
        if value is None or n < MIN_BATTLES:
            rows.append(_cell(label, evidence, measure, f"too few votes yet (need {MIN_BATTLES})", "", n))
        else:
            rows.append(_cell(label, evidence, measure, f"{value:.0%}", f"[{low:.0%}, {high:.0%}]", n))
    return rows


def _ending_row(
    label: str, evidence: str, scores: Mapping[str, dict], endings: Mapping[str, str], *, n_boot: int, seed: int
) -> dict:
    """How well the judge's overall separates conversations people ended *satisfied* from those they ended
    *frustrated* (CRS Arena's buttons): the chance that a satisfied one scores higher than a frustrated one (AUC;
    equal scores count half; 0.5 is chance), with a bootstrap interval resampling each group."""
    measure = "overall: satisfied above frustrated (AUC, chance 0.5)"
    happy = np.array([scores[c]["overall"] for c, s in endings.items() if s == "satisfied" and _scored(scores, c)])
    sad = np.array([scores[c]["overall"] for c, s in endings.items() if s == "frustrated" and _scored(scores, c)])
    n = len(happy) + len(sad)
    if min(len(happy), len(sad)) < MIN_ENDINGS:
        return _cell(label, evidence, measure, f"too few endings yet (need {MIN_ENDINGS} of each)", "", n)
    rng = np.random.default_rng(seed)
    draws = [
        _auc(happy[rng.integers(0, len(happy), len(happy))], sad[rng.integers(0, len(sad), len(sad))])
        for _ in range(n_boot)
    ]
    low, high = np.percentile(draws, [2.5, 97.5])
    return _cell(label, evidence, measure, f"{_auc(happy, sad):.2f}", f"[{low:.2f}, {high:.2f}]", n)


def _scored(scores: Mapping[str, dict], conversation_id: str) -> bool:
    return conversation_id in scores and scores[conversation_id]["overall"] is not None


def _auc(higher: np.ndarray, lower: np.ndarray) -> float:
    diff = higher[:, None] - lower[None, :]
    return float(((diff > 0) + 0.5 * (diff == 0)).mean())


def _cell(label: str, evidence: str, measure: str, value: str, interval: str, n: int) -> dict:
    return dict(zip(COLUMNS, (label, evidence, measure, value, interval, n), strict=True))


def scatter(agreement: Agreement, setup: str | None) -> go.Figure:
    """The judge's overall against people's overall, one point per rated conversation of ``setup``."""
    figure = go.Figure()
    points = agreement.points.get(setup or "", [])
    for evidence in EVIDENCE:
        for system in sorted({p["system"] for p in points if p["evidence"] == evidence}):
            chosen = [p for p in points if p["evidence"] == evidence and p["system"] == system]
            figure.add_trace(
                go.Scatter(
                    x=[p["judge"] for p in chosen],
                    y=[p["people"] for p in chosen],
                    mode="markers",
                    name=f"{system} ({evidence})",
                    hovertemplate="judge %{x:.1f} · people %{y:.2f}<extra>%{fullData.name}</extra>",
                )
            )
    title = "Judge vs people" + (f": {setup}" if setup else "") + ("" if points else " (no rated conversations yet)")
    figure.update_layout(
        title=title,
        xaxis_title="judge overall (0-100)",
        yaxis_title="people's overall (mean; 0-4)",
        height=420,
    )
    return figure


def setups(db: Database) -> list[tuple[str, str, str | None]]:
    """(label, scorer, fingerprint) of every judge setup with finished evaluations, most used first, the embedded
    demo judge last (its label says so)."""
    found = []
    for s in judge_setups(db, uploads=True):
        label = setup_label(s["scorer"], loads(s["config"], {}) or {}, s["fingerprint"])
        if is_demo_scorer(s["scorer"]):
            label += " (demo judge: not meaningful)"
        found.append((label, s["scorer"], s["fingerprint"] or None))
    return sorted(found, key=lambda setup: is_demo_scorer(setup[1]))


def resolve_setup(db: Database, choice: str | None) -> tuple[str, str, str | None]:
    """(label, scorer, fingerprint) of a judge setup named by its label or its scorer (None: the most used one).

    :raises LookupError: no such setup, or none at all
    """
    found = [
        (
            setup_label(s["scorer"], loads(s["config"], {}) or {}, s["fingerprint"]),
            s["scorer"],
            s["fingerprint"] or None,
        )
        for s in judge_setups(db, uploads=True)
    ]
    for label, scorer, fingerprint in found:
        if choice in (None, label, scorer):
            return label, scorer, fingerprint
    known = "; ".join(label for label, _, _ in found) or "none: nothing is scored yet"
    raise LookupError(f"no judge setup {choice!r}; the setups are: {known}")


def judge_scores_rows(db: Database, records: list[dict], choice: str | None) -> list[dict]:
    """The judge's latest scores of exported conversations (``records`` from
    :func:`storage.human_labels.crsarena_eval_records`) as ``evaluate --out`` rows keyed by each record's ``conv_id``.

    :raises LookupError: see :func:`resolve_setup`
    """
    label, scorer, fingerprint = resolve_setup(db, choice)
    scores = latest_scores(db, scorer=scorer, fingerprint=fingerprint)
    rows = []
    for record in records:
        score = scores.get(record["conversation_id"])
        if score is None:
            continue
        factors = {f: score["factors"].get(f) for f in FACTORS}
        present = [v for v in factors.values() if v is not None]
        rows.append(
            {
                "conversation_id": record["conv_id"],
                "system_id": record["system"],
                "scorer": scorer,
                "setup": label,
                "overall": score["overall"],
                "factor_mean": sum(present) / len(present) if present else None,
                "factors": factors,
            }
        )
    return rows
