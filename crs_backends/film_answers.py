"""Answers to a question about one film, written from its catalog record: who directed it, who is in it, who wrote
it, when it came out, what kind of film it is, what it is about. Every fact is the catalog's; where the record has
nothing, the answer says so."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from catalog.items import Item
from crs_backends.chatcrs_embedded import genre_phrase
from crs_backends.request_state import genre_word


def answer_text(item: Item, about: str | None, followup: str, *, asked_genres: Sequence[str] = ()) -> str:
    """The answer to a question of kind ``about`` (:data:`~crs_backends.request_state.ASPECTS`) about ``item``,
    then ``followup`` (an offer to go on). ``asked_genres``: the genres a yes-or-no question names ("Is it a
    comedy?")."""
    kind = genre_phrase(item)
    by = f" directed by {and_(item.directors)}" if item.directors else ""
    starring = f", starring {and_(item.cast[:2])}" if item.cast else ""
    if about == "director":
        first = (
            f"{item.name} was directed by {and_(item.directors)}"
            if item.directors
            else f"Our catalog does not say who directed {item.name}"
        )
        rest = f"It is {kind}{starring}"
    elif about == "cast":
        first = f"{item.name} stars {and_(item.cast[:3])}" if item.cast else f"Our catalog has no cast for {item.name}"
        rest = f"It is {kind}{by}"
    elif about == "writer":
        first = (
            f"{item.name} was written by {and_(item.writers[:3])}"
            if item.writers
            else f"Our catalog does not say who wrote {item.name}"
        )
        rest = f"It is {kind}{by}"
    elif about == "year":
        first = f"{item.name} came out in {item.year}" if item.year else f"Our catalog has no year for {item.name}"
        rest = f"It is {kind}{by}"
    elif about == "genre":
        has = [g for g in asked_genres if g in item.genres]
        lead = "" if not asked_genres else ("Yes: " if len(has) == len(asked_genres) else "Not quite: ")
        first = f"{lead}{item.name} is {kind}{by}"
        rest = f"Its genres in our catalog: {and_(genre_word(g) for g in item.genres)}" if len(item.genres) > 2 else ""
    elif about == "plot":
        first = item.description.strip() or f"Our catalog has no summary of {item.name}"
        rest = f"{item.name} is {kind}{by}"
    else:  # "more", or anything else: what the catalog knows
        first = f"{item.name} is {kind}{by}"
        stars = f"It stars {and_(item.cast[:3])}" if item.cast else ""
        rest = " ".join(_end(s) for s in (stars, item.description) if s.strip())
    return " ".join(_end(s) for s in (first, rest) if s.strip()) + " " + followup


def _end(sentence: str) -> str:
    """A full stop, unless the sentence already ends with one ("… Robert Downey Jr.")."""
    sentence = sentence.strip()
    return sentence if sentence.endswith((".", "!", "?")) else sentence + "."


def and_(words: Iterable[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    words = list(words)
    if not words:
        return ""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
