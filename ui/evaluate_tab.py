"""The Evaluate tab: upload conversation logs, judge them all, read and download the results.

The same pipeline as ``python -m evaluators evaluate``: every result is stored
as it is computed, and evaluating the same logs again with the same settings
reuses what is stored.
"""

from __future__ import annotations

import tempfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import gradio as gr

from catalog.catalog import get_catalog
from evaluators.adapters import FORMATS, LogFormatError, read_logs
from evaluators.factor_judge import MODES
from evaluators.pipeline import evaluate_conversation
from evaluators.reporting import (
    SCORER_CHOICES,
    RESULT_COLUMNS,
    factor_means_figure,
    overall_figure,
    result_table,
    scorer_label,
    write_reports,
)
from evaluators.setup import build_setup
from llm.types import LLMError
from ui.render import safe_text
from ui.services import Services

WORKERS = 2  # conversations judged at the same time (each runs its factor calls concurrently too)

FORMAT_HELP = (
    "Formats: **our JSONL** (one conversation per line, as exported by this app), **iEvaLM** chat logs "
    "(one dialogue per JSON file; upload several), **CRSArena-Dial** and **CRSArena-Eval** JSON. "
    "`auto` tells them apart."
)


def build(services: Services) -> None:
    gr.Markdown(f"Judge many conversations at once. {FORMAT_HELP}")
    with gr.Row():
        uploads = gr.File(label="Conversation logs", file_count="multiple", file_types=[".jsonl", ".json"], scale=3,
                          elem_id="evaluate-upload")
        with gr.Column(scale=2):
            fmt = gr.Dropdown(["auto", *FORMATS], value="auto", label="Format")
            scorer = gr.Dropdown(SCORER_CHOICES, value="auto", label="Scorer")
            mode = gr.Dropdown(list(MODES), value="probability", label="Judge mode")
            debate = gr.Checkbox(label="Run the four-persona debate", value=True)
            rounds = gr.Slider(1, 4, value=4, step=1, label="Most debate rounds")
            limit = gr.Number(value=0, precision=0, minimum=0, label="Evaluate at most (0: all)")
            run = gr.Button("Evaluate", variant="primary", elem_id="evaluate-run")
    status = gr.Markdown("", elem_id="evaluate-status")
    table = gr.Dataframe(headers=RESULT_COLUMNS, label="Results", interactive=False, wrap=True,
                         elem_id="evaluate-results")
    with gr.Row():
        bars = gr.Plot(label="Factor means per system")
        overall = gr.Plot(label="Overall scores")
    downloads = gr.File(label="Download the results (CSV, JSONL)", file_count="multiple", interactive=False,
                        height=120, elem_id="evaluate-downloads")

    def on_evaluate(files, log_format, judge_mode, with_debate, max_rounds, at_most, scorer_choice="auto",
                    progress=gr.Progress()):
        """Read every upload, judge each conversation, and return the table, plots and report files.

        A file that cannot be read stops the run before anything is judged, with a
        message naming the file and the place; what is on screen stays.
        """
        keep = (gr.skip(),) * 4
        if not files:
            return ("Upload one or more log files first.", *keep)
        conversations, labels, skipped = [], {}, []
        for file in files:
            path = Path(file)
            try:
                read = read_logs(path, log_format, get_catalog())
            except LogFormatError as e:
                return (_unreadable(path.name, f"{e.where}: expected {e.expected}"), *keep)
            except UnicodeDecodeError:
                return (_unreadable(path.name, "the file is not UTF-8 text"), *keep)
            except (ValueError, FileNotFoundError) as e:
                return (_unreadable(path.name, str(e).replace(str(path), path.name)), *keep)
            conversations += read.conversations
            labels.update(read.labels)
            skipped += [f"{Path(s.where).name}: {s.reason}" for s in read.skipped]
        judgeable, seen = [], set()
        for c in conversations:
            if c.id in seen:
                skipped.append(f"{c.id}: uploaded more than once (judged once)")
            elif not any(t.role == "system" for t in c.turns):
                skipped.append(f"{c.id}: no system turn to judge")
            else:
                judgeable.append(c)
            seen.add(c.id)
        if at_most:
            judgeable = judgeable[: int(at_most)]
        if not judgeable:
            return ("No conversation with a system turn to judge." + _skipped_note(skipped), *keep)
        try:
            setup = build_setup(db_path=services.db_path, scorer=scorer_choice or "auto", mode=judge_mode,
                                debate=bool(with_debate), rounds=int(max_rounds))
        except (LLMError, ValueError) as e:
            return (f"⚠️ The judge could not be set up: {safe_text(str(e))}", *keep)

        results, failures = [], []
        progress((0, len(judgeable)), desc="Judging", unit="conversations")
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            futures = {pool.submit(evaluate_conversation, c, setup, db_path=services.db_path): c for c in judgeable}
            for n, future in enumerate(as_completed(futures), 1):
                conversation = futures[future]
                try:
                    results.append((conversation, future.result()))
                except (LLMError, ValueError) as e:
                    failures.append(f"{conversation.id}: {e}")
                progress((n, len(judgeable)), desc="Judging", unit="conversations")
        order = {c.id: i for i, c in enumerate(judgeable)}
        results.sort(key=lambda pair: order[pair[0].id])

        rows = result_table(results)
        files_out = None
        if results:
            report_dir = tempfile.mkdtemp(prefix="crs-arena-report-")
            files_out = [str(p) for p in write_reports(results, report_dir, labels)]
        complete = sum(1 for _, e in results if e.status == "done")
        summary = (
            f"Evaluated **{len(results)}** conversation(s): {complete} complete, {len(results) - complete} with gaps "
            f"(evaluate again with the same settings to fill them). **Judge:** {safe_text(scorer_label(setup))}"
        )
        if failures:
            summary += "\n\n⚠️ Failed: " + "; ".join(safe_text(f) for f in failures)
        summary += _skipped_note(skipped)
        return summary, rows, factor_means_figure(rows), overall_figure(rows), files_out

    run.click(
        on_evaluate,
        inputs=[uploads, fmt, mode, debate, rounds, limit, scorer],
        outputs=[status, table, bars, overall, downloads],
        api_name="evaluate",
        concurrency_id="judge",
        concurrency_limit=2,
    )


def _unreadable(name: str, reason: str) -> str:
    gr.Warning(f"Could not read {name}")
    return (f"⚠️ **Could not read `{safe_text(name)}`**: {safe_text(reason)}.\n\n"
            "Nothing was evaluated; fix the file (or choose its format) and upload it again.")


def _skipped_note(skipped: list[str]) -> str:
    if not skipped:
        return ""
    shown = "; ".join(safe_text(s) for s in skipped[:10])
    more = f" and {len(skipped) - 10} more" if len(skipped) > 10 else ""
    return f"\n\nSkipped {len(skipped)} record(s): {shown}{more}."
