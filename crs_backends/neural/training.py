"""The one training loop of KBRD, BARCOR and UniCRS: stages, a step budget, one resume policy, one state path.

A model's ``train`` describes its training as :class:`Stage` s run in order (KBRD: ``rec`` then ``conv``;
BARCOR: ``conv`` then ``rec``, the recommender starting from the reply model's BART; UniCRS: ``prompt``
pre-training of the recommendation path, then ``joint``). Each stage supplies its examples, its loss
and the modules it trains; :func:`run_stage` does the rest the same way for all three:

- batches: a seeded shuffle per epoch, sorted by length within windows of 16 batches (less padding),
  in seeded order, so a resumed run sees the same batches;
- AdamW with a linear warm-up (a fifth of the stage, at most 50 steps), then a linear decay to zero at the
  stage's last step (:func:`lr_factor`), the gradient norm clipped at the stage's ``clip`` (1.0 unless the stage
  says otherwise; KBRD's recommender: ``TrainConfig.rec_clip``), one loss value logged per step (named parts
  logged separately);
- the state (trained modules, optimizer, step, losses, torch RNG, the devices its steps ran on) in
  ``<out>/.train/<system>_<stage>_<dataset>/trainer_state.pt``, written atomically every 50 steps or
  60 seconds and at the end of the stage;
- resume: a readable state for the same modules continues where it stopped (a finished stage does
  nothing; a larger budget continues it); a damaged or foreign state is reported with a warning and the stage
  starts again from step 0. A state may be stored in parts (:func:`split_state`, for a repository that carries a
  build between machines); it is read joined, and written whole again.
"""

from __future__ import annotations

import io
import math
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from crs_backends.neural.engine import ProgressFn, TrainConfig

STATE_FILE = "trainer_state.pt"
SAVE_EVERY_STEPS = 50
SAVE_EVERY_SECONDS = 60.0
BUCKET_BATCHES = 16
# a linear warm-up of the learning rate: without it the small post-LN transformers (BART, GPT-2) collapsed to one
# representation for every input within their first steps at the small versions' learning rates
WARMUP_SHARE = 0.2
MAX_WARMUP = 50

LossFn = Callable[[list], "torch.Tensor | dict[str, torch.Tensor]"]


@dataclass
class Stage:
    """One optimisation stage. ``loss(batch)`` returns a tensor, or named tensors that are summed (each name
    is logged on its own). ``start`` runs once before the first step of a fresh (not resumed) stage."""

    name: str
    examples: list
    loss: LossFn
    modules: list[nn.Module]
    steps: int
    lr: float
    lengths: list[int] | None = None
    start: Callable[[], None] | None = None
    setup: Callable[[], None] | None = None  # before every run of the stage, fresh or resumed
    end: Callable[[], None] | None = None  # once the stage has completed in this run (not when it was done before)
    params: list[nn.Parameter] | None = None
    # parameters with a peak learning rate of their own (the schedule scales each); None: ``params`` at ``lr``
    groups: list[tuple[list[nn.Parameter], float]] | None = None
    parts: tuple[str, ...] = ()  # the loss names it logs (default: its own name)
    warmup: int | None = None  # steps of linear learning-rate warm-up (None: WARMUP_SHARE of the stage, at most 50)
    clip: float | None = 1.0  # the gradient norm's limit (None: not clipped)
    losses: dict[str, list[float]] = field(default_factory=dict)

    @property
    def names(self) -> tuple[str, ...]:
        return self.parts or (self.name,)


def state_path(out_root, system: str, stage: str, dataset: str) -> Path:
    return Path(out_root) / ".train" / f"{system}_{stage}_{dataset}" / STATE_FILE


def state_parts(path: Path) -> list[Path]:
    """The parts a state was split into (``<state>.part-000`` …, :func:`split_state`), in order."""
    return sorted(path.parent.glob(f"{path.name}.part-*"))


def has_state(path: Path) -> bool:
    return path.exists() or bool(state_parts(path))


def read_state(path: Path, *, mmap: bool = False) -> dict:
    """A training state, whole or from its parts (the whole file wins: a run that resumed from parts writes it);
    ``mmap``: a whole file's tensors are mapped, not read (for a reader of its steps and losses alone)."""
    if path.exists() or not state_parts(path):
        return torch.load(path, map_location="cpu", weights_only=False, mmap=mmap)
    joined = b"".join(part.read_bytes() for part in state_parts(path))
    return torch.load(io.BytesIO(joined), map_location="cpu", weights_only=False)


