"""The small BARCOR's reply decoder at several training budgets, each read on ReDial's validation tenth: where its
budget is chosen (#72), never on the test split.

Each budget trains a fresh decoder exactly as the set's build trains it (:func:`crs_backends.neural.barcor_training.
train`'s first stage: the recipe's settings and seed, the frozen MiniLM's states of ReDial's training contexts, the
people's replies as targets) except for its number of steps, in its own folder (resumable: run the same command
again after an interruption). Each is then read on the validation conversations, which training never sees:

- the loss (mean token cross-entropy) on the people's replies there, all of them;
- BLEU-2 (cased and lower-cased: MiniLM's vocabulary is uncased) of its greedy reply against the people's, the films
  the people named masked as the CRS papers mask them, and Distinct-2/3/4, at ``--contexts`` validation contexts;

beside the people's own Distinct there. The budget to adopt is the one with the lowest validation loss (BLEU-2 on a
few hundred replies moves by thousandths between budgets: too little to choose by); the script prints the readings,
the choice is made and recorded in :mod:`crs_backends.neural.recipes`. A budget above the recipe's epochs is capped
by them, as the build caps it.

    python bench/barcor_reply_budget.py [--steps 250,500,1000] [--contexts 300] [--threads 1]

``CRS_DATA_DIR`` names the data folder (``redial/``); skips (exit 0) without it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


@dataclass
class Reading:
    """One budget's decoder read on the validation tenth."""

    steps: int
    loss: float
    bleu2: float
    bleu2_uncased: float
    distinct: dict[int, float]
    people_distinct: dict[int, float]
    seconds: float
    samples: list[str]


def main() -> int:
    import torch

    from catalog.catalog import data_dir
    from crs_backends.neural.barcor import BARCOR
    from crs_backends.neural.barcor_training import conv_budget, conv_examples, encode_contexts, small_conv_loss
    from crs_backends.neural.engine import MOVIE_SLOT, TrainConfig
    from crs_backends.neural.evaluation import MOVIE, bleu, distinct_n, movie_masker
    from crs_backends.neural.names import SMALL_SEED, cache_dir
    from crs_backends.neural.recipes import dataset_settings
    from crs_backends.neural.train_command import load_train_data, record_texts
    from crs_backends.neural.training import Stage, run_stages

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", default="250,500,1000", help="the budgets, in optimizer steps")
    parser.add_argument("--contexts", type=int, default=300, help="validation contexts the replies are read at")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    base = data_dir()
    if base is None or not (base / "redial" / "entity2id.json").exists():
        print("research data not found (CRS_DATA_DIR or ../shared/data): skipped")
        return 0
    data = load_train_data(str(base / "redial"))
    settings = dataset_settings("barcor")
    print(f"{data.describe()}; recipe {settings}")
    validation = [r for r in data.validation if r.resp]
    # the frozen encoder's states, the same for every budget's fresh decoder: read once
    encoder_of = BARCOR.create(data.kg, size="small", seed=SMALL_SEED)

    def encoded(records) -> tuple[list, list[int]]:
        raw = conv_examples(encoder_of, records)
        keys = sorted({tuple(ids) for ids, _ in raw})
        states = {k: e[0] for k, e in zip(keys, encode_contexts(encoder_of, [list(k) for k in keys], layers=(-1,)))}
        return [(states[tuple(ids)], target) for ids, target in raw], [len(ids) + len(t) for ids, t in raw]

    t0 = time.monotonic()
    examples, lengths = encoded(data.records)
    vexamples, _ = encoded(validation)
    print(
        f"encoded {len(examples)} training and {len(vexamples)} validation replies' contexts in "
        f"{time.monotonic() - t0:.0f} s"
    )
    readings = []
    for steps in [int(s) for s in args.steps.split(",") if s]:
        out = cache_dir() / "bench" / "barcor_budget" / f"conv-{steps}"
        config = TrainConfig(
            size="small", seed=SMALL_SEED, resume=True, progress=False, **{**settings, "max_steps": steps}
        )
        model = BARCOR.create(data.kg, record_texts(data.records), size="small", seed=config.seed)
        t0 = time.monotonic()
        # as the build budgets it (barcor_training.train): the recipe's epochs, capped by the steps
        steps = conv_budget(len(examples), config)
        stage = Stage(
            "conv",
            examples,
            partial(small_conv_loss, model),
            [model.conv_model],
            steps,
            config.reply_rate,
            lengths=lengths,
        )
        run_stages("barcor", "redial", out, [stage], config)
        trained = time.monotonic() - t0
        model.conv_model.eval()
        # the loss on every validation reply
        with torch.no_grad():
            losses = [float(small_conv_loss(model, vexamples[i : i + 64])) for i in range(0, len(vexamples), 64)]
        loss = statistics.fmean(losses)
        # greedy replies at the first contexts
        shown, people = [], []
        for r in validation[: args.contexts]:
            text = model.reply_text(r.conv_input())
            shown.append(text.replace(model.placeholder, MOVIE).replace(MOVIE_SLOT, MOVIE))
            names = [n for n in (*r.rec, *r.entity) if data.kg.entity2id.get(n) in set(data.kg.item_ids)]
            people.append(movie_masker(names)(r.resp))
        reading = Reading(
            steps,
            loss,
            bleu(shown, people),
            bleu([t.lower() for t in shown], [t.lower() for t in people]),
            distinct_n(shown),
            distinct_n(people),
            trained,
            shown[:3],
        )
        readings.append(reading)
        print(
            f"{steps:>5} steps: validation loss {loss:.3f} ({len(vexamples)} replies); at {len(shown)} contexts BLEU-2 "
            f"{reading.bleu2:.4f} (uncased {reading.bleu2_uncased:.4f}), Distinct-2/3/4 "
            + " / ".join(f"{v:.3f}" for v in reading.distinct.values())
            + f"; {trained:.0f} s to train (or read back)",
            flush=True,
        )
        for text in reading.samples:
            print(f"    says: {' '.join(text.split())}")
    if readings:
        print(
            "people's Distinct-2/3/4 at those contexts: "
            + " / ".join(f"{v:.3f}" for v in readings[0].people_distinct.values())
        )
        best = min(readings, key=lambda r: r.loss)
        print(f"BENCH barcor_reply_best_budget_steps {best.steps} steps (lowest validation loss {best.loss:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
