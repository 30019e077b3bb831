"""The small KBRD, BARCOR and UniCRS measured on ReDial's test split, beside the published figures and people's.

Every figure is defined once, in :mod:`crs_backends.neural.evaluation`; recipes are chosen on the validation
conversations (``crs-arena train report --split validation``), never here: this reports the test split once.

1. **Recall@1/10/50** over all of ReDial's 6,576 items, on every test record (3,341; 4,499 gold items): KBRD's small
   configuration trained on ReDial (:func:`crs_backends.neural.small.train_on_dataset`: its training conversations,
   the validation tenth held out, and synthetic dialogues over ReDial's catalog; cached), BARCOR's and UniCRS's
   shipped text recommenders ranking ReDial's items; beside a popularity list counted in the same run from the
   real training records, the published figures (iEvaLM), and a reference that reads no text (the titles the
   conversation names, latest first, then popularity: ReDial's gold lists often repeat a named title).
2. **Generation**, at the same test contexts: the reply each small version shows in the app (the shipped set, the
   bundled catalog) and the people's reply there: BLEU-2 against the people's reply and Distinct-2/3/4, movie names
   masked, beside the published UniCRS's Distinct from its one public reproduction (.550 / .936 / 1.211; its count
   of responses differs from ours, and Distinct-n grows with it).
3. **Distinctness**: the mean top-10 Jaccard overlap between each pair of small systems on 300 test contexts (the
   last record of each of the first 300 test dialogues), from the rankings of 1.

    python bench/crs_fidelity.py [--systems kbrd,barcor,unicrs] [--limit N] [--replies N] [--contexts 300]
    python bench/crs_fidelity.py --quick    # minutes: the wiring on a few records, KBRD trained for a few steps

Headline lines (targets of issue #40; the script exits 0 when one is missed): ``recall10_vs_published_min`` (each
system's R@10 over its published R@10, the weakest; target >= 0.8) and ``top10_overlap_max`` (the most alike
pair; target <= 0.5). ``--quick`` figures check the wiring only: its lines say so. Skips (exit 0) without the
research data.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crs_backends.neural.evaluation import (
    DISTINCT_NS,
    PUBLISHED_RECALL,
    PUBLISHED_UNICRS_DISTINCT,
    bleu,
    distinct_n,
    gold_items,
    movie_masker,
    recall_at_k,
    top_k_overlap,
)
from crs_backends.neural.names import LABELS, SYSTEMS

# --quick: enough to run every path, nothing to read figures from. The text recommenders rank the quick records' gold
# items and the most popular ones only (``items``): encoding all 6,576 of ReDial's item records takes minutes once
QUICK = {"limit": 60, "replies": 12, "contexts": 30, "kbrd": {"kbrd": {"epochs": 1, "max_steps": 40}}, "items": 500}


class TextRanked:
    """A small set's text recommender (BARCOR's, UniCRS's) ranking a KG's items: what their recall is read from."""

    def __init__(self, kg, text_rec):
        self.kg, self.text_rec = kg, text_rec

    def recommend(self, inp, k: int = 50):
        return self.text_rec.recommend(self.kg, inp, k)


def rankers(systems, base: Path, quick: bool, models: Path | None, test: list):
    """(system -> what ranks ReDial's items, the training data). KBRD: its small configuration trained on ReDial;
    BARCOR and UniCRS: the shipped set's text recommenders, their item rows read from ``id2info.json`` (``quick``:
    the ``test`` records' gold items and the most popular others only)."""
    from crs_backends.neural import text_rec
    from crs_backends.neural.names import TEXT_RANKED, model_class
    from crs_backends.neural.small import ensure_small_models, train_on_dataset
    from crs_backends.neural.train_command import load_train_data

    trained = [s for s in systems if s not in TEXT_RANKED]
    if trained:
        extra = {"dialogues": 0, "settings": QUICK["kbrd"]} if quick else {}
        models, data = train_on_dataset(
            base / "redial", trained, models, log=lambda line: print(line, flush=True), **extra
        )
        print(f"ReDial-trained small configurations: {models}")
    else:
        data = load_train_data(str(base / "redial"))
    print(data.describe())
    shipped = ensure_small_models(show_bar=False)
    _real, info, _source = text_rec.real_records(base)
    item_kg = data.kg
    if quick:
        from crs_backends.neural.fidelity import popularity_ranking

        named = [g for r in test for g in gold_items(r, data.kg)]
        popular = popularity_ranking(data.real_records, types.SimpleNamespace(kg=data.kg))
        item_kg = dataclasses.replace(data.kg, item_ids=list(dict.fromkeys(named + popular))[: QUICK["items"]])
    out = {}
    for system in systems:
        if system in TEXT_RANKED:
            head = text_rec.TextRecommender.load(text_rec.textrec_dir(shipped, system, "bundled"))
            ranker = TextRanked(item_kg, head)
            t0 = time.monotonic()
            head.prepare(item_kg, info, disk=text_rec.encodings_dir())
            seconds = time.monotonic() - t0
            print(f"{LABELS[system]}: item rows of {len(item_kg.item_ids)} ReDial films in {seconds:.0f} s")
            out[system] = ranker
        else:
            out[system] = model_class(system).load(models, "redial", data.kg)
    return out, data


def recall_section(models: dict, data, test: list) -> tuple[dict, dict, dict, float]:
    """Per system its rankings (the top 50 of every test record) and Recall; Recall of the references that read no
    text (popularity, named first) and the share of gold items the conversation named before."""
    from crs_backends.neural.fidelity import named_first_ranking, named_share, popularity_ranking

    gold = [gold_items(r, data.kg) for r in test]
    rankings: dict[str, list[list[int]]] = {}
    recall: dict = {}
    for system, model in models.items():
        t0 = time.monotonic()
        rankings[system] = [[e for e, _s in model.recommend(r.conv_input(), k=50)] for r in test]
        recall[system] = recall_at_k(zip(rankings[system], gold))
        print(f"{LABELS[system]}: ranked {len(test)} test records in {time.monotonic() - t0:.0f} s")
    holder = next(iter(models.values()))  # what the references read the KG from (any model: one KG)
    popular = popularity_ranking(data.real_records, holder)
    references = {
        "popularity": recall_at_k((popular, g) for g in gold),
        "named first": recall_at_k(zip((named_first_ranking(r, popular, holder) for r in test), gold)),
    }
    return rankings, recall, references, named_share(test, holder)


def generation_section(systems, test: list, n: int, kg) -> dict:
    """BLEU-2 and Distinct-2/3/4 of the reply each small version shows at the first ``n`` test contexts (0: all), and
    of the people's replies there (the films they name are the record's targets and linked items of ``kg``)."""
    from catalog.catalog import get_catalog
    from crs_backends.neural.fidelity import open_small
    from crs_backends.neural.small import ensure_small_models
    from storage.records import Conversation, Turn

    records = test[:n] if n else test
    catalog = get_catalog("bundled")
    catalog_masker = movie_masker(item.name for item in catalog.items)  # what the small versions name
    items = frozenset(kg.item_ids)
    films = [[n for n in (*r.rec, *r.entity) if kg.entity2id.get(n) in items] for r in records]
    people = [movie_masker(names)(r.resp) for r, names in zip(records, films)]
    out: dict = {"people": {"distinct": distinct_n(people), "replies": len(people)}}
    shipped = ensure_small_models(show_bar=False)
    for system in systems:
        crs = open_small(system, shipped, catalog)
        shown, seconds = [], []
        for r in records:
            turns = [Turn(role="user" if k % 2 == 0 else "system", text=t) for k, t in enumerate(r.context) if t]
            t0 = time.monotonic()
            turn = crs.respond(Conversation(system_id=system, turns=turns))
            seconds.append(time.monotonic() - t0)
            shown.append(movie_masker(i.title for i in turn.items)(catalog_masker(turn.text)))
        out[system] = {
            "bleu2": bleu(shown, people),
            "distinct": distinct_n(shown),
            "replies": len(shown),
            "median_s": statistics.median(seconds) if seconds else 0.0,
            "samples": shown[:2],
        }
    return out


def main() -> int:
    from catalog.catalog import data_dir
    from crs_backends.neural.fidelity import held_back_inputs
    from crs_backends.neural.train_command import read_records_file

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--limit", type=int, default=None, help="test records (default: all 3,341)")
    parser.add_argument("--replies", type=int, default=None, help="test contexts the replies are generated at (all)")
    parser.add_argument("--contexts", type=int, default=None, help="test contexts for the top-10 overlap (300)")
    parser.add_argument("--models", type=Path, default=None, help="where the ReDial-trained KBRD lives (the cache)")
    parser.add_argument("--quick", action="store_true", help="a few records, KBRD trained for a few steps: minutes")
    args = parser.parse_args()
    systems = [s for s in args.systems.split(",") if s]
    limit = args.limit if args.limit is not None else (QUICK["limit"] if args.quick else 0)
    replies = args.replies if args.replies is not None else (QUICK["replies"] if args.quick else 0)
    contexts = args.contexts if args.contexts is not None else (QUICK["contexts"] if args.quick else 300)
    started = time.monotonic()
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    base = data_dir()
    if base is None or not (base / "redial" / "entity2id.json").exists():
        print("research data not found (CRS_DATA_DIR or ../shared/data): skipped")
        return 0
    test = read_records_file(base / "redial_eval" / "test_data_processed.jsonl", limit or None)
    with tempfile.TemporaryDirectory(prefix="crs-fidelity-quick-") as scratch:
        models = args.models or (Path(scratch) if args.quick else None)  # a quick KBRD never lands in the cache
        ranking_models, data = rankers(systems, base, args.quick, models, test)
        rankings, recall, references, named = recall_section(ranking_models, data, test)
    n_gold = next(iter(recall.values())).samples if recall else 0
    over = f"{QUICK['items']} of ReDial's items for the text recommenders (--quick)" if args.quick else "all items"
    print(f"\nRecall over {over} ({len(data.kg.item_ids)}), {len(test)} ReDial test records ({n_gold} gold items)")
    print(f"{'':<14} {'R@1':>6} {'R@10':>6} {'R@50':>6}   {'published R@1/10/50':>20}   {'R@10/published':>14}")
    for system, r in recall.items():
        pub = PUBLISHED_RECALL[system]
        print(
            f"{LABELS[system]:<14} {r.at[1]:>6.3f} {r.at[10]:>6.3f} {r.at[50]:>6.3f}   "
            f"{pub[0]:>6.3f} {pub[1]:>6.3f} {pub[2]:>6.3f}   {r.at[10] / pub[1]:>14.2f}"
        )
    for name in ("popularity", "named first"):
        r = references[name]
        print(f"{name:<14} {r.at[1]:>6.3f} {r.at[10]:>6.3f} {r.at[50]:>6.3f}")
    print(
        f"popularity: the items by how often the {len(data.real_records)} real training records recommend them; "
        f"named first: the titles the conversation names, then popularity ({named:.0%} of the "
        "gold items were named before)"
    )

    picked = {id(r) for r in held_back_inputs(test, contexts)}
    rows = [n for n, r in enumerate(test) if id(r) in picked]
    overlap = top_k_overlap({s: [rankings[s][n] for n in rows] for s in recall}, k=10)
    if overlap:
        print(f"\nTop-10 overlap (mean Jaccard) on {len(rows)} test contexts, one per dialogue")
        for (a, b), value in overlap.items():
            print(f"  {LABELS[a]} / {LABELS[b]}: {value:.3f}")

    generated = generation_section(systems, test, replies, data.kg)
    people = generated.pop("people")
    print(
        f"\nGeneration at {people['replies']} test contexts, movie names masked: BLEU-2 against the people's reply, "
        "Distinct-n as UniCRS's script computes it"
    )
    print(f"{'':<30} {'BLEU-2':>6} " + " ".join(f"{f'Dist-{n}':>6}" for n in DISTINCT_NS) + f" {'s/turn':>7}")
    for system, g in generated.items():
        print(
            f"{LABELS[system] + ' (small)':<30} {g['bleu2']:>6.3f} "
            + " ".join(f"{g['distinct'][n]:>6.3f}" for n in DISTINCT_NS)
            + f" {g['median_s']:>7.2f}"
        )
    print(f"{'people (ReDial)':<30} {'':>6} " + " ".join(f"{people['distinct'][n]:>6.3f}" for n in DISTINCT_NS))
    print(
        f"{'UniCRS published (issue #4)':<30} {'':>6} "
        + " ".join(f"{PUBLISHED_UNICRS_DISTINCT[n]:>6.3f}" for n in DISTINCT_NS)
        + "   (ReDial's whole test set: another count of replies)"
    )
    for system, g in generated.items():
        for text in g["samples"]:
            print(f"  {LABELS[system]} says: {' '.join(text.split())}")

    note = (
        f" (--quick: {len(test)} records, KBRD {QUICK['kbrd']['kbrd']['max_steps']} steps, text recommenders over "
        f"{QUICK['items']} items; not a measurement)"
    )
    note = note if args.quick else ""
    print(f"\nseconds: {time.monotonic() - started:.0f}")
    if recall:
        worst = min(r.at[10] / PUBLISHED_RECALL[s][1] for s, r in recall.items())
        print(f"BENCH recall10_vs_published_min {worst:.2f} ratio target >= 0.8{note}")
    if overlap:
        print(f"BENCH top10_overlap_max {max(overlap.values()):.2f} jaccard target <= 0.5{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
