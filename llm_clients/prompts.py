"""The prompt texts, kept in ``assets/prompts/<section>.toml`` (one file per component).

Each file carries its own ``version``; bump it whenever a text in it changes.
Versions are stored with conversations and scores so results stay traceable.
"""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path

PROMPTS_DIR = Path(__file__).resolve().parent.parent / "assets" / "prompts"


@cache
def _load(section: str) -> dict:
    path = PROMPTS_DIR / f"{section}.toml"
    if not path.exists():
        raise KeyError(f"no prompt file {path.name} in {PROMPTS_DIR}")
    with open(path, "rb") as f:
        return tomllib.load(f)


def prompts_version(section: str) -> str:
    """``section@version``, e.g. ``chatcrs@2026-11-22.1``."""
    return f"{section}@{_load(section)['version']}"


def prompt(section: str, name: str) -> str:
    """One prompt text, stripped of the surrounding blank lines."""
    try:
        return _load(section)[name].strip()
    except KeyError:
        raise KeyError(f"no prompt {name!r} in {section}.toml") from None
