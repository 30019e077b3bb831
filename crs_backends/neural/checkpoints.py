"""The published checkpoint layout, strict loading and clear errors.

A checkpoint set is a directory holding, per system and dataset::

    kbrd_rec_<ds>/model.pt            plain state dict (KBRDforRec)
    kbrd_conv_<ds>/                   Hugging Face dir: config.json + pytorch_model.bin | model.safetensors
    barcor_rec_<ds>/, barcor_conv_<ds>/   Hugging Face dirs (BART sequence classification / seq2seq)
    unicrs_rec_<ds>/model.pt, unicrs_conv_<ds>/model.pt   KGPrompt state dicts (no edge tensors)

Our own small versions add what the published set takes from the Hub: a
``tokenizer.json`` (+ ``tokenizer_config.json``) in the conv directories and, for
UniCRS, the backbones in ``unicrs_gpt2_<ds>/`` and ``unicrs_roberta_<ds>/``.
A ``manifest.json`` at the root says what the set is (see :func:`write_manifest`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from pathlib import Path

import torch

MANIFEST = "manifest.json"


class CheckpointError(RuntimeError):
    """A checkpoint is missing, corrupt, partial or does not fit the model; the message names the file."""


def part_dir(root: str | os.PathLike, system: str, part: str, dataset: str) -> Path:
    return Path(root) / f"{system}_{part}_{dataset}"


def read_state_dict(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """A ``model.pt`` / ``pytorch_model.bin`` / ``model.safetensors`` file as a state dict."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"checkpoint file missing: {path}")
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            state = load_file(str(path))
        else:
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises many types for truncated or foreign files
        raise CheckpointError(f"cannot read checkpoint {path} (corrupt or partial?): {type(e).__name__}: {e}") from e
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(f"{path} does not hold a state dict of tensors")
    return state


def hf_weights_file(directory: str | os.PathLike) -> Path:
    directory = Path(directory)
    for name in ("model.safetensors", "pytorch_model.bin"):
        if (directory / name).exists():
            return directory / name
    raise CheckpointError(f"no weights in {directory} (expected model.safetensors or pytorch_model.bin)")


def load_strict(
    module: torch.nn.Module,
    state: dict[str, torch.Tensor],
    *,
    source: str | os.PathLike,
    renames: dict[str, str] | None = None,
    optional: Iterable[str] = (),
) -> None:
    """Load ``state`` into ``module`` with every key and shape checked; nothing is half-loaded on failure.

    ``renames`` maps checkpoint names to module names; ``optional`` lists module keys that may be absent
    (e.g. weights tied to another key). Missing, unexpected or mis-shaped keys raise :class:`CheckpointError`.
    """
    renames = renames or {}
    state = {renames.get(k, k): v for k, v in state.items()}
    own = module.state_dict()
    optional = set(optional)
    missing = [k for k in own if k not in state and k not in optional]
    unexpected = [k for k in state if k not in own]
    wrong = [
        f"{k}: file {tuple(v.shape)} vs model {tuple(own[k].shape)}"
        for k, v in state.items()
        if k in own and tuple(v.shape) != tuple(own[k].shape)
    ]
    if missing or unexpected or wrong:
        parts = []
        if missing:
            parts.append(f"missing {len(missing)} (e.g. {', '.join(missing[:4])})")
        if unexpected:
            parts.append(f"unexpected {len(unexpected)} (e.g. {', '.join(unexpected[:4])})")
        if wrong:
            parts.append(f"wrong shape {len(wrong)} (e.g. {'; '.join(wrong[:3])})")
        raise CheckpointError(f"{source} does not fit {type(module).__name__}: " + "; ".join(parts))
    module.load_state_dict(state, strict=False)


def save_state_dict(state: dict[str, torch.Tensor], path: str | os.PathLike) -> Path:
    """Write atomically (temp file + rename) so an interrupted save never leaves a partial ``model.pt``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save({k: v.detach().cpu().contiguous() for k, v in state.items()}, tmp)
    os.replace(tmp, path)
    return path


def load_tokenizer(directory: str | os.PathLike | None, hub_id: str, **kwargs):
    """The tokenizer saved in ``directory`` (our local versions), else ``hub_id`` from the Hugging Face Hub."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    if directory is not None and (Path(directory) / "tokenizer.json").exists():
        return PreTrainedTokenizerFast.from_pretrained(str(directory), **kwargs)
    try:
        return AutoTokenizer.from_pretrained(hub_id, **kwargs)
    except Exception as e:
        raise CheckpointError(
            f"tokenizer {hub_id!r} is not available offline and {directory or 'the checkpoint'} has no tokenizer.json; "
            f"run once with network access (it is cached by huggingface_hub) ({type(e).__name__})"
        ) from e


def write_manifest(root: str | os.PathLike, **fields) -> Path:
    """``manifest.json``: {systems, dataset, size, kg, created, version, ...}; merged with an existing one."""
    root = Path(root)
    path = root / MANIFEST
    data = read_manifest(root)
    data.update(fields)
    data.setdefault("created", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    root.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_manifest(root: str | os.PathLike) -> dict:
    path = Path(root) / MANIFEST
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise CheckpointError(f"{path} is not valid JSON: {e}") from e
