"""Command line: ``python -m evaluators evaluate|meta|calibrate|simulate``.

Every command's help has an example; run ``python -m evaluators --help``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from tqdm import tqdm

from catalog.catalog import get_catalog
from crs_backends.command_line import CommandGroup, db_option, resolve_db
from evaluators.factors import FACTORS
from evaluators.judge.factor_judge import DEFAULT_MODE, MODES
from evaluators.judge.rubric import RUBRIC_NAMES
from evaluators.log_readers import FORMATS, LogFormatError, read_logs
from evaluators.reporting import calibration_text, correlation_text, result_row, validity_text
from evaluators.scorer_setup import SCORERS, auto_reason, build_setup
from evaluators.service import Judged, evaluate_many, select
from storage.db import get_db
from storage.jsonutil import JsonLineError, iter_json_lines

# options several commands take, defined once (``--db``: crs_backends.command_line)
scorer_option = click.option(
    "--scorer",
    type=click.Choice(SCORERS),
    default="auto",
    show_default=True,
    help="proxy: LLM-free factor proxies + overall calibrated on human labels; llm: the CoRE judge and "
    "debate; auto: llm when a capable model is configured, else proxy.",
)
debate_option = click.option(
    "--debate/--no-debate", default=True, show_default=True, help="With the LLM scorer: run the four-persona debate."
)


def choice_option(flag: str, choices: list[str], help_text: str):
    """An option with a fixed set of values, the first being the default (shown in --help)."""
    return click.option(flag, type=click.Choice(choices), default=choices[0], show_default=True, help=help_text)


votes_option = click.option(
    "--votes",
    "votes_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="Folder of CRSArena-Dial's votes_*.csv and crs_arena_dial_*.json (pairwise evidence; meta --validity "
    "defaults to --human's folder, calibrate uses labels only without it).",
)
label_catalog_option = click.option(
    "--catalog",
    "catalog_name",
    default="redial",
    show_default=True,
    help="Catalog CRSArena's titles are matched to (a dataset folder name under the data directory).",
)


@click.group(cls=CommandGroup)
def cli() -> None:
    """CoRE evaluation of conversational recommender systems."""


@cli.command()
@click.argument("logs", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["auto", *FORMATS]),
    default="auto",
    show_default=True,
    help="Log format; auto detects it.",
)
@scorer_option
@click.option(
    "--embeddings", is_flag=True, help="Proxy scorer: MiniLM sentence similarity (needs a calibration fitted with it)."
)
@click.option(
    "--calibration",
    "proxy_calibration",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Proxy scorer: a calibration file other than the shipped one (e.g. a refit from `calibrate`); its "
    "evaluations form their own judge setup on the board.",
)
@click.option(
    "--judge-model",
    "judge_models",
    multiple=True,
    help="Judge model name on the judge role's endpoint ('embedded' for the local model). "
    "Repeat to average several judges. Default: the judge role's configured model.",
)
@click.option(
    "--mode",
    type=click.Choice(MODES),
    default=DEFAULT_MODE,
    show_default=True,
    help="reasoned+probability: CoRE's reasons, then G-Eval's reading, the expectation over 0-4 at the rating "
    "token (the written rating where the endpoint gives no log-probabilities); reasoned: CoRE's method, the "
    "written rating; probability: the fast rating-only option, no reasons for the debate.",
)
@debate_option
@click.option("--debate-model", default=None, help="One model for all four personas (default: each debate role's own).")
@click.option("--rounds", default=4, show_default=True, help="Most debate rounds.")
@click.option("--tolerance", default=0.0, show_default=True, help="Consensus when the scores differ by at most this.")
@click.option("--sequential", is_flag=True, help="Personas speak one by one within a round.")
@choice_option(
    "--debate-reading",
    ["own", "own+scores", "all"],
    "own: each persona reads its own factors' scores and reasons only (CoRE §4.2); own+scores: also the "
    "other factors' scores; all: every factor with its reasons.",
)
@choice_option(
    "--rubric",
    list(RUBRIC_NAMES),
    "core: the levels of CoRE's appendix A (appropriateness 4 or 0, no popularity ranks shown); "
    "core-extended: this project's earlier rubric (intermediate levels, popularity ranks, named reasons).",
)
@click.option("--persuasiveness", is_flag=True, help="Also ask the simulator role for iEvaLM persuasiveness.")
@click.option(
    "--catalog",
    "catalog_name",
    default="bundled",
    show_default=True,
    help="Catalog for metrics and item details: bundled, or a dataset folder name (redial, opendialkg).",
)
@click.option(
    "--limit", type=int, default=None, help="Evaluate only the first N conversations that have a system turn."
)
@click.option("--workers", default=1, show_default=True, help="Conversations evaluated at the same time.")
@click.option("--concurrency", default=6, show_default=True, help="Factor calls in flight per conversation.")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Write one JSON line per conversation.")
@db_option
@click.option("--force", is_flag=True, help="Start new evaluations instead of reusing stored ones.")
def evaluate(
    logs,
    fmt,
    scorer,
    embeddings,
    proxy_calibration,
    judge_models,
    mode,
    debate,
    debate_model,
    rounds,
    tolerance,
    sequential,
    debate_reading,
    rubric,
    persuasiveness,
    catalog_name,
    limit,
    workers,
    concurrency,
    out,
    db_path,
    force,
):
    """Score conversations from LOGS on the 12 CoRE factors (LLM judge and debate, or the LLM-free proxy scorer).

    Example:

        python -m evaluators evaluate ../shared/data/crsarena/crs_arena_eval_dev.json --catalog redial --out dev.jsonl

    Results are stored in SQLite as they arrive; running the same command again
    reuses finished evaluations and fills the gaps of unfinished ones.
    """
    db_path = resolve_db(db_path)
    try:
        read = read_logs(logs, fmt, get_catalog(catalog_name))
    except (LogFormatError, FileNotFoundError, ValueError) as e:
        raise click.ClickException(str(e)) from None
    conversations, skipped = select(read.conversations, limit=limit)
    for note in [*(f"{s.where}: {s.reason}" for s in read.skipped), *skipped]:
        click.echo(f"skipped {note}", err=True)
    # the operator's import: system ids kept (checked), source 'import'; a taken id gets a new one
    from storage.uploads import UploadRefused, store

    try:
        stored = store(get_db(db_path), conversations, upload=False)
    except UploadRefused as e:
        raise click.ClickException(str(e)) from None
    for note in stored.notes():
        click.echo(note, err=True)
    renamed = dict(stored.renamed)
    read.labels.update({renamed[k]: v for k, v in list(read.labels.items()) if k in renamed})
    conversations = stored.conversations
    try:
        setup = build_setup(
            db_path=db_path,
            scorer=scorer,
            judge_models=judge_models,
            mode=mode,
            debate=debate,
            debate_model=debate_model,
            rounds=rounds,
            tolerance=tolerance,
            sequential=sequential,
            debate_reading=debate_reading,
            rubric=rubric,
            persuasiveness=persuasiveness,
            catalog_name=catalog_name,
            concurrency=concurrency,
            embeddings=embeddings,
            proxy_calibration=proxy_calibration,
        )
    except (FileNotFoundError, ValueError) as e:
        raise click.ClickException(str(e)) from None
    for line in setup.scorer.notices(auto_reason(judge_models) if scorer == "auto" else ""):
        click.echo(line, err=True)
    sink = open(out, "w", encoding="utf-8") if out else None

    def done(judged: Judged) -> None:
        if judged.evaluation is None:
            click.echo(f"failed {judged.conversation.id}: {judged.error}", err=True)
        elif sink:
            row = result_row(judged.conversation, judged.evaluation, read.labels.get(judged.conversation.id))
            sink.write(json.dumps(row, ensure_ascii=False) + "\n")
            sink.flush()

    try:
        with tqdm(total=len(conversations), unit="conv", file=sys.stderr, disable=None) as bar:
            batch = evaluate_many(
                conversations,
                setup,
                db_path=db_path,
                workers=workers,
                force=force,
                on_result=done,
                progress=lambda n, total: bar.update(n - bar.n),
            )
    finally:
        if sink:
            sink.close()
    results, failures = batch.results, batch.failures
    click.echo(
        f"evaluated {len(results)} conversation(s): {batch.complete} complete, "
        f"{len(results) - batch.complete} with gaps (run again to fill them), "
        f"{len(skipped) + len(read.skipped)} skipped, {len(failures)} failed" + (f"; results in {out}" if out else "")
    )
    if failures:
        raise SystemExit(1)


@cli.command()
@click.option(
    "--scores",
    "scores_path",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    help="JSONL written by `evaluate --out` (required unless --validity; with it, the LLM judge's results).",
)
@click.option(
    "--human",
    "human_path",
    type=click.Path(exists=True, path_type=Path),
    required=True,
    help="CRSArena-Eval JSON, or a CSV with columns id,value.",
)
@click.option("--aspect", default="dialogue_overall", show_default=True, help="Human aspect (CRSArena-Eval).")
@click.option(
    "--score",
    "score_key",
    default="overall",
    show_default=True,
    help="What to correlate: overall, factor_mean, a factor id, or metric:<key>.",
)
@click.option("--boot", default=1000, show_default=True, help="Bootstrap resamples.")
@click.option(
    "--out-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Write correlations.csv, factor_matrix.csv and factor_matrix.html here.",
)
@click.option(
    "--validity",
    is_flag=True,
    help="Print the proxy scorer's validity table (cross-validated) next to --scores and FACE's published "
    "figures; --human must be CRSArena-Eval.",
)
@votes_option
@label_catalog_option
def meta(scores_path, human_path, aspect, score_key, boot, out_dir, validity, votes_dir, catalog_name):
    """Correlate automatic scores with human labels (dialogue and system level) and the factors with each other.

    Examples:

        python -m evaluators meta --scores dev.jsonl \
            --human ../shared/data/crsarena/crs_arena_eval_dev.json --aspect dialogue_overall

        python -m evaluators meta --validity --scores dev.jsonl --human ../shared/data/crsarena/crs_arena_eval_dev.json
    """
    import pandas as pd

    from evaluators.meta.correlation import correlate, crsarena_eval_labels, factor_matrix, read_csv_labels

    if scores_path is None and not validity:
        raise click.ClickException("--scores is required (or use --validity)")
    try:
        rows = [row for _line, row in iter_json_lines(scores_path)] if scores_path else []
    except JsonLineError as e:
        raise click.ClickException(str(e)) from None
    if validity:
        _validity(human_path, votes_dir or human_path.parent, catalog_name, aspect, rows, boot, out_dir)
        return
    if not rows:
        raise click.ClickException(f"{scores_path} has no results")
    try:
        human = read_csv_labels(human_path) if human_path.suffix == ".csv" else crsarena_eval_labels(human_path, aspect)
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    scores = {r["conversation_id"]: _pick(r, score_key) for r in rows}
    systems = {r["conversation_id"]: r["system_id"] for r in rows}
    result = correlate(scores, human, systems=systems, n_boot=boot)
    table = pd.DataFrame([corr.as_row() for corr in result.values()])
    matrix, figure = factor_matrix([r["factors"] for r in rows])
    scorers = sorted({r["scorer"] for r in rows})
    click.echo(correlation_text(table, matrix, score_key=score_key, scorers=scorers, aspect=aspect))
    if out_dir:
        out_dir.mkdir(parents=True, exist_ok=True)
        table.to_csv(out_dir / "correlations.csv", index=False)
        matrix.to_csv(out_dir / "factor_matrix.csv")
        figure.write_html(out_dir / "factor_matrix.html", include_plotlyjs=True)
        click.echo(f"\nwrote {out_dir}/correlations.csv, factor_matrix.csv, factor_matrix.html")


def _validity(human_path, votes_dir, catalog_name, aspect, llm_rows, boot, out_dir) -> None:
    """``meta --validity``: the proxy's cross-validated validity next to the LLM judge and FACE."""
    import pandas as pd

    from evaluators.meta.validity import validity_report
    from evaluators.proxy.calibration import N_SPLITS, load_training_data

    if aspect != "dialogue_overall":
        raise click.ClickException("--validity correlates with dialogue_overall, the label the proxy is calibrated on")
    try:
        data = load_training_data(human_path, votes_dir, get_catalog(catalog_name))
    except (LogFormatError, FileNotFoundError, ValueError) as e:
        raise click.ClickException(str(e)) from None
    table, votes = validity_report(data, llm_rows=llm_rows, n_boot=boot)
    frame = pd.DataFrame(table)
    click.echo(
        validity_text(frame, votes, data, source=human_path.name, boot=boot, folds=N_SPLITS, llm_rows=len(llm_rows))
    )
    if out_dir:
        out_dir.mkdir(parents=True, exist_ok=True)
        frame.to_csv(out_dir / "validity.csv", index=False)
        click.echo(f"\nwrote {out_dir}/validity.csv")


