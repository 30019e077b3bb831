"""What serving a built-in system as a worker costs per turn: the same conversations answered in-process and through
``crs_backends.worker`` (crs-arena/1 over HTTP on 127.0.0.1, read back by the app's remote adapter), side by side in
one run, alternating so that machine load falls on both alike.

    python bench/worker_overhead.py [--systems retrieval,kbrd] [--turns 40]

Per system: median per-turn time in-process and through the worker, and the difference. The headline is the worst
system's median difference: ``BENCH worker_overhead_ms … target <= 20``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MESSAGES = (
    "Any good sci-fi films?",
    "I loved Heat (1995). Another tense crime film?",
    "Something funny for a family evening?",
    "A romantic film set in Paris?",
    "Not a fan of Christopher Nolan. A thriller?",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--systems", default="retrieval,kbrd")
    parser.add_argument("--turns", type=int, default=40)
    args = parser.parse_args()

    from crs_backends import registry
    from crs_backends.registry import catalog_for_chat
    from crs_backends.remote_crs import RemoteConfig, RemoteCRS
    from crs_backends.worker import WorkerServer
    from storage.records import Conversation, Turn

    print(
        f"machine load (1, 5, 15 min) at start: {tuple(round(x, 2) for x in os.getloadavg())} on {os.cpu_count()} CPUs"
    )
    worst = float("nan")
    for system_id in [s.strip() for s in args.systems.split(",") if s.strip()]:
        system = registry.get_system(system_id)
        with WorkerServer(system, system_id) as server:
            catalog = getattr(system, "catalog", None) or catalog_for_chat()  # what the app maps answers onto
            remote = RemoteCRS(RemoteConfig(id=f"{system_id}_worker", label=system_id, url=server.url), catalog)
            local_times: list[float] = []
            remote_times: list[float] = []
            for n in range(args.turns):
                conversation = Conversation(system_id=system_id, turns=[Turn("user", MESSAGES[n % len(MESSAGES)])])
                for target, times in ((system, local_times), (remote, remote_times))[:: 1 if n % 2 else -1]:
                    start = time.perf_counter()
                    target.respond(conversation)
                    times.append((time.perf_counter() - start) * 1000)
        local, served = statistics.median(local_times), statistics.median(remote_times)
        overhead = served - local
        worst = overhead if worst != worst else max(worst, overhead)
        print(
            f"{system_id:<10} {args.turns} turns: in-process median {local:.1f} ms, worker {served:.1f} ms, "
            f"overhead {overhead:.1f} ms"
        )
    print(f"machine load at the end: {tuple(round(x, 2) for x in os.getloadavg())}")
    print(f"BENCH worker_overhead_ms {worst:.1f} ms target <= 20")
    return 0


if __name__ == "__main__":
    sys.exit(main())
