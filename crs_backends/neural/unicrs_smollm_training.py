"""Training the small UniCRS (:mod:`crs_backends.neural.unicrs_smollm`) through the one training engine
(:mod:`crs_backends.neural.training`: resumable from ``<out>/.train/unicrs_<stage>_<ds>/``), as UniCRS trains its
prompts on a frozen language model:

0. ``pre`` (only where ``TrainConfig.stage_epochs`` names it; UniCRS's ``train_pre.py``, RUCAIBox/UniCRS): the prompt
   pre-training. The recommendation prompt's encoders learn to name the films of each record's *reply* from the
   conversation *with* that reply (its films by name, in the decoder's context and the text encoder's), the same
   item cross-entropy as ``rec``: the knowledge graph's entities and the text that names them come into one space
   before the prompt learns to predict. Its task vectors do not train here (UniCRS pre-trains without the task
   prefix, which its recommendation stage then adds fresh); everything else of the recommendation prompt does, and
   ``rec`` continues from it;
1. ``rec``: the recommendation prompt (R-GCN, fusion, task vectors, per-layer prefix) on the cross-entropy of the
   item scores against each record's ``rec`` targets (a set of the older "standardised" score also trains
   ``hidden_proj``, after the decoder's hidden state is standardised with statistics of the training contexts,
   :func:`calibrate_hidden`);
2. ``conv``: the conversation prompt, which starts from the trained recommendation prompt's encoders (entity
   table, R-GCN, entity and token projections, cross interaction: UniCRS's conversation stage loads the pre-trained
   prompt encoder; :data:`SHARED_PREFIXES`), on the decoder's LM loss over the reply tokens only (the reply with
   its films written ``<movie>``, then ``<|im_end|>``).

The decoder (SmolLM2) and the text encoder (all-MiniLM-L6-v2) never train: their parameters are checked to have
``requires_grad`` False before the first step, and no optimizer holds them. Cost: every step runs the frozen SmolLM2
forward and backward (the gradient reaches the prompt through it); at batch 8 on the synthetic records (context 57
tokens median, reply 21, plus the instructions' 20 / 29 task vectors) a step took about 4 s (rec) and 5-7 s (conv) on
one thread of 2 cores busy with a training run beside it (2026-11-27), so ``TrainConfig.max_steps`` bounds the run
(:data:`STAGE_SHARES` splits it). Learning rates: 1e-3 for both stages learnt (16 records: rec loss 6.3 -> 0.24 in
30 steps; replies wrote ``<movie>`` after 25 conv steps); at 3e-3 the rec loss jumped from 7 to 16 before settling.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F

from catalog.ievalm_records import Record
from crs_backends.neural.engine import MOVIE_SLOT, ProgressFn, TrainConfig, TrainReport
from crs_backends.neural.training import Stage, run_stages, split_budget, wanted_steps
from crs_backends.neural.unicrs_smollm import UniCRSSmall
from crs_backends.neural.unicrs_smollm_settings import SYSTEM
from crs_backends.neural.unicrs_text import replace_names

STAGE_SHARES = {"rec": 0.5, "conv": 0.5}  # of max_steps (``pre`` runs on its own epochs, outside it)
PRE_EPOCHS = 0  # the pre-training's epochs unless ``TrainConfig.stage_epochs`` names ``pre``
# the recommendation prompt's parts that the pre-training leaves as they are (UniCRS pre-trains without the prefix)
TASK_PREFIXES = ("task_embeds", "task_proj.")
# the prompt parts the conversation prompt takes over from the trained recommendation prompt: the knowledge graph's
# and the text's encoders and their interaction, not what turns them into decoder input (``prompt_proj``,
# ``out_gain``) nor the task vectors. Taking those too, the conversation loss began at 10.4 instead of 3 after 8 rec
# steps (the rec prompt's vectors are shaped for the last hidden state, not for writing a reply)
SHARED_PREFIXES = ("node_embeds", "kg_encoder.", "entity_proj", "token_proj", "cross_attn.")


def example(model: UniCRSSmall, record: Record) -> dict:
    """One record's ids: decoder context, text-encoder ids, entities, target item rows, reply (slots, end token)."""
    row_of = model_item_rows(model)
    targets = [row_of[e] for e in model.kg.ids_of(record.rec) if e in row_of]
    reply = replace_names(record.resp, record.rec, MOVIE_SLOT).strip()
    reply_ids = model.tokenizer(reply, add_special_tokens=False)["input_ids"][: model.resp_max_length] if reply else []
    return {
        "context": model.context_ids(record.context),
        "text": model.text_ids(record.context),
        "entity": model.entity_ids(record.entity),
        "targets": targets,
        "resp": reply_ids + [model.end_id],
    }


