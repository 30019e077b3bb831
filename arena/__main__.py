"""Command line: ``python -m arena import-crsarena [DIR]`` and ``python -m arena export --out FILE.jsonl``."""

from __future__ import annotations

from pathlib import Path

import click

from arena.crsarena_import import export_jsonl, import_crsarena
from arena.leaderboard import compute_leaderboard
from catalog.catalog import data_dir, get_catalog
from evaluators.adapters import LogFormatError
from storage.db import default_db_path, get_db

DB_OPTION = click.option(
    "--db", "db_path", type=click.Path(path_type=Path), default=None,
    help="SQLite file (default: CRS_ARENA_DB or ./data/crs_arena.db).",
)


@click.group()
def cli() -> None:
    """Arena battles and votes: import, export, leaderboard."""


@cli.command("import-crsarena")
@click.argument("directory", required=False, type=click.Path(path_type=Path))
@click.option("--catalog", "catalog_name", default="redial", show_default=True,
              help="Catalog that listed titles are matched to (a dataset folder name under the data "
                   "directory), or 'none' to keep titles as they are written.")
@DB_OPTION
def import_command(directory: Path | None, catalog_name: str, db_path: Path | None) -> None:
    """Import CRSArena-Dial dialogues and votes (DIR default: <data dir>/crsarena). Idempotent.

    Example:

        python -m arena import-crsarena ../shared/data/crsarena
    """
    if directory is None:
        base = data_dir()
        if base is None:
            raise click.UsageError("no data directory found: pass DIR or set CRS_DATA_DIR")
        directory = base / "crsarena"
    catalog = None
    if catalog_name != "none":
        try:
            catalog = get_catalog(catalog_name)
        except FileNotFoundError as e:
            raise click.UsageError(f"{e} (use --catalog none to import without one)") from None
    db = get_db(db_path or default_db_path())
    try:
        report = import_crsarena(db, directory, catalog=catalog)
    except (FileNotFoundError, LogFormatError) as e:
        raise click.ClickException(str(e)) from None
    click.echo(report.summary())
    rows, _ = compute_leaderboard(db)
    click.echo("Leaderboard (Bradley–Terry, 95% interval):")
    for row in rows:
        if row["rating"] is not None:
            click.echo(f"  {row['rank']:>2}  {row['system']:<22} {row['rating']:7.1f}  "
                       f"[{row['ci_low']:.0f}, {row['ci_high']:.0f}]  battles {row['battles']}")


@cli.command("export")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="JSONL file to write.")
@DB_OPTION
def export_command(out: Path, db_path: Path | None) -> None:
    """Export conversations, votes (without voter ids) and judgments as JSON lines, one "type" each.

    Example:

        python -m arena export --out arena.jsonl
    """
    counts = export_jsonl(get_db(db_path or default_db_path()), out)
    click.echo(f"wrote {out}: " + ", ".join(f"{n} {name}" for name, n in counts.items()))


if __name__ == "__main__":
    cli()
