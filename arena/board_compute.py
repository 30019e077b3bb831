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

**Style control** (``style=True``): the ratings come from the same fit with four style covariates beside them
(reply length, items listed, questions asked, answer latency; :mod:`arena.style`), LMArena's method, so a rating
is what remains once style is accounted for; each covariate's coefficient comes with a bootstrap interval. A
battle missing a covariate is fitted with the ones it has; a covariate that cannot be fitted (the same in every
battle, or explained by which systems met) is left out, and with none left the board is plain Bradley–Terry with
a note, never an error. :class:`ComputedBoard` ``fit`` says which method produced the board (it goes into the
snapshot), the notes, the coefficients and the closest pair (how sure the order is, and about how many more votes
would settle it).

A system with fewer than :data:`PROVISIONAL_BATTLES` voted battles is ``provisional``: its rating is
shown but it never shares rank 1 with a system of its group that has enough battles. Anonymous
uploads (source ``upload``) are left out unless the operator asks (``uploads=True``, see
:mod:`storage.uploads`). Computing writes nothing: :mod:`arena.board_cache` stores snapshots when the data
changed.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from sqlite_utils import Database

from arena.bradley_terry import NoConvergence
from arena.ratings import RATING_TABLE_COLUMNS, ClosestPair, RatingFit, fit_ratings, win_rate_matrix
from arena.style import FEATURES, LABELS, battle_covariates
from evaluators.factors import FACTORS
from evaluators.metrics import KS
from storage.battle_tags import battle_tags
from storage.battle_votes import voted_battles
from storage.jsonutil import loads
from storage.stats import factor_means, judge_setups, latest_evaluations

log = logging.getLogger(__name__)

DATASETS = ("redial", "opendialkg")
OTHER = "other"  # the dataset filter value for systems whose id names no dataset (e.g. this app's own)
RECALL_COLUMNS = tuple(f"recall@{k}" for k in KS) + tuple(f"session_recall@{k}" for k in KS)
# the ratings table's columns (arena.ratings.RATING_TABLE_COLUMNS), rank and group first
RATING_COLUMNS = ("rank", "group", *(c for c in RATING_TABLE_COLUMNS if c not in ("system", "rank", "group")))
PLAIN_COLUMNS = ("plain_rank", "plain_rating")  # with style control: the same system on the plain board
OVERALL_COLUMNS = ("overall_rank",)  # on a kind's board: the same system's rank on the board of every kind
SCORE_COLUMNS = ("overall_mean", "overall_ci_low", "overall_ci_high", "judged", *FACTORS)
COLUMNS = (
    "system",
    "dataset",
    *RATING_COLUMNS,
    *PLAIN_COLUMNS,
    *OVERALL_COLUMNS,
    "provisional",
    *SCORE_COLUMNS,
    *RECALL_COLUMNS,
    "simulations",
)
PLAIN = "bradley-terry"  # the methods a board names (ComputedBoard.fit["method"], stored with the snapshot)
STYLE = "bradley-terry + style control"
PROVISIONAL_BATTLES = 10  # fewer voted battles than this: the rating is provisional
MIN_KIND_VOTES = 20  # a kind's board with fewer votes than this shows no ratings: "too few votes"
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


def battle_table(
    db: Database,
    *,
    domain: str | None = None,
    dataset: str | None = None,
    style: bool = False,
    kind: str | None = None,
    revealed: bool = False,
) -> pd.DataFrame:
    """The voted battles the board rates, one row each: ``model_a``, ``model_b``, ``winner`` (a, b, tie,
    both_bad), oldest first, both systems on the ``dataset``'s board. With ``style``, also the style covariates
    (:data:`arena.style.FEATURES`, missing ones set to 0) and ``df.attrs["missing"]``: per covariate, how many
    battles lacked it.

    ``kind``: only battles whose first message makes that kind of request (:mod:`arena.request_kinds`; a battle not
    tagged yet is on no kind's board). A battle where a reply revealed a system's name before the vote is set aside
    unless ``revealed`` (LMArena's practice); ``df.attrs["set_aside"]`` counts those of the board's battles, set aside
    or (with ``revealed``) rated."""
    keep = dataset_filter(dataset)
    kept = [b for b in voted_battles(db, domain=domain) if keep(b["system_a"]) and keep(b["system_b"])]
    tags = battle_tags(db)
    if kind:
        kept = [b for b in kept if b["battle_id"] in tags and kind in tags[b["battle_id"]].kinds]
    named = [b for b in kept if b["battle_id"] in tags and tags[b["battle_id"]].revealed]
    if named and not revealed:
        kept = [b for b in kept if not (b["battle_id"] in tags and tags[b["battle_id"]].revealed)]
    frame = pd.DataFrame(
        [{"model_a": b["system_a"], "model_b": b["system_b"], "winner": b["choice"]} for b in kept],
        columns=["model_a", "model_b", "winner"],
    )
    if style:
        covariates, missing = battle_covariates(db, kept)
        frame = pd.concat([frame, covariates], axis=1)
        frame.attrs["missing"] = missing
    frame.attrs["set_aside"] = len(named)
    return frame


