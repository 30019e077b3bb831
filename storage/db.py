"""Opening the SQLite database: path resolution, pragmas, one connection per thread.

Every other module gets its database through :func:`get_db` (or :func:`open_db`
for a connection it owns). Migrations run once per file per process.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import sqlite_utils

from storage.migrations import migrations

BUSY_TIMEOUT_S = 30.0
DEFAULT_DB_PATH = Path("data") / "crs_arena.db"
SPACE_DB_PATH = Path("/data") / "crs_arena.db"

_local = threading.local()
_savepoints = itertools.count()
_write_locks: dict[str, threading.Lock] = {}
_write_locks_lock = threading.Lock()
# each connection's entry in _write_locks, kept beside it so a write does not look the file up again
_db_write_locks: weakref.WeakKeyDictionary[sqlite_utils.Database, threading.Lock] = weakref.WeakKeyDictionary()
_migrated: set[str] = set()
_migrate_lock = threading.Lock()


class DatabasePathError(ValueError):
    """``CRS_ARENA_DB`` names a file the app must not create (its folder does not exist)."""


def on_space() -> bool:
    """Running on a Hugging Face Space (``SYSTEM=spaces`` or ``SPACE_ID`` set)."""
    return os.environ.get("SYSTEM") == "spaces" or bool(os.environ.get("SPACE_ID"))


def persistent_dir() -> Path:
    """The Space's persistent disk: ``/data``, or ``CRS_ARENA_PERSISTENT_DIR`` (tests use a temporary one)."""
    return Path(os.environ.get("CRS_ARENA_PERSISTENT_DIR") or "/data")


def default_db_path() -> Path:
    """Where the database lives.

    ``CRS_ARENA_DB`` wins, and its folder must exist: a mistyped path is refused with
    :class:`DatabasePathError` rather than silently starting an empty board somewhere new. On a
    Hugging Face Space with persistent storage (``/data`` exists and is writable) the database goes
    there; otherwise ``./data/crs_arena.db`` (the default folders are created when missing).
    """
    configured = os.environ.get("CRS_ARENA_DB", "").strip()
    if configured:
        path = Path(configured).expanduser()
        if path.is_dir():
            raise DatabasePathError(
                f"CRS_ARENA_DB={configured} is a folder; it must name a database file (e.g. {path / 'crs_arena.db'})"
            )
        if not path.parent.is_dir():
            raise DatabasePathError(
                f"CRS_ARENA_DB={configured}: the folder {path.parent} does not exist. "
                "Create it first, or fix the path (the app does not create folders for "
                "a configured database, so a typo cannot start an empty board)"
            )
        return path
    data = persistent_dir()
    if on_space() and data.is_dir() and os.access(data, os.W_OK):
        return data / SPACE_DB_PATH.name
    return DEFAULT_DB_PATH


WAL_TRIES = 100  # of 0.05 s: a bound on waiting for another connection that is creating the same new file


def _enable_wal(db: sqlite_utils.Database) -> None:
    """Switch a new file to WAL. Changing the journal mode needs the file to itself and does not wait on the busy
    timeout, so when two threads open a brand-new file at once (the app's background scorer and a request, seen
    in a test) the second is told "database is locked": it waits for the first, a bounded number of times."""
    for attempt in range(WAL_TRIES):
        try:
            db.enable_wal()
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or attempt == WAL_TRIES - 1:
                raise
            time.sleep(0.05)
            if db.journal_mode == "wal":  # the other connection switched it
                return


def open_db(path: str | os.PathLike | None = None) -> sqlite_utils.Database:
    """Open a new connection, set the pragmas and apply pending migrations.

    The connection belongs to the calling thread; use :func:`get_db` to reuse one.
    """
    path = Path(path) if path is not None else default_db_path()
    if str(path) != ":memory:" and not path.parent.is_dir():
        if (
            not os.environ.get("CRS_ARENA_DB", "").strip()
            or path.resolve() != Path(os.environ["CRS_ARENA_DB"].strip()).expanduser().resolve()
        ):
            path.parent.mkdir(parents=True, exist_ok=True)  # a default or programmatic path
        else:
            raise DatabasePathError(f"CRS_ARENA_DB={path}: the folder {path.parent} does not exist")
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S)
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    conn.execute("PRAGMA foreign_keys = ON")
    db = sqlite_utils.Database(conn)
    if str(path) != ":memory:":
        key = str(path.resolve())
        if db.journal_mode != "wal":
            _enable_wal(db)
        db.execute("PRAGMA synchronous = NORMAL")
        with _migrate_lock:
            if key not in _migrated:
                migrate(db)
                _migrated.add(key)
    else:
        migrate(db)
    return db


