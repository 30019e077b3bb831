"""The leaderboard computed: human-vote ratings joined with the automatic scores of each system (cached and
snapshotted by :mod:`arena.board_cache`, shown by :mod:`arena.board_view`).

One row per system with

* Bradley–Terry rating, its bootstrap 95% interval, rank by interval overlap, battle tallies and
  online Elo (K = 16) — from voted battles (:mod:`arena.ratings`);
* the mean judge overall score (0–100; the debate's, or the proxy's calibrated one) with a bootstrap 95%
  interval, the twelve factor means (0–4) and the number of judged conversations — from the evaluations
  of **one judge setup**: the scorer *and* its configuration fingerprint (judge models, mode, rubric and
  prompt versions, debate settings), never a mix. :func:`scorers` names each setup (:func:`setup_label`); the default is
  chosen as below;
* Recall@k means over the system's simulation conversations (source ``simulation``), named by
  source: ``recall@k`` is iEvaLM's (the list the dialogue ended on), ``session_recall@k`` is over
  CoRE's session list (:mod:`evaluators.metrics`). Recall is computed from the catalog, not by the
  judge, so it is read from each conversation's latest evaluation whatever its scorer, pooled over
  targets as iEvaLM averages.

Filters: ``domain`` (the battle's and the conversation's domain) and ``dataset`` (a system's
training set, read from its id suffix, e.g. ``kbrd_redial`` → ``redial``; :data:`OTHER` selects the
systems whose id names none, such as this app's own; a battle counts when both of its systems pass).
Systems that never met, directly or through others, fall into separate rating ``group`` s (see
:func:`arena.ratings.comparison_groups`).

A system with fewer than :data:`PROVISIONAL_BATTLES` voted battles is ``provisional``: its rating is
shown but it never shares rank 1 with a system of its group that has enough battles. Anonymous
uploads (source ``upload``) are left out unless the operator asks (``uploads=True``, see
:mod:`storage.uploads`). Computing writes nothing: :mod:`arena.board_cache` stores snapshots when the data
changed.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from sqlite_utils import Database

from arena.ratings import compute_ratings, win_rate_matrix
from evaluators.factors import FACTORS
from evaluators.metrics import KS
from storage.battle_votes import voted_battles
from storage.jsonutil import loads
from storage.stats import factor_means, judge_setups, latest_evaluations

DATASETS = ("redial", "opendialkg")
OTHER = "other"  # the dataset filter value for systems whose id names no dataset (e.g. this app's own)
RECALL_COLUMNS = tuple(f"recall@{k}" for k in KS) + tuple(f"session_recall@{k}" for k in KS)
RATING_COLUMNS = ("rank", "group", "rating", "ci_low", "ci_high", "battles", "wins", "ties", "losses", "elo")
SCORE_COLUMNS = ("overall_mean", "overall_ci_low", "overall_ci_high", "judged", *FACTORS)
COLUMNS = ("system", "dataset", *RATING_COLUMNS, "provisional", *SCORE_COLUMNS, *RECALL_COLUMNS, "simulations")
PROVISIONAL_BATTLES = 10  # fewer voted battles than this: the rating is provisional
DEMO_SCORER_MARKS = ("smollm2-135m", "llm:embedded")  # the embedded demo judge: never the default scorer


def dataset_of(system_id: str) -> str | None:
    """The training set a system id names by its suffix (``barcor_opendialkg`` → ``opendialkg``)."""
    return next((d for d in DATASETS if system_id.endswith(f"_{d}")), None)


def is_demo_scorer(name: str) -> bool:
    """A scorer that is (or includes) the embedded 135M demo judge."""
    return any(mark in name.lower() for mark in DEMO_SCORER_MARKS)


def scorers(db: Database, *, uploads: bool = False) -> list[str]:
    """Judge setups with finished evaluations, by label (:func:`setup_label`); the first is the default.
    The proxy comes first when no capable LLM judge is configured (the rule of ``auto`` scoring,
    :func:`evaluators.scorer_setup.default_scorer`), then the others by use; the demo judge comes
    last, so it is shown only when someone chooses it."""
    return [label for label, _ in judge_setup_choices(db, uploads=uploads)]


def judge_setup_choices(db: Database, *, uploads: bool = False) -> list[tuple[str, tuple[str, str]]]:
    """(label, (scorer, fingerprint)) of every judge setup with finished evaluations, in :func:`scorers`' order:
    one read of the setups gives the board both its menu and the setup it shows."""
    from evaluators.scorer_setup import default_scorer

    setups = _setups(db, uploads=uploads)
    proxy_first = any(label.startswith("proxy ") for label, _ in setups) and default_scorer() == "proxy"
    return sorted(setups, key=lambda s: (is_demo_scorer(s[0]), not (proxy_first and s[0].startswith("proxy "))))


def choose_scorer(available: list[str], requested: str | None = None) -> str | None:
    """The judge setup a board shows: ``requested`` when it has evaluations, else the default (the
    first of :func:`scorers`), None when nothing is judged yet."""
    if requested is not None and requested in available:
        return requested
    return available[0] if available else None


def setup_label(scorer: str, config: dict, fingerprint: str) -> str:
    """A judge setup's name: scorer, mode, rubric, prompt versions and the fingerprint's start, e.g.
    ``llm:gpt-4o-mini · reasoned+probability · core-v2 · judge@2026-11-23.2 · debate@… · #1a2b3c4d``."""
    debate = config.get("debate") or {}
    parts = [
        scorer,
        config.get("mode") or config.get("proxy_version"),
        config.get("rubric"),
        config.get("judge_prompts"),
        debate.get("prompts"),
    ]
    label = " · ".join(str(p) for p in parts if p)
    return f"{label} · #{fingerprint[:8]}" if fingerprint else label


