"""``crs-arena space publish OWNER/NAME``: the app uploaded as a Hugging Face Space, with its variables and secrets.

A Space's git remote refuses binary files and files over 10 MB that are not stored as large files (Xet/LFS), and
the shipped small models (``assets/models/``) are both. ``HfApi.upload_folder`` stores such files as large files
itself (the Hub's pre-upload answer says which), so publishing is: create the Space if needed (SDK ``gradio``,
hardware and sleep time as asked), set its variables and secrets, then upload the folder with
:data:`ALLOW_PATTERNS` / :data:`IGNORE_PATTERNS` (what the app reads at run time, and nothing else: no tests,
benches, scripts, virtual environment, local databases or research data).

Secrets (API keys, the dataset's ``HF_TOKEN``) are read from the environment, by name (``--secret NAME`` or
``--secret NAME=ENV_VAR``), never from the command line, and never printed: ``--dry-run`` lists the files with
their sizes and whether each goes as a large file, the variables with their values (a Space's variables are
public) and the secrets' names only. A ``--var`` whose name looks like a secret is refused.

Variables and secrets are set before the upload, so the Space's first build already has them (each change restarts
a running Space). ``README.md``'s front matter configures the Space (``sdk: gradio``, ``app_file: app.py``): a README
without it is refused before anything is sent.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import click
import yaml
from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError
from huggingface_hub.utils import filter_repo_objects
from huggingface_hub.utils._paths import DEFAULT_IGNORE_PATTERNS

from arena.hub_sync import DATASET_VAR, TOKEN_VAR
from crs_backends.command_line import CommandGroup

ROOT = Path(__file__).resolve().parent.parent

# What the app reads at run time: its code, assets (catalog, prompts, rubrics, calibration, the shipped small
# models), docs/ (the API tab reads docs/api.md; README.md's links point there), the requirements the Space installs,
# README.md (the Space's configuration) and the licence. Patterns are huggingface_hub's: "*" crosses "/".
ALLOW_PATTERNS = [
    "app.py",
    "requirements.txt",
    "README.md",
    "LICENSE",
    ".gitattributes",
    "arena/*.py",
    "catalog/*.py",
    "crs_backends/*.py",
    "evaluators/*.py",
    "llm_clients/*.py",
    "storage/*.py",
    "ui/*.py",
    "assets/*",
    "docs/*.md",
]
IGNORE_PATTERNS = [
    "*/__pycache__/*",
    "*.pyc",
    "*.db",
    "*.db-wal",
    "*.db-shm",
    "*.tmp",
    "assets/calibration/*.refit.json",  # a local refit (.gitignore)
    "assets/models/.small-v*",  # a small set being built
]
LARGE_BYTES = 10 * 1000 * 1000  # the Hub refuses a file over 10 MB that is not a large file
SAMPLE_BYTES = 512  # what the client sends the Hub for each file (its first bytes) to decide its upload mode
SECRET_NAME = re.compile(r"(^HF_TOKEN$|KEY$|TOKEN$|SECRET$|PASSWORD$)")
FETCH_AT_START_VAR = "CRS_FETCH_AT_START"


class PublishError(click.ClickException):
    """A mistake in what was asked (a secret given as a variable, a secret not in the environment, no front matter);
    shown as one line, never a traceback."""


@dataclass(frozen=True)
class SpaceFile:
    path: str  # relative to the folder, "/"-separated: the path in the Space
    size: int
    large: bool  # goes as a large file (Xet/LFS): over 10 MB, or binary


@dataclass
class Plan:
    """Everything a publish sends, computed before anything is sent (what ``--dry-run`` prints)."""

    repo_id: str
    folder: Path
    files: list[SpaceFile]
    ignore_patterns: list[str]
    variables: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)  # secret name -> the environment variable it is read from
    hardware: str | None = None
    sleep_time: int | None = None
    private: bool = False


def is_binary(sample: bytes) -> bool:
    """git's test, and the Hub's: a NUL byte among the first bytes."""
    return b"\0" in sample


def is_large(path: Path) -> bool:
    """Whether the Hub takes ``path`` only as a large file (over 10 MB, or binary)."""
    if path.stat().st_size > LARGE_BYTES:
        return True
    with path.open("rb") as f:
        return is_binary(f.read(SAMPLE_BYTES))


def git_paths(folder: Path, *options: str) -> list[str] | None:
    """``git ls-files <options>`` in ``folder``: paths relative to it; None when ``folder`` is not a git work tree (or
    git is missing)."""
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), "ls-files", *options, "-z"], capture_output=True, timeout=60, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return [p for p in done.stdout.decode("utf-8", "replace").split("\0") if p]


def git_ignored(folder: Path) -> list[str]:
    """Files under ``folder`` that git ignores (a local refit, a model being built), as exact patterns; empty when
    ``folder`` is not a git work tree."""
    paths = git_paths(folder, "--others", "--ignored", "--exclude-standard") or []
    kept = set(filter_repo_objects(paths, allow_patterns=ALLOW_PATTERNS))  # only those the patterns would send
    return [glob.escape(p) for p in sorted(kept)]


def selection(folder: Path, ignore_patterns: list[str]) -> list[SpaceFile]:
    """The files ``upload_folder`` sends from ``folder`` with :data:`ALLOW_PATTERNS` and ``ignore_patterns``: the
    same walk and the same filter the library applies (its default ignores, ``.git`` among them, included)."""
    folder = folder.resolve()
    files = {p.relative_to(folder).as_posix(): p for p in sorted(folder.glob("**/*")) if p.is_file()}
    chosen = filter_repo_objects(
        files, allow_patterns=ALLOW_PATTERNS, ignore_patterns=[*ignore_patterns, *DEFAULT_IGNORE_PATTERNS]
    )
    return [SpaceFile(rel, files[rel].stat().st_size, is_large(files[rel])) for rel in chosen]


def check_front_matter(folder: Path) -> dict:
    """README.md's front matter, which configures the Space; refused without ``sdk: gradio`` and ``app_file``."""
    readme = folder / "README.md"
    text = readme.read_text(encoding="utf-8") if readme.is_file() else ""
    parts = text.split("---", 2)
    meta = None
    if text.startswith("---") and len(parts) == 3:
        try:
            meta = yaml.safe_load(parts[1])
        except yaml.YAMLError:
            meta = None
    if not isinstance(meta, dict) or meta.get("sdk") != "gradio" or meta.get("app_file") != "app.py":
        raise PublishError(
            "README.md must start with the Space's front matter (a '---' block with 'sdk: gradio' and "
            "'app_file: app.py'); the Hub reads the Space's configuration from it"
        )
    return meta


