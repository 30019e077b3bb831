"""A retrieval baseline: no language model, ranking by similarity to what the user said.

Useful as the floor every other system should beat, and as a second system for the arena when nothing else is
installed. It reads the conversation with the request reader (:func:`crs_backends.request_reader.read_request`:
genres and people wanted and ruled out, titles liked, disliked and seen, years, the act), ranks catalog items by
TF-IDF similarity to what is wanted, and orders them by the state (:meth:`RequestState.rank`: nothing ruled out,
the people and years asked for first, then items of every asked genre, then of some; "Any good comedy films?"
gave Good Will Hunting when the raw text was the query). The user's own titles are never recommended back; it
drops what it already recommended, says goodbye to a goodbye, answers a question about a film from the catalog
record (:mod:`crs_backends.film_answers`) without recommending anew, and writes from a few fixed sentence patterns
that name the top items with a reason taken from their metadata. Before anything is said to go on ("Hi!"), it
offers well-known films as that, and asks.
"""

from __future__ import annotations

from catalog.catalog import Catalog
from catalog.items import Item
from crs_backends.base import DEFAULT_LIST_SIZE, CRSSystem, SystemInfo
from crs_backends.chatcrs_embedded import genre_phrase
from crs_backends.film_answers import answer_text
from crs_backends.request_reader import genres_named, read_request
from crs_backends.request_state import RequestState
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
        state = read_request(conversation, self.catalog)
        metadata = {"system": "retrieval", "catalog": self.catalog.name, "understood": state.record()}
        if state.act == "goodbye":  # "Thanks, bye!": a goodbye, not two more films
            return Turn(role="system", text=GOODBYE, items=[], metadata={**metadata, "act": "goodbye"})
        if state.act == "ask_about":  # "Who directed it?": the catalog's answer, no new recommendation
            if state.subject is None:
                return Turn(role="system", text=WHICH_FILM, items=[], metadata={**metadata, "act": "ask"})
            last = next((t.text for t in reversed(conversation.all_turns) if t.role == "user"), "")
            text = answer_text(
                state.subject, state.about, ANSWER_FOLLOWUP, asked_genres=genres_named(last, self.catalog)
            )
            return Turn(
                role="system",
                text=text,
                items=[state.subject.ref()],
                metadata={**metadata, "act": "answer", "answered": state.subject.name},
            )
        already = {ref.id for t in conversation.all_turns if t.role == "system" for ref in t.items}
        # nothing to go on yet ("Hi!", "I want a movie"): well-known films, said to be that, and a question; the
        # raw text as a query gave The Lego Movie for "I want a movie"
        unknown = not state.said_something
        query = "" if unknown else _query(state)  # "": the search's popular-first order
        found = self.catalog.search(query, len(self.catalog), exclude=state.own_title_ids | already)
        ranked = state.rank(found)  # nothing ruled out; what fits first, the search's order within each group
        shown = ranked[: self.list_size]
        if unknown:
            metadata["reason"] = "no preference yet: well-known films"
        return Turn(
            role="system",
            text=_reply(shown[:SHOWN], first=not already, state=state, unknown=unknown),
            items=[i.ref() for i in shown],
            ranking=[i.ref() for i in ranked[:RANKING_KEPT]] if len(ranked) > len(shown) else [],
            metadata={**metadata, "act": "recommend" if ranked else "ask"},
        )


def _query(state: RequestState) -> str:
    """What the search reads: the asked genres (twice: they matter most), the people, the other words, and what
    the titles the person liked or named are about."""
    about = [" ".join((*i.genres, *i.directors)) for i in (*state.liked, *state.seen, *state.mentioned)]
    return " ".join([*state.genres, *state.genres, *state.people, *state.terms, *about])


ASK_HINT = "A genre, a film you liked or an actor helps."
GOODBYE = "You're welcome. Enjoy the movie, and come back any time you want another suggestion!"
ANSWER_FOLLOWUP = "Would you like a suggestion like it, or something different?"
WHICH_FILM = "Which film do you mean? Tell me its title and I will tell you what the catalog says about it."


def _reason(item: Item, asked: tuple[str, ...] = ()) -> str:
    """'an action and adventure film from Michael Bay' (ChatCRS's genre wording, with its article; the asked
    genres first)."""
    who = f" from {item.directors[0]}" if item.directors else ""
    return f"{genre_phrase(item, asked)}{who}"


def _reply(items: list[Item], *, first: bool, state: RequestState | None = None, unknown: bool = False) -> str:
    asked = state.genres if state is not None else ()
    if not items:
        return "I could not find anything in the catalog for that. Could you tell me a genre or a movie you like?"
    parts = " or ".join(f"{i.name}, {_reason(i, asked)}" for i in items)
    if unknown:  # nothing said yet to base a choice on: say so, and ask
        many = len(items) > 1
        lead = f"To start with, {'two well-loved films' if many else 'a well-loved film'}:"
        if not first:
            lead = f"Here {'are two more well-loved films' if many else 'is one more well-loved film'}:"
        return f"{lead} {parts}. What kind of movie are you in the mood for? {ASK_HINT}"
    if state is not None and state.act == "accept" and not first:
        lead = "Glad that sounds good. If you want another, you might like"
    else:
        lead = "Based on what you said, you might like" if first else "Here is something else you might like:"
    return f"{lead} {parts}. Would you like something different?"