def _setups(db: Database, *, uploads: bool) -> list[tuple[str, tuple[str, str]]]:
    """(label, (scorer, fingerprint)) of every judge setup, most used first."""
    return [
        (setup_label(r["scorer"], loads(r["config"], {}) or {}, r["fingerprint"]), (r["scorer"], r["fingerprint"]))
        for r in judge_setups(db, uploads=uploads)
    ]


def _resolve_setup(setups: list[tuple[str, tuple[str, str]]], choice: str) -> tuple[str, str | None]:
    """(scorer, fingerprint) of a setup label among ``setups``; a bare scorer name means its most used setup."""
    for label, setup in setups:
        if label == choice:
            return setup
    for _, setup in setups:
        if setup[0] == choice:
            return setup
    return choice, None


def dataset_filter(dataset: str | None) -> Callable[[str], bool]:
    """Whether a system belongs on the board of ``dataset`` (None: every system; :data:`OTHER`: systems of no
    dataset)."""
    if not dataset:
        return lambda system: True
    wanted = None if dataset == OTHER else dataset
    return lambda system: dataset_of(system) == wanted


def battle_table(db: Database, *, domain: str | None = None, dataset: str | None = None) -> pd.DataFrame:
    """The voted battles the board rates, one row each: ``model_a``, ``model_b``, ``winner`` (a, b, tie,
    both_bad), oldest first, both systems on the ``dataset``'s board."""
    keep = dataset_filter(dataset)
    return pd.DataFrame(
        [
            {"model_a": b["system_a"], "model_b": b["system_b"], "winner": b["choice"]}
            for b in voted_battles(db, domain=domain)
            if keep(b["system_a"]) and keep(b["system_b"])
        ],
        columns=["model_a", "model_b", "winner"],
    )


def compute_leaderboard(
    db: Database,
    *,
    domain: str | None = None,
    dataset: str | None = None,
    scorer: str | None = None,
    seed: int = 0,
    rounds: int = 200,
    uploads: bool | None = None,
    setups: list[tuple[str, tuple[str, str]]] | None = None,
) -> tuple[list[dict], dict[str, go.Figure]]:
    """Rows (see :data:`COLUMNS`; missing values are None) best first, and the figures
    (``win_rate``: the pairwise win-rate heatmap). Nothing is written.

    :param uploads: count anonymous uploads' scores (default: the operator's setting,
        ``CRS_ARENA_LEADERBOARD_UPLOADS``)
    :param setups: :func:`judge_setup_choices` when the caller read them already (else they are read here)
    """
    if uploads is None:
        from storage.uploads import uploads_on_leaderboard

        uploads = uploads_on_leaderboard()
    if setups is None:
        setups = judge_setup_choices(db, uploads=uploads)
    if scorer is None:
        scorer = choose_scorer([label for label, _ in setups])
    keep = dataset_filter(dataset)
    battles = battle_table(db, domain=domain, dataset=dataset)
    rows: dict[str, dict] = {}
    for record in compute_ratings(battles, rounds=rounds, seed=seed).to_dict("records"):
        _row(rows, record["system"]).update({c: _plain(record[c]) for c in RATING_COLUMNS})
    _mark_provisional(rows)
    if scorer is not None:
        name, fingerprint = _resolve_setup(setups, scorer)
        _add_scores(
            db,
            rows,
            scorer=name,
            domain=domain,
            keep=keep,
            rounds=rounds,
            seed=seed,
            uploads=uploads,
            fingerprint=fingerprint or None,
        )
    _add_recall(db, rows, domain=domain, keep=keep, uploads=uploads)

    ordered = sorted(rows.values(), key=_order)
    order = [r["system"] for r in ordered if r["rating"] is not None]
    return ordered, {"win_rate": win_rate_figure(battles, order)}


def _row(rows: dict[str, dict], system: str) -> dict:
    """The system's row, created empty (every column None) on first use."""
    return rows.setdefault(system, dict.fromkeys(COLUMNS) | {"system": system, "dataset": dataset_of(system)})


