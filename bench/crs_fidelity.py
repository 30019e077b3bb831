"""Do the small local KBRD, BARCOR and UniCRS behave like their originals,
and does ChatCRS offline name only real items?

In one run, per system:

1. the small local versions the app uses (bundled catalog, built by ``make run``): distinct top-3 lists over
   300 held-back synthetic dialogues (another seed than the training one), and over 300 of the replies they
   show when they do not list (generated text, slots filled from the ranking and the catalog): words repeated
   back to back, facts that contradict the catalog, empty slots; and the share of the top 10 in the genre a
   conversation asks for alone (one per catalog genre);
2. on ReDial: KBRD's small configuration trained on ReDial (the ``redial_eval/valid`` records, the
   ``redial_train_partial`` conversations and synthetic dialogues over ReDial's own catalog,
   :func:`crs_backends.neural.small.train_on_dataset`; cached, as ``bench/crs_quality.py``), and the shipped BARCOR's
   and UniCRS's text recommenders ranking ReDial's films:
   Recall@1/10/50 on the first ``--limit`` ReDial test records beside a popularity list measured in the same
   run (items by how often the training records recommend them) and the published figures, and distinct top-3
   lists over 300 ReDial test dialogues; with a reference row that reads no text: the titles the conversation
   already names, then the popularity list (ReDial's gold lists often repeat a named title, and Recall@k counts it);
3. ChatCRS on the embedded model: titles outside its candidate list over the seeded batch of
   :data:`crs_backends.chatcrs_check.SCRIPTS`.

    python bench/crs_fidelity.py [--limit 1000] [--systems kbrd,barcor,unicrs] [--no-chatcrs] [--no-redial]

Headline lines (targets from the issue; the script exits 0 when one is missed):
``distinct_top3_ratio_min``, ``genre_top10_min``, ``recall10_over_popularity_min``, ``reply_fact_contradictions``,
``reply_stutters``, ``reply_made_up_words``, ``chatcrs_invented_titles``, ``reply_lm_nll_gap_max`` (each small
version's mean per-token NLL of its shown replies under SmolLM2-135M at held-back ReDial turns, minus the people's
replies there; the worst system).
"""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crs_backends.neural.names import LABELS, SYSTEMS
from crs_backends.neural.train_command import PUBLISHED_RECALL


def bundled_checks(systems, n: int) -> dict:
    from crs_backends.neural.fidelity import bundled_checks as checks
    from crs_backends.neural.small import ensure_small_models

    root = ensure_small_models(show_bar=False)
    print(f"small local versions: {root}")
    return checks(root, systems, n)


class TextRanked:
    """A small set's text recommender (BARCOR's, UniCRS's) ranking ReDial's films: what their recall is read from."""

    def __init__(self, system: str, kg, text_rec):
        self.system, self.kg, self.text_rec = system, kg, text_rec

    def recommend(self, inp, k: int = 50):
        return self.text_rec.recommend(self.kg, inp, k)


