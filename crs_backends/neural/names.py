"""What the whole neural package names one way: the systems, their labels and modules, the cache folders, the
checkpoint set's folder pattern, the small set's version and place, and :class:`SourceError`.

A leaf: it imports nothing of ours (and nothing heavy), so that resolving (``sources``), fetching (``datasets``),
building (``small``), the checks (``fidelity``), the system (``system``) and the command lines (``train``) can all
read it without importing each other. :func:`model_class` imports a model module only when it is called.
"""

from __future__ import annotations

import importlib
import json
import os
import re
from pathlib import Path

KBRD, BARCOR, UNICRS = SYSTEMS = ("kbrd", "barcor", "unicrs")
LABELS = {KBRD: "KBRD", BARCOR: "BARCOR", UNICRS: "UniCRS"}  # also each model module's class name
# A small local version is not its namesake: it answers, is stored and is rated under an id and a name of its own
# ("kbrd_small", "KBRD (small)"), so that its votes and scores never count as the published model's
SMALL_IDS = {system: f"{system}_small" for system in SYSTEMS}
SMALL_LABELS = {system: f"{LABELS[system]} (small)" for system in SYSTEMS}
SYSTEM_OF_SMALL_ID = {small: system for system, small in SMALL_IDS.items()}
PARTS = ("rec", "conv")
# a part folder of a checkpoint set, as CRS Arena lays them out: <system>_<part>_<dataset>
PART_DIR = re.compile(r"^(kbrd|barcor|unicrs)_(rec|conv)_([A-Za-z0-9][\w.-]*)$")


# the commands a message names: fetch the published checkpoints and dataset files; build the small local versions
FETCH_COMMAND = "python -m crs_backends.neural.sources fetch"
SMALL_COMMAND = "python -m crs_backends.neural.small ensure"


class SourceError(RuntimeError):
    """No usable checkpoint, or a download / archive that failed; the message says what to do."""


def check_system(system: str) -> None:
    if system not in SYSTEMS:
        raise ValueError(f"unknown neural system {system!r}; known: {', '.join(SYSTEMS)}")


def model_module(system: str):
    """``crs_backends.neural.<system>``, imported here on demand (it imports torch): its model class."""
    check_system(system)
    return importlib.import_module(f"crs_backends.neural.{system}")


# the small size of a system whose architecture differs from the published one's model class (#40): UniCRS on a
# frozen SmolLM2 with input-level prompts, where the published UniCRS is a GPT-2 with per-layer prefixes
SMALL_MODULES = {UNICRS: ("unicrs_smollm", "UniCRSSmall")}


def training_module(system: str, size: str = ""):
    """``crs_backends.neural.<system>_training`` (the small size's own where :data:`SMALL_MODULES` names one),
    imported on demand: its ``train``."""
    check_system(system)
    name = SMALL_MODULES[system][0] if size == "small" and system in SMALL_MODULES else system
    return importlib.import_module(f"crs_backends.neural.{name}_training")


def model_class(system: str, size: str = ""):
    """The :class:`~crs_backends.neural.engine.NeuralModel` subclass of ``system``, named like the published class
    (the small size's own where :data:`SMALL_MODULES` names one). Loading through the published class finds a small
    set's model too."""
    if size == "small" and system in SMALL_MODULES:
        check_system(system)
        module, cls = SMALL_MODULES[system]
        return getattr(importlib.import_module(f"crs_backends.neural.{module}"), cls)
    return getattr(model_module(system), LABELS[system])


# --------------------------------------------------------------------------------------------- where things live
def cache_dir() -> Path:
    """``CRS_ARENA_CACHE``, default ``~/.cache/crs-arena``."""
    return Path(os.environ.get("CRS_ARENA_CACHE") or Path.home() / ".cache" / "crs-arena").expanduser()


def models_dir() -> Path:
    """``<cache>/models``: the fetched sets and, in ``small-v<N>/``, a small set trained here."""
    return cache_dir() / "models"


# the small local versions (built by crs_backends.neural.small)
# the set a build writes by default: bump when the data, the recipe or a model's small size changes
SMALL_VERSION = 8
SMALL_SEED = 0

SMALL_SET = f"small-v{SMALL_VERSION}"
SHIPPED_SETS = Path(__file__).resolve().parents[2] / "assets" / "models"
SMALL_BUILD_COMMAND = f"python -m crs_backends.neural.small build --out assets/models/{SMALL_SET}"


def read_manifest_quietly(root: Path) -> dict:
    """A set's ``manifest.json`` as a dict ({} where it is missing, unreadable or not an object): a broken manifest
    must not hide the checkpoints beside it; loading them reports real problems. (storage.jsonutil.read_json_object
    reads the same way; this module is a leaf, importing nothing of ours.)"""
    try:
        data = json.loads((Path(root) / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def set_dataset(root: Path) -> str:
    """The dataset a small set was trained on, as its manifest says (``redial``; small-v7's: ``bundled``); "" where
    the manifest says none."""
    return str(read_manifest_quietly(root).get("dataset") or "")


def _shipped_small_root() -> Path:
    """``CRS_SMALL_MODELS``, else the newest complete ``assets/models/small-v<N>`` (the set the repository ships),
    else where :data:`SMALL_SET` would be shipped."""
    configured = os.environ.get("CRS_SMALL_MODELS")
    if configured:
        return Path(configured)
    sets = sorted(
        (p for p in SHIPPED_SETS.glob("small-v*") if p.name[7:].isdigit() and small_set_complete(p)),
        key=lambda p: int(p.name[7:]),
    )
    return sets[-1] if sets else SHIPPED_SETS / SMALL_SET


def small_models_dir() -> Path:
    """Where a small set trained on this machine lives (whether or not it is built)."""
    return models_dir() / SMALL_SET


def small_set_complete(root: Path) -> bool:
    """Whether ``root`` holds a whole small set (its manifest says complete, its KG is there)."""
    data = read_manifest_quietly(root)
    dataset = data.get("dataset")
    return (
        data.get("complete") is True
        and isinstance(dataset, str)
        and (Path(root) / f"kg_{dataset}" / "entity2id.json").exists()
    )


def small_models_root() -> Path | None:
    """The small set that runs: the shipped one, else one trained into the cache; None when neither is there."""
    for root in (SHIPPED_SMALL_ROOT, small_models_dir()):
        if small_set_complete(root):
            return root
    return None


SHIPPED_SMALL_ROOT = _shipped_small_root()
