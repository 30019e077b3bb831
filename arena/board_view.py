"""What the Leaderboard tab shows, as one read model: display rows, the win-rate figure, the summary
line and the filter choices, for one set of filters.

:func:`board_view` reads the board (:func:`arena.board_cache.read_board`: cached, snapshot or computed;
never written) and turns it into what people see:

* the table (:func:`display_table`): numbers rounded, intervals as ``[low, high]``, a rank resting on
  fewer than :data:`arena.board_compute.PROVISIONAL_BATTLES` battles marked ``(provisional)``, the Group
  column only when the votes form more than one group, blanks for missing values;
* the scorer shown: the one asked for when it has evaluations, else the default
  (:func:`arena.board_compute.choose_scorer`), with the demo judge called out in the summary;
* the summary line (:func:`summary_line`, Markdown): votes, rated systems, scorer, and a warning when
  the votes form groups of systems that never met;
* the domains with votes and the judge setups with evaluations, for the filter menus.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go
from sqlite_utils import Database

from arena.board_cache import read_board
from arena.board_compute import DATASETS, OTHER, RECALL_COLUMNS, is_demo_scorer
from evaluators.factors import FACTORS, LABELS
from storage.stats import battle_domains

DATASET_CHOICES = (*DATASETS, OTHER)  # the dataset filter's values besides "no filter"
BASE_COLUMNS = [
    "Rank",
    "Group",
    "System",
    "Dataset",
    "Rating",
    "95% CI",
    "Battles",
    "W/T/L",
    "Elo",
    "Judge overall",
    "Judge 95% CI",
    "Judged",
]


@dataclass(frozen=True)
class BoardView:
    """The leaderboard as displayed, for one set of filters."""

    table: pd.DataFrame  # display strings, columns as :func:`display_table`
    figure: go.Figure  # pairwise win rates of the rated systems
    summary: str  # Markdown
    scorer: str | None  # the judge setup whose scores are shown (None: nothing judged yet)
    scorers: list[str]  # judge setups with evaluations, the default first
    domains: list[str]  # domains with at least one voted battle
    rows: list[dict]  # the board's rows as computed (:data:`arena.board_compute.COLUMNS`)


def board_view(
    db: Database, *, domain: str | None = None, dataset: str | None = None, scorer: str | None = None
) -> BoardView:
    """The leaderboard for these filters (None: no filter; ``scorer`` None or unknown: the default)."""
    board = read_board(db, domain=domain, dataset=dataset, scorer=scorer)
    return BoardView(
        table=display_table(board.rows),
        figure=board.figures["win_rate"],
        summary=summary_line(board.rows, board.scorer),
        scorer=board.scorer,
        scorers=board.available_scorers,
        domains=battle_domains(db),
        rows=board.rows,
    )


def summary_line(rows: list[dict], scorer: str | None) -> str:
    """One Markdown line: votes among rated systems, whose automatic scores, and a warning when the
    votes form groups of systems that never met."""
    votes = sum(r["battles"] or 0 for r in rows) // 2
    rated = sum(1 for r in rows if r["rating"] is not None)
    scored = f"automatic scores from scorer `{_escaped(scorer)}`" if scorer else "no automatic scores yet"
    if scorer and is_demo_scorer(scorer):
        scored += " (the 135M demo judge: not validated, its scores are not meaningful)"
    line = f"{votes} vote{'' if votes == 1 else 's'} among {rated} systems; {scored}."
    groups = _groups(rows)
    if len(groups) > 1:
        line += (
            f" **The votes form {len(groups)} groups of systems that never met** (column Group): "
            "ratings compare systems within a group only; filter by dataset to see one group."
        )
    return line


def display_table(rows: list[dict]) -> pd.DataFrame:
    """The rows as displayed: rounded numbers, intervals as [low, high], provisional ranks marked,
    blanks for missing values; the Group column only when there is more than one group."""
    records = []
    for r in rows:
        record = {
            "Rank": _rank(r),
            "Group": r["group"] if r["group"] is not None else "",
            "System": r["system"],
            "Dataset": r["dataset"] or "",
            "Rating": _number(r["rating"], 0),
            "95% CI": _interval(r["ci_low"], r["ci_high"], 0),
            "Battles": r["battles"] if r["battles"] is not None else "",
            "W/T/L": f"{r['wins']}/{r['ties']}/{r['losses']}" if r["battles"] is not None else "",
            "Elo": _number(r["elo"], 0),
            "Judge overall": _number(r["overall_mean"], 1),
            "Judge 95% CI": _interval(r["overall_ci_low"], r["overall_ci_high"], 1),
            "Judged": r["judged"] if r["judged"] is not None else "",
        }
        record.update({LABELS[f]: _number(r[f], 2) for f in FACTORS})
        record.update({recall_label(c): _number(r[c], 3) for c in RECALL_COLUMNS})
        record["Simulations"] = r["simulations"] if r["simulations"] is not None else ""
        records.append(record)
    columns = [
        *BASE_COLUMNS,
        *(LABELS[f] for f in FACTORS),
        *(recall_label(c) for c in RECALL_COLUMNS),
        "Simulations",
    ]
    if len(_groups(rows)) < 2:
        columns.remove("Group")  # one group: the column says nothing
    return pd.DataFrame(records, columns=columns).astype(str)


def recall_label(column: str) -> str:
    """``recall@10`` → ``iEvaLM R@10``; ``session_recall@10`` → ``session R@10``."""
    return (
        column.replace("session_recall", "session R")
        if column.startswith("session")
        else column.replace("recall", "iEvaLM R")
    )


def _rank(row: dict) -> str | int:
    if row["rank"] is None:
        return ""
    return f"{row['rank']} (provisional)" if row.get("provisional") else row["rank"]


def _groups(rows: list[dict]) -> set:
    return {r["group"] for r in rows if r["group"] is not None}


def _number(value: float | None, digits: int) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def _interval(low: float | None, high: float | None, digits: int) -> str:
    return "" if low is None or high is None else f"[{low:.{digits}f}, {high:.{digits}f}]"


def _escaped(text: str) -> str:
    """A stored name for Markdown: HTML escaped and no backtick to end the code span early."""
    return html.escape(text, quote=False).replace("`", "'")
