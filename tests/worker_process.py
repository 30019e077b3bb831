"""A worker in its own process around a test system that takes its time, for the tests that stop or kill a worker
mid-turn (tests/test_worker_asgi.py): the same ``WorkerServer.serve_forever`` that ``crs-arena serve`` runs.

    python tests/worker_process.py --delay 3 [--name slow-1]   # prints its URL on the first line, then serves

The system answers every turn after ``--delay`` seconds with three popular titles of the bundled catalog.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catalog.catalog import get_catalog
from crs_backends.base import CRSSystem, SystemInfo
from crs_backends.worker import WorkerServer
from storage.records import Conversation, Turn


class SlowSystem(CRSSystem):
    def __init__(self, delay: float):
        self.delay = delay
        self.catalog = get_catalog("bundled")

    @property
    def info(self) -> SystemInfo:
        return SystemInfo(id="slow", label="Slow test system", variant=f"answers after {self.delay:g} s")

    def respond(self, conversation: Conversation) -> Turn:
        time.sleep(self.delay)
        items = [item.ref() for item in self.catalog.popular(3)]
        return Turn("system", f"After some thought: {items[0].title}.", items=items)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay", type=float, default=2.0)
    parser.add_argument("--name", default=None)
    parser.add_argument("--grace", type=float, default=60.0)
    args = parser.parse_args()
    server = WorkerServer(SlowSystem(args.delay), "slow", port=0, name=args.name, grace=args.grace)
    print(server.url, flush=True)
    server.serve_forever()
    print("stopped", flush=True)


if __name__ == "__main__":
    main()
