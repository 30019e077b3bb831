"""Whether this test run is CI's: there, what could not be checked fails instead of skipping."""

from __future__ import annotations

import os


def in_ci() -> bool:
    """``CI`` set to a true value (``.ci/run``'s environment sets ``CI=true``)."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
