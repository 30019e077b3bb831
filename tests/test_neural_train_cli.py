"""The training command line: data resolution, the published layout, resuming, the quality report."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from commands import cli
from crs_backends.neural.evaluation import is_validation
from crs_backends.neural.train_command import load_train_data, resolve_data_dir


def run(*args: str):
    result = CliRunner().invoke(cli, ["train", *args], catch_exceptions=False)  # crs-arena train …
    return result.exit_code, result.output


def test_bad_data_gives_a_clear_error(tmp_path):
    code, out = run("kbrd", "--data", str(tmp_path / "nope"), "--out", str(tmp_path / "m"))
    assert code != 0 and "no such directory" in out and "iEvaLM layout" in out
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out = run("kbrd", "--data", str(empty), "--out", str(tmp_path / "m"))
    assert code != 0 and "missing entity2id.json" in out
    code, out = run("barcor", "--data", "bundled", "--out", str(tmp_path / "m"), "--records", str(tmp_path / "x.jsonl"))
    assert code != 0 and "records file not found" in out
    code, out = run("unicrs", "--data", "bundled", "--out", str(tmp_path / "m"), "--max-steps", "-1")
    assert code != 0 and "--max-steps" in out
    code, out = run("nosuch", "--data", "bundled", "--out", str(tmp_path / "m"))
    assert code != 0
    assert not (tmp_path / "m").exists()


def test_a_kg_without_records_names_what_was_looked_for(tmp_path, shared_data):
    kg_only = tmp_path / "mykg"
    kg_only.mkdir()
    for f in ("entity2id.json", "relation2id.json", "kg.json", "item_ids.json"):
        (kg_only / f).write_bytes((shared_data / "redial" / f).read_bytes())
    code, out = run("kbrd", "--data", str(kg_only), "--out", str(tmp_path / "m"))
    assert code != 0 and "mykg_eval/train_data_processed.jsonl" in out and "--records" in out
    (kg_only / "kg.json").write_text("{not json", encoding="utf-8")
    code, out = run(
        "kbrd",
        "--data",
        str(kg_only),
        "--out",
        str(tmp_path / "m"),
        "--records",
        str(shared_data / "redial_eval" / "test_data_processed.jsonl"),
    )
    assert code != 0 and "kg.json" in out


def test_default_records_and_names(shared_data):
    assert resolve_data_dir("redial") == shared_data / "redial"
    data = load_train_data(str(shared_data / "redial"), limit=7)
    assert data.dataset == "redial" and len(data.records) == 7
    assert data.source.endswith("redial_eval/valid_data_processed.jsonl")  # no train split is published for ReDial
    odkg = load_train_data("opendialkg", limit=3)
    assert odkg.source.endswith("opendialkg_eval/train_data_processed.jsonl")
    bundled = load_train_data("bundled", dialogues=10)
    assert bundled.dataset == "bundled" and bundled.kg_dir is None and 20 <= len(bundled.records) <= 40


def test_dataset_records_add_synthetic_dialogues_over_the_dataset_catalog(shared_data, tmp_path):
    """``--dialogues N`` with a dataset: its real records first, then N synthetic dialogues over its own catalog,
    whose targets follow what the real records name (never the test records)."""
    from collections import Counter

    real = load_train_data(str(shared_data / "redial"))
    # the validation conversations (a fixed tenth by id) are held out: never among the training records
    held = {r.dialog_id for r in real.validation}
    assert held and held.isdisjoint(r.dialog_id for r in real.records) and all(map(is_validation, held))
    data = load_train_data(str(shared_data / "redial"), dialogues=200, seed=3)
    assert data.real_records == real.records and data.synthetic == len(data.records) - len(real.records) > 200
    assert data.validation == real.validation
    assert "200 synthetic dialogues over the redial catalog (seed 3)" in data.source
    synthetic = data.records[len(real.records) :]
    assert all(data.kg.ids_of(r.rec) for r in synthetic if r.rec)  # every target is a KG item
    # targets lean to what the real conversations name: the mentioned items are a small part of ReDial's 6,576
    mentioned = {n for r in real.records for n in [*r.entity, *r.rec]}
    targets = Counter(n for r in synthetic for n in r.rec)
    share = sum(c for n, c in targets.items() if n in mentioned) / sum(targets.values())
    assert share > 0.5, share
    assert load_train_data(str(shared_data / "redial"), dialogues=200, seed=3).records == data.records  # seeded
    # a dataset without item metadata cannot have synthetic dialogues: a clear message, no traceback
    kg_only = tmp_path / "mykg"
    kg_only.mkdir()
    for name in ("entity2id.json", "relation2id.json", "kg.json", "item_ids.json"):
        (kg_only / name).write_bytes((shared_data / "redial" / name).read_bytes())
    records = str(shared_data / "redial_eval" / "valid_data_processed.jsonl")
    code, out = run(
        "kbrd", "--data", str(kg_only), "--out", str(tmp_path / "m"), "--records", records, "--dialogues", "5"
    )
    assert code != 0 and "id2info.json" in out and "Traceback" not in out


def _steps(out: str) -> dict[str, int]:
    return {part: int(n) for part, n in re.findall(r"^\s+(rec|conv): (\d+) steps", out, flags=re.M)}


def test_train_writes_the_published_layout_and_resumes(tmp_path, shared_data):
    out_dir = tmp_path / "models"
    args = [
        "kbrd",
        "--data",
        str(shared_data / "redial"),
        "--out",
        str(out_dir),
        "--limit",
        "64",
        "--batch-size",
        "8",
        "--quiet",
    ]
    code, out = run(*args, "--max-steps", "3")
    assert code == 0, out
    assert "64 records" in out and "3 new steps" in out
    assert _steps(out) == {"rec": 2, "conv": 1}
    assert (out_dir / "kbrd_rec_redial" / "model.pt").exists()
    assert (out_dir / "kbrd_conv_redial" / "config.json").exists()
    assert (out_dir / "kbrd_conv_redial" / "tokenizer.json").exists()

    code, out = run(*args, "--max-steps", "6")  # a second run continues where the first stopped
    assert code == 0, out
    assert "continuing" in out and "3 new steps" in out
    assert _steps(out) == {"rec": 3, "conv": 3}

    code, out = run(
        "report", "--models", str(out_dir), "--data", str(shared_data / "redial"), "--limit", "30", "--quiet"
    )
    assert code == 0, out
    assert "0.169" in out and "not trained" in out  # published numbers beside ours; barcor/unicrs skipped
    assert re.search(r"^BENCH kbrd_recall_at_10 \d\.\d{3} ratio target >= 0.169$", out, flags=re.M)
    # beside the models, what the records give away to rankings that read no text, on the same records
    for name in ("popularity", "named first"):
        assert re.search(rf"^{name} +\d+ +\d+ +\d\.\d{{3}} +\d\.\d{{3}} +\d\.\d{{3}} +\(reads no text", out, flags=re.M)
    # recipes are chosen on the validation conversations the training held out: a report, never a BENCH line
    code, out = run(
        "report", "--models", str(out_dir), "--data", str(shared_data / "redial"), "--limit", "30", "--quiet",
        "--split", "validation", "--systems", "kbrd", "--against", str(out_dir),
    )  # fmt: skip
    assert code == 0, out
    assert "validation: 30 records of redial's validation conversations" in out and "BENCH" not in out
    assert re.search(r"^popularity +\d+ +\d+ ", out, flags=re.M)
    # R@10 with its interval over the conversations; against a set (here the same one): the paired difference
    assert re.search(r"KBRD: R@10 \d\.\d{3} \(95% interval \d\.\d{3} to \d\.\d{3}, resampling \d+ conversations\)", out)
    assert "this set minus that one +0.000 (95% interval +0.000 to +0.000" in out
    # where the hits come from: the gold items the conversation named before and the new ones, apart
    assert re.search(r"KBRD: R@1/10/50 on the \d+ gold items the conversation named before .* on the \d+ new ones", out)
    # and the named ones again: films the training records repeat, and the others
    repeats = r"KBRD: of the named, R@10 on the \d+ whose film the training records repeat \d\.\d{3}, on the \d+ others"
    assert re.search(repeats, out)


@pytest.fixture
def tiny_data(tmp_path, monkeypatch):
    """The tiny ReDial folder (tests/tiny_redial.py) as the research data, an empty cache: what the builder's tests
    read on every machine, a fresh clone with no ../shared included."""
    from tiny_redial import write_tiny_redial

    data = write_tiny_redial(tmp_path / "data")
    monkeypatch.setenv("CRS_DATA_DIR", str(data))
    monkeypatch.setenv("CRS_ARENA_CACHE", str(tmp_path / "cache"))
    return data


def test_the_builder_trains_on_redial_and_publishes_the_set_whole(tiny_data, tmp_path, monkeypatch, capsys):
    import torch

    from crs_backends.neural import names, small, sources
    from crs_backends.neural.checkpoints import read_manifest, read_state_dict

    monkeypatch.setattr(small, "SYSTEMS", ("kbrd",))
    out = tmp_path / "sets" / "small-v99"
    assert small.main(["build", "--out", str(out), "--quick", "--quiet"]) == 0
    parts = ["kbrd_conv_redial", "kbrd_rec_redial", "kg_redial", "manifest.json"]
    assert sorted(p.name for p in out.iterdir()) == parts
    # what serving needs of ReDial's KG, with its source and licence; no item metadata (plots) beside it
    assert sorted(p.name for p in (out / "kg_redial").iterdir()) == [
        "SOURCE.md",
        "entity2id.json",
        "item_ids.json",
        "kg.json",
        "relation2id.json",
    ]
    assert "CC BY-SA" in (out / "kg_redial" / "SOURCE.md").read_text() and not list(out.rglob("id2info.json"))
    manifest = read_manifest(out)
    assert manifest["complete"] is True and manifest["dataset"] == "redial" and manifest["version"] == "small-v99"
    assert manifest["command"] == f"python -m crs_backends.neural.small build --out {out} --quick"
    assert manifest["systems"] == ["kbrd"] and manifest["recipe"] == small.DATASET_RECIPE
    assert manifest["train_settings"]["kbrd"]["max_steps"] == small.QUICK_SETTINGS["kbrd"]["max_steps"]
    assert manifest["stages"]["kbrd"]["rec"]["steps"] > 0 and manifest["stages"]["kbrd"]["conv"]["steps"] > 0
    # the validation tenth is held out of the training records
    assert manifest["data"]["validation_records"] > 0 and manifest["data"]["training_records"] > 0
    assert not list(out.parent.glob(".small-v99.*"))  # no temporary or old folder left beside it
    # half precision only where validation Recall did not move, measured; the files hold what the manifest says
    storage = manifest["storage"]["kbrd"]
    assert storage["dtype"] in ("float16", "float32") and storage["validation_records"] > 0
    assert (storage["dtype"] == "float16") == (storage["recall_float16"] == storage["recall_float32"])
    stored = {v.dtype for f in out.rglob("*.pt") for v in read_state_dict(f).values() if v.is_floating_point()}
    assert stored == {torch.float16 if storage["dtype"] == "float16" else torch.float32}
    assert not list(out.rglob("*.float32"))
    found = sources.small_source("kbrd", out)
    assert found is not None and found.dataset == "redial" and "trained here on ReDial" in found.variant
    assert names.small_set_complete(out)
    # never over an existing directory
    assert small.main(["build", "--out", str(out), "--quick", "--quiet"]) == 2
    assert "exists" in capsys.readouterr().err


def _stop_in_conv(system):
    """A build's progress callback that interrupts KBRD's second stage at its second step."""

    def progress(phase, done, total):
        if phase == "conv" and done == 2:
            raise KeyboardInterrupt

    return progress


def test_an_interrupted_build_serves_nothing_and_resumes(tiny_data, tmp_path, monkeypatch):
    """Stopped in KBRD's second stage, the build leaves no set (nor a temporary one) and keeps its training state in
    the folder ``--work`` names: the same command goes on from there (the finished recommender stage is not trained
    again)."""
    from crs_backends.neural import small
    from crs_backends.neural.checkpoints import read_manifest

    monkeypatch.setattr(small, "SYSTEMS", ("kbrd",))
    out = tmp_path / "sets" / "small-v98"

    monkeypatch.setattr(small, "_progress_for", lambda *a: _stop_in_conv)
    work = tmp_path / "kept" / "small-v98"
    command = ["build", "--out", str(out), "--quick", "--quiet", "--work", str(work)]
    assert small.main(command) == 130
    assert not out.exists() and not list(out.parent.glob(".small-v98.*"))
    states = {p.parent.name: p for p in (work / ".train").glob("*/trainer_state.pt")}
    assert "kbrd_rec_redial" in states
    rec_steps = small.trained_stages(work, ["kbrd"], "redial")["kbrd"]["rec"]["steps"]
    monkeypatch.setattr(small, "_progress_for", lambda *a: lambda system: None)
    assert small.main(command) == 0
    stages = read_manifest(out)["stages"]["kbrd"]
    assert stages["rec"]["steps"] == rec_steps  # not trained again
    assert stages["rec"]["devices"] == stages["conv"]["devices"] == ["cpu"]  # where the steps ran
    assert not small.build_work_dir("small-v98-quick").exists()


def test_a_build_carried_in_parts_to_another_machine_resumes_there(tiny_data, tmp_path, monkeypatch):
    """``small carry``: an interrupted build's states over the size limit are split into parts, the folder moves (as
    a commit would carry it), the same command resumes from the parts; once the system is built, its states keep
    only what the manifest reads."""
    import shutil

    from crs_backends.neural import small
    from crs_backends.neural.checkpoints import read_manifest
    from crs_backends.neural.training import has_state, state_parts

    monkeypatch.setattr(small, "SYSTEMS", ("kbrd",))
    out, here = tmp_path / "sets" / "small-v96", tmp_path / "machine-1" / "small-v96"

    monkeypatch.setattr(small, "_progress_for", lambda *a: _stop_in_conv)
    assert small.main(["build", "--out", str(out), "--quick", "--quiet", "--work", str(here)]) == 130
    rec = here / ".train" / "kbrd_rec_redial" / "trainer_state.pt"
    steps = small.trained_stages(here, ["kbrd"], "redial")["kbrd"]["rec"]["steps"]
    size = rec.stat().st_size
    assert small.carry(here, systems=("kbrd",), max_bytes=size // 3 + 1) == [
        f"kbrd_rec_redial: step {steps}, split into 3 parts"
    ]
    assert not rec.exists() and len(state_parts(rec)) == 3 and has_state(rec)
    there = tmp_path / "machine-2" / "small-v96"
    shutil.copytree(here, there)
    shutil.rmtree(here)
    monkeypatch.setattr(small, "_progress_for", lambda *a: lambda system: None)
    assert small.main(["build", "--out", str(out), "--quick", "--quiet", "--work", str(there)]) == 0
    assert read_manifest(out)["stages"]["kbrd"]["rec"]["steps"] == steps  # resumed from the parts: not trained again
    done = small.carry(there, systems=("kbrd",))
    assert sorted(line.split(":")[0] for line in done) == ["kbrd_conv_redial", "kbrd_rec_redial"]
    assert small.trained_stages(there, ["kbrd"], "redial") == read_manifest(out)["stages"]
    moved = tmp_path / "sets" / "small-v95"
    assert small.main(["build", "--out", str(moved), "--quick", "--quiet", "--work", str(there)]) == 0
    assert read_manifest(moved)["stages"] == read_manifest(out)["stages"]  # built from the carried parts alone


def test_a_build_trained_only_then_written_by_the_same_command(tiny_data, tmp_path, monkeypatch, capsys):
    """``build --work W --train-only`` trains and writes no set; ``build --out DIR --work W`` then writes the set from
    what W holds, training nothing again (a new version of the code can write the set another one trained)."""
    from crs_backends.neural import small
    from crs_backends.neural.checkpoints import read_manifest

    monkeypatch.setattr(small, "SYSTEMS", ("kbrd",))
    work, out = tmp_path / "kept" / "small-v94", tmp_path / "sets" / "small-v94"
    assert small.main(["build", "--work", str(work), "--train-only", "--quick", "--quiet"]) == 0
    assert "the set is written by the same command with --out DIR" in capsys.readouterr().out
    assert not out.parent.exists()  # no set, nor a temporary one
    trained = small.trained_stages(work, ["kbrd"], "redial")["kbrd"]
    assert trained["rec"]["steps"] > 0 and trained["conv"]["steps"] > 0

    def never(system):
        raise AssertionError(f"{system} trained again")

    monkeypatch.setattr(small, "_progress_for", lambda *a: never)
    assert small.main(["build", "--out", str(out), "--quick", "--quiet", "--work", str(work)]) == 0
    assert read_manifest(out)["stages"]["kbrd"] == trained
    # --train-only needs --work and writes no set; a set needs --out
    for args in (["--train-only"], ["--train-only", "--work", str(work), "--out", str(tmp_path / "x")], []):
        assert small.main(["build", "--quiet", *args]) == 2
    err = capsys.readouterr().err
    assert "--train-only trains in --work (required)" in err and "--out names the directory" in err


def test_a_build_without_redial_says_where_to_give_it(tmp_path, monkeypatch, capsys):
    from crs_backends.neural import small

    monkeypatch.setenv("CRS_DATA_DIR", str(tmp_path / "no-data"))
    monkeypatch.setenv("CRS_ARENA_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "small-v97"
    assert small.main(["build", "--out", str(out), "--quick", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "CRS_DATA_DIR" in err and "Traceback" not in err
    assert not out.exists() and not list(tmp_path.glob(".small-v97.*"))


def test_small_builder_failure_leaves_nothing(tiny_data, tmp_path, monkeypatch):
    from crs_backends.neural import names, small

    monkeypatch.setattr(names, "SHIPPED_SMALL_ROOT", tmp_path / "no-shipped-set")
    with pytest.raises(small.SmallBuildError, match="nosuch"):
        small.ensure_small_models(systems=("nosuch",), show_bar=False, log=lambda m: None)
    assert small.small_models_root() is None
    assert not small.small_models_dir().exists()
    assert not list((tmp_path / "cache" / "models").glob(".small-v*"))


def test_the_shipped_set_is_used_as_it_is_and_its_manifest_says_how_it_was_made(tmp_path, monkeypatch):
    from crs_backends.neural import names, small
    from crs_backends.neural.checkpoints import read_manifest

    monkeypatch.setenv("CRS_ARENA_CACHE", str(tmp_path / "cache"))  # an empty cache: nothing is trained
    shipped = names.SHIPPED_SMALL_ROOT
    assert names.small_set_complete(shipped), f"the shipped set is missing or incomplete: {shipped}"
    assert small.small_models_root() == names.SHIPPED_SMALL_ROOT
    assert small.ensure_small_models(show_bar=False, log=lambda m: None) == names.SHIPPED_SMALL_ROOT
    assert not (tmp_path / "cache" / "models").exists()
    manifest = read_manifest(names.SHIPPED_SMALL_ROOT)
    command = f"python -m crs_backends.neural.small build --out assets/models/{shipped.name}"
    assert manifest["command"].startswith(command)
    assert manifest["version"] == shipped.name and manifest["systems"] == list(small.SYSTEMS)


def test_the_dataset_configuration_hands_each_system_the_shipped_recipe_with_kbrd_s_recommender_unclipped(
    tmp_path, monkeypatch
):
    """train_on_dataset (the benches' ReDial configuration) hands each system TRAIN_SETTINGS, with DATASET_SETTINGS
    on top: KBRD's recommender unclipped, as CRSLab's; UniCRS's recommendation prompt an epoch (no overall cap), its
    conversation prompt 150 steps; BARCOR as shipped. ``train_system`` is replaced by one that keeps the
    configuration it is handed: what is checked is that configuration (the training itself runs for real in
    test_train_writes_the_published_layout_and_resumes and the small builder's tests)."""
    from crs_backends.neural import recipes, small, train_command
    from crs_backends.neural.engine import TrainConfig

    configs: dict[str, TrainConfig] = {}
    monkeypatch.setattr(
        train_command, "train_system", lambda system, data, out, config, **kw: configs.setdefault(system, config)
    )
    models, data = small.train_on_dataset(Path("bundled"), small.SYSTEMS, tmp_path / "models", log=lambda line: None)
    assert models == tmp_path / "models" and data.dataset == "bundled"
    assert set(configs) == set(small.SYSTEMS)
    assert configs["kbrd"].rec_clip is None and TrainConfig().rec_clip == 1.0
    assert configs["unicrs"].max_steps is None and configs["unicrs"].stage_steps == {"conv": 150}
    # UniCRS's prompts read UniCRS's windows there (r14), the bundled set's SIZES stay short
    from crs_backends.neural.unicrs_smollm_settings import SIZES

    windows = {"context_max_length": 200, "text_max_length": 200, "entity_max_length": 32}
    assert configs["unicrs"].form == windows and SIZES["small"]["context_max_length"] < 200
    assert all(configs[s].form is None for s in ("kbrd", "barcor"))
    for system, config in configs.items():
        wanted = {**recipes.TRAIN_SETTINGS[system], **recipes.DATASET_SETTINGS.get(system, {})}
        assert {k: getattr(config, k) for k in wanted} == wanted
        assert config.seed == small.SEED and config.size == "small"


def test_the_seekers_turns_that_name_a_film_are_kept_apart_for_unicrs(shared_data):
    """UniCRS learns to recommend from every turn that names a film, the seeker's too (RUCAIBox/UniCRS
    process.py / dataset_rec.py): a dataset's training data holds them apart (``seeker_records``), from the training
    conversations only, and the other systems' records stay the recommender's turns."""
    from catalog.redial_raw import is_seeker_turn

    data = load_train_data(str(shared_data / "redial"))
    seekers = data.seeker_records
    assert len(seekers) > 1000 and all(is_seeker_turn(r) and r.rec for r in seekers)
    assert not any(is_seeker_turn(r) for r in data.records)
    trained = {r.dialog_id for r in data.records}
    assert {r.dialog_id for r in seekers} <= trained
    assert trained.isdisjoint(r.dialog_id for r in data.validation)
    assert all(data.kg.ids_of(r.rec) for r in seekers)  # every target is in the KG
    assert "seeker turns naming a film" in data.describe()
    assert load_train_data(str(shared_data / "redial"), limit=7).seeker_records == []  # a quick trial: none


def test_a_seekers_turn_is_a_record_once_it_names_a_film_after_some_context():
    from catalog.redial_raw import is_seeker_turn, records_from_conversation

    info = {"1": {"name": "Alien (1979)"}, "2": {"name": "Heat (1995)"}, "3": {"name": "Up (2009)"}}
    conversation = {
        "conversationId": 7,
        "initiatorWorkerId": 1,
        "movieMentions": {},
        "messages": [
            {"senderWorkerId": 1, "text": "I loved @1"},  # the seeker opens: no context, not a record
            {"senderWorkerId": 2, "text": "Try @2"},
            {"senderWorkerId": 1, "text": "Seen it."},  # names no film: not a record
            {"senderWorkerId": 2, "text": "Then @3?"},
            {"senderWorkerId": 1, "text": "Yes, and @2 was "},
            {"senderWorkerId": 1, "text": "good too"},  # one turn of two messages
        ],
    }
    plain = records_from_conversation(conversation, info)
    assert [r.rec for r in plain] == [["Heat (1995)"], ["Up (2009)"]] and not any(map(is_seeker_turn, plain))
    every = records_from_conversation(conversation, info, seeker_turns=True)
    assert [(r.rec, is_seeker_turn(r)) for r in every] == [
        (["Heat (1995)"], False),
        (["Up (2009)"], False),
        (["Heat (1995)"], True),
    ]
    last = every[-1]
    assert last.resp == "Yes, and Heat (1995) was good too" and last.context[-1] == "Then Up (2009)?"
    assert last.entity == ["Alien (1979)", "Heat (1995)", "Up (2009)"] and last.dialog_id == "7"


def test_seeker_turns_are_asked_of_the_small_unicrs_alone_and_need_raw_conversations(tmp_path):
    code, out = run("kbrd", "--data", "bundled", "--dialogues", "10", "--out", str(tmp_path / "k"), "--seeker-turns")
    assert code != 0 and "only the small UniCRS learns from the seeker's turns" in out and "Traceback" not in out
    code, out = run("unicrs", "--data", "bundled", "--dialogues", "10", "--out", str(tmp_path / "u"), "--seeker-turns")
    assert code != 0 and "--seeker-turns: no seeker turns naming a film" in out and "Traceback" not in out
    assert not (tmp_path / "k").exists() and not (tmp_path / "u").exists()


def test_the_command_line_hands_a_dataset_s_small_configuration_its_recipe_and_the_flags_change_it(
    tmp_path, monkeypatch, shared_data
):
    """``crs-arena train <system> --data <dataset> --size small`` starts from the recipe the benches measured
    (recipes.dataset_settings: UniCRS's windows, epochs, rate and conversation steps), and the flags change it; the
    bundled catalog keeps the engine's defaults and says that the app's set is built otherwise. ``train_system`` is
    replaced by one that keeps the configuration the command hands it: this proves the configuration and what the
    command says, not training (test_train_writes_the_published_layout_and_resumes trains through the command)."""
    from types import SimpleNamespace

    from crs_backends.neural import recipes, train_command

    configs: dict[str, object] = {}

    def fake_train(system, data, out, config, **kw):
        configs[data.dataset] = config
        return None, SimpleNamespace(system=system, steps=0, seconds=0.0, out=out, losses={})

    monkeypatch.setattr(train_command, "train_system", fake_train)
    args = ["unicrs", "--out", str(tmp_path / "m"), "--limit", "16", "--quiet"]
    code, out = run(*args, "--data", str(shared_data / "redial"), "--lr", "2e-4")
    assert code == 0, out
    assert f"recipe {recipes.DATASET_RECIPE}" in out and "--lr change it" in out
    config = configs["redial"]
    recipe = recipes.dataset_settings("unicrs")
    assert config.form == recipe["form"] == {"context_max_length": 200, "text_max_length": 200, "entity_max_length": 32}
    assert (config.epochs, config.batch_size, config.stage_steps) == (2, 8, {"conv": 150})
    assert config.lr == 2e-4 != recipe["lr"]  # the flag wins
    code, out = run(*args, "--data", "bundled", "--dialogues", "10")
    assert code == 0, out
    assert "recipe r" not in out and configs["bundled"].form is None and configs["bundled"].epochs == 1
    assert "bundled: the engine's small defaults" in out and "crs_backends.neural.small build" in out
