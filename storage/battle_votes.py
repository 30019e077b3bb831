"""Battles, votes and leaderboard snapshots."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from sqlite_utils import Database

from storage.board_inputs import board_system_sql
from storage.db import write_transaction
from storage.jsonutil import dumps, loads
from storage.records import Battle, Vote, utc_now
from storage.text import clean_text


class DuplicateVote(Exception):
    """The battle already has its vote: the database allows exactly one."""


def save_battle(db: Database, battle: Battle) -> Battle:
    with write_transaction(db):
        db.table("battles").insert(
            {
                "id": battle.id,
                "system_a": battle.system_a,
                "system_b": battle.system_b,
                "conversation_a": battle.conversation_a,
                "conversation_b": battle.conversation_b,
                "domain": battle.domain,
                "session": battle.session,
                "created_at": battle.created_at,
            }
        )
    return battle


def get_battle(db: Database, battle_id: str) -> Battle | None:
    rows = list(db.table("battles").rows_where("id = ?", [battle_id]))
    if not rows:
        return None
    r = rows[0]
    return Battle(
        id=r["id"],
        system_a=r["system_a"],
        system_b=r["system_b"],
        conversation_a=r["conversation_a"],
        conversation_b=r["conversation_b"],
        domain=r["domain"] or "movies",
        session=r["session"] or "",
        created_at=r["created_at"],
    )


def save_vote(db: Database, vote: Vote) -> Vote:
    """Record the vote; raises :class:`DuplicateVote` if the battle already has one."""
    try:
        with write_transaction(db):
            db.execute(
                "insert into votes (battle_id, choice, feedback, voter, created_at) values (?, ?, ?, ?, ?)",
                [vote.battle_id, vote.choice, clean_text(vote.feedback), clean_text(vote.voter), vote.created_at],
            )
    except sqlite3.IntegrityError as e:
        if "UNIQUE" in str(e):
            raise DuplicateVote(f"battle {vote.battle_id} already has a vote") from e
        raise
    return vote


def insert_voted_battles(db: Database, voted: Iterable[tuple[Battle, Vote]]) -> int:
    """Store many battles with their votes at once (restoring a backup: ``arena/hub_restore.py``), in the given order,
    so the votes keep their order on the board. A battle whose id is stored keeps its row, and a battle that has its
    vote keeps that vote: a repeat adds nothing. Returns how many votes were added. One write transaction (a
    savepoint inside the caller's); one ``executemany`` per table, where :func:`save_battle` and :func:`save_vote`
    cost a transaction each."""
    voted = list(voted)
    with write_transaction(db):
        before = db.execute("select count(*) from votes").fetchone()[0]
        db.conn.executemany(
            "insert or ignore into battles (id, system_a, system_b, conversation_a, conversation_b, domain, session, "
            "created_at) values (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                (b.id, b.system_a, b.system_b, b.conversation_a, b.conversation_b, b.domain, b.session, b.created_at)
                for b, _ in voted
            ),
        )
        db.conn.executemany(
            "insert or ignore into votes (battle_id, choice, feedback, voter, created_at) values (?, ?, ?, ?, ?)",
            ((v.battle_id, v.choice, clean_text(v.feedback), clean_text(v.voter), v.created_at) for _, v in voted),
        )
        return db.execute("select count(*) from votes").fetchone()[0] - before


def get_vote(db: Database, battle_id: str) -> Vote | None:
    rows = list(db.table("votes").rows_where("battle_id = ?", [battle_id]))
    if not rows:
        return None
    r = rows[0]
    return Vote(
        battle_id=r["battle_id"],
        choice=r["choice"],
        feedback=r["feedback"] or "",
        voter=r["voter"] or "",
        created_at=r["created_at"],
    )


def voted_battles(db: Database, *, domain: str | None = None, source: str | None = None) -> list[dict]:
    """Every voted battle, oldest vote first, as ``{battle_id, conversation_a, conversation_b, system_a, system_b,
    choice, domain, created_at}``, the sides as the board rates them (a small version with its set,
    ``kbrd_small@v8``: :func:`storage.board_inputs.board_system_sql`); ``domain``: battles of that domain only;
    ``source``: battles whose two conversations both have that source (``arena``, ``crsarena``)."""
    a, b = board_system_sql("b.system_a", "b.conversation_a"), board_system_sql("b.system_b", "b.conversation_b")
    sql = (
        f"select v.battle_id, b.conversation_a, b.conversation_b, {a} as system_a, {b} as system_b, v.choice, "
        "b.domain, v.created_at from votes v join battles b on b.id = v.battle_id"
    )
    where: list[str] = []
    args: list = []
    if source is not None:
        sql += " join conversations ca on ca.id = b.conversation_a join conversations cb on cb.id = b.conversation_b"
        where.append("ca.source = ? and cb.source = ?")
        args += [source, source]
    if domain:
        where.append("b.domain = ?")
        args.append(domain)
    if where:
        sql += " where " + " and ".join(where)
    return list(db.query(sql + " order by v.created_at, v.id", args))


def battle_counts(db: Database) -> dict[tuple[str, str], int]:
    """Number of battles per unordered system pair (keys sorted), the sides as the board rates them
    (:func:`storage.board_inputs.board_system_sql`)."""
    counts: dict[tuple[str, str], int] = {}
    a, b = board_system_sql("system_a", "conversation_a"), board_system_sql("system_b", "conversation_b")
    for r in db.query(f"select {a} as system_a, {b} as system_b, count(*) as n from battles group by 1, 2"):
        key = tuple(sorted((r["system_a"], r["system_b"])))
        counts[key] = counts.get(key, 0) + r["n"]
    return counts


SNAPSHOTS_KEPT = 20  # per filter key: older snapshots are deleted when a new one is written


def board_version(db: Database) -> int:
    """The leaderboard's data version: bumped by triggers on every vote, evaluation and
    conversation system/source change (migration m004). A pure read."""
    row = next(db.query("select version from board_state where id = 1"), None)
    return int(row["version"]) if row else 0


def save_leaderboard_snapshot(
    db: Database,
    rows: list[dict],
    *,
    scorer: str = "",
    filters: dict | None = None,
    version: int | None = None,
    key: str = "",
) -> int | None:
    """Store a computed board for ``key`` (the filters, canonical) at data ``version``.

    Nothing is written when the latest snapshot of ``key`` already has this version (the board did
    not change). Only the newest :data:`SNAPSHOTS_KEPT` snapshots of a key are kept. Returns the new
    snapshot's id, or None when nothing was written.
    """
    with write_transaction(db):
        if version is not None:
            latest = next(
                db.query("select version from leaderboard_snapshots where key = ? order by id desc limit 1", [key]),
                None,
            )
            if latest is not None and latest["version"] == version:
                return None
        table = db.table("leaderboard_snapshots").insert(
            {
                "created_at": utc_now(),
                "filters": dumps(filters or {}),
                "scorer": scorer,
                "rows": dumps(rows),
                "version": version,
                "key": key,
            }
        )
        new_id = table.last_pk
        db.execute(
            "delete from leaderboard_snapshots where key = ? and id not in "
            "(select id from leaderboard_snapshots where key = ? order by id desc limit ?)",
            [key, key, SNAPSHOTS_KEPT],
        )
        return new_id


def latest_leaderboard_snapshot(db: Database, key: str | None = None) -> dict | None:
    """The newest snapshot (of ``key`` when given), with its rows and filters decoded."""
    if key is None:
        rows = list(db.table("leaderboard_snapshots").rows_where(order_by="id desc", limit=1))
    else:
        rows = list(db.table("leaderboard_snapshots").rows_where("key = ?", [key], order_by="id desc", limit=1))
    if not rows:
        return None
    r = rows[0]
    return {**r, "filters": loads(r["filters"], {}), "rows": loads(r["rows"], [])}


def count_leaderboard_snapshots(db: Database) -> int:
    return db.table("leaderboard_snapshots").count
