"""Training BARCOR through the one training engine: its recommender (cross-entropy over the KG's entities) and its
reply model (teacher-forced LM loss on ``System: <reply>``); writes the published layout.

The small size (MiniLM's frozen encoder, :mod:`crs_backends.neural.barcor`) reads each context with the encoder once
(:func:`encode_contexts`, no gradient): the reply decoder trains on its final states, the recommender (its own copy
of the encoder's top layers and the head) on the states below those layers."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from catalog.ievalm_records import Record
from crs_backends.neural.barcor import BARCOR, REC_LAYERS_LR, RESP_MAX_LENGTH, SYSTEM, response_prefix
from crs_backends.neural.engine import MOVIE_SLOT, ProgressFn, TrainConfig, TrainReport
from crs_backends.neural.training import Stage, run_stages, split_budget, wanted_steps
from crs_backends.neural.unicrs_text import replace_names


def rec_examples(model: BARCOR, records: list[Record]) -> list[tuple[list[int], int]]:
    """One (context ids, entity label) example per known target item, as the published rec data."""
    out: list[tuple[list[int], int]] = []
    for r in records:
        labels = [i for i in model.kg.ids_of(r.rec) if i < model.kg.n_entities]
        if labels:
            ids = model.context_ids(r.context)
            out.extend((ids, label) for label in labels)
    return out


def conv_examples(model: BARCOR, records: list[Record]) -> list[tuple[list[int], list[int]]]:
    """(context ids, target ids) with target = speaker prefix + response, right-truncated to 128 tokens."""
    tok = model.tokenizer
    out = []
    for r in records:
        if not r.resp.strip():
            continue
        # the small size writes the films it recommends as the movie slot, which CRS Arena's policy fills with the
        # ranking (UniCRS's way: unicrs_text.replace_names); the published size writes titles as ReDial's replies do
        resp = replace_names(r.resp, r.rec, MOVIE_SLOT) if model.size == "small" else r.resp
        target = tok(response_prefix(r.context) + resp)["input_ids"]
        if len(target) > RESP_MAX_LENGTH:  # right truncation keeping the final </s> (BERT's [SEP] in the small size)
            target = target[: RESP_MAX_LENGTH - 1] + [model.conv_model.config.eos_token_id]
        out.append((model.context_ids(r.context), target))
    return out


def encode_contexts(
    model: BARCOR, contexts: list[list[int]], layers: tuple[int, ...] = (-1,), batch_size: int = 64
) -> list[tuple[torch.Tensor, ...]]:
    """The frozen encoder's states of each context after each of ``layers`` (indices into its hidden states: -1 the
    final ones, what the reply decoder attends to; the recommender's ``split``, what its own layers read), float16,
    one tuple per context, in order. Contexts of like length are encoded together."""
    order = sorted(range(len(contexts)), key=lambda i: len(contexts[i]))
    out: list[tuple[torch.Tensor, ...] | None] = [None] * len(contexts)
    encoder = model.conv_model.get_encoder()
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            ids, mask = _pad([contexts[i] for i in chunk], model.tokenizer.pad_token_id, model.device)
            hidden = encoder(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
            for row, i in enumerate(chunk):
                n = len(contexts[i])
                out[i] = tuple(hidden[layer][row, :n].to(torch.float16).cpu() for layer in layers)
    return [t for t in out if t is not None]


def _pad_states(states: list[torch.Tensor], device: str) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(t.shape[0] for t in states)
    out = torch.zeros((len(states), width, states[0].shape[1]), dtype=torch.float32)
    mask = torch.zeros((len(states), width), dtype=torch.long)
    for i, t in enumerate(states):
        out[i, : t.shape[0]] = t.float()
        mask[i, : t.shape[0]] = 1
    return out.to(device), mask.to(device)


def small_conv_loss(model: BARCOR, batch: list[tuple[torch.Tensor, list[int]]]) -> torch.Tensor:
    """The reply decoder's loss over the cached encoder states (the small size)."""
    from transformers.modeling_outputs import BaseModelOutput

    states, mask = _pad_states([b[0] for b in batch], model.device)
    labels, lmask = _pad([b[1] for b in batch], model.tokenizer.pad_token_id, model.device)
    labels = labels.masked_fill(lmask == 0, -100)
    out = model.conv_model(
        encoder_outputs=BaseModelOutput(last_hidden_state=states), attention_mask=mask, labels=labels, use_cache=False
    )
    return out.loss


def small_rec_loss(model: BARCOR, batch: list[tuple[torch.Tensor, int]]) -> torch.Tensor:
    """Cross-entropy of the small recommender over the frozen encoder's states below its own layers."""
    assert model.rec_top is not None
    states, mask = _pad_states([b[0] for b in batch], model.device)
    labels = torch.tensor([b[1] for b in batch], dtype=torch.long, device=model.device)
    return nn.functional.cross_entropy(model.rec_top(states, mask), labels)


