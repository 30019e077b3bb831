"""Embedded model speed: first-token latency, generation and prompt throughput,
and what KV-cache reuse of a shared prompt prefix buys.

The prefix figure runs the same 12 scoring prompts twice, side by side in this
run: once with a long shared text first and the varying instruction last (as
the judge builds its prompts), once with the varying instruction first so no
prefix is shared. The ratio of the two wall times is the speed-up.

    python bench/llm_embedded.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from llm_clients.base import LLMClient
from llm_clients.embedded import get_embedded_model

CONVERSATION = "\n".join(
    f"User: I am looking for a {g} movie from the {d}s, something like a classic I saw years ago.\n"
    f"System: You could try a well-known {g} film from the {d}s; it has a strong cast and a memorable story."
    for g, d in [
        ("crime", 1970),
        ("comedy", 1980),
        ("science fiction", 1990),
        ("romance", 2000),
        ("horror", 2010),
        ("animated", 2020),
        ("war", 1960),
        ("western", 1950),
    ]
)
FACTORS = [
    "coherence",
    "recoverability",
    "proactiveness",
    "grammar",
    "naturalness",
    "appropriateness",
    "effectiveness",
    "novelty",
    "diversity",
    "relevance",
    "explainability",
    "groundedness",
]


def main() -> None:
    model = get_embedded_model()
    client = LLMClient(model, use_cache=False)
    msgs = [
        {"role": "system", "content": "You recommend movies."},
        {"role": "user", "content": "Recommend three science fiction movies and say why."},
    ]

    # first-token latency and generation speed (median of 3, cache off)
    first_tokens, gen_rates = [], []
    for i in range(3):
        model.call(model.llm.reset)
        start = time.perf_counter()
        first = None
        n_pieces = 0
        final = None
        for piece in client.stream(msgs, temperature=0.7, max_tokens=120, seed=i):
            if isinstance(piece, str):
                n_pieces += 1
                if first is None:
                    first = time.perf_counter() - start
            else:
                final = piece
        total = time.perf_counter() - start
        first_tokens.append(first * 1000)
        gen_rates.append(max(final.usage.completion_tokens - 1, 1) / max(total - first, 1e-6))

    # prompt throughput: a ~1000-token prompt from scratch
    long_prompt = model.prompt([{"role": "system", "content": "Read."}, {"role": "user", "content": CONVERSATION * 2}])
    tokens = model._tokens(long_prompt)
    model.call(model.llm.reset)
    start = time.perf_counter()
    model.call(model._logits_after, tokens)
    prompt_rate = len(tokens) / (time.perf_counter() - start)

    # shared prefix first vs instruction first, 12 scoring prompts each
    def run(prefix_first: bool) -> float:
        model.call(model.llm.reset)
        start = time.perf_counter()
        for f in FACTORS:
            instruction = f"Rate the {f} of the system from 0 to 4. Answer <rating>N</rating>."
            content = f"{CONVERSATION}\n\n{instruction}" if prefix_first else f"{instruction}\n\n{CONVERSATION}"
            client.score(
                [{"role": "system", "content": "You are a careful judge."}, {"role": "user", "content": content}],
                prefix="<rating>",
            )
        return time.perf_counter() - start

    shared = run(prefix_first=True)
    unshared = run(prefix_first=False)
    conv_tokens = len(model._tokens(CONVERSATION))

    print(f"model: {model.describe()}  threads: {model.llm.context_params.n_threads}")
    print(f"first token latency ms (3 runs): {[round(x) for x in first_tokens]}")
    print(f"generation tokens/s (3 runs): {[round(x, 1) for x in gen_rates]}")
    print(f"prompt tokens/s: {prompt_rate:.0f} ({len(tokens)} tokens)")
    print(
        f"12 scoring prompts, {conv_tokens}-token shared text: prefix first {shared:.2f} s, "
        f"prefix last {unshared:.2f} s"
    )
    print(f"BENCH first_token_latency_ms {statistics.median(first_tokens):.0f} ms target <= 1000")
    print(f"BENCH generation_tokens_per_s {statistics.median(gen_rates):.1f} tok/s target >= 50")
    print(f"BENCH prompt_tokens_per_s {prompt_rate:.0f} tok/s target >= 150")
    print(f"BENCH prefix_reuse_speedup {unshared / shared:.2f} x target >= 2")


if __name__ == "__main__":
    main()
