"""Load on the real app: N gradio_client sessions chatting, arena battles with racing votes, and
anonymous leaderboard reads, against `python app.py` on 127.0.0.1; then the load an arena sees, people who read
and type between messages.

For N = 1, 16, 50 and 100 concurrent sessions, each session sends a few chat turns to the retrieval
baseline, ChatCRS (the embedded model unless one is configured) and the small neural systems when they are
built (without them a note says so), while a few other sessions run arena battles and vote on each from two
threads at once, and the app scores every conversation in the background (idle after 2 s). Then N = 16 runs
once more against an app without background scoring and once with it, side by side. Every level stops
after its turns or its time limit, whichever comes first, so the whole run is bounded (about twelve
minutes on two cores). Afterwards the database is checked: every answered turn stored exactly once,
one vote per voted battle. Then 20 leaderboard reads must not write anything.

**The think-time profile** (after the back-to-back one, or alone with ``--think-only``): the capacity first, 16
sessions sending back to back for ``--window-s`` / 2 seconds (turns/s at saturation), then 50 and 200 sessions
(``--think-levels``) that each pause between messages for a time drawn around ``--think-s`` (a gamma distribution
with that mean, shape 4: most pauses within half to one and a half times it), the first message after a random
share of one pause (people do not all arrive at once), for ``--window-s`` seconds. A turn still waiting at the end
of the window is waited for (at most ``REQUEST_TIMEOUT_S``) and counted. Chat only, the same systems; every level
is checked for lost and duplicated turns.

    python bench/load.py            # figures, not pass/fail: it exits 0 even when a target is missed
    python bench/load.py --quick    # a smoke run: N = 1 and 4, two turns each, and 4 sessions with 1 s pauses
    python bench/load.py --scoring-only  # only N = 16 with background scoring off and on, side by side
    python bench/load.py --think-only    # only the think-time profile (about five minutes on two cores)
    python bench/load.py --think-only --think-s 20 --think-levels 50,100,200 --window-s 90
    python bench/load.py --think-only --repeat 3 --compare "OMP_NUM_THREADS=1"   # side by side, runs alternating

``--repeat N`` runs the think-time profile N times, each against a fresh app, and reports the median of each figure
(every run's value printed beside it): one run on two shared cores spreads widely. ``--compare "KEY=VALUE ..."``
runs it as many times more with those environment settings given to the app (e.g. ``OMP_NUM_THREADS=1``,
``CRS_UNICRS_SMALL_DECODER=llamacpp``), the two alternating run by run, so that a change in the machine's load falls
on both; the compared arm's medians and its p95 at each level over the configured arm's are printed beside them.

Prints per level turns/s, p50/p95 latency (also per system), errors, lost and duplicated turns and votes, the machine
load, and the headline lines ``BENCH chat_p95_s_at_50``, ``BENCH lost_or_duplicated`` and
``BENCH leaderboard_read_writes``; the think-time profile adds ``BENCH capacity_turns_per_s``,
``BENCH chat_p95_s_at_50_think``, ``BENCH chat_p95_s_at_200_think`` and ``BENCH lost_or_duplicated_think`` (and,
with ``--compare``, the same figures ``_compared`` and ``..._compared_over_configured`` ratios, reported without a
target). A figure that could not be measured is said in words, never printed as a number.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import sqlite3
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from app_server import AppServer

LEVELS = ((1, 10, 30.0), (16, 5, 45.0), (50, 3, 60.0), (100, 2, 90.0))  # (sessions, turns each, time limit s)
ARENA_SESSIONS = {1: 1, 4: 1, 16: 2, 50: 2, 100: 2}
THINK_S = 10.0  # mean pause between a person's messages
THINK_LEVELS = (50, 200)
THINK_WINDOW_S = 60.0  # each think-time level sends messages this long
SATURATION_SESSIONS = 16  # back-to-back sessions that measure the capacity
REQUEST_TIMEOUT_S = 300.0  # one chat call at most (a saturated app answers late, never never)
BATTLES_PER_SESSION = 3
MESSAGES = (
    "A tense heist thriller?",
    "Something with Al Pacino?",
    "Maybe a comedy instead.",
    "Anything from the 90s?",
    "One more, please.",
    "What about sci-fi?",
    "A romantic film?",
    "Something animated for kids?",
    "A war movie?",
    "Thanks, one last one?",
)


@dataclass
class Level:
    n: int
    latencies: list[float] = field(default_factory=list)
    ok: dict[str, int] = field(default_factory=dict)  # conversation id -> answered turns
    failed: dict[str, int] = field(default_factory=dict)  # conversation id -> calls that raised
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)  # the first few distinct errors, printed with the level
    by_system: dict[str, list[float]] = field(default_factory=dict)  # system -> latencies of its answered turns
    battles: int = 0
    votes_recorded: int = 0
    vote_replies: list[str] = field(default_factory=list)
    wall: float = 0.0
    last_chat: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)


def connect(url: str):
    """A gradio_client session (made before a level starts, so setting up 50 clients is not timed).

    Patient as a browser: httpx's default 5 s would give up on joining the queue of a saturated app (200 sessions),
    an error of the bench, not of the app; the reply itself is awaited up to ``REQUEST_TIMEOUT_S``."""
    import httpx
    from gradio_client import Client

    timeout = httpx.Timeout(60.0, read=REQUEST_TIMEOUT_S)
    for _ in range(3):
        try:
            return Client(url, verbose=False, httpx_kwargs={"timeout": timeout})
        except Exception:  # a loaded machine can time a connection out: try again
            time.sleep(1)
    return None


def think_time(rng: random.Random, mean: float) -> float:
    """A pause between two messages: gamma-distributed with this mean (shape 4), 0 for back-to-back sessions."""
    return rng.gammavariate(4.0, mean / 4.0) if mean > 0 else 0.0


def chat_session(
    client,
    systems: list[str],
    turns: int,
    deadline: float,
    level: Level,
    k: int,
    *,
    think: float = 0.0,
    rng: random.Random | None = None,
) -> None:
    """``turns`` messages (until the deadline), back to back, or with pauses drawn around ``think`` seconds (the
    first message then comes after a random share of one pause)."""
    if client is None:
        with level.lock:
            level.errors += 1
        return
    rng = rng or random.Random(k)
    system = systems[k % len(systems)]
    conversation = None
    unattributed = 0  # calls that raised before the conversation's id was known: the server may have stored them
    if think > 0:
        time.sleep(min(rng.uniform(0, think), max(0.0, deadline - time.monotonic())))
    for t in range(turns):
        if time.monotonic() > deadline:
            return
        if t and think > 0:
            pause = think_time(rng, think)
            if time.monotonic() + pause > deadline:
                return
            time.sleep(pause)
        start = time.perf_counter()
        try:
            job = client.submit(MESSAGES[t % len(MESSAGES)], system, api_name="/chat")
            _, _, status, conversation_id, _ = job.result(timeout=REQUEST_TIMEOUT_S)
            elapsed = time.perf_counter() - start
            if not isinstance(conversation_id, str):  # the API promises a string id; anything else is an error
                raise TypeError(f"/chat returned {type(conversation_id).__name__} for the conversation id: {status!r}")
            if not conversation_id or "⚠" in str(status):  # a refusal or a failure says so in the status: no turn
                raise RuntimeError(f"/chat did not answer: {str(status)[:120]!r}")
            with level.lock:
                level.latencies.append(elapsed)
                level.by_system.setdefault(system, []).append(elapsed)
                level.last_chat = time.perf_counter()
                conversation = conversation_id
                level.ok[conversation] = level.ok.get(conversation, 0) + 1
                if unattributed:  # the session's state kept its conversation: those calls belong to it
                    level.failed[conversation] = level.failed.get(conversation, 0) + unattributed
                    unattributed = 0
        except Exception as e:
            with level.lock:
                level.errors += 1
                sample = f"{type(e).__name__}: {str(e)[:160]}"
                if sample not in level.error_samples and len(level.error_samples) < 3:
                    level.error_samples.append(sample)
                if conversation:
                    level.failed[conversation] = level.failed.get(conversation, 0) + 1
                else:
                    unattributed += 1


def arena_session(url: str, deadline: float, level: Level, battles: int = BATTLES_PER_SESSION) -> None:
    """A few battles (until the deadline at most); each voted from two threads at once (exactly one
    must count)."""
    client = connect(url)
    if client is None:
        with level.lock:
            level.errors += 1
        return
    for _ in range(battles):
        if time.monotonic() > deadline - 5:
            return
        try:
            client.predict("A funny film for tonight?", api_name="/arena_send")
        except Exception:
            with level.lock:
                level.errors += 1
            return
        replies: list[str] = []  # the two racers append from their threads

        def vote(choice: str, replies: list[str] = replies) -> None:
            try:
                replies.append(client.predict("", api_name=f"/arena_vote_{choice}")[2])
            except Exception as e:  # the losing racer is told the battle has its vote
                replies.append(str(e))

        racers = [threading.Thread(target=vote, args=(c,)) for c in ("a", "tie")]
        for r in racers:
            r.start()
        for r in racers:
            r.join(60)
        with level.lock:
            level.battles += 1
            level.votes_recorded += sum("recorded" in r for r in replies)
            level.vote_replies += replies
        try:
            client.predict(api_name="/arena_new")
        except Exception:
            return


def check(db_path: Path, level: Level, votes_before: int) -> tuple[int, int, int]:
    """(lost, duplicated turns, vote problems) for this level, from the database file."""
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)
    try:
        lost = duplicated = 0
        for conversation, answered in level.ok.items():
            stored = db.execute("select count(*) from turns where conversation_id = ?", [conversation]).fetchone()[0]
            distinct = db.execute(
                "select count(distinct part || ':' || idx) from turns where conversation_id = ?", [conversation]
            ).fetchone()[0]
            failed = level.failed.get(conversation, 0)
            lost += max(0, 2 * answered - stored)
            duplicated += max(0, stored - 2 * (answered + failed)) + (stored - distinct)
        votes = db.execute("select count(*) from votes").fetchone()[0] - votes_before
        vote_problems = abs(votes - level.battles) + abs(level.votes_recorded - level.battles)
        return lost, duplicated, vote_problems
    finally:
        db.close()


def count_votes(db_path: Path) -> int:
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)
    try:
        return db.execute("select count(*) from votes").fetchone()[0]
    finally:
        db.close()


def leaderboard_read_writes(url: str, db_path: Path, reads: int = 20) -> int:
    """Writes made while ``reads`` anonymous leaderboard reads run (after the refresher settled)."""
    from gradio_client import Client

    watcher = sqlite3.connect(str(db_path), timeout=30)
    try:

        def snapshot() -> tuple:
            version = watcher.execute("pragma data_version").fetchone()[0]
            rows = sum(
                watcher.execute(f"select count(*) from {t}").fetchone()[0]
                for t in ("leaderboard_snapshots", "conversations", "turns", "votes", "evaluations")
            )
            board = watcher.execute("select version from board_state").fetchone()[0]
            return version, rows, board

        settle = time.monotonic() + 30
        last = snapshot()
        while time.monotonic() < settle:  # let the refresher store the board of the finished levels
            time.sleep(6)
            now = snapshot()
            if now == last:
                break
            last = now
        client = Client(url, verbose=False)
        for _ in range(reads):
            client.predict("All", "All", None, api_name="/leaderboard")
        time.sleep(6)  # a refresher write caused by the reads would land within its period
        after = snapshot()
        if after == last:
            return 0
        return max(1, abs(after[1] - last[1]) + abs(after[2] - last[2]))
    finally:
        watcher.close()


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def print_details(level) -> None:
    """A level's error samples, then each system's turns with their p50 and p95."""
    for sample in level.error_samples:
        print(f"       error: {sample}")
    for system, values in sorted(level.by_system.items()):
        print(
            f"       {system:<10} {len(values):>4} turns, p50 {pct(values, 0.5):.2f} s, p95 {pct(values, 0.95):.2f} s"
        )


def run_level(url: str, db_path: Path, systems: list[str], n: int, turns: int, limit: float) -> tuple[Level, int]:
    """``n`` chat sessions and a few arena sessions at once; prints the level's line and returns it with its count of
    lost and duplicated turns and vote problems."""
    level = Level(n)
    votes_before = count_votes(db_path)
    arenas = ARENA_SESSIONS.get(n, 1)
    with ThreadPoolExecutor(max_workers=min(n, 8)) as pool:
        clients = list(pool.map(lambda _: connect(url), range(n)))
    deadline = time.monotonic() + limit
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=n + arenas) as pool:
        futures = [pool.submit(chat_session, clients[k], systems, turns, deadline, level, k) for k in range(n)]
        futures += [pool.submit(arena_session, url, deadline, level) for _ in range(arenas)]
        for f in futures:
            f.result()
    level.wall = max(1e-6, (level.last_chat or time.perf_counter()) - start)  # the chat sessions' span
    lost, duplicated, vote_problems = check(db_path, level, votes_before)
    answered = len(level.latencies)
    p50, p95 = pct(level.latencies, 0.5), pct(level.latencies, 0.95)
    print(
        f"N={n:>3}: {answered} chat turns in {level.wall:.1f} s ({answered / level.wall:.1f} turns/s), "
        f"p50 {p50:.2f} s, p95 {p95:.2f} s, errors {level.errors}; lost {lost}, duplicated "
        f"{duplicated} turns; {level.battles} battles, {level.votes_recorded} votes recorded "
        f"({vote_problems} vote problems); load {os.getloadavg()[0]:.2f}"
    )
    print_details(level)
    return level, lost + duplicated + vote_problems


def run_levels(levels, run) -> tuple[int, float]:
    """Every level through ``run(n, turns, limit)`` (which returns the level and its problems); a level that raises
    is reported, counted as a problem, and the next one still runs. Returns (problems, chat p95 at N = 50)."""
    problems, p95_at_50 = 0, float("nan")
    for n, turns, limit in levels:
        try:
            level, lost = run(n, turns, limit)
        except Exception as e:  # reported, and the next level still runs
            print(f"N={n:>3}: the level failed: {type(e).__name__}: {e}")
            problems += 1
            continue
        problems += lost
        if n == 50:
            p95_at_50 = pct(level.latencies, 0.95)
    return problems, p95_at_50


def scoring_coverage(db_path: Path, settle_s: float = 60.0) -> tuple[int, int]:
    """(chat and arena conversations with a reply, how many of them the background scorer has scored), once the
    scorer has caught up or ``settle_s`` passed."""
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)
    try:
        total = scored = 0
        end = time.monotonic() + settle_s
        while True:
            total, scored = db.execute(
                """select count(*), sum(exists(select 1 from evaluations e where e.conversation_id = c.id
                                              and e.status in ('done', 'partial')))
                   from conversations c where c.source in ('chat', 'arena')
                   and exists(select 1 from turns t where t.conversation_id = c.id and t.role = 'system')"""
            ).fetchone()
            scored = scored or 0
            if scored >= total or time.monotonic() > end:
                return total, scored
            time.sleep(2)
    finally:
        db.close()


def connect_many(url: str, n: int) -> list:
    """``n`` gradio_client sessions, made before a level starts (8 at a time)."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(lambda _: connect(url), range(n)))


