"""Anonymous side-by-side battles: pair choice, both systems answering, one vote, the reveal.

A battle is two conversations (source ``arena``), one per system, fed the same user messages.
Which system sits on which side stays in the database until the battle has its vote: the views
this module gives the UI (:class:`BattleView`) carry the sides' turns with every known system
name masked, and errors in words that name no system.

Votes are accepted once both sides have answered at least once (a side that never answered says
nothing about its quality — FastChat drops such battles too); the database allows exactly one
vote per battle, and a voted battle takes no more messages.
"""

from __future__ import annotations

import logging
import random
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from sqlite_utils import Database

from arena.pairing import draw_pair, pairing_rule
from crs_backends import health, registry
from crs_backends.registry import get_system
from crs_backends.session import ChatSession, prepare_user_message
from storage.battle_votes import DuplicateVote, battle_counts, get_battle, get_vote, save_battle, save_vote
from storage.board_inputs import SET_MARK, vote_tallies
from storage.conversations import get_conversation, has_system_turn, save_conversation, set_status
from storage.db import close_thread_connections, get_db
from storage.human_labels import mark_revealed
from storage.records import Battle, Conversation, ItemRef, Turn, Vote
from storage.text import clean_text

log = logging.getLogger(__name__)

SIDES = ("a", "b")
MASK = "[name hidden]"
FEEDBACK_CHARS = 2000  # a vote's feedback is cut to this many characters

__all__ = [
    "BattleClosed",
    "BattleNotReady",
    "BattleView",
    "DuplicateVote",
    "NotTheVoter",
    "Reveal",
    "SideReply",
    "SideView",
    "battle_view",
    "choose_pair",
    "find_battle",
    "reveal",
    "send",
    "start_battle",
    "vote",
]


class BattleClosed(Exception):
    """The battle already has its vote: it takes no more messages."""


class BattleNotReady(Exception):
    """A vote came before both systems had answered (or a reveal before the vote)."""


class NotTheVoter(Exception):
    """A request about a voted battle from another session than the one that voted."""


@dataclass(frozen=True)
class SideReply:
    """What one side did with one message: its new turn, or an error (in words naming no system)."""

    turn: Turn | None
    error: str | None = None


@dataclass(frozen=True)
class SideView:
    turns: list[Turn]  # texts with system names masked

    @property
    def answered(self) -> bool:
        return any(t.role == "system" for t in self.turns)


@dataclass(frozen=True)
class BattleView:
    """A battle as the UI may show it: no system identity unless ``reveal`` is set."""

    battle_id: str
    a: SideView
    b: SideView
    reveal: Reveal | None

    @property
    def ready(self) -> bool:
        """Both sides answered at least once, and no vote yet."""
        return self.reveal is None and self.a.answered and self.b.answered


@dataclass(frozen=True)
class Reveal:
    """The vote, the systems it was about and their two conversations (whose turn scores the reveal shows)."""

    battle_id: str
    choice: str
    system_a: str
    system_b: str
    label_a: str
    label_b: str
    conversation_a: str = ""
    conversation_b: str = ""


def choose_pair(db: Database, systems: list[str], rng: random.Random, *, rule: str | None = None) -> tuple[str, str]:
    """Two systems as (side A, side B), sides in random order, by the pairing ``rule`` (default: the setting
    ``CRS_ARENA_PAIRING``, :mod:`arena.pairing`): ``informative`` (the default) first lets every pair meet once,
    then draws where the next vote teaches the ranking most, with a floor for every pair; ``fewest`` draws a random
    pair among those with the fewest battles so far."""
    distinct = sorted(set(systems))
    if len(distinct) < 2:
        raise ValueError("a battle needs at least two systems")
    rule = rule or pairing_rule()
    # the battles and votes of what runs now, as the board rates them: a small version's earlier set is another
    # system (its votes never count for the set that runs; a side not answered yet is what runs now)
    rated_as = {registry.board_id(s): s for s in distinct}

    def now(system: str) -> str | None:
        return rated_as.get(system, None if SET_MARK in system else system)

    counts: dict[tuple[str, str], int] = {}
    for pair, n in battle_counts(db).items():
        x, y = now(pair[0]), now(pair[1])
        if x is not None and y is not None:
            key = (x, y) if x <= y else (y, x)
            counts[key] = counts.get(key, 0) + n
    tallies = []
    if rule == "informative":
        for t in vote_tallies(db):
            x, y = now(t["system_a"]), now(t["system_b"])
            if x is not None and y is not None:
                tallies.append((x, y, t["choice"], t["n"]))
    a, b = draw_pair(distinct, counts, tallies, rng, rule=rule)
    return (a, b) if rng.random() < 0.5 else (b, a)


