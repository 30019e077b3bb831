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
            # quiet: the slowest --help (a fresh interpreter importing the package) takes 12 s; bound 20x
            out, err = proc.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"{target} --help did not finish in 240 s: {err[-500:]}")
        done[target] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return done


def test_the_list_is_complete():
    found = set()
    for folder in sorted(OWN_PACKAGES - {"app", "commands"}) + ["examples"]:
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
        from crs_backends.neural.train_command import cli
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


# ---------------------------------------------------------------------------------------------------------------
# crs-arena: one command line over all of them


def _listed(usage: str) -> set[str]:
    """The command names a click --help lists in any of its sections."""
    return set(re.findall(r"^  ([a-z][\w-]*)  ", usage, re.M))


def test_crs_arena_lists_every_subcommand_of_every_command_line(helps):
    """`./crs-arena --help` (the clone's launcher, a real process) lists each command of evaluators, arena and
    crs_backends under its own name, and train, checkpoints and small as groups; the pyproject console script
    names the same entry."""
    import tomllib

    # quiet: 4 s; the bound below is 10x that or more
    done = subprocess.run(
        [str(ROOT / "crs-arena"), "--help"], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-2000:]
    listed = _listed(done.stdout)
    for target in ("evaluators", "arena", "crs_backends"):
        assert set(_subcommands(helps[target].stdout)) <= listed, target
    assert {"train", "checkpoints", "small"} <= listed
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["scripts"] == {"crs-arena": "commands:main"}
    assert "./crs-arena" in README or "crs-arena " in README


@pytest.mark.parametrize(
    ("args", "alias"),
    [
        (["train", "--help"], "crs_backends.train"),
        (["checkpoints", "--help"], "crs_backends.neural.sources"),
        (["small", "--help"], "crs_backends.neural.small"),
    ],
)
def test_crs_arena_groups_are_the_python_m_command_lines(helps, args, alias, capsys):
    from commands import cli

    result = CliRunner().invoke(cli, args, prog_name="crs-arena")
    output = result.output + capsys.readouterr().out  # `small` hands over to argparse, which prints itself
    assert result.exit_code == 0, output[-1000:]
    assert set(_subcommands(output)) == set(_subcommands(helps[alias].stdout)) != set()
    assert output.lstrip().lower().startswith("usage: crs-arena " + args[0])


def test_crs_arena_runs_a_command_as_its_alias_does(db_path):
    from arena.__main__ import cli as arena_cli
    from commands import cli

    alias = CliRunner().invoke(arena_cli, ["export", "--db", str(db_path), "--out", str(db_path.parent / "a.jsonl")])
    one = CliRunner().invoke(cli, ["export", "--db", str(db_path), "--out", str(db_path.parent / "b.jsonl")])
    assert alias.exit_code == one.exit_code == 0, one.output
    assert alias.output.replace("a.jsonl", "b.jsonl") == one.output
    unknown = CliRunner().invoke(cli, ["evaluat"])
    assert unknown.exit_code == 2 and "No such command" in unknown.output


def test_a_bad_database_path_is_one_message_in_every_command(tmp_path):
    """--db is defined once (crs_backends.command_line.db_option) and resolved the same way everywhere."""
    from commands import cli

    folder = tmp_path / "not-a-file"
    folder.mkdir()
    for args in (["resume"], ["export", "--out", str(tmp_path / "x.jsonl")], ["promote-uploads"]):
        result = CliRunner(env={"CRS_ARENA_DB": str(folder)}).invoke(cli, args)
        assert result.exit_code == 1 and "is a folder" in result.output, (args, result.output)
