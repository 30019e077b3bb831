"""Style control: Bradley–Terry with style covariates fitted in the same Newton solve (arena.ratings), the style of a
battle's two sides (arena.style), and the style-controlled board on real SQLite (arena.board_compute, the tab)."""

import random

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize
from scipy.sparse import csr_matrix
from scipy.stats import kendalltau
from synthetic_votes import styled_votes, synthetic_votes
from threadpoolctl import threadpool_limits

from arena.battle_outcomes import SCORE_A, aggregate
from arena.board_cache import read_board, refresh_board
from arena.board_compute import PLAIN, STYLE, compute_board
from arena.board_view import PLAIN_RANK, board_view
from arena.bradley_terry import (
    ALPHA,
    PRIOR_SD,
    SCALE,
    bootstrap_bt,
    bootstrap_fit,
    bootstrap_weights,
    usable_covariates,
)
from arena.ratings import fit_ratings
from arena.style import FEATURES, Style, battle_covariates, conversation_style, difference, tokens
from storage.battle_votes import latest_leaderboard_snapshot, save_battle, save_vote
from storage.conversations import save_conversation
from storage.db import get_db
from storage.records import Battle, Conversation, ItemRef, Turn, Vote
from ui import leaderboard_tab
from ui.services import Services

COVARIATES = ["length", "items", "questions"]


# --- today's fit, as it was before style control: the reference the plain case must equal -------------------


def todays_bootstrap_bt(outcomes, rounds: int, seed: int) -> np.ndarray:
    """The plain fit as the project shipped it before covariates: pair totals, seeded multinomial replicates,
    every replicate solved from zero by one batched Newton iteration (copied, not imported)."""
    n = len(outcomes.systems)
    rng = np.random.default_rng(seed)
    total = outcomes.n_battles
    weights = np.vstack(
        [outcomes.count[None, :], rng.multinomial(total, outcomes.count / total, size=rounds).astype(float)]
    )
    lo, hi = np.minimum(outcomes.a, outcomes.b), np.maximum(outcomes.a, outcomes.b)
    keys, pair_of_row = np.unique(lo * n + hi, return_inverse=True)
    rows = len(outcomes.a)
    to_pair = csr_matrix((np.ones(rows), (np.arange(rows), pair_of_row.reshape(-1))), shape=(rows, len(keys)))
    points_i = np.where(outcomes.a == lo, outcomes.score, 1.0 - outcomes.score)
    pi, pj = keys // n, keys % n
    games = np.asarray((to_pair.T @ weights.T).T)
    points = np.asarray((to_pair.T @ (weights * points_i).T).T)
    precision = (SCALE / PRIOR_SD) ** 2
    design = np.zeros((len(pi), n))
    design[np.arange(len(pi)), pi] = 1.0
    design[np.arange(len(pi)), pj] = -1.0
    r = np.zeros((len(weights), n))
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-ALPHA * (r[:, pi] - r[:, pj])))
        gradient = ALPHA * (points - games * p) @ design - precision * r
        curvature = ALPHA**2 * games * p * (1.0 - p)
        hessian = np.zeros((len(weights), n, n))
        hessian[:, pi, pj] = -curvature
        hessian[:, pj, pi] = -curvature
        hessian[:, np.arange(n), np.arange(n)] = curvature @ np.abs(design) + precision
        step = np.linalg.solve(hessian, gradient[..., None])[..., 0]
        largest = np.abs(step).max(axis=1, keepdims=True)
        step *= np.minimum(1.0, 2.0 / np.maximum(largest, 1e-300))
        r += step
        if largest.max() < 1e-8:
            return 1000.0 + SCALE * r
    raise AssertionError("the reference did not converge")


def battles(rows: list[tuple[str, str, str, int]]) -> pd.DataFrame:
    return pd.DataFrame([{"model_a": a, "model_b": b, "winner": w} for a, b, w, n in rows for _ in range(n)])


@pytest.mark.parametrize(
    "data",
    [
        synthetic_votes(6, 3000, seed=3),
        synthetic_votes(12, 800, seed=8),
        battles([("champ", "x", "a", 8), ("y", "champ", "b", 8), ("x", "y", "tie", 3), ("p", "q", "both_bad", 2)]),
    ],
    ids=["six-systems", "sparse", "unbeaten-and-two-groups"],
)
def test_the_plain_case_is_todays_fit_to_1e_6(data):
    outcomes = aggregate(data)
    assert np.abs(bootstrap_bt(outcomes, rounds=200, seed=3) - todays_bootstrap_bt(outcomes, 200, 3)).max() < 1e-6


