"""Debian's Chromium for the browser tests: its path, the flags it runs with, and what happens when it is missing.

Outside CI a missing Chromium skips the browser tests with a reason. In CI (``CI=true``, as ``.ci/run``'s
environment sets) or with ``CRS_REQUIRE_BROWSER=1`` it fails them: a CI run that never opened a browser must
not pass as if it had.
"""

from __future__ import annotations

import os
import shutil

import pytest
from ci_mode import in_ci

ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def browser_required() -> bool:
    return in_ci() or os.environ.get("CRS_REQUIRE_BROWSER", "").strip() == "1"


def chromium() -> str:
    """The Chromium executable; a skip (outside CI) or a failure (in CI) when there is none."""
    path = shutil.which("chromium")
    if path is not None:
        return path
    message = "Debian chromium is not installed (`make browser` installs it as root: scripts/ensure_chromium.sh)"
    if browser_required():
        pytest.fail(f"{message}; CI and CRS_REQUIRE_BROWSER=1 require the browser tests to run", pytrace=False)
    pytest.skip(message)
