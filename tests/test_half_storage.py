"""A built set's weights go to half precision only where the validation Recall stays what float32 gave (#72)."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from crs_backends.neural.checkpoints import part_dir, read_state_dict, save_state_dict
from crs_backends.neural.half_storage import store_half


class ScoreRanker:
    """A recommender whose item scores are its stored weights: it ranks the items by the values read from the set."""

    def __init__(self, root):
        self.scores = read_state_dict(part_dir(root, "toy", "rec", "redial") / "model.pt")["scores"].float()

    def recommend_many(self, inps, k):
        order = sorted(range(len(self.scores)), key=lambda i: (-float(self.scores[i]), i))
        return [[(i, float(self.scores[i])) for i in order[:k]] for _ in inps]


def _set(root, scores):
    save_state_dict(
        {"scores": torch.tensor(scores, dtype=torch.float32)}, part_dir(root, "toy", "rec", "redial") / "model.pt"
    )
    save_state_dict({"step": torch.tensor([3])}, part_dir(root, "toy", "conv", "redial") / "model.pt")


KG = SimpleNamespace(item_ids=list(range(60)), ids_of=lambda names: [int(n) for n in names])
# item 1 is the gold of every record: first in float32, and after item 0 once float16 rounds their scores together
VALIDATION = [SimpleNamespace(rec=["1"], conv_input=lambda: None) for _ in range(5)]


def test_half_precision_is_kept_where_the_hits_do_not_move(tmp_path):
    _set(tmp_path, [1.0 - n / 100 for n in range(60)])  # well apart: float16 keeps the order
    out = store_half(tmp_path, "toy", "redial", KG, VALIDATION, lambda: ScoreRanker(tmp_path))
    assert out["dtype"] == "float16" and out["top10_changed"] == 0 and out["validation_records"] == 5
    assert read_state_dict(part_dir(tmp_path, "toy", "rec", "redial") / "model.pt")["scores"].dtype == torch.float16
    assert read_state_dict(part_dir(tmp_path, "toy", "conv", "redial") / "model.pt")["step"].dtype == torch.int64
    assert out["bytes"] < out["float32_bytes"]
    assert not list(tmp_path.rglob("*.float32"))


def test_float32_comes_back_where_half_precision_moves_a_hit(tmp_path):
    scores = [1.0 - n / 100 for n in range(60)]
    scores[0], scores[1] = 1.00010, 1.00020  # one float16 value apart from neither: the gold falls to second
    _set(tmp_path, scores)
    out = store_half(tmp_path, "toy", "redial", KG, VALIDATION, lambda: ScoreRanker(tmp_path))
    assert out["dtype"] == "float32" and out["recall_float32"]["1"] == 1.0 and out["recall_float16"]["1"] == 0.0
    assert out["top10_changed"] == 5
    stored = read_state_dict(part_dir(tmp_path, "toy", "rec", "redial") / "model.pt")["scores"]
    assert stored.dtype == torch.float32 and abs(float(stored[1]) - 1.0002) < 1e-6
    assert out["bytes"] == out["float32_bytes"] and not list(tmp_path.rglob("*.float32"))
