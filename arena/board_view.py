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
* how far the board can be trusted (:func:`trust_line`): beside each rank the bootstrap's probability that the
  system is truly above the next one down (column ``P(above next)``), and a line on the closest pair: how sure
  its order is, and about how many more votes would settle it;
* with style control (:func:`style_markdown`): which method made the board, the notes (covariates left out,
  battles fitted without one) and each covariate's coefficient with its 95% interval; each system's rank
  without style control beside its rank;
* the domains with votes and the judge setups with evaluations, for the filter menus.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go
from sqlite_utils import Database

from arena.board_cache import read_board
from arena.board_compute import (
    DATASETS,
    OTHER,
    PROVISIONAL_BATTLES,
    RECALL_COLUMNS,
    STYLE,
    is_demo_scorer,
    kind_counts,
)
from arena.request_kinds import LABELS as KIND_LABELS
from evaluators.factors import FACTORS, LABELS
from storage.board_inputs import SET_MARK
from storage.stats import battle_domains

DATASET_CHOICES = (*DATASETS, OTHER)  # the dataset filter's values besides "no filter"
ABOVE_NEXT = "P(above next)"
PLAIN_RANK = "Rank without style control"
OVERALL_RANK = "Overall rank"  # on a kind's board: the rank on the board of every kind
BASE_COLUMNS = [
    "Rank",
    ABOVE_NEXT,
    "Group",
    "System",
    "Dataset",
    "Rating",
    "95% CI",
    PLAIN_RANK,
    OVERALL_RANK,
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
    fit: dict  # how the ratings were made (:class:`arena.board_compute.ComputedBoard` ``fit``)
    style: bool = False  # style control asked for
    kind: str | None = None  # the kind of request whose board this is (None: every kind)
    kinds: dict[str, int] | None = None  # votes per kind, for the selector (arena.board_compute.kind_counts)


def board_view(
    db: Database,
    *,
    domain: str | None = None,
    dataset: str | None = None,
    scorer: str | None = None,
    style: bool = False,
    kind: str | None = None,
    revealed: bool = False,
) -> BoardView:
    """The leaderboard for these filters (None: no filter; ``scorer`` None or unknown: the default), style-controlled
    with ``style``; ``kind``: one kind of request's board; ``revealed``: the votes cast after a reply named a system
    rated too."""
    board = read_board(db, domain=domain, dataset=dataset, scorer=scorer, style=style, kind=kind, revealed=revealed)
    summary = summary_line(board.rows, board.scorer)
    extra = [
        line
        for line in (
            kind_line(board.fit),
            set_aside_line(board.fit),
            ties_line(board.fit),
            trust_line(board.fit, board.rows),
            sets_line(board.rows),
            style_markdown(board.fit) if style else "",
        )
        if line
    ]
    return BoardView(
        table=display_table(board.rows, style=style, kind=bool(kind)),
        figure=board.figures["win_rate"],
        summary="\n\n".join([summary, *extra]),
        scorer=board.scorer,
        scorers=board.available_scorers,
        domains=battle_domains(db),
        rows=board.rows,
        fit=board.fit,
        style=style,
        kind=kind,
        kinds=kind_counts(db, domain=domain, revealed=revealed),
    )


def kind_line(fit: dict) -> str:
    """On a kind's board: which kind, and "no votes yet" or "too few votes" when it cannot rank (Markdown)."""
    kind = fit.get("kind")
    if not kind:
        return ""
    label = _escaped(KIND_LABELS.get(kind, kind))
    votes, needed = int(fit.get("kind_votes") or 0), int(fit.get("min_votes") or 0)
    if votes == 0:
        return f"**{label}**: no votes yet."
    if fit.get("too_few"):
        return (
            f"**{label}**: too few votes ({votes}; a kind's board ranks from {needed}): no ratings yet. "
            "Column Overall rank: the board of every kind."
        )
    return (
        f"**{label}**: the same fit on this kind's {votes} votes; column **{OVERALL_RANK}** is each system's rank on "
        "the board of every kind."
    )


def ties_line(fit: dict) -> str:
    """Ties modelled beside the board's half-win rule (:func:`arena.board_compute.tie_summary`; Markdown; empty where
    no vote is a tie)."""
    ties = fit.get("ties")
    if not isinstance(ties, dict) or not isinstance(ties.get("nu"), int | float):
        return ""
    nu = float(ties["nu"])
    tau = ties.get("tau")
    agree = "one system"
    if isinstance(tau, int | float):
        agree = f"its order and this board's agree with Kendall's tau {tau:.2f}"
    return (
        f"Ties modelled (Davidson): tie propensity {nu:.2f}, so two equal systems tie {nu / (2 + nu):.0%} of the time; "
        f"{agree}. The ratings count a tie or both bad as half a win each way."
    )


def set_aside_line(fit: dict) -> str:
    """How many votes were cast after a reply named a system, and whether they are rated (Markdown; empty: none)."""
    n = int(fit.get("set_aside") or 0)
    if not n:
        return ""
    votes = f"{n} vote{'' if n == 1 else 's'}"
    if fit.get("revealed"):
        return f"**{votes} cast after a reply named a system are rated here** (the toggle is on)."
    return (
        f"**{votes} set aside**: cast after a reply named a system (\"I'm ChatGPT\", a system's label), so not "
        "anonymous; kept and exported, not rated (the toggle shows the board with them)."
    )


def trust_line(fit: dict, rows: list[dict] | None = None) -> str:
    """How sure the board is of its closest pair (Markdown; empty without two rated systems in a group). While a rated
    system is provisional the bootstrap rests on too few battles to say (one vote resampled gives 1.00), and the line
    says so instead of a probability."""
    closest = fit.get("closest")
    if not closest:
        return ""
    if any(r.get("provisional") and r.get("rating") is not None for r in rows or []):
        return (
            f"**How far to trust the order**: not yet: a system with fewer than {PROVISIONAL_BATTLES} battles is "
            "provisional, and the bootstrap's probabilities rest on too few battles to mean anything."
        )
    upper, lower = f"`{_escaped(closest['upper'])}`", f"`{_escaped(closest['lower'])}`"
    chance = f"{closest['p_above']:.2f}"
    if closest.get("state") == "resolved":
        return (
            f"**How far to trust the order**: every pair of neighbours is ordered with at least 95% probability "
            f"(the closest: {upper} above {lower}, {chance})."
        )
    if closest.get("state") == "level" or closest.get("more_votes") is None:
        return (
            f"**How far to trust the order**: the closest pair, {upper} and {lower}, is level so far "
            f"(probability {chance} that the first is truly above): no number of votes can be estimated yet."
        )
    more = int(closest["more_votes"])
    votes = int(closest.get("votes") or 0)
    many = f"about {more:,}" if votes == 0 or more <= 100 * votes else f"more than {100 * votes:,}"
    return (
        f"**How far to trust the order**: the least certain neighbours are {upper} and {lower}: {upper} is truly "
        f"above with probability {chance}. At the current rate ({votes:,} votes so far, in the same mix of pairs), "
        f"{many} more votes would likely settle their order at 95%."
    )


def style_markdown(fit: dict) -> str:
    """With style control: the method, the notes and the coefficients with their 95% intervals (Markdown)."""
    lines = []
    if fit.get("method") == STYLE:
        labels = [c["label"].lower() for c in fit.get("coefficients", [])]
        fitted = labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]
        verb = "is" if len(labels) == 1 else "are"
        lines.append(
            f"**Style control is on**: each rating is what remains once {_escaped(fitted)} {verb} fitted beside the "
            "ratings (LMArena's method); the plain rank stays in its own column."
        )
    else:
        lines.append("**Style control is on, but could not be fitted**: the ratings below are plain Bradley–Terry.")
    lines += [f"- {_escaped(note)}" for note in fit.get("notes", [])]
    coefficients = fit.get("coefficients") or []
    if coefficients:
        lines += [
            "",
            "| Style covariate (side A minus side B) | Coefficient, log-odds per SD | 95% CI | Rating points per SD |",
            "|---|---|---|---|",
        ]
        for c in coefficients:
            lines.append(
                f"| {_escaped(c['label'])} | {_signed(c['coefficient'])} | "
                f"[{_signed(c['ci_low'])}, {_signed(c['ci_high'])}] | {_signed(c['points_per_sd'], 1)} |"
            )
        lines.append(
            "\nA positive coefficient: the side with more of it wins more often at equal strength. Differences are "
            "normalised per battle ((a − b) / (a + b); for questions, a − b) and scaled to one standard deviation; "
            "a battle that lacks one is fitted with the others (its difference counts as none)."
        )
    return "\n".join(lines)


