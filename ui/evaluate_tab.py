"""The Evaluate tab: upload conversation logs, judge them all, read and download the results.

The same batch service as ``python -m evaluators evaluate`` (:func:`evaluators.service.evaluate_many`):
a repeated conversation id is judged once, a conversation that fails is listed and the others go on,
every result is stored as it is computed, and evaluating the same logs again with the same settings
reuses what is stored. Uploads are anonymous: their conversations are stored in
their own namespace (:mod:`storage.uploads`: system ``upload:<name>``, a taken id gets
a new one) and stay off the main leaderboard. Bulk judging has its own queue
("judge_bulk"), so a huge upload cannot hold the Chat tab's live judging.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gradio as gr

from catalog.catalog import get_catalog
from evaluators.judge.factor_judge import MODES
from evaluators.log_readers import FORMATS, LIMITS, LogFormatError, read_logs
from evaluators.reporting import (
    RESULT_COLUMNS,
    SCORER_CHOICES,
    factor_means_figure,
    overall_figure,
    result_table,
    scorer_label,
    write_reports,
)
from evaluators.resume import interrupted, resume_interrupted
from evaluators.scorer_setup import build_setup, default_mode
from evaluators.service import evaluate_many, select
from llm_clients.types import LLMError
from ui.render import safe_text
from ui.services import Services, UploadRefused, clean_text

WORKERS = 2  # conversations judged at the same time (each runs its factor calls concurrently too)
MAX_FILES = 20  # files per upload
log = logging.getLogger(__name__)

FORMAT_HELP = (
    "Formats: **our JSONL** (one conversation per line, as exported by this app), **iEvaLM** chat logs "
    "(one dialogue per JSON file; upload several), **CRSArena-Dial** and **CRSArena-Eval** JSON. "
    "`auto` tells them apart."
)


def build(services: Services) -> None:
    gr.Markdown(f"Judge many conversations at once. {FORMAT_HELP}")
    with gr.Row():
        uploads = gr.File(
            label="Conversation logs",
            file_count="multiple",
            file_types=[".jsonl", ".json"],
            scale=3,
            elem_id="evaluate-upload",
        )
        with gr.Column(scale=2):
            fmt = gr.Dropdown(["auto", *FORMATS], value="auto", label="Format")
            scorer = gr.Dropdown(SCORER_CHOICES, value="auto", label="Scorer")
            mode = gr.Dropdown(list(MODES), value=default_mode(), label="Judge mode")
            debate = gr.Checkbox(label="Run the four-persona debate", value=True)
            rounds = gr.Slider(1, 4, value=4, step=1, label="Most debate rounds")
            limit = gr.Number(value=0, precision=0, minimum=0, label="Evaluate at most (0: all)")
            run = gr.Button("Evaluate", variant="primary", elem_id="evaluate-run")
    status = gr.Markdown("", elem_id="evaluate-status")
    table = gr.Dataframe(
        headers=RESULT_COLUMNS, label="Results", interactive=False, wrap=True, elem_id="evaluate-results"
    )
    with gr.Row():
        bars = gr.Plot(label="Factor means per system")
        overall = gr.Plot(label="Overall scores")
    downloads = gr.File(
        label="Download the results (CSV, JSONL)",
        file_count="multiple",
        interactive=False,
        height=120,
        elem_id="evaluate-downloads",
    )
    with gr.Accordion("Interrupted evaluations", open=bool(services.interrupted)):
        interrupted_status = gr.Markdown(_interrupted_line(services), elem_id="evaluate-interrupted")
        resume = gr.Button("Resume interrupted evaluations", elem_id="evaluate-resume")

    def on_evaluate(
        files, log_format, judge_mode, with_debate, max_rounds, at_most, scorer_choice="auto", progress=gr.Progress()
    ):
        return evaluate_upload(
            services, files, log_format, judge_mode, with_debate, max_rounds, at_most, scorer_choice, progress
        )

    def on_resume(progress=gr.Progress()):
        return resume_evaluations(services, progress)

    run.click(
        on_evaluate,
        inputs=[uploads, fmt, mode, debate, rounds, limit, scorer],
        outputs=[status, table, bars, overall, downloads],
        api_name="evaluate",
        concurrency_id="judge_bulk",  # not the Chat tab's "judge_live" queue
        concurrency_limit=1,
    )
    resume.click(
        on_resume,
        outputs=[interrupted_status],
        api_name="resume_interrupted",
        concurrency_id="judge_bulk",
        concurrency_limit=1,
    )
    gr.on(triggers=None, fn=lambda: _interrupted_line(services), outputs=[interrupted_status], api_name="interrupted")


def evaluate_upload(
    services: Services,
    files,
    log_format: str,
    judge_mode: str,
    with_debate: bool,
    max_rounds,
    at_most,
    scorer_choice: str = "auto",
    progress: Callable[..., Any] | None = None,
) -> tuple:
    """Read every upload, judge each conversation, and return (status, table, factor bars, overall
    histogram, report files).

    A file that cannot be read stops the run before anything is stored or judged, with a message
    naming the file and the place; what is on screen stays (``gr.skip()``). A conversation whose
    evaluation fails is listed with the reason and the others are judged. No Python error text is shown.
    """
    try:
        return _evaluate_upload(
            services, files, log_format, judge_mode, with_debate, max_rounds, at_most, scorer_choice, progress
        )
    except Exception:
        log.exception("evaluating an upload failed")
        return (
            "⚠️ Something went wrong on our side while evaluating. What finished is saved; "
            "evaluate again with the same settings to fill the gaps.",
            *(gr.skip(),) * 4,
        )


def _evaluate_upload(
    services, files, log_format, judge_mode, with_debate, max_rounds, at_most, scorer_choice, progress
):
    keep = (gr.skip(),) * 4
    if not files:
        return ("Upload one or more log files first.", *keep)
    if not isinstance(files, list):
        files = [files]
    if len(files) > MAX_FILES:
        return (f"⚠️ At most {MAX_FILES} files per upload (you sent {len(files)}). Nothing was evaluated.", *keep)
    if log_format not in ("auto", *FORMATS):
        return (f"⚠️ Unknown format: choose one of auto, {', '.join(FORMATS)}. Nothing was evaluated.", *keep)
    conversations, labels, skipped = [], {}, []
    for file in files:
        path = Path(file if isinstance(file, str) else getattr(file, "path", None) or str(file))
        name = clean_text(path.name)
        try:
            read = read_logs(path, log_format, get_catalog())
        except LogFormatError as e:
            return (_unreadable(name, f"{clean_text(e.where)}: expected {clean_text(e.expected)}"), *keep)
        except UnicodeDecodeError:
            return (_unreadable(name, "the file is not UTF-8 text"), *keep)
        except (ValueError, FileNotFoundError, OSError) as e:
            reason = (
                clean_text(str(e)).replace(clean_text(str(path)), name)
                if isinstance(e, ValueError)
                else "the file could not be opened"
            )
            return (_unreadable(name, reason), *keep)
        conversations += read.conversations
        labels.update(read.labels)
        skipped += [f"{clean_text(Path(s.where).name)}: {s.reason}" for s in read.skipped]
    if len(conversations) > LIMITS.conversations:
        return (
            f"⚠️ At most {LIMITS.conversations:,} conversations per upload (these files hold "
            f"{len(conversations):,}). Nothing was evaluated.",
            *keep,
        )
    judgeable, left_out = select(conversations, limit=int(at_most or 0))
    skipped += left_out
    if not judgeable:
        return ("No conversation with a system turn to judge." + _skipped_note(skipped), *keep)
    try:
        stored = services.store_upload(judgeable)
    except UploadRefused as e:
        return (f"⚠️ **Upload refused**: {safe_text(str(e))}. Nothing was stored or evaluated.", *keep)
    labels = {
        new: labels[old]
        for old, new in zip((c.id for c in judgeable), (c.id for c in stored.conversations))
        if old in labels
    }
    try:
        setup = build_setup(
            db_path=services.db_path,
            scorer=scorer_choice or "auto",
            mode=judge_mode,
            debate=bool(with_debate),
            rounds=int(max_rounds),
        )
    except (LLMError, ValueError) as e:
        return (f"⚠️ The judge could not be set up: {safe_text(str(e))}", *keep)

    def step(n: int, total: int) -> None:
        if progress is not None:
            progress((n, total), desc="Judging", unit="conversations")

    batch = evaluate_many(stored.conversations, setup, db_path=services.db_path, workers=WORKERS, progress=step)
    results = batch.results
    rows = result_table(results)
    files_out = None
    if results:
        report_dir = tempfile.mkdtemp(prefix="crs-arena-report-")
        files_out = [str(p) for p in write_reports(results, report_dir, labels)]
    summary = (
        f"Evaluated **{len(results)}** conversation(s): {batch.complete} complete, "
        f"{len(results) - batch.complete} with gaps (evaluate again with the same settings to fill them). "
        f"**Judge:** {safe_text(scorer_label(setup))}"
    )
    if batch.failures:
        summary += "\n\n⚠️ Failed: " + "; ".join(safe_text(f"{c.id}: {why}") for c, why in batch.failures)
    notes = stored.notes()
    if notes:
        summary += "\n\n" + " ".join(safe_text(n) + "." for n in notes)
    summary += "\n\nUploads are stored as systems `upload:<name>` and do not appear on the main leaderboard."
    summary += _skipped_note(skipped)
    return summary, rows, factor_means_figure(rows), overall_figure(rows), files_out


def resume_evaluations(services: Services, progress: Callable[..., Any] | None = None) -> str:
    """Finish the evaluations a crash cut off, filling only their gaps; returns the status line."""
    try:
        waiting = len(interrupted(services.db_path))
        if not waiting:
            return "No interrupted evaluation is waiting."

        def step(n: int, total: int) -> None:
            if progress is not None:
                progress((n, total), desc="Resuming")

        report = resume_interrupted(services.db_path, progress=step)
    except Exception:
        log.exception("resuming interrupted evaluations failed")
        return "⚠️ Resuming failed on our side (it is logged). What finished is saved; try again."
    services.board_changed()
    return safe_text(report.summary()) + ". " + _interrupted_line(services)


def _interrupted_line(services: Services) -> str:
    """How many evaluations a crash left unfinished (shown as ``interrupted``)."""
    rows = interrupted(services.db_path)
    if not rows:
        return "No interrupted evaluations."
    shown = ", ".join(
        f"`{safe_text(r['id'][:12])}` ({safe_text(r['system_id'])}, {r['scored']}/12 factors)" for r in rows[:5]
    )
    more = f" and {len(rows) - 5} more" if len(rows) > 5 else ""
    return (
        f"**{len(rows)} evaluation(s) interrupted** (the app stopped while judging): {shown}{more}. "
        "Resume them here or with `python -m evaluators resume`; stored scores are kept and only the gaps "
        "are judged."
    )


def _unreadable(name: str, reason: str) -> str:
    gr.Warning(f"Could not read {name}")
    return (
        f"⚠️ **Could not read `{safe_text(name)}`**: {safe_text(reason)}.\n\n"
        "Nothing was evaluated; fix the file (or choose its format) and upload it again."
    )


def _skipped_note(skipped: list[str]) -> str:
    if not skipped:
        return ""
    shown = "; ".join(safe_text(s) for s in skipped[:10])
    more = f" and {len(skipped) - 10} more" if len(skipped) > 10 else ""
    return f"\n\nSkipped {len(skipped)} record(s): {shown}{more}."