@cli.command("calibrate")
@click.option(
    "--eval",
    "eval_path",
    type=click.Path(exists=True, path_type=Path),
    required=True,
    help="CRSArena-Eval JSON with dialogue_overall labels.",
)
@votes_option
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="Calibration file to write (default: beside the shipped one, assets/calibration/"
    "proxy_<version>[_minilm].refit.json, which git ignores).",
)
@click.option(
    "--replace",
    is_flag=True,
    help="Write over the shipped calibration (the file the app scores with); without it, never.",
)
@label_catalog_option
@click.option("--seed", default=0, show_default=True, help="Seed of the folds and the bootstrap.")
@click.option("--boot", default=1000, show_default=True, help="Bootstrap resamples for the intervals.")
@click.option("--embeddings", is_flag=True, help="Fit on proxies with MiniLM sentence similarity.")
@click.option(
    "--labels",
    "label_paths",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="More labelled dialogues in CRSArena-Eval's layout, e.g. people's ratings from "
    "`python -m arena export-labels`; repeat for several. The cross-validated figures are printed without them, "
    "then with them.",
)
def calibrate_command(eval_path, votes_dir, out, replace, catalog_name, seed, boot, embeddings, label_paths):
    """Refit the proxy scorer's overall model and print its cross-validated results.

    The shipped calibration is written over only with --replace; a refit goes to its own file, and conversations
    scored with it (`evaluate --scorer proxy --calibration FILE`) form their own judge setup on the board.

    Examples:

        python -m evaluators calibrate --eval ../shared/data/crsarena/crs_arena_eval_dev.json \\
            --votes ../shared/data/crsarena

        python -m evaluators calibrate --eval ../shared/data/crsarena/crs_arena_eval_dev.json \\
            --votes ../shared/data/crsarena --labels labels.json
    """
    from evaluators.proxy.calibration import calibrate, load_training_data, with_labels
    from evaluators.proxy.scorer import default_path
    from evaluators.proxy.similarity import LEXICAL, MINILM, load_embedder

    shipped = [default_path(similarity=s) for s in (LEXICAL, MINILM)]
    if out is not None and not replace and out.resolve() in {p.resolve() for p in shipped}:
        raise click.ClickException(f"{out} is a shipped calibration the app scores with; --replace writes over it")
    embedder = None
    if embeddings:
        embedder, note = load_embedder()
        click.echo(note, err=True)
    catalog = get_catalog(catalog_name)
    try:
        data = load_training_data(eval_path, votes_dir, catalog, embedder=embedder)
        extended = with_labels(data, label_paths, catalog, embedder=embedder) if label_paths else data
    except (LogFormatError, FileNotFoundError, ValueError) as e:
        raise click.ClickException(str(e)) from None
    if not len(data.y):
        raise click.ClickException(f"{eval_path} has no dialogue with a dialogue_overall label")
    sources = {"eval": eval_path.name, "votes": votes_dir.name if votes_dir else None, "catalog": catalog_name}
    if label_paths:
        before = calibrate(data, seed=seed, n_boot=boot, sources=sources)
        click.echo(f"BEFORE: {eval_path.name} alone")
        click.echo(calibration_text(before, data))
        click.echo(
            f"\nAFTER: with {len(extended.y) - len(data.y)} labelled dialogue(s) from "
            + ", ".join(p.name for p in label_paths)
        )
        sources = {**sources, "labels": [p.name for p in label_paths]}
    result = calibrate(extended, seed=seed, n_boot=boot, sources=sources)
    click.echo(calibration_text(result, extended))
    shipped_here = default_path(similarity=extended.similarity)
    path = result.save(out or (shipped_here if replace else shipped_here.with_suffix(".refit.json")))
    click.echo(f"wrote {path} (fingerprint {result.fingerprint})")
    if not replace:
        click.echo(f"score with it: python -m evaluators evaluate LOGS --scorer proxy --calibration {path}")


