"""``python -m crs_backends``: check a system's conformance, list the registered systems.

    python -m crs_backends check my_crs                       # a system of the systems file (or any id)
    python -m crs_backends check http://127.0.0.1:8800/ --key-env MY_CRS_KEY
    python -m crs_backends systems                            # what the systems file registers, checked
    python -m crs_backends serve kbrd --port 8801             # serve a system over crs-arena/1 (a worker)

``check`` exits with 0 when every rule passes, 1 when one fails, 2 when the target cannot be checked.
"""

from __future__ import annotations

import json
import sys

import click

from crs_backends.command_line import CommandGroup


class CannotCheck(click.ClickException):
    exit_code = 2


@click.group(cls=CommandGroup)
def cli() -> None:
    """The systems under test: conformance checks and the operator's systems file."""


@cli.command()
@click.argument("target")
@click.option("--catalog", default=None, help="Catalog for a URL target (default: bundled).")
@click.option("--key-env", default=None, help="For a URL target: the NAME of the variable holding its key.")
@click.option("--time-limit", default=10.0, show_default=True, type=float, help="Seconds each probe may take.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def check(target: str, catalog: str | None, key_env: str | None, time_limit: float, as_json: bool) -> None:
    """Send the scripted conversations to TARGET (a system id or an http(s) URL) and report per rule."""
    from crs_backends.conformance import check as run_check

    try:
        report = run_check(target, catalog=catalog, key_env=key_env, time_limit=time_limit)
    except KeyError as e:
        raise CannotCheck(str(e.args[0]) if e.args else "unknown system") from None
    except (ValueError, OSError) as e:
        raise CannotCheck(f"{target}: {e}") from None
    except Exception as e:  # e.g. SystemUnavailable: its message says why
        raise CannotCheck(f"{target} cannot be checked: {e}") from None
    click.echo(json.dumps(report.to_dict(), indent=2, ensure_ascii=False) if as_json else report.to_text())
    sys.exit(0 if report.passed else 1)


@cli.command()
def systems() -> None:
    """List every registered system; the systems file's entries with their settings (never a key)."""
    from crs_backends.registry import entry_of
    from crs_backends.registry import systems as registered_systems
    from crs_backends.systems_file import ENV, configured_path

    path = configured_path()
    click.echo(f"systems file ({ENV}): {path if path else 'none'}")
    for system_id, (label, _) in registered_systems().items():
        entry = entry_of(system_id)
        if entry is None:
            click.echo(f"  {system_id:<14} {label} (built in)")
        elif entry.kind == "http":
            key = (
                f", key from {entry.key_env} ({'set' if _is_set(entry.key_env) else 'NOT set'})"
                if entry.key_env
                else ""
            )
            click.echo(
                f"  {system_id:<14} {label} · {entry.variant} (HTTP {entry.url}, timeout {entry.timeout:g} s, "
                f"{entry.max_retries} retries{key}; line {entry.line})"
            )
        else:
            click.echo(f"  {system_id:<14} {label} · {entry.variant} (plug-in {entry.entry_point}; line {entry.line})")


@cli.command()
@click.argument("system_id", metavar="SYSTEM")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0: every interface).")
@click.option("--port", default=8801, show_default=True, type=click.IntRange(0, 65535), help="Port (0: any free one).")
@click.option("--key-env", default=None, help="The NAME of a variable holding a key that requests must bring.")
def serve(system_id: str, host: str, port: int, key_env: str | None) -> None:
    """Serve a registered SYSTEM (kbrd, barcor, unicrs, chatcrs, retrieval, a plug-in) over crs-arena/1, as a worker
    the app reaches through the systems file (docs/deploy.md)."""
    import logging
    import os

    from crs_backends.registry import SystemUnavailable, get_system
    from crs_backends.worker import WorkerError, WorkerServer

    logging.basicConfig(level=os.environ.get("LOG_LEVEL", "WARNING"))
    key = os.environ.get(key_env) if key_env else None
    if key_env and not key:
        raise CannotCheck(f"--key-env {key_env}: that variable is not set")
    try:
        system = get_system(system_id)
    except KeyError as e:
        raise CannotCheck(str(e.args[0]) if e.args else f"unknown system {system_id!r}") from None
    except SystemUnavailable as e:
        raise CannotCheck(f"{system_id} cannot be served: {e}") from None
    try:
        server = WorkerServer(system, system_id, host=host, port=port, key=key)
    except WorkerError as e:
        raise CannotCheck(str(e)) from None
    click.echo(f"{system.info.label} ({system.info.variant}) on {server.url}{' (key required)' if key else ''}")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def _is_set(name: str | None) -> bool:
    import os

    return bool(name and os.environ.get(name))


if __name__ == "__main__":
    cli(prog_name="python -m crs_backends")
