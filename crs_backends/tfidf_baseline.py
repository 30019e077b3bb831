"""A retrieval baseline: no language model, ranking by similarity to what the user said.

Useful as the floor every other system should beat, and as a second system
for the arena when nothing else is installed. It ranks catalog items by TF-IDF
similarity to the user's turns (the user's own titles contribute their genres
and directors and are never recommended back), drops what it already
recommended and what the user said they dislike (:mod:`crs_backends.preferences`),
says goodbye to a goodbye, and answers from a few fixed sentence patterns that name the top
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
RANKING_KEPT = 50  # of the whole ranking, kept on the turn for iEvaLM's Recall@k (its top 50)


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
        metadata = {
            "system": "retrieval",
            "catalog": self.catalog.name,
            "user_titles": [i.name for i in context.titles],
            "dislikes": context.dislikes.record(),
        }
        if context.leaving:  # "Thanks, bye!": a goodbye, not two more films
            return Turn(role="system", text=GOODBYE, items=[], metadata={**metadata, "act": "goodbye"})
        already = {ref.id for t in conversation.all_turns if t.role == "system" for ref in t.items}
        exclude = context.title_ids | already
        ranked = [
            i for i in self.catalog.search(context.query, len(self.catalog), exclude=exclude) if context.allows(i)
        ]
        shown = ranked[: self.list_size]
        return Turn(
            role="system",
            text=_reply(shown[:SHOWN], first=not already),
            items=[i.ref() for i in shown],
            ranking=[i.ref() for i in ranked[:RANKING_KEPT]] if len(ranked) > len(shown) else [],
            metadata={**metadata, "act": "recommend" if ranked else "ask"},
        )


GOODBYE = "You're welcome. Enjoy the movie, and come back any time you want another suggestion!"


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
