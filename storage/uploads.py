"""Uploaded logs live in their own namespace, so an anonymous upload cannot touch the board.

An upload (the Evaluate tab, ``/evaluate``) is anonymous input. Its conversations are stored

* with source ``upload`` and system id ``upload:<name>`` (``<name>``: 1–40 letters, digits, ``.``,
  ``_`` or ``-``, starting with a letter or digit; anything else refuses the upload with a message);
* never over, beside or instead of a stored conversation: an id that is taken by a different
  conversation gets a new id (``<id>~<8 hex digits>``) and the report names both; the same
  conversation uploaded again is the stored one (its finished evaluation is reused);
* out of the main leaderboard: :mod:`arena.board_compute` leaves source ``upload`` out unless the
  operator sets ``CRS_ARENA_LEADERBOARD_UPLOADS=1`` or promotes them with
  ``python -m arena promote-uploads`` (source ``import``, the ``upload:`` name kept).

The command line (``python -m evaluators evaluate``) is the operator's own import: its
conversations keep their system ids (1–80 characters, no control or markup characters) and source
``import``, with the same id rule.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace

from sqlite_utils import Database

from storage.conversations import store_new_conversation
from storage.db import write_transaction
from storage.records import Conversation

UPLOAD_PREFIX = "upload:"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}")
MAX_ID_CHARS = 120
SETTING = "CRS_ARENA_LEADERBOARD_UPLOADS"


class UploadRefused(ValueError):
    """The upload breaks a rule of the namespace; the message says which, for people."""


def uploads_on_leaderboard(env=None) -> bool:
    """Whether the operator put uploaded systems on the main leaderboard (``CRS_ARENA_LEADERBOARD_UPLOADS``)."""
    value = (env if env is not None else os.environ).get(SETTING, "")
    return value.strip().lower() in ("1", "true", "yes", "on")


def checked_name(system_id: str) -> str:
    """``system_id`` without a leading ``upload:``, checked (length, characters)."""
    name = system_id[len(UPLOAD_PREFIX) :] if system_id.startswith(UPLOAD_PREFIX) else system_id
    if not NAME.fullmatch(name):
        shown = name if len(name) <= 40 else name[:40] + "…"
        raise UploadRefused(
            f"system id {shown!r}: use 1–40 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return name


OPERATOR_NAME = re.compile(r"[^\x00-\x1f\x7f<>&]{1,80}")


def operator_system_id(system_id: str) -> str:
    """A system id from the operator's own import (command line): 1–80 characters, no control
    characters or markup characters; otherwise kept as written (published ids such as ``chatgpt(0613)``)."""
    name = system_id.strip()
    if not OPERATOR_NAME.fullmatch(name):
        raise UploadRefused(f"system id {name[:40]!r}: use 1–80 characters without control characters, '<', '>' or '&'")
    return name


def upload_system_id(system_id: str) -> str:
    """The namespaced id of an uploaded system: ``upload:<name>``."""
    return UPLOAD_PREFIX + checked_name(system_id)


@dataclass
class StoreReport:
    """What storing an upload did: the conversations to judge (stored ids), renamed ids, reused ones."""

    conversations: list[Conversation] = field(default_factory=list)
    renamed: list[tuple[str, str]] = field(default_factory=list)  # (id asked for, id given)
    reused: int = 0

    def notes(self) -> list[str]:
        notes = []
        if self.renamed:
            shown = "; ".join(f"{a} → {b}" for a, b in self.renamed[:10])
            more = f" and {len(self.renamed) - 10} more" if len(self.renamed) > 10 else ""
            notes.append(
                f"{len(self.renamed)} id(s) were already taken by other conversations and got new ids: {shown}{more}"
            )
        if self.reused:
            notes.append(f"{self.reused} conversation(s) are already stored (the same turns) and are reused as stored")
        return notes


def validate(conversations: list[Conversation], *, upload: bool = True) -> list[Conversation]:
    """Copies of ``conversations`` ready to store: namespaced system ids (for uploads), source
    ``upload`` (or ``import``), ids checked. Raises :class:`UploadRefused` on the first bad one."""
    ready = []
    for c in conversations:
        if not isinstance(c.id, str) or not c.id.strip():
            raise UploadRefused("a conversation has an empty id")
        if len(c.id) > MAX_ID_CHARS:
            raise UploadRefused(f"conversation id {c.id[:40]!r}…: ids have at most {MAX_ID_CHARS} characters")
        system_id = upload_system_id(c.system_id) if upload else operator_system_id(c.system_id)
        ready.append(replace(c, id=c.id.strip(), system_id=system_id, source="upload" if upload else "import"))
    return ready


def store(db: Database, conversations: list[Conversation], *, upload: bool = True) -> StoreReport:
    """Validate (:func:`validate`) and store every conversation without touching stored ones, in one
    transaction: an upload is stored whole or not at all."""
    report = StoreReport()
    ready = validate(conversations, upload=upload)
    with write_transaction(db):
        for c in ready:
            stored, asked = store_new_conversation(db, c)
            if asked is not None:
                report.renamed.append((asked, stored.id))
            elif stored is not c:
                report.reused += 1
            report.conversations.append(stored)
    return report
