"""docs/deploy.md's Compose file, systems file and Dockerfile hold together with the project: every command a service
of the project's image runs is a command of this project, with options it has and a system it serves; two workers
serve each neural system and the systems file lists each of them at the port it listens on, with the key variable
both sides share; the settings exist; the files the image copies are there. No Docker engine is needed."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest
import yaml

from commands import cli
from crs_backends import registry
from crs_backends.systems_file import load_systems_file

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
SETTINGS_DOCS = "".join(
    (ROOT / "docs" / name).read_text(encoding="utf-8") for name in ("configuration.md", "neural-systems.md")
)
HEAVY = ("kbrd", "barcor", "unicrs")


def block(language: str, containing: str) -> str:
    """The first fenced block of ``language`` in docs/deploy.md that holds ``containing``."""
    for found in re.finditer(rf"^```{language}\n(.*?)^```", DOC, re.M | re.S):
        if containing in found.group(1):
            return found.group(1)
    raise AssertionError(f"docs/deploy.md has no ```{language} block with {containing!r}")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(block("yaml", "services:"))


def own_services(compose: dict) -> dict[str, dict]:
    """The services built from this project (the others run third-party images: the engine, the proxy)."""
    return {name: s for name, s in compose["services"].items() if "build" in s or s.get("image") == "crs-arena:local"}


def argv(service: dict) -> list[str]:
    command = service["command"]
    return shlex.split(command) if isinstance(command, str) else [str(part) for part in command]


def test_every_command_is_a_command_of_this_project(compose):
    services = own_services(compose)
    assert {"app", *(f"{s}-{n}" for s in HEAVY for n in (1, 2))} <= set(services)
    for name, service in services.items():
        args = argv(service)
        if args[:2] == ["python", "app.py"]:
            assert len(args) == 2 and (ROOT / "app.py").is_file(), name
            continue
        assert args[0] == "crs-arena", f"{name} runs {args[0]!r}, not a command of this project"
        ctx = click.Context(cli)
        command = cli.get_command(ctx, args[1])
        assert command is not None, f"{name}: crs-arena has no command {args[1]!r}"
        try:
            parsed = command.make_context(args[1], args[2:])  # unknown options and bad values raise here
        except click.UsageError as e:
            pytest.fail(f"{name}: {' '.join(args)}: {e.format_message()}")
        if args[1] == "serve":
            assert parsed.params["system_id"] in registry.system_ids(), name
            assert parsed.params["name"] == name  # the name each turn records is the service's


def test_two_workers_per_neural_system_all_in_the_systems_file(compose, tmp_path, monkeypatch):
    workers = {}
    for name, service in own_services(compose).items():
        args = argv(service)
        if args[:2] == ["crs-arena", "serve"]:
            parsed = cli.get_command(click.Context(cli), "serve").make_context("serve", args[2:])
            workers[name] = parsed.params
            health = service["healthcheck"]["test"]
            assert health[:3] == ["CMD", "python", "-c"]
            compile(health[3], f"{name} healthcheck", "exec")  # valid Python
            assert f":{parsed.params['port']}/health" in " ".join(health[4:])
            assert parsed.params["key_env"] in service["environment"], name
    for system in HEAVY:
        assert sum(p["system_id"] == system for p in workers.values()) >= 2, system
    path = tmp_path / "systems.toml"
    path.write_text(block("toml", "[[system]]"), encoding="utf-8")
    entries = load_systems_file(path, reserved=registry.system_ids())
    listed = {}
    for entry in entries:
        assert len(entry.urls) >= 2, entry.id
        for url in entry.urls:
            host, port = re.fullmatch(r"http://([a-z0-9-]+):(\d+)/", url).groups()
            listed[host] = (entry, int(port))
    assert set(listed) == set(workers)
    app_env = compose["services"]["app"]["environment"]
    for host, (entry, port) in listed.items():
        assert port == workers[host]["port"] and entry.key_env == workers[host]["key_env"], host
        assert entry.key_env in app_env and entry.id.startswith(workers[host]["system_id"]), host


def test_the_app_uses_the_engine_and_existing_settings(compose):
    services = compose["services"]
    app = services["app"]
    assert app["environment"]["CRS_LLM_BASE_URL"] == "http://llm:8000/v1" and "llm" in services
    assert "--served-model-name" in argv(services["llm"])
    served = argv(services["llm"])[argv(services["llm"]).index("--served-model-name") + 1]
    assert app["environment"]["CRS_LLM_MODEL"] == served
    for variable in app["environment"]:
        assert variable in SETTINGS_DOCS or variable == "WORKER_KEY", f"{variable} is not a documented setting"
    assert app["environment"]["CRS_SYSTEMS_FILE"] in " ".join(app["volumes"])
    proxy = argv(services["proxy"])
    assert proxy[:2] == ["caddy", "reverse-proxy"] and proxy[proxy.index("--to") + 1] == "app:7860"


def test_the_image_copies_what_the_project_has():
    dockerfile = block("dockerfile", "FROM ")
    for source in re.findall(r"^COPY (\S+) ", dockerfile, re.M):
        assert source == "." or (ROOT / source).exists(), source
    requirements = (ROOT / "requirements.txt").read_text(encoding="utf-8")
    torch = re.search(r"torch==(\S+) --index-url", dockerfile).group(1)
    assert f"torch=={torch}\n" in requirements  # the image installs the pinned torch first, as make setup does
    assert "crs-arena" in (ROOT / "pyproject.toml").read_text(encoding="utf-8")  # `pip install -e .` puts it on PATH