@cli.command("simulate")
@click.option(
    "--systems", required=True, help="Comma-separated system ids from the registry, e.g. kbrd,barcor,unicrs,chatcrs."
)
@click.option(
    "--dataset",
    default="redial",
    show_default=True,
    help="redial or opendialkg (read from <data dir>/<name>_eval), a folder in that layout, or a .jsonl file.",
)
@click.option("--split", default="test", show_default=True, help="Which <split>_data_processed.jsonl to read.")
@click.option(
    "--n",
    "n",
    type=int,
    default=20,
    show_default=True,
    help="Records to simulate (each with every system); fewer when fewer usable records exist.",
)
@click.option(
    "--protocol",
    type=click.Choice(["core", "free", "attr"]),
    default="core",
    show_default=True,
    help="core: 3-5 turns, 'tell me more' on an early hit; free: iEvaLM free-form, stop at the first hit; "
    "attr: iEvaLM attribute questions.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Record order, personas and model seeds.")
@click.option("--hit-k", type=int, default=50, show_default=True, help="A hit is a target within the top k of a list.")
@click.option("--max-turns", type=int, default=None, help="Most system turns (default: the protocol's 5).")
@click.option(
    "--personas", is_flag=True, help="CONCEPT emotion x age personas (one per record, the same for all systems)."
)
@click.option(
    "--reliability",
    is_flag=True,
    help="CONCEPT reliability: send the first request paraphrased too and measure the lists' overlap.",
)
@click.option(
    "--persuasiveness",
    type=click.Choice(["auto", "probability", "reasoned", "off"]),
    default="auto",
    show_default=True,
    help="After each dialogue the simulated user asks the system to explain its last recommendation and "
    "scores the explanation 0-2 (iEvaLM). auto: probability under --protocol free (as iEvaLM), off otherwise.",
)
@choice_option(
    "--persuasiveness-variant",
    ["auto", "shown", "ievalm_released"],
    "What the persuasiveness judge reads of the lists: ievalm_released (iEvaLM's released script: the top 50 "
    "before the reply of the turn it stopped at), shown (the items each reply showed); auto: ievalm_released "
    "under --protocol free, shown otherwise.",
)
@choice_option(
    "--seeker",
    ["ievalm", "described"],
    "ievalm: the simulated user is told its targets' titles, reads the whole dialogue and has a sentence "
    "naming a target dropped (iEvaLM C.3; CoRE §6.4); described: it knows them by description only and a "
    "leaked title is regenerated, then redacted (this project's leak-safe variant).",
)
@click.option("--temperature", type=float, default=0.0, show_default=True, help="The simulated user's temperature.")
@click.option("--concurrency", type=int, default=4, show_default=True, help="Dialogues in flight at once.")
@click.option(
    "--evaluate/--no-evaluate",
    default=True,
    show_default=True,
    help="Score the finished dialogues (CoRE factors and debate, or the proxy; metrics).",
)
@scorer_option
@debate_option
@click.option("--retry-failed", is_flag=True, help="Also redo dialogues whose system failed in an earlier run.")
@click.option(
    "--run-id", default=None, help="Name of the run (default: derived from the settings, so a rerun resumes)."
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Report folder (default: simulations/<run id> beside the database).",
)
@db_option
def simulate(
    systems,
    dataset,
    split,
    n,
    protocol,
    seed,
    hit_k,
    max_turns,
    personas,
    reliability,
    persuasiveness,
    persuasiveness_variant,
    seeker,
    temperature,
    concurrency,
    evaluate,
    scorer,
    debate,
    retry_failed,
    run_id,
    out_dir,
    db_path,
):
    """Benchmark systems with an LLM user simulator on dataset records, then evaluate and report.

    Example:

        python -m evaluators simulate --systems kbrd,barcor,unicrs,chatcrs --dataset redial --n 100 \
            --protocol core --seed 0

    Every dialogue is stored (SQLite and the report's conversations.jsonl). Running the same command
    again skips finished dialogues and completes the rest; the leaderboard shows the results.
    """
    from evaluators.simulator import RecordError, SimulationConfig, SystemNotReady, UnknownSystem, run_simulation
    from evaluators.simulator.report import NOT_MEASURED, TERMINAL_COLUMNS

    db_path = resolve_db(db_path)
    try:
        config = SimulationConfig(
            systems=systems.split(","),
            dataset=dataset,
            split=split,
            n=n,
            protocol=protocol,
            seed=seed,
            hit_k=hit_k,
            max_turns=max_turns,
            personas=personas,
            reliability=reliability,
            persuasiveness=persuasiveness,
            persuasiveness_variant=persuasiveness_variant,
            seeker=seeker,
            temperature=temperature,
            concurrency=concurrency,
            evaluate=evaluate,
            scorer=scorer,
            debate=debate,
            retry_failed=retry_failed,
            run_id=run_id,
            out_dir=out_dir,
        )
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    bars: dict[str, tqdm] = {}

    def progress(p) -> None:
        phase = "evaluate" if p.message.startswith("evaluated") else "simulate"
        bar = bars.get(phase)
        if bar is None:
            bar = bars[phase] = tqdm(total=p.total, unit="dialogue", desc=phase, file=sys.stderr, disable=None)
        bar.n = p.done
        bar.set_postfix_str(p.message[-60:], refresh=True)

    try:
        result = run_simulation(config, db_path=db_path, progress=progress)
    except (UnknownSystem, SystemNotReady, RecordError, FileNotFoundError) as e:
        raise click.ClickException(str(e)) from None
    finally:
        for bar in bars.values():
            bar.close()
    for note in result.report["notes"]:
        click.echo(note, err=True)
    summary = result.report["summary"]
    click.echo(summary[list(TERMINAL_COLUMNS)].round(3).to_string(index=False, na_rep=NOT_MEASURED))
    click.echo(result.summary_line())
    click.echo(f"report: {result.out_dir / 'report.html'} (and summary.csv, dialogues.csv, conversations.jsonl)")


