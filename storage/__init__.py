"""SQLite storage: the lowest layer and the only package that writes SQL."""

from storage.db import (
    DatabasePathError,
    close_thread_connections,
    default_db_path,
    get_db,
    open_db,
    schema_version,
    write_transaction,
)

__all__ = [
    "DatabasePathError",
    "close_thread_connections",
    "default_db_path",
    "get_db",
    "open_db",
    "schema_version",
    "write_transaction",
]
