"""Per-turn evidence for the turn scorer (:mod:`evaluators.proxy.turn_scores`): each system turn's
:data:`TURN_FEATURES`, and why it cannot be scored or must score low."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import cast

from catalog.catalog import Catalog
from evaluators.proxy.replies import Reply
from evaluators.proxy.similarity import Similarity
from storage.records import Conversation


@dataclass(frozen=True)
class TurnEvidence:
    """What one system turn offers the turn scorer (:mod:`evaluators.proxy.turn_scores`): its index in the
    conversation's turns, its :data:`TURN_FEATURES` (in that order), and why it cannot be scored (None: it can)
    or why it must score low (``degenerate``)."""

    index: int
    features: tuple[float, ...]
    unscorable: str | None = None
    degenerate: str | None = None


# The features of one system turn, read by the turn scorer. Reaction: the user's next turn; request: the user's
# turn before; wished genres: the genre words of the request (else of every earlier user turn), as ChatCRS reads
# them; the items: titles the reply names and items it lists, as catalog records; the last four describe the
# whole conversation (a system that babbles elsewhere is read accordingly, as people reading it do).
TURN_FEATURES: tuple[str, ...] = (
    "negative_reaction",
    "repeated_request",
    "accepted",
    "no_reaction",
    "has_items",
    "items",
    "question",
    "gibberish",
    "repeats_earlier",
    "generic",
    "reason",
    "log_words",
    "unknown_share",
    "request_similarity",
    "genre_hit",
    "genre_miss",
    "genre_wished",
    "position",
    "first",
    "broken_start",
    "list_template",
    "unfinished",
    "stutter",
    "conversation_gibberish",
    "conversation_broken_start",
    "conversation_questions",
    "conversation_acceptance",
)

FOREIGN_SHARE = 0.5  # a reply with at least this share of words outside the English list is not scored

_BROKEN_START = re.compile(r"(?:is|was|are|it's|it is)\b|[a-z]")  # "is a great movie." (a lost placeholder)

_LIST_TEMPLATE = re.compile(r"i would recommend the following items?", re.IGNORECASE)


def turn_evidence(
    conversation: Conversation, catalog: Catalog, replies: list[Reply], similarity: Similarity
) -> tuple[TurnEvidence, ...]:
    from crs_backends.chatcrs_embedded import genres_in  # the genre words ChatCRS reads: one reading of a wish

    turns = conversation.turns
    system_at = [k for k, t in enumerate(turns) if t.role == "system"]
    broken = [bool(_BROKEN_START.match(r.clean_text.strip())) for r in replies]
    reacted = [r for r in replies if r.reaction is not None]
    context = (
        sum(r.gibberish for r in replies) / len(replies),
        sum(broken) / len(replies),
        sum(r.flags["question"] for r in replies) / len(replies),
        sum(r.accepted for r in reacted) / len(reacted) if reacted else 0.0,
    )
    asked = [(r.request, r.turn.text) for r in replies if r.request]
    closeness = iter(similarity.pairs(asked))
    underlying = cast(Catalog, getattr(catalog, "_catalog", catalog))  # one genre table per catalog, not per memo
    asked_for = {k: set(genres_in(t.text, underlying)) for k, t in enumerate(turns) if t.role == "user"}
    evidence = []
    for j, (k, r) in enumerate(zip(system_at, replies, strict=True)):
        earlier = [asked_for[i] for i in range(k) if i in asked_for]
        wished = earlier[-1] if earlier and earlier[-1] else set().union(*earlier) if earlier else set()
        records = [m.item for m in r.mentions if m.item] + [
            record for record in (catalog.get(i.id) for i in r.turn.items) if record is not None
        ]
        genres = [set(item.genres) for item in records]
        hit = bool(wished) and any(g & wished for g in genres)
        features = (
            float(r.negative),
            float(r.repeated_request),
            float(r.accepted),
            float(r.reaction is None),
            float(bool(records)),
            float(min(len(records), 5)),
            float(r.flags["question"]),
            float(r.gibberish),
            float(r.repeats_earlier),
            float(r.flags["generic"]),
            float(r.flags["reason"]),
            math.log1p(r.words),
            r.unknown / r.words if r.words else 0.0,
            next(closeness) if r.request else 0.0,
            float(hit),
            float(bool(wished) and bool(genres) and not hit),
            float(bool(wished)),
            j / max(1, len(replies) - 1),
            float(j == 0),
            float(broken[j]),
            float(bool(_LIST_TEMPLATE.search(r.turn.text))),
            float(r.unfinished > 0),
            float(r.stutters > 0),
            *context,
        )
        unscorable = None
        if not r.turn.text.strip() and not r.turn.items:
            unscorable = "empty reply"
        elif r.words >= 3 and not r.turn.items and r.unknown / r.words >= FOREIGN_SHARE and not r.degenerate:
            unscorable = "not English (the word list is English only)"
        degenerate = (
            "degenerate text"
            if r.degenerate
            else "gibberish"
            if r.gibberish
            else "repeats an earlier reply"
            if r.repeats_earlier
            else None
        )
        evidence.append(TurnEvidence(k, features, unscorable, degenerate))
    return tuple(evidence)
