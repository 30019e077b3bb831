"""Checking that a system's turns respect what the person asked for, against constraints written by hand.

A scripted conversation (``tests/data/state_conversations.jsonl``) gives, after each user message, the constraints
in force (``expect``): genres and people ruled out, titles disliked or seen, years, people and an audience
(``"family": true``: a film for a child) asked for, and
whether the message asks about a film (then the reply must recommend nothing new). :func:`problems` checks one
system turn against them; :func:`run_script` talks through a script with a system and checks every turn. The
constraints are the script's, not the system's own reading, so a system that misreads is caught.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from catalog.catalog import Catalog
from catalog.items import Item
from crs_backends.request_state import FAMILY
from storage.records import Conversation, Turn

SCRIPTS_FILE = Path(__file__).resolve().parent.parent / "tests" / "data" / "state_conversations.jsonl"


@dataclass
class CheckedTurn:
    script: str
    user: str
    reply: str
    items: list[str]
    problems: list[str] = field(default_factory=list)

    @property
    def respected(self) -> bool:
        return not self.problems


def load_scripts(path: Path = SCRIPTS_FILE) -> list[dict[str, Any]]:
    """The scripted conversations: ``{"id", "kind", "turns": [{"user", "expect"}]}`` per line."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _named(turn: Turn, catalog: Catalog) -> list[Item]:
    return [m.item for m in catalog.mentions(turn.text or "") if m.item is not None]


def _fits(item: Item, expect: dict[str, Any]) -> bool:
    lo, hi = expect.get("min_year"), expect.get("max_year")
    if (lo is not None or hi is not None) and (
        item.year is None or (lo is not None and item.year < lo) or (hi is not None and item.year > hi)
    ):
        return False
    if expect.get("family") and FAMILY not in item.genres:
        return False
    people = expect.get("people") or []
    return not people or any(p in (*item.directors, *item.cast, *item.writers) for p in people)


def problems(turn: Turn, expect: dict[str, Any], catalog: Catalog, before: Sequence[Item] = ()) -> list[str]:
    """What in ``turn`` goes against ``expect``: an item ruled out (a genre, a person, a disliked or seen title),
    a named item outside the audience, years or people asked for while the catalog had fitting ones, a list that puts an
    unfitting item before a fitting one, or (for a question about a film) a new title named or listed.
    ``before``: the titles named earlier in the conversation (an answer may name them)."""
    listed = [i for i in (catalog.get(ref.id) for ref in turn.items) if i is not None]
    named = _named(turn, catalog)
    out: list[str] = []
    titles = {*expect.get("disliked", []), *expect.get("seen", [])}
    for item in dict.fromkeys([*named, *listed]):
        if set(expect.get("not_genres", [])) & set(item.genres):
            out.append(f"{item.name} is of a ruled-out genre")
        ruled = [p for p in expect.get("not_people", []) if p in (*item.directors, *item.cast, *item.writers)]
        if ruled:
            out.append(f"{item.name} has {ruled[0]}, ruled out")
        if item.name in titles:
            out.append(f"{item.name} was disliked or seen")
    if expect.get("answer"):
        earlier = {i.id for i in before}
        new = [i.name for i in dict.fromkeys([*named, *listed]) if i.id not in earlier]
        if new:
            out.append(f"a question about a film got new titles: {', '.join(new[:3])}")
        return out
    if any(k in expect for k in ("min_year", "max_year", "people", "family")):
        fitting_exists = any(_fits(i, expect) and _allowed(i, expect) for i in catalog.items)
        if fitting_exists:
            out += [
                f"{i.name} is outside the audience, years or people asked for" for i in named if not _fits(i, expect)
            ]
            flags = [_fits(i, expect) for i in listed]
            if True in flags and False in flags and flags.index(False) < len(flags) - flags[::-1].index(True) - 1:
                out.append("the list puts an item outside the audience, years or people before one inside")
    return out


def _allowed(item: Item, expect: dict[str, Any]) -> bool:
    if set(expect.get("not_genres", [])) & set(item.genres):
        return False
    return not any(p in (*item.directors, *item.cast, *item.writers) for p in expect.get("not_people", []))


def run_script(system, script: dict[str, Any], catalog: Catalog) -> list[CheckedTurn]:
    """Talk through ``script`` with ``system`` (a CRSSystem), checking each reply against its ``expect``."""
    conversation = Conversation(system_id=system.info.id, turns=[])
    checked: list[CheckedTurn] = []
    for step in script["turns"]:
        conversation.turns.append(Turn("user", step["user"]))
        before = [i for t in conversation.turns if t.role == "system" for i in _named(t, catalog)]
        before += [
            i for t in conversation.turns if t.role == "system" for i in map(catalog.get, (r.id for r in t.items)) if i
        ]
        turn = system.respond(conversation)
        conversation.turns.append(turn)
        checked.append(
            CheckedTurn(
                script=script["id"],
                user=step["user"],
                reply=turn.text,
                items=[ref.title for ref in turn.items],
                problems=problems(turn, step.get("expect", {}), catalog, before),
            )
        )
    return checked


def respected_share(checked: Sequence[CheckedTurn]) -> float:
    """The share of turns with no problem (1.0 for none)."""
    return sum(c.respected for c in checked) / len(checked) if checked else 1.0
