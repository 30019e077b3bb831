"""JSON columns: one place that decides how Python values become TEXT."""

from __future__ import annotations

import json
from typing import Any

from storage.text import clean_text


def dumps(value: Any) -> str:
    """JSON text that SQLite can store: lone surrogates inside become U+FFFD (see :mod:`storage.text`)."""
    return clean_text(json.dumps(value, ensure_ascii=False, sort_keys=True, default=_default))


def loads(text: str | None, default: Any = None) -> Any:
    if text is None or text == "":
        return default
    return json.loads(text)


def _default(value: Any) -> Any:
    if hasattr(value, "__dataclass_fields__"):
        from dataclasses import asdict

        return asdict(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
