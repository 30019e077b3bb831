"""A fresh clone passes (#73): the tests that read the research data folder, run as a stranger runs them.

A researcher clones the project into a folder of its own: no ``../shared/data`` beside it, ``CRS_DATA_DIR`` unset,
no ``CI``. The machines the project is developed on always have the data, so a test that needs it without saying
so (the small builder's once read ReDial's conversations) fails there unseen. Here such a run is made in a fresh
interpreter with ``CRS_DATA_DIR=none`` (:func:`catalog.catalog.data_dir`: no research data, whatever lies beside
the clone) and ``CI`` unset: it must pass, the tests that need the data skipped with the fixture's reason.

Which files: those that name the data folder (``shared_data``, ``data_dir``, ``CRS_DATA_DIR``), found when the test
runs, so a new one is in. The slow tier among them is left out for its cost (training, the app), but the builder's
(``test_neural_train_cli``), the case this check was written for; ``make test-fresh-clone`` runs the whole suite
the same way.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import SLOW_MODULES

ROOT = Path(__file__).resolve().parent.parent
READS_THE_DATA = re.compile(r"\bshared_data\b|\bdata_dir\b|\bCRS_DATA_DIR\b")
ALWAYS = "test_neural_train_cli"  # slow, but the builder's tests are the ones that failed on a fresh clone
SKIP_REASON = "public research data not found"  # tests/conftest.py's shared_data fixture


def data_readers() -> list[Path]:
    """The test files that read the data folder: the fast ones and the builder's."""
    found = [
        path
        for path in sorted((ROOT / "tests").glob("test_*.py"))
        if path.stem != Path(__file__).stem and READS_THE_DATA.search(path.read_text(encoding="utf-8"))
    ]
    return [path for path in found if path.stem not in SLOW_MODULES or path.stem == ALWAYS]


def stranger_env() -> dict[str, str]:
    """This environment as a fresh clone has it: no research data, not CI."""
    env = {k: v for k, v in os.environ.items() if k != "CI" and not k.startswith("PYTEST_")}
    env.update(CRS_DATA_DIR="none", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return env


def test_the_data_readers_are_found():
    names = {path.stem for path in data_readers()}
    assert {"test_catalog", "test_metrics", ALWAYS} <= names
    assert not names & (set(SLOW_MODULES) - {ALWAYS})


def test_a_fresh_clone_passes_the_tests_that_read_the_data_folder():
    files = [str(path.relative_to(ROOT)) for path in data_readers()]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *files],
        cwd=ROOT,
        env=stranger_env(),
        capture_output=True,
        text=True,
        timeout=1800,  # a bound, not a measurement: on a busy two-core machine the run takes minutes
    )
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-6000:]
    summary = out.strip().splitlines()[-1]
    assert "failed" not in summary and "error" not in summary, summary
    assert "skipped" in summary and SKIP_REASON in out, out[-3000:]  # the data was not found: skipped, not used
