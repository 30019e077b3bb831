"""Conversations and their turns."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, replace
from itertools import chain
from operator import itemgetter

from sqlite_utils import Database

from storage.db import write_transaction
from storage.jsonutil import dumps, loads
from storage.records import Conversation, ItemRef, Turn, new_id, utc_now
from storage.text import clean_text


def save_conversation(db: Database, conversation: Conversation) -> Conversation:
    """Insert or replace a whole conversation (header, history and turns) atomically."""
    with write_transaction(db):
        db.table("conversations").upsert(_conversation_row(conversation), pk="id")
        db.table("turns").delete_where("conversation_id = ?", [conversation.id])
        _insert_turns(db, conversation)
    return conversation


def store_new_conversation(db: Database, conversation: Conversation) -> tuple[Conversation, str | None]:
    """Store an uploaded or imported conversation without touching any stored one.

    * no conversation has its id: it is stored as it is;
    * the stored one with its id is the same conversation (system, source, every turn's role and
      text; items may have been matched to another catalog): nothing is written and the stored one is
      used (uploading a file again re-uses it, and so does the operator importing a dataset twice);
    * otherwise it gets a new id (``<id>~<8 hex digits>``), is stored under that id, and the id it
      asked for is returned as the second value so the caller can say so.

    Everything happens in one write transaction, so two uploads racing for one id cannot both take it.
    """
    with write_transaction(db):
        existing = get_conversation(db, conversation.id)
        if existing is None:
            _insert_whole(db, conversation)
            return conversation, None
        if _same_content(existing, conversation):
            return existing, None
        asked = conversation.id
        while True:
            candidate = f"{asked[:80]}~{new_id()[:8]}"
            if db.table("conversations").count_where("id = ?", [candidate]) == 0:
                break
        renamed = replace(conversation, id=candidate, metadata={**conversation.metadata, "uploaded_id": asked})
        _insert_whole(db, renamed)
        return renamed, asked


def insert_new_conversations(db: Database, conversations: Iterable[Conversation]) -> int:
    """Store many conversations at once, each whose id is not stored yet (with its turns); a stored id, or an id
    given twice, is left as it is. Returns how many were added.

    For restoring a backup (``arena/hub_restore.py``): the rows are the ones :func:`save_conversation` writes, sent
    with one ``executemany`` per table, so 200,000 conversations take seconds rather than the minutes one
    sqlite-utils insert each would. One write transaction (a savepoint inside the caller's)."""
    with write_transaction(db):
        fresh: dict[str, Conversation] = {}
        for conversation in conversations:
            fresh.setdefault(clean_text(conversation.id), conversation)
        ids = list(fresh) if db.execute("select exists (select 1 from conversations)").fetchone()[0] else []
        for start in range(0, len(ids), _ID_CHUNK):  # ids stored already (none to look up in an empty table)
            chunk = ids[start : start + _ID_CHUNK]
            marks = ", ".join("?" for _ in chunk)
            for row in db.execute(f"select id from conversations where id in ({marks})", chunk).fetchall():
                fresh.pop(row[0], None)
        if not fresh:
            return 0
        now = utc_now()  # one stamp for the whole batch (a clock read per row was a tenth of a large restore)
        _insert_many(db, "conversations", [_conversation_row(c, now) for c in fresh.values()])
        _insert_many(
            db,
            "turns",
            (
                _turn_row(c.id, part, idx, turn, now)
                for c in fresh.values()
                for part, turns in (("history", c.history), ("interaction", c.turns))
                for idx, turn in enumerate(turns)
            ),
        )
    return len(fresh)


_ID_CHUNK = 500  # ids per "in (...)" query, well under SQLite's limit on bound parameters


def _insert_many(db: Database, table: str, rows: Iterable[dict]) -> None:
    """``rows`` (dicts with the same keys) inserted with one ``executemany``."""
    rows = iter(rows)
    first = next(rows, None)
    if first is None:
        return
    columns = list(first)
    sql = f'insert into "{table}" ({", ".join(columns)}) values ({", ".join("?" for _ in columns)})'
    # a row's values as a tuple, in C (a generator per row was a tenth of a restore); one column: still a tuple
    values = itemgetter(*columns) if len(columns) > 1 else (lambda row: (row[columns[0]],))
    db.conn.executemany(sql, map(values, chain([first], rows)))


def _insert_whole(db: Database, conversation: Conversation) -> None:
    db.table("conversations").insert(_conversation_row(conversation))
    _insert_turns(db, conversation)


def _insert_turns(db: Database, conversation: Conversation) -> None:
    """Every turn of ``conversation`` (history, then interaction), numbered within its part."""
    rows = [
        _turn_row(conversation.id, part, idx, turn)
        for part, turns in (("history", conversation.history), ("interaction", conversation.turns))
        for idx, turn in enumerate(turns)
    ]
    if rows:
        db.table("turns").insert_all(rows)


def _same_content(a: Conversation, b: Conversation) -> bool:
    def key(c: Conversation):
        return (
            c.system_id,
            c.source,
            [(t.role, clean_text(t.text)) for t in c.history],
            [(t.role, clean_text(t.text)) for t in c.turns],
        )

    return key(a) == key(b)


def append_turns(db: Database, conversation: Conversation, turns: Iterable[Turn]) -> None:
    """Write ``turns`` after the stored interaction, creating the conversation if needed.

    Only the database changes: the caller keeps ``conversation.turns`` itself.
    When the conversation is new, its ``history`` and ``turns`` are written first.
    """
    turns = list(turns)
    with write_transaction(db):
        if db.table("conversations").count_where("id = ?", [conversation.id]) == 0:
            db.table("conversations").insert(_conversation_row(conversation))
            for idx, turn in enumerate(conversation.history):
                db.table("turns").insert(_turn_row(conversation.id, "history", idx, turn))
            for idx, turn in enumerate(conversation.turns):
                db.table("turns").insert(_turn_row(conversation.id, "interaction", idx, turn))
        start = next(
            db.query(
                "select coalesce(max(idx) + 1, 0) as n from turns where conversation_id = ? and part = 'interaction'",
                [conversation.id],
            )
        )["n"]
        for offset, turn in enumerate(turns):
            db.table("turns").insert(_turn_row(conversation.id, "interaction", start + offset, turn))
        db.table("conversations").update(conversation.id, {"updated_at": utc_now(), "status": conversation.status})


def set_status(db: Database, conversation_id: str, status: str, **metadata) -> None:
    """Change a conversation's status, merging ``metadata`` into its metadata."""
    with write_transaction(db):
        row = db.table("conversations").get(conversation_id)
        merged = {**loads(row["metadata"], {}), **metadata}
        db.table("conversations").update(
            conversation_id, {"status": status, "metadata": dumps(merged), "updated_at": utc_now()}
        )


def merge_metadata(db: Database, conversation_id: str, **metadata) -> dict:
    """Merge ``metadata`` into the conversation's metadata (status unchanged); returns what was there before."""
    with write_transaction(db):
        row = db.table("conversations").get(conversation_id)
        before = loads(row["metadata"], {})
        db.table("conversations").update(
            conversation_id, {"metadata": dumps({**before, **metadata}), "updated_at": utc_now()}
        )
    return before


def get_conversation(db: Database, conversation_id: str) -> Conversation | None:
    rows = list(db.table("conversations").rows_where("id = ?", [conversation_id]))
    if not rows:
        return None
    return _conversation_from_row(db, rows[0])


def has_system_turn(db: Database, conversation_id: str) -> bool:
    """Whether the conversation's judged part holds a system turn (one indexed lookup, no turn is read)."""
    row = db.execute(
        "select 1 from turns where conversation_id = ? and part = 'interaction' and role = 'system' limit 1",
        [conversation_id],
    ).fetchone()
    return row is not None


def list_conversations(
    db: Database,
    *,
    system_id: str | None = None,
    source: str | None = None,
    limit: int | None = None,
) -> list[Conversation]:
    """Conversations, newest first, optionally filtered by system and source."""
    where, args = [], []
    if system_id:
        where.append("system_id = ?")
        args.append(system_id)
    if source:
        where.append("source = ?")
        args.append(source)
    rows = db.table("conversations").rows_where(
        " and ".join(where) or None, args, order_by="created_at desc, rowid desc", limit=limit
    )
    return [_conversation_from_row(db, row) for row in rows]


def _conversation_row(c: Conversation, now: str | None = None) -> dict:
    return {
        "id": clean_text(c.id),
        "system_id": clean_text(c.system_id),
        "domain": clean_text(c.domain),
        "source": c.source,
        "status": clean_text(c.status),
        "targets": dumps([asdict(t) for t in c.targets]),
        "metadata": dumps(c.metadata),
        "created_at": c.created_at,
        "updated_at": now or utc_now(),
    }


def _turn_row(conversation_id: str, part: str, idx: int, turn: Turn, now: str | None = None) -> dict:
    return {
        "conversation_id": conversation_id,
        "part": part,
        "idx": idx,
        "role": turn.role,
        "text": clean_text(turn.text),
        "items": dumps([asdict(i) for i in turn.items]),
        "ranking": dumps([asdict(i) for i in turn.ranking]) if turn.ranking else None,
        "metadata": dumps(turn.metadata),
        "created_at": now or utc_now(),
    }


def _conversation_from_row(db: Database, row: dict) -> Conversation:
    history: list[Turn] = []
    turns: list[Turn] = []
    for t in db.table("turns").rows_where("conversation_id = ?", [row["id"]], order_by="part = 'interaction', idx"):
        turn = Turn(
            role=t["role"],
            text=t["text"],
            items=[ItemRef.from_dict(i) for i in loads(t["items"], [])],
            metadata=loads(t["metadata"], {}),
            ranking=[ItemRef.from_dict(i) for i in loads(t.get("ranking"), [])],
        )
        (history if t["part"] == "history" else turns).append(turn)
    return Conversation(
        id=row["id"],
        system_id=row["system_id"],
        domain=row["domain"] or "movies",
        source=row["source"],
        history=history,
        turns=turns,
        targets=[ItemRef.from_dict(t) for t in loads(row["targets"], [])],
        metadata=loads(row["metadata"], {}),
        status=row["status"] or "active",
        created_at=row["created_at"],
    )
