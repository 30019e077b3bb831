"""bench/crs_fidelity.py measures a built set as it is (nothing trained) on the test records of the data folder, and
records the reading in the set's manifest, which the app's line for each small system shows; a set is read once
unless ``--again`` says otherwise, and a partial reading is never recorded."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def quick_set(tmp_path_factory):
    """A set of the small KBRD built --quick on the tiny ReDial folder, and that folder."""
    from tiny_redial import write_tiny_redial

    from crs_backends.neural import small

    tmp = tmp_path_factory.mktemp("bench_set")
    data = write_tiny_redial(tmp / "data")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CRS_DATA_DIR", str(data))
        mp.setenv("CRS_ARENA_CACHE", str(tmp / "cache"))
        mp.setattr(small, "SYSTEMS", ("kbrd",))
        assert small.main(["build", "--out", str(tmp / "small-v90"), "--quick", "--quiet"]) == 0
    return tmp / "small-v90", data


def _bench(root: Path, data: Path, *args: str) -> str:
    env = {
        "CRS_DATA_DIR": str(data),
        "CRS_ARENA_CACHE": str(root.parent / "cache"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PATH": "/usr/bin:/bin",
    }
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "crs_fidelity.py"), "--set", str(root), "--contexts", "5", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_a_partial_reading_is_printed_not_recorded(quick_set):
    from crs_backends.neural.checkpoints import read_manifest

    root, data = quick_set
    out = _bench(root, data, "--limit", "6", "--replies", "2")
    assert "BENCH recall10_vs_published_min" in out and "partial: 6 records, not recorded" in out
    assert " nan " not in out
    assert "redial_test" not in read_manifest(root)


def test_the_set_is_measured_once_into_its_manifest(quick_set):
    from crs_backends.neural.checkpoints import read_manifest

    root, data = quick_set
    out = _bench(root, data)
    assert "figures written to" in out and "partial" not in out
    reading = read_manifest(root)["redial_test"]
    test_records = sum(1 for _ in open(data / "redial_eval" / "test_data_processed.jsonl"))
    assert reading["test_records"] == test_records and reading["recall"]["kbrd"]["records"] == test_records
    assert set(reading["recall"]["kbrd"]) >= {"1", "10", "50", "interval_10"}
    assert {"bleu2", "bleu2_uncased", "distinct"} <= set(reading["generation"]["kbrd"])
    assert {"popularity", "named first"} <= set(reading["references"])
    assert reading["generation"]["kbrd"]["replies"] == test_records
    assert reading["published_recall"]["kbrd"] == [0.028, 0.169, 0.366]
    # read once: a second run says when it was read and reads nothing; --again adds a reading, hiding none
    again = _bench(root, data)
    assert "was measured on" in again and "figures written" not in again
    _bench(root, data, "--again")
    assert len(read_manifest(root)["redial_test_readings"]) == 2


def test_the_apps_line_shows_the_figures_of_the_set_it_runs(quick_set, monkeypatch):
    from crs_backends import registry
    from crs_backends.neural import names

    root, _data = quick_set
    monkeypatch.setattr(names, "SHIPPED_SMALL_ROOT", root)
    note = registry.small_recall_note("kbrd")
    from crs_backends.neural.checkpoints import read_manifest

    recall = read_manifest(root)["redial_test"]["recall"]["kbrd"]["10"]
    assert note == f"R@10 {recall:.3f} on ReDial's test split (published 0.169)"
    # a set not measured says so, with no figure of another model
    monkeypatch.setattr(names, "SHIPPED_SMALL_ROOT", ROOT / "assets" / "models" / "small-v7")
    assert "not measured" in registry.small_recall_note("kbrd")


def _fidelity_bench():
    spec = importlib.util.spec_from_file_location("fidelity_bench", ROOT / "bench" / "crs_fidelity.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_an_interrupted_computation_goes_on_where_it_stopped(tmp_path):
    """A full reading takes hours: what it computed is kept chunk by chunk, a line an interruption cut is dropped,
    and the next run computes only the rest."""
    bench = _fidelity_bench()
    path = tmp_path / "kbrd-rankings.jsonl"
    seen: list[int] = []

    def stops_at_7(batch):
        if 7 in batch:
            raise KeyboardInterrupt
        seen.extend(batch)
        return [[n, n + 1] for n in batch]

    with pytest.raises(KeyboardInterrupt):
        bench.resumable(path, list(range(10)), stops_at_7, chunk=3)
    assert seen == [0, 1, 2, 3, 4, 5] and len(path.read_text().splitlines()) == 6
    with path.open("a") as f:
        f.write('{"value": [6, ')  # cut by the interruption
    seen.clear()
    values, seconds, resumed = bench.resumable(
        path, list(range(10)), lambda b: (seen.extend(b), [[n, n + 1] for n in b])[1], chunk=3
    )
    assert resumed == 6 and seen == [6, 7, 8, 9]
    assert values == [[n, n + 1] for n in range(10)] and len(seconds) == 10
    assert [json.loads(line)["value"] for line in path.read_text().splitlines()] == values


@pytest.mark.parametrize("kept", ["in the cache", "in --work"])
def test_a_reading_stopped_midway_is_finished_by_the_same_command(quick_set, tmp_path, kept):
    """Rankings an interrupted reading of this set left (in the cache, or in the folder ``--work`` names, one that
    outlives a machine) are read back, not computed again; once recorded, the kept work is gone, so --again reads the
    split afresh."""
    import shutil

    from crs_backends.neural.checkpoints import read_manifest, write_manifest

    bench = _fidelity_bench()
    built, data = quick_set
    root = tmp_path / built.name
    shutil.copytree(built, root)
    write_manifest(root, redial_test=None, redial_test_readings=None)
    test_file = data / "redial_eval" / "test_data_processed.jsonl"
    given = ["--work", str(tmp_path / "kept")] if kept == "in --work" else []
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CRS_ARENA_CACHE", str(tmp_path / "cache"))
        work = bench.reading_work_dir(root, test_file, tmp_path / "kept" if given else None)
    assert (tmp_path / "kept" in work.parents) == bool(given)
    # what an interrupted run left: two rankings computed, its start noted
    work.mkdir(parents=True)
    marked = [[-1] * 50, [-2] * 50]  # not what the model ranks: seen in the reading only if it was read back
    (work / "kbrd-rankings.jsonl").write_text("".join(json.dumps({"value": v, "seconds": 0.1}) + "\n" for v in marked))
    (work / "runs.jsonl").write_text(json.dumps({"date": "2026-12-01 10:00", "load": 1.5}) + "\n")
    out = _bench(root, data, *given)
    assert "2 read back from an interrupted run" in out and "going on with the reading begun 2026-12-01" in out
    reading = read_manifest(root)["redial_test"]
    assert reading["runs"][0] == "2026-12-01 10:00" and len(reading["runs"]) == 2
    assert "at the start of each run" in reading["machine"]
    assert not work.exists()
