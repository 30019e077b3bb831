"""Leaderboard maths at scale: Bradley–Terry + 200 bootstrap rounds on 100,000 votes among 20 systems.

Times the batched fit (votes reduced to unique outcome counts, multinomial replicates, one batched
Newton solve) against refitting every replicate with ``scipy.optimize.minimize`` (L-BFGS-B on the
same counts, FastChat's method), and reports how far apart their 95% intervals are.

Style control: the same fit with four style covariates beside the ratings (reply length, items listed,
questions, latency; every battle its own row), on 100,000 simulated votes where length sways people, with
200 bootstrap rounds. When the research data is present (``CRS_DATA_DIR``, else ``../shared/data``), also
CRSArena-Dial's 184 real votes, imported as the Research data tab imports them into a temporary database:
the ranking with and without style control side by side, the coefficients with their 95% intervals, and
Kendall's tau between the two orders.

Boards by kind of request (#75): every kind's style-controlled fit with 200 bootstrap rounds on 100,000 simulated
votes tagged with kinds in CRSArena-Dial's proportions (``BENCH kind_boards_fit_s``); the name check on the replies
labelled before it was written (``tests/data/name_reveal_replies.jsonl``: ``BENCH name_reveal_recall`` /
``name_reveal_precision``); ties modelled (the Davidson fit, its time beside the plain fit's, and whether both-bad
needs a propensity of its own). On CRSArena-Dial: its votes per kind, each kind's board with enough votes beside the
overall one, how many replies named a system, and the half-win and Davidson orders with Kendall's tau.

    python bench/leaderboard.py
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.optimize import minimize
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from synthetic_votes import styled_votes, synthetic_votes

from arena.battle_outcomes import aggregate
from arena.bradley_terry import (
    ALPHA,
    PRIOR_SD,
    SCALE,
    bootstrap_bt,
    bootstrap_fit,
    bootstrap_weights,
)
from arena.style import FEATURES, LABELS

N_SYSTEMS, N_VOTES, ROUNDS, SEED, REPEATS = 20, 100_000, 200, 0, 5


def scipy_fit(outcomes, weights: np.ndarray) -> np.ndarray:
    """One replicate: the penalised BT likelihood over the weighted outcome rows, by L-BFGS-B."""
    n = len(outcomes.systems)
    precision = (SCALE / PRIOR_SD) ** 2

    def loss(r):
        d = ALPHA * (r[outcomes.a] - r[outcomes.b])
        y = outcomes.score
        nll = (weights * (y * np.logaddexp(0, -d) + (1 - y) * np.logaddexp(0, d))).sum() + precision * r @ r / 2
        g = weights * ALPHA * (y - 1 / (1 + np.exp(-d)))
        return nll, -np.bincount(outcomes.a, g, n) + np.bincount(outcomes.b, g, n) + precision * r

    result = minimize(
        loss, np.zeros(n), jac=True, method="L-BFGS-B", options={"gtol": 1e-9, "ftol": 1e-14, "maxiter": 5000}
    )
    return 1000 + SCALE * result.x


def main() -> None:
    votes = synthetic_votes(N_SYSTEMS, N_VOTES, SEED, name="system_{i:02d}")
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        outcomes = aggregate(votes)
        batched = bootstrap_bt(outcomes, rounds=ROUNDS, seed=SEED)
        times.append(time.perf_counter() - start)
    fit_s = statistics.median(times)

    weights = bootstrap_weights(outcomes, ROUNDS, SEED)  # the replicates bootstrap_bt drew
    start = time.perf_counter()
    with threadpool_limits(limits=1, user_api="blas"):  # fairest setting for many tiny solves
        looped = np.array([scipy_fit(outcomes, w) for w in weights])
    looped_s = time.perf_counter() - start

    batched_ci = np.quantile(batched[1:], [0.025, 0.975], axis=0)
    looped_ci = np.quantile(looped, [0.025, 0.975], axis=0)
    ci_diff = float(np.abs(batched_ci - looped_ci).max())
    print(f"{N_VOTES:,} votes among {N_SYSTEMS} systems -> {len(outcomes.count)} unique outcome rows")
    print(
        f"batched: aggregate + fit + {ROUNDS} bootstrap rounds, median of {REPEATS}: {fit_s:.3f} s "
        f"(runs: {', '.join(f'{t:.3f}' for t in times)})"
    )
    print(
        f"looped scipy.optimize.minimize, {ROUNDS} replicates (without aggregation): {looped_s:.2f} s "
        f"-> batched is {looped_s / fit_s:.1f}x faster"
    )
    print(f"largest rating difference on one replicate: {np.abs(batched[1:] - looped).max():.4f} points")
    print(f"BENCH leaderboard_fit_s {fit_s:.3f} s target <= 0.5")
    print(f"BENCH leaderboard_ci_max_diff {ci_diff:.4f} points target <= 1")
    style_control()
    kind_boards()
    name_reveal()
    ties_modelled()
    crsarena_dial()


# CRSArena-Dial's first messages, tagged (arena/request_kinds.py): the shares the simulated votes draw their kinds from
DIAL_KIND_SHARES = {
    "open": 112,
    "genre": 56,
    "years": 15,
    "title": 11,
    "person": 5,
    "audience": 2,
    "ruled_out": 1,
    "question": 1,
}


def simulated_kinds(n: int, seed: int) -> list[tuple[str, ...]]:
    """Kinds for ``n`` votes: one drawn in CRSArena-Dial's shares, and a second non-open one for a quarter of the
    requests that are not open ("a comedy from the 90s")."""
    rng = np.random.default_rng(seed)
    kinds = list(DIAL_KIND_SHARES)
    shares = np.array(list(DIAL_KIND_SHARES.values()), float)
    first = rng.choice(len(kinds), n, p=shares / shares.sum())
    closed = [k for k in kinds if k != "open"]
    closed_shares = np.array([DIAL_KIND_SHARES[k] for k in closed], float)
    second = rng.choice(len(closed), n, p=closed_shares / closed_shares.sum())
    add = rng.random(n) < 0.25
    out = []
    for f, s, more in zip(first.tolist(), second.tolist(), add.tolist()):
        tagged = {kinds[f]}
        if more and kinds[f] != "open":
            tagged.add(closed[s])
        out.append(tuple(sorted(tagged)))
    return out


def kind_boards() -> None:
    """Every kind's board: aggregate + style-controlled fit + 200 bootstrap rounds on that kind's votes, all kinds."""
    from arena.request_kinds import KINDS

    votes, _ = styled_votes(N_SYSTEMS, N_VOTES, SEED, name="system_{i:02d}")
    votes["latency"] = np.random.default_rng(SEED).normal(0, 0.3, len(votes))
    tags = simulated_kinds(len(votes), SEED)
    masks = {k: np.array([k in t for t in tags]) for k in KINDS}
    times = []
    for _ in range(3):
        start = time.perf_counter()
        for kind in KINDS:
            subset = votes[masks[kind]]
            if len(subset):
                bootstrap_fit(aggregate(subset, covariates=FEATURES), rounds=ROUNDS, seed=SEED)
        times.append(time.perf_counter() - start)
    fit_s = statistics.median(times)
    sizes = ", ".join(f"{k} {int(m.sum()):,}" for k, m in masks.items())
    print(f"kind boards: {N_VOTES:,} votes, {sum(int(m.sum()) for m in masks.values()):,} kind memberships ({sizes})")
    print(
        f"kind boards: every kind, style control, {ROUNDS} bootstrap rounds, median of 3: {fit_s:.3f} s "
        f"(runs: {', '.join(f'{t:.3f}' for t in times)})"
    )
    print(f"BENCH kind_boards_fit_s {fit_s:.3f} s target <= 1.0")


def name_reveal() -> None:
    """The name check on the labelled replies (written, labels included, before the check)."""
    import json

    from arena.name_reveal import names_in, system_names
    from crs_backends import registry

    path = Path(__file__).resolve().parent.parent / "tests" / "data" / "name_reveal_replies.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[1:] if line.strip()]
    extra = system_names({s: label for s, (label, _) in registry.systems().items()})
    found = [bool(names_in(r["text"], extra)) for r in rows]
    tp = sum(f and r["names_system"] for f, r in zip(found, rows))
    fp = sum(f and not r["names_system"] for f, r in zip(found, rows))
    fn = sum(not f and r["names_system"] for f, r in zip(found, rows))
    print(f"name check: {len(rows)} labelled replies ({tp + fn} naming a system): {tp} found, {fp} false, {fn} missed")
    print(f"BENCH name_reveal_recall {tp / (tp + fn):.3f} target >= 0.95")
    print(f"BENCH name_reveal_precision {tp / max(1, tp + fp):.3f} target >= 0.95")


def ties_modelled() -> None:
    """The Davidson fit (one tie propensity) beside the plain half-win fit on the same 100,000 simulated votes, and
    whether both-bad needs a propensity of its own (the simulated votes give ties and both-bad 10% each)."""
    from arena.davidson import both_bad_test, fit_davidson

    votes = synthetic_votes(N_SYSTEMS, N_VOTES, SEED, name="system_{i:02d}")
    start = time.perf_counter()
    bootstrap_bt(aggregate(votes), rounds=ROUNDS, seed=SEED)
    plain_s = time.perf_counter() - start
    start = time.perf_counter()
    fit = fit_davidson(votes, rounds=ROUNDS, seed=SEED)
    davidson_s = time.perf_counter() - start
    low, high = fit.nu_interval()
    test = both_bad_test(votes)
    print(
        f"ties modelled: {N_VOTES:,} votes, {ROUNDS} bootstrap rounds: plain half-win fit {plain_s:.3f} s, "
        f"Davidson fit {davidson_s:.3f} s; tie propensity nu {fit.nu[0]:.3f} [{low:.3f}, {high:.3f}]"
    )
    print(
        f"ties modelled: both-bad as its own outcome: nu_tie {test.nu:.3f}, nu_bad {test.nu_bad:.3f}, "
        f"likelihood ratio {test.statistic:.2f} (p {test.p_value:.3f}): "
        f"{'a second parameter is warranted' if test.warranted else 'one parameter suffices'}"
    )
    print(f"BENCH davidson_fit_s {davidson_s:.3f} s (plain fit {plain_s:.3f} s)")


def style_control() -> None:
    """The style-controlled fit's time: aggregate + joint fit + 200 bootstrap rounds, four covariates, 100k votes."""
    votes, _ = styled_votes(N_SYSTEMS, N_VOTES, SEED, name="system_{i:02d}")
    votes["latency"] = np.random.default_rng(SEED).normal(0, 0.3, len(votes))  # recorded here: four covariates
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        outcomes = aggregate(votes, covariates=FEATURES)
        fit = bootstrap_fit(outcomes, rounds=ROUNDS, seed=SEED)
        times.append(time.perf_counter() - start)
    fit_s = statistics.median(times)
    low, high = np.quantile(ALPHA * fit.coefficients[1:], [0.025, 0.975], axis=0)
    coefficients = ", ".join(
        f"{name} {ALPHA * value:+.3f} [{lo:+.3f}, {hi:+.3f}]"
        for name, value, lo, hi in zip(fit.covariate_names, fit.coefficients[0], low, high)
    )
    print(
        f"style control: {N_VOTES:,} votes, {len(outcomes.count):,} unique rows, "
        f"{fit.coefficients.shape[1]} covariates fitted; aggregate + fit + {ROUNDS} bootstrap rounds, "
        f"median of {REPEATS}: {fit_s:.3f} s (runs: {', '.join(f'{t:.3f}' for t in times)})"
    )
    print(f"style coefficients (log-odds per SD, 95% CI): {coefficients}")
    print(f"BENCH style_control_fit_s {fit_s:.3f} s target <= 1.0")


