"""The slow tier (tests/conftest.py SLOW_MODULES) names modules that exist: `make test-fast` leaves out what it says."""

from pathlib import Path

from conftest import SLOW_MODULES

HERE = Path(__file__).resolve().parent


def test_every_slow_module_exists_and_gives_its_reason():
    missing = sorted(m for m in SLOW_MODULES if not (HERE / f"{m}.py").is_file())
    assert missing == []
    assert all(reason.strip() for reason in SLOW_MODULES.values())


def test_the_app_and_browser_tests_are_in_the_slow_tier():
    """A module that starts the app or a browser is slow by definition (what `make test-fast` promises to leave out)."""
    for path in HERE.glob("test_*.py"):
        text = path.read_text()
        if path.name != Path(__file__).name and ("AppServer(" in text or "chromium.launch(" in text):
            assert path.stem in SLOW_MODULES, path.name
