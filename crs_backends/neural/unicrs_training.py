"""Training UniCRS through the one training engine: its training examples, the recommendation and reply losses,
and the three stages (prompt pre-training, joint, reply prompt); writes the published layout."""

from __future__ import annotations

import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from catalog.ievalm_records import Record
from crs_backends.neural.engine import ProgressFn, TrainConfig, TrainReport
from crs_backends.neural.training import Stage, run_stages, split_budget, wanted_steps
from crs_backends.neural.unicrs import SYSTEM, UniCRS, left_pad
from crs_backends.neural.unicrs_text import replace_names


def example(model: UniCRS, record: Record) -> dict:
    """Token ids of one record: GPT-2 context, RoBERTa prompt, entities, rec targets, slot-masked reply."""
    targets = model.kg.ids_of(record.rec)
    resp = replace_names(record.resp, record.rec, model.movie_token)
    resp_ids = model.tokenizer("System: " + resp, add_special_tokens=False)["input_ids"][: model.resp_max_length]
    prompt, prompt_mask = model.prompt_ids(record.context)
    return {
        "context": model.context_ids(record.context),
        "prompt": prompt,
        "prompt_mask": prompt_mask,
        "entity": model.entity_ids(record.entity),
        "targets": targets,
        "resp": resp_ids + [model.eos_id],
    }


def batch_inputs(model: UniCRS, batch: list[dict]) -> tuple[torch.Tensor, torch.Tensor]:
    """RoBERTa token states of the prompts and the padded entity ids of a batch."""
    dev = model.device
    prompt = torch.tensor([b["prompt"] for b in batch], device=dev)
    pmask = torch.tensor([b["prompt_mask"] for b in batch], device=dev)
    tokens = model.roberta(input_ids=prompt, attention_mask=pmask).last_hidden_state
    width = max(len(b["entity"]) for b in batch)
    ents = torch.tensor([b["entity"] + [model.kg.pad_id] * (width - len(b["entity"])) for b in batch], device=dev)
    return tokens, ents


