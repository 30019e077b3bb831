"""Simulated-user batch throughput: conversations per minute at concurrency 1 and 8.

Every model call (the simulated user, ChatCRS, the persuasiveness score) goes to the fake
OpenAI-compatible server on 127.0.0.1 (tests/fake_openai.py), which answers after a fixed latency L
with content-routed answers (tests/simulator_script.py). Records are generated from the bundled
catalog (one per target item), so the benchmark needs no external data. Systems: the retrieval
baseline and ChatCRS; CoRE protocol; evaluation off (dialogues only). Each run uses a fresh database,
so the LLM cache never answers.

    python bench/simulate.py [--latency 0.25] [--records 12]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from simulator_script import RoutedFake, fake_env

from catalog.catalog import get_catalog
from evaluators.simulator import SimulationConfig, run_simulation
from storage.db import close_thread_connections

SYSTEMS = ["retrieval", "chatcrs"]


def write_records(path: Path, n: int) -> Path:
    items = get_catalog("bundled").popular(n)
    with open(path, "w", encoding="utf-8") as f:
        for number, item in enumerate(items, 1):
            record = {
                "dialog_id": str(number),
                "turn_id": 1,
                "context": ["Hi! I'm looking for a movie tonight."],
                "rec": [item.name],
            }
            f.write(json.dumps(record) + "\n")
    return path


def run(records: Path, n: int, concurrency: int, folder: Path) -> tuple[float, int, int]:
    """Wall seconds, dialogues finished, model calls made."""
    db = folder / f"bench-{concurrency}.db"
    config = SimulationConfig(
        systems=SYSTEMS,
        dataset=str(records),
        n=n,
        protocol="core",
        persuasiveness="probability",  # asked on top of CoRE's protocol, so its cost is in the figure
        seed=0,
        concurrency=concurrency,
        evaluate=False,
        out_dir=folder / f"report-{concurrency}",
    )
    start = time.perf_counter()
    result = run_simulation(config, db_path=db)
    wall = time.perf_counter() - start
    close_thread_connections()
    return wall, result.counts.get("done", 0), result.counts.get("error", 0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.25, help="seconds per model call (L)")
    parser.add_argument("--records", type=int, default=12, help="records (each with both systems)")
    args = parser.parse_args()
    with RoutedFake(latency=args.latency) as fake, tempfile.TemporaryDirectory() as tmp:
        os.environ.update(fake_env(fake))
        os.environ.pop("CRS_CATALOG", None)
        folder = Path(tmp)
        records = write_records(folder / "bench_eval.jsonl", args.records)
        warm = folder / "warm"
        warm.mkdir()
        run(records, 1, 1, warm)  # imports, catalog indexes, first connections
        results = {}
        for concurrency in (1, 8):
            calls_before = len(fake.chat_requests())
            wall, done, errors = run(records, args.records, concurrency, folder)
            calls = len(fake.chat_requests()) - calls_before
            results[concurrency] = wall
            print(
                f"concurrency {concurrency}: {done} dialogues ({errors} errors), {calls} model calls in "
                f"{wall:.2f} s = {60 * done / wall:.1f} conversations/min"
            )
    dialogues = args.records * len(SYSTEMS)
    speedup = results[1] / results[8]
    print(
        f"L = {args.latency} s; {dialogues} dialogues ({args.records} records x {len(SYSTEMS)} systems), CoRE protocol"
    )
    print(f"BENCH simulate_conversations_per_min_c1 {60 * dialogues / results[1]:.1f} conv/min target >= 1")
    print(f"BENCH simulate_conversations_per_min_c8 {60 * dialogues / results[8]:.1f} conv/min target >= 6")
    print(f"BENCH simulate_speedup {speedup:.1f} x target >= 6")


if __name__ == "__main__":
    main()