def run_paced_level(
    url: str,
    db_path: Path,
    systems: list[str],
    clients: list,
    *,
    think: float,
    window: float,
    seed: int = 0,
) -> tuple[Level, int]:
    """One session per client for ``window`` seconds, back to back (``think`` 0) or pausing around ``think`` s
    between messages; every client starts a fresh session (so a fresh conversation). Prints the level's line and
    returns it with its count of lost and duplicated turns."""
    n = len(clients)
    level = Level(n)
    votes_before = count_votes(db_path)
    for client in clients:
        if client is not None:
            client.reset_session()
    deadline = time.monotonic() + window
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=n) as pool:
        futures = [
            pool.submit(
                chat_session, clients[k], systems, 10**6, deadline, level, k, think=think, rng=random.Random(seed + k)
            )
            for k in range(n)
        ]
        for f in futures:
            f.result()
    level.wall = max(1e-6, (level.last_chat or time.perf_counter()) - start)
    lost, duplicated, _ = check(db_path, level, votes_before)
    answered = len(level.latencies)
    how = f"pauses around {think:g} s" if think > 0 else "back to back"
    print(
        f"N={n:>3} {how}, {window:g} s: {answered} chat turns in {level.wall:.1f} s "
        f"({answered / level.wall:.2f} turns/s), p50 {pct(level.latencies, 0.5):.2f} s, "
        f"p95 {pct(level.latencies, 0.95):.2f} s, errors {level.errors}; lost {lost}, duplicated {duplicated} turns; "
        f"load {os.getloadavg()[0]:.2f}"
    )
    print_details(level)
    return level, lost + duplicated


