"""Bradley–Terry ratings, bootstrap intervals, rank rule, Elo and win rates (arena.ratings)."""

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize
from synthetic_votes import synthetic_votes
from threadpoolctl import threadpool_limits

from arena.battle_outcomes import aggregate
from arena.bradley_terry import ALPHA, PRIOR_SD, SCALE, bootstrap_bt, bootstrap_weights, fit_bt
from arena.ratings import compute_ratings, fit_ratings, online_elo, rank_by_intervals, win_rate_matrix


def battles(rows: list[tuple[str, str, str, int]]) -> pd.DataFrame:
    """(model_a, model_b, winner, how many times) → one row per battle."""
    return pd.DataFrame([{"model_a": a, "model_b": b, "winner": w} for a, b, w, n in rows for _ in range(n)])


def scipy_fit(frame: pd.DataFrame, systems: tuple[str, ...], weights: np.ndarray | None = None) -> np.ndarray:
    """The same model written directly over single battles and solved by L-BFGS: the reference."""
    index = {s: i for i, s in enumerate(systems)}
    a = frame["model_a"].map(index).to_numpy()
    b = frame["model_b"].map(index).to_numpy()
    y = frame["winner"].map({"a": 1.0, "b": 0.0, "tie": 0.5, "both_bad": 0.5}).to_numpy()
    w = np.ones(len(frame)) if weights is None else weights
    precision = (SCALE / PRIOR_SD) ** 2

    def loss(r):
        d = ALPHA * (r[a] - r[b])
        nll = -(w * (y * -np.logaddexp(0, -d) + (1 - y) * -np.logaddexp(0, d))).sum() + precision * r @ r / 2
        g = w * ALPHA * (y - 1 / (1 + np.exp(-d)))
        grad = -np.bincount(a, g, len(systems)) + np.bincount(b, g, len(systems)) + precision * r
        return nll, grad

    with threadpool_limits(limits=1, user_api="blas"):  # tiny problem: BLAS threads only add latency
        result = minimize(
            loss,
            np.zeros(len(systems)),
            jac=True,
            method="L-BFGS-B",
            options={"gtol": 1e-10, "ftol": 1e-15, "maxiter": 5000},
        )
    return 1000 + SCALE * result.x


def test_a_system_that_never_lost_is_first_and_finite():
    data = battles([("champ", "x", "a", 8), ("y", "champ", "b", 8), ("x", "y", "a", 3), ("x", "y", "b", 2)])
    table = compute_ratings(data, rounds=200, seed=1)
    assert table["system"].iloc[0] == "champ"
    assert np.isfinite(table[["rating", "ci_low", "ci_high"]].to_numpy()).all()
    assert table["rating"].iloc[0] < 2000  # the prior keeps it finite and sensible
    assert table["rating"].iloc[0] > table["rating"].iloc[1] + 200


def test_symmetric_data_gives_equal_ratings_centred_on_1000():
    data = battles(
        [
            ("a", "b", "a", 5),
            ("a", "b", "b", 5),
            ("b", "c", "a", 4),
            ("b", "c", "b", 4),
            ("c", "a", "tie", 3),
            ("a", "c", "both_bad", 3),
        ]
    )
    ratings = fit_bt(aggregate(data))
    assert ratings == pytest.approx([1000.0, 1000.0, 1000.0], abs=1e-6)


def test_mean_is_1000_and_anchor_shifts_every_rating():
    data = synthetic_votes(6, 3000, seed=3)
    outcomes = aggregate(data)
    free = fit_bt(outcomes)
    assert free.mean() == pytest.approx(1000.0, abs=1e-6)
    anchored = fit_bt(outcomes, anchor=("sys2", 1114.0))
    assert anchored[outcomes.systems.index("sys2")] == pytest.approx(1114.0)
    assert anchored - free == pytest.approx(np.full(6, 1114.0 - free[2]))


