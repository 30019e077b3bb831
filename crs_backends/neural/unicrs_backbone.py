"""UniCRS's backbones: GPT-2 and RoBERTa configurations at a size, the published Hub tokenizers' special tokens,
and reading and writing a backbone saved beside the prompts (config + safetensors, checked key by key)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Literal, overload

from crs_backends.neural.checkpoints import CheckpointError, hf_weights_file, read_state_dict
from crs_backends.neural.kg_reader import KGData

if TYPE_CHECKING:  # transformers is imported where it is used, so importing this module stays cheap
    from transformers import GPT2LMHeadModel, PreTrainedModel, RobertaModel

log = logging.getLogger(__name__)


def gpt2_config(vocab: int, s: dict, eos: int, pad: int):
    from transformers import GPT2Config

    drop = s.get("dropout", 0.1)
    return GPT2Config(
        vocab_size=vocab,
        n_positions=s["n_positions"],
        n_embd=s["n_embd"],
        n_layer=s["n_layer"],
        n_head=s["n_head"],
        bos_token_id=eos,
        eos_token_id=eos,
        pad_token_id=pad,
        resid_pdrop=drop,
        embd_pdrop=drop,
        attn_pdrop=drop,
    )


def roberta_config(vocab: int, s: dict, tok):
    from transformers import RobertaConfig

    return RobertaConfig(
        vocab_size=vocab,
        hidden_size=s["text_hidden"],
        num_hidden_layers=s["text_layers"],
        num_attention_heads=s["text_heads"],
        intermediate_size=s["text_ffn"],
        max_position_embeddings=s["text_positions"],
        type_vocab_size=1,
        hidden_dropout_prob=s.get("dropout", 0.1),
        attention_probs_dropout_prob=s.get("dropout", 0.1),
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )


def hub_cached(repo: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(repo, "config.json"), str)
    except Exception:
        return False


def prepare_hub_tokenizers(gpt2_tok, prompt_tok, movie: str):
    """The published special tokens: GPT-2 gets ``<pad>`` then the movie token; RoBERTa the movie token."""
    if gpt2_tok.pad_token is None:
        gpt2_tok.add_special_tokens({"pad_token": "<pad>"})
    gpt2_tok.add_special_tokens({"additional_special_tokens": [movie]})
    prompt_tok.add_special_tokens({"additional_special_tokens": [movie]})
    gpt2_tok.padding_side = "left"
    return gpt2_tok, prompt_tok


def without_prefix(state: dict) -> dict:
    dropped = [k for k in state if k.startswith(("rec_prefix_", "conv_prefix_"))]
    if dropped:
        log.info("UniCRS: ignoring %d prefix tensors, as iEvaLM does: %s", len(dropped), ", ".join(sorted(dropped)))
    return {k: v for k, v in state.items() if k not in dropped}


@overload
def load_backbone(directory: Path, kind: Literal["gpt2"]) -> GPT2LMHeadModel: ...
@overload
def load_backbone(directory: Path, kind: Literal["roberta"]) -> RobertaModel: ...
def load_backbone(directory: Path, kind: str) -> GPT2LMHeadModel | RobertaModel:
    """A backbone saved by :meth:`UniCRS.save`: config + weights checked key by key, tied head restored."""
    from transformers import GPT2Config, GPT2LMHeadModel, RobertaConfig, RobertaModel

    from crs_backends.neural.checkpoints import load_strict

    cfg_path = directory / "config.json"
    if not cfg_path.exists():
        raise CheckpointError(f"backbone config missing: {cfg_path}")
    try:
        config = (GPT2Config if kind == "gpt2" else RobertaConfig).from_json_file(str(cfg_path))
    except Exception as e:
        raise CheckpointError(f"cannot read {cfg_path}: {type(e).__name__}: {e}") from e
    model: GPT2LMHeadModel | RobertaModel
    if isinstance(config, GPT2Config):  # kind == "gpt2"
        model = GPT2LMHeadModel(config)
    else:
        model = RobertaModel(config, add_pooling_layer=True)
    weights = hf_weights_file(directory)
    load_strict(model, read_state_dict(weights), source=weights, optional=("lm_head.weight",) if kind == "gpt2" else ())
    if isinstance(model, GPT2LMHeadModel):
        model.lm_head.weight = model.transformer.wte.weight
    return model.eval()


def save_backbone(model: PreTrainedModel, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    state = {k: v for k, v in model.state_dict().items() if k != "lm_head.weight"}  # tied to wte
    from safetensors.torch import save_file

    tmp = directory / "model.safetensors.tmp"
    save_file({k: v.detach().cpu().contiguous() for k, v in state.items()}, str(tmp))
    os.replace(tmp, directory / "model.safetensors")
    model.config.to_json_file(str(directory / "config.json"))


def local_corpus(kg: KGData, texts: Iterable[str] | None) -> list[str]:
    out = [t for t in (texts or []) if t]
    names = list(kg.entity2id)[:5000]
    out += [f"User: I like {n}. System: Have you seen {n}?" for n in names]
    out += ["User: Hi! Can you recommend a movie? System: Sure, what kind of movies do you like?"] * 5
    return out
