"""The Research data tab: brings the published human data in, CRSArena-Dial (conversations and votes) and
CRSArena-Eval (labelled dialogues), through the same imports as ``crs-arena import-crsarena`` and
``crs-arena import-crsarena-eval`` (:meth:`ui.services.Services.import_crsarena` and ``import_crsarena_eval``).

The Leaderboard and Judge vs people tabs only read; the app shows each of them again after the import that
changes it (``build`` returns the two import events for that).
"""

from __future__ import annotations

from collections.abc import Callable

import gradio as gr

from arena.crsarena_import import ImportRefused, ImportReport, LabelImportReport
from ui.render import safe_text
from ui.services import Services

EXPLANATION = (
    "## Research data\n"
    "The human data CRS Arena published, brought in beside this app's own: it is stored as *imported*, kept "
    "apart from this app's people wherever both are shown, and importing again adds nothing. The files are read "
    "from the data dir (`CRS_DATA_DIR`, else `../shared/data`); titles are matched to the ReDial catalog "
    "(`<data dir>/redial`)."
)


def build(services: Services):
    """The tab's components; returns the two import events (CRSArena-Dial, CRSArena-Eval), after which the app
    shows the leaderboard and the Judge vs people panel again."""
    gr.Markdown(EXPLANATION)
    with gr.Group():
        gr.Markdown(
            "### CRSArena-Dial\nThe 474 conversations and 185 vote rows of CRS Arena (WSDM 2025), from "
            "`<data dir>/crsarena`; the votes join the Leaderboard, the conversations are scored with the proxy."
        )
        dial_button = gr.Button("Import CRSArena-Dial")
        dial_status = gr.Markdown("", elem_id="leaderboard-import-status")
    with gr.Group():
        gr.Markdown(
            "### CRSArena-Eval labels\nThe labelled dialogues of `<data dir>/crsarena/crs_arena_eval_dev.json` with "
            "their people's labels, scored with the proxy; the Judge vs people panel shows them as *imported*."
        )
        eval_button = gr.Button("Import CRSArena-Eval labels")
        eval_status = gr.Markdown("", elem_id="agreement-import-status")

    def on_dial_import() -> str:
        """Import CRSArena-Dial when its files and catalog are present; say clearly when they are not."""
        return import_crsarena(services)

    def on_label_import() -> str:
        """Import CRSArena-Eval's labelled dialogues when the file and catalog are present; say clearly when not."""
        return import_message(services.import_crsarena_eval)

    dial = dial_button.click(
        on_dial_import,
        outputs=[dial_status],
        api_name="import_crsarena",
        concurrency_id="judge_bulk",
        concurrency_limit=1,
    )
    labels = eval_button.click(
        on_label_import,
        outputs=[eval_status],
        api_name="import_crsarena_eval",
        concurrency_id="judge_bulk",
        concurrency_limit=1,
    )
    return dial, labels


def import_crsarena(services: Services) -> str:
    """Import CRSArena-Dial; the report, or why nothing was imported and what to set."""
    return import_message(services.import_crsarena)


def import_message(run: Callable[[], ImportReport | LabelImportReport]) -> str:
    """Run one of the CRSArena imports: its report, or why nothing was imported and what to set."""
    try:
        report = run()
    except ImportRefused as e:
        return safe_text(str(e))
    return f"Imported: {safe_text(report.summary())}."
