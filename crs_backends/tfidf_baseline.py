"""A retrieval baseline: no language model, ranking by similarity to what the user said.

Useful as the floor every other system should beat, and as a second system
for the arena when nothing else is installed. It ranks catalog items by TF-IDF
similarity to the user's turns (the user's own titles contribute their genres
and directors and are never recommended back), drops what it already
recommended, and answers from a few fixed sentence patterns that name the top
items with a reason taken from their metadata.
"""

from __future__ import annotations

from catalog.catalog import Catalog
from catalog.items import Item
from crs_backends.base import DEFAULT_LIST_SIZE, CRSSystem, SystemInfo
from crs_backends.constrained import genre_phrase
from crs_backends.user_context import user_context
from storage.records import Conversation, Turn

SHOWN = 2  # items named in the reply text


class RetrievalCRS(CRSSystem):
    def __init__(self, catalog: Catalog, *, list_size: int = DEFAULT_LIST_SIZE):
        self.catalog = catalog
        self.list_size = list_size

    @property
    def info(self) -> SystemInfo:
        return SystemInfo(id="retrieval", label="Retrieval baseline", variant="TF-IDF over the catalog, no LLM")

    def warm_up(self) -> None:
        self.catalog.retriever, self.catalog.matcher  # noqa: B018 (cached properties)

    def respond(self, conversation: Conversation) -> Turn:
        context = user_context(conversation, self.catalog)
        already = {ref.id for t in conversation.all_turns if t.role == "system" for ref in t.items}
        ranked = self.catalog.search(context.query, self.list_size, exclude=context.title_ids | already)
        return Turn(
            role="system",
            text=_reply(ranked[:SHOWN], first=not already),
            items=[i.ref() for i in ranked],
            metadata={
                "system": "retrieval",
                "catalog": self.catalog.name,
                "user_titles": [i.name for i in context.titles],
            },
        )


def _reason(item: Item) -> str:
    """'an action and adventure film from Michael Bay' (ChatCRS's genre wording, with its article)."""
    who = f" from {item.directors[0]}" if item.directors else ""
    return f"{genre_phrase(item)}{who}"


def _reply(items: list[Item], *, first: bool) -> str:
    if not items:
        return "I could not find anything in the catalog for that. Could you tell me a genre or a movie you like?"
    lead = "Based on what you said, you might like" if first else "Here is something else you might like:"
    parts = [f"{i.name}, {_reason(i)}" for i in items]
    return f"{lead} {' or '.join(parts)}. Would you like something different?"