def start_battle(
    db: Database, systems: list[str], rng: random.Random, *, domain: str = "movies", session: str = ""
) -> Battle:
    """Choose a pair (:func:`choose_pair`), store one empty conversation per side and the battle."""
    system_a, system_b = choose_pair(db, systems, rng)
    sides = [
        save_conversation(db, Conversation(system_id=s, domain=domain, source="arena", metadata={"side": side}))
        for s, side in ((system_a, "a"), (system_b, "b"))
    ]
    return save_battle(
        db,
        Battle(
            system_a=system_a,
            system_b=system_b,
            conversation_a=sides[0].id,
            conversation_b=sides[1].id,
            domain=domain,
            session=session,
        ),
    )


def send(battle: Battle, message: str, *, db_path=None) -> dict[str, SideReply]:
    """Send ``message`` to both systems at once and store both sides' turns.

    A side that fails keeps the user's turn, records the error on its conversation
    (``metadata.last_error``) and reports it in its :class:`SideReply`; the other side's answer is
    kept. Raises :class:`~crs_backends.session.EmptyMessage` for an empty message and
    :class:`BattleClosed` once the battle has its vote.
    """
    user_message = prepare_user_message(message)
    db = get_db(db_path)
    if get_vote(db, battle.id) is not None:
        raise BattleClosed("this battle already has its vote: start a new battle")
    conversations = {
        "a": get_conversation(db, battle.conversation_a),
        "b": get_conversation(db, battle.conversation_b),
    }

    def answer(side: str) -> SideReply:
        conversation = conversations[side]
        if conversation is None:  # an imported battle whose side has no dialogue takes no messages
            return SideReply(turn=None, error=f"System {side.upper()} has no conversation in this battle.")
        try:
            session = ChatSession(
                get_system(conversation.system_id, db_path=db_path), db_path=db_path, conversation=conversation
            )
            *_, turn = session.send(user_message)  # text pieces, then the stored turn
            if not isinstance(turn, Turn):
                raise RuntimeError("the system's reply ended without a stored turn")
            return SideReply(turn=turn)
        except Exception as e:  # one side's failure, whatever it is, must not cost the other side
            log.warning("arena system %s failed: %s", conversation.system_id, e, exc_info=True)
            health.note(conversation.system_id, ok=False)  # also when it could not even be loaded
            set_status(get_db(db_path), conversation.id, "active", last_error=str(e))
            return SideReply(turn=None, error=f"System {side.upper()} could not answer (the error is recorded).")
        finally:
            close_thread_connections()

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="arena") as pool:
        futures = {side: pool.submit(answer, side) for side in SIDES}
        replies = {side: f.result() for side, f in futures.items()}
    names = _names()
    return {side: _masked_reply(r, names) for side, r in replies.items()}


def battle_view(db: Database, battle_id: str) -> BattleView:
    """The battle's two sides as stored, system names masked (the reveal names them once voted).

    Raises KeyError for an unknown battle.
    """
    battle = _battle(db, battle_id)
    names = _names()
    sides = {}
    for side, conversation_id in (("a", battle.conversation_a), ("b", battle.conversation_b)):
        conversation = get_conversation(db, conversation_id) if conversation_id else None
        turns = conversation.turns if conversation else []
        sides[side] = SideView([_masked_turn(t, names) for t in turns])
    existing = get_vote(db, battle_id)
    reveal = _reveal(battle, existing.choice) if existing else None
    return BattleView(battle_id=battle_id, a=sides["a"], b=sides["b"], reveal=reveal)


