"""Training BARCOR through the one training engine: its BART recommender (cross-entropy over the KG's entities,
when the set has one) and its reply model (teacher-forced LM loss on ``System: <reply>``); writes the published
layout."""

from __future__ import annotations

import time
from pathlib import Path

import torch
from torch import nn

from catalog.ievalm_records import Record
from crs_backends.neural.barcor import BARCOR, RESP_MAX_LENGTH, SYSTEM, response_prefix
from crs_backends.neural.engine import ProgressFn, TrainConfig, TrainReport
from crs_backends.neural.training import Stage, log_prior, run_stages, split_budget, wanted_steps


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
        target = tok(response_prefix(r.context) + r.resp)["input_ids"]
        if len(target) > RESP_MAX_LENGTH:  # right truncation keeping the final </s>
            target = target[: RESP_MAX_LENGTH - 1] + [tok.eos_token_id]
        out.append((model.context_ids(r.context), target))
    return out


def _pad(rows: list[list[int]], pad: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        mask[i, : len(r)] = 1
    return ids.to(device), mask.to(device)


def rec_loss(model: BARCOR, batch: list[tuple[list[int], int]], prior: torch.Tensor | None = None) -> torch.Tensor:
    """Cross-entropy over entity labels; with ``prior`` (log prior), logit-adjusted (the small versions)."""
    ids, mask = _pad([b[0] for b in batch], model.tokenizer.pad_token_id, model.device)
    labels = torch.tensor([b[1] for b in batch], dtype=torch.long, device=model.device)
    logits = model.rec_logits(ids, mask)
    if prior is not None:
        logits = logits + prior.to(logits.device)
    return nn.functional.cross_entropy(logits, labels)


# Measured on 300 held-back synthetic dialogues (small BARCOR, 200 rec steps): plain cross-entropy gave one top-3
# list for every dialogue (hit@10 .07, popularity's level); logit-adjusted training with the prior added back at
# 0.5 gave 120 different lists and hit@10 .13 (at 0: 193 lists, .05; at 1: 74 lists, .14)
PRIOR_WEIGHT = 0.5
REC_SHARE = {"conv": 0.35, "rec": 0.65}  # the small size: the recommender needs the steps, the reply model learns fast


def _conv_only_steps(wanted: int, config: TrainConfig, size: str) -> int:
    if config.max_steps is None:
        return wanted
    share = REC_SHARE["conv"] if size == "small" else 1.0
    return min(wanted, max(1, round(config.max_steps * share)))


def conv_loss(model: BARCOR, batch: list[tuple[list[int], list[int]]]) -> torch.Tensor:
    pad = model.tokenizer.pad_token_id
    ids, mask = _pad([b[0] for b in batch], pad, model.device)
    labels, lmask = _pad([b[1] for b in batch], pad, model.device)
    labels = labels.masked_fill(lmask == 0, -100)
    return model.conv_model(input_ids=ids, attention_mask=mask, labels=labels, use_cache=False).loss


def _example_length(example) -> int:
    ids, target = example
    return len(ids) + (len(target) if isinstance(target, list) else 0)


def train(
    model: BARCOR,
    records: list[Record],
    out_root,
    dataset: str,
    config: TrainConfig,
    progress: ProgressFn | None = None,
) -> TrainReport:
    """Train conv (seq2seq loss on ``"System: " + resp``), then rec (cross-entropy over entity labels, one example
    per target item; in the small size logit-adjusted, see ``PRIOR_WEIGHT``), through the one training
    engine (:mod:`crs_backends.neural.training`: resumable); saved in the published layout under ``out_root``."""
    t0 = time.monotonic()
    out_root = Path(out_root)
    model.device = config.device
    if model.rec_model is not None:
        model.rec_model.to(config.device)
    model.conv_model.to(config.device)
    model._item_ids = model._item_ids.to(config.device)
    model._enc_cache = None
    bart_rec = model.rec_model is not None  # without one, only the reply model trains (text_rec.py ranks)
    conv_data, rec_data = conv_examples(model, records), rec_examples(model, records) if bart_rec else []
    budget = (
        split_budget(
            config.max_steps,
            {"conv": wanted_steps(len(conv_data), config), "rec": wanted_steps(len(rec_data), config)},
            shares=REC_SHARE if model.size == "small" else None,
        )
        if bart_rec
        # the reply model keeps the steps it had beside a BART recommender (its replies were checked at that budget)
        else {"conv": _conv_only_steps(wanted_steps(len(conv_data), config), config, model.size), "rec": 0}
    )
    # the small versions' recommender: logit-adjusted training, the prior added back into the head's bias at the end
    small = model.size == "small"
    prior = (
        log_prior([label for _, label in rec_data], model.rec_model.config.num_labels)
        if small and model.rec_model is not None
        else None
    )

    def fold_prior() -> None:
        if prior is not None and model.rec_model is not None:
            with torch.no_grad():
                model.rec_model.classification_head.out_proj.bias += PRIOR_WEIGHT * prior.to(model.device)

    stages = [
        Stage(
            "conv",
            conv_data,
            lambda batch: conv_loss(model, batch),
            [model.conv_model],
            budget["conv"],
            config.reply_rate,
            lengths=[_example_length(e) for e in conv_data],
        ),
    ]
    if model.rec_model is not None:
        stages.append(
            Stage(
                "rec",
                rec_data,
                lambda batch: rec_loss(model, batch, prior),
                [model.rec_model],
                budget["rec"],
                config.lr / 2 if small else config.lr,
                lengths=[_example_length(e) for e in rec_data],
                end=fold_prior,
            )
        )
    steps, losses = run_stages(SYSTEM, dataset, out_root, stages, config, progress)
    model._enc_cache = None
    model.dataset = dataset
    model.save(out_root, dataset)
    return TrainReport(system=SYSTEM, out=out_root, steps=steps, losses=losses, seconds=time.monotonic() - t0)
