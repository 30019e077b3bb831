"""Reads for the leaderboard's style control and the arena's pair choice: what each conversation's system replies
look like (text, items listed, latency), and the votes counted per pair of systems."""

from __future__ import annotations

from collections.abc import Iterable

from sqlite_utils import Database

_CHUNK = 500  # conversation ids per query (well under SQLite's limit on bound parameters)


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
    """Votes counted per ``(system_a, system_b, choice)`` over every voted battle: ``{system_a, system_b, choice,
    n}`` (one SQL aggregate, however many votes)."""
    return list(
        db.query(
            "select b.system_a, b.system_b, v.choice, count(*) as n from votes v join battles b on b.id = v.battle_id "
            "group by b.system_a, b.system_b, v.choice order by b.system_a, b.system_b, v.choice"
        )
    )