def crsarena_dial() -> None:
    """CRSArena-Dial's votes with and without style control, when the research data is present."""
    from scipy.stats import kendalltau

    from arena.board_compute import compute_board
    from arena.crsarena_import import ImportRefused, import_dial
    from storage.db import close_thread_connections, get_db

    with tempfile.TemporaryDirectory() as folder:
        db = get_db(Path(folder) / "crsarena.db")
        try:
            report = import_dial(db, score=False)  # the votes and dialogues: scoring adds no vote
        except ImportRefused as e:
            print(f"CRSArena-Dial: not measured ({e})")
            close_thread_connections()
            return
        plain, styled = compute_board(db), compute_board(db, style=True)
        kinds_report(db, plain)
        ties_on_dial(db, plain)
        close_thread_connections()
    print(f"CRSArena-Dial: {report.summary()}")
    print(f"{'plain rank':>10} {'system':<20} {'rating':>15} | {'style rank':>10} {'system':<20} {'rating':>15}")
    for p, s in zip(plain.rows, styled.rows):
        print(
            f"{p['rank']:>10} {p['system']:<20} {p['rating']:6.0f} [{p['ci_low']:4.0f}, {p['ci_high']:4.0f}] | "
            f"{s['rank']:>10} {s['system']:<20} {s['rating']:6.0f} [{s['ci_low']:4.0f}, {s['ci_high']:4.0f}]"
        )
    for c in styled.fit["coefficients"]:
        print(
            f"  {LABELS[c['covariate']]:<28} {c['coefficient']:+.3f} log-odds per SD, 95% CI "
            f"[{c['ci_low']:+.3f}, {c['ci_high']:+.3f}] ({c['points_per_sd']:+.0f} rating points per SD)"
        )
    for note in styled.fit["notes"]:
        print(f"  note: {note}")
    position = {r["system"]: k for k, r in enumerate(styled.rows)}
    tau = kendalltau(range(len(plain.rows)), [position[r["system"]] for r in plain.rows]).statistic
    print(f"CRSArena-Dial: Kendall's tau between the plain and the style-controlled order: {tau:.3f}")


