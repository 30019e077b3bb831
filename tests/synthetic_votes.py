"""Votes simulated from known strengths, for the rating tests and the leaderboard benchmark."""

from __future__ import annotations

import numpy as np
import pandas as pd


def synthetic_votes(n_systems: int, n_votes: int, seed: int, *, name: str = "sys{i}") -> pd.DataFrame:
    """Random pairs; A wins with its Bradley–Terry probability in 80% of votes, 10% ties, 10% both bad."""
    rng = np.random.default_rng(seed)
    strength = rng.normal(0, 150, n_systems)
    a = rng.integers(0, n_systems, n_votes)
    b = (a + rng.integers(1, n_systems, n_votes)) % n_systems
    p_a = 1 / (1 + 10 ** ((strength[b] - strength[a]) / 400))
    u = rng.random(n_votes)
    winner = np.where(u < 0.8 * p_a, "a", np.where(u < 0.8, "b", np.where(u < 0.9, "tie", "both_bad")))
    names = np.array([name.format(i=i) for i in range(n_systems)])
    return pd.DataFrame({"model_a": names[a], "model_b": names[b], "winner": winner})
