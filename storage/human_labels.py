"""People's ratings of conversations (table ``human_labels``, migration m006) and their CRSArena-Eval layout.

A rating is one rater's four items for one conversation: after an arena vote (origin ``arena``, one row per side),
in the Chat tab (``chat``), or imported with a published dataset (``crsarena_eval``). One row per conversation,
rater and origin: :func:`save_ratings` replaces an earlier submission and says so.

:func:`crsarena_eval_records` writes the app's own ratings in CRSArena-Eval's JSON layout (``conv_id``,
``dialogue``, ``dial_level_aggregated``), rater ids left out: labels averaged over raters, put on CRSArena-Eval's
scales (understanding, task completion and interest arousal 0-2, the overall 0-4), so ``python -m evaluators meta``
and ``calibrate`` read the file as they read the published one.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from sqlite_utils import Database

from storage.conversations import get_conversation
from storage.db import write_transaction
from storage.records import utc_now

ITEMS: tuple[str, ...] = ("understanding", "task_completion", "interest_arousal", "dialogue_overall")
APP_ORIGINS: tuple[str, ...] = ("arena", "chat")  # ratings people gave in this app
IMPORTED_ORIGIN = "crsarena_eval"
APP_SCALE = 4.0  # the app asks every item on 0-4
CRSARENA_EVAL_SCALES: dict[str, float] = {  # the top of each item's scale in CRSArena-Eval
    "understanding": 2.0,
    "task_completion": 2.0,
    "interest_arousal": 2.0,
    "dialogue_overall": 4.0,
}


@dataclass(frozen=True)
class Rating:
    """One rater's four items for one conversation."""

    conversation_id: str
    system_id: str
    rater: str
    origin: str
    values: Mapping[str, float | None]  # item -> value on the origin's scale
    battle_id: str = ""
    side: str = ""
    names_seen: bool = False


def save_ratings(db: Database, ratings: list[Rating]) -> int:
    """Store ``ratings`` in one transaction; returns how many replaced an earlier rating by the same rater."""
    now = utc_now()
    replaced = 0
    with write_transaction(db):
        for r in ratings:
            earlier = next(
                db.query(
                    "select id, created_at from human_labels where conversation_id = ? and rater = ? and origin = ?",
                    [r.conversation_id, r.rater, r.origin],
                ),
                None,
            )
            row = {
                "conversation_id": r.conversation_id,
                "system_id": r.system_id,
                "battle_id": r.battle_id or None,
                "side": r.side,
                "rater": r.rater,
                "origin": r.origin,
                **{item: r.values.get(item) for item in ITEMS},
                "names_seen": int(r.names_seen),
                "updated_at": now,
            }
            if earlier is None:
                db.table("human_labels").insert({**row, "created_at": now})
            else:
                replaced += 1
                db.table("human_labels").update(earlier["id"], row)
    return replaced


def ratings(
    db: Database, *, origins: tuple[str, ...] = APP_ORIGINS, battle_id: str | None = None, blind_only: bool = False
) -> list[dict]:
    """Stored ratings of ``origins`` (oldest first), with each conversation's source:
    ``conversation_id, system_id, battle_id, side, rater, origin, <items>, names_seen, source``.
    ``blind_only``: leave out arena ratings given after the battle's names were revealed (a chat rating names its
    system by design and stays)."""
    where = [f"h.origin in ({', '.join('?' for _ in origins)})"]
    args: list = list(origins)
    if battle_id is not None:
        where.append("h.battle_id = ?")
        args.append(battle_id)
    if blind_only:
        where.append("not (h.origin = 'arena' and h.names_seen = 1)")
    sql = (
        "select h.conversation_id, h.system_id, h.battle_id, h.side, h.rater, h.origin, "
        + ", ".join(f"h.{item}" for item in ITEMS)
        + ", h.names_seen, c.source from human_labels h join conversations c on c.id = h.conversation_id where "
        + " and ".join(where)
        + " order by h.created_at, h.id"
    )
    return [dict(r) for r in db.query(sql, args)]


def mark_revealed(db: Database, battle_id: str) -> None:
    """Record that the battle's voter has now seen both names (the first time only)."""
    with write_transaction(db):
        db.execute("update battles set revealed_at = ? where id = ? and revealed_at is null", [utc_now(), battle_id])


def revealed(db: Database, battle_id: str) -> bool:
    row = next(db.query("select revealed_at from battles where id = ?", [battle_id]), None)
    return bool(row and row["revealed_at"])


def mean_labels(rows: list[dict]) -> dict[str, dict[str, float | None]]:
    """Each conversation's items averaged over its raters (None where nobody rated the item)."""
    by_conversation: dict[str, list[dict]] = {}
    for r in rows:
        by_conversation.setdefault(r["conversation_id"], []).append(r)
    means: dict[str, dict[str, float | None]] = {}
    for cid, group in by_conversation.items():
        means[cid] = {}
        for item in ITEMS:
            values = [g[item] for g in group if g[item] is not None]
            means[cid][item] = sum(values) / len(values) if values else None
    return means


def export_user(group_id: str) -> str:
    """The "user" uuid an exported conversation carries, as CRS Arena's user ids are: the battle's (both sides share
    it, as a CRS Arena user's two conversations share the user's id) or the chat conversation's."""
    try:
        return str(uuid.UUID(group_id))
    except ValueError:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, group_id))


def export_id(system_id: str, group_id: str) -> str:
    """A CRSArena-Eval / CRSArena-Dial conversation id: ``<system>_<uuid>`` (:func:`export_user`)."""
    return f"{system_id}_{export_user(group_id)}"


def export_keys(rows: list[dict]) -> dict[str, str]:
    """Each rated conversation's CRSArena-Eval ``conv_id`` (:func:`export_id`); an imported conversation keeps its
    own id. The judge-versus-people panel keys its figures the same way, so ``meta`` on an export reproduces them."""
    keys: dict[str, str] = {}
    for r in rows:
        cid = r["conversation_id"]
        if cid in keys:
            continue
        if r["origin"] not in APP_ORIGINS:
            keys[cid] = cid
            continue
        key = export_id(r["system_id"], r["battle_id"] or cid)
        if key in keys.values():  # a battle of a system against itself: the conversation's own id keeps them apart
            key = export_id(r["system_id"], cid)
        keys[cid] = key
    return keys


def crsarena_eval_records(db: Database, *, blind_only: bool = True) -> Iterator[dict]:
    """The app's ratings as CRSArena-Eval records, one per rated conversation (see the module's docstring);
    ``blind_only``: without arena ratings given after the battle's reveal (see :func:`ratings`)."""
    rows = ratings(db, blind_only=blind_only)
    means = mean_labels(rows)
    keys = export_keys(rows)
    first: dict[str, dict] = {}
    raters: dict[str, int] = {}
    for r in rows:
        first.setdefault(r["conversation_id"], r)
        raters[r["conversation_id"]] = raters.get(r["conversation_id"], 0) + 1
    for cid, r in first.items():
        conversation = get_conversation(db, cid)
        if conversation is None:
            continue
        yield {
            "conv_id": keys[cid],
            "conversation_id": cid,
            "system": r["system_id"],
            "origin": r["origin"],
            "raters": raters[cid],
            "dialogue": [
                {"turn_ind": k, "role": "USER" if t.role == "user" else "ASST", "utterance": t.text}
                for k, t in enumerate(conversation.turns)
            ],
            "dial_level_aggregated": {
                item: None if value is None else value * CRSARENA_EVAL_SCALES[item] / APP_SCALE
                for item, value in means[cid].items()
            },
        }