def kinds_report(db, overall) -> None:
    """CRSArena-Dial's votes per kind, each kind's board with enough votes beside the overall one, and how many replies
    named a system (the import tagged every battle)."""
    from arena.board_compute import MIN_KIND_VOTES, compute_board, kind_counts
    from arena.name_reveal import configured_names, names_in
    from storage.battle_tags import battle_tags

    counts = kind_counts(db, revealed=True)
    tags = battle_tags(db)
    print(
        f"CRSArena-Dial kinds: {len(tags)} battles tagged (read by: "
        + ", ".join(
            f"{r} {sum(t.read_by == r for t in tags.values())}" for r in sorted({t.read_by for t in tags.values()})
        )
        + "); votes per kind: "
        + ", ".join(f"{k} {n}" for k, n in counts.items())
    )
    replies = [r["text"] for r in db.query("select text from turns where role = 'system'")]
    extra = configured_names()
    named = [t for t in replies if names_in(t, extra)]
    revealed = sum(t.revealed for t in tags.values())
    print(f"CRSArena-Dial replies naming a system: {len(named)} of {len(replies)}; battles set aside: {revealed}")
    overall_rank = {r["system"]: r["rank"] for r in overall.rows if r["rating"] is not None}
    for kind, n in counts.items():
        if n < MIN_KIND_VOTES:
            print(f"  {kind}: {n} votes, too few for a board (from {MIN_KIND_VOTES})")
            continue
        board = compute_board(db, kind=kind)
        print(f"  {kind}: {n} votes")
        print(f"    {'rank':>4} {'system':<20} {'rating':>17} {'overall rank':>12}")
        for r in board.rows:
            if r["rating"] is not None:
                print(
                    f"    {r['rank']:>4} {r['system']:<20} {r['rating']:6.0f} [{r['ci_low']:4.0f}, {r['ci_high']:4.0f}]"
                    f" {overall_rank.get(r['system'], ''):>12}"
                )


