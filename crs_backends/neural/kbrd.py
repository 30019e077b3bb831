"""KBRD (Chen et al., 2019) as served by iEvaLM / CRS Arena: R-GCN entity encoder + attention pooling for items,
a small BART whose vocabulary logits are biased by the user vector for replies.

Published formatting (``reference/checkpoint-keys.md`` §5.2): the last 32 entity names, filtered to the KG;
user vector = sum of their R-GCN vectors; item scores = user · node tableᵀ over ``kg.item_ids``, top 50.
Reply: utterances joined with ``</s>``, ``<s> … </s>`` left-truncated to 200 tokens, greedy decoding with
``no_repeat_ngram_size 3`` and ``encoder_no_repeat_ngram_size 3``, at most 128 decoder positions.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import partial
from pathlib import Path

import torch
from torch import nn
from transformers import BartConfig, GenerationConfig

from crs_backends.neural.checkpoints import (
    CheckpointError,
    hf_weights_file,
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
from crs_backends.neural.kbrd_modules import OPTIONAL_CONV_KEYS, KBRDforConv, KBRDforRec, conv_config
from crs_backends.neural.kg_reader import KGData
from crs_backends.neural.mixed_precision import is_prepared

SYSTEM = "kbrd"
HUB_TOKENIZER = "facebook/bart-base"
SETTINGS_KEY = "crs_arena_kbrd"  # our extra entry in config.json (absent in the published dirs → full settings)

SIZES: dict[str, dict] = {
    # published: entity hidden 128, 8 bases; BART 300 wide, 2+2 layers, 2 heads, ffn 300, bart-base vocab;
    # context 200 tokens, response 128 (max_length 128 incl. the decoder start token), 32 entities
    "full": {
        "hidden": 128,
        "num_bases": 8,
        "d_model": 300,
        "layers": 2,
        "heads": 2,
        "ffn": 300,
        "vocab": 50265,
        "max_positions": 1024,
        "context_max_length": 200,
        "resp_max_length": 128,
        "max_new_tokens": 127,
        "entity_max_length": 32,
    },
    # local: small enough to train in about a minute on 2 CPU cores and answer in well under 0.3 s
    "small": {
        "hidden": 64,
        "num_bases": 8,
        "d_model": 128,
        "layers": 2,
        "heads": 2,
        "ffn": 256,
        "vocab": None,
        "tokenizer_vocab": 4000,
        "max_positions": 256,
        "context_max_length": 128,
        "resp_max_length": 48,
        "max_new_tokens": 40,
        "entity_max_length": 32,
    },
}
RUNTIME_KEYS = ("context_max_length", "resp_max_length", "max_new_tokens", "entity_max_length")
NO_REPEAT_NGRAM = 3
# Generation settings a checkpoint's config.json (or generation_config.json) may carry. CRS Arena's KBRD calls
# ``generate(**gen_inputs, **gen_args)`` under transformers 4.28, which starts from the model's own generation
# config (built from config.json) and overrides only the arguments passed (src/model/KBRD.py L241-251 for the
# reply, L258-266 for the option choice): these are inherited, read as BARCOR's path reads them
# (barcor_backbone.read_config). Absent keys stay unset, as in a config that does not name them.
INHERITED_GEN_KEYS = (
    "forced_bos_token_id",
    "forced_eos_token_id",
    "no_repeat_ngram_size",
    "encoder_no_repeat_ngram_size",
    "repetition_penalty",
    "bad_words_ids",
)


def inherited_generation(conv_dir: Path) -> dict:
    """The generation settings ``conv_dir``'s config.json and generation_config.json carry (the latter wins)."""
    found: dict = {}
    for name in ("config.json", "generation_config.json"):
        path = conv_dir / name
        if not path.exists():
            continue
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise CheckpointError(f"cannot read {path}: {e}") from e
        if isinstance(raw, dict):
            found.update({k: raw[k] for k in INHERITED_GEN_KEYS if raw.get(k) is not None})
    return found


