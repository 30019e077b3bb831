"""Reads for the leaderboard's style control and the arena's pair choice: what each conversation's system replies
look like (text, items listed, latency), and the votes counted per pair of systems; and the id a conversation is
rated under on the board (:func:`board_system_sql`)."""

from __future__ import annotations

from collections.abc import Iterable

from sqlite_utils import Database

_CHUNK = 500  # conversation ids per query (well under SQLite's limit on bound parameters)
SET_MARK = "@"  # kbrd_small@v8: the small KBRD of set v8


def board_system_sql(system: str, conversation: str) -> str:
    """SQL for the id the conversation ``conversation`` (a column holding its id) of the system ``system`` (a column)
    is rated under: the system's id, and for a small local version the set that answered too (``kbrd_small@v8``,
    #72), read from its first system turn that records one (``metadata.origin`` ``small local``, ``metadata.version``:
    every neural turn records both). So votes and scores a set earned count for that set's row only, never for a
    later set under the same name; a conversation whose turns record no set keeps the plain id."""
    turn_set = (
        "select json_extract(t.metadata, '$.version') from turns t "
        f"where t.conversation_id = {conversation} and t.role = 'system' and json_valid(t.metadata) "
        "and json_extract(t.metadata, '$.origin') = 'small local' "
        "and coalesce(json_extract(t.metadata, '$.version'), '') != '' order by t.rowid limit 1"
    )
    return f"coalesce({system} || '{SET_MARK}' || ({turn_set}), {system})"


def system_replies(db: Database, conversation_ids: Iterable[str | None]) -> dict[str, list[dict]]:
    """The system turns of each conversation's interaction (its judged part), in order, as ``{text, items,
    latency_ms}``: ``items`` the number of items the turn listed, ``latency_ms`` the answer time the system
    recorded (``metadata.latency_ms``; None when it recorded none, as imported conversations). Conversations
    without a system turn (or unknown ids) are absent."""
    ids = list(dict.fromkeys(i for i in conversation_ids if i))
    replies: dict[str, list[dict]] = {}
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        marks = ", ".join("?" for _ in chunk)
        sql = f"""
            select conversation_id, text,
                case when json_valid(items) then json_array_length(items) else 0 end as items,
                case when json_valid(metadata) then json_extract(metadata, '$.latency_ms') end as latency_ms
            from turns
            where role = 'system' and part = 'interaction' and conversation_id in ({marks})
            order by conversation_id, idx
        """
        for row in db.query(sql, chunk):
            latency = row["latency_ms"]
            replies.setdefault(row["conversation_id"], []).append(
                {
                    "text": row["text"] or "",
                    "items": int(row["items"] or 0),
                    "latency_ms": float(latency) if isinstance(latency, int | float) else None,
                }
            )
    return replies


def vote_tallies(db: Database) -> list[dict]:
    """Votes counted per ``(system_a, system_b, choice)`` over every voted battle, the sides as the board rates them
    (:func:`board_system_sql`): ``{system_a, system_b, choice, n}`` (one SQL aggregate, however many votes)."""
    a, b = board_system_sql("b.system_a", "b.conversation_a"), board_system_sql("b.system_b", "b.conversation_b")
    return list(
        db.query(
            f"select {a} as system_a, {b} as system_b, v.choice, count(*) as n "
            "from votes v join battles b on b.id = v.battle_id group by 1, 2, 3 order by 1, 2, 3"
        )
    )