def think_profile(
    url: str, db_path: Path, systems: list[str], *, think: float, levels: tuple[int, ...], window: float
) -> dict[str, float]:
    """The capacity (back to back, saturated), then each level of sessions with pauses; the figures measured."""
    figures: dict[str, float] = {"lost_or_duplicated_think": 0}
    clients = connect_many(url, max((SATURATION_SESSIONS, *levels)))
    print(f"capacity: {SATURATION_SESSIONS} sessions back to back for {window / 2:g} s")
    try:
        level, problems = run_paced_level(
            url, db_path, systems, clients[:SATURATION_SESSIONS], think=0, window=window / 2
        )
        figures["lost_or_duplicated_think"] += problems
        if level.latencies:
            figures["capacity_turns_per_s"] = len(level.latencies) / level.wall
    except Exception as e:  # reported; the levels with pauses still run
        print(f"capacity: the level failed: {type(e).__name__}: {e}")
    for n in levels:
        try:
            level, problems = run_paced_level(url, db_path, systems, clients[:n], think=think, window=window, seed=n)
        except Exception as e:  # reported, and the next level still runs
            print(f"N={n:>3}: the level failed: {type(e).__name__}: {e}")
            continue
        figures["lost_or_duplicated_think"] += problems
        if level.latencies:
            figures[f"chat_p95_s_at_{n}_think"] = pct(level.latencies, 0.95)
    return figures