def test_bt_equals_a_direct_maximum_likelihood_fit():
    data = synthetic_votes(8, 4000, seed=7)
    outcomes = aggregate(data)
    assert np.abs(fit_bt(outcomes) - scipy_fit(data, outcomes.systems)).max() < 1.0
    # and it recovers the order of a clear strength difference
    clear = battles([("strong", "weak", "a", 30), ("strong", "weak", "b", 10), ("strong", "weak", "tie", 10)])
    strong, weak = fit_bt(aggregate(clear))
    assert strong - weak > 100


def test_ties_and_both_bad_count_half_each_way():
    tie = fit_bt(aggregate(battles([("x", "y", "a", 4), ("x", "y", "tie", 6)])))
    both_bad = fit_bt(aggregate(battles([("x", "y", "a", 4), ("x", "y", "both_bad", 6)])))
    half_wins = fit_bt(aggregate(battles([("x", "y", "a", 7), ("x", "y", "b", 3)])))
    assert tie == pytest.approx(both_bad)
    assert tie == pytest.approx(half_wins)


def test_bootstrap_intervals_contain_the_estimate_and_match_a_looped_fit():
    data = synthetic_votes(5, 1500, seed=11)
    outcomes = aggregate(data)
    weights = bootstrap_weights(outcomes, rounds=200, seed=5)
    batched = bootstrap_bt(outcomes, weights=weights)
    assert batched.shape == (201, 5)
    # the looped reference refits every replicate from the same resampled counts, one battle row per outcome row
    rows = pd.DataFrame(
        {
            "model_a": [outcomes.systems[i] for i in outcomes.a],
            "model_b": [outcomes.systems[i] for i in outcomes.b],
            "winner": np.where(outcomes.score == 1, "a", np.where(outcomes.score == 0, "b", "tie")),
        }
    )
    looped = np.array([scipy_fit(rows, outcomes.systems, w) for w in weights])
    assert np.abs(batched[1:] - looped).max() < 1.0
    low, high = np.quantile(batched[1:], [0.025, 0.975], axis=0)
    ref_low, ref_high = np.quantile(looped, [0.025, 0.975], axis=0)
    assert np.abs(low - ref_low).max() < 1.0 and np.abs(high - ref_high).max() < 1.0
    assert ((low <= batched[0]) & (batched[0] <= high)).all()


def test_bootstrap_is_seeded():
    outcomes = aggregate(synthetic_votes(4, 500, seed=2))
    assert np.array_equal(bootstrap_bt(outcomes, rounds=50, seed=9), bootstrap_bt(outcomes, rounds=50, seed=9))
    assert not np.array_equal(bootstrap_bt(outcomes, rounds=50, seed=9), bootstrap_bt(outcomes, rounds=50, seed=10))


def test_rank_counts_systems_whose_interval_lies_entirely_above():
    low = np.array([1100, 1050, 900, 700])
    high = np.array([1200, 1150, 1000, 1120])
    # system 2 lies entirely below systems 0 and 1; system 3's wide interval reaches above every lower bound
    assert rank_by_intervals(low, high).tolist() == [1, 1, 3, 1]


def test_compute_ratings_table():
    data = battles([("x", "y", "a", 6), ("x", "y", "b", 2), ("y", "z", "tie", 3), ("z", "x", "both_bad", 1)])
    table = compute_ratings(data, rounds=200, seed=0)
    assert list(table.columns) == [
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
    ]
    x = table.set_index("system").loc["x"]
    assert (x["battles"], x["wins"], x["ties"], x["losses"]) == (9, 6, 1, 2)
    assert (table["ci_low"] <= table["rating"]).all() and (table["rating"] <= table["ci_high"]).all()
    assert compute_ratings(pd.DataFrame(columns=["model_a", "model_b", "winner"])).empty


