"""Reading the database out as JSON-serialisable rows: conversations, votes, judgments, people's ratings.

Used to publish data (``arena/hub_sync.py``) and for backups that any tool can
read. Every function returns plain dicts and lists, ready for ``json.dumps``,
in a stable order (oldest first), so two exports of an unchanged database are
identical.

Votes are exported without the ``voter`` column and ratings without their rater: either may identify a person.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict

from sqlite_utils import Database

from storage.conversations import get_conversation
from storage.evaluations import get_evaluation
from storage.human_labels import crsarena_eval_records
from storage.jsonutil import loads


def conversation_rows(db: Database) -> Iterator[dict]:
    """Every conversation as ``Conversation.to_dict()`` (history, turns with items, targets, metadata)."""
    for row in db.query("select id from conversations order by created_at, rowid"):
        conversation = get_conversation(db, row["id"])
        if conversation is not None:
            yield conversation.to_dict()


def vote_rows(db: Database) -> Iterator[dict]:
    """Every vote with its battle: both systems, both conversation ids, the choice and feedback, and the battle's
    tag (migration m008): ``kinds`` (the kinds of request its first message makes), ``read_by`` (how it was read)
    and ``revealed_names`` (names a reply revealed before the vote: such a vote is kept here though the board sets it
    aside); the three are None for a battle not tagged yet."""
    for row in db.query(
        "select v.battle_id, b.domain, b.system_a, b.system_b, b.conversation_a, b.conversation_b, "
        "v.choice, v.feedback, v.created_at, t.kinds, t.read_by, t.names "
        "from votes v join battles b on b.id = v.battle_id left join battle_tags t on t.battle_id = v.battle_id "
        "order by v.created_at, v.id"
    ):
        tagged = row["kinds"] is not None
        names = row.pop("names")
        row["kinds"] = loads(row["kinds"], []) if tagged else None
        row["read_by"] = row["read_by"] if tagged else None
        row["revealed_names"] = loads(names, []) if tagged else None
        yield row


def judgment_rows(db: Database) -> Iterator[dict]:
    """Every evaluation with its factor scores and debate messages (``Evaluation`` as a dict)."""
    for row in db.query("select id from evaluations order by created_at, rowid"):
        evaluation = get_evaluation(db, row["id"])
        if evaluation is not None:
            yield asdict(evaluation)


EXPORTS = {
    "conversations": conversation_rows,
    "votes": vote_rows,
    "judgments": judgment_rows,
    "human_labels": crsarena_eval_records,  # people's ratings, CRSArena-Eval's layout, no rater ids
}