def pre_example(model: UniCRSSmall, record: Record, plain: dict) -> dict:
    """A record as the pre-training reads it, from its :func:`example` ``plain``: the conversation followed by its
    reply, films by name (decoder: the chat-form context, the reply's tokens, the end token; text encoder: the reply
    as the next turn), the context's entities, and the reply's items as targets."""
    own = dict(plain)
    reply = record.resp.strip()
    reply_ids = model.tokenizer(reply, add_special_tokens=False)["input_ids"][: model.resp_max_length] if reply else []
    own["context"] = own["context"] + reply_ids + [model.end_id]
    own["text"] = model.text_ids([*record.context, record.resp])
    del own["resp"]
    return own


def pre_params(model: UniCRSSmall) -> list[torch.nn.Parameter]:
    """The recommendation prompt's parameters the pre-training moves: all but the task vectors."""
    return [p for n, p in model.rec_prompt.named_parameters() if not n.startswith(TASK_PREFIXES)]


def model_item_rows(model: UniCRSSmall) -> dict[int, int]:
    """Entity id -> its row among ``kg.item_ids`` (the columns of the recommendation scores)."""
    return {int(e): i for i, e in enumerate(model.kg.item_ids)}


def rec_loss(model: UniCRSSmall, batch: list[dict]) -> torch.Tensor:
    """Cross-entropy of each target item (one term per target) from the item scores."""
    rows = [b for b in batch if b["targets"]]
    if not rows:
        raise ValueError("rec stage: a batch without a target item")
    scores = model.rec_scores([b["entity"] for b in rows], [b["text"] for b in rows], [b["context"] for b in rows])
    pair_rows = [r for r, b in enumerate(rows) for _ in b["targets"]]
    targets = [t for b in rows for t in b["targets"]]
    dev = scores.device
    return F.cross_entropy(scores[torch.tensor(pair_rows, device=dev)], torch.tensor(targets, device=dev))


def conv_loss(model: UniCRSSmall, batch: list[dict]) -> torch.Tensor:
    """The decoder's LM loss on the reply tokens alone, under the conversation prompt."""
    prompt, pmask = model.prompts("conv", [b["entity"] for b in batch], [b["text"] for b in batch])
    embeds, mask, positions = model.assemble(prompt, pmask, [b["context"] + b["resp"] for b in batch])
    hidden, _ = model.run(embeds, mask, positions)
    width = embeds.shape[1]  # left-padded: each reply ends at the last position; position t predicts token t + 1
    dev = hidden.device
    rows = torch.tensor([r for r, b in enumerate(batch) for _ in b["resp"]], device=dev)
    cols = torch.tensor([width - len(b["resp"]) - 1 + j for b in batch for j in range(len(b["resp"]))], device=dev)
    targets = torch.tensor([t for b in batch for t in b["resp"]], device=dev)
    return F.cross_entropy(model.lm.lm_head(hidden[rows, cols]), targets)


def start_conv_from_rec(model: UniCRSSmall) -> None:
    """Copy the recommendation prompt's shared parts into the conversation prompt (UniCRS's conversation stage starts
    from the pre-trained prompt encoder)."""
    rec = model.rec_prompt.state_dict()
    own = model.conv_prompt.state_dict()
    shared = {k: v for k, v in rec.items() if k.startswith(SHARED_PREFIXES) and k in own and v.shape == own[k].shape}
    model.conv_prompt.load_state_dict(shared, strict=False)


CALIBRATION_EXAMPLES = 64