def find_battle(db: Database, battle_id: str | None) -> Battle | None:
    """The stored battle, or None (no id, or no such battle)."""
    return get_battle(db, battle_id) if battle_id else None


def vote(db: Database, battle_id: str, choice: str, feedback: str = "", voter: str = "") -> Reveal:
    """Record the vote (``a``, ``b``, ``tie`` or ``both_bad``) and reveal the two systems. ``feedback``
    is kept cleaned (:func:`storage.text.clean_text`) and cut to :data:`FEEDBACK_CHARS` characters.

    :raises KeyError: unknown battle
    :raises ValueError: unknown choice
    :raises BattleNotReady: a side has not answered yet
    :raises DuplicateVote: the battle already has its vote (the database allows one)
    """
    battle = _battle(db, battle_id)
    record = Vote(
        battle_id=battle_id, choice=choice, feedback=clean_text(feedback or "")[:FEEDBACK_CHARS].strip(), voter=voter
    )
    for side, conversation_id in (("A", battle.conversation_a), ("B", battle.conversation_b)):
        if not conversation_id or not has_system_turn(db, conversation_id):
            raise BattleNotReady(f"System {side} has not answered yet: send a message first")
    save_vote(db, record)
    _tag(db, battle_id)
    return _reveal(battle, choice)


def _tag(db: Database, battle_id: str) -> None:
    """Tag the voted battle (its kinds of request, any name a reply revealed: :mod:`arena.battle_tags`). A failure
    costs the tag only, never the vote: the board's next refresh tags what is left untagged."""
    from arena.battle_tags import tag_battles

    try:
        tag_battles(db, [battle_id])
    except Exception:
        log.warning("battle %s could not be tagged now; the board's refresh will", battle_id, exc_info=True)


def reveal(db: Database, battle_id: str, voter: str = "") -> Reveal:
    """The two systems of a voted battle, shown to its voter (after their ratings, or their skip); records the
    first reveal (:func:`storage.human_labels.mark_revealed`), so a rating given later is known to have seen them.

    :raises KeyError: unknown battle
    :raises BattleNotReady: the battle has no vote yet
    :raises NotTheVoter: ``voter`` is not the session that voted
    """
    battle = _battle(db, battle_id)
    existing = get_vote(db, battle_id)
    if existing is None:
        raise BattleNotReady("Vote first: the names are shown after the vote")
    if existing.voter and existing.voter != voter:
        raise NotTheVoter("Only the person who voted in this battle sees its names here")
    mark_revealed(db, battle_id)
    return _reveal(battle, existing.choice)


def mask(text: str, names: list[str]) -> str:
    """``text`` with each of ``names`` (whole words, any case) replaced by :data:`MASK`."""
    if not names:
        return text
    pattern = r"(?<!\w)(?:" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) + r")(?!\w)"
    return re.sub(pattern, MASK, text, flags=re.IGNORECASE)


def _names() -> list[str]:
    """Every system's id and label: a reply naming any system must not give a side away."""
    return sorted({n for system_id, (label, _) in registry.systems().items() for n in (system_id, label)})


def _masked_turn(turn: Turn, names: list[str]) -> Turn:
    items = [ItemRef(id=i.id, title=mask(i.title, names)) for i in turn.items]
    return replace(turn, text=mask(turn.text, names), items=items)


def _masked_reply(reply: SideReply, names: list[str]) -> SideReply:
    return reply if reply.turn is None else replace(reply, turn=_masked_turn(reply.turn, names))


def _battle(db: Database, battle_id: str) -> Battle:
    battle = find_battle(db, battle_id)
    if battle is None:
        raise KeyError(f"no battle {battle_id!r}")
    return battle


def _reveal(battle: Battle, choice: str) -> Reveal:
    return Reveal(
        battle_id=battle.id,
        choice=choice,
        system_a=battle.system_a,
        system_b=battle.system_b,
        label_a=_label(battle.system_a),
        label_b=_label(battle.system_b),
        conversation_a=battle.conversation_a,
        conversation_b=battle.conversation_b,
    )


def _label(system_id: str) -> str:
    known = registry.systems()
    return known[system_id][0] if system_id in known else system_id
