"""What every ``python -m`` command line shares: the systems file's error and the click group that reports it.

A leaf module (click only), so the command lines, the training command included, can use it without importing
the registry or the systems file.
"""

from __future__ import annotations

import click


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
