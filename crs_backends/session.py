"""A chat between a person and one system, saved turn by turn."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

from crs_backends import health
from crs_backends.base import CRSSystem
from llm_clients.types import LLMError
from storage.conversations import append_turns, set_status
from storage.db import get_db
from storage.records import Conversation, Turn
from storage.text import clean_text

log = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 4000


class EmptyMessage(ValueError):
    """The message has no visible text; nothing is sent."""


@dataclass(frozen=True)
class UserMessage:
    text: str
    notice: str | None = None  # e.g. that the message was truncated


def prepare_user_message(text: str | None, *, limit: int = MAX_MESSAGE_CHARS) -> UserMessage:
    """Validate a message: empty ones are refused, long ones truncated with a notice; characters no
    file can store (lone surrogates, control characters) are replaced or removed, with a notice."""
    text = text if isinstance(text, str) else ""
    cleaned = clean_text(text)
    notice = (
        "Some characters of your message could not be stored and were replaced (�) or removed."
        if cleaned != text
        else None
    )
    text = cleaned.strip()
    if not text or not any(c.isprintable() and not c.isspace() for c in text):
        raise EmptyMessage("Please type a message first: an empty message is not sent.")
    if len(text) > limit:
        return UserMessage(
            text[:limit],
            notice=f"Your message had {len(text):,} characters; only the first {limit:,} were sent.",
        )
    return UserMessage(text, notice)


class ChatSession:
    """Sends user messages to a system and stores both sides of every exchange.

    The user's turn is written before the system is asked, so a failing
    system loses nothing; the failure is recorded on the conversation.
    """

    def __init__(
        self, system: CRSSystem, *, db_path=None, conversation: Conversation | None = None, source: str = "chat"
    ):
        self.system = system
        self.db_path = db_path
        self.conversation = conversation or Conversation(
            system_id=system.info.id,
            source=source,
            metadata={"variant": system.info.variant, "demo": system.info.demo},
        )

    def send(self, message: UserMessage) -> Iterator[str | Turn]:
        """Yield the reply's text pieces and then the saved system :class:`Turn`.

        Raises :class:`LLMError` (after saving the user's turn) if the system's model fails.
        """
        db = get_db(self.db_path)
        user_turn = Turn(role="user", text=message.text, metadata={"truncated": bool(message.notice)})
        append_turns(db, self.conversation, [user_turn])
        self.conversation.turns.append(user_turn)
        system_turn = None
        system_id = self.system.info.id
        try:
            for piece in self.system.stream(self.conversation):
                if isinstance(piece, Turn):
                    system_turn = piece
                else:
                    yield piece
        except Exception as e:
            health.note(system_id, ok=False)  # whatever failed, the arena leaves this system out for a while
            if isinstance(e, LLMError):
                log.warning("system %s failed: %s", system_id, e)
                set_status(get_db(self.db_path), self.conversation.id, "active", last_error=str(e))
            raise
        health.note(system_id, ok=True)
        assert system_turn is not None
        append_turns(get_db(self.db_path), self.conversation, [system_turn])
        self.conversation.turns.append(system_turn)
        yield system_turn
