"""Per-turn latency of KBRD, BARCOR and UniCRS on CPU, small and full size, and their peak memory.

A turn is what the app does for one user message under CRS Arena's policy: link the entities of the new
message (rapidfuzz WRatio >= 90 over the KG), ``recommend`` (top 50 items), ``generate`` (the reply) and
score the option letters (``get_choice``). Ten scripted user messages (preferences, titles, rejections, an
off-topic and a
non-English one) make one conversation; the models' own replies are kept as the system turns, so the
context grows as in a real chat. One warm-up turn is not counted.

- small: the built small local versions (``python -m crs_backends.neural.small ensure``), else freshly
  created small models (untrained, same sizes) on the bundled catalog; a headline line per system (KBRD and
  BARCOR <= 0.5 s, UniCRS <= 1.5 s: its decoder is the 135M-parameter SmolLM2);
- full: ``Model.create(kg, size="full")`` — the published sizes with random weights, over the ReDial KG
  when the research data is there (else the bundled one), replies capped for interactive use;
- published: the same at the published generation lengths (BARCOR ``max_length`` 128, UniCRS 128 new
  tokens): random weights never stop early, so this is the worst case a published turn can take.

Each (system, size) runs in its own process (``--threads`` torch threads, default 2), so the peak
resident memory (``ru_maxrss``) is that configuration's alone.

    python bench/crs_latency.py [--systems kbrd,barcor,unicrs] [--sizes small,full] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crs_backends.neural.names import SYSTEMS

SIZES = ("small", "full", "published")
TARGETS = {"small": 0.3, "full": 2.0, "published": 2.0}
# the small versions' own (issue #40): KBRD and BARCOR 0.5 s, UniCRS, a 135M-parameter decoder, 1.5 s
SMALL_TARGETS = {"kbrd": 0.5, "barcor": 0.5, "unicrs": 1.5}
WARM_UP = "Hello! Can you help me find a movie for tonight?"
CONVERSATION = [
    "Hi! I'm looking for a movie like The Godfather (1972).",
    "I've seen it. I like movies with Al Pacino and Robert De Niro.",
    "Something older maybe? I love films from the 1970s.",
    "Not really my thing. What about a comedy?",
    "I really enjoyed Groundhog Day and Ghostbusters, anything like those?",
    "qwertyuiop asdf",  # nothing to link
    "Do you know any good sci-fi? Star Wars (1977) is my favorite, and I liked Alien too.",
    "¿Tienes alguna película de terror?",  # non-English
    "Directed by Steven Spielberg would be great, something like Jaws.",
    "Sounds good, thanks! One more thriller for the weekend?",
]


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes


def parameters(model) -> int:
    import torch

    seen: set[int] = set()
    total = 0
    for value in vars(model).values():
        if isinstance(value, torch.nn.Module):
            for p in value.parameters():
                if id(p) not in seen:
                    seen.add(id(p))
                    total += p.numel()
    return total


def build_model(system: str, size: str):
    """(model, where it came from)."""
    from catalog.catalog import data_dir, load_bundled
    from crs_backends.neural.kg_reader import kg_from_catalog, load_kg
    from crs_backends.neural.names import model_class
    from crs_backends.neural.synthetic import record_texts, synthetic_records
    from crs_backends.neural.train_command import has_published_layout

    cls = model_class(system, size)
    if size == "small":
        from crs_backends.neural.names import set_dataset, small_models_root

        root = small_models_root()
        if root is not None and has_published_layout(root, system, set_dataset(root)):
            from crs_backends.neural.fidelity import open_small

            # opened as the app opens it
            return open_small(system, root, load_bundled()).model, f"built small version ({root.name})"
        catalog = load_bundled()
        kg = kg_from_catalog(catalog)
        texts = record_texts(synthetic_records(catalog, 300, 0, kg=kg))
        return cls.create(kg, texts, size="small", seed=0), "new small model (random weights; small versions not built)"
    base = data_dir()
    if base is not None and (base / "redial" / "entity2id.json").exists():
        from catalog.ievalm_records import read_records

        kg = load_kg(base / "redial")
        texts = [
            u
            for r in read_records(base / "redial_eval" / "valid_data_processed.jsonl", limit=500)
            for u in (*r.context, r.resp)
        ]
        where = "redial KG"
    else:
        catalog = load_bundled()
        kg = kg_from_catalog(catalog)
        texts = record_texts(synthetic_records(catalog, 300, 0, kg=kg))
        where = "bundled KG"
    model = cls.create(kg, texts, size="full", seed=0)
    if size == "published":  # the generation lengths CRS Arena serves: BARCOR max_length 128, UniCRS 128 new tokens
        if system == "barcor":
            model.max_new_tokens = None
        elif system == "unicrs":
            model.max_new_tokens = model.resp_max_length
        return model, f"full size at the published generation lengths, random weights, {where}"
    return model, f"full size, random weights, {where}"


def one(system: str, size: str, threads: int) -> dict:
    import torch

    from crs_backends.neural.engine import ConvInput
    from crs_backends.neural.policy import options_for

    torch.set_num_threads(threads)
    options = [letter for letter, _ in options_for("redial")]
    base_rss = rss_mb()
    t0 = time.perf_counter()
    model, where = build_model(system, size)
    load_s = time.perf_counter() - t0
    kg = model.kg
    context: list[str] = []
    entities: list[str] = []
    turns, cpu, link_s, rec_s, gen_s, replies = [], [], [], [], [], []
    with torch.inference_mode():
        for n, message in enumerate([WARM_UP, *CONVERSATION]):
            t = time.perf_counter()
            entities = entities + kg.link(message)
            t_link = time.perf_counter() - t
            inp = ConvInput(context + [message], list(entities))
            c = time.process_time()
            t = time.perf_counter()
            ranked = model.recommend(inp)
            t_rec = time.perf_counter() - t
            t = time.perf_counter()
            reply = model.generate(inp, items=[kg.entity_name(i) for i, _s in ranked[:3]])
            model.option_scores(inp, options)  # CRS Arena's policy also scores the option letters every turn
            t_gen = time.perf_counter() - t
            t_cpu = time.process_time() - c
            context = inp.context + [reply]
            entities = entities + kg.link(reply)
            if n == 0:
                continue  # warm-up
            turns.append(t_rec + t_gen)
            cpu.append(t_cpu)
            link_s.append(t_link)
            rec_s.append(t_rec)
            gen_s.append(t_gen)
            replies.append(reply)
    return {
        "system": system,
        "size": size,
        "where": where,
        "description": getattr(model, "description", system),
        "params": parameters(model),
        "load_s": load_s,
        "turns": turns,
        "cpu_s": cpu,
        "link_s": link_s,
        "rec_s": rec_s,
        "gen_s": gen_s,
        "peak_rss_mb": rss_mb(),
        "base_rss_mb": base_rss,
        "sample_reply": replies[0][:80],
        "threads": torch.get_num_threads(),
    }


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(0.95 * (len(ordered) - 1))))]


def run_child(system: str, size: str, threads: int, timeout: float) -> dict:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1"),
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": str(threads),
    }
    try:
        proc = subprocess.run(
            [sys.executable, __file__, "--one", system, size, "--threads", str(threads)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"system": system, "size": size, "error": f"timed out after {timeout:.0f} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return {"system": system, "size": size, "error": f"exit {proc.returncode}: {' | '.join(tail)}"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--sizes", default=",".join(SIZES))
    parser.add_argument("--threads", type=int, default=2, help="torch threads (the target machine has 2 cores)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per configuration")
    parser.add_argument("--one", nargs=2, metavar=("SYSTEM", "SIZE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(*args.one, args.threads)))
        return
    results = [
        run_child(system, size, args.threads, args.timeout)
        for size in args.sizes.split(",")
        for system in args.systems.split(",")
    ]
    print(
        f"{len(CONVERSATION)} turns per conversation (+1 warm-up), {args.threads} torch threads; "
        "turn = recommend + generate in wall seconds (entity linking shown apart; cpu s = process CPU time "
        "of a turn, all threads, for reading results from a busy machine); load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    print(
        f"{'system':<7} {'size':<6} {'params':>8} {'median':>7} {'p95':>7} {'rec':>6} {'gen':>6} {'link':>6} "
        f"{'cpu s':>6} {'peak MB':>8} {'load s':>7}  source"
    )
    worst: dict[str, float] = {}
    for r in results:
        if "error" in r:
            print(f"{r['system']:<7} {r['size']:<6} ERROR {r['error']}")
            worst[r["size"]] = float("inf")
            continue
        med = statistics.median(r["turns"])
        worst[r["size"]] = max(worst.get(r["size"], 0.0), med)
        print(
            f"{r['system']:<7} {r['size']:<6} {r['params'] / 1e6:>7.1f}M {med:>7.3f} {p95(r['turns']):>7.3f} "
            f"{statistics.median(r['rec_s']):>6.3f} {statistics.median(r['gen_s']):>6.3f} "
            f"{statistics.median(r['link_s']):>6.3f} {statistics.median(r['cpu_s']):>6.3f} "
            f"{r['peak_rss_mb']:>8.0f} {r['load_s']:>7.1f}  {r['where']}"
        )
    for r in results:
        if "error" not in r:
            print(f"  {r['system']} {r['size']}: {r['description']}; first reply: {r['sample_reply']!r}")
    for size in SIZES:
        if size == "small":
            for r in results:
                if r["size"] == "small":
                    med = statistics.median(r["turns"]) if "error" not in r else float("inf")
                    target = SMALL_TARGETS[r["system"]]
                    print(f"BENCH small_turn_latency_s_{r['system']} {med:.3f} s target <= {target:g}")
        elif size in worst:
            print(f"BENCH {size}_turn_latency_s {worst[size]:.3f} s target <= {TARGETS[size]:g}")


if __name__ == "__main__":
    main()