def split_state(path: Path, max_bytes: int) -> list[Path]:
    """Split a state file into parts of at most ``max_bytes`` (a repository that carries a build between machines
    takes no file over 100 MB) and remove the whole file; returns the parts. Joined by :func:`read_state`."""
    for stale in state_parts(path):
        stale.unlink()
    data = path.read_bytes()
    parts = []
    for i, start in enumerate(range(0, len(data), max_bytes)):
        part = path.with_name(f"{path.name}.part-{i:03d}")
        part.write_bytes(data[start : start + max_bytes])
        parts.append(part)
    path.unlink()
    return parts


def epoch_batches(lengths: list[int], batch_size: int, seed: int, epoch: int) -> list[list[int]]:
    """Example indices per batch for one epoch (see the module docstring). Deterministic for (seed, epoch)."""
    g = torch.Generator().manual_seed(seed * 1000 + epoch)
    perm = torch.randperm(len(lengths), generator=g).tolist()
    window = batch_size * BUCKET_BATCHES
    batches = []
    for start in range(0, len(perm), window):
        chunk = sorted(perm[start : start + window], key=lambda i: lengths[i])
        batches += [chunk[j : j + batch_size] for j in range(0, len(chunk), batch_size)]
    order = torch.randperm(len(batches), generator=g).tolist()
    return [batches[i] for i in order]


def split_budget(
    max_steps: int | None, wanted: dict[str, int], shares: dict[str, float] | None = None
) -> dict[str, int]:
    """Steps per stage: ``wanted`` (epochs x batches each), or ``max_steps`` shared out when it is smaller, by
    ``shares`` (default: in proportion to ``wanted``); no stage gets more than it wants."""
    total = sum(wanted.values())
    if max_steps is None or total <= max_steps:
        return dict(wanted)
    weights = {p: (shares or {}).get(p, wanted[p] / total if total else 0.0) for p in wanted}
    norm = sum(w for p, w in weights.items() if wanted[p] > 0) or 1.0
    out, left = {}, max(0, max_steps)
    parts = [p for p in wanted if wanted[p] > 0]
    for n, p in enumerate(parts):
        share = left if n == len(parts) - 1 else max(1, round(max_steps * weights[p] / norm))
        out[p] = min(wanted[p], share, left)
        left -= out[p]
    return {p: out.get(p, 0) for p in wanted}


def wanted_steps(n_examples: int, config: TrainConfig) -> int:
    return config.epochs * math.ceil(n_examples / max(1, config.batch_size)) if n_examples else 0


def _states(modules: list[nn.Module]) -> list[dict]:
    return [{k: v.detach().cpu() for k, v in m.state_dict().items()} for m in modules]


def lr_factor(step: int, warmup: int, total: int) -> float:
    """The learning rate's factor at ``step`` (0-based) of a ``total``-step stage: linear warm-up over ``warmup``
    steps, then linear decay to zero, as transformers' ``get_linear_schedule_with_warmup``. Without the decay the
    small KBRD's Recall@10 on ReDial swung by .03 between evaluations five steps apart and ended at .139 after two
    epochs (first 1,000 test records); decayed over the same two epochs it ended at .174 (2026-11-26)."""
    if step < warmup:
        return (step + 1) / warmup
    return max(0.0, (total - step) / max(1, total - warmup))


