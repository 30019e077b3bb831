"""scripts/setup_venv.sh, with a stand-in interpreter (no packages are installed): one build at a time per cache,
and pruning that spares an environment another clone still uses."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# "-m venv DIR" makes DIR/bin/python (this script again); "-m pip …" is logged and takes FAKE_PIP_SECONDS
FAKE_PYTHON = """#!/usr/bin/env bash
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
    mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && chmod +x "$3/bin/python"
    echo "venv $3" >> "$FAKE_LOG"
    exit 0
fi
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then
    echo "pip $PPID $*" >> "$FAKE_LOG"
    for a in "$@"; do [ "$prev" = "-r" ] && cp "$a" "$FAKE_LOG.requirements"; prev="$a"; done
    sleep "${FAKE_PIP_SECONDS:-0}"
    exit 0
fi
exit 1
"""


def _clone(base: Path, name: str) -> Path:
    repo = base / name
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "setup_venv.sh", repo / "scripts" / "setup_venv.sh")
    shutil.copy(ROOT / "requirements.txt", repo / "requirements.txt")
    return repo


@pytest.fixture
def setup_env(tmp_path):
    fake = tmp_path / "fakepython"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    log = tmp_path / "fake.log"
    log.touch()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "PYTHON": str(fake),
        "CRS_ARENA_CACHE": str(tmp_path / "cache"),
        "FAKE_LOG": str(log),
        "FAKE_PIP_SECONDS": "0.4",
    }
    return env, log


def _run(repo: Path, env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        ["bash", "scripts/setup_venv.sh"],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_two_setups_started_together_build_once_and_share_it(tmp_path, setup_env):
    env, log = setup_env
    first, second = _clone(tmp_path, "clone1"), _clone(tmp_path, "clone2")
    procs = [_run(first, env), _run(second, env)]
    # quiet: 2 s (the environment is reused, nothing is built); the bound below is 10x that or more
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert log.read_text().count("venv ") == 1, log.read_text()  # one build, not two in the same folder
    assert any("waiting for it" in out for out in outputs), outputs  # the second said why it waited
    venvs = {os.path.realpath(repo / ".venv") for repo in (first, second)}
    assert len(venvs) == 1
    assert (Path(venvs.pop()) / ".complete").exists()


def test_pruning_spares_an_environment_a_clone_used_lately(tmp_path, setup_env):
    env, _log = setup_env
    env["FAKE_PIP_SECONDS"] = "0"
    cache = Path(env["CRS_ARENA_CACHE"])
    now = time.time()
    day = 86400

    def old_venv(name: str, *, age_days: float, used_days_ago: float | None) -> Path:
        venv = cache / f"venv-{name}"
        (venv / "bin").mkdir(parents=True)
        if used_days_ago is not None:
            (venv / ".complete").touch()
            os.utime(venv / ".complete", (now - used_days_ago * day,) * 2)
        os.utime(venv, (now - age_days * day,) * 2)
        return venv

    newest_old = old_venv("aaaa", age_days=1, used_days_ago=30)  # the second newest: kept as before
    in_use = old_venv("bbbb", age_days=20, used_days_ago=0.1)  # an older commit's clone set it up an hour ago
    half_built = old_venv("cccc", age_days=21, used_days_ago=None)
    stale = old_venv("dddd", age_days=22, used_days_ago=30)
    proc = _run(_clone(tmp_path, "clone"), env)
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 0, out
    assert newest_old.exists() and in_use.exists()
    assert not half_built.exists() and not stale.exists()


def test_a_finished_environment_is_reused_without_building(tmp_path, setup_env):
    env, log = setup_env
    repo = _clone(tmp_path, "clone")
    for _ in range(2):
        proc = _run(repo, env)
        out = proc.communicate(timeout=120)[0]
        assert proc.returncode == 0, out
    assert log.read_text().count("venv ") == 1
    assert "building" not in out  # the second run only linked it


def test_the_requirements_install_without_the_torch_index_a_space_reads(tmp_path, setup_env):
    env, log = setup_env
    repo = _clone(tmp_path, "clone")
    done = _run(repo, env)
    assert done.communicate(timeout=120)[0] is not None and done.returncode == 0
    installed = Path(f"{log}.requirements").read_text()
    assert not [x for x in installed.splitlines() if x.startswith("--")]  # no index option reaches pip
    assert "torch==2.13.0" in installed and "gradio==" in installed
    assert "download.pytorch.org" in (repo / "requirements.txt").read_text()  # the Space still reads it


def test_requirements_are_pinned_and_name_the_cpu_torch_index():
    from packaging.requirements import Requirement

    lines = [x.strip() for x in (ROOT / "requirements.txt").read_text().splitlines()]
    options = [x for x in lines if x.startswith("--")]
    assert options == ["--extra-index-url https://download.pytorch.org/whl/cpu"]
    requirements = [Requirement(x) for x in lines if x and not x.startswith(("#", "--"))]
    assert len(requirements) > 20
    unpinned = [str(r) for r in requirements if len(r.specifier) != 1 or next(iter(r.specifier)).operator != "=="]
    assert unpinned == []
    assert len({r.name.lower() for r in requirements}) == len(requirements)  # no package twice
    torch = next(r for r in requirements if r.name == "torch")
    assert str(torch.specifier) == "==2.13.0" and "torch==2.13.0" in (ROOT / "scripts" / "setup_venv.sh").read_text()
