"""The one training engine of KBRD, BARCOR and UniCRS (crs_backends.neural.training): batches, budgets, one
resume policy and one state path, on a tiny real module."""

from __future__ import annotations

import warnings

import torch
from torch import nn

from crs_backends.neural.engine import TrainConfig
from crs_backends.neural.training import Stage, epoch_batches, lr_factor, run_stages, split_budget, state_path


def test_epoch_batches_cover_every_example_once_and_are_deterministic():
    lengths = [(i * 37) % 101 for i in range(203)]
    batches = epoch_batches(lengths, 8, seed=1, epoch=2)
    assert sorted(i for b in batches for i in b) == list(range(203))
    assert len(batches) == -(-203 // 8) and all(len(b) <= 8 for b in batches)
    assert batches == epoch_batches(lengths, 8, seed=1, epoch=2)
    assert batches != epoch_batches(lengths, 8, seed=1, epoch=3)


def test_the_budget_is_shared_and_never_exceeds_what_a_stage_wants():
    assert split_budget(None, {"rec": 30, "conv": 50}) == {"rec": 30, "conv": 50}
    assert split_budget(20, {"rec": 30, "conv": 50}, shares={"rec": 0.5, "conv": 0.5}) == {"rec": 10, "conv": 10}
    assert split_budget(20, {"rec": 4, "conv": 50}, shares={"rec": 0.5, "conv": 0.5}) == {"rec": 4, "conv": 16}
    assert split_budget(10, {"prompt": 0, "joint": 50}) == {"prompt": 0, "joint": 10}


def _stage(module: nn.Module, steps: int, name: str = "fit") -> Stage:
    xs = [torch.tensor([float(i % 7), 1.0]) for i in range(40)]

    def loss(batch):
        x = torch.stack(batch)
        return ((module(x).squeeze(-1) - 3 * x[:, 0]) ** 2).mean()

    return Stage(name, xs, loss, [module], steps, 0.05)


def test_the_learning_rate_warms_up_then_decays_to_zero_at_the_last_step():
    factors = [lr_factor(step, 10, 100) for step in range(100)]
    assert factors[:10] == sorted(factors[:10]) and factors[0] > 0  # warm-up: rising from the first step
    assert factors[9] == max(factors) and abs(factors[9] - 1.0) < 1e-9 and abs(factors[10] - 1.0) < 1e-9
    assert factors[10:] == sorted(factors[10:], reverse=True)  # then falling
    assert 0 < factors[-1] < 0.05 and lr_factor(100, 10, 100) == 0.0 and lr_factor(150, 10, 100) == 0.0
    assert lr_factor(0, 1, 1) > 0  # a one-step stage still takes its step


def test_a_stage_clips_the_gradient_norm_at_its_own_limit_or_not_at_all(tmp_path, monkeypatch):
    clipped = []
    clip = torch.nn.utils.clip_grad_norm_
    monkeypatch.setattr(
        torch.nn.utils, "clip_grad_norm_", lambda params, limit: clipped.append(limit) or clip(params, limit)
    )
    default, loose, unclipped = (
        _stage(nn.Linear(2, 1), 3, "a"),
        _stage(nn.Linear(2, 1), 2, "b"),
        _stage(nn.Linear(2, 1), 4, "c"),
    )
    loose.clip, unclipped.clip = 5.0, None
    steps, _ = run_stages("toy", "ds", tmp_path, [default, loose, unclipped], TrainConfig(batch_size=8))
    assert steps == 9 and clipped == [1.0, 1.0, 1.0, 5.0, 5.0]


def test_stages_resume_from_the_saved_step_and_a_finished_stage_does_nothing(tmp_path):
    config = TrainConfig(batch_size=8, seed=0)
    torch.manual_seed(0)
    module = nn.Linear(2, 1)
    stage = _stage(module, 12)
    with torch.no_grad():
        before = float(stage.loss(stage.examples))  # over every example: one batch's loss depends on its examples
    steps, losses = run_stages("toy", "ds", tmp_path, [stage], config)
    with torch.no_grad():
        after = float(stage.loss(stage.examples))
    assert steps == 12 and len(losses["fit"]) == 12 and after < before
    saved = torch.load(state_path(tmp_path, "toy", "fit", "ds"), weights_only=False)
    assert saved["step"] == 12 and saved["stage"] == "fit" and saved["devices"] == ["cpu"]
    again = nn.Linear(2, 1)
    steps, losses = run_stages("toy", "ds", tmp_path, [_stage(again, 12)], config)
    assert steps == 0 and len(losses["fit"]) == 12
    steps, losses = run_stages("toy", "ds", tmp_path, [_stage(again, 15)], config)
    assert steps == 3 and len(losses["fit"]) == 15
    assert torch.equal(
        again.weight, torch.load(state_path(tmp_path, "toy", "fit", "ds"), weights_only=False)["modules"][0]["weight"]
    )


def test_a_damaged_state_restarts_the_stage_with_a_warning(tmp_path):
    config = TrainConfig(batch_size=8, seed=0)
    path = state_path(tmp_path, "toy", "fit", "ds")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a torch file")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        steps, _ = run_stages("toy", "ds", tmp_path, [_stage(nn.Linear(2, 1), 5)], config)
    assert steps == 5 and any("starting fit afresh" in str(w.message) for w in caught)
    # a state of another shape (another module) is refused the same way
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        steps, _ = run_stages(
            "toy", "ds", tmp_path, [_stage(nn.Sequential(nn.Linear(2, 1)), 7)], TrainConfig(batch_size=8)
        )
    assert steps == 7
    assert any("afresh" in str(w.message) for w in caught)


def test_start_runs_only_on_a_fresh_stage(tmp_path):
    calls = []
    module = nn.Linear(2, 1)
    stage = _stage(module, 4)
    stage.start = lambda: calls.append("start")
    run_stages("toy", "ds", tmp_path, [stage], TrainConfig(batch_size=8))
    stage = _stage(module, 6)
    stage.start = lambda: calls.append("start")
    run_stages("toy", "ds", tmp_path, [stage], TrainConfig(batch_size=8))
    assert calls == ["start"]


def test_a_state_that_fails_after_the_weights_loaded_restarts_from_the_weights_the_stage_had(tmp_path):
    """The modules load, then the optimizer state does not: the stage starts again from step 0 *and* from the
    weights it was given, not from the half-restored ones."""
    config = TrainConfig(batch_size=8, seed=0)
    torch.manual_seed(0)
    trained = nn.Linear(2, 1)
    run_stages("toy", "ds", tmp_path, [_stage(trained, 12)], config)
    path = state_path(tmp_path, "toy", "fit", "ds")
    saved = torch.load(path, weights_only=False)
    saved["optimizer"] = {"state": {}, "param_groups": []}  # loads into nothing: AdamW refuses it
    torch.save(saved, path)
    torch.manual_seed(1)
    fresh = nn.Linear(2, 1)
    given = {k: v.clone() for k, v in fresh.state_dict().items()}
    seen = []
    stage = _stage(fresh, 1)
    stage.start = lambda: seen.append({k: v.clone() for k, v in fresh.state_dict().items()})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        steps, _ = run_stages("toy", "ds", tmp_path, [stage], config)
    assert steps == 1 and any("afresh" in str(w.message) for w in caught)
    assert all(torch.equal(seen[0][k], given[k]) for k in given)  # not the saved (trained) weights


def test_parameter_groups_follow_the_schedule_each_from_its_own_peak(tmp_path, monkeypatch):
    seen: list[list[float]] = []
    step = torch.optim.AdamW.step

    def record(self, *args, **kwargs):
        seen.append([g["lr"] for g in self.param_groups])
        return step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.AdamW, "step", record)
    module = nn.Linear(2, 1)
    stage = _stage(module, 6)
    stage.groups = [([module.weight], 1e-2), ([module.bias], 1e-4), ([], 1.0)]  # an empty group is left out
    steps, _ = run_stages("toy", "ds", tmp_path, [stage], TrainConfig(batch_size=8))
    assert steps == 6 and all(len(lrs) == 2 for lrs in seen)
    for lrs, factor in zip(seen, [lr_factor(s, 1, 6) for s in range(6)]):
        assert abs(lrs[0] - 1e-2 * factor) < 1e-12 and abs(lrs[1] - 1e-4 * factor) < 1e-12