def median_of_runs(runs: list[dict[str, float]]) -> dict[str, float]:
    """One figure per name over repeated think-time profiles: the median of the runs that measured it (lost or
    duplicated turns: their sum, every one counts)."""
    import statistics

    out: dict[str, float] = {}
    for name in dict.fromkeys(k for run in runs for k in run):
        values = [run[name] for run in runs if name in run and run[name] == run[name]]
        if values:
            out[name] = sum(values) if name.startswith("lost_or_duplicated") else statistics.median(values)
    return out


def app_settings(text: str) -> dict[str, str]:
    """``--compare``'s ``KEY=VALUE ...`` (environment variables for the app); ValueError naming a malformed one."""
    import re

    settings = {}
    for item in text.split():
        key, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[A-Z_][A-Z0-9_]*", key):
            raise ValueError(f"{item!r} is not KEY=VALUE (an environment variable in capitals)")
        settings[key] = value
    if not settings:
        raise ValueError("no KEY=VALUE given")
    return settings


def think_profiles(fresh_app, runs: int, arms: dict[str, dict[str, str]], profile) -> dict[str, list[dict[str, float]]]:
    """``runs`` think-time profiles for each arm (name -> the app's extra settings), the arms alternating run by run;
    ``fresh_app(settings)`` is a context manager giving a fresh app, ``profile(app)`` one profile's figures on it.
    Prints each figure's value per run and its median."""
    measured: dict[str, list[dict[str, float]]] = {arm: [] for arm in arms}
    for run in range(runs):
        for arm, settings in arms.items():
            print(f"think-time profile, {arm}, run {run + 1} of {runs}")
            with fresh_app(settings) as app:
                measured[arm].append(profile(app))
    if runs > 1 or len(arms) > 1:
        for arm, results in measured.items():
            medians = median_of_runs(results)
            print(f"{arm}, {runs} run(s):")
            for name, value in medians.items():
                each = ", ".join(f"{r[name]:.2f}" if name in r else "-" for r in results)
                print(f"  {name:<28} {each}  (median {value:.2f})" if runs > 1 else f"  {name:<28} {value:.2f}")
    return measured


