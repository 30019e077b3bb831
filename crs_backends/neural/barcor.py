"""BARCOR: BART sequence classification over KG entities (rec) + plain BART seq2seq (conv).

Module and parameter names are those of Hugging Face ``BartForSequenceClassification`` /
``BartForConditionalGeneration``, so the published ``barcor_rec_<ds>/`` and ``barcor_conv_<ds>/``
directories (``reference/checkpoint-keys.md`` §3.3, §3.4, §3.6) load with every key and shape checked
and **no renaming map** (the only liberty: the tied aliases ``model.encoder.embed_tokens.weight``,
``model.decoder.embed_tokens.weight`` and ``lm_head.weight`` may be absent, as in a safetensors re-save).

Inference follows the published code (§5.2):

- context: ``"User: "`` (even index) / ``"System: "`` (odd index) + utterance, empty utterances skipped but
  still advancing the parity, joined with ``</s>``; encoded with ``<s> … </s>`` and left-truncated to 200 tokens.
- rec: decoder input = the input shifted right (start token 2); the sentence vector is the decoder's last
  hidden state at the final ``</s>`` (index #non-pad − 1); dropout → dense → tanh → dropout → out_proj over
  ``kg.n_entities`` (pre-pad) labels; scores sliced to ``kg.item_ids``, top 50. Entities are not used.
- conv: greedy, ``max_length`` 128 (counting the decoder start token), ``min_length`` 0,
  ``no_repeat_ngram_size`` 3, ``encoder_no_repeat_ngram_size`` 3, ``forced_bos_token_id`` /
  ``forced_eos_token_id`` from the saved config; decoded without special tokens; the leading ``System:`` is
  removed with the published character-set ``lstrip('System;:')`` then ``strip()``.
  Interactive cap: ``BARCOR.max_new_tokens`` (set per size, see ``SIZES``) bounds the new tokens of one turn;
  ``None`` restores the published limit (127 new tokens).
- choice (iEvaLM attribute mode): 5 forced new tokens, processed scores of the 4th step, option ids
  ``encode(" A")[0]`` (leading space), −1e5 for options already used.

Padding: the published code right-pads single conversations to 200 tokens with an attention mask; the
padded positions are masked in the encoder and lie after the pooled position in the causal decoder, so
one conversation is run unpadded (same numbers, less work).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import cast

import torch
from torch import nn

from crs_backends.neural.barcor_backbone import (
    ARCH_KEYS,
    BART_BASE_GEN,
    CONV_ALIASES,
    MINILM_ARCH,
    MINILM_GEN,
    REC_ALIASES,
    SMALL_FILE,
    VocabLimit,
    bart_config,
    build_bart,
    decoder_state,
    load_part,
    minilm_conv_model,
    minilm_fingerprint,
    minilm_tokenizer,
    read_config,
    write_config,
)
from crs_backends.neural.checkpoints import (
    CheckpointError,
    load_strict,
    load_tokenizer,
    part_dir,
    read_state_dict,
    save_state_dict,
)
from crs_backends.neural.engine import (
    TOP_K,
    ConvInput,
    NeuralModel,
    check_vocab_fits,
    fill_slots,
    legacy_cleanup,
    pad_as_published,
    size_settings,
    top_items,
)
from crs_backends.neural.kg_reader import KGData

SYSTEM = "barcor"
HUB_TOKENIZER = "facebook/bart-base"
CONTEXT_MAX_LENGTH = 200  # published context_max_length (tokens, left-truncated)
RESP_MAX_LENGTH = 128  # published resp_max_length: generate(max_length=128) and the training target length
NO_REPEAT_NGRAM = 3
CHOICE_NEW_TOKENS = 5  # get_choice: exactly 5 new tokens, scores of the 4th step

SIZES: dict[str, dict] = {
    # ours (issue #40): the packaged all-MiniLM-L6-v2 mapped onto BART's encoder (barcor_backbone.MINILM_ARCH,
    # frozen), a two-layer reply decoder attending to it, and a recommender that fine-tunes its own copy of the
    # encoder's top ``rec_layers`` layers under BART's classification head on their mean state (the published BARCOR
    # fine-tunes a BART of its own for recommendation, barcor_rec_<ds>; REC_LAYERS_LR); new tokens per turn capped
    # for interactive use
    "small": {**MINILM_ARCH, "vocab_size": 30523, "max_new_tokens": 40, "context_max_length": 128, "rec_layers": 2},
    # random BART weights at a tiny size, for the tests of the published code path (seconds on a CPU)
    "tiny": {
        "d_model": 128,
        "encoder_layers": 2,
        "decoder_layers": 2,
        "encoder_attention_heads": 4,
        "decoder_attention_heads": 4,
        "encoder_ffn_dim": 512,
        "decoder_ffn_dim": 512,
        "vocab_size": 4000,
        "max_position_embeddings": 256,
        "max_new_tokens": 40,
    },
    # facebook/bart-base, the published size (both parts). Random weights never emit </s>, so every reply runs to
    # the cap: 48 new tokens (~95% of ReDial replies fit) keeps a turn near 1.2 s on 2 idle cores.
    "full": {
        "d_model": 768,
        "encoder_layers": 6,
        "decoder_layers": 6,
        "encoder_attention_heads": 12,
        "decoder_attention_heads": 12,
        "encoder_ffn_dim": 3072,
        "decoder_ffn_dim": 3072,
        "vocab_size": 50265,
        "max_position_embeddings": 1024,
        "max_new_tokens": 48,
    },
}
# Loaded bart-base-sized checkpoints (the published ones) generate as CRS Arena serves them: max_length 128
# (None here); trained models end their replies with </s> long before (ReDial replies: median 25, p99 65 tokens).
LOADED_MAX_NEW_TOKENS: int | None = None
AUTO = "auto"
# the small recommender's copied encoder layers train at this peak rate, its head at TrainConfig.lr. Chosen on the
# validation tenth of ReDial's training conversations (2,147 records, R@10, 3 epochs; 2026-11-27): the head alone
# over the frozen encoder .178 (10 epochs .180), with the top layer fine-tuned .194, with the top two .202
REC_LAYERS_LR = 5e-5
# ---------------------------------------------------------------------------------------------------------------
# formatting (published)


def context_text(context: list[str], sep: str = "</s>") -> str:
    """The published context string: role-prefixed non-empty utterances joined with ``sep``."""
    parts = []
    for i, utt in enumerate(context):
        if utt != "":
            parts.append(("User: " if i % 2 == 0 else "System: ") + utt)
    return sep.join(parts)


def response_prefix(context: list[str]) -> str:
    """The speaker prefix of the training target: ``System: `` after a user turn (odd context length)."""
    return "User: " if len(context) % 2 == 0 else "System: "


def strip_system(text: str) -> str:
    """As published: a character-set ``lstrip('System;:')``, then ``strip()``."""
    return text.lstrip("System;:").strip()


# ---------------------------------------------------------------------------------------------------------------


class BARCOR(NeuralModel):
    penalty_rule = "set"  # BARCOR.get_response: state[i] = -1e5
    system = SYSTEM

    def __init__(
        self,
        kg: KGData,
        tokenizer,
        rec_model,
        conv_model,
        *,
        gen: dict | None = None,
        size: str = "published",
        dataset: str = "",
        max_new_tokens: int | None = None,
        device: str = "cpu",
        rec_top: EncoderTopRecommender | None = None,
    ):
        self.kg = kg
        self.tokenizer = tokenizer
        self.tokenizer.truncation_side = "left"
        # the published sets: a BartForSequenceClassification; the small ones: ``rec_top`` over the lower layers of
        # the reply model's (frozen) encoder, no rec_model
        self.rec_model = rec_model.to(device).eval() if rec_model is not None else None
        self.rec_top = rec_top.to(device).eval() if rec_top is not None else None
        self.conv_model = conv_model.to(device).eval()
        self.gen = dict(BART_BASE_GEN if gen is None else gen)
        self.size = size
        self.dataset = dataset
        self.max_new_tokens = max_new_tokens
        self.device = device
        # the published 200, unless a (tiny) config has fewer positions; the small size's 128
        positions = [conv_model.config.max_position_embeddings]
        if rec_model is not None:
            positions.append(rec_model.config.max_position_embeddings)
        limit = SIZES["small"]["context_max_length"] if size == "small" else CONTEXT_MAX_LENGTH
        self.context_max_length = min(limit, *positions)
        self.resp_max_length = RESP_MAX_LENGTH
        if rec_model is not None:
            n = rec_model.config.num_labels
        elif rec_top is not None:
            n = cast(nn.Linear, rec_top.head.get_submodule("out_proj")).out_features
        else:
            raise ValueError("BARCOR needs a recommender: a BART classifier or a head on its encoder")
        if n != kg.n_entities:
            raise ValueError(f"rec model has {n} labels but the KG has {kg.n_entities} entities")
        items = [i for i in kg.item_ids if 0 <= i < n]
        self._item_ids = torch.tensor(items, dtype=torch.long, device=device)
        self._enc_cache: tuple[tuple[tuple[int, ...], tuple[int, ...]], object] | None = None

    # ---- construction -------------------------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        kg: KGData,
        texts: Iterable[str] | None = None,
        *,
        size: str = "small",
        seed: int = 0,
        tokenizer=None,
        vocab_size: int | None = None,
    ) -> BARCOR:
        """A new model at ``size``. ``small``: MiniLM's encoder (pretrained, frozen), a random reply decoder and
        recommendation head (``texts``, ``tokenizer``, ``vocab_size`` do not apply: the vocabulary is MiniLM's);
        other sizes: random BART weights and a local byte-level BPE tokenizer trained on ``texts`` unless given."""
        from transformers import BartForConditionalGeneration, BartForSequenceClassification

        arch = size_settings(SIZES, size)
        if size == "small":
            tokenizer = minilm_tokenizer()
            conv = minilm_conv_model(len(tokenizer), seed=seed + 1)
            torch.manual_seed(seed)
            rec = EncoderTopRecommender(conv, arch["rec_layers"], kg.n_entities)
            return cls._small(kg, tokenizer, conv, rec, "", arch, "cpu")
        if tokenizer is None:
            tokenizer = _make_tokenizer(kg, texts, vocab_size=arch["vocab_size"] if vocab_size is None else vocab_size)
        if vocab_size is None:
            vocab_size = len(tokenizer) if size == "tiny" else max(arch["vocab_size"], len(tokenizer))
        check_vocab_fits(vocab_size, tokenizer)
        rec_cfg = bart_config(arch, vocab_size=vocab_size, num_labels=kg.n_entities)
        conv_cfg = bart_config(arch, vocab_size=vocab_size)
        rec = build_bart(BartForSequenceClassification, rec_cfg, init=True, seed=seed)
        conv = build_bart(BartForConditionalGeneration, conv_cfg, init=True, seed=seed + 1)
        return cls(kg, tokenizer, rec, conv, gen=dict(BART_BASE_GEN), size=size, max_new_tokens=arch["max_new_tokens"])

    @classmethod
    def load(
        cls, root, dataset: str, kg: KGData, *, device: str = "cpu", max_new_tokens: int | None | str = AUTO
    ) -> BARCOR:
        """The published layout under ``root``; every key and shape checked, nothing half-loaded.

        ``max_new_tokens``: interactive cap on the new tokens per reply; ``None``: the published max_length 128;
        ``"auto"``: the small size's cap for our small versions, else ``LOADED_MAX_NEW_TOKENS`` (published).
        """
        from transformers import BartForConditionalGeneration, BartForSequenceClassification

        if isinstance(max_new_tokens, str) and max_new_tokens != AUTO:
            raise ValueError(f"max_new_tokens must be an int, None or {AUTO!r}, not {max_new_tokens!r}")
        rec_dir = part_dir(root, SYSTEM, "rec", dataset)
        conv_dir = part_dir(root, SYSTEM, "conv", dataset)
        for d in (rec_dir, conv_dir):
            if not d.is_dir():
                raise CheckpointError(f"checkpoint directory missing: {d}")
        if (conv_dir / SMALL_FILE).exists():
            return cls._load_small(rec_dir, conv_dir, dataset, kg, device=device, max_new_tokens=max_new_tokens)
        conv_cfg, gen, _ = read_config(conv_dir)
        rec_cfg, _, _ = read_config(rec_dir, num_labels=kg.n_entities)
        if rec_cfg.vocab_size != conv_cfg.vocab_size:
            raise CheckpointError(
                f"{rec_dir / 'config.json'} (vocab {rec_cfg.vocab_size}) and "
                f"{conv_dir / 'config.json'} (vocab {conv_cfg.vocab_size}) disagree"
            )
        rec = build_bart(BartForSequenceClassification, rec_cfg, init=False)
        load_part(rec, rec_dir, REC_ALIASES)
        conv = build_bart(BartForConditionalGeneration, conv_cfg, init=False)
        load_part(conv, conv_dir, CONV_ALIASES)
        tok_dir = conv_dir if (conv_dir / "tokenizer.json").exists() else rec_dir
        tokenizer = load_tokenizer(tok_dir, HUB_TOKENIZER)
        if len(tokenizer) > conv_cfg.vocab_size:
            raise CheckpointError(
                f"tokenizer in {tok_dir} has {len(tokenizer)} tokens, more than the model vocab "
                f"{conv_cfg.vocab_size} ({conv_dir / 'config.json'})"
            )
        size = _size_name(conv_cfg)
        if isinstance(max_new_tokens, str):  # AUTO (checked above)
            max_new_tokens = SIZES["tiny"]["max_new_tokens"] if size == "tiny" else LOADED_MAX_NEW_TOKENS
        return cls(
            kg, tokenizer, rec, conv, gen=gen, size=size, dataset=dataset, max_new_tokens=max_new_tokens, device=device
        )

    @classmethod
    def _load_small(
        cls, rec_dir, conv_dir, dataset: str, kg: KGData, *, device: str, max_new_tokens: int | None | str
    ) -> BARCOR:
        """A small set: the decoder and the recommender (its encoder layers and head) from the set, the encoder from
        the installed MiniLM package, which must be the one the set was trained on (its fingerprint)."""
        from crs_backends.neural.names import SMALL_BUILD_COMMAND

        meta = _read_json(conv_dir / SMALL_FILE)
        installed = minilm_fingerprint()
        if meta.get("encoder_sha256") != installed:
            raise CheckpointError(
                f"{conv_dir} was trained on another all-MiniLM-L6-v2 (weights {str(meta.get('encoder_sha256'))[:12]}, "
                f"installed {installed[:12]}): rebuild the set with `{SMALL_BUILD_COMMAND}`"
            )
        tokenizer = minilm_tokenizer()
        conv = minilm_conv_model(len(tokenizer))
        own = decoder_state(conv)
        state = read_state_dict(conv_dir / "decoder.pt")
        holder = nn.Module()  # a strict check of the decoder's keys and shapes alone
        for k, v in own.items():
            holder.register_buffer(k.replace(".", "__"), torch.empty_like(v))
        load_strict(holder, {k.replace(".", "__"): v for k, v in state.items()}, source=conv_dir / "decoder.pt")
        with torch.no_grad():
            for k, v in state.items():
                target = conv.get_buffer(k) if k == "final_logits_bias" else conv.get_parameter(k)
                target.copy_(v)
        rec_file = rec_dir / REC_FILE
        if not rec_file.exists():
            raise CheckpointError(
                f"{rec_dir} holds no {REC_FILE} (a set of an older BARCOR small): rebuild the set with "
                f"`{SMALL_BUILD_COMMAND}`"
            )
        layers = meta.get("rec_layers", 0)
        if not isinstance(layers, int) or isinstance(layers, bool):
            raise CheckpointError(f"{conv_dir / SMALL_FILE}: rec_layers is {layers!r}, not a number of layers")
        rec = EncoderTopRecommender(conv, layers, kg.n_entities)
        load_strict(rec, read_state_dict(rec_file), source=rec_file)
        arch = {**SIZES["small"], **({} if isinstance(max_new_tokens, str) else {"max_new_tokens": max_new_tokens})}
        return cls._small(kg, tokenizer, conv, rec, dataset, arch, device)

    @classmethod
    def _small(
        cls, kg: KGData, tokenizer, conv, rec: EncoderTopRecommender, dataset: str, arch: dict, device: str
    ) -> BARCOR:
        return cls(
            kg,
            tokenizer,
            None,
            conv,
            gen=dict(MINILM_GEN),
            size="small",
            dataset=dataset,
            max_new_tokens=arch["max_new_tokens"],
            device=device,
            rec_top=rec,
        )

    def save(self, root, dataset: str) -> None:
        """``barcor_rec_<ds>/`` and ``barcor_conv_<ds>/``: config.json + pytorch_model.bin (all published keys,
        tied aliases included, as transformers 4.28 wrote them) + our tokenizer files. A small set holds what it
        learned only (``conv``: ``decoder.pt``; ``rec``: :data:`REC_FILE`, its encoder layers and head), the encoder's
        fingerprint in :data:`SMALL_FILE` and the config; the encoder comes from the installed package."""
        if self.size == "small" and self.rec_top is not None:
            meta = {
                "encoder": "all-MiniLM-L6-v2",
                "encoder_sha256": minilm_fingerprint(),
                "pooling": "mean",
                "rec_layers": len(self.rec_top.layers),
            }
            conv_dir = part_dir(root, SYSTEM, "conv", dataset)
            rec_dir = part_dir(root, SYSTEM, "rec", dataset)
            write_config(self.conv_model.config, conv_dir, architecture="BartForConditionalGeneration", gen=self.gen)
            save_state_dict(decoder_state(self.conv_model), conv_dir / "decoder.pt")
            save_state_dict(self.rec_top.state_dict(), rec_dir / REC_FILE)
            for d in (conv_dir, rec_dir):
                _write_json(d / SMALL_FILE, meta)
            return
        for part, module, arch, gen in (
            ("rec", self.rec_model, "BartForSequenceClassification", None),
            ("conv", self.conv_model, "BartForConditionalGeneration", self.gen),
        ):
            if module is None:
                continue
            d = part_dir(root, SYSTEM, part, dataset)
            d.mkdir(parents=True, exist_ok=True)
            write_config(module.config, d, architecture=arch, gen=gen)
            stale = d / "model.safetensors"  # it would shadow the new bin in hf_weights_file
            if stale.exists():
                stale.unlink()
            save_state_dict(module.state_dict(), d / "pytorch_model.bin")
            self.tokenizer.save_pretrained(str(d))

    # ---- inputs ---------------------------------------------------------------------------------------------
    @property
    def backbone_fingerprint(self) -> str:
        """The small size's pretrained encoder (sha256 of the packaged MiniLM weights); '' for other sizes."""
        return minilm_fingerprint() if self.rec_top is not None else ""

    @property
    def description(self) -> str:
        if self.rec_top is not None:
            dec = self.conv_model.config.decoder_layers
            top = len(self.rec_top.layers)
            return (
                f"BARCOR (small: all-MiniLM-L6-v2 as BART's encoder, frozen; a {dec}-layer reply decoder, and a "
                f"recommender fine-tuning its own copy of the encoder's top {top} layers under a classification head "
                "on their mean state; trained on ReDial)"
            )
        return f"BARCOR ({self.size}{', ' + self.dataset if self.dataset else ''})"

    def context_ids(self, context: list[str]) -> list[int]:
        text = context_text(context, self.tokenizer.sep_token or "</s>")
        return self.tokenizer(text, truncation=True, max_length=self.context_max_length)["input_ids"]

    def _tensor(self, ids: list[int]) -> torch.Tensor:
        return torch.tensor([ids], dtype=torch.long, device=self.device)

    # ---- recommendation -------------------------------------------------------------------------------------
    def rec_logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Entity logits (B, n_entities): the published pooling (the rec model's decoder state at the final
        ``</s>``, right-padded batches), or the small recommender over the frozen encoder's lower layers."""
        from transformers.models.bart.modeling_bart import shift_tokens_right

        if self.rec_top is not None:
            states = self.conv_model.get_encoder()(
                input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True
            )
            return self.rec_top(self.rec_top.input_of(states), attention_mask)
        if self.rec_model is None:  # pragma: no cover - __init__ requires one of the two
            raise CheckpointError("this BARCOR has no recommender")
        cfg = self.rec_model.config
        decoder_input_ids = shift_tokens_right(input_ids, cfg.pad_token_id, cfg.decoder_start_token_id)
        out = self.rec_model.model(
            input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids, use_cache=False
        )
        hidden = out.last_hidden_state
        last = attention_mask.sum(dim=1).long() - 1  # the final </s> of input_ids
        sentence = hidden[torch.arange(hidden.size(0), device=hidden.device), last]
        return self.rec_model.classification_head(sentence)

    @torch.inference_mode()
    def recommend(self, inp: ConvInput, k: int = TOP_K) -> list[tuple[int, float]]:
        if k <= 0 or self._item_ids.numel() == 0:
            return []
        if self.rec_top is not None:  # the encoder already read this context for the reply: reuse it
            ids = self.context_ids(inp.context)
            enc = self._encoder_outputs(ids, [1] * len(ids))
            logits = self.rec_top(self.rec_top.input_of(enc), self._tensor([1] * len(ids)))[0]
        else:
            t = self._tensor(self.context_ids(inp.context))
            logits = self.rec_logits(t, torch.ones_like(t))[0]
        return top_items(logits[self._item_ids], self._item_ids, k)

    # ---- conversation ---------------------------------------------------------------------------------------
    def conv_inputs(self, inp: ConvInput) -> tuple[list[int], list[int]]:
        """Encoder ids and attention mask of a reply. ``inp.served`` (CRS Arena's input): right-padded to
        ``context_max_length`` as ``src/model/BARCOR.py`` L194-207 pads it (``padding="max_length"``, multiple of
        8), so ``encoder_no_repeat_ngram_size`` sees the pads as the published generation did; else unpadded."""
        ids = self.context_ids(inp.context)
        if inp.served:
            return pad_as_published(ids, self.context_max_length, self.conv_model.config.pad_token_id)
        return ids, [1] * len(ids)

    def _encoder_outputs(self, ids: list[int], mask: list[int]):
        """The conv encoder's output for ``ids`` (with every layer's states where a small recommender reads a lower
        one); the last one is reused (generate + choose in one turn)."""
        key = (tuple(ids), tuple(mask))
        cached = self._enc_cache  # one read: another thread may replace it
        if cached is not None and cached[0] == key:
            return cached[1]
        enc = self.conv_model.get_encoder()(
            input_ids=self._tensor(ids),
            attention_mask=self._tensor(mask),
            output_hidden_states=self.rec_top is not None,
        )
        self._enc_cache = (key, enc)
        return enc

    def _processors(self):
        from transformers import LogitsProcessorList

        extra = LogitsProcessorList()
        if len(self.tokenizer) < self.conv_model.config.vocab_size:
            extra.append(VocabLimit(len(self.tokenizer)))
        return extra

    def _generation_config(self, **overrides):
        from transformers import GenerationConfig

        cfg = self.conv_model.config
        settings = dict(
            decoder_start_token_id=cfg.decoder_start_token_id,
            bos_token_id=cfg.bos_token_id,
            eos_token_id=cfg.eos_token_id,
            pad_token_id=cfg.pad_token_id,
            num_beams=1,
            do_sample=False,
            min_length=0,
            no_repeat_ngram_size=NO_REPEAT_NGRAM,
            encoder_no_repeat_ngram_size=NO_REPEAT_NGRAM,
            forced_bos_token_id=self.gen.get("forced_bos_token_id"),
            forced_eos_token_id=self.gen.get("forced_eos_token_id"),
            use_cache=True,
        )
        if "max_new_tokens" in overrides:
            pass
        elif self.max_new_tokens is None:
            settings["max_length"] = self.resp_max_length
        else:
            settings["max_new_tokens"] = max(1, min(self.max_new_tokens, self.resp_max_length - 1))
        settings.update(overrides)
        if "min_new_tokens" in overrides:
            settings.pop("min_length")
        return GenerationConfig(**settings)

    @torch.inference_mode()
    def generate_ids(self, inp: ConvInput, *, use_cache: bool = True, reuse_encoder: bool = True) -> list[int]:
        """Greedy reply token ids (decoder start token and forced ``<s>`` included), as published."""
        ids, mask = self.conv_inputs(inp)
        kwargs = {}
        if reuse_encoder:
            kwargs["encoder_outputs"] = self._encoder_outputs(ids, mask)
        out = self.conv_model.generate(
            input_ids=self._tensor(ids),
            attention_mask=self._tensor(mask),
            generation_config=self._generation_config(use_cache=use_cache),
            logits_processor=self._processors(),
            **kwargs,
        )
        return out[0].tolist()

    def reply_text(self, inp: ConvInput) -> str:
        """The reply as BARCOR.get_response shows it: decoded (published sizes with transformers 4.28's clean-up,
        :func:`legacy_cleanup`), then ``lstrip("System;:").strip()``."""
        ids = self.generate_ids(inp)
        if self.size == "small":
            return strip_system(wordpiece_text(self.tokenizer.decode(ids, skip_special_tokens=True)))
        return strip_system(legacy_cleanup(self.tokenizer.decode(ids, skip_special_tokens=True)))

    def generate(self, inp: ConvInput, *, items: list[str] | None = None) -> str:
        return fill_slots(self.reply_text(inp), self.placeholder, items)

    @torch.inference_mode()
    def prepared_modules(self) -> list[nn.Module]:
        return [self.conv_model]  # src/model/BARCOR.py prepares its conversation model alone

    def option_scores(self, inp: ConvInput, options: list[str]) -> list[float]:
        """get_choice as iai-group/iEvaLM-CRS ``src/model/BARCOR.py`` computes it: 5 new tokens; the processed
        scores of the 4th step at each option's first token with a leading space (" A")."""
        if not options:
            raise ValueError("no options to choose from")
        ids, mask = self.conv_inputs(inp)
        gcfg = self._generation_config(
            min_new_tokens=CHOICE_NEW_TOKENS,
            max_new_tokens=CHOICE_NEW_TOKENS,
            encoder_no_repeat_ngram_size=0,
            no_repeat_ngram_size=self.gen.get("no_repeat_ngram_size") or 0,
            return_dict_in_generate=True,
            output_scores=True,
        )
        out = self.conv_model.generate(
            input_ids=self._tensor(ids),
            attention_mask=self._tensor(mask),
            generation_config=gcfg,
            logits_processor=self._processors(),
            encoder_outputs=self._encoder_outputs(ids, mask),
        )
        step = out.scores[-2][0]
        option_ids = []
        for op in options:
            enc = self.tokenizer.encode(f" {op}", add_special_tokens=False)
            option_ids.append(enc[0] if enc else self.tokenizer.unk_token_id)
        return [float(step[i]) for i in option_ids]


_SPACE_BEFORE = re.compile(r" ([.,!?:;)%]|n't\b)")
_APOSTROPHE = re.compile(r"(\w) ' (s|t|re|ve|ll|d|m)\b")


def wordpiece_text(text: str) -> str:
    """BERT's decoded WordPiece text written as text: no space before punctuation or inside a contraction
    ("system : it ' s" -> "system: it's"); the words are the model's (lower case: MiniLM's vocabulary is uncased)."""
    return _SPACE_BEFORE.sub(r"\1", _APOSTROPHE.sub(r"\1'\2", text)).replace("( ", "(")


def rec_head(d_model: int, n_entities: int) -> nn.Module:
    """BART's classification head (dense, tanh, out_proj) over the KG's entities: BARCOR's recommender head."""
    from transformers.models.bart.modeling_bart import BartClassificationHead

    return BartClassificationHead(d_model, d_model, n_entities, 0.0)


REC_FILE = "recommender.pt"  # the small recommender's learned weights: its copied encoder layers and its head


class EncoderTopRecommender(nn.Module):
    """The small BARCOR's recommender: its own trainable copy of the encoder's top ``n_layers`` layers (initialised
    from the pretrained MiniLM ones), reading the frozen encoder's states below them, and BART's classification
    head on the mean of their output over the real tokens. No knowledge graph: the text is all it reads. With
    ``n_layers`` 0 it is the head over the frozen encoder's final states."""

    def __init__(self, conv_model, n_layers: int, n_entities: int):
        import copy

        super().__init__()
        encoder = conv_model.get_encoder()
        total = len(encoder.layers)
        if not 0 <= n_layers <= total:
            raise CheckpointError(f"the recommender cannot copy {n_layers} of the encoder's {total} layers")
        self.split = total - n_layers  # reads hidden_states[split]: the output of the encoder's first ``split`` layers
        self.layers = nn.ModuleList(copy.deepcopy(layer) for layer in encoder.layers[self.split :])
        for p in self.layers.parameters():
            p.requires_grad_(True)
        self.head = rec_head(conv_model.config.d_model, n_entities)
        self._config = conv_model.config

    def input_of(self, encoder_output) -> torch.Tensor:
        """The frozen encoder's states this recommender reads (its output run with ``output_hidden_states``)."""
        return encoder_output.hidden_states[self.split]

    def forward(self, states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Entity logits (B, n_entities) from the frozen encoder's states below the copied layers."""
        from transformers.masking_utils import create_bidirectional_mask

        hidden = states
        if len(self.layers):
            mask = create_bidirectional_mask(config=self._config, inputs_embeds=states, attention_mask=attention_mask)
            for layer in self.layers:
                out = layer(hidden, attention_mask=mask)
                hidden = out[0] if isinstance(out, tuple) else out
        return self.head(mean_state(hidden, attention_mask))


def mean_state(states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The encoder's mean state over the real tokens (MiniLM's own sentence pooling)."""
    m = mask.unsqueeze(-1).to(states.dtype)
    return (states * m).sum(dim=1) / m.sum(dim=1).clamp_min(1.0)


def _read_json(path) -> dict:
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CheckpointError(f"cannot read {path}: {e}") from e
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} is not a JSON object")
    return data


def _write_json(path, data: dict) -> None:
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def _size_name(cfg) -> str:
    for name, arch in SIZES.items():
        if all(getattr(cfg, k) == arch[k] for k in ARCH_KEYS if k != "max_position_embeddings"):
            return name if name != "full" else "bart-base"
    return f"d{cfg.d_model}-{cfg.encoder_layers}+{cfg.decoder_layers}"


_FALLBACK_TEXTS = [
    "Hi, what kind of movies do you like?",
    "I like comedies and action movies.",
    "Have you seen it?",
    "I would recommend this one, it is a great movie.",
    "Thanks, I will watch it.",
    "System: User:",
]


def _make_tokenizer(kg: KGData, texts: Iterable[str] | None, *, vocab_size: int):
    from crs_backends.neural.tokenizer import train_tokenizer

    if texts is None:
        try:  # the published tokenizer when the Hub (or its cache) is reachable
            return load_tokenizer(None, HUB_TOKENIZER)
        except CheckpointError:
            texts = list(_FALLBACK_TEXTS) + list(kg.entity2id)
    texts = list(texts)
    # the role prefixes are part of every input and target
    texts += ["User: " + t for t in texts[:2000]] + ["System: " + t for t in texts[:2000]]
    return train_tokenizer(texts, style="bart", vocab_size=vocab_size)
