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

# the worker's defaults, repeated here so that `--help` does not import FastAPI (crs_backends/worker.py has them too)
DEFAULT_CONCURRENCY, DEFAULT_QUEUE, DEFAULT_GRACE_S = 4, 16, 30.0


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
            more = f" and {len(entry.urls) - 1} more worker(s)" if len(entry.urls) > 1 else ""
            click.echo(
                f"  {system_id:<14} {label} · {entry.variant} (HTTP {entry.url}{more}, timeout {entry.timeout:g} s, "
                f"{entry.max_retries} retries{key}; line {entry.line})"
            )
        else:
            click.echo(f"  {system_id:<14} {label} · {entry.variant} (plug-in {entry.entry_point}; line {entry.line})")


@cli.command()
@click.argument("system_id", metavar="SYSTEM")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0: every interface).")
@click.option("--port", default=8801, show_default=True, type=click.IntRange(0, 65535), help="Port (0: any free one).")
@click.option("--key-env", default=None, help="The NAME of a variable holding a key that requests must bring.")
@click.option(
    "--concurrency",
    default=DEFAULT_CONCURRENCY,
    show_default=True,
    type=click.IntRange(1, 256),
    help="Turns answered at once.",
)
@click.option(
    "--queue",
    default=DEFAULT_QUEUE,
    show_default=True,
    type=click.IntRange(0, 10_000),
    help="Turns that may wait for a free slot; beyond them a turn gets 503 with Retry-After.",
)
@click.option("--name", default=None, help="This worker's name, sent as X-CRS-Worker and kept with each turn.")
@click.option(
    "--grace",
    default=DEFAULT_GRACE_S,
    show_default=True,
    type=click.FloatRange(1, 3600),
    help="Seconds a stop (SIGTERM, Ctrl-C) waits for the turns in flight.",
)
def serve(
    system_id: str,
    host: str,
    port: int,
    key_env: str | None,
    concurrency: int,
    queue: int,
    name: str | None,
    grace: float,
) -> None:
    """Serve a registered SYSTEM (kbrd, barcor, unicrs, chatcrs, retrieval, a plug-in) over crs-arena/1, as a worker
    the app reaches through the systems file (docs/deploy.md).

    The port opens at once and the system loads behind it: GET /health answers 503 until it is ready, then 200;
    GET /metrics has Prometheus metrics. SIGTERM finishes the turns in flight, refuses new ones and exits with 0.

    Example: KBRD_WORKER_KEY=… crs-arena serve kbrd --host 0.0.0.0 --port 8801 --key-env KBRD_WORKER_KEY
    """
    import logging
    import os

    from crs_backends.registry import get_system, systems
    from crs_backends.worker import WorkerError, WorkerServer

    logging.basicConfig(level=os.environ.get("LOG_LEVEL", "WARNING"))
    key = os.environ.get(key_env) if key_env else None
    if key_env and not key:
        raise CannotCheck(f"--key-env {key_env}: that variable is not set")
    known = systems()
    if system_id not in known:
        raise CannotCheck(f"unknown system {system_id!r}; known: {', '.join(known)}")

    def load():
        system = get_system(system_id)
        click.echo(f"{system.info.label} ({system.info.variant}) ready")
        return system

    try:
        server = WorkerServer(
            load,
            system_id,
            host=host,
            port=port,
            key=key,
            concurrency=concurrency,
            queue=queue,
            name=name,
            grace=grace,
        )
    except WorkerError as e:
        raise CannotCheck(str(e)) from None
    click.echo(
        f"{system_id} worker on {server.url}{' (key required)' if key else ''}: loading; GET /health says when ready"
    )
    try:
        server.serve_forever()
    except WorkerError as e:
        raise CannotCheck(str(e)) from None
    click.echo(f"{system_id} worker stopped")


def _is_set(name: str | None) -> bool:
    import os

    return bool(name and os.environ.get(name))


if __name__ == "__main__":
    cli(prog_name="python -m crs_backends")