def kind_counts(db: Database, *, domain: str | None = None, revealed: bool = False) -> dict[str, int]:
    """Votes per kind of request (every kind of :data:`arena.request_kinds.KINDS`, 0 included), counted as the boards
    count them: a vote that revealed a name only with ``revealed``."""
    from arena.request_kinds import KINDS

    tags = battle_tags(db)
    counts = dict.fromkeys(KINDS, 0)
    for b in voted_battles(db, domain=domain):
        tag = tags.get(b["battle_id"])
        if tag is None or (tag.revealed and not revealed):
            continue
        for k in tag.kinds:
            if k in counts:
                counts[k] += 1
    return counts


@dataclass
class ComputedBoard:
    """A computed leaderboard: rows (:data:`COLUMNS`) best first, figures, and ``fit``: how the ratings were
    obtained, as stored with the snapshot (JSON): ``method`` (:data:`PLAIN` or :data:`STYLE`), ``style`` (asked
    for), ``covariates`` (fitted), ``coefficients`` (one dict per fitted covariate: ``covariate``, ``label``,
    ``coefficient``, ``ci_low``, ``ci_high`` in log-odds per standard deviation, ``points_per_sd``),
    ``missing`` (battles lacking each covariate), ``notes`` (sentences for people), ``closest`` (the adjacent
    pair least surely ordered: ``upper``, ``lower``, ``p_above``, ``votes``, ``state`` — ``resolved``, ``open``
    or ``level`` (no estimate: the two are even so far) — and ``more_votes`` when open; None) and ``votes``."""

    rows: list[dict]
    figures: dict[str, go.Figure]
    fit: dict = field(default_factory=dict)


def compute_leaderboard(db: Database, **filters: Any) -> tuple[list[dict], dict[str, go.Figure]]:
    """Rows (see :data:`COLUMNS`; missing values are None) best first, and the figures
    (``win_rate``: the pairwise win-rate heatmap), for :func:`compute_board`'s filters and options. Nothing is
    written. :func:`compute_board` gives the fit too.
    """
    board = compute_board(db, **filters)
    return board.rows, board.figures


def tie_summary(battles: pd.DataFrame, plain) -> dict | None:
    """Ties modelled (:mod:`arena.davidson`) beside the half-win rule the ratings use: Davidson's tie propensity on
    these votes (the data's fit alone, milliseconds: the bench prints its interval) and Kendall's tau between its order
    and the half-win order; None where no vote is a tie (nothing to model) or fewer than two systems met."""
    from scipy.stats import kendalltau

    from arena.davidson import fit_davidson

    if battles.empty or not battles["winner"].isin(["tie", "both_bad"]).any():
        return None
    davidson = fit_davidson(battles, rounds=0)
    if len(davidson.systems) < 2:
        return None
    half_win = {r["system"]: r["rating"] for r in plain.table.to_dict("records")}
    order = [s for s in davidson.systems if s in half_win]
    tau = kendalltau([half_win[s] for s in order], [davidson.ratings[0][davidson.systems.index(s)] for s in order])[0]
    return {"nu": float(davidson.nu[0]), "tau": None if np.isnan(tau) else float(tau), "systems": len(order)}


