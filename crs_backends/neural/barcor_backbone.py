"""BART's configuration and weights as the published BARCOR directories hold them: reading and writing
``config.json`` (with the generation settings transformers 5 no longer keeps on ``BartConfig``), building a module
with or without random init, and loading a part with its tied aliases checked (``reference/checkpoint-keys.md``
§3.3, §3.4, §3.6)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from pathlib import Path

import torch
from torch import nn

from crs_backends.neural.checkpoints import CheckpointError, hf_weights_file, load_strict, read_state_dict

# Tied aliases of model.shared.weight: present in a transformers-4.x pytorch_model.bin, absent in safetensors.
REC_ALIASES = ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight")
CONV_ALIASES = REC_ALIASES + ("lm_head.weight",)
# Generation settings read from config.json (transformers 5 no longer keeps them on BartConfig).
GEN_KEYS = ("forced_bos_token_id", "forced_eos_token_id", "no_repeat_ngram_size")
BART_BASE_GEN = {"forced_bos_token_id": 0, "forced_eos_token_id": 2, "no_repeat_ngram_size": 3}

ARCH_KEYS = (
    "d_model",
    "encoder_layers",
    "decoder_layers",
    "encoder_attention_heads",
    "decoder_attention_heads",
    "encoder_ffn_dim",
    "decoder_ffn_dim",
    "max_position_embeddings",
)
# config.json keys that are bookkeeping, not architecture
CONFIG_SKIP = (
    "id2label",
    "label2id",
    "num_labels",
    "architectures",
    "transformers_version",
    "_name_or_path",
    "torch_dtype",
    "dtype",
)


def bart_config(arch: dict, *, vocab_size: int, num_labels: int | None = None):
    from transformers import BartConfig

    cfg = BartConfig(
        vocab_size=vocab_size,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
        forced_eos_token_id=2,
        scale_embedding=False,
        activation_function="gelu",
        dropout=0.1,
        attention_dropout=0.1,
        activation_dropout=0.1,
        classifier_dropout=0.0,
        **{k: arch[k] for k in ARCH_KEYS},
    )
    if num_labels is not None:
        cfg.num_labels = num_labels
    return cfg


def read_config(directory: Path, *, num_labels: int | None = None):
    """``(BartConfig, generation settings)`` from ``directory/config.json`` (+ ``generation_config.json``)."""
    from transformers import BartConfig

    path = directory / "config.json"
    if not path.exists():
        raise CheckpointError(f"checkpoint config missing: {path}")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CheckpointError(f"cannot read {path}: {e}") from e
    if not isinstance(raw, dict) or raw.get("model_type", "bart") != "bart" or "d_model" not in raw:
        raise CheckpointError(f"{path} is not a BART config (model_type bart with d_model)")
    gen = {k: raw.get(k) for k in GEN_KEYS}
    gen_path = directory / "generation_config.json"
    if gen_path.exists():
        try:
            gen_raw = json.loads(gen_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise CheckpointError(f"cannot read {gen_path}: {e}") from e
        gen.update({k: gen_raw[k] for k in GEN_KEYS if k in gen_raw})
    try:
        cfg = BartConfig.from_dict({k: v for k, v in raw.items() if k not in CONFIG_SKIP})
        if num_labels is not None:
            cfg.num_labels = num_labels
        if cfg.d_model is None or cfg.encoder_attention_heads is None or cfg.decoder_attention_heads is None:
            raise ValueError("d_model and the attention heads must be set")
        if cfg.d_model % cfg.encoder_attention_heads or cfg.d_model % cfg.decoder_attention_heads:
            raise ValueError("d_model must be a multiple of the attention heads")
    except (TypeError, ValueError, KeyError) as e:
        raise CheckpointError(f"{path} is not a usable BART config: {e}") from e
    return cfg, gen, raw


def write_config(cfg, directory: Path, *, architecture: str, gen: dict | None = None) -> None:
    data = cfg.to_dict()
    data["architectures"] = [architecture]
    data.pop("dtype", None)
    data["torch_dtype"] = "float32"
    for k, v in (gen or {}).items():
        data[k] = v
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "config.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, path)


def build_bart(cls, cfg, *, init: bool, seed: int | None = None):
    """A Hugging Face BART module from ``cfg``; random init only when ``init`` (loading skips it)."""
    from transformers.initialization import no_init_weights

    if init:
        if seed is not None:
            torch.manual_seed(seed)
        return cls(cfg)
    with no_init_weights():
        module = cls(cfg)
    # no_init_weights also skips the tying done in init_weights: tie as the published models are
    shared = module.model.shared.weight
    module.model.encoder.embed_tokens.weight = shared
    module.model.decoder.embed_tokens.weight = shared
    if hasattr(module, "lm_head"):
        module.lm_head.weight = shared
    return module


def check_tied(module: nn.Module, aliases: Iterable[str]) -> None:
    shared = module.get_parameter("model.shared.weight")
    for name in aliases:
        if module.get_parameter(name) is not shared:  # pragma: no cover - guards a transformers change
            raise RuntimeError(f"{name} is no longer tied to model.shared.weight")


def load_part(module: nn.Module, directory: Path, aliases: tuple[str, ...]) -> None:
    path = hf_weights_file(directory)
    state = read_state_dict(path)
    renames = {}
    if "model.shared.weight" not in state:  # a writer that kept an alias instead of the shared table
        for alias in aliases:
            if alias in state:
                renames[alias] = "model.shared.weight"
                break
    state = {renames.get(k, k): v for k, v in state.items()}
    shared = state.get("model.shared.weight")
    for alias in aliases:  # aliases present must agree with the table they are tied to
        if (
            alias in state
            and shared is not None
            and state[alias].shape == shared.shape
            and not torch.equal(state[alias], shared)
        ):
            raise CheckpointError(f"{path}: {alias} differs from model.shared.weight (they are tied)")
    load_strict(module, state, source=path, optional=aliases)
    check_tied(module, aliases)


class VocabLimit:
    """Logits processor: ids the tokenizer does not know (model vocab > tokenizer) are never generated."""

    def __init__(self, n: int):
        self.n = n

    def __call__(self, input_ids, scores):
        scores[:, self.n :] = -math.inf
        return scores
