"""The Judge vs people tab: how far each judge setup agrees with the people who rated and voted.

It renders :func:`arena.judge_agreement.judge_agreement` (a table with intervals and ``n``, and a scatter for one
setup) and computes nothing itself (CRSArena-Eval's labels are imported in the Research data tab).
"""

from __future__ import annotations

import gradio as gr
import pandas as pd

from arena.judge_agreement import COLUMNS, MIN_BATTLES, MIN_DIALOGUES, TIE_MARGIN, judge_agreement, scatter
from ui.services import Services

EXPLANATION = (
    "## Judge vs people\n"
    "Does the automatic judge agree with the people who use this arena? People rate conversations after their "
    "arena vote (before the names are revealed) and in the Chat tab; each conversation's ratings are averaged. "
    "For every judge setup: **Spearman** between the judge's overall and people's overall over rated "
    "conversations and over systems, and between each rated item and the CoRE factor that asks the same "
    "(understood what I wanted ↔ coherence; the recommendations fit ↔ semantic relevance; made me want to watch ↔ "
    "explainability); **vote agreement**: the share of decisive votes whose winner the judge scored higher, and "
    f"MT-Bench's agreement with ties as a third class (the judge calls a tie under {TIE_MARGIN:g} points of 100). "
    f"Intervals are 95% bootstrap intervals. Fewer than {MIN_DIALOGUES} rated conversations or {MIN_BATTLES} votes "
    "give no figure. **Imported** evidence (CRSArena-Eval labels, CRSArena-Dial votes, after an import) is kept "
    "apart: the shipped proxy was fitted on it, so its figures there are in-sample, not a validation."
)


def build(services: Services):
    """The tab's components; returns ``refresh_after(event)``, which recomputes the panel after ``event``."""
    gr.Markdown(EXPLANATION)
    with gr.Row():
        setup = gr.Dropdown(choices=[], value=None, label="Judge setup (scorer · mode · rubric · prompts)", scale=3)
        refresh = gr.Button("Refresh", variant="primary", scale=1)
    table = gr.Dataframe(
        value=pd.DataFrame(columns=COLUMNS[1:]),
        interactive=False,
        wrap=True,
        column_widths=["16%", "46%", "14%", "14%", "10%"],
        label="Agreement",
        elem_id="agreement-table",
    )
    figure = gr.Plot(label="Judge vs people", elem_id="agreement-scatter")

    def on_refresh(chosen):
        """The panel as of now, and the scatter of the chosen setup (the first when none is chosen)."""
        return show_agreement(services, chosen)

    outputs = [table, figure, setup]
    gr.on(
        triggers=[refresh.click, setup.input],
        fn=on_refresh,
        inputs=[setup],
        outputs=outputs,
        api_name="judge_vs_people",
        concurrency_limit=2,
    )

    def refresh_after(event) -> None:
        event(on_refresh, inputs=[setup], outputs=outputs, api_visibility="private", concurrency_limit=2)

    return refresh_after


def show_agreement(services: Services, chosen: str | None):
    """(table, scatter, setup menu) of the chosen setup (else the first: the demo judge comes last)."""
    found = judge_agreement(services.db())
    current = chosen if chosen in found.setups else (found.setups[0] if found.setups else None)
    shown = [
        {k: v for k, v in row.items() if k != "Judge setup"} for row in found.rows if row["Judge setup"] == current
    ]
    frame = pd.DataFrame(shown, columns=COLUMNS[1:])
    return frame, scatter(found, current), gr.Dropdown(choices=found.setups, value=current)