def bench_line(name: str, figures: dict[str, float], fmt: str, unit: str, target: str | None, why: str) -> str:
    """A ``BENCH`` line (``target`` None: a figure reported without one), or a sentence saying the figure was not
    measured (never nan)."""
    value = figures.get(name)
    if value is None or value != value:
        return f"{name}: not measured ({why})"
    line = f"BENCH {name} {value:{fmt}} {unit}" + (f" target {target}" if target else "")
    return line.replace("  ", " ")


def options(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: small levels, a few turns")
    parser.add_argument("--scoring-only", action="store_true", help="only N = 16 with scoring off and on")
    parser.add_argument("--think-only", action="store_true", help="only the think-time profile")
    parser.add_argument("--think-s", type=float, default=THINK_S, help="mean pause between messages (s)")
    parser.add_argument(
        "--think-levels", default=",".join(map(str, THINK_LEVELS)), help="sessions per level, comma-separated"
    )
    parser.add_argument("--window-s", type=float, default=THINK_WINDOW_S, help="seconds each think-time level runs")
    parser.add_argument("--repeat", type=int, default=1, help="think-time profiles per arm (medians reported)")
    parser.add_argument(
        "--compare", default="", help='"KEY=VALUE ...": a second arm of think-time profiles with these app settings'
    )
    args = parser.parse_args(argv)
    if not 1 <= args.repeat <= 20:
        parser.error("--repeat: 1 to 20 runs")
    try:
        args.compare_settings = app_settings(args.compare) if args.compare else {}
    except ValueError as e:
        parser.error(f"--compare: {e}")
    try:
        args.levels = tuple(sorted({int(n) for n in args.think_levels.split(",") if n.strip()}))
    except ValueError:
        parser.error("--think-levels takes whole numbers separated by commas, e.g. 50,200")
    if not args.levels or min(args.levels) < 1 or max(args.levels) > 1000:
        parser.error("--think-levels: each level is 1 to 1000 sessions")
    if not 0 < args.think_s <= 600 or not 5 <= args.window_s <= 600:
        parser.error("--think-s must be 0-600 s (not 0) and --window-s 5-600 s")
    if args.quick:
        args.levels, args.think_s, args.window_s = (4,), 1.0, 8.0
    return args


def main(argv: list[str] | None = None) -> None:
    """Run the profiles asked for; print the headline lines of whatever was measured, even after a failure."""
    args = options(sys.argv[1:] if argv is None else argv)
    figures: dict[str, float] = {}
    try:
        run(args, figures)
    except Exception as e:  # a figure, not a gate: say what happened, report what was measured, exit 0
        print(f"load bench stopped early: {type(e).__name__}: {e}")
    report(figures, args)


def run(args: argparse.Namespace, figures: dict[str, float]) -> None:
    print(
        f"machine load (1, 5, 15 min) at start: {tuple(round(x, 2) for x in os.getloadavg())} on {os.cpu_count()} CPUs"
    )
    quick = args.quick
    only_side_by_side = args.scoring_only  # just the N = 16 comparison with scoring off and on
    back_to_back = not args.think_only
    think = not args.scoring_only
    cache = os.environ.get("CRS_ARENA_CACHE") or str(Path.home() / ".cache" / "crs-arena")
    with tempfile.TemporaryDirectory() as folder:
        db_path = Path(folder) / "load.db"
        from crs_backends.neural.names import SHIPPED_SMALL_ROOT

        # the app serves what this process finds: the shipped small set and this cache (AppServer hides both)
        shared = {"CRS_ARENA_CACHE": cache, "CRS_NEURAL_BUILD": "never", "CRS_SMALL_MODELS": str(SHIPPED_SMALL_ROOT)}
        # background scoring on, as in a deployment: every chat and arena conversation is scored once idle (2 s)
        env = {**shared, "LOG_LEVEL": "ERROR", "CRS_ARENA_SCORING": "on", "CRS_ARENA_SCORING_IDLE_S": "2"}
        os.environ.update(shared)
        from crs_backends import registry

        # what the Chat selector offers (``kbrd``), for each system that can answer now (maybe as ``kbrd_small``)
        offered = registry.system_ids()
        runs_as = getattr(registry, "SYSTEM_OF_SMALL_ID", {})
        ready = [runs_as.get(s, s) for s in registry.ready_system_ids(db_path=db_path)]
        neural = [s for s in dict.fromkeys(ready) if s in offered and s not in ("chatcrs", "retrieval")]
        systems = ["retrieval", "chatcrs", *neural]  # ChatCRS on the embedded model unless a model is configured
        if not neural:
            print(
                "note: the small neural systems are not built (python -m crs_backends.neural.small ensure); "
                "chat sessions use the retrieval baseline and ChatCRS only"
            )
        print(f"chat sessions rotate over: {', '.join(systems)}; background scoring on (idle 2 s)")
        if back_to_back:
            with AppServer(db_path, env=env) as server:
                levels = ((1, 2, 15.0), (4, 2, 20.0)) if quick else (() if only_side_by_side else LEVELS)
                if levels:
                    print("warm-up, one turn per system (each model loads on its first turn):")
                    run_level(server.url, db_path, systems, len(systems), 1, 120.0)
                problems, p95_at_50 = run_levels(
                    levels, lambda n, turns, limit: run_level(server.url, db_path, systems, n, turns, limit)
                )
                figures["lost_or_duplicated"] = problems
                figures["chat_p95_s_at_50"] = p95_at_50
                total, scored = scoring_coverage(db_path)
                print(f"background scoring: {scored} of {total} chat and arena conversations scored")
                figures["scoring_unscored"] = total - scored
                figures["leaderboard_read_writes"] = leaderboard_read_writes(server.url, db_path)
            if not quick:  # the same N = 16 level against an app without background scoring, side by side
                off_db = Path(folder) / "load-off.db"
                on_db = Path(folder) / "load-on.db"
                with AppServer(off_db, env={**env, "CRS_ARENA_SCORING": "off"}) as plain:
                    print("N = 16 again, background scoring off (after one warm-up turn per system):")
                    run_level(plain.url, off_db, systems, len(systems), 1, 120.0)  # loads every model first
                    without, _ = run_level(plain.url, off_db, systems, 16, 5, 45.0)
                with AppServer(on_db, env=env) as scoring:
                    print("N = 16 again, background scoring on (after one warm-up turn per system):")
                    run_level(scoring.url, on_db, systems, len(systems), 1, 120.0)
                    with_scoring, _ = run_level(scoring.url, on_db, systems, 16, 5, 45.0)
                figures["scoring_chat_p95_ratio_at_16"] = pct(with_scoring.latencies, 0.95) / pct(
                    without.latencies, 0.95
                )
        if think:
            print(
                f"think-time profile: pauses around {args.think_s:g} s, levels {', '.join(map(str, args.levels))}, "
                f"{args.window_s:g} s each (after one warm-up turn per system), against a fresh app each run"
            )
            arms = {"as configured": {}}
            if args.compare_settings:
                arms[f"with {args.compare}"] = args.compare_settings
            started = iter(range(1000))

            @contextlib.contextmanager
            def fresh_app(settings: dict[str, str]):
                db = Path(folder) / f"load-think-{next(started)}.db"
                with AppServer(db, env={**env, **settings}) as server:
                    run_level(server.url, db, systems, len(systems), 1, 120.0)  # every model loads first
                    yield server.url, db

            def profile(app: tuple[str, Path]) -> dict[str, float]:
                url, db = app
                return think_profile(url, db, systems, think=args.think_s, levels=args.levels, window=args.window_s)

            measured = think_profiles(fresh_app, args.repeat, arms, profile)
            figures.update(median_of_runs(measured["as configured"]))
            if args.compare_settings:
                compared = median_of_runs(measured[f"with {args.compare}"])
                figures.update({f"{k}_compared": v for k, v in compared.items()})
        print(f"machine load (1, 5, 15 min) at the end: {tuple(round(x, 2) for x in os.getloadavg())}")


def report(figures: dict[str, float], args: argparse.Namespace) -> None:
    """The headline lines: each figure measured as a ``BENCH`` line, each one not measured said in words."""
    partial = args.quick or args.scoring_only or args.think_only
    why = "not part of this run" if partial else "the bench stopped before it"
    lines = []
    if not args.think_only:
        lines += [
            bench_line("chat_p95_s_at_50", figures, ".2f", "s", "<= 2", "no N = 50 level in this run"),
            bench_line("lost_or_duplicated", figures, ".0f", "", "<= 0", why),
            bench_line("leaderboard_read_writes", figures, ".0f", "", "<= 0", why),
            bench_line(
                "scoring_unscored", figures, ".0f", "", "<= 0 (chat and arena conversations left unscored)", why
            ),
            bench_line(
                "scoring_chat_p95_ratio_at_16", figures, ".2f", "x", "<= 1.2 (background scoring on / off)", why
            ),
        ]
    if not args.scoring_only:
        smallest = min(args.levels)
        need = f">= {smallest / args.think_s:.2g} (what {smallest} sessions pausing {args.think_s:g} s send)"
        lines.append(bench_line("capacity_turns_per_s", figures, ".2f", "turns/s", need, why))
        for n in args.levels:
            # the target is at 50 sessions; beyond capacity (200 pausing 10 s offer 20 turns/s) the p95 is
            # queueing, a figure to report
            target = f"<= 2 (pauses around {args.think_s:g} s)" if n == 50 else None
            lines.append(
                bench_line(f"chat_p95_s_at_{n}_think", figures, ".2f", "s", target, f"no turn answered at N = {n}")
            )
        lines.append(bench_line("lost_or_duplicated_think", figures, ".0f", "", "<= 0", why))
        if args.compare_settings:  # the second arm, side by side: reported, no target
            lines.append(f"compared: the app with {args.compare}")
            lines.append(bench_line("capacity_turns_per_s_compared", figures, ".2f", "turns/s", None, why))
            for n in args.levels:
                name = f"chat_p95_s_at_{n}_think"
                lines.append(bench_line(f"{name}_compared", figures, ".2f", "s", None, f"no turn answered at N = {n}"))
                if figures.get(name) and figures.get(f"{name}_compared") is not None:
                    figures[f"{name}_compared_over_configured"] = figures[f"{name}_compared"] / figures[name]
                lines.append(
                    bench_line(f"{name}_compared_over_configured", figures, ".2f", "x", None, "an arm measured nothing")
                )
            lines.append(bench_line("lost_or_duplicated_think_compared", figures, ".0f", "", "<= 0", why))
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
    sys.exit(0)
