"""The arena's database as the app and the command line open it, so neither reaches into ``storage``.

* :func:`database_path` is the configured file (``CRS_ARENA_DB``, a Space's persistent disk, or
  ``./data/crs_arena.db``); a mistyped ``CRS_ARENA_DB`` raises :class:`DatabasePathError`.
* :func:`database` is the calling thread's connection (created and migrated on first use).
* :func:`open_at_start` opens it once when the app starts and marks evaluations a crash left
  ``running`` as ``interrupted``.
* :func:`describe` is what the Settings tab shows about the file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sqlite_utils import Database

from storage.db import DatabasePathError, default_db_path, get_db, schema_version
from storage.evaluations import mark_interrupted

__all__ = ["DatabaseFacts", "DatabasePathError", "database", "database_path", "describe", "open_at_start"]


@dataclass(frozen=True)
class DatabaseFacts:
    """The database file, its schema version (applied migrations) and the SQLite library's version."""

    file: Path
    schema_version: int
    sqlite_version: str


def database_path() -> Path:
    """The configured database file.

    :raises DatabasePathError: ``CRS_ARENA_DB`` names a folder, or a file in a folder that does not exist
    """
    return default_db_path()


def database(path: str | os.PathLike | None = None) -> Database:
    """The calling thread's connection to ``path`` (default :func:`database_path`), migrated on first use."""
    return get_db(path)


def open_at_start(path: str | os.PathLike) -> int:
    """Open (create and migrate) the database, so a bad path fails at start, and mark evaluations left
    ``running`` by a crash as ``interrupted``. Returns how many were marked."""
    return mark_interrupted(get_db(path))


def describe(path: str | os.PathLike) -> DatabaseFacts:
    """The file (resolved), its schema version and the SQLite library version that reads it."""
    db = get_db(path)
    return DatabaseFacts(
        file=Path(path).resolve(),
        schema_version=schema_version(db),
        sqlite_version=".".join(str(n) for n in db.sqlite_version),
    )
