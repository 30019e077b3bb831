"""The small UniCRS: UniCRS's knowledge-enhanced prompts (Wang et al., KDD 2022) on a frozen, pretrained decoder.

The pieces, as UniCRS has them (iai-group/iEvaLM-CRS ``src/model/unicrs/``, RUCAIBox/UniCRS):

- an R-GCN (8 bases) over the catalog's knowledge graph gives every entity an embedding (``node_embeds`` + the
  R-GCN, then a residual MLP and a projection to the language model's width);
- a frozen text encoder reads the conversation: all-MiniLM-L6-v2 (the package the app already loads, see
  :mod:`llm_clients.sentence_encoder`) stands in for UniCRS's RoBERTa; its token states are projected the same way;
- the two are fused as UniCRS's prompt encoder fuses them (a bilinear cross interaction between token states and the
  context's entity embeddings, softmax-weighted mixing, then a residual MLP and a projection): for recommendation
  one prompt position per linked entity (the entity plus the context tokens that attend to it), for conversation
  one per context token (the token plus the entities it attends to);
- learned task-specific prompt vectors (UniCRS's ``rec_prefix`` / ``conv_prefix``) are put in front, one set for
  recommendation, one for conversation;
- recommendation is the decoder's final hidden state at the last position, under the recommendation prompt, scored
  against the entity embeddings of the items; conversation is the decoder's greedy continuation under the
  conversation prompt, trained on the records' replies with their films written as ``<movie>``, which the serving
  fills with the ranking, as UniCRS's serving fills its slots.

The decoder is SmolLM2-135M-Instruct (:mod:`crs_backends.neural.smollm_backbone`), frozen and never modified; only
the two prompt modules (:class:`SoftPrompt`: R-GCN, fusion, task vectors, projections) train
(:mod:`crs_backends.neural.unicrs_smollm_training`).

Deviations from UniCRS, on purpose:

- **the prompt pre-training is optional and shorter**: UniCRS pre-trains its prompt encoder (``train_pre.py``, 5
  epochs) before the recommendation stage; here that stage (``pre``, :mod:`crs_backends.neural.unicrs_smollm_training`)
  runs only where the recipe names its epochs (``TrainConfig.stage_epochs``; a CPU budget: each step runs the frozen
  decoder forward and backward), else the recommendation stage trains the prompt from its initialisation; the
  conversation prompt starts from the recommendation prompt's encoders;
- **the conversation prompt at the input layer, not per-layer prefixes**: UniCRS turns its prompt into past keys and
  values for every GPT-2 layer; here the conversation prompt's vectors are input embeddings put in front of the
  context's token embeddings: a decoder input llama.cpp can take as it is (a batch of embeddings, then tokens), so
  the replies are decoded on the GGUF file itself (see "Decoding" below). The recommendation prompt (torch only)
  gives both where the settings say ``rec_layer_prefix`` (sets from recipe r8 on): its vectors go in front of the
  context as input embeddings and, through one linear map (``layer_kv``, 576 -> 30 layers x key and value x 3 KV
  heads x 64, small random start), as UniCRS's per-layer key/value prefix. Sets written before it have the input
  prompt alone (no ``rec_layer_prefix`` in ``smollm.json``) and load as they were trained;
- the conversation prompt's token positions are averaged into :data:`SIZES` ``conv_slots`` contiguous groups
  (UniCRS keeps one position per RoBERTa token, 128), and the recommendation prompt keeps the last
  ``entity_max_length`` linked entities (UniCRS 43): a few prompt vectors keep a CPU step and a turn short;
- the task vectors start as the token embeddings of a short instruction in SmolLM2's chat form (a system turn:
  "You are a movie recommender. … write <movie> for each film you suggest.", :data:`SIZES`), one vector per token,
  and go to the decoder as they are (plus a residual MLP that starts at zero), not through ``prompt_proj``: prompt
  tuning initialised from words (Lester et al., 2021). With randomly initialised task vectors, the conversation loss
  of SmolLM2 did not move in 25 steps at learning rates 1e-3 and 1e-2 (3.3 -> 3.2 on 4 replies seen 10 times): a
  135M decoder heeds a few free input vectors little, and it starts here from an instruction it understands;
- attention masks are honoured in the fusion (UniCRS lets pads take part), so a conversation's prompt does not
  depend on what it is batched with; the knowledge vectors are RMS-normalised with a learned gain that starts at the
  scale of SmolLM2's token embeddings, so an untrained prompt does not swamp the context;
- the recommendation score: UniCRS's (``src/model_gpt2.py``: the decoder's final hidden state as it is, times the
  entity embeddings) in sets from recipe r9 on (``rec_score`` "raw" in ``smollm.json``). Sets written before it
  (no ``rec_score``: "standardised") pass the hidden state, standardised per dimension with statistics taken from the
  training contexts, through a learned linear map (``hidden_proj``) first: the decoder is frozen and SmolLM2's final
  hidden state has a few dimensions tens of times larger than the rest, which seemed to call for it, but scored as
  UniCRS scores the first epoch read R@10 .191 on the validation tenth against .176 (docs/neural-systems.md). The
  cross-entropy runs over the items only;
- the context is SmolLM2's chat form (``<|im_start|>user`` … ``<|im_end|>``, ending with the assistant header),
  left-truncated to ``context_max_length`` tokens; ``no_repeat_ngram_size`` 3 is applied within the reply, and never
  to the pieces of a ``<movie>`` slot (the tokenizer writes it as three ordinary tokens, so a second slot would
  otherwise be a repeated trigram).

Decoding: the prompt module always runs in torch; the decoder runs in torch (the dequantized copy, with a KV cache),
in llama.cpp on the GGUF file itself (the prompt vectors given as input embeddings), or, by default, both: torch's
prefill and llama.cpp's steps from torch's KV cache (:mod:`crs_backends.neural.smollm_llamacpp`; see
:data:`DECODERS`); :data:`DECODER_ENV` / the ``decoder`` argument choose, and llama.cpp falls back to torch where it
cannot start or run. ``bench/unicrs_backends.py`` measures both (2026-11-27, 2 cores
never quiet: load about 3 from a training run beside it): a 30-token turn took 0.86 s median through llama.cpp (one
thread) against 2.45 s through torch (one thread), and 1.54 s against 12.7 s with torch at two threads; the first
reply token agreed in 7 of 8 turns, 20 of 30 leading tokens (median), and the top-10 items from llama.cpp's hidden
state overlapped torch's by 0.96 (the GGUF multiplies in its quantized formats; the torch copy is its dequantized
weights, random prompt modules). The ranking can run on either decoder: through llama.cpp the recommendation
prompt's per-layer prefix enters its KV cache through the sequence state (:meth:`UniCRSSmall._llama_prefix`,
:meth:`LlamaCppDecoder.prefix_hidden`); torch ranks faster (:data:`DEFAULT_RANKER`), and each turn records which
decoder ranked (``rank_route``). The option letters are read from the reply's own prefill, torch's or llama.cpp's
(:meth:`UniCRSSmall.option_scores`). Training is torch only.

Saved layout (:meth:`UniCRSSmall.save`): ``unicrs_rec_<ds>/model.pt`` and ``unicrs_conv_<ds>/model.pt`` (the two
:class:`SoftPrompt` state dicts, no edge tensors, loaded strictly) and ``unicrs_conv_<ds>/smollm.json`` (the
settings and the backbone's fingerprint). A set whose ``unicrs_conv_<ds>/`` holds ``smollm.json`` is this model
(:func:`is_smollm_set`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from crs_backends.neural.barcor_backbone import minilm_fingerprint
from crs_backends.neural.checkpoints import CheckpointError, load_strict, part_dir, read_state_dict, save_state_dict
from crs_backends.neural.engine import (
    MOVIE_SLOT,
    TOP_K,
    ConvInput,
    NeuralModel,
    fill_slots,
    size_settings,
    top_items,
)
from crs_backends.neural.kg_reader import KGData
from crs_backends.neural.smollm_backbone import NAME as BACKBONE_NAME
from crs_backends.neural.smollm_backbone import Backbone, check_fingerprint, fingerprint, gguf_path, load_backbone
from crs_backends.neural.unicrs_smollm_prompt import SoftPrompt
from crs_backends.neural.unicrs_smollm_settings import (
    FORM_KEYS,
    FORMAT,
    LEGACY_REC_SCORE,
    SETTINGS_FILE,
    SIZES,
    SYSTEM,
    TEXT_ENCODER,
    WINDOW_KEYS,
    check_text_encoder,
    has_layer_prefix,
    read_settings,
    rec_score,
    variant_text,
    windows_of,
)
from crs_backends.neural.unicrs_text import tidy

log = logging.getLogger(__name__)

# which decoder writes the replies: "llamacpp" (the GGUF through llama.cpp, prompt vectors as input embeddings),
# "torch" (the dequantized copy with a KV cache), or "torch-prefill" (torch reads the prompt and the context, llama.cpp
# decodes the reply from torch's KV cache, put into its own through the sequence state); llama.cpp falls back to torch
# when it cannot run. Measured 2026-12-02 (two cores, the build's training paused, random prompt modules at small-v8's
# windows, torch on two threads, llama.cpp on one, 40-token replies at 17-128 context tokens): torch-prefill 0.72-1.26 s
# a reply, llama.cpp 0.66-1.75 s, torch 0.88-3.66 s; torch's prefill is the cheaper one over a whole prompt (about 4.4
# ms a position on one thread against llama.cpp's 6.2), llama.cpp's the cheaper step. After torch's cache was put into
# llama.cpp, its next logits had a cosine of 0.99998 with torch's (0.21 with the keys in transformers' order).
DECODERS = ("torch-prefill", "llamacpp", "torch")
DECODER_ENV = "CRS_UNICRS_SMALL_DECODER"
DEFAULT_DECODER = "torch-prefill"
LLAMA_DECODERS = ("torch-prefill", "llamacpp")  # the decoders llama.cpp takes part in
DECODER_WORDS = {"torch-prefill": "torch's prefill and llama.cpp", "llamacpp": "llama.cpp", "torch": "torch"}
# which decoder ranks the items: "torch" (the dequantized copy) or "llamacpp" (the per-layer prefix through llama.cpp's
# sequence state). Measured 2026-12-02 (bench/unicrs_backends.py and a split of its ranking, two cores, a training run
# paused, random prompt modules, 21 prompt positions and 80 context tokens): torch 0.43-0.46 s on one thread and
# 0.32-0.44 s on two; llama.cpp 0.71-0.92 s on one thread and 0.47 s on two (its Q4_1 products are slower than
# torch's float32 ones over a whole prompt; they win token by token, in the reply). Torch ranks; CRS_UNICRS_SMALL_RANKER
# chooses llama.cpp, and each turn records which ran (rank_route)
RANKERS = ("torch", "llamacpp")
RANKER_ENV = "CRS_UNICRS_SMALL_RANKER"
DEFAULT_RANKER = "torch"
# llama.cpp's threads for a reply. One: its worker threads spin while they wait, so two threads on a 2-core machine
# busy with anything else (another model's turn, a training run) were far slower than one (2026-11-27, 2 cores, load
# about 3: a 30-token turn took 0.7-0.9 s with one thread, 3.9 to 20 s with two; torch's took 2.2-2.5 s with one)
LLAMA_THREADS = 1


def chat_text(context: Sequence[str]) -> str:
    """The conversation in SmolLM2's chat form (user first, alternating; empty utterances skipped but counted),
    ending with the assistant header the reply follows."""
    turns = [
        f"<|im_start|>{'user' if i % 2 == 0 else 'assistant'}\n{u}<|im_end|>\n" for i, u in enumerate(context) if u
    ]
    return "".join(turns) + "<|im_start|>assistant\n"


def encoder_text(context: Sequence[str]) -> str:
    """What the text encoder reads: ``User: …`` / ``System: …`` turns joined by spaces."""
    return " ".join(("User: " if i % 2 == 0 else "System: ") + u for i, u in enumerate(context) if u)


def train_autocast(device: torch.device, training: bool):
    """Mixed precision for the frozen decoder while the prompts train: bfloat16 matrix products (the weights stay
    float32, the prompt modules and the losses too) on a GPU or on a CPU with native bfloat16 (AVX512-BF16/AMX).
    A training step of 8 records through SmolLM2 took 2.8 s instead of 4.2 s on one thread here (AMD EPYC with
    avx512_bf16, 2026-11-27). Without it, bfloat16 is the slower: on an Intel Xeon with AVX-512 but no AVX512-BF16,
    8.1 s a step against 2.8 s in float32 at two threads (bench/unicrs_train_step.py, 2026-11-28), so such a CPU
    trains in float32. Inference keeps float32, as llama.cpp's replies and the tests' golden rankings do."""
    if training and (device.type == "cuda" or (device.type == "cpu" and cpu_native_bf16())):
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def cpu_native_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 in hardware (AVX512-BF16 or AMX tiles). oneDNN also takes bfloat16 on a
    CPU with plain AVX-512 (``torch.ops.mkldnn._is_mkldnn_bf16_supported()`` says yes there), converting to float32
    and back."""
    try:
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    except (AttributeError, RuntimeError):
        return False


