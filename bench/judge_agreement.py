"""The default offline scorer against people's votes: CRSArena-Dial (``<data dir>/crsarena``).

Each voted battle pairs two CRSArena-Dial conversations of one CRS Arena user (``<crs>_<user id>``). Every
conversation is scored with the shipped proxy (lexical similarity, the ReDial catalog), as the app scores it offline.
Agreement without ties: the share of decisive votes whose winner has the higher overall (equal overalls count half);
with ties, MT-Bench's way: ties are a third class and the scorer calls a tie when the two overalls differ by less
than ``arena.judge_agreement.TIE_MARGIN`` points of 100 (the panel's rule). 95% bootstrap intervals.

The shipped calibration was fitted on these very votes (and the CRSArena-Eval labels), so the headline figure is
in-sample. The cross-validated figure next to it (10 folds by user, as ``python -m evaluators calibrate``) is the
honest estimate for new battles. Report only: the script always exits 0.

    python bench/judge_agreement.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np

from arena.judge_agreement import TIE_MARGIN
from catalog.catalog import data_dir, get_catalog
from evaluators.log_readers import read_crsarena_dial
from evaluators.meta.correlation import vote_agreement
from evaluators.proxy.calibration import cross_validate, load_training_data, read_votes
from evaluators.proxy.scorer import load_proxy_judge

TARGET = 0.80


def main() -> None:
    base = data_dir()
    folder = base / "crsarena" if base else None
    if (
        folder is None
        or not list(folder.glob("crs_arena_dial_*.json"))
        or not (base / "redial" / "id2info.json").exists()
    ):
        print("judge agreement bench skipped: CRSArena-Dial and the ReDial catalog are not under CRS_DATA_DIR")
        return
    catalog = get_catalog("redial")
    judge = load_proxy_judge()
    dial = {}
    for path in sorted(folder.glob("crs_arena_dial_*.json")):
        dial.update({c.id: c for c in read_crsarena_dial(path, catalog).conversations})
    overall: dict[str, float] = {}
    pairs, outcome, skipped = [], [], 0
    for vote in read_votes(folder):
        a, b = f"{vote['crs1']}_{vote['user_id']}", f"{vote['crs2']}_{vote['user_id']}"
        if a not in dial or b not in dial or not all(any(t.role == "system" for t in dial[c].turns) for c in (a, b)):
            skipped += 1
            continue
        for cid in (a, b):
            if cid not in overall:
                overall[cid] = judge.score(dial[cid], catalog).overall_100
        pairs.append((overall[a], overall[b]))
        outcome.append(0 if vote["vote"] == "tie" else 1 if vote["vote"] == vote["crs1"] else -1)
    found = vote_agreement(np.array(pairs), np.array(outcome, dtype=float), tie_margin=TIE_MARGIN)
    print(
        f"{len(pairs)} voted battles with both conversations ({found['decisive']} decisive, {found['ties']} ties, "
        f"{skipped} skipped); {len(overall)} conversations scored with the shipped proxy"
    )
    print(
        f"without ties: {found['accuracy']:.1%} [{found['accuracy_low']:.1%}, {found['accuracy_high']:.1%}]; "
        f"with ties (tie under {TIE_MARGIN:g} of 100): {found['accuracy_with_ties']:.1%} "
        f"[{found['with_ties_low']:.1%}, {found['with_ties_high']:.1%}] (in-sample: the calibration saw these votes)"
    )
    data = load_training_data(folder / "crs_arena_eval_dev.json", folder, catalog)
    cv = cross_validate(data)
    held_out = vote_agreement(cv.pair_scores * 25.0, data.outcome, tie_margin=TIE_MARGIN)
    print(
        f"cross-validated (10 folds by user, each vote scored by a model that never saw it): "
        f"{held_out['accuracy']:.1%} [{held_out['accuracy_low']:.1%}, {held_out['accuracy_high']:.1%}] without ties, "
        f"{held_out['accuracy_with_ties']:.1%} with ties"
    )
    print(f"BENCH judge_vote_agreement {found['accuracy']:.3f} ratio target >= {TARGET:.2f}")
    print(f"BENCH judge_vote_agreement_with_ties {found['accuracy_with_ties']:.3f} ratio")
    print(f"BENCH judge_vote_agreement_cv {held_out['accuracy']:.3f} ratio target >= {TARGET:.2f}")


if __name__ == "__main__":
    main()