def _mark_provisional(rows: dict[str, dict]) -> None:
    """Fewer than PROVISIONAL_BATTLES battles: provisional, and never rank 1 beside an established system
    of the same group."""
    established = {
        r["group"] for r in rows.values() if r["rating"] is not None and (r["battles"] or 0) >= PROVISIONAL_BATTLES
    }
    for r in rows.values():
        if r["rating"] is None:
            continue
        r["provisional"] = (r["battles"] or 0) < PROVISIONAL_BATTLES
        if r["provisional"] and r["group"] in established and r["rank"] is not None:
            r["rank"] = max(int(r["rank"]), 2)


def _add_scores(
    db: Database,
    rows: dict[str, dict],
    *,
    scorer: str,
    domain: str | None,
    keep: Callable[[str], bool],
    rounds: int,
    seed: int,
    uploads: bool = False,
    fingerprint: str | None = None,
) -> None:
    """The judge's overall (the debate's, or the proxy's calibrated score): mean and interval, judged conversations
    and factor means, all of one judge setup (``scorer`` with the configuration ``fingerprint``)."""
    overall: dict[str, list[float]] = defaultdict(list)
    judged: dict[str, int] = defaultdict(int)
    for e in latest_evaluations(db, scorer=scorer, domain=domain, uploads=uploads, fingerprint=fingerprint):
        if keep(e["system_id"]):
            judged[e["system_id"]] += 1
            if e["overall"] is not None:
                overall[e["system_id"]].append(e["overall"])
    for system, n in judged.items():
        values = overall[system]
        low, high = mean_interval(values, rounds=rounds, seed=seed)
        _row(rows, system).update(
            {
                "judged": n,
                "overall_mean": float(np.mean(values)) if values else None,
                "overall_ci_low": low,
                "overall_ci_high": high,
            }
        )
    for f in factor_means(db, scorer=scorer, domain=domain, uploads=uploads, fingerprint=fingerprint):
        if keep(f["system_id"]) and f["factor"] in FACTORS:
            _row(rows, f["system_id"])[f["factor"]] = f["mean"]


def _add_recall(
    db: Database, rows: dict[str, dict], *, domain: str | None, keep: Callable[[str], bool], uploads: bool = False
) -> None:
    """Recall@k over each system's simulation conversations (latest evaluation, any scorer), pooled over
    targets (each conversation weighted by ``recall_targets``, as iEvaLM averages over labels)."""
    recalls: dict[str, dict[str, list[tuple[float, int]]]] = defaultdict(lambda: defaultdict(list))
    simulations: dict[str, int] = defaultdict(int)
    for e in latest_evaluations(db, source="simulation", domain=domain, uploads=uploads):
        if keep(e["system_id"]):
            simulations[e["system_id"]] += 1
            metrics = loads(e["metrics"], {})
            for column in RECALL_COLUMNS:
                if metrics.get(column) is not None:
                    weight = int(metrics.get("recall_targets") or 1)
                    recalls[e["system_id"]][column].append((float(metrics[column]), weight))
    for system, n in simulations.items():
        pooled = {c: sum(v * w for v, w in pairs) / sum(w for _, w in pairs) for c, pairs in recalls[system].items()}
        _row(rows, system).update({"simulations": n, **pooled})


def mean_interval(values: list[float], *, rounds: int, seed: int) -> tuple[float | None, float | None]:
    """Percentile bootstrap 95% interval of the mean (``rounds`` seeded resamples)."""
    if not values:
        return None, None
    data = np.asarray(values, float)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(rounds, len(data)))].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    return float(low), float(high)


def win_rate_figure(battles: pd.DataFrame, order: list[str]) -> go.Figure:
    """Heatmap of the row system's points per battle against the column system (ties count half)."""
    figure = go.Figure()
    if battles.empty:
        figure.add_annotation(text="No votes yet", showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
        figure.update_xaxes(visible=False)
        figure.update_yaxes(visible=False)
        return figure
    matrix = win_rate_matrix(battles, order)
    text = matrix.map(lambda v: "" if math.isnan(v) else f"{v:.2f}")
    figure.add_trace(
        go.Heatmap(
            z=matrix.to_numpy(),
            x=order,
            y=order,
            text=text.to_numpy(),
            texttemplate="%{text}",
            zmin=0,
            zmax=1,
            colorscale="RdBu",
            hovertemplate="%{y} vs %{x}: %{z:.2f}<extra></extra>",
        )
    )
    figure.update_layout(
        title="Win rate of the row system against the column system (ties count half)",
        xaxis_title="opponent",
        yaxis_title="system",
        yaxis_autorange="reversed",
        height=max(360, 40 * len(order) + 160),
    )
    return figure


def _order(row: dict) -> tuple:
    """Rated systems by rank then rating; the others after them, by debate score."""
    if row["rating"] is not None:
        return (0, row["rank"], bool(row["provisional"]), -row["rating"], row["system"])
    overall = row["overall_mean"]
    return (1, 0, -overall if overall is not None else math.inf, row["system"])


def _plain(value):
    """numpy scalars as Python numbers (snapshots are JSON); NaN as None."""
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(value) else float(value)
    return value
