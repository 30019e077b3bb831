"""The Leaderboard tab: human-vote ratings beside the automatic scores, per system.

The tab renders :class:`arena.board_view.BoardView` (rows, scorer choice, provisional marks, summary); it only
reads the board and computes nothing itself (CRSArena-Dial is imported in the Research data tab).
"""

from __future__ import annotations

import gradio as gr

from arena.board_compute import PROVISIONAL_BATTLES
from arena.board_view import DATASET_CHOICES
from arena.request_kinds import KINDS
from arena.request_kinds import LABELS as KIND_LABELS
from ui.services import Services

ALL = "All"

EXPLANATION = (
    "## Leaderboard\n"
    "**Rating**: Bradley–Terry fit of the votes (mean 1000; 400 points = 10× the odds of winning; "
    "a tie or *both bad* counts as half a win each way), with a 95% bootstrap interval (200 rounds). "
    "**Rank**: 1 + the number of systems whose interval lies entirely above this one, so systems with "
    "overlapping intervals share a rank. **Elo** (K = 16, in vote order) is shown for reference only. "
    "**Judge overall** (0–100: the debate's for the LLM judge, the calibrated score for the proxy), the twelve "
    "factor means (0–4) and **Judged** come from one judge setup at a "
    "time (scorer, mode, rubric and prompt versions; the proxy by default when no capable LLM judge is "
    "configured); over simulated conversations, **iEvaLM R@k** is Recall@k of the list the dialogue ended on "
    "(iEvaLM) and **session R@k** of all the dialogue's lists concatenated (CoRE); **–** where no dialogue's list "
    "held k items (iEvaLM's mark for a recall the system's list cannot measure). "
    f"A rank marked **provisional** rests on fewer than {PROVISIONAL_BATTLES} battles; it never "
    "shares rank 1 with a system that has more. **P(above next)**: the share of bootstrap rounds in which the "
    "system is rated above the next one down (1.00: the order is settled; 0.50: a coin toss). "
    "**Style control** fits reply length, items listed per reply, questions asked and answer latency beside the "
    "ratings (LMArena's method), so a rating is what remains once style is accounted for. "
    "Anonymous uploads from the Evaluate tab are not on this board. "
    "**Kind of request**: the board of the votes whose first message asks for that kind (a genre, a person, years, "
    "a title to match, something ruled out, a question about a film, an audience, or none of these: open), the same "
    "fit, with each system's **Overall rank** beside it. A vote cast after a reply named a system (\"I'm ChatGPT\") "
    "is set aside, not rated, unless the toggle counts it."
)


def build(services: Services):
    """The tab's components; returns ``refresh_after(event)``, which shows the current board after ``event``."""
    gr.Markdown(EXPLANATION)
    with gr.Row():
        domain = gr.Dropdown(choices=[ALL], value=ALL, label="Domain", scale=1)
        dataset = gr.Dropdown(
            choices=[ALL, *DATASET_CHOICES],
            value=ALL,
            label="Dataset (the system's training set; other: this app's systems)",
            scale=1,
        )
        scorer = gr.Dropdown(
            choices=[],
            value=None,
            label="Judge setup of the automatic scores (scorer · mode · rubric · prompts)",
            scale=2,
        )
        style = gr.Checkbox(
            value=False,
            label="Style control",
            info="Rate at equal style: reply length, items listed, questions, latency",
            scale=1,
        )
        refresh = gr.Button("Refresh", variant="primary", scale=1)
    with gr.Row():
        kind = gr.Dropdown(
            choices=kind_choices(None), value=ALL, label="Kind of request (the first message's)", scale=2
        )
        revealed = gr.Checkbox(
            value=False,
            label="Count votes cast after a reply named a system",
            info="Set aside by default: such a vote is not anonymous",
            scale=1,
        )
    status = gr.Markdown("", elem_id="leaderboard-status")
    table = gr.Dataframe(
        interactive=False,
        wrap=False,
        pinned_columns=4,
        max_height=520,
        label="Systems",
        elem_id="leaderboard-table",
        show_search="search",
    )
    heatmap = gr.Plot(label="Pairwise win rates")

    def on_refresh(
        domain_choice, dataset_choice, scorer_choice, style_choice=False, kind_choice=ALL, revealed_choice=False
    ):
        """The leaderboard for the chosen filters, as of the latest vote and evaluation (reading writes nothing)."""
        return show_board(
            services, domain_choice, dataset_choice, scorer_choice, style_choice, kind_choice, revealed_choice
        )

    def on_kinds(domain_choice, revealed_choice=False):
        """The kind menu with each kind's number of votes."""
        counts = services.leaderboard_kinds(
            domain=None if domain_choice in (None, ALL) else domain_choice, revealed=bool(revealed_choice)
        )
        return gr.Dropdown(choices=kind_choices(counts))

    outputs = [table, heatmap, status, domain, scorer]
    inputs = [domain, dataset, scorer, style, kind, revealed]
    gr.on(triggers=None, fn=lambda: on_refresh(ALL, ALL, None), outputs=outputs, api_visibility="private")
    gr.on(
        triggers=[refresh.click, domain.input, dataset.input, scorer.input, style.input, kind.input, revealed.input],
        fn=on_refresh,
        inputs=inputs,
        outputs=outputs,
        api_name="leaderboard",
        concurrency_limit=4,
    ).then(on_kinds, inputs=[domain, revealed], outputs=[kind], api_visibility="private")

    def refresh_after(event) -> None:
        """Show the current board after ``event`` (opening the tab, a vote)."""
        event(on_refresh, inputs=inputs, outputs=outputs, api_visibility="private", concurrency_limit=4).then(
            on_kinds, inputs=[domain, revealed], outputs=[kind], api_visibility="private"
        )

    return refresh_after


def show_board(
    services: Services,
    domain_choice: str | None,
    dataset_choice: str | None,
    scorer_choice: str | None,
    style_choice: bool | None = False,
    kind_choice: str | None = ALL,
    revealed_choice: bool | None = False,
):
    """(table, heatmap, summary, domain menu, scorer menu) for the chosen filters; "All" means no filter; with
    ``style_choice`` the style-controlled board (its method, notes and coefficients are in the summary);
    ``kind_choice``: one kind of request's board (an unknown kind: every kind); ``revealed_choice``: votes cast after
    a reply named a system rated too (the summary says how many there are either way)."""
    view = services.leaderboard(
        domain=None if domain_choice in (None, ALL) else domain_choice,
        dataset=None if dataset_choice in (None, ALL) else dataset_choice,
        scorer=scorer_choice,
        style=bool(style_choice),
        kind=kind_choice if kind_choice in KINDS else None,
        revealed=bool(revealed_choice),
    )
    return (
        view.table,
        view.figure,
        view.summary,
        gr.Dropdown(choices=[ALL, *view.domains]),
        gr.Dropdown(choices=view.scorers, value=view.scorer),
    )


def kind_choices(counts: dict[str, int] | None) -> list[tuple[str, str]]:
    """The kind menu: "All kinds", then each kind with its number of votes (none known yet: the kinds alone)."""
    choices = [("All kinds", ALL)]
    for k in KINDS:
        n = (counts or {}).get(k)
        label = KIND_LABELS[k] if n is None else f"{KIND_LABELS[k]} · {n} vote{'' if n == 1 else 's'}"
        choices.append((label, k))
    return choices