def parse_variables(pairs: tuple[str, ...]) -> dict[str, str]:
    variables = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            raise PublishError(f"--var takes NAME=VALUE, got {name or pair!r}")
        if SECRET_NAME.search(name):
            raise PublishError(
                f"{name} looks like a secret: a Space's variables are public. Export it and pass --secret {name} "
                "(its value is read from the environment)"
            )
        variables[name] = value
    return variables


def parse_secrets(names: tuple[str, ...], env: Mapping[str, str]) -> dict[str, str]:
    """``NAME`` or ``NAME=ENV_VAR`` -> {secret name: environment variable}; each must be set (its value unseen)."""
    secrets = {}
    for entry in names:
        name, _, source = entry.partition("=")
        name, source = name.strip(), (source or name).strip()
        if not name or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", source):
            raise PublishError("--secret takes NAME or NAME=ENV_VAR (the value is never given on the command line)")
        if not env.get(source):
            raise PublishError(f"the secret {name} is read from the environment variable {source}, which is not set")
        secrets[name] = source
    return secrets


def make_plan(
    repo_id: str,
    *,
    folder: Path = ROOT,
    variables: tuple[str, ...] = (),
    secrets: tuple[str, ...] = (),
    dataset: str | None = None,
    fetch_at_start: bool = True,
    hardware: str | None = None,
    sleep_time: int | None = None,
    private: bool = False,
    env: Mapping[str, str] | None = None,
) -> Plan:
    env = os.environ if env is None else env
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", repo_id):
        raise PublishError(f"the Space is named OWNER/NAME, got {repo_id!r}")
    check_front_matter(folder)
    chosen_variables = {FETCH_AT_START_VAR: "1"} if fetch_at_start else {}
    chosen_variables.update(parse_variables(variables))
    asked = list(secrets)
    if dataset:
        chosen_variables[DATASET_VAR] = dataset
        if not any(s.partition("=")[0].strip() == TOKEN_VAR for s in asked):
            asked.append(TOKEN_VAR)  # the Space reads and writes the (private) dataset with it
    ignore = [*IGNORE_PATTERNS, *git_ignored(folder)]
    return Plan(
        repo_id=repo_id,
        folder=folder.resolve(),
        files=selection(folder, ignore),
        ignore_patterns=ignore,
        variables=chosen_variables,
        secrets=parse_secrets(tuple(asked), env),
        hardware=hardware,
        sleep_time=sleep_time,
        private=private,
    )