def _signed(value: float | None, digits: int = 3) -> str:
    return "" if value is None else f"{value:+.{digits}f}"


def sets_line(rows: list[dict]) -> str:
    """Which set each small local version's row is (``kbrd_small@v8``), where the board has such rows: a set's votes
    and scores count for its own row only (#72)."""
    marked = sorted(r["system"] for r in rows if SET_MARK in r["system"])
    if not marked:
        return ""
    names = ", ".join(f"`{_escaped(m)}`" for m in marked)
    return (
        f"**Small local versions by set**: {names}. A row `name@vN` is that system as set vN of the small local "
        "versions answered; the votes and scores an earlier set earned stay on its own row and never count for a "
        "newer set under the same name."
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


def display_table(rows: list[dict], *, style: bool = False, kind: bool = False) -> pd.DataFrame:
    """The rows as displayed: rounded numbers, intervals as [low, high], provisional ranks marked,
    blanks for missing values; the Group column only when there is more than one group, the plain rank only
    with ``style``."""
    records = []
    for n, r in enumerate(rows):
        below = next((b for b in rows[n + 1 :] if b["rating"] is not None and b["group"] == r["group"]), None)
        # no probability beside a provisional system or above one: its few battles resampled say nothing
        settled = not r.get("provisional") and not (below and below.get("provisional"))
        record = {
            "Rank": _rank(r),
            ABOVE_NEXT: _number(r.get("p_above_next"), 2) if settled else "",
            "Group": r["group"] if r["group"] is not None else "",
            "System": r["system"],
            "Dataset": r["dataset"] or "",
            "Rating": _number(r["rating"], 0),
            "95% CI": _interval(r["ci_low"], r["ci_high"], 0),
            PLAIN_RANK: r.get("plain_rank") if r.get("plain_rank") is not None else "",
            OVERALL_RANK: r.get("overall_rank") if r.get("overall_rank") is not None else "",
            "Battles": r["battles"] if r["battles"] is not None else "",
            "W/T/L": f"{r['wins']}/{r['ties']}/{r['losses']}" if r["battles"] is not None else "",
            "Elo": _number(r["elo"], 0),
            "Judge overall": _number(r["overall_mean"], 1),
            "Judge 95% CI": _interval(r["overall_ci_low"], r["overall_ci_high"], 1),
            "Judged": r["judged"] if r["judged"] is not None else "",
        }
        record.update({LABELS[f]: _number(r[f], 2) for f in FACTORS})
        record.update({recall_label(c): _recall(r.get(c), r.get("simulations")) for c in RECALL_COLUMNS})
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
    if not style:
        columns.remove(PLAIN_RANK)
    if not kind:
        columns.remove(OVERALL_RANK)
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


NOT_MEASURED = "–"  # iEvaLM Table 2's mark for a Recall@k no list was long enough to measure


def _recall(value: float | None, simulations: int | None) -> str:
    """A pooled Recall@k: "–" where the system was simulated but no dialogue returned k items (iEvaLM's mark),
    blank where it was never simulated."""
    if value is None:
        return NOT_MEASURED if simulations else ""
    return f"{value:.3f}"


def _interval(low: float | None, high: float | None, digits: int) -> str:
    return "" if low is None or high is None else f"[{low:.{digits}f}, {high:.{digits}f}]"


def _escaped(text: str) -> str:
    """A stored name for Markdown: HTML escaped and no backtick to end the code span early."""
    return html.escape(text, quote=False).replace("`", "'")