# the small configuration keeps the published entity width (128) on a KG with more items than this. On ReDial's
# 6,576 films (first 1,000 test records, 2026-11-26): trained by crs_backends.neural.small.train_on_dataset, Recall@10
# .164 at width 64, .169 at 128 (gradient clipping at 1.0 in both; .183 at 128 unclipped); by a training script
# with plainly shuffled batches and the same data and schedule, .174 / .165 at 64 and .185 / .181 at 128 (seeds
# 0 / 1). The bundled catalog's 450 films keep 64, the shipped set's.
WIDE_KG_ITEMS = 2000


def entity_width(size: str, n_items: int) -> int:
    """The R-GCN's width for a new model of ``size`` over a KG with ``n_items`` items (see :data:`WIDE_KG_ITEMS`)."""
    if size == "small" and n_items > WIDE_KG_ITEMS:
        return int(SIZES["full"]["hidden"])
    return int(size_settings(SIZES, size)["hidden"])


def encode_text(tokenizer, text: str) -> list[int]:
    """Token ids without special tokens (the fast backend directly: no model_max_length warnings)."""
    backend = getattr(tokenizer, "_tokenizer", None)
    if backend is not None:
        return list(backend.encode(text, add_special_tokens=False).ids)
    return list(tokenizer.encode(text, add_special_tokens=False))


