"""Whether this test run is CI's: there, what could not be checked fails instead of skipping."""

from __future__ import annotations

import os


def in_ci() -> bool:
    """``CI`` set to a true value (``.ci/run``'s environment sets ``CI=true``)."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def skip_or_fail(reason: str) -> None:
    """Skip the test outside CI; under CI, fail it: a check CI cannot make is a failure, never a silent skip."""
    import pytest

    if in_ci():
        pytest.fail(f"CI: {reason}")
    pytest.skip(reason)