@torch.no_grad()
def calibrate_hidden(model: UniCRSSmall, examples: list[dict], batch_size: int = 16) -> None:
    """Set the recommendation prompt's ``hidden_mean`` / ``hidden_std`` from the decoder's final hidden states of up to
    :data:`CALIBRATION_EXAMPLES` training contexts under the (untrained) recommendation prompt's input vectors (its
    per-layer prefix, where it has one, is left out: it starts near silent; r8 was trained so). Nothing to do where the
    prompt scores as UniCRS does (``score`` "raw": the statistics are not read)."""
    if model.rec_prompt.score == "raw":
        return
    chosen = examples[:: max(1, len(examples) // CALIBRATION_EXAMPLES)][:CALIBRATION_EXAMPLES]
    if len(chosen) < 2:
        return
    table = model.rec_prompt.entity_table()
    states = []
    for i in range(0, len(chosen), batch_size):
        batch = chosen[i : i + batch_size]
        prompt, pmask = model.prompts("rec", [b["entity"] for b in batch], [b["text"] for b in batch], table)
        embeds, mask, positions = model.assemble(prompt, pmask, [b["context"] for b in batch])
        hidden, _ = model.run(embeds, mask, positions)
        states.append(hidden[:, -1])
    h = torch.cat(states)
    model.rec_prompt.hidden_mean.copy_(h.mean(0))
    model.rec_prompt.hidden_std.copy_(h.std(0).clamp_min(1e-3))


def check_frozen(model: UniCRSSmall) -> None:
    """The backbone and the text encoder must not train (they are shared and never modified)."""
    moving = sum(1 for p in model.frozen_parameters() if p.requires_grad)
    if moving:
        raise AssertionError(f"{moving} parameters of the frozen backbone / text encoder have requires_grad set")


def train(
    model: UniCRSSmall,
    records: list[Record],
    out_root,
    dataset: str,
    config: TrainConfig,
    progress: ProgressFn | None = None,
    *,
    rec_only: list[Record] | None = None,
) -> TrainReport:
    """The two stages (see the module docstring); the result is saved under ``out_root``
    (:meth:`UniCRSSmall.save`). ``rec_only``: more records for the recommendation stage alone (the seeker's turns
    that name a film, ``TrainConfig.rec_every_turn``), after ``records`` in its data."""
    start = time.monotonic()
    out_root = Path(out_root)
    if not records:
        raise ValueError("no training records")
    check_frozen(model)
    model.to(config.device)
    examples = [example(model, r) for r in records]
    with_targets = [e for e in examples + [example(model, r) for r in rec_only or []] if e["targets"]]
    with_reply = [e for e in examples if len(e["resp"]) > 1]  # more than the end token
    pre_epochs = (config.stage_epochs or {}).get("pre", PRE_EPOCHS)
    pre = [pre_example(model, r, e) for r, e in zip(records, examples) if e["targets"]] if pre_epochs else []
    wanted = {
        "pre": wanted_steps(len(pre), replace(config, epochs=pre_epochs)),
        "rec": wanted_steps(len(with_targets), config),
        "conv": wanted_steps(len(with_reply), config),
    }
    wanted = {k: min(n, (config.stage_steps or {}).get(k, n)) for k, n in wanted.items()}
    budget = split_budget(config.max_steps, {k: n for k, n in wanted.items() if k != "pre"}, shares=STAGE_SHARES)
    budget["pre"] = wanted["pre"]  # its own epochs, outside max_steps
    pre_stage = Stage(
        "pre",
        pre,
        lambda batch: rec_loss(model, batch),
        [model.rec_prompt],
        budget["pre"],
        config.lr,
        params=pre_params(model),
        lengths=[len(e["context"]) for e in pre],
        start=lambda: calibrate_hidden(model, pre),
        setup=model.invalidate,
    )
    stages = [pre_stage] if budget["pre"] else []
    stages += [
        Stage(
            "rec",
            with_targets,
            lambda batch: rec_loss(model, batch),
            [model.rec_prompt],
            budget["rec"],
            config.lr,
            lengths=[len(e["context"]) for e in with_targets],
            start=lambda: calibrate_hidden(model, with_targets),
            setup=model.invalidate,
        ),
        Stage(
            "conv",
            with_reply,
            lambda batch: conv_loss(model, batch),
            [model.conv_prompt],
            budget["conv"],
            config.reply_rate,
            lengths=[len(e["context"]) + len(e["resp"]) for e in with_reply],
            start=lambda: start_conv_from_rec(model),
            setup=model.invalidate,
        ),
    ]
    try:
        steps, losses = run_stages(SYSTEM, dataset, out_root, stages, config, progress)
    finally:
        model.set_training(False)
    check_frozen(model)
    model.save(out_root, dataset)
    return TrainReport(system=SYSTEM, out=out_root, steps=steps, losses=losses, seconds=time.monotonic() - start)
