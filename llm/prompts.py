"""Loading the prompt texts kept in ``assets/prompts.toml``."""

from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path

PROMPTS_FILE = Path(__file__).resolve().parent.parent / "assets" / "prompts.toml"


@lru_cache(maxsize=1)
def _load() -> dict:
    with open(PROMPTS_FILE, "rb") as f:
        return tomllib.load(f)


def prompts_version() -> str:
    return _load()["version"]


def prompt(section: str, name: str) -> str:
    """One prompt text, stripped of the surrounding blank lines."""
    try:
        return _load()[section][name].strip()
    except KeyError:
        raise KeyError(f"no prompt {section}.{name} in {PROMPTS_FILE.name}") from None
