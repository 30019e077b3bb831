"""A small set (KBRD, BARCOR and UniCRS trained on ReDial) measured as shipped on ReDial's test split, beside the
published figures and people's. It trains nothing: it ranks and replies with the set's own models.

Every figure is defined once, in :mod:`crs_backends.neural.evaluation`; recipes are chosen on the validation
conversations (``crs-arena train report --split validation``), never here: this reads the test split once per set,
and records what it read in the set's ``manifest.json`` (``redial_test``), which the app's line for each small system
shows. A set already measured is not read again unless ``--again`` says so (and the manifest keeps both readings).

1. **Recall@1/10/50** over all of ReDial's 6,576 items, on every test record (3,341; 4,499 gold items), with R@10's
   95% interval resampling conversations, beside a popularity list counted from the real training records, the
   published figures (iEvaLM), and a reference that reads no text (the titles the conversation names, latest
   first, then popularity); each also on the gold items the conversation named before and on the new ones apart.
2. **Generation**, at the same test contexts: each model's reply (its movie slots kept, as the CRS papers score
   them) and the people's reply (the films it names masked): BLEU-2 against the people's reply and Distinct-2/3/4,
   beside the published UniCRS's Distinct from its one public reproduction (.550 / .936 / 1.211).
3. **Distinctness**: the mean top-10 Jaccard overlap between each pair of systems on 300 test contexts (the last
   record of each of the first 300 test dialogues), from the rankings of 1.

    python bench/crs_fidelity.py [--set DIR] [--systems kbrd,barcor,unicrs] [--again]
    python bench/crs_fidelity.py --set DIR --limit 60 --replies 12 --contexts 30   # the wiring: not recorded

``CRS_DATA_DIR`` names the data folder: the test records are its ``redial_eval/test_data_processed.jsonl`` (any
records in iEvaLM's layout), the popularity reference its training records. Headline lines (the script exits 0 when
one is missed): ``recall10_vs_published_min`` (each system's R@10 over its published R@10, the weakest; target >=
0.8) and ``top10_overlap_max`` (the most alike pair; target <= 0.5). A partial reading (``--limit``, ``--replies``)
says so and is not recorded. A full reading takes hours on two cores: it keeps what it has computed in
``<cache>/bench/fidelity/`` (per set and test file, by digest), so running the same command after an interruption
goes on where it stopped; the manifest lists each run's start and load. Skips (exit 0) without the research data.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from datetime import UTC

from crs_backends.neural.evaluation import (
    DISTINCT_NS,
    PUBLISHED_RECALL,
    PUBLISHED_UNICRS_DISTINCT,
    bleu,
    distinct_n,
    gold_items,
    interval_at_10,
    movie_masker,
    named_share,
    recall_at_k,
    recall_named_and_new,
    reference_rankings,
    top_k_overlap,
)
from crs_backends.neural.names import LABELS, SYSTEMS


def set_models(root: Path, systems) -> dict:
    """System -> its model loaded from the set at ``root``, as the app loads them: nothing trained."""
    from crs_backends.neural.kg_reader import load_kg
    from crs_backends.neural.names import model_class, set_dataset

    dataset = set_dataset(root)
    kg = load_kg(root / f"kg_{dataset}")
    return {system: model_class(system).load(root, dataset, kg) for system in systems}


def reading_work_dir(root: Path, test_file: Path, base: Path | None = None) -> Path:
    """Where a full reading keeps what it has computed, so that an interrupted one goes on (a reading of all 3,341
    records takes hours on two cores): one folder per set and test file under ``base`` (``--work``; default
    ``<cache>/bench/fidelity``), named by a digest of the set's weights and the records, so nothing computed for other
    weights or other records is ever read back."""
    import hashlib

    from crs_backends.neural.names import cache_dir

    digest = hashlib.sha256()
    for f in sorted(p for p in root.rglob("*") if p.is_file() and p.name != "manifest.json"):
        digest.update(f.relative_to(root).as_posix().encode())
        digest.update(f.read_bytes())
    digest.update(test_file.read_bytes())
    return (base or cache_dir() / "bench" / "fidelity") / f"{root.name}-{digest.hexdigest()[:16]}"


def note_run(work: Path, load: float) -> list[dict]:
    """Each start of a full reading (its time and the machine's load then), kept beside what it computes."""
    import json
    from datetime import datetime

    work.mkdir(parents=True, exist_ok=True)
    path = work / "runs.jsonl"
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M"), "load": round(load, 2)}) + "\n")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def resumable(path: Path | None, items: list, compute, chunk: int) -> tuple[list, list[float], int]:
    """``compute(batch)`` (one JSON value per item) over ``items`` chunk by chunk; with a ``path``, each chunk is
    appended there as it is done and what an earlier, interrupted run wrote is read back instead of computed again (a
    line the interruption cut is dropped). Returns the values, the seconds per item, and how many were read back."""
    import json

    done: list[dict] = []
    if path is not None and path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                done.append(json.loads(line))
            except json.JSONDecodeError:
                break
        done = done[: len(items)]
        path.write_text("".join(json.dumps(d) + "\n" for d in done), encoding="utf-8")
    resumed = len(done)
    for start in range(resumed, len(items), chunk):
        t0 = time.monotonic()
        values = compute(items[start : start + chunk])
        each = (time.monotonic() - t0) / max(1, len(values))
        lines = [{"value": v, "seconds": round(each, 4)} for v in values]
        done.extend(lines)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as f:
                f.write("".join(json.dumps(d) + "\n" for d in lines))
    return [d["value"] for d in done], [d["seconds"] for d in done], resumed


def recall_section(
    models: dict, data, test: list, work: Path | None
) -> tuple[dict, dict, dict, dict, dict, float, float]:
    """Per system its rankings (the top 50 of every test record), Recall and R@10's interval over the test
    conversations (None where ``--limit`` kept one); Recall of the references that read no text (popularity, named
    first); each one's Recall on the gold items the conversation named before and on the new ones apart; and the
    share of gold items named before."""
    gold = [gold_items(r, data.kg) for r in test]
    rankings: dict[str, list[list[int]]] = {}
    recall: dict = {}
    spent = 0.0
    for system, model in models.items():
        tops, seconds, resumed = resumable(
            work / f"{system}-rankings.jsonl" if work else None,
            test,
            lambda batch, model=model: [
                [e for e, _s in top] for top in model.recommend_many([r.conv_input() for r in batch], k=50)
            ],
            chunk=100,
        )
        rankings[system] = tops
        spent += sum(seconds)
        recall[system] = recall_at_k(zip(rankings[system], gold))
        again = f" ({resumed} read back from an interrupted run)" if resumed else ""
        print(f"{LABELS[system]}: ranked {len(test)} test records in {sum(seconds):.0f} s{again}")
    refs = reference_rankings(data.real_records, test, data.kg)
    references = {name: recall_at_k(zip(ranks, gold)) for name, ranks in refs.items()}
    by_gold = {s: recall_named_and_new(r, test, data.kg) for s, r in (rankings | refs).items()}
    groups = [r.dialog_id for r in test]
    intervals = {s: interval_at_10(rankings[s], gold, groups) for s in rankings}
    return rankings, recall, intervals, references, by_gold, named_share(test, data.kg), spent


def generation_section(models: dict, test: list, n: int, kg, work: Path | None) -> dict:
    """BLEU-2 and Distinct-2/3/4 of each ReDial-trained small model's reply at the first ``n`` test contexts (0: all),
    and of the people's replies there, as the CRS papers compute them: the generated text with its movie slots,
    the people's with the films they name masked (the record's targets and linked items of ``kg``)."""
    from crs_backends.neural.engine import MOVIE_SLOT
    from crs_backends.neural.evaluation import MOVIE

    records = test[:n] if n else test
    items = frozenset(kg.item_ids)
    films = [[n for n in (*r.rec, *r.entity) if kg.entity2id.get(n) in items] for r in records]
    people = [movie_masker(names)(r.resp) for r, names in zip(records, films)]
    out: dict = {"people": {"distinct": distinct_n(people), "replies": len(people)}}
    for system, model in models.items():
        texts, seconds, resumed = resumable(
            work / f"{system}-replies.jsonl" if work else None,
            records,
            lambda batch, model=model: [model.reply_text(r.conv_input()) for r in batch],
            chunk=1,  # each reply timed alone (its median is reported)
        )
        shown = [text.replace(model.placeholder, MOVIE).replace(MOVIE_SLOT, MOVIE) for text in texts]
        if resumed:
            print(f"{LABELS[system]}: {resumed} replies read back from an interrupted run")
        out[system] = {
            "bleu2": bleu(shown, people),
            # the small BARCOR writes lower case (MiniLM's vocabulary is uncased): BLEU-2 with both sides lower-cased
            # says how much of its gap is case alone
            "bleu2_uncased": bleu([t.lower() for t in shown], [t.lower() for t in people]),
            "distinct": distinct_n(shown),
            "replies": len(shown),
            "median_s": statistics.median(seconds) if seconds else 0.0,
            "seconds": sum(seconds),
            "samples": shown[:3],
        }
    return out


def record(root: Path, reading: dict) -> None:
    """The reading into the set's manifest (``redial_test``: the latest, what the app's line shows;
    ``redial_test_readings``: every reading, so a second one is never hidden)."""
    from crs_backends.neural.checkpoints import read_manifest, write_manifest

    earlier = read_manifest(root).get("redial_test_readings") or []
    write_manifest(root, redial_test=reading, redial_test_readings=[*earlier, reading])
    print(f"figures written to {root / 'manifest.json'}")


def reading(
    recall, references, by_gold, overlap, generated, people, n_test: int, seconds: float, runs: list, intervals
) -> dict:
    """What one full reading of the test split measured, as the manifest keeps it."""
    from datetime import datetime

    def at(r) -> dict:
        return {str(k): round(v, 4) for k, v in r.at.items()}

    return {
        "command": " ".join(["python", *sys.argv]),
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": f"{os.cpu_count()} cores, load average "
        + ", ".join(f"{r['load']:.1f}" for r in runs)
        + (" at the start of each run" if len(runs) > 1 else " at start"),
        "runs": [r["date"] for r in runs],
        "seconds": round(seconds),  # ranking and replying, summed over the runs the reading took
        "test_records": n_test,
        "recall": {
            s: {
                **at(r),
                "records": n_test,
                **({"interval_10": [round(iv.low, 4), round(iv.high, 4)]} if (iv := intervals.get(s)) else {}),
            }
            for s, r in recall.items()
        },
        "references": {name: at(r) for name, r in references.items()},
        # each one's Recall on the gold items the conversation named before and on the new ones
        "recall_by_gold": {name: {part: at(r) for part, r in parts.items()} for name, parts in by_gold.items()},
        "published_recall": {s: list(PUBLISHED_RECALL[s]) for s in recall},
        "top10_overlap": {f"{a}/{b}": round(v, 4) for (a, b), v in overlap.items()},
        "generation": {
            s: {
                "bleu2": round(g["bleu2"], 4),
                "bleu2_uncased": round(g["bleu2_uncased"], 4),
                "distinct": {str(n): round(v, 3) for n, v in g["distinct"].items()},
                "replies": g["replies"],
                "median_s": round(g["median_s"], 3),
            }
            for s, g in generated.items()
        },
        "people_distinct": {str(n): round(v, 3) for n, v in people["distinct"].items()},
    }


def main() -> int:
    from catalog.catalog import data_dir
    from crs_backends.neural.checkpoints import read_manifest
    from crs_backends.neural.fidelity import held_back_inputs
    from crs_backends.neural.names import SHIPPED_SMALL_ROOT, set_dataset
    from crs_backends.neural.train_command import load_train_data, read_records_file

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", dest="root", type=Path, default=SHIPPED_SMALL_ROOT, help="the set (the shipped one)")
    parser.add_argument("--systems", default=None, help="which of the set's systems (all)")
    parser.add_argument("--limit", type=int, default=None, help="the first N test records (all 3,341): not recorded")
    parser.add_argument("--replies", type=int, default=None, help="test contexts the replies are generated at (all)")
    parser.add_argument("--contexts", type=int, default=300, help="test contexts for the top-10 overlap (300)")
    parser.add_argument("--again", action="store_true", help="read the test split again for a set already measured")
    parser.add_argument(
        "--work",
        type=Path,
        default=None,
        help="where an interrupted reading is kept (default <cache>/bench/fidelity): a folder that outlives this "
        "machine lets another one finish the reading",
    )
    args = parser.parse_args()
    root = Path(args.root)
    manifest = read_manifest(root) if (root / "manifest.json").exists() else {}
    if set_dataset(root) != "redial":
        print(f"{root}: not a set trained on ReDial (dataset {set_dataset(root) or 'unknown'}): nothing to measure")
        return 0
    systems = [s for s in (args.systems or ",".join(manifest.get("systems") or SYSTEMS)).split(",") if s]
    partial = bool(args.limit or args.replies)
    if manifest.get("redial_test") and not partial and not args.again:
        done = manifest["redial_test"]
        print(f"{root.name} was measured on {done.get('date')} ({done.get('command')}); --again reads it again")
        return 0
    started = time.monotonic()
    load = os.getloadavg()[0]
    print(f"machine: {os.cpu_count()} cores, load average {load:.1f} at start; set {root} ({manifest.get('version')})")
    base = data_dir()
    if base is None or not (base / "redial_eval" / "test_data_processed.jsonl").exists():
        print("research data not found (CRS_DATA_DIR or ../shared/data): skipped")
        return 0
    test_file = base / "redial_eval" / "test_data_processed.jsonl"
    test = read_records_file(test_file, args.limit or None)
    data = load_train_data(str(base / "redial"))  # its training records: the popularity reference
    # a full reading keeps what it computed, so an interrupted one goes on where it stopped (a partial one starts over)
    work = None if partial else reading_work_dir(root, test_file, args.work)
    runs = [] if work is None else note_run(work, load)
    if len(runs) > 1:
        print(f"going on with the reading begun {runs[0]['date']} ({work}; run {len(runs)})")
    ranking_models = set_models(root, systems)
    rankings, recall, intervals, references, by_gold, named, spent = recall_section(ranking_models, data, test, work)
    generated = generation_section(ranking_models, test, args.replies or 0, data.kg, work)
    contexts = args.contexts
    n_gold = next(iter(recall.values())).samples if recall else 0
    print(f"\nRecall over all items ({len(data.kg.item_ids)}), {len(test)} ReDial test records ({n_gold} gold items)")
    print(
        f"{'':<14} {'R@1':>6} {'R@10':>6} {'R@50':>6}   {'published R@1/10/50':>20}   {'R@10/published':>14}   "
        "R@10's 95% interval (resampling conversations)"
    )
    for system, r in recall.items():
        pub = PUBLISHED_RECALL[system]
        iv = intervals[system]
        print(
            f"{LABELS[system]:<14} {r.at[1]:>6.3f} {r.at[10]:>6.3f} {r.at[50]:>6.3f}   "
            f"{pub[0]:>6.3f} {pub[1]:>6.3f} {pub[2]:>6.3f}   {r.at[10] / pub[1]:>14.2f}   "
            + (
                f"{iv.low:.3f} to {iv.high:.3f} ({iv.low / pub[1]:.2f} to {iv.high / pub[1]:.2f} of published)"
                if iv
                else "none (fewer than two conversations)"
            )
        )
    for name in ("popularity", "named first"):
        r = references[name]
        print(f"{name:<14} {r.at[1]:>6.3f} {r.at[10]:>6.3f} {r.at[50]:>6.3f}")
    print(
        f"popularity: the items by how often the {len(data.real_records)} real training records recommend them; "
        f"named first: the titles the conversation names, then popularity ({named:.0%} of the "
        "gold items were named before)"
    )
    parts = next(iter(by_gold.values()))
    print(
        f"\nRecall on the gold items the conversation named before ({parts['named'].samples}) and on the new ones "
        f"({parts['new'].samples})"
    )
    print(f"{'':<14} {'named R@1':>9} {'R@10':>6} {'R@50':>6}   {'new R@1':>7} {'R@10':>6} {'R@50':>6}")
    for name, split in by_gold.items():
        seen, fresh = split["named"], split["new"]
        print(
            f"{LABELS.get(name, name):<14} {seen.at[1]:>9.3f} {seen.at[10]:>6.3f} {seen.at[50]:>6.3f}   "
            f"{fresh.at[1]:>7.3f} {fresh.at[10]:>6.3f} {fresh.at[50]:>6.3f}"
        )

    picked = {id(r) for r in held_back_inputs(test, contexts)}
    rows = [n for n, r in enumerate(test) if id(r) in picked]
    overlap = top_k_overlap({s: [rankings[s][n] for n in rows] for s in recall}, k=10)
    if overlap:
        print(f"\nTop-10 overlap (mean Jaccard) on {len(rows)} test contexts, one per dialogue")
        for (a, b), value in overlap.items():
            print(f"  {LABELS[a]} / {LABELS[b]}: {value:.3f}")

    people = generated.pop("people")
    print(
        f"\nGeneration at {people['replies']} test contexts, movie names masked: BLEU-2 against the people's reply, "
        "Distinct-n as UniCRS's script computes it"
    )
    head = f"{'':<30} {'BLEU-2':>6} {'uncased':>7} " + " ".join(f"{f'Dist-{n}':>6}" for n in DISTINCT_NS)
    print(head + f" {'s/turn':>7}")
    for system, g in generated.items():
        print(
            f"{LABELS[system] + ' (small, ReDial)':<30} {g['bleu2']:>6.3f} {g['bleu2_uncased']:>7.3f} "
            + " ".join(f"{g['distinct'][n]:>6.3f}" for n in DISTINCT_NS)
            + f" {g['median_s']:>7.2f}"
        )
    print(f"{'people (ReDial)':<30} {'':>14} " + " ".join(f"{people['distinct'][n]:>6.3f}" for n in DISTINCT_NS))
    print(
        f"{'UniCRS published (issue #4)':<30} {'':>14} "
        + " ".join(f"{PUBLISHED_UNICRS_DISTINCT[n]:>6.3f}" for n in DISTINCT_NS)
        + "   (ReDial's whole test set: another count of replies)"
    )
    for system, g in generated.items():
        for text in g["samples"]:
            print(f"  {LABELS[system]} says: {' '.join(text.split())}")

    note = f" (partial: {len(test)} records, not recorded)" if partial else ""
    print(f"\nseconds: {time.monotonic() - started:.0f}")
    if not partial:
        computed = spent + sum(g["seconds"] for g in generated.values())
        record(
            root, reading(recall, references, by_gold, overlap, generated, people, len(test), computed, runs, intervals)
        )
        if work is not None:  # recorded: a later --again reads the split afresh
            shutil.rmtree(work, ignore_errors=True)
    if recall:
        worst = min(r.at[10] / PUBLISHED_RECALL[s][1] for s, r in recall.items())
        print(f"BENCH recall10_vs_published_min {worst:.2f} ratio target >= 0.8{note}")
    if overlap:
        print(f"BENCH top10_overlap_max {max(overlap.values()):.2f} jaccard target <= 0.5{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
