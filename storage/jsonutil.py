"""JSON text: how Python values become TEXT (SQLite columns), and JSON Lines files read and written.

:func:`dumps` / :func:`loads` are the one place that decides how a value becomes a JSON column.
:func:`iter_json_lines` / :func:`write_json_lines` are the one JSON Lines reader and writer: every ``*.jsonl``
file the project reads (our conversation logs, the bundled catalog, the iEvaLM processed records,
score files) goes through :func:`iter_json_lines`, which names the file and the line of anything it
cannot read (:class:`JsonLineError`); what a line must hold is its caller's business.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from storage.text import clean_text


def dumps(value: Any) -> str:
    """JSON text that SQLite can store: lone surrogates inside become U+FFFD (see :mod:`storage.text`)."""
    if not value and isinstance(value, list | dict):  # most turns' items and metadata: a restore writes 100,000s
        return "[]" if isinstance(value, list) else "{}"
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


class JsonLineError(ValueError):
    """A line of a JSON Lines file that cannot be read; the message names the file and the line.

    ``line``: its number (1-based). ``error``: what went wrong, the :class:`json.JSONDecodeError`,
    :class:`UnicodeDecodeError` or :class:`RecursionError` met, or None for a line over ``max_line_bytes``.
    ``detail``: that, in words (the parser's own message for a line that is not JSON).
    """

    def __init__(self, path: str | os.PathLike, line: int, error: Exception | None, max_line_bytes: int = 0):
        self.path = Path(path)
        self.line = line
        self.error = error
        self.max_line_bytes = max_line_bytes
        super().__init__(f"{path}:{line}: not a JSON line ({self.detail})")

    @property
    def detail(self) -> str:
        if self.error is None:
            return f"longer than {self.max_line_bytes:,} bytes"
        if isinstance(self.error, RecursionError):
            return "JSON nested too deeply to read"
        return str(self.error)


def iter_json_lines(path: str | os.PathLike, *, max_line_bytes: int | None = None) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` for each non-blank line of the JSON Lines file ``path``, read one line at a time.

    ``max_line_bytes``: a longer line (its newline not counted) is refused before it is read whole.
    Raises :class:`JsonLineError` for a line over that limit, not UTF-8, not JSON or nested too deeply;
    ``OSError`` when the file cannot be opened.
    """
    with open(path, "rb") as f:
        n = 0
        while True:
            raw = f.readline(max_line_bytes + 1) if max_line_bytes is not None else f.readline()
            if not raw:
                return
            n += 1
            if max_line_bytes is not None and len(raw) > max_line_bytes:
                if not (len(raw) == max_line_bytes + 1 and raw.endswith(b"\n")):
                    raise JsonLineError(path, n, None, max_line_bytes)
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise JsonLineError(path, n, e) from None
            if not text.strip():
                continue
            try:
                value = json.loads(text)
            except (json.JSONDecodeError, RecursionError) as e:
                raise JsonLineError(path, n, e) from None
            yield n, value


def write_json_lines(path: str | os.PathLike, rows: Iterable[Any]) -> Path:
    """Write one JSON value per line (UTF-8, non-ASCII kept as it is, keys in the order given) to ``path``,
    creating its folder; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def read_json_object(path: str | os.PathLike) -> dict:
    """The JSON object in the file at ``path``; ``{}`` when the file is missing, unreadable, not JSON or not an
    object (a fetched set's bookkeeping files, which a half-finished download may have left broken)."""
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}
