"""Vote throughput under concurrency: 8 writer threads against one SQLite file.

Each thread casts the vote of its own 250 battles and, in between, tries to vote on 250 battles
of another thread (a race for the same vote: exactly one of the two may win). The votes go
through :func:`arena.battles.vote`, the path the Arena tab uses. Bounded: 4,000 attempts.

    python bench/votes.py
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from arena.battles import DuplicateVote, vote
from storage.battle_votes import save_battle
from storage.conversations import save_conversation
from storage.db import close_thread_connections, get_db
from storage.records import Battle, Conversation, Turn

THREADS, PER_THREAD = 8, 250


def setup(db_path: Path) -> list[str]:
    db = get_db(db_path)
    sides = [
        save_conversation(
            db, Conversation(system_id=s, source="arena", turns=[Turn("user", "hi"), Turn("system", "hello")])
        ).id
        for s in ("x", "y")
    ]
    return [
        save_battle(db, Battle(system_a="x", system_b="y", conversation_a=sides[0], conversation_b=sides[1])).id
        for _ in range(THREADS * PER_THREAD)
    ]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db_path = Path(tmp) / "votes.db"
        ids = setup(db_path)
        results = [Counter() for _ in range(THREADS)]
        start_line = threading.Barrier(THREADS + 1)

        def worker(t: int) -> None:
            own, others = ids[t::THREADS], ids[(t + 1) % THREADS :: THREADS]
            start_line.wait()
            try:
                for own_id, other_id in zip(own, others):
                    for battle_id in (own_id, other_id):
                        try:
                            vote(get_db(db_path), battle_id, "a", voter=f"t{t}")
                            results[t]["recorded"] += 1
                        except DuplicateVote:
                            results[t]["refused"] += 1
                        except Exception as e:
                            results[t][type(e).__name__] += 1
            finally:
                close_thread_connections()

        threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
        for thread in threads:
            thread.start()
        start_line.wait()
        start = time.perf_counter()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - start
        total = sum(results, Counter())
        stored = get_db(db_path).execute("select count(distinct battle_id), count(*) from votes").fetchone()
        close_thread_connections()
    lost = len(ids) - stored[0]
    print(f"{THREADS} threads, {sum(total.values())} attempts on {len(ids)} battles in {elapsed:.2f} s: {dict(total)}")
    print(f"stored votes: {stored[1]} rows on {stored[0]} battles (duplicates: {stored[1] - stored[0]})")
    print(f"BENCH votes_per_s {total['recorded'] / elapsed:.0f} votes/s target >= 500")
    print(f"BENCH votes_lost {lost} votes target <= 0")


if __name__ == "__main__":
    main()
