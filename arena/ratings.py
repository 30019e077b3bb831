"""The ratings table from pairwise battles: Bradley–Terry ratings with bootstrap intervals
(:mod:`arena.bradley_terry`), ranks and comparison groups, online Elo, win rates, and the closest pair.

Input: battles as a DataFrame (or a list of dicts) with columns ``model_a``, ``model_b`` and
``winner`` in ``a | b | tie | both_bad`` (:mod:`arena.battle_outcomes`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from arena.battle_outcomes import SCORE_A, Outcomes, aggregate, as_frame
from arena.bradley_terry import ALPHA, BASE_RATING, PRIOR_SD, SCALE, bootstrap_fit

ELO_K = 16.0


def rank_by_intervals(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Rank = 1 + the number of systems whose lower bound is above this system's upper bound.

    Systems whose intervals overlap share a rank (FastChat's "Rank (UB)").
    """
    low, high = np.asarray(low, float), np.asarray(high, float)
    return 1 + (low[None, :] > high[:, None]).sum(axis=1)


def comparison_groups(outcomes: Outcomes) -> np.ndarray:
    """Per system, the number of its group of systems connected by battles (directly or through others).

    Ratings compare systems only within a group: two groups that never met are each centred by the
    prior, not measured against each other. Groups are numbered from 1 in the order of ``systems``.
    """
    n = len(outcomes.systems)
    graph = coo_matrix((np.ones(len(outcomes.a)), (outcomes.a, outcomes.b)), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    first_seen = {label: k for k, label in enumerate(dict.fromkeys(labels.tolist()), 1)}
    return np.array([first_seen[label] for label in labels.tolist()], dtype=int)


def online_elo(battles: pd.DataFrame | Iterable[dict], *, k: float = ELO_K) -> dict[str, float]:
    """Sequential Elo in the given order (start 1000, base 10, scale 400, tie and both_bad = 0.5).

    Order-dependent by nature; kept as a secondary column (CRS Arena's published ranking used it).
    """
    frame = as_frame(battles)
    codes, names = pd.factorize(pd.concat([frame["model_a"], frame["model_b"]], ignore_index=True))
    ratings = [BASE_RATING] * len(names)
    points = frame["winner"].map(SCORE_A).tolist()
    for a, b, score in zip(codes[: len(frame)].tolist(), codes[len(frame) :].tolist(), points):
        expected_a = 1.0 / (1.0 + 10.0 ** ((ratings[b] - ratings[a]) / SCALE))
        delta = k * (score - expected_a)
        ratings[a] += delta
        ratings[b] -= delta
    return dict(zip(names, ratings))


def win_rate_matrix(battles: pd.DataFrame | Iterable[dict], systems: Iterable[str] | None = None) -> pd.DataFrame:
    """Row system's points per battle against the column system (ties half); NaN where they never met."""
    outcomes = aggregate(battles, systems)
    n = len(outcomes.systems)
    points = np.zeros((n, n))
    games = np.zeros((n, n))
    np.add.at(points, (outcomes.a, outcomes.b), outcomes.score * outcomes.count)
    np.add.at(points, (outcomes.b, outcomes.a), (1.0 - outcomes.score) * outcomes.count)
    np.add.at(games, (outcomes.a, outcomes.b), outcomes.count)
    np.add.at(games, (outcomes.b, outcomes.a), outcomes.count)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(games > 0, points / np.where(games > 0, games, 1.0), np.nan)
    return pd.DataFrame(rate, index=list(outcomes.systems), columns=list(outcomes.systems))


RATING_TABLE_COLUMNS = (
    "system",
    "rating",
    "ci_low",
    "ci_high",
    "rank",
    "group",
    "battles",
    "wins",
    "ties",
    "losses",
    "elo",
    "p_above_next",
)

COEFFICIENT_COLUMNS = ("covariate", "coefficient", "ci_low", "ci_high", "points_per_sd", "sd")

RESOLVED = 0.95  # a pair's order counts as resolved once the bootstrap puts it this likely

Z_RESOLVED = 1.6448536269514722  # the normal quantile of RESOLVED


@dataclass(frozen=True)
class RatingFit:
    """What :func:`fit_ratings` reports: the table, the covariates' coefficients, what was left out, the closest pair.

    ``coefficients`` (one row per fitted covariate, :data:`COEFFICIENT_COLUMNS`): ``coefficient`` and its 95%
    bootstrap interval in natural log-odds of side A winning per standard deviation of the covariate (LMArena's
    unit), ``points_per_sd`` the same in rating points, ``sd`` the standard deviation the covariate was divided
    by. ``dropped``: covariates asked for but not fitted, with the reason (:func:`usable_covariates`).
    ``closest``: the adjacent pair (same group) whose order the bootstrap is least sure of, or None.
    """

    table: pd.DataFrame
    coefficients: pd.DataFrame
    covariates: tuple[str, ...]  # those asked for
    dropped: tuple[tuple[str, str], ...]
    closest: ClosestPair | None

    @property
    def fitted(self) -> tuple[str, ...]:
        return tuple(self.coefficients["covariate"])


@dataclass(frozen=True)
class ClosestPair:
    """Two systems next to each other on the board: how sure the bootstrap is of their order, and about how many
    more votes, in the mix of pairs seen so far, would make it :data:`RESOLVED` (None: already resolved; inf: the
    two are level, no number of votes is likely to separate them)."""

    upper: str
    lower: str
    p_above: float
    votes: int
    more_votes: float | None


def fit_ratings(
    battles: pd.DataFrame | Iterable[dict],
    *,
    rounds: int = 200,
    seed: int = 0,
    prior_sd: float = PRIOR_SD,
    anchor: tuple[str, float] | None = None,
    k: float = ELO_K,
    covariates: Sequence[str] = (),
) -> RatingFit:
    """The ratings table (:func:`compute_ratings`) from one fit, with ``covariates`` (columns of ``battles``,
    :func:`aggregate`) fitted beside the ratings when any is usable; otherwise, and with none asked, plain
    Bradley–Terry. The table's ``p_above_next`` is the share of bootstrap replicates in which the system is rated
    above the next one down of its group (ties half); None for the last of a group.
    """
    frame = as_frame(battles)
    names = tuple(covariates)
    empty_coefficients = pd.DataFrame(columns=list(COEFFICIENT_COLUMNS))
    if frame.empty:
        dropped = tuple((name, "constant") for name in names)
        return RatingFit(pd.DataFrame(columns=list(RATING_TABLE_COLUMNS)), empty_coefficients, names, dropped, None)
    if rounds < 1:
        raise ValueError("bootstrap intervals need at least one round")
    outcomes = aggregate(frame, covariates=names)
    fit = bootstrap_fit(outcomes, rounds=rounds, seed=seed, prior_sd=prior_sd, anchor=anchor)
    fits = fit.ratings
    low, high = np.quantile(fits[1:], [0.025, 0.975], axis=0)
    elo = online_elo(frame, k=k)
    tally = _tally(outcomes)
    table = pd.DataFrame(
        {
            "system": list(outcomes.systems),
            "rating": fits[0],
            "ci_low": low,
            "ci_high": high,
            "rank": rank_by_intervals(low, high),
            "group": comparison_groups(outcomes),
            "elo": [elo[s] for s in outcomes.systems],
        }
    ).join(tally, on="system")
    table = table.sort_values(["rank", "rating"], ascending=[True, False], kind="stable")
    table["group"] = pd.factorize(table["group"])[0] + 1  # group 1 holds the top system
    order = table.index.to_numpy()  # positions in outcomes.systems, best first
    above = np.full(len(order), np.nan)
    closest: ClosestPair | None = None
    groups = table["group"].to_numpy()
    neighbours = [  # (row, row of the next one down of the same group), in the table's order
        (t, u) for g in dict.fromkeys(groups.tolist()) for t, u in itertools.pairwise(np.flatnonzero(groups == g))
    ]
    for t, u in neighbours:
        upper, lower = order[t], order[u]
        difference = fits[1:, upper] - fits[1:, lower]
        above[t] = float(np.mean(difference > 0) + 0.5 * np.mean(difference == 0))
        if closest is None or above[t] < closest.p_above:
            closest = ClosestPair(
                upper=outcomes.systems[upper],
                lower=outcomes.systems[lower],
                p_above=above[t],
                votes=outcomes.n_battles,
                more_votes=_more_votes(fits[0, upper] - fits[0, lower], difference, above[t], outcomes.n_battles),
            )
    table["p_above_next"] = above
    scale = ALPHA  # r units -> natural log-odds
    coefficient_low, coefficient_high = (
        np.quantile(fit.coefficients[1:], [0.025, 0.975], axis=0) if len(fit.coefficients) > 1 else (None, None)
    )
    coefficients = pd.DataFrame(
        {
            "covariate": list(fit.covariate_names),
            "coefficient": scale * fit.coefficients[0],
            "ci_low": scale * coefficient_low if coefficient_low is not None else np.nan,
            "ci_high": scale * coefficient_high if coefficient_high is not None else np.nan,
            "points_per_sd": SCALE * fit.coefficients[0],
            "sd": fit.scales,
        },
        columns=list(COEFFICIENT_COLUMNS),
    )
    return RatingFit(
        table[list(RATING_TABLE_COLUMNS)].reset_index(drop=True), coefficients, names, fit.dropped, closest
    )


def _more_votes(estimate: float, replicates: np.ndarray, p_above: float, votes: int) -> float | None:
    """About how many more votes make the pair's order :data:`RESOLVED`, if votes keep coming in today's mix.

    The bootstrap spread of the difference shrinks as one over the square root of the votes, so the order is
    resolved once ``|difference| / spread`` reaches :data:`Z_RESOLVED`: at ``votes * (Z * spread / |d|) ** 2``
    votes. None when it is resolved already; inf when the two are level (no estimate can be made).
    """
    if max(p_above, 1.0 - p_above) >= RESOLVED:
        return None
    spread = float(np.std(replicates))
    if abs(estimate) < 1e-9 or spread <= 0:
        return math.inf
    needed = votes * (Z_RESOLVED * spread / abs(estimate)) ** 2
    return max(0.0, needed - votes)


def compute_ratings(battles: pd.DataFrame | Iterable[dict], **options: Any) -> pd.DataFrame:
    """One row per system, best first: ``system, rating, ci_low, ci_high, rank, group, battles, wins,
    ties, losses, elo, p_above_next`` (:func:`fit_ratings`, whose keyword options it takes and which also gives the
    covariates' coefficients).

    ``rating`` is the full-data fit; ``ci_low``/``ci_high`` the 2.5% / 97.5% quantiles of ``rounds``
    seeded bootstrap replicates; ``group`` numbers the sets of systems connected by battles
    (:func:`comparison_groups`; group 1 holds the top system); ``ties`` include both_bad votes;
    ``elo`` is online Elo with ``k``; ``p_above_next`` how sure the bootstrap is that the system is above
    the next one down.
    """
    return fit_ratings(battles, **options).table


def _tally(outcomes: Outcomes) -> pd.DataFrame:
    """Battles, wins, ties (incl. both_bad) and losses per system, indexed by system."""
    n = len(outcomes.systems)

    def per_system(mask_a: np.ndarray, mask_b: np.ndarray) -> np.ndarray:
        return np.bincount(outcomes.a, outcomes.count * mask_a, n) + np.bincount(outcomes.b, outcomes.count * mask_b, n)

    win, tie, loss = outcomes.score == 1.0, outcomes.score == 0.5, outcomes.score == 0.0
    wins, ties, losses = per_system(win, loss), per_system(tie, tie), per_system(loss, win)
    return pd.DataFrame(
        {"battles": wins + ties + losses, "wins": wins, "ties": ties, "losses": losses},
        index=pd.Index(outcomes.systems, name="system"),
    ).astype(int)
