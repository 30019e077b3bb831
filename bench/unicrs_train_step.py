"""One training step of the small UniCRS's recommendation prompt, with the frozen SmolLM2 computing in bfloat16
(autocast) and in float32, side by side in one run: which precision :func:`unicrs_smollm.train_autocast` picks on
this machine, and whether the one it picks is the faster. Each step goes through ``train_autocast`` itself, told
that the CPU has bfloat16 in hardware or not (``unicrs_smollm.cpu_native_bf16``).

A step: the prompt modules and the frozen decoder forward over a batch of ``--batch-size`` records, the
recommendation loss, its backward to the prompt and an optimizer step (what ``unicrs_smollm_training`` runs). The
records are ReDial's first ones with a target (``CRS_DATA_DIR``'s ``redial``, over its 24,630-entity graph, as the
recipe trains) or, without the research data, synthetic dialogues over the bundled catalog. The two precisions
alternate step by step (after one warm-up step each), so that a change in the machine's load falls on both; the
median of ``--steps`` steps each is printed.

    python bench/unicrs_train_step.py [--threads 2] [--steps 6] [--batch-size 8]

Headline: ``BENCH unicrs_train_step_chosen_over_other`` = the median step in the precision train_autocast picks over
the median in the other one (target <= 1.0: the pick is not the slower).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def load(batch_size: int, steps: int):
    """(model, examples, where they come from): a fresh small UniCRS and enough examples for every step."""
    from crs_backends.neural import unicrs_smollm_training as training
    from crs_backends.neural.unicrs_smollm import UniCRSSmall

    need = batch_size * (2 * steps + 2)
    from crs_backends.neural.kg_reader import KGError, load_kg
    from crs_backends.neural.train_command import DataError, default_records_file, read_records_file, resolve_data_dir

    try:
        kg_dir = resolve_data_dir("redial")
        kg = load_kg(kg_dir)
        path = default_records_file(kg_dir)
        if path is None:
            raise FileNotFoundError("no ReDial records")
        records = [r for r in read_records_file(path, 20 * need) if r.rec]
        origin = f"ReDial ({path.name}, {kg.n_entities} entities)"
    except (DataError, KGError, OSError) as e:  # no research data here: the bundled catalog's synthetic dialogues
        from catalog.catalog import load_bundled
        from crs_backends.neural.kg_reader import kg_from_catalog
        from crs_backends.neural.synthetic import synthetic_records

        catalog = load_bundled()
        kg = kg_from_catalog(catalog)
        records = [r for r in synthetic_records(catalog, 400, 0, kg=kg) if r.rec]
        origin = f"synthetic dialogues over the bundled catalog ({kg.n_entities} entities; ReDial: {e})"
    model = UniCRSSmall.create(kg, seed=0)
    examples = [e for e in (training.example(model, r) for r in records) if e["targets"]]
    if len(examples) < need:
        raise SystemExit(f"only {len(examples)} examples with a target; {need} needed")
    return model, examples[:need], origin


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=6, help="timed steps per precision (after one warm-up each)")
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args()
    if args.steps < 1 or args.batch_size < 1:
        raise SystemExit("--steps and --batch-size must be positive")

    import torch

    torch.set_num_threads(args.threads)
    from crs_backends.neural import unicrs_smollm
    from crs_backends.neural.unicrs_smollm_training import rec_loss

    model, examples, origin = load(args.batch_size, args.steps)
    native = unicrs_smollm.cpu_native_bf16()
    chosen = "bfloat16" if native else "float32"
    print(
        f"records: {origin}; batch {args.batch_size}; {args.threads} threads; train_autocast picks {chosen} "
        f"(native bfloat16 on this CPU: {native}; oneDNN's bfloat16 path: "
        f"{bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())})"
    )
    optimizer = torch.optim.AdamW(model.trainable_parameters(), lr=1e-4)
    precisions = {"bfloat16": True, "float32": False}  # the answer train_autocast is given for each
    times: dict[str, list[float]] = {p: [] for p in precisions}
    batches = iter(examples[i : i + args.batch_size] for i in range(0, len(examples), args.batch_size))
    model.set_training(True)
    original = unicrs_smollm.cpu_native_bf16
    try:
        for step in range(args.steps + 1):
            for name, answer in precisions.items():
                # train_autocast reads the CPU through this function at each forward: the step runs as training
                # runs on a CPU that answers so
                unicrs_smollm.cpu_native_bf16 = lambda answer=answer: answer  # type: ignore[misc]
                batch = next(batches)
                t0 = time.perf_counter()
                loss = rec_loss(model, batch)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                if step:  # the first of each is the warm-up
                    times[name].append(time.perf_counter() - t0)
    finally:
        unicrs_smollm.cpu_native_bf16 = original
        model.set_training(False)
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    for name, m in medians.items():
        print(f"{name}: median {m:.2f} s a step ({', '.join(f'{t:.2f}' for t in times[name])})")
    other = "float32" if chosen == "bfloat16" else "bfloat16"
    print(f"BENCH unicrs_train_step_chosen_over_other {medians[chosen] / medians[other]:.2f} x target <= 1.0")


if __name__ == "__main__":
    main()