def compute_board(
    db: Database,
    *,
    domain: str | None = None,
    dataset: str | None = None,
    scorer: str | None = None,
    seed: int = 0,
    rounds: int = 200,
    uploads: bool | None = None,
    setups: list[tuple[str, tuple[str, str]]] | None = None,
    style: bool = False,
    kind: str | None = None,
    revealed: bool = False,
) -> ComputedBoard:
    """The board for these filters (:func:`compute_leaderboard`), with ``style``: style-controlled ratings, and
    the plain rank and rating of each system beside them. Nothing is written.

    ``kind``: the board of one kind of request (:mod:`arena.request_kinds`): the same fit on that kind's votes, each
    system's rank on the board of every kind beside it (``overall_rank``), and no ratings below
    :data:`MIN_KIND_VOTES` votes (``fit["too_few"]``). ``revealed``: rate the votes cast after a reply revealed a
    system's name too (set aside by default; ``fit["set_aside"]`` counts them either way).

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
    battles = battle_table(db, domain=domain, dataset=dataset, style=style, kind=kind, revealed=revealed)
    kind_votes, set_aside = len(battles), int(battles.attrs.get("set_aside", 0))
    too_few = bool(kind) and kind_votes < MIN_KIND_VOTES
    if too_few:  # a handful of votes ranks nothing: the board says how many it has, and shows no ratings
        battles = battles.iloc[0:0]
    plain = fit_ratings(battles, rounds=rounds, seed=seed)
    rated, fit = plain, describe_fit(plain, style=False)
    if style:
        rated, fit = style_fit(battles, plain, rounds=rounds, seed=seed)
    fit |= {
        "ties": tie_summary(battles, plain),
        "kind": kind,
        "kind_votes": kind_votes,
        "too_few": too_few,
        "min_votes": MIN_KIND_VOTES,
        "set_aside": set_aside,
        "revealed": revealed,
    }
    rows: dict[str, dict] = {}
    for record in rated.table.to_dict("records"):
        _row(rows, record["system"]).update({c: _plain(record[c]) for c in RATING_COLUMNS})
    if style:
        for record in plain.table.to_dict("records"):
            _row(rows, record["system"]).update(
                {"plain_rank": _plain(record["rank"]), "plain_rating": _plain(record["rating"])}
            )
    if kind:
        overall = battle_table(db, domain=domain, dataset=dataset, style=style, revealed=revealed)
        overall_plain = fit_ratings(overall, rounds=rounds, seed=seed)
        overall_fit = style_fit(overall, overall_plain, rounds=rounds, seed=seed)[0] if style else overall_plain
        for record in overall_fit.table.to_dict("records"):
            if record["system"] in rows:
                rows[record["system"]]["overall_rank"] = _plain(record["rank"])
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
    return ComputedBoard(ordered, {"win_rate": win_rate_figure(battles, order)}, fit)


def style_fit(battles: pd.DataFrame, plain: RatingFit, *, rounds: int, seed: int) -> tuple[RatingFit, dict]:
    """The style-controlled fit of ``battles`` (with :data:`arena.style.FEATURES` columns) and its description.

    When no covariate can be fitted (each is constant, or explained by which systems met; one system; no votes) or
    the fit fails, ``plain`` (the same battles' plain fit) is the board, with a note saying why: never an error.
    """
    missing = battles.attrs.get("missing")
    if battles.empty:
        return plain, describe_fit(plain, style=True, missing=missing)
    try:
        fitted = fit_ratings(battles, rounds=rounds, seed=seed, covariates=FEATURES)
    except (NoConvergence, np.linalg.LinAlgError, ValueError) as e:  # never an error on the page: the plain board
        log.warning("style-controlled fit failed, showing the plain one: %s", e)
        return plain, describe_fit(plain, style=True, missing=missing, failed=True)
    if not fitted.fitted:
        return plain, describe_fit(plain, style=True, missing=missing, dropped=fitted.dropped)
    return fitted, describe_fit(fitted, style=True, missing=missing)


def describe_fit(
    fit: RatingFit,
    *,
    style: bool,
    missing: dict[str, int] | None = None,
    dropped: tuple[tuple[str, str], ...] | None = None,
    failed: bool = False,
) -> dict:
    """:class:`ComputedBoard` ``fit`` for a rating fit: the method, coefficients, notes for people, closest pair.

    ``dropped``: the covariates a style-controlled attempt left out, when the board shows the plain fit instead
    (default: ``fit.dropped``); ``failed``: the style-controlled fit raised, and the board shows the plain one.
    """
    votes = int(fit.table["battles"].sum() // 2) if not fit.table.empty else 0
    missing = dict(missing or {})
    coefficients = [
        {
            "covariate": c["covariate"],
            "label": LABELS.get(c["covariate"], c["covariate"]),
            **{key: _plain(c[key]) for key in ("coefficient", "ci_low", "ci_high", "points_per_sd")},
        }
        for c in fit.coefficients.to_dict("records")
    ]
    notes: list[str] = []
    if style and votes:
        for name, reason in fit.dropped if dropped is None else dropped:
            label = LABELS.get(name, name)
            if missing.get(name, 0) >= votes:
                notes.append(
                    f"{label} is left out: no battle has it for both sides (imported conversations, and systems "
                    "that record no answer time, lack it)."
                )
            elif reason == "constant":
                notes.append(f"{label} is left out: it is the same in every battle.")
            else:
                notes.append(f"{label} is left out: it cannot be told apart from which systems met.")
        lacking: dict[int, list[str]] = defaultdict(list)  # battles lacking covariates, by how many lack them
        for name in fit.fitted:
            if 0 < missing.get(name, 0) < votes:
                lacking[missing[name]].append(LABELS.get(name, name).lower())
        for count, labels in sorted(lacking.items()):
            listed = labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]
            notes.append(
                f"{count} of {votes} battles lack {listed} (a side without a conversation, or a system that recorded "
                "no answer time): they are fitted with the covariates they have (the missing difference counts as "
                "none)."
            )
        if failed or not fit.fitted:
            notes.append("Style control could not be fitted on these votes: the ranking shown is plain Bradley–Terry.")
    return {
        "method": STYLE if fit.fitted else PLAIN,
        "style": style,
        "covariates": list(fit.fitted),
        "coefficients": coefficients,
        "missing": missing,
        "notes": notes,
        "closest": _closest(fit.closest),
        "votes": votes,
    }


def _closest(closest: ClosestPair | None) -> dict | None:
    """The closest pair as stored (JSON): ``state`` resolved, open (``more_votes`` estimated) or level."""
    if closest is None:
        return None
    more = closest.more_votes
    return {
        "upper": closest.upper,
        "lower": closest.lower,
        "p_above": float(closest.p_above),
        "votes": closest.votes,
        "state": "resolved" if more is None else "level" if math.isinf(more) else "open",
        "more_votes": None if more is None or math.isinf(more) else round(more),
    }


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