def ties_on_dial(db, plain) -> None:
    """Ties modelled on CRSArena-Dial: the Davidson order beside the half-win one, Kendall's tau, the tie propensity."""
    from scipy.stats import kendalltau

    from arena.board_compute import battle_table
    from arena.davidson import both_bad_test, fit_davidson

    battles = battle_table(db)
    start = time.perf_counter()
    fit = fit_davidson(battles, rounds=ROUNDS, seed=SEED)
    davidson_s = time.perf_counter() - start
    table = fit.table()
    half = [r["system"] for r in plain.rows if r["rating"] is not None]
    modelled = list(table["system"])
    tau = kendalltau(range(len(half)), [modelled.index(s) for s in half]).statistic
    low, high = fit.nu_interval()
    ties = int(battles["winner"].isin(["tie", "both_bad"]).sum())
    print(
        f"CRSArena-Dial ties: {ties} of {len(battles)} votes tie or both bad; Davidson tie propensity nu "
        f"{fit.nu[0]:.3f} [{low:.3f}, {high:.3f}] (fit + {ROUNDS} rounds {davidson_s:.3f} s)"
    )
    print(f"{'half-win order':<22} {'rating':>6} | {'Davidson order':<22} {'rating':>17}")
    by_system = {r["system"]: r for r in plain.rows}
    for s, d in zip(half, table.to_dict("records")):
        print(
            f"{s:<22} {by_system[s]['rating']:6.0f} | {d['system']:<22} {d['rating']:6.0f} "
            f"[{d['ci_low']:4.0f}, {d['ci_high']:4.0f}]"
        )
    test = both_bad_test(battles)
    if test.votes == 0:
        print(
            "CRSArena-Dial ties: no both-bad votes (its vote has a, b or tie): a both-bad parameter cannot be measured"
        )
    else:
        print(f"CRSArena-Dial both-bad: likelihood ratio {test.statistic:.2f}, p {test.p_value:.3f}")
    print(f"CRSArena-Dial: Kendall's tau between the half-win and the Davidson order: {tau:.3f}")


if __name__ == "__main__":
    main()