def redial_checks(systems, limit: int, n: int) -> tuple[dict, dict | None]:
    """Per system its figures, and the reference row that reads no text (the same for every system: one KG).

    KBRD (its parts trained from scratch, as published) is trained on ReDial in its small configuration; BARCOR and
    UniCRS rank with the shipped set's text recommender, whose head was trained on ReDial's real conversations, over
    ReDial's 6,576 films (their item rows read from ``id2info.json``). The popularity list counts the items of the
    real conversations the text recommenders train on (``redial/valid_data.jsonl`` and ``redial_train_partial/``)."""
    from catalog.catalog import data_dir
    from crs_backends.neural import text_rec
    from crs_backends.neural.fidelity import (
        distinct_top_ratio,
        held_back_inputs,
        named_first_ranking,
        named_share,
        popularity_ranking,
        recall_of_ranking,
    )
    from crs_backends.neural.kg_reader import load_kg
    from crs_backends.neural.names import TEXT_RANKED, model_class
    from crs_backends.neural.small import ensure_small_models, train_on_dataset
    from crs_backends.neural.train_command import read_records_file, recall_at_k

    base = data_dir()
    if base is None or not (base / "redial" / "entity2id.json").exists():
        print("research data not found (CRS_DATA_DIR or ../shared/data): ReDial checks skipped")
        return {}, None
    trained = [s for s in systems if s not in TEXT_RANKED]
    models = data = None
    if trained:
        models, data = train_on_dataset(base / "redial", trained, log=lambda line: print(line, flush=True))
        print(f"ReDial-trained small configurations: {models}")
    kg = data.kg if data is not None else load_kg(base / "redial")
    real, info, _source = text_rec.real_records(base)
    real = [r for r in real if not text_rec.held_back(r.dialog_id)]
    shipped = ensure_small_models(show_bar=False)
    test = read_records_file(base / "redial_eval" / "test_data_processed.jsonl", limit or None)
    out: dict = {}
    reference = None
    for system in systems:
        if system in TEXT_RANKED:
            model = TextRanked(
                system, kg, text_rec.TextRecommender.load(text_rec.textrec_dir(shipped, system, "bundled"))
            )
            model.text_rec.prepare(kg, info)
        else:
            model = model_class(system).load(models, "redial", kg)
        recall, used, samples = recall_at_k(model, test)
        popular_list = popularity_ranking(real, model)
        popular = recall_of_ranking(popular_list, test, model)
        ratio = distinct_top_ratio(model, [r.conv_input() for r in held_back_inputs(test, n)])
        out[system] = {"recall": recall, "popularity": popular, "distinct": ratio, "records": used, "samples": samples}
        if reference is None:  # measured once
            reference = {
                "recall": recall_of_ranking(
                    partial(named_first_ranking, popular=popular_list, model=model), test, model
                ),
                "named_share": named_share(test, model),
            }
    return out, reference


def fluency_checks(systems, n: int) -> dict[str, float]:
    """Mean per-token NLL under SmolLM2-135M (the GGUF the embedded model runs) of each small version's shown reply
    and of the people's reply, at the recommender turns of ``n`` real ReDial conversations held back from training."""
    from catalog.catalog import data_dir
    from crs_backends.neural import text_rec
    from crs_backends.neural.fidelity import reply_fluency
    from crs_backends.neural.small import ensure_small_models
    from llm_clients.embedded import smollm2_path

    real, _info, _source = text_rec.real_records(data_dir())
    held = [r for r in real if text_rec.held_back(r.dialog_id) and r.resp.strip() and any(r.context)]
    picked = list({r.dialog_id: r for r in held}.values())[:n]  # one turn (the last) per dialogue
    if not picked:
        print("research data not found: fluency checks skipped")
        return {}
    return reply_fluency(systems, ensure_small_models(show_bar=False), picked, str(smollm2_path()))


