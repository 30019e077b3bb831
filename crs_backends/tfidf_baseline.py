"""A retrieval baseline: no language model, ranking by similarity to what the user said.

Useful as the floor every other system should beat, and as a second system
for the arena when nothing else is installed. It reads the user's turns as ChatCRS
does (:func:`crs_backends.chatcrs_embedded.read_wishes`: asked genres, searchable words,
a year range; generic words such as "good" or "movie" say nothing), ranks catalog
items by TF-IDF similarity to that, and puts the items that have every asked genre
first, then those with some ("Any good comedy films?" gave Good Will Hunting when
the raw text was the query). The user's own titles contribute their genres
and directors and are never recommended back; it drops what it already
recommended and what the user said they dislike (:mod:`crs_backends.preferences`),
says goodbye to a goodbye, and answers from a few fixed sentence patterns that name the top
items with a reason taken from their metadata. Before anything is said to go on ("Hi!"), it offers
well-known films as that, and asks.
"""

from __future__ import annotations

from catalog.catalog import Catalog
from catalog.items import Item
from crs_backends.base import DEFAULT_LIST_SIZE, CRSSystem, SystemInfo
from crs_backends.chatcrs_embedded import Wishes, genre_phrase, read_wishes
from crs_backends.user_context import UserContext, user_context
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
        wishes = read_wishes(context.wanted_texts, self.catalog, user_titles=context.titles)
        metadata["wishes"] = wishes.record()
        # nothing to go on yet ("Hi!", "I want a movie"): well-known films, said to be that, and a question; the
        # raw text as a query gave The Lego Movie for "I want a movie"
        unknown = not wishes.said_something and not context.titles
        if unknown:
            query = ""  # the search's popular-first order
        elif wishes.said_something:
            query = _query(wishes, context)
        else:
            query = context.query
        found = [i for i in self.catalog.search(query, len(self.catalog), exclude=exclude) if context.allows(i)]
        ranked = sorted(found, key=wishes.rank_key)  # the search's order within each group
        shown = ranked[: self.list_size]
        if unknown:
            metadata["reason"] = "no preference yet: well-known films"
        return Turn(
            role="system",
            text=_reply(shown[:SHOWN], first=not already, asked=wishes.genres, unknown=unknown),
            items=[i.ref() for i in shown],
            ranking=[i.ref() for i in ranked[:RANKING_KEPT]] if len(ranked) > len(shown) else [],
            metadata={**metadata, "act": "recommend" if ranked else "ask"},
        )


def _query(wishes: Wishes, context: UserContext) -> str:
    """What the search reads: the asked genres (twice: they matter most), the other words, what the user's
    titles are about."""
    return " ".join([*wishes.genres, *wishes.genres, *wishes.terms, context.titles_about])


ASK_HINT = "A genre, a film you liked or an actor helps."
GOODBYE = "You're welcome. Enjoy the movie, and come back any time you want another suggestion!"


def _reason(item: Item, asked: tuple[str, ...] = ()) -> str:
    """'an action and adventure film from Michael Bay' (ChatCRS's genre wording, with its article; the asked
    genres first)."""
    who = f" from {item.directors[0]}" if item.directors else ""
    return f"{genre_phrase(item, asked)}{who}"


def _reply(items: list[Item], *, first: bool, asked: tuple[str, ...] = (), unknown: bool = False) -> str:
    if not items:
        return "I could not find anything in the catalog for that. Could you tell me a genre or a movie you like?"
    parts = " or ".join(f"{i.name}, {_reason(i, asked)}" for i in items)
    if unknown:  # nothing said yet to base a choice on: say so, and ask
        many = len(items) > 1
        lead = f"To start with, {'two well-loved films' if many else 'a well-loved film'}:"
        if not first:
            lead = f"Here {'are two more well-loved films' if many else 'is one more well-loved film'}:"
        return f"{lead} {parts}. What kind of movie are you in the mood for? {ASK_HINT}"
    lead = "Based on what you said, you might like" if first else "Here is something else you might like:"
    return f"{lead} {parts}. Would you like something different?"
