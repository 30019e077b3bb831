"""UniCRS: GPT-2 steered by knowledge-graph prompts (prefix keys/values), RoBERTa as the context encoder.

Two :class:`~crs_backends.neural.unicrs_prompt.KGPrompt` modules (recommendation and conversation)
turn the conversation's entities and its RoBERTa token states into per-layer key/value prefixes for
a GPT-2. Recommendation scores are the GPT-2's last hidden state times the rec prompt's entity
table; replies are greedy continuations of the context plus ``System:``, with the movie slot token
filled with the top recommended items (``reference/checkpoint-keys.md`` §3.5, §5.2, §6).

Published layout (loaded strictly; a wrong/missing/extra key or shape raises CheckpointError naming
the file): ``unicrs_rec_<ds>/model.pt``, ``unicrs_conv_<ds>/model.pt`` (KGPrompt state dicts, no
edge tensors; ``rec_prefix_*`` / ``conv_prefix_*`` keys are optional: when a file has them the
module is built with that many prefix tokens and uses them, otherwise there are none, as in the
published files). Backbones: ``<root>/unicrs_gpt2_<ds>/`` and ``<root>/unicrs_roberta_<ds>/``
(config.json + model.safetensors + tokenizer.json, written by :meth:`UniCRS.save` for our versions),
else ``microsoft/DialoGPT-small`` / ``roberta-base`` from the Hub with the published special tokens.

Deviations from the 2023 code, on purpose:
- GPT-2 positions are ``cumsum(mask) - 1`` both for recommendation and for generation (the published
  code passes these to ``generate`` but transformers 4.28 discarded them); the left padding therefore
  changes nothing and single conversations are run unpadded. Under the ``crs_arena_exact`` policy the reply
  and the option choice run as CRS Arena ran them instead: left-padded, positions from 0 across the padding
  (:meth:`UniCRS.reply_input`).
- Generation is our own greedy loop with a KV cache seeded by the prompt (a new cache every call),
  ``no_repeat_ngram_size`` 3 over context + reply. ``max_new_tokens`` is the published 128 (ReDial) /
  64 (OpenDialKG) in :attr:`UniCRS.resp_max_length` for evaluation, but interactive turns are capped at
  :attr:`UniCRS.max_new_tokens` (small 40, full 32) to keep a CPU turn short.
  Measured on 2 CPU cores (random weights, which never stop early): full 1.23 s/turn median with 32 new
  tokens, 4.23 s with the published 128; small 0.07 s with 40.
- Small size (a cheap configuration of this architecture, for tests; the small local version of UniCRS is
  :mod:`crs_backends.neural.unicrs_smollm`, frozen SmolLM2 with input-level prompts, and sets saved with
  ``unicrs_conv_<ds>/smollm.json`` load as that): the backbones are tiny GPT-2 / RoBERTa models trained from
  scratch together with the prompts (no pretrained weights offline), without dropout, and the context is 64 tokens
  instead of 128 (RoBERTa always runs on the full padded length, so this halves the cost of a training step); the full
  size freezes the backbones and keeps every published length.
- Training is joint: one optimizer step adds the rec and the conv loss (the small backbones are shared).
- ``generate(items=...)`` fills the slots by CRS Arena's rule (:func:`engine.fill_slots`), the one slot filler.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from crs_backends.neural.checkpoints import (
    CheckpointError,
    load_tokenizer,
    part_dir,
    read_state_dict,
    save_state_dict,
)
from crs_backends.neural.engine import (
    MOVIE_SLOT,
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
from crs_backends.neural.published_init import resize_as_crs_arena
from crs_backends.neural.unicrs_backbone import (
    gpt2_config,
    hub_cached,
    load_backbone,
    local_corpus,
    prepare_hub_tokenizers,
    roberta_config,
    save_backbone,
    without_prefix,
)
from crs_backends.neural.unicrs_prompt import KGPrompt, prefix_sizes
from crs_backends.neural.unicrs_text import turn_texts

if TYPE_CHECKING:  # transformers is imported where it is used, so importing this module stays cheap
    from transformers import GPT2LMHeadModel, RobertaModel

log = logging.getLogger(__name__)

SYSTEM = "unicrs"
GPT2_HUB = "microsoft/DialoGPT-small"
ROBERTA_HUB = "roberta-base"
N_BLOCK = 2  # key + value
NUM_BASES = 8  # published default (script/chat.py, arena YAMLs)
BOT_PROMPT = "System:"
SETTINGS_FILE = "unicrs.json"

SIZES: dict[str, dict] = {
    "tiny": {  # tiny backbones trained from scratch with the prompts, for the tests of the published code (seconds)
        "n_embd": 128,
        "n_layer": 2,
        "n_head": 4,
        "n_positions": 512,
        "text_hidden": 128,
        "text_layers": 2,
        "text_heads": 4,
        "text_ffn": 256,
        "text_positions": 136,
        "vocab_size": 4000,
        "context_max_length": 64,
        "entity_max_length": 43,
        "resp_max_length": 64,
        "max_new_tokens": 40,
        "frozen": False,
        "dropout": 0.0,  # few CPU steps: no dropout (it cost 11% of a step)
    },
    "full": {  # published: DialoGPT-small + roberta-base (frozen), ctx 128, 43 entities, 128 new tokens
        "n_embd": 768,
        "n_layer": 12,
        "n_head": 12,
        "n_positions": 1024,
        "text_hidden": 768,
        "text_layers": 12,
        "text_heads": 12,
        "text_ffn": 3072,
        "text_positions": 514,
        "gpt2_vocab": 50259,
        "text_vocab": 50266,
        "context_max_length": 128,
        "entity_max_length": 43,
        "resp_max_length": 128,
        "max_new_tokens": 32,
        "frozen": True,
    },
}
_DATASET_DEFAULTS = {"redial": (43, 128, "<movie>"), "opendialkg": (20, 64, "<mask>")}


# ---------------------------------------------------------------------------------------------------------------
# the model


class UniCRS(NeuralModel):
    system = SYSTEM

    def __init__(
        self,
        kg: KGData,
        gpt2: GPT2LMHeadModel,
        roberta: RobertaModel,
        tokenizer,
        prompt_tokenizer,
        *,
        size: str,
        movie_token: str,
        settings: dict,
        backbone_source: str,
        prefixes: tuple[tuple[int | None, int | None], tuple[int | None, int | None]] = ((None, None), (None, None)),
    ):
        self.kg = kg
        self.gpt2 = gpt2.eval()
        self.roberta = roberta.eval()
        self.tokenizer = tokenizer
        self.prompt_tokenizer = prompt_tokenizer
        self.size = size
        self.movie_token = movie_token
        self.settings = dict(settings)
        self.backbone_source = backbone_source  # "local" (saved with the checkpoints) | "hub" | "random"
        self.context_max_length = int(settings["context_max_length"])
        self.entity_max_length = int(settings["entity_max_length"])
        self.resp_max_length = int(settings["resp_max_length"])
        self.max_new_tokens = int(settings["max_new_tokens"])
        self.frozen = bool(settings["frozen"])
        cfg = gpt2.config
        edge_index, edge_type = kg.edges
        prompt = partial(
            KGPrompt,
            hidden_size=cfg.n_embd,
            token_hidden_size=roberta.config.hidden_size,
            n_head=cfg.n_head,
            n_layer=cfg.n_layer,
            n_block=N_BLOCK,
            n_entity=kg.n_entities_with_pad,
            num_relations=kg.n_relations,
            num_bases=NUM_BASES,
            edge_index=edge_index,
            edge_type=edge_type,
        )
        self.rec_prompt = prompt(n_prefix_rec=prefixes[0][0], n_prefix_conv=prefixes[0][1]).eval()
        self.conv_prompt = prompt(n_prefix_rec=prefixes[1][0], n_prefix_conv=prefixes[1][1]).eval()
        self.item_ids = torch.tensor(kg.item_ids, dtype=torch.long)
        self.eos_id = tokenizer.eos_token_id
        self.pad_id = tokenizer.pad_token_id
        self.bot_ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(BOT_PROMPT))
        self._tables: dict[str, torch.Tensor] = {}
        self._token_cache: tuple[tuple[int, ...], torch.Tensor] | None = None
        if self.frozen:
            for p in list(self.gpt2.parameters()) + list(self.roberta.parameters()):
                p.requires_grad_(False)

    # ---- construction ----
    @classmethod
    def create(
        cls,
        kg: KGData,
        texts: Iterable[str] | None = None,
        *,
        size: str = "tiny",
        seed: int = 0,
        tokenizer=None,
        vocab_size: int | None = None,
        dataset: str | None = None,
    ) -> UniCRS:
        """Random initialisation at a size. ``tokenizer`` may be a ``(gpt2, roberta)`` pair.

        Full size uses DialoGPT-small + roberta-base when they are in the local Hugging Face cache,
        else random backbones at the published sizes (vocab 50,259 / 50,266 unless ``vocab_size``).
        """
        from transformers import GPT2LMHeadModel, RobertaModel

        s = dict(size_settings(SIZES, size))
        ent_len, resp_len, hub_movie = _DATASET_DEFAULTS.get(
            dataset or "", (s["entity_max_length"], s["resp_max_length"], MOVIE_SLOT)
        )
        torch.manual_seed(seed)
        source = "random"
        movie = MOVIE_SLOT
        if size == "full" and tokenizer is None and hub_cached(GPT2_HUB) and hub_cached(ROBERTA_HUB):
            from transformers import AutoTokenizer

            movie = hub_movie
            gtok, ptok = prepare_hub_tokenizers(
                AutoTokenizer.from_pretrained(GPT2_HUB), AutoTokenizer.from_pretrained(ROBERTA_HUB), movie
            )
            gpt2 = GPT2LMHeadModel.from_pretrained(GPT2_HUB)
            gpt2.resize_token_embeddings(len(gtok))
            gpt2.config.pad_token_id = gtok.pad_token_id
            roberta = RobertaModel.from_pretrained(ROBERTA_HUB)
            roberta.resize_token_embeddings(len(ptok))
            source = "hub"
            s.update(entity_max_length=ent_len, resp_max_length=resp_len)
        else:
            if tokenizer is not None:
                gtok, ptok = tokenizer
            else:
                from crs_backends.neural.tokenizer import train_tokenizer

                corpus = local_corpus(kg, texts)
                vs = s.get("vocab_size", 4000)
                gtok = train_tokenizer(corpus, style="gpt2", vocab_size=vs)
                ptok = train_tokenizer(corpus, style="roberta", vocab_size=vs)
            gtok.padding_side = "left"
            gv = vocab_size or s.get("gpt2_vocab") or len(gtok)
            pv = vocab_size or s.get("text_vocab") or len(ptok)
            check_vocab_fits(gv, gtok)
            check_vocab_fits(pv, ptok)
            gpt2 = GPT2LMHeadModel(gpt2_config(gv, s, gtok.eos_token_id, gtok.pad_token_id))
            roberta = RobertaModel(roberta_config(pv, s, ptok), add_pooling_layer=True)
        settings = {
            k: s[k] for k in ("context_max_length", "entity_max_length", "resp_max_length", "max_new_tokens", "frozen")
        }
        return cls(
            kg, gpt2, roberta, gtok, ptok, size=size, movie_token=movie, settings=settings, backbone_source=source
        )

    @classmethod
    def load(cls, root, dataset: str, kg: KGData, *, device: str = "cpu") -> UniCRS:
        """The published layout under ``root`` (see the module docstring); nothing is half-loaded on error. A small
        set's UniCRS (:mod:`crs_backends.neural.unicrs_smollm`) is loaded as what it is."""
        from crs_backends.neural.checkpoints import load_strict
        from crs_backends.neural.unicrs_smollm import UniCRSSmall
        from crs_backends.neural.unicrs_smollm_settings import is_smollm_set

        root = Path(root)
        if is_smollm_set(root, dataset):
            return UniCRSSmall.load(root, dataset, kg, device=device)  # type: ignore[return-value]
        rec_file = part_dir(root, SYSTEM, "rec", dataset) / "model.pt"
        conv_file = part_dir(root, SYSTEM, "conv", dataset) / "model.pt"
        rec_state = read_state_dict(rec_file)
        conv_state = read_state_dict(conv_file)
        gdir, pdir = root / f"unicrs_gpt2_{dataset}", root / f"unicrs_roberta_{dataset}"
        ent_len, resp_len, hub_movie = _DATASET_DEFAULTS.get(dataset, (43, 128, MOVIE_SLOT))
        settings = {
            "context_max_length": 128,
            "entity_max_length": ent_len,
            "resp_max_length": resp_len,
            "max_new_tokens": resp_len,
            "frozen": True,
        }  # published: generate(max_new_tokens=resp_max_length)
        size, movie = "published", hub_movie
        if gdir.exists() or pdir.exists():
            for d in (gdir, pdir):
                if not d.exists():
                    raise CheckpointError(f"backbone directory missing: {d} (the other UniCRS backbone is there)")
            gpt2, roberta = load_backbone(gdir, "gpt2"), load_backbone(pdir, "roberta")
            gtok = load_tokenizer(gdir, GPT2_HUB)
            ptok = load_tokenizer(pdir, ROBERTA_HUB)
            meta_path = gdir / SETTINGS_FILE
            if meta_path.exists():
                try:
                    meta = json.loads(meta_path.read_text(encoding="utf-8"))
                except ValueError as e:
                    raise CheckpointError(f"{meta_path} is not valid JSON: {e}") from e
                settings.update({k: meta[k] for k in settings if k in meta})
                size, movie = meta.get("size", "local"), meta.get("movie_token", MOVIE_SLOT)
            source = "local"
            if len(gtok) > gpt2.config.vocab_size or len(ptok) > roberta.config.vocab_size:
                raise CheckpointError(f"tokenizers in {gdir} / {pdir} are larger than their backbones' vocabularies")
        else:
            from transformers import AutoTokenizer, GPT2LMHeadModel, RobertaModel

            try:
                gtok, ptok = prepare_hub_tokenizers(
                    AutoTokenizer.from_pretrained(GPT2_HUB), AutoTokenizer.from_pretrained(ROBERTA_HUB), movie
                )
                gpt2 = GPT2LMHeadModel.from_pretrained(GPT2_HUB)
                roberta = RobertaModel.from_pretrained(ROBERTA_HUB)
            except Exception as e:
                raise CheckpointError(
                    f"UniCRS backbones: neither {gdir} nor the Hub models {GPT2_HUB} / {ROBERTA_HUB} are available "
                    f"({type(e).__name__}: {e})"
                ) from e
            # iEvaLM (transformers 4.28, set_seed(42) from the CRS Arena config) resizes with the old default: the
            # added <pad>/<movie> rows drawn from N(0, initializer_range), not transformers 5's mean resizing, and
            # from the random numbers left after building both models (published_init)
            resize_as_crs_arena(gpt2, roberta, len(gtok), len(ptok))
            gpt2.config.pad_token_id = gtok.pad_token_id
            source = "hub"
            # iEvaLM builds KGPrompt without n_prefix_rec/n_prefix_conv and loads with strict=False: prefix
            # weights in a file are ignored there, so they are here
            rec_state, conv_state = without_prefix(rec_state), without_prefix(conv_state)
        gtok.padding_side = "left"
        model = cls(
            kg,
            gpt2,
            roberta,
            gtok,
            ptok,
            size=size,
            movie_token=movie,
            settings=settings,
            backbone_source=source,
            prefixes=(prefix_sizes(rec_state), prefix_sizes(conv_state)),
        )
        load_strict(model.rec_prompt, rec_state, source=rec_file)
        load_strict(model.conv_prompt, conv_state, source=conv_file)
        model.invalidate()
        return model.to(device)

    def save(self, root, dataset: str) -> None:
        """``unicrs_{rec,conv}_<ds>/model.pt`` (+ backbones, tokenizers and settings unless they come from the Hub)."""
        root = Path(root)
        save_state_dict(self.rec_prompt.state_dict(), part_dir(root, SYSTEM, "rec", dataset) / "model.pt")
        save_state_dict(self.conv_prompt.state_dict(), part_dir(root, SYSTEM, "conv", dataset) / "model.pt")
        if self.backbone_source == "hub":
            return
        gdir, pdir = root / f"unicrs_gpt2_{dataset}", root / f"unicrs_roberta_{dataset}"
        save_backbone(self.gpt2, gdir)
        save_backbone(self.roberta, pdir)
        self.tokenizer.save_pretrained(str(gdir))
        self.prompt_tokenizer.save_pretrained(str(pdir))
        meta = dict(
            self.settings,
            size=self.size if self.size != "published" else "local",
            movie_token=self.movie_token,
            kg_entities=self.kg.n_entities_with_pad,
        )
        (gdir / SETTINGS_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")

    def to(self, device) -> UniCRS:
        for m in self.modules():
            m.to(device)
        self.item_ids = self.item_ids.to(device)
        self.invalidate()
        return self

    def modules(self) -> list[nn.Module]:
        return [self.gpt2, self.roberta, self.rec_prompt, self.conv_prompt]

    def trainable_parameters(self) -> list[nn.Parameter]:
        mods = [self.rec_prompt, self.conv_prompt] if self.frozen else self.modules()
        return [p for m in mods for p in m.parameters() if p.requires_grad]

    def invalidate(self) -> None:
        self._tables.clear()
        self._token_cache = None

    @property
    def device(self) -> torch.device:
        return self.rec_prompt.node_embeds.device

    @property
    def description(self) -> str:
        base = (
            f"UniCRS ({self.size}; GPT-2 {self.gpt2.config.n_layer}x{self.gpt2.config.n_embd}, {self.backbone_source}"
        )
        return base + ")"

    # ---- inputs ----
    def context_ids(self, context: Sequence[str]) -> list[int]:
        """GPT-2 ids: turns joined by eos plus a trailing eos, left-truncated to ``context_max_length``."""
        eos = self.tokenizer.eos_token
        text = eos.join(turn_texts(context)) + eos
        return self.tokenizer(text, add_special_tokens=False)["input_ids"][-self.context_max_length :]

    def prompt_ids(self, context: Sequence[str]) -> tuple[list[int], list[int]]:
        """RoBERTa ids ``<s> … </s>`` (left-truncated) right-padded to ``context_max_length`` + mask."""
        tok = self.prompt_tokenizer
        text = tok.sep_token.join(turn_texts(context))
        body = tok(text, add_special_tokens=False)["input_ids"][-(self.context_max_length - 2) :] if text else []
        ids = [tok.bos_token_id] + body + [tok.eos_token_id]
        pad = self.context_max_length - len(ids)
        return ids + [tok.pad_token_id] * pad, [1] * len(ids) + [0] * pad

    def entity_ids(self, entities: Sequence[str]) -> list[int]:
        """Ids of the last ``entity_max_length`` names that are in the KG; ``[pad]`` when none."""
        ids = self.kg.ids_of(list(entities)[-self.entity_max_length :])
        return ids or [self.kg.pad_id]

    # ---- pieces ----
    def _table(self, which: str) -> torch.Tensor:
        prompt = self.rec_prompt if which == "rec" else self.conv_prompt
        if prompt.training or torch.is_grad_enabled():
            return prompt.get_entity_embeds()
        if which not in self._tables:
            self._tables[which] = prompt.get_entity_embeds()
        return self._tables[which]

    def _token_embeds(self, context: Sequence[str]) -> torch.Tensor:
        ids, mask = self.prompt_ids(context)
        key = tuple(ids)
        if self._token_cache is not None and self._token_cache[0] == key and not torch.is_grad_enabled():
            return self._token_cache[1]
        t = torch.tensor([ids], device=self.device)
        m = torch.tensor([mask], device=self.device)
        out = self.roberta(input_ids=t, attention_mask=m).last_hidden_state
        if not torch.is_grad_enabled():
            self._token_cache = (key, out)
        return out

    def _prefix(self, which: str, inp: ConvInput) -> torch.Tensor:
        prompt = self.rec_prompt if which == "rec" else self.conv_prompt
        ents = torch.tensor([self.entity_ids(inp.entities)], device=self.device)
        return prompt(
            ents,
            self._token_embeds(inp.context),
            output_entity=(which == "rec"),
            use_rec_prefix=(which == "rec"),
            use_conv_prefix=(which == "conv"),
            entity_table=self._table(which),
        )

    def run_gpt2(self, ids: torch.Tensor, mask: torch.Tensor, prefix: torch.Tensor, cache=None, positions=None):
        """GPT-2 trunk with the prompt as past keys/values; a NEW cache unless one is passed to extend."""
        from transformers import DynamicCache

        if cache is None:
            cache = DynamicCache(tuple((prefix[i, 0], prefix[i, 1]) for i in range(prefix.shape[0])))
        p = prefix.shape[-2]
        full_mask = torch.cat([torch.ones(mask.shape[0], p, dtype=mask.dtype, device=mask.device), mask], dim=1)
        if positions is None:
            positions = (mask.long().cumsum(-1) - 1).clamp_min(0)
            positions = positions.masked_fill(mask == 0, 1)
        out = self.gpt2.transformer(
            input_ids=ids, attention_mask=full_mask, position_ids=positions, past_key_values=cache, use_cache=True
        )
        return out.last_hidden_state, out.past_key_values

    # ---- recommendation ----
    @torch.inference_mode()
    def scores(self, inp: ConvInput) -> torch.Tensor:
        """Logits over all entities (incl. pad) for one conversation."""
        ids = torch.tensor([self.context_ids(inp.context)], device=self.device)
        hidden, _ = self.run_gpt2(ids, torch.ones_like(ids), self._prefix("rec", inp))
        return hidden[0, -1] @ self._table("rec").T

    def recommend(self, inp: ConvInput, k: int = TOP_K) -> list[tuple[int, float]]:
        item_scores = self.scores(inp)[self.item_ids]
        return top_items(item_scores, self.item_ids, k)

    # ---- conversation ----
    def conv_context(self, inp: ConvInput) -> list[int]:
        return self.context_ids(inp.context) + list(self.bot_ids)

    def reply_input(self, inp: ConvInput) -> tuple[list[int], int]:
        """The ids a reply (and the option choice) is generated from, and how many of them are left padding.

        Unserved: the context plus ``System:``, unpadded, so positions 0 … n-1 are those the model was trained
        with. ``inp.served`` (CRS Arena's input): left-padded as ``src/model/UNICRS.py`` L354-361 pads it, to
        ``context_max_length`` + len(``System:``) rounded up to a multiple of 8 (128 + 2 -> 136), and every
        position counted from 0 across the padding: the model's ``prepare_inputs_for_generation``
        (``src/model/unicrs/model_gpt2.py`` L679-688) drops the ``position_ids`` it is given, and under transformers
        4.28 ``generate`` never hands it a cache, so GPT-2 counts 0 … L-1 over the padded sequence every step;
        the last context token sits at position 135. The pads stay masked out, as there."""
        seq = self.conv_context(inp)
        if not inp.served:
            return seq, 0
        padded, mask = pad_as_published(seq, self.context_max_length + len(self.bot_ids), self.pad_id, left=True)
        return padded, mask.count(0)

    @staticmethod
    def _ban_repeats(seq: list[int], n: int) -> list[int]:
        """Tokens that would repeat an n-gram of ``seq`` (HF's no_repeat_ngram_size rule)."""
        if n <= 0 or len(seq) < n - 1:
            return []
        tail = tuple(seq[len(seq) - (n - 1) :]) if n > 1 else ()
        return [seq[i + n - 1] for i in range(len(seq) - n + 1) if tuple(seq[i : i + n - 1]) == tail]

    @torch.inference_mode()
    def generate_ids(
        self,
        inp: ConvInput,
        *,
        max_new_tokens: int | None = None,
        no_repeat_ngram_size: int = 3,
        use_cache: bool = True,
    ) -> list[int]:
        """Greedy reply ids (eos included when produced). ``use_cache=False`` recomputes everything each step."""
        limit = self.max_new_tokens if max_new_tokens is None else max_new_tokens
        prefix = self._prefix("conv", inp)
        seq, n_pad = self.reply_input(inp)
        new: list[int] = []
        cache = None
        step_ids = torch.tensor([seq], device=self.device)
        for _ in range(limit):
            n = len(seq)
            mask = torch.tensor([[0] * n_pad + [1] * (n - n_pad)], device=self.device)
            if use_cache:  # positions 0 … n-1 over the whole sequence, padding included (see reply_input)
                positions = torch.arange(n - step_ids.shape[1], n, device=self.device)[None]
                hidden, cache = self.run_gpt2(step_ids, mask, prefix, cache=cache, positions=positions)
            else:
                full = torch.tensor([seq], device=self.device)
                hidden, _ = self.run_gpt2(full, mask, prefix, positions=torch.arange(n, device=self.device)[None])
            logits = self.gpt2.lm_head(hidden[0, -1])
            banned = self._ban_repeats(seq, no_repeat_ngram_size)  # HF's no_repeat_ngram_size over context + reply
            if banned:
                logits[banned] = -math.inf
            token = int(torch.argmax(logits))
            seq.append(token)
            new.append(token)
            if token == self.eos_id:
                break
            step_ids = torch.tensor([[token]], device=self.device)
        return new

    def raw_reply(self, new_ids: list[int]) -> str:
        """Published decoding (CRS Arena fix #19): specials kept, the text after the last ``System:`` with its
        following character dropped (``rfind("System:") + len("System:") + 1``), eos removed, slots kept."""
        text = self.tokenizer.decode(list(self.bot_ids) + list(new_ids), skip_special_tokens=False)
        text = legacy_cleanup(text)  # decoded as transformers 4.28 did for CRS Arena (spaces before "." and "," go)
        if BOT_PROMPT in text:
            start = text.rfind(BOT_PROMPT) + len(BOT_PROMPT)
            text = text[start + 1 :]  # one character dropped blindly (the space trained models write)
        text = text.replace(self.tokenizer.eos_token, "")
        return text

    def decode_reply(self, new_ids: list[int], items: Sequence[str] | None) -> str:
        """The published decoding with its slots (its movie token, ``<pad>``) written as ``<movie>`` and filled by
        ``items`` in order (:func:`engine.fill_slots`; ``None``: left as slots)."""
        text = self.raw_reply(new_ids)
        for token in {self.movie_token, "<pad>"} - {MOVIE_SLOT}:
            text = text.replace(token, MOVIE_SLOT)
        return fill_slots(text, MOVIE_SLOT, items)

    def reply_text(self, inp: ConvInput) -> str:
        return self.raw_reply(self.generate_ids(inp))

    @property
    def placeholder(self) -> str:
        """What the CRS Arena policy fills with the ranking: crs_fighter passes ``movie_token="<pad>"`` for the
        published UniCRS; our small versions were trained with their own movie token."""
        return "<pad>" if self.backbone_source == "hub" else self.movie_token

    def generate(self, inp: ConvInput, *, items: list[str] | None = None) -> str:
        return self.decode_reply(self.generate_ids(inp), items)

    @torch.inference_mode()
    def option_scores(self, inp: ConvInput, options: list[str]) -> list[float]:
        """get_choice as iai-group/iEvaLM-CRS ``src/model/UNICRS.py`` L428-445 computes it: one new token from the
        reply's inputs (:meth:`reply_input`: "System:" appended, conv prompt); the logits at each option letter's
        first token."""
        if not options:
            raise ValueError("no options to choose from")
        seq, n_pad = self.reply_input(inp)
        ids = torch.tensor([seq], device=self.device)
        mask = torch.tensor([[0] * n_pad + [1] * (len(seq) - n_pad)], device=self.device)
        positions = torch.arange(len(seq), device=self.device)[None]  # as in generate_ids: see reply_input
        hidden, _ = self.run_gpt2(ids, mask, self._prefix("conv", inp), positions=positions)
        logits = self.gpt2.lm_head(hidden[0, -1])
        letters = [self.tokenizer(o, add_special_tokens=False)["input_ids"][0] for o in options]
        return [float(logits[t]) for t in letters]

    def set_training(self, on: bool) -> None:
        for m in [self.rec_prompt, self.conv_prompt] if self.frozen else self.modules():
            m.train(on)
        self.invalidate()


def left_pad(seqs: list[list[int]], pad: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in seqs)
    ids = torch.tensor([[pad] * (width - len(s)) + s for s in seqs], device=device)
    mask = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in seqs], device=device)
    return ids, mask
