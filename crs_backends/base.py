"""The interface every system under test implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass

from storage.records import Conversation, Turn

DEFAULT_LIST_SIZE = 10


@dataclass(frozen=True)
class SystemInfo:
    id: str  # stable id stored with conversations: "chatcrs", "kbrd", ...
    label: str  # display name
    variant: str  # what actually runs, e.g. "SmolLM2-135M (embedded)", "published checkpoint"
    demo: bool = False  # True when the variant is a small stand-in whose output is not representative


class CRSSystem(ABC):
    """Given the conversation so far (ending with a user turn), produce the next system turn.

    A system turn carries the reply text and the ranked list of recommended
    items (``Turn.items``), every one of them a catalog item.
    """

    list_size: int = DEFAULT_LIST_SIZE

    @property
    @abstractmethod
    def info(self) -> SystemInfo: ...

    @abstractmethod
    def respond(self, conversation: Conversation) -> Turn: ...

    def stream(self, conversation: Conversation) -> Iterator[str | Turn]:
        """Yield text pieces as they are produced, then the final :class:`Turn`.

        Systems that cannot stream yield the whole text once.
        """
        turn = self.respond(conversation)
        yield turn.text
        yield turn