def test_systems_that_never_met_fall_into_separate_groups():
    data = battles([("x", "y", "a", 5), ("y", "z", "a", 5), ("p", "q", "a", 1)])
    table = compute_ratings(data, rounds=50).set_index("system")
    assert table.loc[["x", "y", "z"], "group"].nunique() == 1
    assert table.loc["p", "group"] == table.loc["q", "group"] != table.loc["x", "group"]
    assert table["group"].iloc[0] == 1  # group 1 holds the top system


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="winner"):
        aggregate([{"model_a": "x", "model_b": "y", "winner": "x"}])
    with pytest.raises(ValueError, match="two different"):
        aggregate([{"model_a": "x", "model_b": "x", "winner": "a"}])
    with pytest.raises(ValueError, match="columns"):
        aggregate([{"a": "x", "b": "y", "winner": "a"}])


def test_online_elo_with_k16():
    data = battles([("x", "y", "a", 1), ("x", "y", "tie", 1), ("y", "z", "both_bad", 1)])
    elo = online_elo(data)
    # 1: equal ratings, x wins: ±8. 2: tie, x expected to score 1/(1 + 10^(-16/400)).
    expected_x = 1 / (1 + 10 ** ((992 - 1008) / 400))
    x = 1008 + 16 * (0.5 - expected_x)
    y = 992 - 16 * (0.5 - expected_x)
    expected_y = 1 / (1 + 10 ** ((1000 - y) / 400))
    assert elo["x"] == pytest.approx(x)
    assert elo["y"] == pytest.approx(y + 16 * (0.5 - expected_y))
    assert elo["z"] == pytest.approx(1000 - 16 * (0.5 - expected_y))
    assert sum(elo.values()) == pytest.approx(3000)  # zero-sum updates


def test_win_rate_matrix():
    data = battles([("x", "y", "a", 3), ("y", "x", "a", 1), ("x", "y", "tie", 2), ("y", "z", "b", 1)])
    matrix = win_rate_matrix(data, ["x", "y", "z"])
    assert matrix.loc["x", "y"] == pytest.approx((3 + 1) / 6)  # 3 wins and 2 half-points in 6 battles
    assert matrix.loc["y", "x"] == pytest.approx(1 - matrix.loc["x", "y"])
    assert matrix.loc["z", "y"] == 1.0
    assert np.isnan(matrix.loc["x", "z"]) and np.isnan(matrix.loc["x", "x"])


def test_each_system_says_how_sure_it_is_above_the_next_one_down():
    data = battles(
        [("top", "mid", "a", 40), ("top", "mid", "b", 5), ("mid", "low", "a", 12), ("mid", "low", "b", 10)]
        + [("top", "low", "a", 30), ("x", "y", "a", 3)]
    )
    fit = fit_ratings(data, rounds=200, seed=2)
    table = fit.table.set_index("system")
    assert table.loc["top", "p_above_next"] > 0.99  # top over mid: settled
    assert 0.5 < table.loc["mid", "p_above_next"] < 0.95  # mid over low: 12 wins to 10
    assert np.isnan(table.loc["low", "p_above_next"])  # last of its group
    assert table.loc["x", "p_above_next"] > 0.5 and np.isnan(table.loc["y", "p_above_next"])  # its own group
    closest = fit.closest
    assert (closest.upper, closest.lower) == ("mid", "low") and closest.p_above == table.loc["mid", "p_above_next"]
    assert closest.votes == len(data) and closest.more_votes > 0
    # four times the votes in the same mix: the estimate of what is still needed shrinks accordingly
    more = fit_ratings(pd.concat([data] * 4), rounds=200, seed=2).closest
    assert more.more_votes is None or more.more_votes < closest.more_votes
    # a level pair: no estimate can be made
    level = fit_ratings(battles([("p", "q", "a", 5), ("p", "q", "b", 5)]), rounds=100, seed=0).closest
    assert level.p_above == pytest.approx(0.5, abs=0.15) and level.more_votes == float("inf")