def get_db(path: str | os.PathLike | None = None) -> sqlite_utils.Database:
    """The calling thread's connection to ``path`` (opened on first use)."""
    path = Path(path) if path is not None else default_db_path()
    key = str(path.resolve()) if str(path) != ":memory:" else ":memory:"
    cache: dict[str, sqlite_utils.Database] = getattr(_local, "dbs", None) or {}
    _local.dbs = cache
    db = cache.get(key)
    if db is None or key == ":memory:":
        db = open_db(path)
        cache[key] = db
    return db


def db_file(db: sqlite_utils.Database) -> str | None:
    """The file a connection is open on (None for an in-memory database)."""
    row = db.conn.execute("pragma database_list").fetchone()
    return row[2] if row and row[2] else None


def close_thread_connections() -> None:
    """Close every connection the calling thread holds (tests, shutdown)."""
    for db in (getattr(_local, "dbs", None) or {}).values():
        db.close()
    _local.dbs = {}


def migrate(db: sqlite_utils.Database) -> None:
    """Apply pending migrations, holding the write lock so two processes don't race."""
    with write_transaction(db):
        migrations.apply(db)


def schema_version(db: sqlite_utils.Database) -> int:
    """Number of applied migrations: the schema version recorded in the file."""
    return len(migrations.applied(db))


@contextmanager
def write_transaction(db: sqlite_utils.Database) -> Iterator[sqlite_utils.Database]:
    """``BEGIN IMMEDIATE`` … ``COMMIT``: take the write lock before reading.

    Use this for every read-then-write sequence; a deferred transaction that
    read first fails with "database is locked" instead of waiting when another
    connection wrote in between. sqlite-utils calls inside nest as savepoints, and so
    does a ``write_transaction`` inside another one (all of it commits or none).
    """
    if db.conn.in_transaction:  # nested: a savepoint inside the outer transaction, all or nothing with it
        name = f"nested_{id(db)}_{threading.get_ident()}_{next(_savepoints)}"
        db.conn.execute(f"SAVEPOINT {name}")
        try:
            yield db
        except BaseException:
            db.conn.execute(f"ROLLBACK TO {name}")
            db.conn.execute(f"RELEASE {name}")
            raise
        else:
            db.conn.execute(f"RELEASE {name}")
        return
    with _file_lock(db):  # threads of this process queue here (woken at once) instead of in SQLite's backoff sleeps
        db.conn.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            if db.conn.in_transaction:
                db.conn.execute("ROLLBACK")
            raise
        else:
            db.conn.execute("COMMIT")


def _file_lock(db: sqlite_utils.Database) -> threading.Lock:
    """One lock per database file for this process's writers (other processes still meet SQLite's lock)."""
    lock = _db_write_locks.get(db)
    if lock is None:
        key = db_file(db) or f"memory:{id(db.conn)}"
        with _write_locks_lock:
            lock = _write_locks.setdefault(key, threading.Lock())
            _db_write_locks[db] = lock
    return lock


@dataclass(frozen=True)
class DatabaseFacts:
    """The database file, its schema version (applied migrations) and the SQLite library's version (what the
    Settings tab shows)."""

    file: Path
    schema_version: int
    sqlite_version: str


def describe(path: str | os.PathLike) -> DatabaseFacts:
    """The file (resolved), its schema version and the SQLite library version that reads it."""
    db = get_db(path)
    return DatabaseFacts(
        file=Path(path).resolve(),
        schema_version=schema_version(db),
        sqlite_version=".".join(str(n) for n in db.sqlite_version),
    )
