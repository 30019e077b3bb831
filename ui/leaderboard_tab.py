"""The Leaderboard tab: human-vote ratings beside the automatic scores, per system."""

from __future__ import annotations

import gradio as gr
import pandas as pd

from arena.board import read_board
from arena.crsarena_import import crsarena_files, import_crsarena
from arena.leaderboard import DATASETS, OTHER, PROVISIONAL_BATTLES, RECALL_COLUMNS, is_demo_scorer
from catalog.catalog import data_dir, get_catalog
from evaluators.factors import FACTORS, LABELS
from evaluators.log_readers import LogFormatError
from storage.db import get_db
from storage.stats import battle_domains
from ui.render import safe_text
from ui.services import Services

ALL = "All"

EXPLANATION = (
    "## Leaderboard\n"
    "**Rating**: Bradley–Terry fit of the votes (mean 1000; 400 points = 10× the odds of winning; "
    "a tie or *both bad* counts as half a win each way), with a 95% bootstrap interval (200 rounds). "
    "**Rank**: 1 + the number of systems whose interval lies entirely above this one, so systems with "
    "overlapping intervals share a rank. **Elo** (K = 16, in vote order) is shown for reference only. "
    "**Debate overall** (0–100), the twelve factor means (0–4) and **Judged** come from one judge setup at a "
    "time (scorer, mode, rubric and prompt versions; the proxy by default when no capable LLM judge is "
    "configured); over simulated conversations, **iEvaLM R@k** is Recall@k of the list the dialogue ended on "
    "(iEvaLM) and **session R@k** of all the dialogue's lists concatenated (CoRE). "
    f"A rank marked **provisional** rests on fewer than {PROVISIONAL_BATTLES} battles; it never "
    "shares rank 1 with a system that has more. Anonymous uploads from the Evaluate tab are not on this board."
)


