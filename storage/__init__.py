"""SQLite storage: the lowest layer and the only package that writes SQL."""

from storage.db import (
    close_thread_connections,
    default_db_path,
    get_db,
    open_db,
    schema_version,
    write_transaction,
)

__all__ = [
    "close_thread_connections",
    "default_db_path",
    "get_db",
    "open_db",
    "schema_version",
    "write_transaction",
]
