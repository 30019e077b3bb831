"""Command line: ``python -m arena import-crsarena [DIR]``, ``board [--kind KIND]``, ``export --out FILE.jsonl``,
``export-labels --out FILE.json`` and ``promote-uploads``."""

from __future__ import annotations

import json
from pathlib import Path

import click

from arena.board_cache import read_board, refresh_board
from arena.board_view import board_view, kind_line, set_aside_line
from arena.crsarena_import import ImportRefused, export_jsonl, import_dial
from arena.request_kinds import KINDS
from crs_backends.command_line import CommandGroup, db_option, resolve_db
from storage.db import get_db
from storage.stats import promote_uploads


@click.group(cls=CommandGroup)
def cli() -> None:
    """Arena battles and votes: import, export, leaderboard."""


@cli.command("import-crsarena")
@click.argument("directory", required=False, type=click.Path(path_type=Path))
@click.option(
    "--catalog",
    "catalog_name",
    default="redial",
    show_default=True,
    help="Catalog that listed titles are matched to (a dataset folder name under the data "
    "directory), or 'none' to keep titles as they are written.",
)
@click.option(
    "--score/--no-score",
    default=True,
    show_default=True,
    help="Also score the imported conversations with the proxy (LLM-free, about 10 ms each).",
)
@db_option
def import_command(directory: Path | None, catalog_name: str, score: bool, db_path: Path | None) -> None:
    """Import CRSArena-Dial dialogues and votes (DIR default: <data dir>/crsarena) and score the
    conversations with the proxy. Idempotent.

    Example:

        python -m arena import-crsarena ../shared/data/crsarena
    """
    db = get_db(resolve_db(db_path))
    try:
        report = import_dial(db, directory, catalog_name=None if catalog_name == "none" else catalog_name, score=score)
    except ImportRefused as e:
        hint = " (or pass --catalog none to keep titles as written)" if e.reason == "catalog" else ""
        raise click.ClickException(f"{e}{hint}") from None
    click.echo(report.summary())
    rows = read_board(db).rows
    click.echo("Leaderboard (Bradley–Terry, 95% interval):")
    for row in rows:
        if row["rating"] is not None:
            click.echo(
                f"  {row['rank']:>2}  {row['system']:<22} {row['rating']:7.1f}  "
                f"[{row['ci_low']:.0f}, {row['ci_high']:.0f}]  battles {row['battles']}"
            )


@cli.command("board")
@click.option(
    "--kind",
    type=click.Choice(["all", *KINDS]),
    default="all",
    show_default=True,
    help="The board of one kind of request (the battle's first message): " + ", ".join(KINDS) + ".",
)
@click.option("--style/--no-style", default=False, show_default=True, help="Style-controlled ratings.")
@click.option(
    "--with-revealed",
    is_flag=True,
    help="Also rate the votes cast after a reply named a system (set aside by default).",
)
@db_option
def board_command(kind: str, style: bool, with_revealed: bool, db_path: Path | None) -> None:
    """Print the leaderboard: every kind's votes, or one kind's with each system's overall rank beside it, and the
    votes per kind. Reads only (battles voted before the tags existed are tagged by the app's next refresh, or by
    `import-crsarena`).

    Example:

        crs-arena board --kind genre --style
    """
    db = get_db(resolve_db(db_path))
    chosen = None if kind == "all" else kind
    view = board_view(db, style=style, kind=chosen, revealed=with_revealed)
    counts = ", ".join(f"{k} {n}" for k, n in (view.kinds or {}).items())
    click.echo(f"Votes per kind of request: {counts}")
    for line in (kind_line(view.fit), set_aside_line(view.fit)):
        if line:
            click.echo(line.replace("**", ""))
    title = "every kind" if chosen is None else chosen
    click.echo(f"Leaderboard ({view.fit.get('method', 'bradley-terry')}, 95% interval; {title}):")
    rated = [r for r in view.rows if r["rating"] is not None]
    if not rated:
        click.echo("  no ratings")
    for row in rated:
        overall = f"  overall rank {row['overall_rank']}" if chosen and row.get("overall_rank") is not None else ""
        click.echo(
            f"  {row['rank']:>2}  {row['system']:<22} {row['rating']:7.1f}  "
            f"[{row['ci_low']:.0f}, {row['ci_high']:.0f}]  battles {row['battles']}{overall}"
        )