def build(services: Services):
    """The tab's components; returns ``refresh_after(event)``, which shows the current board after ``event``."""
    gr.Markdown(EXPLANATION)
    with gr.Row():
        domain = gr.Dropdown(choices=[ALL], value=ALL, label="Domain", scale=1)
        dataset = gr.Dropdown(
            choices=[ALL, *DATASETS, OTHER],
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
        refresh = gr.Button("Refresh", variant="primary", scale=1)
    status = gr.Markdown("", elem_id="leaderboard-status")
    table = gr.Dataframe(
        interactive=False,
        wrap=False,
        pinned_columns=3,
        max_height=520,
        label="Systems",
        elem_id="leaderboard-table",
        show_search="search",
    )
    heatmap = gr.Plot(label="Pairwise win rates")
    with gr.Accordion("Import CRSArena-Dial", open=False):
        gr.Markdown(
            "Adds the 474 CRSArena-Dial conversations and 185 vote rows (CRS Arena, WSDM 2025) from "
            "`<data dir>/crsarena` (the data dir is `CRS_DATA_DIR`, else `../shared/data`). "
            "Importing again adds nothing."
        )
        import_button = gr.Button("Import CRSArena-Dial")
        import_status = gr.Markdown("", elem_id="leaderboard-import-status")

    def on_refresh(domain_choice, dataset_choice, scorer_choice):
        """The leaderboard for the chosen filters, as of the latest vote and evaluation (reading writes nothing)."""
        db = get_db(services.db_path)
        board = read_board(
            db,
            domain=None if domain_choice in (None, ALL) else domain_choice,
            dataset=None if dataset_choice in (None, ALL) else dataset_choice,
            scorer=scorer_choice,
        )
        rows, figures, chosen, available = board.rows, board.figures, board.scorer, board.available_scorers
        votes = sum(r["battles"] or 0 for r in rows) // 2
        rated = sum(1 for r in rows if r["rating"] is not None)
        scored = f"automatic scores from scorer `{safe_text(chosen)}`" if chosen else "no automatic scores yet"
        if chosen and is_demo_scorer(chosen):
            scored += " (the 135M demo judge: not validated, its scores are not meaningful)"
        line = f"{votes} vote{'' if votes == 1 else 's'} among {rated} systems; {scored}."
        groups = {r["group"] for r in rows if r["group"] is not None}
        if len(groups) > 1:
            line += (
                f" **The votes form {len(groups)} groups of systems that never met** (column Group): "
                "ratings compare systems within a group only; filter by dataset to see one group."
            )
        return (
            _table(rows),
            figures["win_rate"],
            line,
            gr.Dropdown(choices=[ALL, *battle_domains(db)]),
            gr.Dropdown(choices=available, value=chosen),
        )

    def on_import():
        """Import CRSArena-Dial when its files are present; say clearly when they are not."""
        base = data_dir()
        folder = base / "crsarena" if base is not None else None
        if folder is None or not crsarena_files(folder):
            where = f"`{safe_text(str(folder))}`" if folder is not None else "no data directory"
            return (
                f"CRSArena-Dial files not found ({where}). Set `CRS_DATA_DIR` to a folder holding "
                "`crsarena/crs_arena_dial_{open,closed}.json` and `crsarena/votes_{open,closed}.csv`."
            )
        try:
            catalog = get_catalog("redial")
        except FileNotFoundError:
            catalog = None  # listed titles keep their written form
        try:
            report = import_crsarena(get_db(services.db_path), folder, catalog=catalog, score=True)
        except LogFormatError as e:
            return f"Import failed: {safe_text(str(e))}"
        services.board_changed()
        return f"Imported: {safe_text(report.summary())}."

    outputs = [table, heatmap, status, domain, scorer]
    gr.on(triggers=None, fn=lambda: on_refresh(ALL, ALL, None), outputs=outputs, api_visibility="private")
    gr.on(
        triggers=[refresh.click, domain.input, dataset.input, scorer.input],
        fn=on_refresh,
        inputs=[domain, dataset, scorer],
        outputs=outputs,
        api_name="leaderboard",
        concurrency_limit=4,
    )
    import_button.click(
        on_import, outputs=[import_status], api_name="import_crsarena", concurrency_id="judge_bulk", concurrency_limit=1
    ).then(on_refresh, inputs=[domain, dataset, scorer], outputs=outputs, api_visibility="private")

    def refresh_after(event) -> None:
        """Show the current board after ``event`` (opening the tab, a vote)."""
        event(
            on_refresh, inputs=[domain, dataset, scorer], outputs=outputs, api_visibility="private", concurrency_limit=4
        )

    return refresh_after


def _table(rows: list[dict]) -> pd.DataFrame:
    """The rows as displayed: rounded numbers, intervals as [low, high], blanks for missing values."""
    records = []
    for r in rows:
        record = {
            "Rank": (f"{r['rank']} (provisional)" if r.get("provisional") else r["rank"])
            if r["rank"] is not None
            else "",
            "Group": r["group"] if r["group"] is not None else "",
            "System": r["system"],
            "Dataset": r["dataset"] or "",
            "Rating": _number(r["rating"], 0),
            "95% CI": _interval(r["ci_low"], r["ci_high"], 0),
            "Battles": r["battles"] if r["battles"] is not None else "",
            "W/T/L": f"{r['wins']}/{r['ties']}/{r['losses']}" if r["battles"] is not None else "",
            "Elo": _number(r["elo"], 0),
            "Debate overall": _number(r["overall_mean"], 1),
            "Debate 95% CI": _interval(r["overall_ci_low"], r["overall_ci_high"], 1),
            "Judged": r["judged"] if r["judged"] is not None else "",
        }
        record.update({LABELS[f]: _number(r[f], 2) for f in FACTORS})
        record.update({_recall_label(c): _number(r[c], 3) for c in RECALL_COLUMNS})
        record["Simulations"] = r["simulations"] if r["simulations"] is not None else ""
        records.append(record)
    columns = [
        "Rank",
        "Group",
        "System",
        "Dataset",
        "Rating",
        "95% CI",
        "Battles",
        "W/T/L",
        "Elo",
        "Debate overall",
        "Debate 95% CI",
        "Judged",
        *(LABELS[f] for f in FACTORS),
        *(_recall_label(c) for c in RECALL_COLUMNS),
        "Simulations",
    ]
    if len({r["group"] for r in rows if r["group"] is not None}) < 2:
        columns.remove("Group")  # one group: the column says nothing
    return pd.DataFrame(records, columns=columns).astype(str)


def _number(value: float | None, digits: int) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def _interval(low: float | None, high: float | None, digits: int) -> str:
    return "" if low is None or high is None else f"[{low:.{digits}f}, {high:.{digits}f}]"


def _recall_label(column: str) -> str:
    """``recall@10`` → ``iEvaLM R@10``; ``session_recall@10`` → ``session R@10``."""
    return (
        column.replace("session_recall", "session R")
        if column.startswith("session")
        else column.replace("recall", "iEvaLM R")
    )
