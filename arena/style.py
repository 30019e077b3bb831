"""The style of a battle's two sides, for the style-controlled leaderboard (LMArena's style control, for CRSs).

Votes can reward how an answer looks as well as what it recommends. For each voted battle this module measures
each side's conversation (its system replies) and gives the ratings fit (:func:`arena.ratings.fit_ratings`) the
normalised differences, side A minus side B:

* ``length``: reply length in tokens (words and punctuation marks, counted the same way for every system, no
  model tokenizer), mean over the conversation's replies; ``(a - b) / (a + b)``;
* ``items``: items listed per reply, mean; ``(a - b) / (a + b)``;
* ``questions``: the share of replies that ask something (contain ``?``); ``a - b`` (shares are on one scale
  already);
* ``latency``: answer time (the ``latency_ms`` the system recorded on each reply), mean; ``(a - b) / (a + b)``.

``(a - b) / (a + b)`` is 0 when both are 0. The fit divides each difference by its standard deviation over the
battles (not centred, so 0 keeps meaning "both sides alike").

**Missing values.** A side without a conversation or without a reply has no style at all; a conversation whose
replies recorded no latency (every imported one: CRSArena-Dial has none) has no latency. A battle missing a
covariate is fitted with the covariates it has: the missing difference is set to 0, "no difference", so that
battle still counts for the ratings and the other covariates but says nothing about the missing covariate's
effect. :func:`battle_covariates` counts how many battles that concerned, and the board says so.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd
from sqlite_utils import Database

from storage.board_inputs import system_replies

FEATURES = ("length", "items", "questions", "latency")
LABELS = {
    "length": "Reply length (tokens)",
    "items": "Items listed per reply",
    "questions": "Replies asking a question",
    "latency": "Answer latency",
}
_TOKEN = re.compile(r"\w+|[^\w\s]")


@dataclass(frozen=True)
class Style:
    """One conversation's replies, summarised: mean tokens, mean items listed, share asking, mean latency (ms;
    None when no reply recorded one)."""

    length: float
    items: float
    questions: float
    latency: float | None


def tokens(text: str) -> int:
    """Words and punctuation marks in ``text``."""
    return len(_TOKEN.findall(text))


def conversation_style(replies: list[dict]) -> Style | None:
    """The style of a conversation's system replies (:func:`storage.board_inputs.system_replies`); None without any."""
    if not replies:
        return None
    latencies = [r["latency_ms"] for r in replies if r.get("latency_ms") is not None]
    return Style(
        length=sum(tokens(r["text"]) for r in replies) / len(replies),
        items=sum(r["items"] for r in replies) / len(replies),
        questions=sum("?" in r["text"] for r in replies) / len(replies),
        latency=sum(latencies) / len(latencies) if latencies else None,
    )


def difference(a: Style | None, b: Style | None) -> dict[str, float]:
    """The normalised differences side A minus side B (see the module's docstring); NaN where either side lacks
    the value."""
    if a is None or b is None:
        return dict.fromkeys(FEATURES, math.nan)
    latency = _relative(a.latency, b.latency) if a.latency is not None and b.latency is not None else math.nan
    return {
        "length": _relative(a.length, b.length),
        "items": _relative(a.items, b.items),
        "questions": a.questions - b.questions,
        "latency": latency,
    }


def _relative(a: float, b: float) -> float:
    return 0.0 if a + b == 0 else (a - b) / (a + b)


def battle_covariates(db: Database, battles: Iterable[dict]) -> tuple[pd.DataFrame, dict[str, int]]:
    """Per battle (``conversation_a``, ``conversation_b``, in order), the columns :data:`FEATURES`, with a missing
    difference set to 0 (fitted with the covariates it has, see the module's docstring); and per feature, how many
    battles lacked it."""
    battles = list(battles)
    replies = system_replies(db, [c for b in battles for c in (b.get("conversation_a"), b.get("conversation_b"))])
    styles = {conversation: conversation_style(turns) for conversation, turns in replies.items()}
    frame = pd.DataFrame(
        [
            difference(styles.get(b.get("conversation_a") or ""), styles.get(b.get("conversation_b") or ""))
            for b in battles
        ],
        columns=list(FEATURES),
        dtype=float,
    )
    missing = {feature: int(frame[feature].isna().sum()) for feature in FEATURES}
    return frame.fillna(0.0), missing
