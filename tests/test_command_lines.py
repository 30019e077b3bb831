"""Every command line answers ``--help`` with its usage, each of its subcommands too, and README.md names it.

The top-level ``--help`` runs as a real process (``python -m <module> --help``, all at once); the subcommands'
help is asked in-process of the same entry functions, which is quicker and runs the same code.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from crs_backends.plugins import OWN_PACKAGES

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")

# every ``python -m`` command line of the repository: the packages with a __main__.py and the modules with a
# ``if __name__ == "__main__"`` block (test_the_list_is_complete keeps this list honest)
MODULES = (
    "evaluators",
    "arena",
    "crs_backends",
    "crs_backends.neural.sources",
    "crs_backends.neural.small",
    "crs_backends.train",
    "ui.api_doc",
)
ALIASES = {"evaluators.cli": "evaluators"}  # the same command line under a second name; README names the first
SCRIPTS = ("examples/reference_crs.py",)  # run as a file (standard library only); `python app.py` serves the app
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "CRS_NEURAL_BUILD": "never"}


def _argv(target: str) -> list[str]:
    return [sys.executable, target] if target.endswith(".py") else [sys.executable, "-m", target]


@pytest.fixture(scope="module")
def helps() -> dict[str, subprocess.CompletedProcess]:
    """``--help`` of every command line, the processes started together."""
    procs = {
        target: subprocess.Popen(
            [*_argv(target), "--help"],
            cwd=ROOT,
            env=ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for target in (*MODULES, *SCRIPTS, *ALIASES)
    }
    done = {}
    for target, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"{target} --help did not finish in 240 s: {err[-500:]}")
        done[target] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return done


def test_the_list_is_complete():
    found = set()
    for folder in sorted(OWN_PACKAGES - {"app"}) + ["examples"]:
        for path in (ROOT / folder).rglob("*.py"):
            relative = path.relative_to(ROOT)
            if path.name == "__main__.py":
                found.add(".".join(relative.parent.parts))
            elif re.search(r"^if __name__ == .__main__.:", path.read_text(encoding="utf-8"), re.M):
                found.add(relative.as_posix() if folder == "examples" else ".".join(relative.with_suffix("").parts))
    assert found == set(MODULES) | set(SCRIPTS) | set(ALIASES)
    assert re.search(r"^if __name__ == .__main__.:", (ROOT / "app.py").read_text(encoding="utf-8"), re.M)


@pytest.mark.parametrize("target", [*MODULES, *SCRIPTS, *ALIASES])
def test_help_shows_the_usage(helps, target):
    done = helps[target]
    assert done.returncode == 0, done.stderr[-2000:]
    assert re.match(r"(?i)usage:", done.stdout.lstrip()), done.stdout[:500]
    assert len(done.stdout.strip().splitlines()) >= 3 and not done.stderr.strip().startswith("Traceback")


@pytest.mark.parametrize("target", [*MODULES, *SCRIPTS])
def test_readme_names_each_command_line(target):
    command = target if target.endswith(".py") else f"python -m {target}"
    assert re.search(rf"{re.escape(command)}(?![\w.])", README), f"README.md never mentions `{command}`"


def _subcommands(usage: str) -> list[str]:
    """The subcommand names a --help lists (click's "Commands:" section, argparse's {a,b})."""
    if "Commands:" in usage:
        section = usage.split("Commands:", 1)[1]
        return re.findall(r"^  ([a-z][\w-]*)", section, re.M)
    found = re.search(r"\{([\w,-]+)\}", usage)
    return found.group(1).split(",") if found else []


def _click_group(target: str):
    if target == "evaluators":
        from evaluators.cli import cli
    elif target == "arena":
        from arena.__main__ import cli
    elif target == "crs_backends":
        from crs_backends.__main__ import cli
    elif target == "crs_backends.train":
        from crs_backends.train import cli
    else:
        return None
    return cli


def _subcommand_help(target: str, name: str, capsys) -> tuple[int, str]:
    group = _click_group(target)
    if group is not None:
        result = CliRunner().invoke(group, [name, "--help"], prog_name=f"python -m {target}")
        return result.exit_code, result.output
    if target == "crs_backends.neural.sources":
        from crs_backends.neural.fetch import main  # the command line `python -m crs_backends.neural.sources` runs
    elif target == "ui.api_doc":
        from ui.api_doc import main
    else:
        from crs_backends.neural.small import main
    code: int | str | None
    try:  # argparse leaves through SystemExit after --help; sources' click main returns its exit code
        code = main([name, "--help"])
    except SystemExit as stop:
        code = stop.code
    return int(code or 0), capsys.readouterr().out


@pytest.mark.parametrize("target", MODULES)
def test_every_subcommand_has_help(helps, target, capsys, db_path):
    names = _subcommands(helps[target].stdout)
    assert names, f"{target} --help lists no subcommands"
    for name in names:
        code, text = _subcommand_help(target, name, capsys)
        assert code == 0, f"{target} {name} --help exited with {code}: {text[-1000:]}"
        assert re.match(r"(?i)usage:", text.lstrip()) and f" {name}" in text.splitlines()[0], text[:300]
        assert len(text.strip().splitlines()) >= 3, f"{target} {name} --help says nothing: {text!r}"
