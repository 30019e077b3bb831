"""What serving a built-in system as a worker costs per turn: the same conversations answered in-process and through
a worker (``crs-arena serve``: crs-arena/1 over HTTP on 127.0.0.1 to FastAPI on uvicorn, read back by the app's
remote adapter), side by side in one run, alternating so that machine load falls on both alike.

    python bench/worker_overhead.py [--systems retrieval,kbrd] [--turns 40]

The worker runs in its own process, as deployed: in this process it would share the interpreter's lock with the
client, and each hand-over between them waits out the lock's switch interval (5 ms), a cost no deployment has.

Per system: median per-turn time in-process and through the worker, their difference, and the worker's added
latency per turn measured on each turn itself: the app's time for the turn (request built, sent, answer read and
mapped onto the catalog) less the system's own time inside the worker (``Server-Timing: crs;dur``). That second
figure does not move with the system's own variance (a neural turn's 150 ms vary by more than the worker adds on
a loaded machine), so it is the headline: the worst system's median, ``BENCH worker_overhead_ms … target <= 5``.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# torch's idle threads must not spin in one process while the other works (both here, and the worker's inherits it):
# on two cores, spinning made a KBRD turn 2.9 s instead of 0.13 s
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

MESSAGES = (
    "Any good sci-fi films?",
    "I loved Heat (1995). Another tense crime film?",
    "Something funny for a family evening?",
    "A romantic film set in Paris?",
    "Not a fan of Christopher Nolan. A thriller?",
)


class Worker:
    """``crs-arena serve SYSTEM --port 0`` in a process of its own, ready (its /health says so) when entered."""

    def __init__(self, system_id: str, ready_within: float = 600.0):
        self.system_id, self.ready_within = system_id, ready_within

    def __enter__(self) -> Worker:
        env = {**os.environ, "LOG_LEVEL": "ERROR"}
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "commands.py"), "serve", self.system_id, "--port", "0"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stdout is not None
        found = re.search(r"http://127\.0\.0\.1:\d+/", self.proc.stdout.readline())
        if not found:
            self.__exit__()
            raise RuntimeError(f"the {self.system_id} worker did not start")
        self.url = found.group(0)
        deadline = time.monotonic() + self.ready_within  # a neural model loads in seconds; bounded all the same
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.url + "health", timeout=5) as response:
                    if response.status == 200:
                        return self
            except OSError:
                time.sleep(0.2)
        self.__exit__()
        raise RuntimeError(f"the {self.system_id} worker was not ready within {self.ready_within:g} s")

    def __exit__(self, *exc: object) -> None:
        self.proc.send_signal(signal.SIGTERM)  # a graceful stop; killed if it takes too long
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--systems", default="retrieval,kbrd")
    parser.add_argument("--turns", type=int, default=40)
    args = parser.parse_args()

    from crs_backends import registry
    from crs_backends.registry import catalog_for_chat
    from crs_backends.remote_crs import RemoteConfig, RemoteCRS
    from storage.records import Conversation, Turn

    print(
        f"machine load (1, 5, 15 min) at start: {tuple(round(x, 2) for x in os.getloadavg())} on {os.cpu_count()} CPUs"
    )
    worst: float | None = None
    for system_id in [s.strip() for s in args.systems.split(",") if s.strip()]:
        system = registry.get_system(system_id)
        prepare = getattr(system, "warm_up", None)
        if prepare:
            prepare()  # as the worker does before it serves
        with Worker(system_id) as server:
            catalog = getattr(system, "catalog", None) or catalog_for_chat()  # what the app maps answers onto
            remote = RemoteCRS(RemoteConfig(id=f"{system_id}_worker", label=system_id, url=server.url), catalog)
            local_times: list[float] = []
            remote_times: list[float] = []
            added: list[float] = []  # per worker turn: the app's time less the system's own time in the worker
            for n in range(args.turns):
                conversation = Conversation(system_id=system_id, turns=[Turn("user", MESSAGES[n % len(MESSAGES)])])
                for target, times in ((system, local_times), (remote, remote_times))[:: 1 if n % 2 else -1]:
                    start = time.perf_counter()
                    turn = target.respond(conversation)
                    times.append((time.perf_counter() - start) * 1000)
                    if target is remote and turn.metadata.get("server_ms") is not None:
                        added.append(times[-1] - turn.metadata["server_ms"])
            remote.close()
        local, served = statistics.median(local_times), statistics.median(remote_times)
        overhead = statistics.median(added) if added else served - local
        worst = overhead if worst is None else max(worst, overhead)
        p90 = f"{sorted(added)[int(0.9 * (len(added) - 1))]:.1f} ms" if added else "not measured (no Server-Timing)"
        print(
            f"{system_id:<10} {args.turns} turns: in-process median {local:.1f} ms, worker {served:.1f} ms "
            f"(difference {served - local:.1f} ms); added by the worker per turn: median {overhead:.1f} ms, p90 {p90}"
        )
    print(f"machine load at the end: {tuple(round(x, 2) for x in os.getloadavg())}")
    if worst is None:
        print("no system measured (--systems was empty)")
        return 0
    print(f"BENCH worker_overhead_ms {worst:.1f} ms target <= 5")
    return 0


if __name__ == "__main__":
    sys.exit(main())