def describe(plan: Plan) -> list[str]:
    """The lines ``--dry-run`` prints: every file with its size and upload mode, the variables, the secrets' names."""
    lines = [
        f"Space {plan.repo_id} (sdk gradio, hardware {plan.hardware or 'the Hub default (cpu-basic)'}, sleep time "
        f"{'the default' if plan.sleep_time is None else f'{plan.sleep_time} s'}, "
        f"{'private' if plan.private else 'public'}), from {plan.folder}:"
    ]
    width = max((len(f.path) for f in plan.files), default=0)
    for f in plan.files:
        lines.append(f"  {f.path:<{width}}  {_size(f.size):>9}  {'large file (Xet/LFS)' if f.large else 'regular'}")
    large = [f for f in plan.files if f.large]
    lines.append(
        f"{len(plan.files)} files, {_size(sum(f.size for f in plan.files))}; {len(large)} go as large files "
        f"({_size(sum(f.size for f in large))})"
    )
    lines.append("Variables (public on the Space's page):")
    lines += [f"  {name}={value}" for name, value in plan.variables.items()] or ["  (none)"]
    lines.append("Secrets (names only; each value is read from the environment variable named):")
    lines += [f"  {name} <- ${source}" for name, source in plan.secrets.items()] or ["  (none)"]
    return lines


def _size(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000  # type: ignore[assignment]
    return f"{n} B"


def publish(plan: Plan, *, env: Mapping[str, str] | None = None, token: str | None = None) -> str:
    """Create the Space if needed, set its variables and secrets, upload the folder; returns the Space's URL.

    ``token``: the publisher's (default: ``HF_TOKEN`` or the saved login, as huggingface_hub finds it)."""
    env = os.environ if env is None else env
    api = HfApi(token=token)
    url = api.create_repo(
        plan.repo_id,
        repo_type="space",
        space_sdk="gradio",
        space_hardware=plan.hardware,  # type: ignore[arg-type]
        space_sleep_time=plan.sleep_time,
        private=plan.private,
        exist_ok=True,
    )
    for name, value in plan.variables.items():
        api.add_space_variable(plan.repo_id, name, value)
    for name, source in plan.secrets.items():
        api.add_space_secret(plan.repo_id, name, env[source])
    api.upload_folder(
        repo_id=plan.repo_id,
        repo_type="space",
        folder_path=plan.folder,
        allow_patterns=list(ALLOW_PATTERNS),
        ignore_patterns=list(plan.ignore_patterns),
        commit_message="Publish CRS Arena (crs-arena space publish)",
    )
    return str(url)


@click.group(cls=CommandGroup)
def cli() -> None:
    """The app as a Hugging Face Space (docs/space.md)."""


@cli.command("publish")
@click.argument("repo_id", metavar="OWNER/NAME")
@click.option(
    "--var",
    "variables",
    multiple=True,
    metavar="NAME=VALUE",
    help="A Space variable (public), e.g. CRS_LLM_MODEL=gpt-4o-mini; repeat for more.",
)
@click.option(
    "--secret",
    "secrets",
    multiple=True,
    metavar="NAME[=ENV_VAR]",
    help="A Space secret, its value read "
    "from the environment variable NAME (or ENV_VAR); repeat for more. Never printed.",
)
@click.option(
    "--dataset",
    metavar="OWNER/NAME",
    help=f"The dataset the board is exported to and restored from "
    f"(sets {DATASET_VAR}, and the secret {TOKEN_VAR} from the environment).",
)
@click.option(
    "--fetch-at-start/--no-fetch-at-start",
    default=True,
    show_default=True,
    help=f"Set {FETCH_AT_START_VAR}=1: the Space fetches the published checkpoints when it starts.",
)
@click.option("--hardware", help="Hardware for a new Space (e.g. cpu-basic, cpu-upgrade, t4-small).")
@click.option("--sleep-time", type=int, help="Seconds of inactivity before a new Space sleeps (paid hardware).")
@click.option("--private", is_flag=True, help="Create the Space private.")
@click.option(
    "--folder",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=ROOT,
    show_default="the project's folder",
    help="The folder to publish.",
)
@click.option(
    "--dry-run", is_flag=True, help="Print what would be sent (files, variables, secrets' names); send nothing."
)
def publish_command(
    repo_id: str,
    variables: tuple[str, ...],
    secrets: tuple[str, ...],
    dataset: str | None,
    fetch_at_start: bool,
    hardware: str | None,
    sleep_time: int | None,
    private: bool,
    folder: Path,
    dry_run: bool,
) -> None:
    """Publish the app to the Space OWNER/NAME (created if needed)."""
    plan = make_plan(
        repo_id,
        folder=folder,
        variables=variables,
        secrets=secrets,
        dataset=dataset,
        fetch_at_start=fetch_at_start,
        hardware=hardware,
        sleep_time=sleep_time,
        private=private,
    )
    for line in describe(plan):
        click.echo(line)
    if dry_run:
        click.echo("Dry run: nothing was sent.")
        return
    secret_values = [os.environ[source] for source in plan.secrets.values()]
    try:
        url = publish(plan)
    except (HfHubHTTPError, ValueError, OSError) as e:
        message = f"{type(e).__name__}: {e}".splitlines()[0]
        for value in [*secret_values, os.environ.get(TOKEN_VAR) or ""]:
            if value:
                message = message.replace(value, "***")
        raise PublishError(f"publishing failed: {message}") from None
    click.echo(f"Published: {url} (the Space builds from requirements.txt, then starts app.py)")
