"""The kinds of request a battle's first message makes, for the boards per kind (LMArena's category boards, for
CRSs): which system handles a genre request, a person, a decade, a title to match, a question about a film, a
ruled-out genre, a request for a given audience, or an open one.

A battle's kinds come from the request reader's state after its first message
(:class:`crs_backends.request_state.RequestState`, as :meth:`~crs_backends.request_state.RequestState.record` stores
it on every reply of ChatCRS and the retrieval baseline, ``metadata["understood"]``):

* ``genre``: a genre is asked for (Family aside: that is the audience);
* ``person``: an actor, director or writer is asked for;
* ``years``: a year, a decade or a range;
* ``title``: a title to match ("like Heat"): liked, or named without a feeling;
* ``ruled_out``: a genre, a person or a title is ruled out, or words that match nothing ("no gore");
* ``question``: a question about a film (who directed it, what it is about);
* ``audience``: who it is for ("for my kid", "a family movie");
* ``open``: none of these ("something good", a greeting, a message that reads as nothing).

A battle can carry several. How the message was read is kept too: ``rules`` (the reader over the catalog's
vocabulary) or ``model`` (the structured LLM call, when a side's reply recorded that reading).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from storage.records import Turn

if TYPE_CHECKING:
    from catalog.catalog import Catalog

log = logging.getLogger(__name__)

KINDS = ("genre", "person", "years", "title", "ruled_out", "question", "audience", "open")
LABELS = {
    "genre": "Genre",
    "person": "Person (actor, director)",
    "years": "Years or decade",
    "title": "A title to match",
    "ruled_out": "Something ruled out",
    "question": "A question about a film",
    "audience": "An audience (for my kid)",
    "open": "Open (none of these)",
}
OPEN = "open"
FAMILY = "Family"  # the catalog genre of an audience request (crs_backends.request_state.FAMILY)


def kinds_of(record: dict[str, Any] | None) -> tuple[str, ...]:
    """The kinds (in :data:`KINDS` order) of a request state's record (``RequestState.record()``); ``("open",)``
    when it asks for none of them, or is no record at all."""
    if not isinstance(record, dict):
        return (OPEN,)

    def listed(key: str) -> list:
        value = record.get(key)
        return [v for v in value if v] if isinstance(value, list | tuple) else []

    genres = listed("genres")
    found = {
        "genre": any(g != FAMILY for g in genres),
        "person": bool(listed("people")),
        "years": record.get("min_year") is not None or record.get("max_year") is not None,
        "title": bool(listed("liked") or listed("mentioned")),
        "ruled_out": bool(listed("not_genres") or listed("not_people") or listed("disliked") or listed("not_phrases")),
        "question": record.get("act") == "ask_about",
        "audience": FAMILY in genres,
    }
    kinds = tuple(k for k in KINDS if found.get(k))
    return kinds or (OPEN,)


def first_request(turns: Sequence[Turn], catalog: Catalog) -> tuple[dict[str, Any] | None, str]:
    """The state after the conversation's first message of the person, and how it was read: the reading the first
    reply recorded (``metadata["understood"]``, read by rules or by the model), else the rules' reading of that
    message now. (None, "none") when the person wrote nothing."""
    first = next((k for k, t in enumerate(turns) if t.role == "user"), None)
    if first is None:
        return None, "none"
    reply = next((k for k in range(first + 1, len(turns)) if turns[k].role == "system"), None)
    again = next((k for k in range(first + 1, len(turns)) if turns[k].role == "user"), None)
    if reply is not None and (again is None or reply < again):  # the reply to the first message, not a later one
        metadata = turns[reply].metadata
        recorded = metadata.get("understood") if isinstance(metadata, dict) else None
        if isinstance(recorded, dict):
            return recorded, str(recorded.get("read_by") or "rules")
    from crs_backends.request_reader import MAX_READ_CHARS, read_request  # the reader loads at first use, not here

    text = (turns[first].text or "")[: MAX_READ_CHARS + 1]  # a longer message is not read anyway
    return read_request([Turn(role="user", text=text)], catalog).record(), "rules"


def tag_first_message(sides: Iterable[Sequence[Turn]], catalog: Catalog) -> tuple[tuple[str, ...], str]:
    """The kinds of a battle's first request and how it was read, from the first side whose person wrote something
    (both sides get the same messages in this app's arena). A message that cannot be read is ``open``, never an
    error: the battle keeps its vote."""
    for turns in sides:
        try:
            record, read_by = first_request(list(turns), catalog)
        except Exception:  # a hostile message must not cost the battle its tag, nor the vote its place
            log.warning("the first message of a battle could not be read", exc_info=True)
            return (OPEN,), "unread"
        if record is not None:
            return kinds_of(record), read_by
    return (OPEN,), "none"