@cli.command("import-crsarena-eval")
@click.argument("file", required=False, type=click.Path(path_type=Path))
@click.option("--catalog", "catalog_name", default="redial", show_default=True, help="Catalog titles are matched to.")
@click.option("--score/--no-score", default=True, show_default=True, help="Also score the dialogues with the proxy.")
@db_option
def import_eval_command(file: Path | None, catalog_name: str, score: bool, db_path: Path | None) -> None:
    """Import CRSArena-Eval's labelled dialogues (FILE default: <data dir>/crsarena/crs_arena_eval_dev.json): the
    Judge vs people panel then compares every judge with these people's labels, apart from the app's own. Idempotent.

    Example:

        python -m arena import-crsarena-eval ../shared/data/crsarena/crs_arena_eval_dev.json
    """
    from arena.crsarena_import import import_eval_labels

    try:
        report = import_eval_labels(get_db(resolve_db(db_path)), file, catalog_name=catalog_name, score=score)
    except ImportRefused as e:
        raise click.ClickException(str(e)) from None
    click.echo(report.summary())


@cli.command("export")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="JSONL file to write.")
@db_option
def export_command(out: Path, db_path: Path | None) -> None:
    """Export conversations, votes (without voter ids) and judgments as JSON lines, one "type" each.

    Example:

        python -m arena export --out arena.jsonl
    """
    counts = export_jsonl(get_db(resolve_db(db_path)), out)
    click.echo(f"wrote {out}: " + ", ".join(f"{n} {name}" for name, n in counts.items()))


@cli.command("export-dial")
@click.option("--out-dir", type=click.Path(file_okay=False, path_type=Path), required=True, help="Folder to write.")
@db_option
def export_dial_command(out_dir: Path, db_path: Path | None) -> None:
    """Export this app's chat and arena conversations and votes in CRSArena-Dial's layout (crs_arena_dial_app.json
    with each conversation's satisfied/frustrated ending, votes_app.csv), without session or voter ids.

    Example:

        python -m arena export-dial --out-dir data/dial
    """
    from arena.crsarena_import import export_dial

    counts = export_dial(get_db(resolve_db(db_path)), out_dir)
    click.echo(f"wrote {out_dir}: {counts['conversations']} conversation(s), {counts['votes']} vote(s)")


@cli.command("export-labels")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="JSON file to write.")
@click.option(
    "--scores-out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the judge's scores of the rated conversations as `evaluate --out` JSON lines, under the same "
    "conv_id, so `python -m evaluators meta --scores` pairs them with the labels.",
)
@click.option(
    "--scorer",
    "setup",
    default=None,
    help="With --scores-out: the judge setup (its label in the Judge vs people tab, or a scorer name; default: "
    "the first there).",
)
@db_option
def export_labels_command(out: Path, scores_out: Path | None, setup: str | None, db_path: Path | None) -> None:
    """Export people's ratings from the arena and the Chat tab in CRSArena-Eval's JSON layout (conv_id, dialogue,
    dial_level_aggregated: ratings averaged over raters, on CRSArena-Eval's scales), without rater ids.

    Example:

        python -m arena export-labels --out labels.json --scores-out scores.jsonl
        python -m evaluators meta --scores scores.jsonl --human labels.json
    """
    from arena.judge_agreement import judge_scores_rows
    from storage.human_labels import crsarena_eval_records

    db = get_db(resolve_db(db_path))
    records = list(crsarena_eval_records(db))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(records, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    click.echo(f"wrote {out}: {len(records)} rated conversation(s)")
    if scores_out is not None:
        try:
            rows = judge_scores_rows(db, records, setup)
        except LookupError as e:
            raise click.ClickException(str(e)) from None
        scores_out.parent.mkdir(parents=True, exist_ok=True)
        scores_out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        click.echo(f"wrote {scores_out}: {len(rows)} scored conversation(s)")


@cli.command("promote-uploads")
@click.option(
    "--system",
    "systems",
    multiple=True,
    help="Only this uploaded system (upload:<name>); repeat for several. Default: every upload.",
)
@db_option
def promote_command(systems: tuple[str, ...], db_path: Path | None) -> None:
    """Put uploaded conversations on the main leaderboard: the operator's deliberate import.

    Uploads from the Evaluate tab are anonymous and stay off the board; this makes them source
    'import' (their system ids keep the 'upload:' mark). Setting CRS_ARENA_LEADERBOARD_UPLOADS=1
    shows every upload instead, without changing the data.

    Example:

        python -m arena promote-uploads --system upload:my-crs
    """
    db = get_db(resolve_db(db_path))
    changed = promote_uploads(db, list(systems) or None)
    refresh_board(db)
    click.echo(f"{changed} uploaded conversation(s) now count on the main leaderboard")


if __name__ == "__main__":
    cli()
