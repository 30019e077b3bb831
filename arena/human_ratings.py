"""People rate what the judge rates: four items, 0-4, for each side of a voted battle or for one chat conversation.

The items are CRSArena-Eval's dialogue aspects, asked in plain words (:data:`QUESTIONS`). After an arena vote they
come *before* the names are revealed: a rating given knowing that side A was, say, a famous LLM measures the name as
much as the conversation, and these ratings exist to check the judge, which never sees names. The price is a second
click before the reveal, so the step is one tap per item and can be skipped in one click (the reveal then follows
at once). A battle rated after its reveal (through the API) is still stored, marked ``names_seen``, and left out of
the judge-versus-people figures and the export. In the Chat tab the person chose the system, so its name is known
by design (``names_seen``), as for any single-system rating; those ratings count.

Rules: every item is required and an integer 0-4; only the session that voted rates a battle, and only once it has
its vote; a second submission by the same rater replaces the first and says so. Nothing is stored for a refused
submission.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlite_utils import Database

from storage.battle_votes import get_battle, get_vote
from storage.conversations import get_conversation, merge_metadata
from storage.human_labels import ITEMS, Rating, revealed, save_ratings

QUESTIONS: dict[str, str] = {
    "understanding": "Understood what I wanted",
    "task_completion": "The recommendations fit",
    "interest_arousal": "Made me want to watch something",
    "dialogue_overall": "Overall",
}
SCALE = (0, 1, 2, 3, 4)
CHAT_SOURCES = ("chat",)
SENTIMENTS: dict[str, str] = {"satisfied": "😊 Satisfied", "frustrated": "😠 Frustrated"}  # CRS Arena's two endings


class RatingRefused(ValueError):
    """A rating that cannot be stored; the message says why, in words for the person who gave it."""


@dataclass(frozen=True)
class Receipt:
    """What was stored: conversations rated, and whether an earlier rating by the same person was replaced."""

    rated: int
    replaced: bool

    def message(self) -> str:
        if self.replaced:
            return "Your ratings replaced the ones you gave earlier."
        return "Thank you: your ratings are stored."


def parse_items(values: Mapping[str, object] | None, *, who: str = "") -> dict[str, float]:
    """The four items as numbers, or :class:`RatingRefused` naming what is missing or wrong."""
    where = f" for {who}" if who else ""
    if not isinstance(values, Mapping):
        raise RatingRefused(f"Expected the four ratings{where}, each 0-4.")
    parsed: dict[str, float] = {}
    missing = [QUESTIONS[item] for item in ITEMS if values.get(item) in (None, "")]
    if missing:
        raise RatingRefused(f"Please rate every item{where}: missing “{'”, “'.join(missing)}”.")
    for item in ITEMS:
        raw = values[item]
        number = _integer(raw)
        if number is None or number not in SCALE:
            shown = str(raw)[:20]
            raise RatingRefused(f"“{QUESTIONS[item]}”{where} must be a whole number from 0 to 4, not “{shown}”.")
        parsed[item] = float(number)
    unknown = sorted(str(k)[:40] for k in values if k not in ITEMS)
    if unknown:
        raise RatingRefused(f"Unknown rating item(s){where}: {', '.join(unknown)}.")
    return parsed


def _integer(raw: object) -> int | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    if isinstance(raw, str) and raw.strip().isdigit():
        return int(raw.strip())
    return None


def rate_battle(
    db: Database, battle_id: str | None, rater: str, side_a: Mapping[str, object], side_b: Mapping[str, object]
) -> Receipt:
    """Store the voter's ratings of both sides of a voted battle.

    :raises RatingRefused: unknown battle, no vote yet, not the voter, or items missing or out of range
    """
    battle = get_battle(db, battle_id) if battle_id else None
    if battle is None:
        raise RatingRefused("There is no battle to rate: start one and vote first.")
    existing = get_vote(db, battle.id)
    if existing is None:
        raise RatingRefused("Vote first: the ratings come after the vote.")
    if existing.voter and existing.voter != rater:
        raise RatingRefused("Only the person who voted in this battle can rate it.")
    values = {"a": parse_items(side_a, who="System A"), "b": parse_items(side_b, who="System B")}
    names_seen = revealed(db, battle.id)
    replaced = save_ratings(
        db,
        [
            Rating(
                conversation_id=conversation_id,
                system_id=system_id,
                rater=rater,
                origin="arena",
                values=values[side],
                battle_id=battle.id,
                side=side,
                names_seen=names_seen,
            )
            for side, conversation_id, system_id in (
                ("a", battle.conversation_a, battle.system_a),
                ("b", battle.conversation_b, battle.system_b),
            )
        ],
    )
    return Receipt(rated=2, replaced=bool(replaced))


def rate_conversation(db: Database, conversation_id: str | None, rater: str, items: Mapping[str, object]) -> Receipt:
    """Store one person's ratings of a conversation they held in the Chat tab (the system's name is shown there).

    :raises RatingRefused: no such chat conversation, no reply yet, or items missing or out of range
    """
    conversation = get_conversation(db, conversation_id) if conversation_id else None
    if conversation is None or conversation.source not in CHAT_SOURCES:
        raise RatingRefused("There is no conversation to rate yet: chat first.")
    if not any(t.role == "system" for t in conversation.turns):
        raise RatingRefused("The system has not answered yet: there is nothing to rate.")
    values = parse_items(items)
    replaced = save_ratings(
        db,
        [
            Rating(
                conversation_id=conversation.id,
                system_id=conversation.system_id,
                rater=rater,
                origin="chat",
                values=values,
                names_seen=True,  # the Chat tab names the system the person chose
            )
        ],
    )
    return Receipt(rated=1, replaced=bool(replaced))


def end_with_sentiment(
    db: Database,
    sentiment: str | None,
    *,
    conversation_id: str | None = None,
    battle_id: str | None = None,
    side: str | None = None,
    session: str = "",
) -> str:
    """Record how a conversation ended for the person who held it, as CRS Arena's *Satisfied* / *Frustrated*
    buttons did (its ``metadata.sentiment``): a Chat-tab conversation by its id, or one side of the session's
    battle (before or after the vote: it names no system). A second choice replaces the first. Returns the
    message for the person.

    :raises RatingRefused: an unknown sentiment, no such conversation or battle, another session's battle, or a
        conversation the system has not answered yet
    """
    if sentiment not in SENTIMENTS:
        raise RatingRefused(f"Choose how the conversation ended: {' or '.join(SENTIMENTS)}.")
    if battle_id is not None or side is not None:
        battle = get_battle(db, battle_id) if battle_id else None
        if battle is None or side not in ("a", "b"):
            raise RatingRefused("There is no battle to end yet: send a message first.")
        if battle.session and battle.session != session:
            raise RatingRefused("Only the person who holds this battle can say how it ended.")
        conversation_id = battle.conversation_a if side == "a" else battle.conversation_b
    conversation = get_conversation(db, conversation_id) if conversation_id else None
    if conversation is None or (battle_id is None and conversation.source not in CHAT_SOURCES):
        raise RatingRefused("There is no conversation to end yet: chat first.")
    if not any(t.role == "system" for t in conversation.turns):
        raise RatingRefused("The system has not answered yet: there is nothing to end.")
    before = merge_metadata(db, conversation.id, sentiment=sentiment)
    name = SENTIMENTS[sentiment]
    if before.get("sentiment") and before["sentiment"] != sentiment:
        return f"Changed to {name} (it was {SENTIMENTS.get(before['sentiment'], before['sentiment'])})."
    return f"Recorded: {name}."


__all__ = [
    "QUESTIONS",
    "Receipt",
    "RatingRefused",
    "SENTIMENTS",
    "end_with_sentiment",
    "parse_items",
    "rate_battle",
    "rate_conversation",
]
