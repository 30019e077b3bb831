"""The Simulate tab: run the LLM user simulator against chosen systems on dataset records, see the report.

The same batch as ``python -m evaluators simulate`` (:func:`evaluators.simulator.run_simulation`): every
dialogue is stored as it ends, running it again resumes, and the results reach the leaderboard.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gradio as gr

from evaluators.simulator import RecordError, SimulationConfig, SystemNotReady, UnknownSystem, run_simulation
from evaluators.simulator.report import SHOWN_COLUMNS
from ui.render import safe_text
from ui.services import Services

PROTOCOL_CHOICES = [
    ("CoRE: 3-5 turns, 'tell me more' on an early hit", "core"),
    ("iEvaLM free-form: up to 5 turns, stop at the first hit", "free"),
    ("iEvaLM attribute: the system asks about genre / actor / director or recommends", "attr"),
]
DATASETS = ["redial", "opendialkg"]
SUMMARY_COLUMNS = list(SHOWN_COLUMNS)
EXPLANATION = (
    "An LLM plays a user who wants the target items of a dataset record (ReDial or OpenDialKG, iEvaLM "
    "layout): it describes them without naming them, reacts to each recommendation list and accepts when a "
    "target appears. Each conversation is stored, scored (CoRE factors, overall, iEvaLM recall@k on the "
    "list the dialogue ended on, session_recall@k over all its lists, persuasiveness) and counted on the leaderboard. "
    "Running the same settings again resumes a stopped run."
)


def build(services: Services) -> None:
    gr.Markdown(EXPLANATION)
    ids = services.system_ids()
    with gr.Row():
        systems = gr.CheckboxGroup(
            choices=ids,
            value=[s for s in ("chatcrs", "retrieval") if s in ids],
            label="Systems",
            scale=2,
            elem_id="simulate-systems",
        )
        with gr.Column(scale=2):
            dataset = gr.Dropdown(DATASETS, value="redial", label="Dataset (records and targets)")
            protocol = gr.Dropdown(PROTOCOL_CHOICES, value="core", label="Protocol")
        with gr.Column(scale=1):
            n = gr.Number(value=5, precision=0, minimum=1, maximum=1000, label="Records")
            seed = gr.Number(value=0, precision=0, label="Seed")
            personas = gr.Checkbox(value=False, label="CONCEPT personas")
    run = gr.Button("Simulate", variant="primary", elem_id="simulate-run")
    status = gr.Markdown("", elem_id="simulate-status")
    table = gr.Dataframe(
        headers=SUMMARY_COLUMNS, label="Per system", interactive=False, wrap=True, elem_id="simulate-summary"
    )
    with gr.Row():
        factors = gr.Plot(label="Factor means")
        overall = gr.Plot(label="Overall")
        recall = gr.Plot(label="Recall@k")
    files = gr.File(
        label="Report (HTML), CSV and conversations (JSONL)",
        file_count="multiple",
        interactive=False,
        height=120,
        elem_id="simulate-files",
    )

    def on_simulate(chosen, dataset_name, protocol_name, records, seed_value, with_personas, progress=gr.Progress()):
        """Run (or resume) the batch and return the status, the per-system table, three charts and the files."""
        return simulate(
            services, chosen, dataset_name, protocol_name, records, seed_value, with_personas, progress=progress
        )

    run.click(
        on_simulate,
        inputs=[systems, dataset, protocol, n, seed, personas],
        outputs=[status, table, factors, overall, recall, files],
        api_name="simulate",
    )


def simulate(
    services: Services,
    chosen: list[str] | None,
    dataset_name: str,
    protocol_name: str,
    records: float | None,
    seed_value: float | None,
    with_personas: bool,
    *,
    progress: Callable[..., Any] | None = None,
) -> tuple:
    """(status, per-system table, factor chart, overall chart, recall chart, files) of the batch, run or
    resumed; settings it cannot run with give only the status, saying why (the rest is left as it was)."""
    keep = (gr.skip(),) * 5
    if not chosen:
        return ("Choose at least one system.", *keep)
    try:
        config = SimulationConfig(
            systems=list(chosen),
            dataset=dataset_name,
            n=int(records or 0),
            protocol=protocol_name,
            seed=int(seed_value or 0),
            personas=bool(with_personas),
        )
    except (ValueError, TypeError) as e:
        return (f"Cannot run: {safe_text(str(e))}", *keep)

    def report(p) -> None:
        if progress is not None:
            phase = "Evaluating" if p.message.startswith("evaluated") else "Simulating"
            progress((p.done, max(p.total, 1)), desc=f"{phase}: {p.message}")

    try:
        result = run_simulation(config, db_path=services.db_path, progress=report)
    except (UnknownSystem, SystemNotReady, RecordError, FileNotFoundError) as e:
        return (f"Cannot run: {safe_text(str(e))}", *keep)
    summary = result.report["summary"][SUMMARY_COLUMNS].round(3).astype(object)
    summary = summary.where(summary.notna(), "")
    notes = "\n".join(f"- {safe_text(note)}" for note in result.report["notes"])
    line = f"**{safe_text(result.summary_line())}**\n\n{notes}"
    figures = result.report["figures"]
    return line, summary, figures["factors"], figures["overall"], figures["recall"], [str(f) for f in result.files]
