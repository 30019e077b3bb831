"""ChatCRS offline (the embedded SmolLM2-135M, constrained): invented titles, wrong facts and time per turn.

Sends the seeded batch of :data:`crs_backends.chatcrs_check.SCRIPTS` (20 user turns in 10
conversations) to ChatCRS on the embedded model and checks every reply against the catalog:
a title that is not one of the turn's candidates (``invented_titles``) or a stated fact its catalog
record contradicts (``fact_errors``). Seconds per turn are wall-clock (the machine's load average is
printed beside them: on a shared machine they vary with it), plus the process's CPU seconds per turn.

    python bench/chatcrs_offline.py [--catalog bundled] [--show]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


IDLE_TOKENS_S = 105  # SmolLM2-135M Q4_1, portable llama.cpp build, 2 idle cores (measured when the backend was chosen)


def decode_speed(model, tokens: int = 64) -> float:
    """Tokens per second the embedded model decodes now (greedy): how loaded the machine is."""
    llm = model.llm

    def run():
        prompt = model.prompt([{"role": "user", "content": "Tell me a long story about a lighthouse keeper."}])
        llm.create_completion(prompt, max_tokens=1, temperature=0)  # the prompt evaluated first
        start = time.perf_counter()
        out = llm.create_completion(prompt, max_tokens=tokens, temperature=0)
        return out["usage"]["completion_tokens"] / (time.perf_counter() - start)

    return model.call(run)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--catalog", default="bundled", help="catalog name (bundled, or a dataset folder)")
    parser.add_argument("--show", action="store_true", help="print every exchange")
    args = parser.parse_args()

    from catalog.catalog import get_catalog
    from crs_backends.chatcrs import ChatCRS
    from crs_backends.chatcrs_check import run_batch, summary
    from llm_clients.base import LLMClient
    from llm_clients.embedded import get_embedded_model

    catalog = get_catalog(args.catalog)
    model = get_embedded_model()
    crs = ChatCRS(LLMClient(model, role="crs", db_path=None), catalog)  # no cache: real timings
    crs.warm_up()
    speed = decode_speed(model)
    cpu_start, load_start = time.process_time(), os.getloadavg()[0]
    checked = run_batch(crs, catalog)
    cpu = time.process_time() - cpu_start
    load_end = os.getloadavg()[0]
    result = summary(checked)
    for c in checked:
        if args.show or c.invented or c.fact_errors:
            print(f"user: {c.user}\n  {c.act} ({c.seconds:.2f} s): {c.reply}")
            for problem in [*c.invented, *c.fact_errors]:
                print(f"  !! {problem}")
    print(f"acts: {result['acts']}; load average {load_start:.1f} -> {load_end:.1f} on {os.cpu_count()} cores")
    print(f"BENCH chatcrs_invented_titles {result['invented_titles']} count target <= 0")
    print(f"BENCH chatcrs_fact_errors {result['fact_errors']} count target <= 0")
    print(f"BENCH chatcrs_offline_turn_s_median {result['median_s']:.2f} s target < 6")
    print(f"BENCH chatcrs_offline_turn_s_max {result['max_s']:.2f} s")
    print(f"BENCH chatcrs_offline_turn_cpu_s_mean {cpu / max(1, result['turns']):.2f} s")
    print(
        f"machine: the embedded model decoded {speed:.1f} tokens/s just before the batch (about {IDLE_TOKENS_S} on "
        "two idle cores): the seconds above are as slow as the machine was"
    )
    print(
        f"turns: {result['turns']}; median of the model-free turns and the model turns: "
        f"{statistics.median([c.seconds for c in checked if c.metadata.get('decided_by') != 'model'] or [0]):.2f} / "
        f"{statistics.median([c.seconds for c in checked if c.metadata.get('decided_by') == 'model'] or [0]):.2f} s"
    )
    return 0 if result["invented_titles"] == 0 and result["fact_errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
