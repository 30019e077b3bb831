"""UniCRS's text around the model: role-prefixed turns, spacing tidied, names of the target items masked in a
training reply."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence


def turn_texts(context: Sequence[str]) -> list[str]:
    """``User: …`` / ``System: …`` by position (user first); empty utterances skipped but counted."""
    return [("User: " if i % 2 == 0 else "System: ") + u for i, u in enumerate(context) if u]


def tidy(text: str) -> str:
    text = re.sub(r"[ \t]+", " ", text)
    text = re.sub(r" +([?.!,;:])", r"\1", text)
    return text.strip()


def replace_names(text: str, names: Iterable[str], token: str) -> str:
    for name in sorted({n for n in names if n}, key=len, reverse=True):
        text = text.replace(name, token)
    return text
