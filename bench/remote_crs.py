"""Remote systems (crs-arena/1): what the HTTP path adds per turn, and arena throughput with two of them.

1. **Overhead per turn.** The reference server (examples/reference_crs.py) on 127.0.0.1 answers after a
   fixed latency L and reports its own time in ``Server-Timing``. A turn's overhead is the client's wall
   time minus that: building and encoding the request, HTTP on a kept-alive connection, reading and
   validating the answer, mapping its items onto the catalog. Conversations of 1 to 9 turns, one after
   another. Headline: p50, target <= 20 ms.
2. **Arena throughput.** Two reference servers registered through a systems file; 8 voters at once, each
   running battles of 3 messages (both sides answer each message, both stored in SQLite) and a vote.
   Reported: battles per minute, the median time per message against L (the floor: both sides answer at
   once), and the count of failed sides (must be 0).

Every loop has a fixed number of iterations. The machine's load average is printed with the figures.

    python bench/remote_crs.py [--latency 0.05] [--turns 200] [--battles 48]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
os.environ.setdefault("CRS_NEURAL_BUILD", "never")

from reference_crs import ReferenceServer

from arena.battles import send, start_battle, vote
from catalog.catalog import get_catalog
from crs_backends import registry
from crs_backends.remote_crs import RemoteConfig, RemoteCRS
from crs_backends.systems_file import load_systems_file, registry_entries
from storage.db import close_thread_connections, get_db
from storage.records import Conversation, Turn

USER_LINES = [
    "I'd like a tense heist movie.",
    "Something from the 90s?",
    "Who is in it?",
    "I love science fiction with aliens.",
    "Not that one, something funnier.",
    "Any animated film for kids?",
    "A romantic comedy, please.",
    "Something else?",
    "Is it very violent?",
]


def overhead(latency: float, turns: int) -> tuple[list[float], list[float]]:
    """Per turn: (client wall ms - server ms), and the client wall ms."""
    catalog = get_catalog("bundled")
    with ReferenceServer(("127.0.0.1", 0), latency=latency) as server:
        system = RemoteCRS(RemoteConfig(id="bench", label="Bench", url=server.url, max_retries=0, timeout=10), catalog)
        system.respond(Conversation(system_id="bench", turns=[Turn("user", "warm up")]))  # connect once
        extra, wall = [], []
        conversation = Conversation(system_id="bench")
        for n in range(turns):
            if len(conversation.turns) >= 18:
                conversation = Conversation(system_id="bench")
            conversation.turns.append(Turn("user", USER_LINES[n % len(USER_LINES)]))
            start = time.perf_counter()
            turn = system.respond(conversation)
            ms = (time.perf_counter() - start) * 1000
            conversation.turns.append(turn)
            wall.append(ms)
            extra.append(ms - turn.metadata["server_ms"])
        system.close()
    return extra, wall


def arena(latency: float, battles: int, concurrency: int, messages: int) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="bench-remote-"))
    db_path = folder / "arena.db"
    with (
        ReferenceServer(("127.0.0.1", 0), latency=latency) as one,
        ReferenceServer(("127.0.0.1", 0), latency=latency) as two,
    ):
        systems = folder / "systems.toml"
        systems.write_text(
            f'[[system]]\nid = "remote_one"\nlabel = "Remote one"\nurl = "{one.url}"\n\n'
            f'[[system]]\nid = "remote_two"\nlabel = "Remote two"\nurl = "{two.url}"\n',
            encoding="utf-8",
        )
        registry.SYSTEMS.update(registry_entries(load_systems_file(systems)))  # as CRS_SYSTEMS_FILE would
        ids = ["remote_one", "remote_two"]
        per_message: list[float] = []
        failed = 0

        def one_battle(number: int) -> tuple[list[float], int]:
            nonlocal failed
            rng = random.Random(number)
            times, errors = [], 0
            try:
                battle = start_battle(get_db(db_path), ids, rng, session=f"bench-{number}")
                for m in range(messages):
                    start = time.perf_counter()
                    replies = send(battle, USER_LINES[(number + m) % len(USER_LINES)], db_path=db_path)
                    times.append(time.perf_counter() - start)
                    errors += sum(1 for r in replies.values() if r.error)
                vote(get_db(db_path), battle.id, rng.choice(["a", "b", "tie"]), voter=f"bench-{number}")
            finally:
                close_thread_connections()
            return times, errors

        get_db(db_path)  # create and migrate once, before the voters start
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            for times, errors in pool.map(one_battle, range(battles)):
                per_message += times
                failed += errors
        wall = time.perf_counter() - start
        for system_id in ids:
            registry.SYSTEMS.pop(system_id, None)
    return {"wall": wall, "battles": battles, "per_message": per_message, "failed": failed}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.05, help="the remote system's own seconds per answer (L)")
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--battles", type=int, default=48)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--messages", type=int, default=3, help="messages per battle")
    args = parser.parse_args()

    load = os.getloadavg()
    print(
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs; "
        f"L = {args.latency * 1000:.0f} ms"
    )
    extra, wall = overhead(args.latency, args.turns)
    print(
        f"{args.turns} turns: client {statistics.median(wall):.1f} ms median, of which the system's own "
        f"{statistics.median(wall) - statistics.median(extra):.1f} ms"
    )
    print(f"BENCH remote_crs_overhead_ms {statistics.median(extra):.1f} ms target <= 20")
    print(f"BENCH remote_crs_overhead_p95_ms {percentile(extra, 0.95):.1f} ms")

    result = arena(args.latency, args.battles, args.concurrency, args.messages)
    per_minute = result["battles"] / result["wall"] * 60
    message_p50 = statistics.median(result["per_message"]) * 1000
    print(
        f"arena: {result['battles']} battles x {args.messages} messages, 2 remote systems, concurrency "
        f"{args.concurrency}: {result['wall']:.1f} s, {result['failed']} failed side(s)"
    )
    print(f"BENCH remote_arena_battles_per_min {per_minute:.0f} battles/min at concurrency {args.concurrency}")
    print(f"BENCH remote_arena_message_ms_p50 {message_p50:.0f} ms (L = {args.latency * 1000:.0f} ms)")
    print(f"BENCH remote_arena_failed_sides {result['failed']} count target <= 0")
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
