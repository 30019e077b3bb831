"""Battle tags (migration m008): per voted battle, the kinds of request its first message makes, how it was read,
and the names its replies revealed before the vote (``arena/battle_tags.py`` computes them)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlite_utils import Database

from storage.db import write_transaction
from storage.jsonutil import dumps, loads
from storage.records import utc_now


@dataclass(frozen=True)
class BattleTag:
    battle_id: str
    kinds: tuple[str, ...]
    read_by: str
    names: tuple[str, ...] = ()  # what a reply revealed; empty: the vote stayed anonymous

    @property
    def revealed(self) -> bool:
        return bool(self.names)


def save_battle_tags(db: Database, tags: Iterable[BattleTag], *, replace: bool = True) -> int:
    """Store tags in one transaction, replacing a battle's tag (``replace``) or keeping one that was read already
    (a restore); returns how many were given."""
    rows = [(t.battle_id, dumps(list(t.kinds)), t.read_by, dumps(list(t.names)), utc_now()) for t in tags]
    if rows:
        conflict = (
            "insert or replace into battle_tags (battle_id, kinds, read_by, names, tagged_at) values (?, ?, ?, ?, ?)"
            if replace
            else "insert into battle_tags (battle_id, kinds, read_by, names, tagged_at) values (?, ?, ?, ?, ?) "
            "on conflict (battle_id) do update set kinds = excluded.kinds, read_by = excluded.read_by, "
            "names = excluded.names, tagged_at = excluded.tagged_at where battle_tags.kinds is null"
        )
        with write_transaction(db):
            db.conn.executemany(conflict, rows)
    return len(rows)


def tag_from_export(row: dict) -> BattleTag | None:
    """The tag an exported vote row carries (``kinds``, ``read_by``, ``revealed_names``:
    :func:`storage.export.vote_rows`), or None when it carries none or a malformed one (the board's refresh then reads
    the battle again)."""
    kinds, names, read_by = row.get("kinds"), row.get("revealed_names"), row.get("read_by")
    if not isinstance(kinds, list) or not kinds or not all(isinstance(k, str) and len(k) <= 40 for k in kinds):
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names) or not isinstance(read_by, str):
        return None
    battle_id = row.get("battle_id")
    if not isinstance(battle_id, str) or not battle_id:
        return None
    return BattleTag(battle_id, tuple(kinds), read_by, tuple(names))


def battle_tags(db: Database) -> dict[str, BattleTag]:
    """Every battle's tag that was read (a row the migration left unread is absent)."""
    out = {}
    for r in db.query("select battle_id, kinds, read_by, names from battle_tags where kinds is not null"):
        kinds = loads(r["kinds"], [])
        names = loads(r["names"], [])
        out[r["battle_id"]] = BattleTag(
            r["battle_id"],
            tuple(str(k) for k in kinds) if isinstance(kinds, list) else (),
            r["read_by"] or "",
            tuple(str(n) for n in names) if isinstance(names, list) else (),
        )
    return out


def untagged_voted_battles(db: Database, limit: int | None = None) -> list[str]:
    """Voted battles without a read tag (voted before the tags, restored from a backup, or left unread), oldest
    first."""
    sql = (
        "select v.battle_id from votes v left join battle_tags t on t.battle_id = v.battle_id "
        "where t.kinds is null order by v.created_at, v.id"
    )
    if limit is not None:
        sql += f" limit {int(limit)}"
    return [r["battle_id"] for r in db.query(sql)]
