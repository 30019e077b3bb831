"""Ties modelled (#75): the Davidson fit recovers known strengths and the tie propensity, and says when both-bad needs
a propensity of its own."""

from __future__ import annotations

import numpy as np
import pandas as pd

from arena.davidson import both_bad_test, fit_davidson


def davidson_votes(n: int, nu: float, nu_bad: float, seed: int) -> pd.DataFrame:
    """Votes drawn from the Davidson model itself: strengths 0, 0.5, 1, -0.5 (natural log)."""
    rng = np.random.default_rng(seed)
    strength = np.array([0.0, 0.5, 1.0, -0.5])
    rows = []
    for _ in range(n):
        i, j = rng.choice(4, 2, replace=False)
        d = (strength[i] - strength[j]) / 2
        p = np.array([np.exp(d), np.exp(-d), nu, nu_bad])
        outcome = rng.choice(4, p=p / p.sum())
        rows.append({"model_a": f"s{i}", "model_b": f"s{j}", "winner": ("a", "b", "tie", "both_bad")[outcome]})
    return pd.DataFrame(rows)


def test_the_fit_recovers_the_order_and_the_tie_propensity():
    votes = davidson_votes(3000, 0.6, 0.6, seed=1)
    fit = fit_davidson(votes, rounds=30, seed=0)
    assert list(fit.table()["system"]) == ["s2", "s1", "s0", "s3"]
    low, high = fit.nu_interval()
    assert low <= fit.nu[0] <= high and abs(fit.nu[0] - 1.2) < 0.15  # tie and both-bad pooled: 0.6 + 0.6
    assert abs(fit.ratings[0].mean() - 1000) < 1e-6


def test_both_bad_gets_its_own_propensity_only_when_the_votes_warrant_it():
    different = both_bad_test(davidson_votes(3000, 0.8, 0.2, seed=2))
    assert different.warranted and different.nu > different.nu_bad
    alike = both_bad_test(davidson_votes(3000, 0.4, 0.4, seed=3))
    assert alike.votes > 0 and alike.p_value > 0.01
    none = both_bad_test(davidson_votes(300, 0.5, 0.0, seed=4))
    assert none.votes == 0 and not none.warranted


def test_no_votes_or_one_system_is_no_error():
    empty = fit_davidson(pd.DataFrame(columns=["model_a", "model_b", "winner"]), rounds=5)
    assert empty.systems == () and empty.ratings.shape == (1, 0)


def test_the_board_shows_the_tie_propensity_beside_the_half_win_rule():
    """The board computes the Davidson fit on its own votes and says what it finds (the propensity, how likely two
    equal systems tie, whether the two orders agree); a board with no tie says nothing of ties."""
    from types import SimpleNamespace

    from arena.board_compute import tie_summary
    from arena.board_view import ties_line

    votes = davidson_votes(2000, 0.6, 0.0, seed=5)
    half_win = SimpleNamespace(
        table=pd.DataFrame({"system": ["s2", "s1", "s0", "s3"], "rating": [1100.0, 1050.0, 1000.0, 950.0]})
    )
    ties = tie_summary(votes, half_win)
    assert ties is not None and abs(ties["nu"] - 0.6) < 0.15 and ties["tau"] == 1.0 and ties["systems"] == 4
    line = ties_line({"ties": ties})
    assert line.startswith("Ties modelled (Davidson): tie propensity 0.") and "Kendall's tau 1.00" in line
    assert f"tie {ties['nu'] / (2 + ties['nu']):.0%} of the time" in line
    decided = votes[votes["winner"].isin(["a", "b"])]
    assert tie_summary(decided, half_win) is None and ties_line({"ties": None}) == ""
