"""Recall@1/10/50 of the small KBRD, BARCOR and UniCRS configurations trained on ReDial, beside the published numbers.

The small configurations (``size="small"``, the step budget of the small local versions in
:data:`crs_backends.neural.recipes.TRAIN_SETTINGS`) are trained on the ReDial KG with the
``redial_eval/valid_data_processed.jsonl`` records and the ``redial_train_partial`` conversations (ReDial's whole
training split is not in the data folder), their validation tenth held out
(:func:`crs_backends.neural.evaluation.is_validation`), plus synthetic dialogues over ReDial's own catalog
(:func:`crs_backends.neural.small.train_on_dataset`),
once, into ``--models`` (resumable), then evaluated on ``redial_eval/test_data_processed.jsonl``:
one sample per (test record, gold item in the KG), as CRSLab / iEvaLM count Recall@k. The published
numbers are the full-size iEvaLM checkpoints (KBRD .028/.169/.366, BARCOR .031/.170/.372, UniCRS
.050/.215/.413): this is a report, not a gate.

    python bench/crs_quality.py [--models DIR] [--limit 1000] [--systems kbrd,barcor,unicrs]

Same as ``python -m crs_backends.train report --models DIR --data redial`` once the models are trained.
Skips (exit 0) when the research data is not there.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from catalog.catalog import data_dir
from crs_backends.neural.small import train_on_dataset
from crs_backends.neural.train_command import SYSTEMS, TqdmProgress, quality_report


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--models",
        type=Path,
        default=None,
        help="where the ReDial-trained small models live (default <cache>/models/quality-redial-small-vN-dM-rK)",
    )
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--limit", type=int, default=1000, help="test records to use (0: all 3,341)")
    parser.add_argument("--retrain", action="store_true", help="train again from scratch")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    base = data_dir()
    if base is None or not (base / "redial" / "entity2id.json").exists():
        print("research data not found (CRS_DATA_DIR or ../shared/data): skipped")
        return
    systems = [s for s in args.systems.split(",") if s]
    bars: list[TqdmProgress] = []

    def progress_for(system: str) -> TqdmProgress | None:
        if args.quiet:
            return None
        bars.append(TqdmProgress(f"{system} "))
        return bars[-1]

    try:
        models, _data = train_on_dataset(
            base / "redial", systems, args.models, retrain=args.retrain, progress_for=progress_for, log=print
        )
    finally:
        for bar in bars:
            bar.close()
    quality_report(
        models,
        str(base / "redial"),
        base / "redial_eval" / "test_data_processed.jsonl",
        systems=systems,
        limit=args.limit or None,
        progress=not args.quiet,
    )


if __name__ == "__main__":
    main()