def rec_loss(
    model: UniCRS,
    batch: list[dict],
    inputs: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor | None:
    """Cross-entropy of each target entity from the last hidden state (None when no example has a target)."""
    rows = [i for i, b in enumerate(batch) if b["targets"]]
    if not rows:
        return None
    dev = model.device
    tokens, ents = inputs if inputs is not None else batch_inputs(model, batch)
    table = model.rec_prompt.get_entity_embeds()
    idx = torch.tensor(rows, device=dev)
    prefix = model.rec_prompt(ents[idx], tokens[idx], output_entity=True, use_rec_prefix=True, entity_table=table)
    ids, mask = left_pad([batch[i]["context"] for i in rows], model.pad_id, dev)
    hidden, _ = model.run_gpt2(ids, mask, prefix)
    logits = hidden[:, -1] @ table.T
    pair_rows = [r for r, i in enumerate(rows) for _ in batch[i]["targets"]]
    pair_targets = [t for i in rows for t in batch[i]["targets"]]
    return F.cross_entropy(logits[torch.tensor(pair_rows, device=dev)], torch.tensor(pair_targets, device=dev))


def conv_loss(
    model: UniCRS, batch: list[dict], inputs: tuple[torch.Tensor, torch.Tensor] | None = None
) -> torch.Tensor:
    """LM loss on the reply tokens (the published labels are -100 over the context)."""
    dev = model.device
    tokens, ents = inputs if inputs is not None else batch_inputs(model, batch)
    table = model.conv_prompt.get_entity_embeds()
    prefix = model.conv_prompt(ents, tokens, output_entity=False, use_conv_prefix=True, entity_table=table)
    seqs = [b["context"] + b["resp"] for b in batch]
    ids, mask = left_pad(seqs, model.pad_id, dev)
    hidden, _ = model.run_gpt2(ids, mask, prefix)
    # the vocabulary projection runs on the reply positions alone; position t predicts token t + 1
    width = ids.shape[1]
    rows = [r for r, b in enumerate(batch) for _ in b["resp"]]
    cols = [width - len(b["resp"]) - 1 + j for b in batch for j in range(len(b["resp"]))]
    targets = torch.tensor([t for b in batch for t in b["resp"]], device=dev)
    logits = model.gpt2.lm_head(hidden[torch.tensor(rows, device=dev), torch.tensor(cols, device=dev)])
    return F.cross_entropy(logits, targets)


def joint_losses(model: UniCRS, batch: list[dict]) -> tuple[torch.Tensor | None, torch.Tensor]:
    """(rec loss or None when no example has a known target, conv LM loss) for a batch of :func:`example` dicts."""
    inputs = batch_inputs(model, batch)
    return rec_loss(model, batch, inputs), conv_loss(model, batch, inputs)


# of max_steps: the recommendation path's pre-training stage, the joint stage, and the conversation prompt alone
# (backbones frozen, as the published recipe trains its conversation prompt last). Measured on the small version
# (300 held-back synthetic dialogues): after prompt 480 + joint 720 steps, about a quarter of its replies ran
# together ("It you prefer recent movies or that, have fun recent movies or that ..."), its conv loss 0.67
STAGE_SHARES = {"prompt": 0.32, "joint": 0.48, "reply": 0.2}


def train(
    model: UniCRS,
    records: list[Record],
    out_root,
    dataset: str,
    config: TrainConfig,
    progress: ProgressFn | None = None,
) -> TrainReport:
    """Two stages through the one training engine (:mod:`crs_backends.neural.training`: resumable):

    1. ``prompt``: the recommendation path alone (rec prompt, plus the backbones in the small size) on the
       records' target items, as UniCRS pre-trains its prompt before the task stages, so that the ranking
       learns to read the conversation before it shares the backbones with the reply;
    2. ``joint``: rec prompt and conv prompt (and the small backbones) together, one optimizer step on the sum of
       the rec cross-entropy and the reply's LM loss (the backbones are shared);
    3. ``reply``: the conversation prompt alone on the reply's LM loss, backbones and recommendation path fixed
       (the published recipe's last stage), so the replies improve while the ranking stays as it is.

    ``max_steps`` is shared by :data:`STAGE_SHARES`. The result is saved in the published layout under
    ``out_root``."""
    start = time.monotonic()
    out_root = Path(out_root)
    if not records:
        raise ValueError("no training records")
    model.to(config.device)
    examples = [example(model, r) for r in records]
    with_targets = [e for e in examples if e["targets"]]
    with_reply = [e for e in examples if len(e["resp"]) > 1]  # more than the end token
    lengths = [len(e["context"]) + len(e["resp"]) for e in examples]
    budget = split_budget(
        config.max_steps,
        {
            "prompt": wanted_steps(len(with_targets), config),
            "joint": wanted_steps(len(examples), config),
            "reply": wanted_steps(len(with_reply), config),
        },
        shares=STAGE_SHARES,
    )
    rec_modules: list[nn.Module] = [model.rec_prompt] if model.frozen else [model.rec_prompt, model.gpt2, model.roberta]
    all_modules = [model.rec_prompt, model.conv_prompt] + ([] if model.frozen else [model.gpt2, model.roberta])

    def prompt_loss(batch: list[dict]) -> torch.Tensor:
        loss = rec_loss(model, batch)
        if loss is None:  # the prompt stage holds only examples with targets
            raise ValueError("prompt stage: a batch without a target item")
        return loss

    def joint_loss(batch: list[dict]) -> dict[str, torch.Tensor]:
        rec, conv = joint_losses(model, batch)
        return {"conv": conv} if rec is None else {"rec": rec, "conv": conv}

    stages = [
        Stage(
            "prompt",
            with_targets,
            prompt_loss,
            rec_modules,
            budget["prompt"],
            config.lr,
            lengths=[len(e["context"]) for e in with_targets],
            setup=model.invalidate,
        ),
        Stage(
            "joint",
            examples,
            joint_loss,
            all_modules,
            budget["joint"],
            config.lr,
            lengths=lengths,
            parts=("rec", "conv"),
            setup=model.invalidate,
        ),
        Stage(
            "reply",
            with_reply,
            lambda batch: conv_loss(model, batch),
            [model.conv_prompt],
            budget["reply"],
            config.reply_rate,
            lengths=[len(e["context"]) + len(e["resp"]) for e in with_reply],
            setup=model.invalidate,
        ),
    ]
    try:
        steps, losses = run_stages(SYSTEM, dataset, out_root, stages, config, progress)
    finally:
        model.set_training(False)
    model.save(out_root, dataset)
    return TrainReport(system=SYSTEM, out=out_root, steps=steps, losses=losses, seconds=time.monotonic() - start)
