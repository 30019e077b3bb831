"""Votes simulated from known strengths, for the rating tests and the leaderboard and pairing benchmarks.

The vote model: side A wins with its Bradley–Terry probability in 80% of votes, 10% are ties and 10% both bad
(:func:`winners`). Style effects can be added on top (:func:`styled_votes`): longer replies win more often,
whatever the systems' strengths, as people's votes were found to reward length in Chatbot Arena.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def winners(u: np.ndarray, p_a: np.ndarray) -> np.ndarray:
    """The votes for uniform draws ``u`` when side A wins a decisive vote with probability ``p_a``."""
    return np.where(u < 0.8 * p_a, "a", np.where(u < 0.8, "b", np.where(u < 0.9, "tie", "both_bad")))


def synthetic_votes(n_systems: int, n_votes: int, seed: int, *, name: str = "sys{i}") -> pd.DataFrame:
    """Random pairs; A wins with its Bradley–Terry probability in 80% of votes, 10% ties, 10% both bad."""
    rng = np.random.default_rng(seed)
    strength = rng.normal(0, 150, n_systems)
    a = rng.integers(0, n_systems, n_votes)
    b = (a + rng.integers(1, n_systems, n_votes)) % n_systems
    p_a = 1 / (1 + 10 ** ((strength[b] - strength[a]) / 400))
    winner = winners(rng.random(n_votes), p_a)
    names = np.array([name.format(i=i) for i in range(n_systems)])
    return pd.DataFrame({"model_a": names[a], "model_b": names[b], "winner": winner})


def spaced_strengths(n_systems: int, seed: int, *, gaps: tuple[float, float] = (30.0, 90.0)) -> np.ndarray:
    """Known strengths (rating points, mean 0) whose neighbours are ``gaps`` apart (uniform), in random order: every
    neighbour's order can be settled by enough votes."""
    rng = np.random.default_rng(seed)
    ladder = np.concatenate([[0.0], np.cumsum(rng.uniform(*gaps, n_systems - 1))])
    return rng.permutation(ladder - ladder.mean())


def styled_votes(
    n_systems: int,
    n_votes: int,
    seed: int,
    *,
    length_effect: float = 1.0,
    gap: float = 60.0,
    name: str = "sys{i}",
) -> tuple[pd.DataFrame, np.ndarray]:
    """Votes where replies' length sways people whatever the systems' strengths: (battles, true strengths).

    Each system has a strength (rating points, ``gap`` apart, system 0 the strongest) and a typical reply length;
    the *weaker* systems write the longer replies, so a plain fit, which credits length to strength, mis-orders
    them. Each battle's replies vary around
    their system's length (log-normal). Side A wins a decisive vote with probability
    ``1 / (1 + 10 ** -((s_A - s_B) / 400 + length_effect * L))``, where ``L = (len_A - len_B) / (len_A + len_B)`` is
    the normalised difference :mod:`arena.style` computes. The battles carry ``length`` (that difference),
    ``items``, ``questions`` (noise, no effect) and ``latency`` (NaN: never recorded).
    """
    rng = np.random.default_rng(seed)
    strength = gap * (np.arange(n_systems)[::-1] - (n_systems - 1) / 2)  # system 0 strongest
    typical = np.linspace(20, 120, n_systems)  # ... and the shortest writer
    a = rng.integers(0, n_systems, n_votes)
    b = (a + rng.integers(1, n_systems, n_votes)) % n_systems
    length_a = typical[a] * rng.lognormal(0, 0.3, n_votes)
    length_b = typical[b] * rng.lognormal(0, 0.3, n_votes)
    length = (length_a - length_b) / (length_a + length_b)
    p_a = 1 / (1 + 10 ** -((strength[a] - strength[b]) / 400 + length_effect * length))
    winner = winners(rng.random(n_votes), p_a)
    names = np.array([name.format(i=i) for i in range(n_systems)])
    battles = pd.DataFrame(
        {
            "model_a": names[a],
            "model_b": names[b],
            "winner": winner,
            "length": length,
            "items": rng.normal(0, 0.3, n_votes),
            "questions": rng.normal(0, 0.3, n_votes),
            "latency": np.full(n_votes, np.nan),
        }
    )
    return battles, strength
