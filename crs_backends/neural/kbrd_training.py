"""Training KBRD's two parts through the one training engine: the recommender (cross-entropy of each target item
from the user vector over all entities), then the conversation model (teacher-forced LM loss with the user-vector
bias, recommender frozen), as the published training does; writes the published layout."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import torch

from catalog.ievalm_records import Record
from crs_backends.neural.engine import MOVIE_SLOT, ProgressFn, TrainConfig, TrainReport
from crs_backends.neural.kbrd import KBRD, SYSTEM, encode_text
from crs_backends.neural.training import Stage, run_stages, split_budget, wanted_steps
from crs_backends.neural.unicrs_text import replace_names

_Example = TypeVar("_Example")  # a rec or a conv training example (see _mean_loss)


def _rec_examples(model: KBRD, records: list[Record]) -> list[tuple[list[int], int]]:
    out = []
    for r in records:
        ents = model.entity_ids(r.entity)
        for target in model.kg.ids_of(list(r.rec)):
            out.append((ents, target))
    return out


def _conv_examples(model: KBRD, records: list[Record]) -> list[tuple[list[int], list[int], list[int]]]:
    out = []
    n = model.settings["resp_max_length"]
    for r in records:
        if not r.resp.strip():
            continue
        # the small size writes the films it recommends as the movie slot (CRS Arena's policy fills it with the
        # ranking); the published KBRD wrote titles as ReDial's replies do
        text = replace_names(r.resp, r.rec, MOVIE_SLOT) if model.size == "small" else r.resp
        resp = [model.bos_id] + encode_text(model.tokenizer, text)[: max(0, n - 2)] + [model.eos_id]
        out.append((model.context_ids(r.context), model.entity_ids(r.entity), resp))
    return out


def _pad(rows: list[list[int]], value: int) -> torch.Tensor:
    width = max(len(r) for r in rows)
    t = torch.full((len(rows), width), value, dtype=torch.long)
    for i, r in enumerate(rows):
        t[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return t


def rec_loss(model: KBRD, batch: list[tuple[list[int], int]], node_table: torch.Tensor | None = None) -> torch.Tensor:
    ids, mask = model._entity_batch([b[0] for b in batch])
    labels = torch.tensor([b[1] for b in batch], dtype=torch.long, device=model.device)
    if node_table is None:
        node_table = model.rec.get_node_embeds(model.edge_index, model.edge_type)
    return model.rec(ids, mask, node_table=node_table, labels=labels)["loss"]


def conv_loss(
    model: KBRD, batch: list[tuple[list[int], list[int], list[int]]], node_table: torch.Tensor | None = None
) -> torch.Tensor:
    pad = model.conv.config.pad_token_id
    ctx = _pad([b[0] for b in batch], pad).to(model.device)
    labels = _pad([b[2] for b in batch], -100).to(model.device)
    ids, mask = model._entity_batch([b[1] for b in batch])
    with torch.no_grad():  # the recommender is frozen while the conversation model trains (as published)
        table = node_table if node_table is not None else model.node_table()
        user = model.rec.user_embeds(table, ids, mask)
    return model.conv(input_ids=ctx, attention_mask=ctx.ne(pad).long(), labels=labels, decoder_user_embeds=user).loss


def evaluate_loss(model: KBRD, records: list[Record], part: str, batch_size: int = 16) -> float:
    """Mean loss of ``part`` ("rec" | "conv") over ``records`` in eval mode (for tests and reports)."""
    model.rec.eval()
    model.conv.eval()
    if part == "rec":
        return _mean_loss(model, _rec_examples(model, records), rec_loss, batch_size)
    return _mean_loss(model, _conv_examples(model, records), conv_loss, batch_size)


def _mean_loss(
    model: KBRD,
    examples: list[_Example],
    fn: Callable[[KBRD, list[_Example], torch.Tensor | None], torch.Tensor],
    batch_size: int,
) -> float:
    """Mean of ``fn`` over ``examples`` in batches, NaN when there are none."""
    if not examples:
        return float("nan")
    total, n = 0.0, 0
    with torch.no_grad():
        table = model.rec.get_node_embeds(model.edge_index, model.edge_type)
        for i in range(0, len(examples), batch_size):
            batch = examples[i : i + batch_size]
            total += float(fn(model, batch, table)) * len(batch)
            n += len(batch)
    return total / n


def train(
    model: KBRD, records: list[Record], out_root, dataset: str, config: TrainConfig, progress: ProgressFn | None = None
) -> TrainReport:
    """Train the recommender (cross-entropy of each target item from the user vector over all entities), then the
    conversation model (teacher-forced LM loss with the user-vector bias, recommender frozen), through the one
    training engine (:mod:`crs_backends.neural.training`: resumable); writes the published layout under
    ``out_root``. ``max_steps`` is shared half and half when both parts have data."""
    t0 = time.monotonic()
    model.rec.to(config.device)
    model.conv.to(config.device)
    model.device = torch.device(config.device)
    model.edge_index, model.edge_type = model.edge_index.to(model.device), model.edge_type.to(model.device)
    model.item_ids = model.item_ids.to(model.device)
    rec_ex, conv_ex = _rec_examples(model, records), _conv_examples(model, records)
    budget = split_budget(
        config.max_steps,
        {"rec": wanted_steps(len(rec_ex), config), "conv": wanted_steps(len(conv_ex), config)},
        shares={"rec": 0.5, "conv": 0.5},
    )
    frozen: dict[str, torch.Tensor] = {}

    def freeze_recommender() -> None:  # the conversation model learns from a fixed user vector
        model.rec.eval()
        model.invalidate()
        with torch.no_grad():
            frozen["nodes"] = model.node_table()

    stages = [
        Stage(
            "rec",
            rec_ex,
            lambda batch: rec_loss(model, batch),
            [model.rec],
            budget["rec"],
            config.lr,
            lengths=[len(e[0]) for e in rec_ex],
            setup=model.invalidate,
            clip=config.rec_clip,
        ),
        Stage(
            "conv",
            conv_ex,
            lambda batch: conv_loss(model, batch, frozen["nodes"]),
            [model.conv],
            budget["conv"],
            config.reply_rate,
            lengths=[len(e[0]) + len(e[2]) for e in conv_ex],
            setup=freeze_recommender,
        ),
    ]
    steps, losses = run_stages(SYSTEM, dataset, out_root, stages, config, progress)
    model.rec.eval()
    model.conv.eval()
    model.invalidate()
    model.save(out_root, dataset)
    return TrainReport(system=SYSTEM, out=Path(out_root), steps=steps, losses=losses, seconds=time.monotonic() - t0)