def _pad(rows: list[list[int]], pad: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        mask[i, : len(r)] = 1
    return ids.to(device), mask.to(device)


def rec_loss(model: BARCOR, batch: list[tuple[list[int], int]]) -> torch.Tensor:
    """Cross-entropy over entity labels (the published BART recommender)."""
    ids, mask = _pad([b[0] for b in batch], model.tokenizer.pad_token_id, model.device)
    labels = torch.tensor([b[1] for b in batch], dtype=torch.long, device=model.device)
    logits = model.rec_logits(ids, mask)
    return nn.functional.cross_entropy(logits, labels)


def conv_loss(model: BARCOR, batch: list[tuple[list[int], list[int]]]) -> torch.Tensor:
    pad = model.tokenizer.pad_token_id
    ids, mask = _pad([b[0] for b in batch], pad, model.device)
    labels, lmask = _pad([b[1] for b in batch], pad, model.device)
    labels = labels.masked_fill(lmask == 0, -100)
    return model.conv_model(input_ids=ids, attention_mask=mask, labels=labels, use_cache=False).loss


def _example_length(example) -> int:
    ids, target = example
    return len(ids) + (len(target) if isinstance(target, list) else 0)


def conv_budget(n_examples: int, config: TrainConfig) -> int:
    """The small size's reply-decoder steps: the recipe's epochs over its ``n_examples``, capped by ``max_steps``
    (None: no cap; 0: not trained here)."""
    return min(wanted_steps(n_examples, config), 10**9 if config.max_steps is None else config.max_steps)


def train(
    model: BARCOR,
    records: list[Record],
    out_root,
    dataset: str,
    config: TrainConfig,
    progress: ProgressFn | None = None,
) -> TrainReport:
    """Train conv (seq2seq loss on ``"System: " + resp``), then rec (cross-entropy over entity labels, one example
    per target item), through the one training engine (:mod:`crs_backends.neural.training`: resumable); saved in
    the published layout under ``out_root``. The published size trains both BART models (the recommender
    logit-adjusted in no size any more); the small size trains its reply decoder and its recommender over the frozen
    encoder's states (:func:`encode_contexts`): the recommender's copied layers at :data:`REC_LAYERS_LR`, its head
    at ``config.lr``."""
    t0 = time.monotonic()
    out_root = Path(out_root)
    model.device = config.device
    for module in (model.rec_model, model.rec_top, model.conv_model):
        if module is not None:
            module.to(config.device)
    model._item_ids = model._item_ids.to(config.device)
    model._enc_cache = None
    conv_data: list
    rec_data: list
    groups = None
    if model.rec_top is not None:
        conv_raw, rec_raw = conv_examples(model, records), rec_examples(model, records)
        # each part its own budget (max_steps 0: the decoder is not trained here, see crs_backends.neural.small: the
        # app's set takes the one trained on ReDial)
        budget = {"conv": conv_budget(len(conv_raw), config), "rec": wanted_steps(len(rec_raw), config)}
        if not budget["conv"]:
            conv_raw = []
        conv_keys = {tuple(ids) for ids, _ in conv_raw}
        rec_keys = {tuple(ids) for ids, _ in rec_raw}
        keys = sorted(conv_keys | rec_keys)
        encoded = encode_contexts(model, [list(k) for k in keys], layers=(-1, model.rec_top.split))
        conv_states = {k: e[0] for k, e in zip(keys, encoded) if k in conv_keys}
        rec_states = {k: e[1] for k, e in zip(keys, encoded) if k in rec_keys}
        del encoded
        conv_data = [(conv_states[tuple(ids)], target) for ids, target in conv_raw]
        rec_data = [(rec_states[tuple(ids)], label) for ids, label in rec_raw]
        conv_lengths = [len(ids) + len(target) for ids, target in conv_raw]
        rec_lengths = [len(ids) for ids, _ in rec_raw]
        conv_fn: Callable[[BARCOR, list], torch.Tensor] = small_conv_loss
        rec_fn: Callable[[BARCOR, list], torch.Tensor] = small_rec_loss
        rec_module: nn.Module = model.rec_top
        groups = [
            (list(model.rec_top.layers.parameters()), REC_LAYERS_LR),
            (list(model.rec_top.head.parameters()), config.lr),
        ]
    else:
        assert model.rec_model is not None
        conv_data, rec_data = conv_examples(model, records), rec_examples(model, records)
        conv_lengths = [_example_length(e) for e in conv_data]
        rec_lengths = [_example_length(e) for e in rec_data]
        conv_fn, rec_fn = conv_loss, rec_loss
        rec_module = model.rec_model
        budget = split_budget(
            config.max_steps,
            {"conv": wanted_steps(len(conv_data), config), "rec": wanted_steps(len(rec_data), config)},
        )
    stages = [
        Stage(
            "conv",
            conv_data,
            lambda batch: conv_fn(model, batch),
            [model.conv_model],
            budget["conv"],
            config.reply_rate,
            lengths=conv_lengths,
        ),
        Stage(
            "rec",
            rec_data,
            lambda batch: rec_fn(model, batch),
            [rec_module],
            budget["rec"],
            config.lr,
            lengths=rec_lengths,
            groups=groups,
        ),
    ]
    steps, losses = run_stages(SYSTEM, dataset, out_root, stages, config, progress)
    model._enc_cache = None
    model.dataset = dataset
    model.save(out_root, dataset)
    return TrainReport(system=SYSTEM, out=out_root, steps=steps, losses=losses, seconds=time.monotonic() - t0)