class UniCRSSmall(NeuralModel):
    """The small UniCRS (see the module docstring); ``create`` / ``load`` build it, ``save`` writes it."""

    system = SYSTEM
    size = "small"

    def __init__(self, kg: KGData, backbone: Backbone, encoder: Any, settings: dict, *, decoder: str | None = None):
        self.kg = kg
        self.decoder = decoder or os.environ.get(DECODER_ENV) or DEFAULT_DECODER
        if self.decoder not in DECODERS:
            raise ValueError(f"unknown decoder {self.decoder!r}; choose one of {', '.join(DECODERS)}")
        self.ranker = os.environ.get(RANKER_ENV) or DEFAULT_RANKER
        if self.ranker not in RANKERS:
            raise ValueError(f"unknown {RANKER_ENV} {self.ranker!r}; choose one of {', '.join(RANKERS)}")
        self._llama: Any = None  # the LlamaCppDecoder, started on the first reply; False once it failed
        # the option letters' logits from the last reply's prefill, with what its input was made of and which prefill
        self._option_logits: tuple[tuple[list[int], list[int], list[int]], torch.Tensor, str] | None = None
        self.option_route = ""  # how the last option_scores got its logits (recorded with the turn)
        self.rank_route = ""  # which decoder ran the last ranking (recorded with the turn)
        self.reply_route = ""  # which decoder wrote the last reply (recorded with the turn)
        self.backbone = backbone
        self.lm = backbone.model
        self.tokenizer = backbone.tokenizer
        self.encoder_model = encoder[0].auto_model.eval()  # the SentenceTransformer's transformer
        self.encoder_tokenizer = encoder.tokenizer
        for p in self.encoder_model.parameters():
            p.requires_grad_(False)
        self.settings = dict(settings)
        self.context_max_length = int(settings["context_max_length"])
        self.text_max_length = int(settings["text_max_length"])
        self.entity_max_length = int(settings["entity_max_length"])
        self.resp_max_length = int(settings["resp_max_length"])
        self.max_new_tokens = int(settings["max_new_tokens"])
        hidden = int(self.lm.config.hidden_size)
        edge_index, edge_type = kg.edges
        embed_scale = float(self.lm.get_input_embeddings().weight.std())
        common = dict(
            hidden_size=hidden,
            token_hidden_size=int(self.encoder_model.config.hidden_size),
            n_entity=kg.n_entities_with_pad,
            num_relations=kg.n_relations,
            edge_index=edge_index,
            edge_type=edge_type,
            conv_slots=int(settings["conv_slots"]),
            embed_scale=embed_scale,
        )
        embed = self.lm.get_input_embeddings().weight

        def instruction(text: str) -> torch.Tensor:
            return embed[self.tokenizer(text, add_special_tokens=False)["input_ids"]].detach()

        cfg = self.lm.config
        head_dim = int(getattr(cfg, "head_dim", None) or hidden // int(cfg.num_attention_heads))
        self.rec_prompt = SoftPrompt(
            "rec",
            task_init=instruction(settings["rec_instruction"]),
            layer_prefix=(
                (int(cfg.num_hidden_layers), int(cfg.num_key_value_heads), head_dim)
                if settings.get("rec_layer_prefix")
                else None
            ),
            score=str(settings.get("rec_score", LEGACY_REC_SCORE)),
            **common,  # type: ignore[arg-type]
        ).eval()
        self.conv_prompt = SoftPrompt(
            "conv",
            task_init=instruction(settings["conv_instruction"]),
            **common,  # type: ignore[arg-type]
        ).eval()
        self.item_ids = torch.tensor(kg.item_ids, dtype=torch.long)
        self.end_ids = {
            i
            for i in (self.tokenizer.convert_tokens_to_ids("<|im_end|>"), self.tokenizer.eos_token_id)
            if isinstance(i, int) and i >= 0
        }
        self.end_id = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.end_id
        # the pieces of a <movie> slot (ordinary tokens: "<" / " <", "movie", ">" / ">." …), exempt from the n-gram ban
        self.slot_open = {
            self.tokenizer(s, add_special_tokens=False)["input_ids"][0] for s in (MOVIE_SLOT, " " + MOVIE_SLOT)
        }
        self.slot_word = self.tokenizer(MOVIE_SLOT, add_special_tokens=False)["input_ids"][1]
        self._tables: dict[str, torch.Tensor] = {}
        self._states_cache: tuple[tuple[int, ...], tuple[torch.Tensor, torch.Tensor]] | None = None
        self._lock = threading.Lock()

    # ---- construction ----
    @classmethod
    def create(
        cls,
        kg: KGData,
        texts: Any = None,
        *,
        size: str = "small",
        seed: int = 0,
        decoder: str | None = None,
        form: dict | None = None,
    ) -> UniCRSSmall:
        """Fresh prompt modules (seeded) on the installed backbone and text encoder. ``texts`` (the builder's corpus)
        is not needed: the backbone's tokenizer is fixed. ``form``: the recommendation prompt's form (FORM_KEYS) and
        the prompts' windows (WINDOW_KEYS) in place of SIZES' (written to the set's smollm.json, so ``load`` reads the
        set as it was trained)."""
        settings = dict(size_settings(SIZES, size))
        given, allowed = dict(form or {}), FORM_KEYS + WINDOW_KEYS
        unknown = sorted(set(given) - set(allowed))
        if unknown:
            raise ValueError(f"not a setting of the prompt's form: {', '.join(unknown)}; one of {', '.join(allowed)}")
        bad = [f"{k}={given[k]!r}" for k in WINDOW_KEYS if k in given and not (type(given[k]) is int and given[k] > 2)]
        if bad:
            raise ValueError(f"a window is a whole number above 2: {', '.join(bad)}")
        settings.update(given)
        backbone, encoder = _load_frozen()
        torch.manual_seed(seed)
        return cls(kg, backbone, encoder, settings, decoder=decoder)

    @classmethod
    def load(cls, root, dataset: str, kg: KGData, *, device: str = "cpu", decoder: str | None = None) -> UniCRSSmall:
        """The set under ``root`` (strict: a wrong key or shape, or another backbone, raises CheckpointError)."""
        root = Path(root)
        conv_dir = part_dir(root, SYSTEM, "conv", dataset)
        meta_path = conv_dir / SETTINGS_FILE
        meta = read_settings(root, dataset)
        check_fingerprint(meta.get("backbone_sha256"), fingerprint(gguf_path()), meta_path)
        check_text_encoder(meta.get("text_encoder_sha256"), meta_path)
        if meta.get("kg_entities") != kg.n_entities_with_pad:
            raise CheckpointError(
                f"{meta_path}: trained on a KG of {meta.get('kg_entities')} entities (with pad), given "
                f"{kg.n_entities_with_pad}"
            )
        settings = dict(SIZES["small"])
        settings.update({k: type(v)(meta[k]) for k, v in settings.items() if k in meta})
        settings["rec_layer_prefix"] = has_layer_prefix(meta)
        settings["rec_score"] = rec_score(meta)
        rec_file = part_dir(root, SYSTEM, "rec", dataset) / "model.pt"
        conv_file = conv_dir / "model.pt"
        rec_state, conv_state = read_state_dict(rec_file), read_state_dict(conv_file)
        backbone, encoder = _load_frozen()
        model = cls(kg, backbone, encoder, settings, decoder=decoder)
        load_strict(model.rec_prompt, rec_state, source=rec_file)
        load_strict(model.conv_prompt, conv_state, source=conv_file)
        return model.to(device)

    def save(self, root, dataset: str) -> None:
        """``unicrs_rec_<ds>/model.pt``, ``unicrs_conv_<ds>/model.pt`` and ``unicrs_conv_<ds>/smollm.json``."""
        root = Path(root)
        save_state_dict(self.rec_prompt.state_dict(), part_dir(root, SYSTEM, "rec", dataset) / "model.pt")
        conv_dir = part_dir(root, SYSTEM, "conv", dataset)
        save_state_dict(self.conv_prompt.state_dict(), conv_dir / "model.pt")
        meta = dict(
            self.settings,
            format=FORMAT,
            size=self.size,
            backbone=BACKBONE_NAME,
            backbone_gguf=self.backbone.gguf.name,
            backbone_sha256=self.backbone.fingerprint,
            text_encoder=TEXT_ENCODER,
            text_encoder_sha256=minilm_fingerprint(),
            movie_token=MOVIE_SLOT,
            kg_entities=self.kg.n_entities_with_pad,
        )
        path = conv_dir / SETTINGS_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(meta, indent=2), encoding="utf-8")
        os.replace(tmp, path)

    def to(self, device) -> UniCRSSmall:
        for m in (self.rec_prompt, self.conv_prompt, self.lm):  # the text encoder is shared: it stays where it is
            m.to(device)
        self.item_ids = self.item_ids.to(device)
        self.invalidate()
        return self

    def invalidate(self) -> None:
        self._tables.clear()
        self._states_cache = None
        self._option_logits = None

    def set_training(self, on: bool) -> None:
        for m in (self.rec_prompt, self.conv_prompt):
            m.train(on)
        self.invalidate()

    def trainable_parameters(self) -> list[nn.Parameter]:
        return [p for m in (self.rec_prompt, self.conv_prompt) for p in m.parameters() if p.requires_grad]

    def frozen_parameters(self) -> list[nn.Parameter]:
        return list(self.lm.parameters()) + list(self.encoder_model.parameters())

    @property
    def device(self) -> torch.device:
        return self.rec_prompt.node_embeds.device

    @property
    def backbone_fingerprint(self) -> str:
        """sha256 of the packaged GGUF the prompts were trained on (the set is refused on another)."""
        return self.backbone.fingerprint

    @property
    def variant(self) -> dict[str, str]:
        return variant_text(
            self.rec_prompt.layer_prefix is not None,
            self.rec_prompt.score,
            {k: getattr(self, k) for k in WINDOW_KEYS},
        )

    @classmethod
    def variant_of(cls, root, dataset: str) -> dict[str, str]:
        try:
            meta = read_settings(Path(root), dataset)
            return variant_text(has_layer_prefix(meta), rec_score(meta), windows_of(meta))
        except CheckpointError:
            return {}

    @property
    def description(self) -> str:
        return (
            f"UniCRS (small): knowledge-graph soft prompts (an R-GCN over {self.kg.n_entities} entities fused with "
            f"{TEXT_ENCODER}'s reading of the conversation) on a frozen {BACKBONE_NAME}, which ranks the items and "
            f"writes the reply (decoded with {DECODER_WORDS[self.decoder]})"
        )

    # ---- inputs ----
    def context_ids(self, context: Sequence[str]) -> list[int]:
        """The decoder's ids of the chat-form conversation, the last ``context_max_length``."""
        ids = self.tokenizer(chat_text(context), add_special_tokens=False)["input_ids"]
        return ids[-self.context_max_length :]

    def text_ids(self, context: Sequence[str]) -> list[int]:
        """The text encoder's ids ``[CLS] … [SEP]``, the conversation left-truncated to ``text_max_length``."""
        tok = self.encoder_tokenizer
        text = encoder_text(context)
        body = tok(text, add_special_tokens=False)["input_ids"][-(self.text_max_length - 2) :] if text else []
        return [tok.cls_token_id, *body, tok.sep_token_id]

    def entity_ids(self, entities: Sequence[str]) -> list[int]:
        """The last ``entity_max_length`` linked names that are in the KG; the pad entity when none is."""
        ids = self.kg.ids_of(list(entities))[-self.entity_max_length :]
        return ids or [self.kg.pad_id]

    def token_states(self, text_ids: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """The frozen text encoder's token states (right-padded) and mask for a batch of :meth:`text_ids`."""
        width = max(len(t) for t in text_ids)
        pad = self.encoder_tokenizer.pad_token_id or 0
        dev = next(self.encoder_model.parameters()).device
        ids = torch.tensor([t + [pad] * (width - len(t)) for t in text_ids], device=dev)
        mask = torch.tensor([[1] * len(t) + [0] * (width - len(t)) for t in text_ids], device=dev)
        with torch.no_grad():
            states = self.encoder_model(input_ids=ids, attention_mask=mask).last_hidden_state
        return states.to(self.device), mask.to(self.device)

    def entity_batch(self, entity_ids: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(e) for e in entity_ids)
        pad = self.kg.pad_id
        ids = torch.tensor([e + [pad] * (width - len(e)) for e in entity_ids], device=self.device)
        mask = torch.tensor([[1] * len(e) + [0] * (width - len(e)) for e in entity_ids], device=self.device)
        return ids, mask

    def table(self, which: str) -> torch.Tensor:
        """The prompt's entity table (cached outside training)."""
        prompt = self.rec_prompt if which == "rec" else self.conv_prompt
        if prompt.training or torch.is_grad_enabled():
            return prompt.entity_table()
        if which not in self._tables:
            self._tables[which] = prompt.entity_table()
        return self._tables[which]

    def prompts(
        self, which: str, entity_ids: list[list[int]], text_ids: list[list[int]], table: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Prompt vectors and mask of a batch for ``which`` task."""
        prompt = self.rec_prompt if which == "rec" else self.conv_prompt
        key = tuple(text_ids[0]) if len(text_ids) == 1 else None
        cached = self._states_cache
        if key is not None and cached is not None and cached[0] == key and not torch.is_grad_enabled():
            states = cached[1]
        else:
            states = self.token_states(text_ids)
            if key is not None and not torch.is_grad_enabled():
                self._states_cache = (key, states)
        ents, emask = self.entity_batch(entity_ids)
        return prompt(ents, emask, states[0], states[1], self.table(which) if table is None else table)

    def assemble(
        self, prompt: torch.Tensor, prompt_mask: torch.Tensor, ids: list[list[int]]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The decoder's input: per row its real prompt vectors then the embeddings of ``ids``, left-padded; with the
        attention mask and the positions (0 at each row's first real position)."""
        embed = self.lm.get_input_embeddings()
        rows = []
        for i, seq in enumerate(ids):
            tokens = embed(torch.tensor(seq, dtype=torch.long, device=self.device))
            rows.append(torch.cat([prompt[i][prompt_mask[i].bool()], tokens], dim=0))
        width = max(r.shape[0] for r in rows)
        hidden = prompt.shape[-1]
        padded = torch.stack(
            [torch.cat([r.new_zeros(width - r.shape[0], hidden), r], dim=0) if r.shape[0] < width else r for r in rows]
        )
        mask = torch.tensor(
            [[0] * (width - r.shape[0]) + [1] * r.shape[0] for r in rows], dtype=torch.long, device=self.device
        )
        positions = (mask.cumsum(-1) - 1).clamp_min(0)
        return padded, mask, positions

    def run(self, embeds: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, cache=None):
        """The decoder's trunk (no vocabulary projection): last hidden states (float32) and the KV cache. While a
        prompt trains, the frozen decoder computes in bfloat16 where the hardware has it (:func:`train_autocast`)."""
        with train_autocast(self.device, self.rec_prompt.training or self.conv_prompt.training):
            out = self.lm.model(
                inputs_embeds=embeds, attention_mask=mask, position_ids=positions, past_key_values=cache, use_cache=True
            )
        return out.last_hidden_state.float(), out.past_key_values

    # ---- recommendation ----
    def rec_scores(
        self, entity_ids: list[list[int]], text_ids: list[list[int]], context_ids: list[list[int]]
    ) -> torch.Tensor:
        """Scores (batch, n_items) over ``kg.item_ids``: the decoder's last hidden state under the recommendation
        prompt (:meth:`SoftPrompt.query`), times the items' entity embeddings."""
        table = self.table("rec")
        prompt, pmask = self.prompts("rec", entity_ids, text_ids, table)
        embeds, mask, positions = self.assemble(prompt, pmask, context_ids)
        cache = None
        if self.rec_prompt.layer_prefix is not None:  # every prompt position is also a past key/value of each layer
            cache = self.rec_prompt.prefix_cache(prompt)
            mask = torch.cat([pmask.to(mask.dtype), mask], dim=1)
        hidden, _ = self.run(embeds, mask, positions, cache)
        query = self.rec_prompt.query(hidden[:, -1])
        return query @ table[self.item_ids].T

    def _llama_prefix(self, prompt: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        """The recommendation prompt's per-layer prefix of one row's real prompt positions (P, hidden) as llama.cpp's
        sequence state holds it (:meth:`LlamaCppDecoder.prefix_hidden`): each (layers, P, KV heads × head width), the
        keys rotated as RoPE rotates position P and in the GGUF's dimension order. llama.cpp's prompt then starts at
        position P, and its query at p + P meets a key rotated by P as the torch decoder's query at p meets the
        unrotated key: R(p + P)ᵀ R(P) = R(p)ᵀ."""
        from crs_backends.neural.smollm_llamacpp import cache_rows

        keys, values = self.rec_prompt.prefix_kv(prompt[None])  # (layers, 1, KV heads, P, head width)
        p, width = keys.shape[-2:]
        cos, sin = self.lm.model.rotary_emb(keys[0], torch.full((1, p), p, device=keys.device))  # (1, P, width)
        half = width // 2
        keys = keys * cos + torch.cat([-keys[..., half:], keys[..., :half]], dim=-1) * sin  # transformers' RoPE
        return cache_rows(keys[:, 0].float().cpu().numpy(), values[:, 0].float().cpu().numpy())

    def _llama_rec_hidden(self, prompt: torch.Tensor, pmask: torch.Tensor, context: list[int]) -> torch.Tensor | None:
        """The decoder's final hidden state under the recommendation prompt, one row, computed by llama.cpp (the
        per-layer prefix through the sequence state); None where llama.cpp cannot run it (torch then ranks)."""
        llama = self.llama_decoder()
        if llama is None:
            return None
        from crs_backends.neural.smollm_llamacpp import LlamaCppError

        real = prompt[0][pmask[0].bool()]
        vectors = real.float().cpu().numpy()
        try:
            if self.rec_prompt.layer_prefix is None:
                hidden = llama.hidden(vectors, context)
            else:
                keys, values = self._llama_prefix(real)
                hidden = llama.prefix_hidden(keys, values, vectors, context)
        except LlamaCppError as e:
            log.warning("small UniCRS: llama.cpp failed to rank (%s); this ranking runs in torch", e)
            return None
        return torch.from_numpy(hidden).to(self.device)

    @torch.inference_mode()
    def item_scores(self, inp: ConvInput, *, decoder: str | None = None) -> torch.Tensor:
        """The items' scores for ``inp``, through :attr:`ranker` (``decoder`` overrides it for this call; llama.cpp
        falls back to torch); :attr:`rank_route` says which ran."""
        entities, text, context = (
            [self.entity_ids(inp.entities)],
            [self.text_ids(inp.context)],
            [self.context_ids(inp.context)],
        )
        if (decoder or self.ranker) == "llamacpp":
            table = self.table("rec")
            prompt, pmask = self.prompts("rec", entities, text, table)
            hidden = self._llama_rec_hidden(prompt, pmask, context[0])
            if hidden is not None:
                self.rank_route = "llama.cpp"
                return self.rec_prompt.query(hidden[None])[0] @ table[self.item_ids].T
        self.rank_route = "torch"
        return self.rec_scores(entities, text, context)[0]

    def recommend(self, inp: ConvInput, k: int = TOP_K, *, decoder: str | None = None) -> list[tuple[int, float]]:
        with self._lock:
            scores = self.item_scores(inp, decoder=decoder)
        return top_items(scores, self.item_ids, k)

    def recommend_many(
        self, inps: list[ConvInput], k: int = TOP_K, batch_size: int = 16, *, decoder: str | None = None
    ) -> list[list[tuple[int, float]]]:
        """:meth:`recommend` of each input: one by one where llama.cpp ranks (:attr:`ranker`, or ``decoder``), else
        in torch ``batch_size`` at a time (left-padded; positions count from each row's first real position, so a
        row's scores are those it gets alone, up to float rounding)."""
        if (decoder or self.ranker) == "llamacpp" and self.llama_decoder() is not None:
            return [self.recommend(i, k, decoder="llamacpp") for i in inps]
        self.rank_route = "torch"
        out: list[list[tuple[int, float]]] = []
        for start in range(0, len(inps), batch_size):
            chunk = inps[start : start + batch_size]
            with self._lock, torch.inference_mode():
                scores = self.rec_scores(
                    [self.entity_ids(i.entities) for i in chunk],
                    [self.text_ids(i.context) for i in chunk],
                    [self.context_ids(i.context) for i in chunk],
                )
            out.extend(top_items(row, self.item_ids, k) for row in scores)
        return out

    # ---- conversation ----
    def _banned(self, new: list[int], n: int = 3) -> list[int]:
        """Tokens that would repeat a trigram of the reply (HF's ``no_repeat_ngram_size``), the pieces of a
        ``<movie>`` slot excepted."""
        if len(new) >= 2 and new[-2] in self.slot_open and new[-1] == self.slot_word:
            return []  # finishing a slot
        if len(new) < n - 1:
            return []
        tail = tuple(new[len(new) - (n - 1) :])
        banned = {new[i + n - 1] for i in range(len(new) - n + 1) if tuple(new[i : i + n - 1]) == tail}
        return [t for t in banned if t not in self.slot_open and t != self.slot_word]

    @torch.inference_mode()
    def generate_ids(
        self, inp: ConvInput, *, max_new_tokens: int | None = None, decoder: str | None = None
    ) -> list[int]:
        """Greedy reply ids (the end token excluded): the conversation prompt and the context in one prefill, then one
        token a step with the KV cache, through :attr:`decoder` (``decoder`` overrides it for this call;
        :attr:`reply_route` says which ran). The prefill's next-token logits are kept for the option letters
        (:meth:`option_scores`)."""
        limit = self.max_new_tokens if max_new_tokens is None else max_new_tokens
        route = decoder or self.decoder
        parts = self._conv_parts(inp)
        entities, text, context = parts
        prompt, pmask = self.prompts("conv", [entities], [text])
        llama = self.llama_decoder() if route in LLAMA_DECODERS else None
        from crs_backends.neural.smollm_llamacpp import LlamaCppError

        if llama is not None and route == "llamacpp":
            vectors = prompt[0][pmask[0].bool()].float().cpu().numpy()
            first: list = []
            try:
                ids = llama.greedy(
                    vectors, context, limit, end_ids=self.end_ids, banned=self._banned, first_logits=first
                )
                # the same pass scores the option letters (get_choice reads the reply's input: option_scores)
                self._option_logits = (parts, torch.from_numpy(first[0]), "the reply's llama.cpp prefill")
                self.reply_route = "llama.cpp"
                return ids
            except LlamaCppError as e:  # this reply is written by torch instead
                log.warning("small UniCRS: llama.cpp failed (%s); this reply is decoded with torch", e)
        embeds, mask, positions = self.assemble(prompt, pmask, [context])
        hidden, cache = self.run(embeds, mask, positions)
        logits = self.lm.lm_head(hidden[0, -1])
        self._option_logits = (parts, logits.detach().clone(), "the reply's torch prefill")
        if llama is not None and route == "torch-prefill":  # llama.cpp decodes from torch's cache
            try:
                keys, values = self._llama_cache(cache)
                ids = llama.greedy_after(
                    keys, values, logits.float().cpu().numpy(), limit, end_ids=self.end_ids, banned=self._banned
                )
                self.reply_route = "torch prefill, llama.cpp decode"
                return ids
            except LlamaCppError as e:
                log.warning("small UniCRS: llama.cpp failed (%s); this reply is decoded with torch", e)
        self.reply_route = "torch"
        n = embeds.shape[1]
        new: list[int] = []
        for _ in range(limit):
            banned = self._banned(new)
            if banned:
                logits[banned] = float("-inf")
            token = int(torch.argmax(logits))
            if token in self.end_ids:
                break
            new.append(token)
            step = self.lm.get_input_embeddings()(torch.tensor([[token]], device=self.device))
            mask = torch.ones(1, n + 1, dtype=torch.long, device=self.device)
            hidden, cache = self.run(step, mask, torch.tensor([[n]], device=self.device), cache)
            logits = self.lm.lm_head(hidden[0, -1])
            n += 1
        return new

    def _llama_cache(self, cache: Any) -> tuple[np.ndarray, np.ndarray]:
        """A one-row torch KV cache as llama.cpp's sequence state holds it: keys (already rotated by RoPE at their own
        positions) in the GGUF's dimension order, values as they are; each (layers, positions, KV heads × head
        width)."""
        from crs_backends.neural.smollm_llamacpp import cache_rows

        return cache_rows(
            torch.stack([layer.keys[0] for layer in cache.layers]).float().cpu().numpy(),
            torch.stack([layer.values[0] for layer in cache.layers]).float().cpu().numpy(),
        )

    def llama_decoder(self) -> Any:
        """The llama.cpp decoder over the backbone's GGUF, started once; None (torch decodes) where it cannot run,
        said once in the log."""
        if self._llama is None:
            from crs_backends.neural.smollm_llamacpp import LlamaCppDecoder, LlamaCppError

            try:
                self._llama = LlamaCppDecoder(
                    self.backbone.gguf, int(self.lm.config.hidden_size), threads=LLAMA_THREADS
                )
            except LlamaCppError as e:
                log.warning("small UniCRS: llama.cpp cannot decode (%s); replies are decoded with torch", e)
                self._llama = False
        return self._llama or None

    def reply_text(self, inp: ConvInput) -> str:
        with self._lock:
            ids = self.generate_ids(inp)
        return tidy(self.tokenizer.decode(ids, skip_special_tokens=True))

    def generate(self, inp: ConvInput, *, items: list[str] | None = None) -> str:
        return fill_slots(self.reply_text(inp), MOVIE_SLOT, items)

    @property
    def placeholder(self) -> str:
        return MOVIE_SLOT

    @property
    def fills_placeholder(self) -> bool:
        return True

    def _conv_parts(self, inp: ConvInput) -> tuple[list[int], list[int], list[int]]:
        """What the reply's input is made of: the entities and the text the conversation prompt reads, the context
        the decoder reads (two inputs with equal parts give the same prefill)."""
        return self.entity_ids(inp.entities), self.text_ids(inp.context), self.context_ids(inp.context)

    @torch.inference_mode()
    def option_scores(self, inp: ConvInput, options: list[str]) -> list[float]:
        """UniCRS's ``get_choice``: one new token from the reply's input (conversation prompt, context, assistant
        header); the logit of each option letter's first token. The turn's reply was just written from that same
        input (the policy asks for the reply first): its prefill's logits are read here (one pass for both, item 9 of
        #72; :attr:`option_route` says which prefill); another input gets a torch prefill of its own."""
        if not options:
            raise ValueError("no options to choose from")
        with self._lock:
            kept, self._option_logits = self._option_logits, None
            parts = self._conv_parts(inp)
            if kept is not None and kept[0] == parts:
                logits, self.option_route = kept[1], kept[2]
            else:
                entities, text, context = parts
                prompt, pmask = self.prompts("conv", [entities], [text])
                embeds, mask, positions = self.assemble(prompt, pmask, [context])
                hidden, _ = self.run(embeds, mask, positions)
                logits, self.option_route = self.lm.lm_head(hidden[0, -1]), "a torch prefill"
        letters = [self.tokenizer(o, add_special_tokens=False)["input_ids"][0] for o in options]
        return [float(logits[t]) for t in letters]


def _load_frozen() -> tuple[Backbone, Any]:
    """The shared backbone and text encoder (frozen); missing packages raise CheckpointError naming them."""
    from llm_clients.sentence_encoder import SentenceEncoderMissing, load_sentence_encoder

    backbone = load_backbone()
    try:
        encoder = load_sentence_encoder()
    except SentenceEncoderMissing as e:
        raise CheckpointError(str(e)) from e
    return backbone, encoder
