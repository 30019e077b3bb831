"""bench/crs_fidelity.py measures a built set as it is (nothing trained) on the test records of the data folder, and
records the reading in the set's manifest, which the app's line for each small system shows; a set is read once
unless ``--again`` says otherwise, and a partial reading is never recorded."""

from __future__ import annotations

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
    env = {"CRS_DATA_DIR": str(data), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
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