def chatcrs_checks() -> dict:
    from catalog.catalog import get_catalog
    from crs_backends.chatcrs import ChatCRS
    from crs_backends.chatcrs_check import run_batch, summary
    from llm_clients.base import LLMClient
    from llm_clients.embedded import get_embedded_model

    catalog = get_catalog("bundled")
    crs = ChatCRS(LLMClient(get_embedded_model(), role="crs", db_path=None), catalog)
    crs.warm_up()
    return summary(run_batch(crs, catalog))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--limit", type=int, default=1000, help="ReDial test records for recall (0: all 3,341)")
    parser.add_argument("--dialogues", type=int, default=300, help="held-back dialogues / replies per system")
    parser.add_argument("--no-redial", action="store_true", help="skip the ReDial-trained configurations")
    parser.add_argument("--no-chatcrs", action="store_true", help="skip ChatCRS on the embedded model")
    parser.add_argument("--no-fluency", action="store_true", help="skip the replies' likelihood under SmolLM2")
    args = parser.parse_args()
    systems = [s for s in args.systems.split(",") if s]
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")

    bundled = bundled_checks(systems, args.dialogues)
    print("\nsmall local versions (bundled catalog), held-back synthetic dialogues")
    print(
        f"{'system':<8} {'distinct top-3':>14} {'replies':>7} {'stutters':>8} {'contradictions':>14} "
        f"{'empty slots':>11} {'made-up words':>13} {'hit@10':>6} {'genre top-10':>12} {'texts':>5}"
    )
    for system, r in bundled.items():
        c = r.check
        print(
            f"{LABELS[system]:<8} {r.distinct:>14.2f} {c.replies:>7} {len(c.stutters):>8} "
            f"{len(c.contradictions):>14} {len(c.empty_slots):>11} {len(c.unknown_words):>13} {r.hit10:>6.2f} "
            f"{r.genre_share:>12.2f} {c.distinct_generated:>5}"
        )
    print("texts: different replies the reply model generated for those dialogues (slots unfilled)")
    if bundled:
        print(
            "genre top-10: the share of the top 10 in the genre a conversation asks for alone, over the catalog's "
            "genres; weakest: "
            + "; ".join(
                f"{LABELS[s]} " + ", ".join(f"{g} {v:.1f}" for g, v in sorted(r.genres.items(), key=lambda x: x[1])[:3])
                for s, r in bundled.items()
            )
        )
    for system, r in bundled.items():
        for line in r.check.samples[:3]:
            print(f"  {LABELS[system]} says: {line}")
        for line in (r.check.stutters + r.check.contradictions + r.check.empty_slots + r.check.unknown_words)[:3]:
            print(f"  {LABELS[system]} problem: {line}")

    redial, named = ({}, None) if args.no_redial else redial_checks(systems, args.limit, args.dialogues)
    if redial:
        print(f"\nsmall configurations trained on ReDial, first {args.limit or 'all'} test records")
        print(
            f"{'system':<8} {'R@1':>6} {'R@10':>6} {'R@50':>6}   {'popularity R@1/10/50':>21}   "
            f"{'published R@1/10/50':>20}   {'R@10/pop':>8} {'distinct':>8}"
        )
        for system, r in redial.items():
            rec, pop, pub = r["recall"], r["popularity"], PUBLISHED_RECALL[system]
            over = rec[10] / pop[10] if pop[10] else float("inf")
            print(
                f"{LABELS[system]:<8} {rec[1]:>6.3f} {rec[10]:>6.3f} {rec[50]:>6.3f}   "
                f"{pop[1]:>6.3f} {pop[10]:>6.3f} {pop[50]:>6.3f}   {pub[0]:>6.3f} {pub[1]:>6.3f} {pub[2]:>6.3f}   "
                f"{over:>8.2f} {r['distinct']:>8.2f}"
            )
        if named:
            rec, pop = named["recall"], next(iter(redial.values()))["popularity"]
            print(
                f"reference: the titles the conversation names (latest first), then popularity: R@1/10/50 "
                f"{rec[1]:.3f} / {rec[10]:.3f} / {rec[50]:.3f} ({rec[10] / pop[10]:.2f}x popularity); "
                f"{named['named_share']:.0%} of the gold items are titles the conversation already named"
            )

    fluency = {} if args.no_fluency else fluency_checks(systems, args.dialogues)
    if fluency:
        print(
            f"\nreply fluency: mean per-token NLL under SmolLM2-135M, {args.dialogues} held-back ReDial turns: "
            + ", ".join(f"{LABELS.get(w, 'people')} {v:.2f}" for w, v in fluency.items())
        )

    chat = None if args.no_chatcrs else chatcrs_checks()
    if chat:
        print(
            f"\nChatCRS (embedded SmolLM2-135M, constrained): {chat['turns']} turns, {chat['invented_titles']} "
            f"invented titles, {chat['fact_errors']} fact errors, median {chat['median_s']:.2f} s per turn"
        )

    print()
    if bundled:
        print(f"BENCH distinct_top3_ratio_min {min(r.distinct for r in bundled.values()):.2f} ratio target >= 0.8")
        print(f"BENCH genre_top10_min {min(r.genre_share for r in bundled.values()):.2f} share target >= 0.8")
    if redial:
        over = min(r["recall"][10] / r["popularity"][10] if r["popularity"][10] else 0.0 for r in redial.values())
        print(f"BENCH recall10_over_popularity_min {over:.2f} x target >= 2.0")
    if bundled:
        print(
            f"BENCH reply_fact_contradictions {sum(len(r.check.contradictions) for r in bundled.values())} "
            "count target <= 0"
        )
        print(f"BENCH reply_stutters {sum(len(r.check.stutters) for r in bundled.values())} count target <= 0")
        print(
            f"BENCH reply_made_up_words {sum(len(r.check.unknown_words) for r in bundled.values())} count target <= 0"
        )
    if chat:
        print(f"BENCH chatcrs_invented_titles {chat['invented_titles']} count target <= 0")
    if fluency:
        gap = max(v - fluency["human"] for w, v in fluency.items() if w != "human")
        print(f"BENCH reply_lm_nll_gap_max {gap:.2f} nats/token target <= 0.5")
    return 0


if __name__ == "__main__":
    sys.exit(main())
