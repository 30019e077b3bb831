"""Text that SQLite (and every reader of the file) can hold: the last guard before a write.

Python strings may carry lone surrogates (``"\\ud800"``, from JSON escapes or a browser) that no
UTF-8 encoder accepts, and NUL or other C0 control characters that break terminals and CSV readers.
:func:`clean_text` replaces a surrogate with U+FFFD and drops NUL and the control characters other
than tab, newline and carriage return; everything else (any script, emoji, combining marks) is kept.
:func:`clean_value` applies it to every string inside lists and dicts (keys too), so JSON columns are
covered. Every row the storage package writes goes through one of them.
"""

from __future__ import annotations

import re
from typing import Any, overload

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@overload
def clean_text(text: str) -> str: ...
@overload
def clean_text(text: None) -> None: ...
def clean_text(text: str | None) -> str | None:
    """``text`` with lone surrogates replaced by U+FFFD and NUL/control characters removed (None stays None)."""
    if not isinstance(text, str):
        return text
    if text.isascii():
        return _CONTROL.sub("", text) if _CONTROL.search(text) else text
    text = _SURROGATE.sub(REPLACEMENT, text)
    return _CONTROL.sub("", text)


def clean_value(value: Any) -> Any:
    """:func:`clean_text` on every string in ``value`` (nested lists, tuples and dict keys and values)."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_value(k): clean_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_value(v) for v in value]
    return value
