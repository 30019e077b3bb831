"""What every command line shares: the systems file's error, the click group that reports it, and the options
several commands take (``--db``), defined once.

A leaf module (click and the database's path rule only), so the command lines, the training command included,
can use it without importing the registry or the systems file. The ``crs-arena`` command (``commands.py``)
gathers them all.
"""

from __future__ import annotations

from pathlib import Path

import click

from storage.db import DatabasePathError, default_db_path

db_option = click.option(
    "--db",
    "db_path",
    type=click.Path(path_type=Path),
    default=None,
    help="SQLite file (default: CRS_ARENA_DB or ./data/crs_arena.db).",
)


def resolve_db(db_path: Path | None) -> Path:
    """``--db``'s value, or the configured database file; a mistyped ``CRS_ARENA_DB`` is a usage error."""
    try:
        return db_path or default_db_path()
    except DatabasePathError as e:
        raise click.ClickException(str(e)) from None


class SystemsFileError(ValueError):
    """The systems file cannot be used; the message starts with ``<file>:<line>:``."""


class CommandGroup(click.Group):
    """A command line group whose commands report a systems file that cannot be used as one line,
    ``file:line: reason``, and exit with code 2: no traceback (every ``python -m`` entry point uses it)."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except SystemsFileError as e:
            click.echo(f"Error: {e}", err=True)
            ctx.exit(2)