def test_covariates_that_cannot_be_fitted_leave_the_plain_fit():
    data = synthetic_votes(5, 2000, seed=4)
    plain = bootstrap_fit(aggregate(data), rounds=0)
    data = data.assign(zero=0.0, same=0.7)
    fit = bootstrap_fit(aggregate(data, covariates=["zero", "same"]), rounds=0)
    assert fit.covariate_names == () and fit.dropped == (("zero", "constant"), ("same", "constant"))
    assert np.abs(fit.ratings[0] - plain.ratings[0]).max() < 1e-6
    # a covariate that is a per-system value, side A's minus side B's: it cannot be told apart from the ratings
    length = {f"sys{i}": 10.0 * (i + 1) for i in range(5)}
    data["systems"] = [length[a] - length[b] for a, b in zip(data.model_a, data.model_b)]
    used, dropped, _ = usable_covariates(aggregate(data, covariates=["systems", "zero"]))
    assert used.k == 0 and dropped == (("zero", "constant"), ("systems", "collinear"))
    # ... and one that copies another
    data["noise"] = np.random.default_rng(1).normal(size=len(data))
    data["copy"] = 2.0 * data["noise"]
    used, dropped, _ = usable_covariates(aggregate(data, covariates=["noise", "copy"]))
    assert used.covariate_names == ("noise",) and dropped == (("copy", "collinear"),)


def test_missing_covariates_must_be_imputed_first():
    data = synthetic_votes(3, 50, seed=1).assign(length=np.nan)
    with pytest.raises(ValueError, match="finite"):
        aggregate(data, covariates=["length"])
    with pytest.raises(ValueError, match="lack the covariate"):
        aggregate(data, covariates=["items"])


def reference_fit(data: pd.DataFrame, systems, weights=None) -> np.ndarray:
    """The same penalised model written over single battles, with the covariates scaled as the fit scales them,
    solved by L-BFGS: ratings (points) then coefficients (log10-odds per SD)."""
    index = {s: i for i, s in enumerate(systems)}
    a, b = data["model_a"].map(index).to_numpy(), data["model_b"].map(index).to_numpy()
    y = data["winner"].map(SCORE_A).to_numpy()
    w = np.ones(len(data)) if weights is None else weights
    x = data[COVARIATES].to_numpy()
    x = x / x.std(axis=0)
    n, precision = len(systems), (SCALE / PRIOR_SD) ** 2

    def loss(theta):
        d = ALPHA * (theta[a] - theta[b] + x @ theta[n:])
        nll = (w * (y * np.logaddexp(0, -d) + (1 - y) * np.logaddexp(0, d))).sum() + precision * theta @ theta / 2
        g = w * ALPHA * (y - 1 / (1 + np.exp(-d)))
        gradient = np.r_[-np.bincount(a, g, n) + np.bincount(b, g, n), -(x * g[:, None]).sum(axis=0)]
        return nll, gradient + precision * theta

    with threadpool_limits(limits=1, user_api="blas"):
        options = {"gtol": 1e-10, "ftol": 1e-15, "maxiter": 5000}
        result = minimize(loss, np.zeros(n + x.shape[1]), jac=True, method="L-BFGS-B", options=options)
    return np.r_[1000 + SCALE * result.x[:n], result.x[n:]]


def test_the_joint_fit_equals_an_independent_maximum_likelihood_fit():
    data, _ = styled_votes(5, 1500, seed=2)
    outcomes = aggregate(data, covariates=COVARIATES)
    fit = bootstrap_fit(outcomes, rounds=0)
    reference = reference_fit(data, outcomes.systems)
    assert np.abs(fit.ratings[0] - reference[:5]).max() < 1e-3
    assert np.abs(fit.coefficients[0] - reference[5:]).max() < 1e-6
    assert np.allclose(fit.scales, data[COVARIATES].to_numpy().std(axis=0))
    # bootstrap replicates too: every battle is its own row here, so a replicate's weights are per battle
    assert len(outcomes.count) == len(data)
    weights = bootstrap_weights(outcomes, rounds=4, seed=5)
    replicates = bootstrap_fit(outcomes, weights=weights)
    order = _rows_of_battles(data, outcomes)
    for k in range(4):
        expected = reference_fit(data, outcomes.systems, weights[k][order])
        assert np.abs(replicates.ratings[k + 1] - expected[:5]).max() < 0.01  # rating points
        assert np.abs(replicates.coefficients[k + 1] - expected[5:]).max() < 1e-4


def _rows_of_battles(data: pd.DataFrame, outcomes) -> np.ndarray:
    """For each battle of ``data``, its outcome row (every battle is its own row when the covariates differ)."""
    index = {s: i for i, s in enumerate(outcomes.systems)}
    key = {
        (int(a), int(b), float(s), *map(float, x)): row
        for row, (a, b, s, x) in enumerate(zip(outcomes.a, outcomes.b, outcomes.score, outcomes.covariates))
    }
    return np.array(
        [
            key[(index[r.model_a], index[r.model_b], SCORE_A[r.winner], *map(float, (r.length, r.items, r.questions)))]
            for r in data.itertuples()
        ]
    )


