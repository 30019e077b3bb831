"""bench/crs_fidelity.py's record of what it measured: with each system's Recall it keeps how many optimizer steps
each stage of the ReDial configuration took (read from the training states), which the app's line compares with the
running set's."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent


def _load_bench():
    spec = importlib.util.spec_from_file_location("crs_fidelity_bench", ROOT / "bench" / "crs_fidelity.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["crs_fidelity_bench"] = module
    spec.loader.exec_module(module)
    return module


def test_the_steps_of_each_stage_are_read_from_the_training_states(tmp_path):
    bench = _load_bench()
    for name, step in (("unicrs_rec_redial", 1334), ("unicrs_conv_redial", 150), ("kbrd_rec_redial", 7)):
        folder = tmp_path / ".train" / name
        folder.mkdir(parents=True)
        torch.save({"stage": name.split("_")[1], "step": step}, folder / "trainer_state.pt")
    (tmp_path / ".train" / "barcor_rec_redial").mkdir()
    (tmp_path / ".train" / "barcor_rec_redial" / "trainer_state.pt").write_bytes(b"not a state")
    steps = bench.trained_steps(tmp_path, ["unicrs", "barcor"])
    assert steps == {"unicrs": {"conv": 150, "rec": 1334}}  # a damaged state says nothing; kbrd was not asked


def test_the_budget_recorded_is_the_dataset_configurations():
    bench = _load_bench()
    assert bench.dataset_budget("unicrs") == {
        "epochs": 2,
        "max_steps": None,
        "stage_steps": {"conv": 150},
        "stage_epochs": None,
        "batch_size": 8,
    }
    assert bench.dataset_budget("kbrd")["max_steps"] == 2900


def test_the_record_keeps_each_models_variant_beside_its_figures(tmp_path, monkeypatch):
    import json
    from types import SimpleNamespace

    from crs_backends.neural import names

    bench = _load_bench()
    monkeypatch.setattr(names, "SHIPPED_SMALL_ROOT", tmp_path)
    recall = {s: SimpleNamespace(at={1: 0.03, 10: 0.15, 50: 0.3}) for s in ("kbrd", "unicrs")}
    prefix = {"recommendation prompt": "input vectors and UniCRS's per-layer prefix"}
    people = {"distinct": {2: 6.0}}
    parts = {"named": SimpleNamespace(at={1: 0.1, 10: 0.3, 50: 0.5}), "new": SimpleNamespace(at={1: 0.02, 10: 0.14})}
    by_gold = {"kbrd": parts}
    from crs_backends.neural.evaluation import Interval

    intervals = {s: Interval(0.15, 0.14, 0.16123, 300) for s in recall}
    bench.record(recall, {}, by_gold, {}, {}, people, 3341, 10.0, 0.5, {}, {"kbrd": {}, "unicrs": prefix}, intervals)
    written = json.loads((tmp_path / "redial_test.json").read_text(encoding="utf-8"))
    assert written["runs"][-1]["recall_by_gold"] == {
        "kbrd": {"named": {"1": 0.1, "10": 0.3, "50": 0.5}, "new": {"1": 0.02, "10": 0.14}}
    }
    assert written["recall"]["unicrs"]["variant"] == prefix
    assert "variant" not in written["recall"]["kbrd"]  # nothing sets KBRD's apart
    assert written["recall"]["kbrd"]["interval_10"] == [0.14, 0.1612]  # R@10's interval over the conversations
    from crs_backends.neural.recipes import DATASET_RECIPE

    assert written["runs"][-1]["recipe"] == DATASET_RECIPE  # the rate and windows the budget does not name
