"""A built set's weights stored in half precision where that moves none of its figures, measured (#72).

The small set must stay under 150 MB on disk. Each system's weight files are written again with their floating
tensors as float16 (the models still run in float32: loading copies the stored values into float32 parameters); the
system is then loaded from the set as the app loads it and ranks the validation conversations again. Half precision
is kept only where Recall@1, @10 and @50 there are exactly what float32 gave (the same hits); otherwise the float32
files come back. What was measured is returned for the set's manifest (``storage``).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import torch

from crs_backends.neural.checkpoints import part_dir, read_state_dict, save_state_dict
from crs_backends.neural.evaluation import RECALL_KS, gold_items, recall_at_k

WEIGHT_SUFFIXES = (".pt", ".bin")
PARTS = ("rec", "conv")


def weight_files(root: Path, system: str, dataset: str) -> list[Path]:
    """The state-dict files of ``system``'s two parts in the set at ``root``."""
    return sorted(
        f
        for part in PARTS
        if (d := part_dir(root, system, part, dataset)).is_dir()
        for f in d.iterdir()
        if f.suffix in WEIGHT_SUFFIXES
    )


def write_half(path: Path) -> None:
    """``path``'s floating tensors as float16, in place (atomically); integer tensors as they are."""
    state = read_state_dict(path)
    save_state_dict({k: v.half() if v.is_floating_point() else v for k, v in state.items()}, path)


def rankings(model, records: Sequence) -> list[list[int]]:
    return [[e for e, _s in top] for top in model.recommend_many([r.conv_input() for r in records], k=max(RECALL_KS))]


def store_half(root: Path, system: str, dataset: str, kg, validation: Sequence, load) -> dict:
    """Store ``system``'s weights in ``root`` as float16 if its validation Recall does not move; ``load()`` loads it
    from the set as the app does. Returns what was measured: the dtype kept, Recall@k both ways, the top-10 lists
    that changed, and the sizes in bytes."""
    pairs = [(r, items) for r in validation if (items := gold_items(r, kg))]
    records, gold = [r for r, _ in pairs], [items for _, items in pairs]
    files = weight_files(root, system, dataset)
    float32_bytes = sum(f.stat().st_size for f in files)
    with torch.no_grad():
        before = rankings(load(), records)
    kept = {f: f.with_name(f.name + ".float32") for f in files}
    for f, copy in kept.items():
        shutil.copy2(f, copy)
        write_half(f)
    with torch.no_grad():
        after = rankings(load(), records)
    r32, r16 = recall_at_k(zip(before, gold)), recall_at_k(zip(after, gold))
    same = all(round(r32.at[k] * r32.samples) == round(r16.at[k] * r16.samples) for k in RECALL_KS)  # the same hits
    for f, copy in kept.items():
        if same:
            copy.unlink()
        else:
            copy.replace(f)
    return {
        "dtype": "float16" if same else "float32",
        "validation_records": len(records),
        "recall_float32": {str(k): round(v, 4) for k, v in r32.at.items()},
        "recall_float16": {str(k): round(v, 4) for k, v in r16.at.items()},
        "top10_changed": sum(a[:10] != b[:10] for a, b in zip(before, after)),
        "float32_bytes": float32_bytes,
        "bytes": sum(f.stat().st_size for f in files),
    }
