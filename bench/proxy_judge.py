"""The proxy scorer on the CRSArena-Eval development slice: speed and cross-validated agreement.

Speed: all twelve factor proxies plus the calibrated overall score for each of the 93 dialogues
(ReDial catalog, lexical similarity), after one warm-up conversation that builds the catalog's word
list; the median of three passes over the slice. Agreement, all out of fold (10-fold CV by user,
labels and votes, as in ``python -m evaluators calibrate``, the turn scorer refitted inside each fold): turn-level
Spearman of the turn scores with the human turn labels, dialogue-level and system-level Spearman of the overall
with the human ``dialogue_overall``, and within-system (each dialogue's score and label minus its system's mean).
Report only: the script always exits 0.

    python bench/proxy_judge.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from catalog.catalog import data_dir, get_catalog
from evaluators.log_readers import read_crsarena_eval
from evaluators.proxy.calibration import cross_validate, load_training_data
from evaluators.proxy.scorer import load_proxy_judge

PASSES = 3


def main() -> None:
    base = data_dir()
    dev = base / "crsarena" / "crs_arena_eval_dev.json" if base else None
    if dev is None or not dev.exists() or not (base / "redial" / "id2info.json").exists():
        print("proxy judge bench skipped: the CRSArena-Eval slice and the ReDial catalog are not under CRS_DATA_DIR")
        return
    catalog = get_catalog("redial")
    conversations = read_crsarena_eval(dev, catalog).conversations
    judge = load_proxy_judge()
    start = time.perf_counter()
    judge.score(conversations[0], catalog)
    print(f"warm-up (word list and people of a {len(catalog)}-item catalog): {time.perf_counter() - start:.2f} s")
    per_pass = []
    for _ in range(PASSES):
        start = time.perf_counter()
        for conversation in conversations:
            judge.score(conversation, catalog)
        per_pass.append((time.perf_counter() - start) * 1000 / len(conversations))
    ms = statistics.median(per_pass)
    print(
        f"{len(conversations)} dialogues, {PASSES} passes: "
        + ", ".join(f"{p:.1f}" for p in per_pass)
        + " ms per conversation"
    )
    data = load_training_data(dev, dev.parent, catalog)
    summary = cross_validate(data).summary(data)
    print("cross-validated (10 folds by user; the turn scorer refitted in each fold), Spearman [95% bootstrap]:")
    for level in ("turn_relevance", "turn_interestingness", "dialogue", "within_system", "system"):
        c = summary[level]["spearman"]
        print(f"  {level:22s} n={summary[level]['n']:3d}  {c['value']:.3f} [{c['low']:.2f}, {c['high']:.2f}]")
    votes = summary["votes"]
    print(f"  votes: winner scored higher in {votes['accuracy']:.1%} of {votes['decisive']} decisive votes")
    print(f"BENCH proxy_ms_per_conversation {ms:.1f} ms target <= 50")
    print(f"BENCH proxy_turn_relevance_rho {summary['turn_relevance']['spearman']['value']:.3f} rho target >= 0.55")
    print(f"BENCH proxy_dialogue_rho {summary['dialogue']['spearman']['value']:.3f} rho target >= 0.68")
    print(f"BENCH proxy_within_system_rho {summary['within_system']['spearman']['value']:.3f} rho target >= 0.45")


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # report only: a failure is printed, never fatal
        print(f"proxy judge bench failed: {type(e).__name__}: {e}")