def run_stage(
    system: str, dataset: str, out_root, stage: Stage, config: TrainConfig, progress: ProgressFn | None = None
) -> int:
    """Run (or resume) one stage; returns the steps done now. Losses go to ``stage.losses``."""
    from crs_backends.neural.checkpoints import load_strict

    path = state_path(out_root, system, stage.name, dataset)
    if stage.groups is not None:
        groups = [(list(ps), lr) for ps, lr in stage.groups if ps]
    else:
        own = stage.params if stage.params is not None else [p for m in stage.modules for p in m.parameters()]
        groups = [([p for p in own if p.requires_grad], stage.lr)]
    params = [p for ps, _ in groups for p in ps]
    peaks = [lr for _, lr in groups]

    def new_optimizer() -> torch.optim.Optimizer:
        return torch.optim.AdamW([{"params": ps, "lr": lr} for ps, lr in groups], weight_decay=0.01)

    optimizer = new_optimizer()
    step, history = 0, {}
    devices: list[str] = []
    resumed = False
    if config.resume and has_state(path):
        before = [{k: v.clone() for k, v in s.items()} for s in _states(stage.modules)]  # if loading fails half-way
        try:
            saved = read_state(path)
            if saved.get("stage") != stage.name or len(saved["modules"]) != len(stage.modules):
                raise ValueError("the state belongs to another stage")
            for module, state in zip(stage.modules, saved["modules"]):
                load_strict(module, state, source=path)  # checked before anything is copied
            optimizer.load_state_dict(saved["optimizer"])
            step, history = int(saved["step"]), {k: list(v) for k, v in saved["losses"].items()}
            devices = [str(d) for d in saved.get("devices") or []]
            torch.set_rng_state(saved["rng"])
            if torch.cuda.is_available() and saved.get("cuda_rng") is not None:
                torch.cuda.set_rng_state_all(saved["cuda_rng"])
            resumed = True
        except Exception as e:  # a damaged or foreign state: this stage starts again, from the weights it had
            warnings.warn(
                f"{system}: ignoring the training state {path} ({type(e).__name__}: {e}); starting {stage.name} afresh",
                stacklevel=2,
            )
            for module, state in zip(stage.modules, before):
                module.load_state_dict(state)
            optimizer = new_optimizer()
            step, history, devices = 0, {}, []
    stage.losses = history
    if step >= stage.steps or not stage.examples:
        return 0
    if not resumed and stage.start is not None:
        stage.start()
    if stage.setup is not None:
        stage.setup()

    def save() -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        torch.save(
            {
                "stage": stage.name,
                "modules": _states(stage.modules),
                "optimizer": optimizer.state_dict(),
                "step": step,
                "losses": stage.losses,
                "devices": devices,  # where its steps ran (a build may resume on another machine)
                "rng": torch.get_rng_state(),
                "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            },
            tmp,
        )
        os.replace(tmp, path)
        for stale in state_parts(path):  # the whole file is newer than the parts a resumed run began from
            stale.unlink()

    bs = max(1, config.batch_size)
    warmup = max(1, stage.warmup if stage.warmup is not None else min(MAX_WARMUP, round(WARMUP_SHARE * stage.steps)))
    lengths = stage.lengths or [1] * len(stage.examples)
    per_epoch = math.ceil(len(stage.examples) / bs)
    first, last_save, order, order_epoch = step, time.monotonic(), [], -1
    if config.device not in devices:
        devices.append(config.device)
    for m in stage.modules:
        m.train()
    try:
        while step < stage.steps:
            epoch, index = divmod(step, per_epoch)
            if epoch != order_epoch:
                order, order_epoch = epoch_batches(lengths, bs, config.seed, epoch), epoch
            batch = [stage.examples[i] for i in order[index]]
            for group, peak in zip(optimizer.param_groups, peaks):  # from the step alone: a resumed run continues
                group["lr"] = peak * lr_factor(step, warmup, stage.steps)
            out = stage.loss(batch)
            parts = out if isinstance(out, dict) else {stage.name: out}
            loss = sum(parts.values())
            if not isinstance(loss, torch.Tensor):  # sum() of no parts is the int 0
                raise ValueError(f"stage {stage.name!r}: the loss function returned no loss")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if stage.clip is not None:
                torch.nn.utils.clip_grad_norm_(params, stage.clip)
            optimizer.step()
            step += 1
            for name, value in parts.items():
                stage.losses.setdefault(name, []).append(float(value.detach()))
            if progress is not None:
                progress(stage.name, step, stage.steps)
            if step % SAVE_EVERY_STEPS == 0 or time.monotonic() - last_save > SAVE_EVERY_SECONDS:
                save()
                last_save = time.monotonic()
        save()
    finally:
        for m in stage.modules:
            m.eval()
    if stage.end is not None:
        stage.end()
    return step - first


def run_stages(
    system: str, dataset: str, out_root, stages: list[Stage], config: TrainConfig, progress: ProgressFn | None = None
) -> tuple[int, dict[str, list[float]]]:
    """Run the stages in order (seeded once); returns (steps done now, losses by name over all runs)."""
    torch.manual_seed(config.seed)
    steps = 0
    losses: dict[str, list[float]] = {}
    for stage in stages:
        steps += run_stage(system, dataset, out_root, stage, config, progress)
        for name in stage.names:
            losses.setdefault(name, [])
        for name, values in stage.losses.items():
            losses.setdefault(name, []).extend(values)
    return steps, losses