class KBRD(NeuralModel):
    system = SYSTEM

    def __init__(
        self,
        kg: KGData,
        rec: KBRDforRec,
        conv: KBRDforConv,
        tokenizer,
        *,
        size: str = "full",
        settings: dict | None = None,
        device: str = "cpu",
        source: str = "",
        gen: dict | None = None,
    ):
        self.kg = kg
        self.gen = dict(gen or {})  # inherited from the checkpoint's config (INHERITED_GEN_KEYS)
        self.rec = rec.to(device).eval()
        # transformers wraps PreTrainedModel.to with functools.wraps, which mypy reads as unbound (self = device)
        self.conv = conv.to(device).eval()  # type: ignore[arg-type]
        self.tokenizer = tokenizer
        self.size = size
        self.device = torch.device(device)
        self.source = source
        base = SIZES["full" if size == "full" else "small"]
        self.settings = {k: base[k] for k in RUNTIME_KEYS}
        self.settings.update({k: int(v) for k, v in (settings or {}).items() if k in RUNTIME_KEYS})
        positions = int(conv.config.max_position_embeddings)  # never index past the position table
        self.settings["context_max_length"] = max(2, min(self.settings["context_max_length"], positions))
        self.settings["max_new_tokens"] = max(1, min(self.settings["max_new_tokens"], positions - 1))
        edge_index, edge_type = kg.edges
        self.edge_index = edge_index.to(self.device)
        self.edge_type = edge_type.to(self.device)
        self.item_ids = torch.tensor(kg.item_ids, dtype=torch.long, device=self.device)
        self._node_table: torch.Tensor | None = None
        self.bos_id = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else 0
        self.eos_id = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 2
        self.sep_token = tokenizer.sep_token or tokenizer.eos_token or "</s>"
        if len(tokenizer) > conv.config.vocab_size:
            raise CheckpointError(
                f"{source or 'KBRD'}: tokenizer has {len(tokenizer)} tokens but the model only {conv.config.vocab_size}"
            )

    # ---------------------------------------------------------------- construction
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
    ) -> KBRD:
        cfg = size_settings(SIZES, size)
        if tokenizer is None:
            tokenizer = _default_tokenizer(kg, texts, size)
        vocab = vocab_size or cfg["vocab"] or len(tokenizer)
        check_vocab_fits(vocab, tokenizer)
        torch.manual_seed(seed)
        hidden = entity_width(size, len(kg.item_ids))
        rec = KBRDforRec(hidden, kg.n_relations, cfg["num_bases"], kg.n_entities)
        config = conv_config(
            vocab_size=vocab,
            d_model=cfg["d_model"],
            layers=cfg["layers"],
            heads=cfg["heads"],
            ffn=cfg["ffn"],
            max_positions=cfg["max_positions"],
            pad_id=tokenizer.pad_token_id,
            bos_id=tokenizer.bos_token_id,
            eos_id=tokenizer.eos_token_id,
        )
        setattr(config, SETTINGS_KEY, {"size": size, **{k: cfg[k] for k in RUNTIME_KEYS}})
        conv = KBRDforConv(config, user_hidden_size=hidden)
        return cls(kg, rec, conv, tokenizer, size=size, source=f"new {size} KBRD")

    @classmethod
    def load(cls, root, dataset: str, kg: KGData, *, device: str = "cpu") -> KBRD:
        """``<root>/kbrd_rec_<ds>/model.pt`` + ``<root>/kbrd_conv_<ds>/`` (published or ours), strictly checked."""
        rec_file = part_dir(root, SYSTEM, "rec", dataset) / "model.pt"
        state = read_state_dict(rec_file)
        nodes, bases = state.get("node_embeds"), state.get("kg_encoder.weight")
        if nodes is None or bases is None or nodes.dim() != 2 or bases.dim() != 3:
            raise CheckpointError(
                f"{rec_file} is not a KBRD recommender state dict "
                "(node_embeds / kg_encoder.weight missing or malformed)"
            )
        rec = KBRDforRec(int(nodes.shape[1]), kg.n_relations, int(bases.shape[0]), kg.n_entities)
        load_strict(rec, state, source=rec_file)

        conv_dir = part_dir(root, SYSTEM, "conv", dataset)
        config_file = conv_dir / "config.json"
        if not config_file.exists():
            raise CheckpointError(f"checkpoint file missing: {config_file}")
        try:
            json.loads(config_file.read_text(encoding="utf-8"))
            config = BartConfig.from_pretrained(str(conv_dir))
        except Exception as e:
            raise CheckpointError(f"cannot read {config_file}: {type(e).__name__}: {e}") from e
        weights = hf_weights_file(conv_dir)
        cstate = read_state_dict(weights)
        if "rec_proj.weight" not in cstate or cstate["rec_proj.weight"].dim() != 2:
            raise CheckpointError(f"{weights} is not a KBRD conversation model (rec_proj.weight missing)")
        user_hidden = int(cstate["rec_proj.weight"].shape[1])
        if user_hidden != rec.hidden_size:
            raise CheckpointError(
                f"{weights}: rec_proj expects a {user_hidden}-wide user vector but {rec_file} gives {rec.hidden_size}"
            )
        conv = KBRDforConv(config, user_hidden_size=user_hidden)
        if "model.shared.weight" not in cstate:
            raise CheckpointError(f"{weights} does not fit KBRDforConv: missing model.shared.weight")
        load_strict(conv, cstate, source=weights, optional=OPTIONAL_CONV_KEYS)
        conv.tie_weights()
        tokenizer = load_tokenizer(conv_dir, HUB_TOKENIZER)
        settings = getattr(config, SETTINGS_KEY, None) or {}
        size = settings.get("size", "full") if isinstance(settings, dict) else "full"
        return cls(
            kg,
            rec,
            conv,
            tokenizer,
            size=size,
            settings=settings if isinstance(settings, dict) else None,
            device=device,
            source=str(Path(root)),
            gen=inherited_generation(conv_dir),
        )

    def save(self, root, dataset: str) -> None:
        """The published layout: ``kbrd_rec_<ds>/model.pt``; ``kbrd_conv_<ds>/`` config.json + pytorch_model.bin
        (all 97 keys incl. the tied aliases, like a transformers 4.x save) + our tokenizer files."""
        rec_dir = part_dir(root, SYSTEM, "rec", dataset)
        conv_dir = part_dir(root, SYSTEM, "conv", dataset)
        save_state_dict(self.rec.state_dict(), rec_dir / "model.pt")
        conv_dir.mkdir(parents=True, exist_ok=True)
        stale = conv_dir / "model.safetensors"  # would shadow the .bin we write
        if stale.exists():
            stale.unlink()
        save_state_dict(self.conv.state_dict(), conv_dir / "pytorch_model.bin")
        self.conv.config.architectures = ["KBRDforConv"]
        setattr(self.conv.config, SETTINGS_KEY, {"size": self.size, **self.settings})
        self.conv.config.save_pretrained(str(conv_dir))
        self.tokenizer.save_pretrained(str(conv_dir))

    # ---------------------------------------------------------------- inference
    @property
    def description(self) -> str:
        cfg = self.conv.config
        return (
            f"KBRD ({self.size}: R-GCN {self.rec.hidden_size}, BART {cfg.d_model}×{cfg.encoder_layers}+"
            f"{cfg.decoder_layers}, vocab {cfg.vocab_size})"
        )

    def node_table(self) -> torch.Tensor:
        """R-GCN output + pad row; constant for fixed weights, so computed once per loaded model (the published
        code recomputes it every call with the same result)."""
        if self._node_table is None:
            with torch.no_grad():
                self._node_table = self.rec.get_node_embeds(self.edge_index, self.edge_type).detach()
        return self._node_table

    def invalidate(self) -> None:
        self._node_table = None

    def entity_ids(self, entities: list[str]) -> list[int]:
        """Last ``entity_max_length`` names, then those known to the KG (slice first, filter second, as published)."""
        n = self.settings["entity_max_length"]
        return self.kg.ids_of(list(entities or [])[-n:])

    def _entity_batch(self, rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(1, max((len(r) for r in rows), default=1))
        pad = self.kg.pad_id
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        for i, r in enumerate(rows):
            if r:
                ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        ids = ids.to(self.device)
        return ids, ids.ne(pad)

    def user_vector(self, inp: ConvInput) -> torch.Tensor:
        ids, mask = self._entity_batch([self.entity_ids(inp.entities)])
        with torch.no_grad():
            return self.rec.user_embeds(self.node_table(), ids, mask)  # (1, H)

    def prepared_modules(self) -> list[nn.Module]:
        return [self.conv, self.rec]  # src/model/KBRD.py prepares both

    def recommend(self, inp: ConvInput, k: int = TOP_K) -> list[tuple[int, float]]:
        if len(self.item_ids) == 0:
            return []
        if is_prepared(self.rec):  # get_rec goes through the prepared recommender's forward, R-GCN included
            ids, mask = self._entity_batch([self.entity_ids(inp.entities)])
            with torch.no_grad():
                logits = self.rec(ids, mask, edge_index=self.edge_index, edge_type=self.edge_type)["logits"]
            return top_items(logits[0, self.item_ids].float(), self.item_ids, k)
        table = self.node_table()
        user = self.user_vector(inp)
        with torch.no_grad():
            scores = (user @ table[self.item_ids].T)[0]
        return top_items(scores, self.item_ids, k)

    def context_ids(self, context: list[str]) -> list[int]:
        """``<s> u1</s>u2</s>…un </s>`` left-truncated to ``context_max_length`` (the specials are kept)."""
        text = self.sep_token.join(context or [])
        ids = encode_text(self.tokenizer, text)
        room = max(0, self.settings["context_max_length"] - 2)
        ids = ids[len(ids) - room :] if len(ids) > room else ids
        return [self.bos_id] + ids + [self.eos_id]

    def conv_inputs(self, inp: ConvInput) -> tuple[torch.Tensor, torch.Tensor]:
        """Encoder ids and attention mask of a reply. ``inp.served`` (CRS Arena's input): right-padded to
        ``context_max_length`` as ``src/model/KBRD.py`` L186-192 pads it (``padding="max_length"``, multiple of 8),
        so ``encoder_no_repeat_ngram_size`` sees the pads as the published generation did; else unpadded."""
        ids = self.context_ids(inp.context)
        mask = [1] * len(ids)
        if inp.served:
            ids, mask = pad_as_published(ids, self.settings["context_max_length"], self.conv.config.pad_token_id)
        as_tensor = partial(torch.tensor, dtype=torch.long, device=self.device)
        return as_tensor([ids]), as_tensor([mask])

    def generation_config(
        self,
        max_new_tokens: int | None = None,
        min_new_tokens: int = 0,
        use_cache: bool = True,
        return_scores: bool = False,
        encoder_no_repeat: int | None = None,
    ) -> GenerationConfig:
        cfg = self.conv.config
        reply = encoder_no_repeat is None  # the reply passes both no-repeat sizes (KBRD.py L241-247)
        inherited = dict(self.gen)  # what the checkpoint's config carries, as 4.28's generate inherited it
        if reply:  # passed explicitly there, so the config's values do not count
            for key in ("no_repeat_ngram_size", "encoder_no_repeat_ngram_size"):
                inherited.pop(key, None)
        return GenerationConfig(
            **{
                "no_repeat_ngram_size": NO_REPEAT_NGRAM if reply else 0,
                "encoder_no_repeat_ngram_size": self._encoder_no_repeat if reply else encoder_no_repeat,
                **inherited,
            },
            max_new_tokens=max_new_tokens or self.settings["max_new_tokens"],
            min_new_tokens=min_new_tokens,
            num_beams=1,
            do_sample=False,
            use_cache=use_cache,
            decoder_start_token_id=cfg.decoder_start_token_id,
            bos_token_id=self.bos_id,
            eos_token_id=self.eos_id,
            pad_token_id=cfg.pad_token_id,
            return_dict_in_generate=return_scores,
            output_scores=return_scores,
        )

    def generate_ids(
        self,
        inp: ConvInput,
        *,
        max_new_tokens: int | None = None,
        min_new_tokens: int = 0,
        use_cache: bool = True,
        return_scores: bool = False,
        encoder_no_repeat: int | None = None,
    ):
        """Decoder ids (starting with the decoder start token), greedy as published."""
        ids, mask = self.conv_inputs(inp)
        user = self.user_vector(inp)
        with torch.no_grad():
            out = self.conv.generate(
                input_ids=ids,
                attention_mask=mask,
                decoder_user_embeds=user,
                generation_config=self.generation_config(
                    max_new_tokens, min_new_tokens, use_cache, return_scores, encoder_no_repeat
                ),
            )
        return out

    @property
    def _encoder_no_repeat(self) -> int:
        """Published: no trigram of the context may be repeated (every size alike)."""
        return NO_REPEAT_NGRAM

    def reply_text(self, inp: ConvInput) -> str:
        """The reply as KBRD.get_conv decodes it (special tokens skipped; published sizes with the clean-up
        transformers 4.28 applied by default, :func:`legacy_cleanup`); slots of the small versions kept.
        ``inp.served``: as decoded, whitespace and all (``src/model/KBRD.py`` L265, L334); else whitespace collapsed."""
        seq = self.generate_ids(inp)[0, 1:].tolist()
        text = self.tokenizer.decode(seq, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        if self.size != "small":
            text = legacy_cleanup(text)
        return text if inp.served else " ".join(text.split())

    def generate(self, inp: ConvInput, *, items: list[str] | None = None) -> str:
        return fill_slots(self.reply_text(inp), self.placeholder, items)

    def option_scores(self, inp: ConvInput, options: list[str]) -> list[float]:
        """get_choice as iai-group/iEvaLM-CRS ``src/model/KBRD.py`` L268-286 computes it: exactly 2 new tokens from
        the conversation inputs; the scores of step 2 at each option letter's first token (no leading space). Its
        ``generate`` call passes no ``encoder_no_repeat_ngram_size`` (the config's ``no_repeat_ngram_size`` 3
        still applies, and cannot act within two tokens), so none is applied here."""
        if not options:
            raise ValueError("no options to choose from")
        token_ids = []
        for option in options:
            ids = encode_text(self.tokenizer, option)
            token_ids.append(ids[0] if ids else self.tokenizer.unk_token_id)
        out = self.generate_ids(inp, max_new_tokens=2, min_new_tokens=2, return_scores=True, encoder_no_repeat=0)
        scores = out.scores[-1][0]
        return [float(scores[t]) for t in token_ids]


def _default_tokenizer(kg: KGData, texts: Iterable[str] | None, size: str):
    from crs_backends.neural.tokenizer import train_tokenizer

    if size == "full":  # the published tokenizer if it is in the local Hugging Face cache (or texts are missing)
        try:
            return load_tokenizer(None, HUB_TOKENIZER, local_files_only=True)
        except CheckpointError:
            if texts is None:
                return load_tokenizer(None, HUB_TOKENIZER)
    corpus = list(texts) if texts is not None else []
    corpus += list(kg.entity2id)  # item and attribute names always get tokens
    return train_tokenizer(corpus, style="bart", vocab_size=SIZES["small"]["tokenizer_vocab"])
