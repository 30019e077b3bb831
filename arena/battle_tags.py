"""Tagging voted battles: the kinds of request the first message makes (:mod:`arena.request_kinds`) and the names
the replies revealed before the vote (:mod:`arena.name_reveal`), stored beside the vote (:mod:`storage.battle_tags`).

A vote is tagged when it is stored (:func:`arena.battles.vote`), CRSArena-Dial's when they are imported, and every
voted battle still without a tag (voted before the tags existed, restored from a backup) by :func:`tag_missing`,
which the board's refresh runs. Only the replies are searched for names, never what the person typed.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

from sqlite_utils import Database

from arena.name_reveal import configured_names, names_in
from arena.request_kinds import tag_first_message
from catalog.catalog import Catalog
from storage.battle_tags import BattleTag, save_battle_tags, untagged_voted_battles
from storage.battle_votes import get_battle
from storage.conversations import get_conversation
from storage.records import Turn

log = logging.getLogger(__name__)

_BATCH = 500  # battles tagged per transaction


def _catalog() -> Catalog:
    from crs_backends.registry import catalog_for_chat

    return catalog_for_chat()


def battle_tag(
    battle_id: str,
    sides: list[list[Turn]],
    catalog: Catalog,
    names: Iterable[str] = (),
    hidden: Iterable[str] = (),
) -> BattleTag:
    """The tag of one battle from its sides' turns (history and interaction, in order). ``hidden``: names the page
    masked before the person saw the reply (this app's arena masks every system's id and label,
    :func:`arena.battles.mask`): what the person never saw revealed nothing."""
    kinds, read_by = tag_first_message(sides, catalog)
    extra = tuple(names)
    masked = _masking(tuple(sorted(set(hidden))))
    revealed: list[str] = []
    for turns in sides:
        for turn in turns:
            if turn.role == "system":
                text = masked.sub(" ", turn.text or "") if masked is not None else turn.text or ""
                revealed += [n for n in names_in(text, extra) if n not in revealed]
    return BattleTag(battle_id, kinds, read_by, tuple(revealed))


def _masking(names: tuple[str, ...]) -> re.Pattern[str] | None:
    """The arena's mask as a pattern (whole words, any case), to take out what the page hid."""
    if not names:
        return None
    return re.compile(
        r"(?<!\w)(?:" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) + r")(?!\w)",
        re.IGNORECASE,
    )


def _arena_masked() -> tuple[str, ...]:
    """Every registered system's id and label: what the arena's page masks in a reply before the vote."""
    from crs_backends import registry

    return tuple(sorted({n for system_id, (label, _) in registry.systems().items() for n in (system_id, label)}))


def tag_battles(db: Database, battle_ids: Iterable[str], *, catalog: Catalog | None = None) -> int:
    """Read and store the tags of ``battle_ids`` (unknown ids are skipped); returns how many were stored."""
    catalog = catalog if catalog is not None else _catalog()
    names = configured_names()
    hidden = _arena_masked()
    stored = 0
    batch: list[BattleTag] = []
    for battle_id in battle_ids:
        battle = get_battle(db, battle_id)
        if battle is None:
            continue
        sides = []
        masked = False  # this app's arena page masked the names; an imported battle's page did not
        for conversation_id in (battle.conversation_a, battle.conversation_b):
            conversation = get_conversation(db, conversation_id) if conversation_id else None
            sides.append(conversation.all_turns if conversation is not None else [])
            masked = masked or (conversation is not None and conversation.source == "arena")
        batch.append(battle_tag(battle_id, sides, catalog, names, hidden if masked else ()))
        if len(batch) >= _BATCH:
            stored += save_battle_tags(db, batch)
            batch = []
    return stored + save_battle_tags(db, batch)


def tag_missing(db: Database, *, catalog: Catalog | None = None, limit: int | None = None) -> int:
    """Tag every voted battle that has no read tag yet (``limit``: at most that many, oldest first)."""
    missing = untagged_voted_battles(db, limit)
    return tag_battles(db, missing, catalog=catalog) if missing else 0
