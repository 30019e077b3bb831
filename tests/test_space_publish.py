"""`crs-arena space publish`: what it would send (--dry-run), what it sends to a local fake Hub over real HTTP (large
files as LFS, variables and secrets, never a secret's value where it does not belong), and the .gitattributes that
those who push with git rely on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from app_server import ROOT
from ci_mode import skip_or_fail
from click.testing import CliRunner
from fake_hub import LARGE, FakeHub

from arena.space_publish import git_paths, is_large, make_plan
from commands import cli

SPACE = "me/crs-arena"
SECRETS = {"HF_TOKEN": "hf_publish_secret_value_0123456789", "CRS_LLM_API_KEY": "sk-space-secret-value-987654"}


def _publish(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    # TRANSFORMERS_OFFLINE counts as HF_HUB_OFFLINE for huggingface_hub
    full = {k: v for k, v in os.environ.items() if not k.startswith(("CRS_LLM_", "HF_", "TRANSFORMERS_OFFLINE"))}
    # quiet: the upload of ~75 MB to the local fake takes ~10 s; the bound is 10x that or more
    return subprocess.run(
        [sys.executable, str(ROOT / "commands.py"), "space", "publish", *args],
        cwd=ROOT,
        env={**full, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_dry_run_lists_files_sizes_large_files_variables_and_only_the_secrets_names(monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(
        cli,
        [
            "space", "publish", SPACE, "--dry-run", "--var", "CRS_LLM_MODEL=gpt-4o-mini",
            "--secret", "CRS_LLM_API_KEY", "--dataset", "me/crs-arena-data",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    out = result.output
    assert "assets/models/small-v7/barcor_conv_bundled/decoder.pt" in out and "large file (Xet/LFS)" in out
    assert "CRS_FETCH_AT_START=1" in out and "CRS_LLM_MODEL=gpt-4o-mini" in out
    assert "CRS_ARENA_HUB_DATASET=me/crs-arena-data" in out
    assert "CRS_LLM_API_KEY <- $CRS_LLM_API_KEY" in out and "HF_TOKEN <- $HF_TOKEN" in out
    assert not any(value in out for value in SECRETS.values())
    assert "Dry run: nothing was sent." in out
    paths = [line.split()[0] for line in out.splitlines() if line.startswith("  ") and line.split()[-1] == "regular"]
    assert "app.py" in paths and "requirements.txt" in paths and "README.md" in paths
    listed = out
    for unwanted in ("tests/", "bench/", "scripts/", ".venv", "examples/", "data/crs_arena", ".db ", "__pycache__"):
        assert f"  {unwanted}" not in listed and unwanted not in "".join(paths), unwanted


def test_secrets_are_never_taken_as_variables_and_must_be_in_the_environment(monkeypatch):
    monkeypatch.delenv("CRS_LLM_API_KEY", raising=False)
    runner = CliRunner()
    result = runner.invoke(cli, ["space", "publish", SPACE, "--dry-run", "--var", "CRS_LLM_API_KEY=sk-abc-123456"])
    assert result.exit_code != 0 and "looks like a secret" in result.output and "sk-abc-123456" not in result.output
    result = runner.invoke(cli, ["space", "publish", SPACE, "--dry-run", "--secret", "CRS_LLM_API_KEY"])
    assert result.exit_code != 0 and "CRS_LLM_API_KEY, which is not set" in result.output
    assert "Traceback" not in result.output


def test_a_readme_without_the_space_front_matter_is_refused(tmp_path):
    (tmp_path / "README.md").write_text("# CRS Arena\n")
    (tmp_path / "app.py").write_text("print('hi')\n")
    result = CliRunner().invoke(cli, ["space", "publish", SPACE, "--dry-run", "--folder", str(tmp_path)])
    assert result.exit_code != 0 and "front matter" in result.output and "sdk: gradio" in result.output


@pytest.mark.slow
def test_publish_sends_the_app_with_large_files_as_lfs_and_secrets_only_as_secrets(tmp_path):
    env_secrets = {**SECRETS, "CRS_LLM_API_KEY": SECRETS["CRS_LLM_API_KEY"]}
    plan = make_plan(SPACE, secrets=("CRS_LLM_API_KEY",), dataset="me/data", env=env_secrets)
    with FakeHub() as hub:
        done = _publish(
            [
                SPACE, "--var", "CRS_LLM_MODEL=gpt-4o-mini", "--var", "CRS_LLM_BASE_URL=https://api.example.org/v1",
                "--secret", "CRS_LLM_API_KEY", "--dataset", "me/data", "--hardware", "cpu-upgrade",
            ],
            {
                **env_secrets,
                "HF_ENDPOINT": hub.url,
                "HF_HUB_DISABLE_XET": "1",  # the classic LFS path (see tests/fake_hub.py)
                "HF_HOME": str(tmp_path / "hf_home"),
                "HF_HUB_DISABLE_TELEMETRY": "1",
            },
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        space = hub.repos[SPACE]
        assert space.repo_type == "space"
        assert space.created["sdk"] == "gradio" and space.created["hardware"] == "cpu-upgrade"
        # exactly the files the plan (and --dry-run) listed, each with its bytes
        assert sorted(space.files) == sorted(f.path for f in plan.files)
        for f in plan.files:
            assert space.files[f.path] == (ROOT / f.path).read_bytes(), f.path
        # the large ones went through LFS, as the dry run said they would; nothing else did
        assert space.lfs == {f.path for f in plan.files if f.large}
        assert {p for p in space.files if p.endswith(".pt")} <= space.lfs
        assert any(len(space.files[p]) > LARGE for p in space.lfs)
        assert space.variables == {
            "CRS_FETCH_AT_START": "1",
            "CRS_LLM_MODEL": "gpt-4o-mini",
            "CRS_LLM_BASE_URL": "https://api.example.org/v1",
            "CRS_ARENA_HUB_DATASET": "me/data",
        }
        assert space.secrets == {"CRS_LLM_API_KEY": SECRETS["CRS_LLM_API_KEY"], "HF_TOKEN": SECRETS["HF_TOKEN"]}
        # a secret's value travelled in its own secrets request and nowhere else, and never reached the output
        for value in SECRETS.values():
            carriers = [r["path"] for r in hub.requests if value.encode() in r["body"]]
            assert carriers == [f"/api/spaces/{SPACE}/secrets"], carriers
            assert value not in done.stdout and value not in done.stderr
        assert all(r["authorization"] for r in hub.requests if r["path"].startswith("/api/"))
        assert "Published:" in done.stdout


def _tree_files() -> list[str]:
    """The files of the tree: tracked, or new and not ignored."""
    paths = git_paths(ROOT, "--cached", "--others", "--exclude-standard")
    if paths is None:
        skip_or_fail("not a git work tree (or no git): the .gitattributes check needs git check-attr")
        return []
    return [p for p in paths if (ROOT / p).is_file()]


def test_gitattributes_stores_every_large_or_binary_file_of_the_tree_with_lfs():
    files = _tree_files()
    needing = [p for p in files if is_large(ROOT / p)]
    assert any(p.endswith(".pt") for p in needing), "no binary file found: the check read nothing"
    done = subprocess.run(
        ["git", "-C", str(ROOT), "check-attr", "filter", "--stdin", "-z"],
        input="\0".join(needing).encode(),
        capture_output=True,
        timeout=60,
        check=True,
    )
    fields = done.stdout.decode().split("\0")
    attrs = {fields[i]: fields[i + 2] for i in range(0, len(fields) - 2, 3)}
    assert [p for p in needing if attrs.get(p) != "lfs"] == []


def test_the_upload_selection_holds_what_the_app_imports_and_reads():
    plan = make_plan(SPACE, env={})
    sent = {f.path for f in plan.files}
    tracked = set(_tree_files())
    for package in ("arena", "catalog", "crs_backends", "evaluators", "llm_clients", "storage", "ui"):
        code = {p for p in tracked if p.startswith(f"{package}/") and p.endswith(".py")}
        assert code and code <= sent, sorted(code - sent)[:5]
    assets = {p for p in tracked if p.startswith("assets/")}
    assert assets <= sent and "docs/api.md" in sent  # the API tab reads docs/api.md
    assert not [p for p in sent if p.startswith(("tests/", "bench/", "scripts/", "examples/", "data/"))]
    assert Path("app.py").name in sent and "requirements.txt" in sent