def test_style_control_recovers_the_true_order_where_the_plain_fit_does_not():
    """Longer replies win more often whatever the strength, and the weaker systems write longer: the plain board
    credits length to strength and mis-orders them; fitting length beside the ratings recovers the true order."""
    data, strength = styled_votes(5, 4000, seed=7)
    names = [f"sys{i}" for i in range(5)]
    plain = fit_ratings(data, rounds=200, seed=0).table.set_index("system").loc[names, "rating"]
    styled = fit_ratings(data.fillna(0.0), rounds=200, seed=0, covariates=FEATURES)
    controlled = styled.table.set_index("system").loc[names, "rating"]
    assert kendalltau(strength, plain).statistic < 0  # more wrong than right
    assert kendalltau(strength, controlled).statistic == pytest.approx(1.0)
    assert np.corrcoef(strength, controlled)[0, 1] > 0.95
    assert styled.dropped == (("latency", "constant"),)  # never recorded: every difference imputed 0
    coefficients = styled.coefficients.set_index("covariate")
    length = coefficients.loc["length"]
    assert length["coefficient"] > 0 and length["ci_low"] > 0  # longer wins, and the interval says so
    assert length["ci_low"] <= length["coefficient"] <= length["ci_high"]
    # the true effect, 1 log10-odds per unit of the normalised difference, in log-odds per SD; ties and both-bad
    # votes (a fifth, scored half) pull every fitted effect toward zero, so the fit sees about 0.8 of it
    true_effect = ALPHA * 1.0 * length["sd"]
    assert 0.6 * true_effect < length["coefficient"] < 1.1 * true_effect
    for noise in ("items", "questions"):  # unrelated to the votes: near zero
        assert abs(coefficients.loc[noise, "coefficient"]) < 0.15
        assert coefficients.loc[noise, "ci_low"] < coefficients.loc[noise, "ci_high"]


def test_style_control_with_100k_votes_fits_in_chunks_and_agrees_with_a_tight_solve(monkeypatch):
    """Replicates with covariates stop once a Newton step is below 1e-3: what remains is far below a point."""
    from arena import bradley_terry

    data, _ = styled_votes(6, 20_000, seed=3)
    outcomes = aggregate(data.fillna(0.0), covariates=COVARIATES)
    monkeypatch.setattr(bradley_terry, "_CHUNK_CELLS", 100_000)  # five replicates per chunk
    quick = bootstrap_fit(outcomes, rounds=12, seed=1)
    monkeypatch.setattr(bradley_terry, "_TOL_REPLICATE", 1e-11)
    tight = bootstrap_fit(outcomes, rounds=12, seed=1)
    assert np.abs(quick.ratings - tight.ratings).max() < 1e-3
    assert np.abs(quick.coefficients - tight.coefficients).max() < 1e-5
    assert np.array_equal(quick.ratings[0], tight.ratings[0])  # the data itself is always solved to 1e-8


# --- the style of a conversation ---------------------------------------------------------------------------


def test_style_is_measured_on_the_system_replies():
    replies = [
        {"text": "Try Heat (1995), or Ronin?", "items": 2, "latency_ms": 100.0},
        {"text": "Enjoy!", "items": 0, "latency_ms": None},
    ]
    style = conversation_style(replies)
    assert tokens("Try Heat (1995), or Ronin?") == 9
    assert style == Style(length=(9 + 2) / 2, items=1.0, questions=0.5, latency=100.0)
    assert conversation_style([]) is None
    other = Style(length=5.5, items=0.0, questions=1.0, latency=None)
    diff = difference(style, other)
    assert diff["length"] == pytest.approx(0.0) and diff["items"] == pytest.approx(1.0)
    assert diff["questions"] == pytest.approx(-0.5) and np.isnan(diff["latency"])  # one side recorded no time
    assert all(np.isnan(v) for v in difference(None, other).values())


# --- the board on real SQLite -------------------------------------------------------------------------------


def side(db, system: str, words: int, items: int, asks: bool, latency: float | None) -> str:
    text = " ".join(["film"] * words) + ("?" if asks else ".")
    metadata = {} if latency is None else {"latency_ms": latency}
    turns = [
        Turn("user", "something to watch"),
        Turn("system", text, items=[ItemRef(f"i{k}", f"Film {k}") for k in range(items)], metadata=metadata),
    ]
    return save_conversation(db, Conversation(system_id=system, source="arena", turns=turns)).id


