"""UniCRS's text around the model: role-prefixed turns, the movie slot filled (never left empty), names of the
target items masked in a training reply."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from crs_backends.neural.engine import MOVIE_SLOT

FALLBACK_REPLY = "Could you tell me a bit more about what you are looking for?"


def turn_texts(context: Sequence[str]) -> list[str]:
    """``User: …`` / ``System: …`` by position (user first); empty utterances skipped but counted."""
    return [("User: " if i % 2 == 0 else "System: ") + u for i, u in enumerate(context) if u]


def fill_slot_tokens(text: str, items: Sequence[str] | None, slot_tokens: Iterable[str] = (MOVIE_SLOT, "<pad>")) -> str:
    """Replace slot tokens in order with ``items``; never leave an empty slot.

    ``items=None`` normalises every slot token to :data:`MOVIE_SLOT` (the caller fills them). When there
    are more slots than items, each sentence still holding an unfilled slot is dropped; if nothing is
    left, a short generic reply (naming the first item when there is one) is returned.
    """
    tokens = sorted({t for t in slot_tokens if t}, key=len, reverse=True)
    pattern = re.compile("|".join(re.escape(t) for t in tokens)) if tokens else None
    if pattern is None or not pattern.search(text):
        return tidy(text)
    names = [str(i).strip() for i in items if i and str(i).strip()] if items is not None else []
    hole = "\x00"
    queue = iter(names)

    def put(match: re.Match) -> str:
        name = MOVIE_SLOT if items is None else next(queue, None)
        if name is None:
            return hole
        before = text[match.start() - 1] if match.start() > 0 else " "
        after = text[match.end()] if match.end() < len(text) else " "
        return (" " if before.isalnum() else "") + name + (" " if after.isalnum() else "")

    filled = pattern.sub(put, text)
    if hole in filled:
        sentences = re.split(r"(?<=[.!?])\s+|\n+", filled)
        filled = " ".join(s for s in sentences if hole not in s)
        if not filled.strip():
            filled = f"You might enjoy {names[0]}." if names else FALLBACK_REPLY
    return tidy(filled)


def tidy(text: str) -> str:
    text = re.sub(r"[ \t]+", " ", text)
    text = re.sub(r" +([?.!,;:])", r"\1", text)
    return text.strip()


def replace_names(text: str, names: Iterable[str], token: str) -> str:
    for name in sorted({n for n in names if n}, key=len, reverse=True):
        text = text.replace(name, token)
    return text