@cli.command("resume")
@db_option
@click.option("--limit", type=int, default=None, help="Resume at most N evaluations.")
@click.option(
    "--include-running",
    is_flag=True,
    help="First mark evaluations left 'running' as interrupted (only when nothing else is judging: "
    "the app does this itself at start).",
)
def resume_command(db_path, limit, include_running):
    """Finish evaluations a crash left unfinished: stored scores are kept, only the gaps are judged.

    Evaluations still 'running' when the app starts are marked 'interrupted'; --include-running marks
    them here too (after a command-line run was killed, with no app running).

    Example:

        python -m evaluators resume
    """
    from evaluators.resume import interrupted, resume_interrupted
    from storage.evaluations import mark_interrupted

    db_path = resolve_db(db_path)
    marked = mark_interrupted(get_db(db_path)) if include_running else 0
    if marked:
        click.echo(f"marked {marked} evaluation(s) left running as interrupted", err=True)
    waiting = interrupted(db_path)
    if not waiting:
        click.echo("no interrupted evaluation")
        return
    with tqdm(total=min(len(waiting), limit or len(waiting)), unit="eval", file=sys.stderr, disable=None) as bar:
        report = resume_interrupted(db_path, limit=limit, progress=lambda n, total: bar.update(1))
    click.echo(report.summary())


def _pick(row: dict, key: str):
    if key in ("overall", "factor_mean"):
        return row.get(key)
    if key.startswith("metric:"):
        return (row.get("metrics") or {}).get(key.split(":", 1)[1])
    if key in FACTORS:
        return (row.get("factors") or {}).get(key)
    raise click.ClickException(f"unknown --score {key!r}: use overall, factor_mean, a factor id or metric:<key>")


if __name__ == "__main__":
    cli()
