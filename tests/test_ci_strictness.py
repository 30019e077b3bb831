"""What may skip outside CI must fail in CI: a missing Chromium (scripts/ensure_chromium.sh and the browser tests)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from browser_support import chromium

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "ensure_chromium.sh"


@pytest.fixture
def no_chromium(tmp_path, monkeypatch) -> Path:
    """A PATH holding only a fake ``id`` (as a user, uid 1000): no chromium, no apt-get."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_id = bin_dir / "id"
    fake_id.write_text("#!/bin/bash\necho 1000\n")
    fake_id.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("CRS_REQUIRE_BROWSER", raising=False)
    return bin_dir


def _ensure(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["/bin/bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30)


def test_outside_ci_a_missing_chromium_is_reported_and_skipped(no_chromium):
    done = _ensure({"PATH": str(no_chromium)})
    assert done.returncode == 0 and "not root" in done.stdout and "skipped" in done.stdout


@pytest.mark.parametrize("env", [{"CI": "true"}, {"CI": "1"}, {"CRS_REQUIRE_BROWSER": "1"}])
def test_in_ci_a_chromium_that_cannot_be_installed_fails_the_setup(no_chromium, env):
    done = _ensure({"PATH": str(no_chromium), **env})
    assert done.returncode == 1 and "requires the browser tests" in done.stderr


def test_as_root_without_apt_get_the_reason_says_so(no_chromium):
    (no_chromium / "id").write_text("#!/bin/bash\necho 0\n")
    done = _ensure({"PATH": str(no_chromium), "CI": "true"})
    assert done.returncode == 1 and "apt-get is not available" in done.stderr


def test_browser_tests_skip_outside_ci_without_chromium(no_chromium):
    with pytest.raises(pytest.skip.Exception, match="chromium is not installed"):
        chromium()


@pytest.mark.parametrize("var, value", [("CI", "true"), ("CRS_REQUIRE_BROWSER", "1")])
def test_browser_tests_fail_in_ci_without_chromium(no_chromium, monkeypatch, var, value):
    monkeypatch.setenv(var, value)
    with pytest.raises(pytest.fail.Exception, match="require the browser tests to run"):
        chromium()


def test_ci_false_is_not_ci(no_chromium, monkeypatch):
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception):
        chromium()