def styled_arena(db, n: int = 90, *, timed: int | None = None, seed: int = 0) -> None:
    """``n`` voted battles among three systems of equal strength whose replies vary in length: the longer side
    wins three times in four. The first ``timed`` battles (default all) recorded answer times."""
    rng = random.Random(seed)
    systems = ["alpha", "beta", "gamma"]
    for k in range(n):
        a, b = rng.sample(systems, 2)
        words_a, words_b = rng.randint(3, 60), rng.randint(3, 60)
        recorded = timed is None or k < timed
        sides = [
            side(db, s, w, rng.randint(0, 4), rng.random() < 0.5, rng.uniform(50, 500) if recorded else None)
            for s, w in ((a, words_a), (b, words_b))
        ]
        longer = "a" if words_a > words_b else "b"
        choice = longer if rng.random() < 0.75 else ("b" if longer == "a" else "a")
        battle = save_battle(db, Battle(system_a=a, system_b=b, conversation_a=sides[0], conversation_b=sides[1]))
        save_vote(db, Vote(battle_id=battle.id, choice=choice))


def test_the_board_fits_style_from_the_stored_conversations(db_path):
    db = get_db(db_path)
    styled_arena(db, timed=60)
    plain, styled = compute_board(db), compute_board(db, style=True)
    assert plain.fit["method"] == PLAIN and plain.fit["coefficients"] == [] and plain.fit["notes"] == []
    assert styled.fit["method"] == STYLE and styled.fit["covariates"] == list(FEATURES)
    length = next(c for c in styled.fit["coefficients"] if c["covariate"] == "length")
    assert length["coefficient"] > 0 and length["ci_low"] > 0 and length["ci_low"] <= length["ci_high"]
    assert styled.fit["missing"]["latency"] == 30
    assert any("30 of 90 battles lack answer latency" in note for note in styled.fit["notes"])
    rows = {r["system"]: r for r in styled.rows}
    assert {r["plain_rank"] for r in rows.values()} <= {1, 2, 3} and all(r["plain_rating"] for r in rows.values())
    assert all(r["plain_rank"] is None for r in plain.rows)
    # the same battles' covariates, read back: the missing latencies are the ones imputed
    frame, missing = battle_covariates(db, [{"conversation_a": None, "conversation_b": None}])
    assert frame.to_dict("records") == [dict.fromkeys(FEATURES, 0.0)] and missing == dict.fromkeys(FEATURES, 1)


def test_a_board_without_usable_style_falls_back_with_a_note_never_an_error(db_path):
    db = get_db(db_path)
    for choice in ["a", "b", "a", "tie", "a", "both_bad"]:  # both sides always alike: every difference is 0
        sides = [side(db, s, 10, 2, True, 100.0) for s in ("x", "y")]
        battle = save_battle(db, Battle(system_a="x", system_b="y", conversation_a=sides[0], conversation_b=sides[1]))
        save_vote(db, Vote(battle_id=battle.id, choice=choice))
    plain, styled = compute_board(db), compute_board(db, style=True)
    assert styled.fit["method"] == PLAIN and styled.fit["style"] is True
    assert [r["rating"] for r in styled.rows] == [r["rating"] for r in plain.rows]  # exactly the plain board
    assert any("could not be fitted" in note for note in styled.fit["notes"])
    assert any("same in every battle" in note for note in styled.fit["notes"])
    view = board_view(db, style=True)
    assert "could not be fitted" in view.summary and "Traceback" not in view.summary
    # and an empty board (no votes at all) is fine too
    assert compute_board(get_db(db_path.with_name("empty.db")), style=True).rows == []


def test_the_tab_shows_the_style_controlled_board_and_the_snapshot_names_its_method(db_path):
    db = get_db(db_path)
    styled_arena(db, n=60)
    services = Services(db_path=db_path)
    table, _, summary, _, _ = leaderboard_tab.show_board(services, "All", "All", None, True)
    assert PLAIN_RANK in table.columns and "P(above next)" in table.columns
    assert "**Style control is on**" in summary and "| Reply length (tokens) |" in summary
    assert "How far to trust the order" in summary
    plain_table, _, plain_summary, _, _ = leaderboard_tab.show_board(services, "All", "All", None)
    assert PLAIN_RANK not in plain_table.columns and "Style control is on" not in plain_summary
    assert read_board(db, style=True).fit["method"] == STYLE and read_board(db).fit["method"] == PLAIN
    refresh_board(db)
    assert latest_leaderboard_snapshot(db)["filters"]["fit"]["method"] == PLAIN
    assert read_board(db).source in ("cache", "snapshot") and read_board(db).fit["method"] == PLAIN
