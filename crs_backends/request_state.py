"""What a person has asked for so far, as one state: the systems that are ours rank by it and show it.

:class:`RequestState` holds the slots a request is read into (genres and people wanted and ruled out, titles
liked, disliked and seen, a year range, the act of the latest message and, for a question, the film it is about).
Two readers fill it: the rules over the catalog's vocabulary (:mod:`crs_backends.request_reader`) and, with a real
model, one structured call (:mod:`crs_backends.request_reading_llm`); ChatCRS and the retrieval baseline then rank
with the same methods here (:meth:`RequestState.allows`, :meth:`RequestState.fit_key`) and record the state on
every turn (``metadata["understood"]``, :meth:`RequestState.record`), with a short line for the Chat tab
(:meth:`RequestState.summary`: "comedy · 1990s · not horror").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from catalog.items import Item
from crs_backends.chatcrs_embedded import GENRE_PHRASES, genre_rank, years_fit

# the act of the latest message
ACTS = ("recommend", "ask_about", "accept", "reject", "goodbye", "none")
# what a question about a film asks
ASPECTS = ("director", "cast", "writer", "year", "genre", "plot", "why", "more")
# the slots a labelled request names (tests/data/requests_*.jsonl), as :meth:`RequestState.slot_pairs` gives them
LIST_SLOTS = ("genres", "not_genres", "people", "not_people", "liked", "disliked", "seen")
VALUE_SLOTS = ("min_year", "max_year", "act", "about", "subject")
FAMILY = "Family"  # the catalog genre of films for children (request_words: "kids", "for my son", …)


def genre_word(genre: str) -> str:
    return GENRE_PHRASES.get(genre, genre.lower())


@dataclass(frozen=True)
class RequestState:
    """The conversation so far, read as a request. People are catalog names, or the name as written when the
    catalog has nobody by it (honoured by text: an item whose record names them)."""

    genres: tuple[str, ...] = ()
    not_genres: tuple[str, ...] = ()
    people: tuple[str, ...] = ()
    not_people: tuple[str, ...] = ()
    liked: tuple[Item, ...] = ()
    disliked: tuple[Item, ...] = ()
    seen: tuple[Item, ...] = ()
    mentioned: tuple[Item, ...] = ()  # titles the person named with no feeling said: not recommended back either
    min_year: int | None = None
    max_year: int | None = None
    act: str = "none"
    about: str | None = None  # for act "ask_about": one of ASPECTS
    subject: Item | None = None  # for act "ask_about": the film asked about
    terms: tuple[str, ...] = ()  # other words a search can use (topics, places), from what is wanted
    not_phrases: tuple[str, ...] = ()  # ruled-out words that match nothing in the catalog, honoured by text
    read_by: str = "rules"  # "rules" or "model"
    note: str = ""  # why nothing was read, or why the model's reading was not used

    # -- what it asks for --------------------------------------------------------------------------

    @property
    def said_something(self) -> bool:
        """Whether anything a ranking can use was said (a wish, a title, a year, or something ruled out)."""
        return bool(
            self.genres
            or self.people
            or self.liked
            or self.seen
            or self.disliked
            or self.mentioned
            or self.min_year is not None
            or self.max_year is not None
            or self.terms
            or self.not_genres
            or self.not_people
            or self.not_phrases
        )

    @property
    def own_titles(self) -> tuple[Item, ...]:
        """Every title the person named (liked, disliked, seen or just mentioned): never recommended to them."""
        out: dict[str, Item] = {}
        for item in (*self.liked, *self.seen, *self.disliked, *self.mentioned):
            out.setdefault(item.id, item)
        return tuple(out.values())

    @property
    def own_title_ids(self) -> set[str]:
        return {i.id for i in self.own_titles}

    def rules_out(self, item: Item) -> str | None:
        """Why ``item`` must not be offered (a title they named, a genre or person ruled out), or None."""
        if item.id in {i.id for i in self.disliked}:
            return "disliked"
        if item.id in {i.id for i in self.seen}:
            return "seen"
        if item.id in self.own_title_ids:
            return "their own title"
        if set(self.not_genres) & set(item.genres):
            return "genre ruled out"
        if self.not_people and any(_credits(item, p) for p in self.not_people):
            return "person ruled out"
        if self.not_phrases:
            record = record_text(item)
            if any(says(record, p) for p in self.not_phrases):
                return "ruled out by name"
        return None

    def allows(self, item: Item) -> bool:
        return self.rules_out(item) is None

    def keep(self, items: Iterable[Item]) -> list[Item]:
        return [i for i in items if self.allows(i)]

    def people_ok(self, item: Item) -> bool:
        return not self.people or any(_credits(item, p) for p in self.people)

    def years_ok(self, item: Item) -> bool:
        return years_fit(item.year, self.min_year, self.max_year)

    def audience_ok(self, item: Item) -> bool:
        """A family film where one was asked for ("for my kid", "a family movie"): an audience, not a taste, so it
        filters like the people and years instead of ranking among the genres (seen: "for my kid", then "from the
        nineties", brought Pulp Fiction and Seven after the decade's few family films)."""
        return FAMILY not in self.genres or FAMILY in item.genres

    def fits(self, item: Item) -> bool:
        """Whether ``item`` is of the people, audience and years asked for (the filters; genres rank within)."""
        return self.people_ok(item) and self.audience_ok(item) and self.years_ok(item)

    def genre_rank(self, item: Item) -> int:
        """0: every genre asked for (or none asked), 1: some, 2: none."""
        return genre_rank(item, self.genres)

    def fit_key(self, item: Item) -> tuple[int, int, int, int]:
        """Sorts the people asked for first, then the audience, then the years, then the genres (every one, some,
        none); a stable sort keeps the search's order within each group."""
        return (
            0 if self.people_ok(item) else 1,
            0 if self.audience_ok(item) else 1,
            0 if self.years_ok(item) else 1,
            self.genre_rank(item),
        )

    def rank(self, items: Iterable[Item]) -> list[Item]:
        """``items`` without what is ruled out, those that fit first (the search's order within each group)."""
        return sorted(self.keep(items), key=self.fit_key)

    # -- what it says ----------------------------------------------------------------------------

    def years_text(self) -> str:
        lo, hi = self.min_year, self.max_year
        if lo is None and hi is None:
            return ""
        if lo is not None and hi is not None:
            if lo == hi:
                return str(lo)
            if lo % 10 == 0 and hi == lo + 9:
                return f"{lo}s"
            return f"{lo}–{hi}"
        return f"from {lo}" if lo is not None else f"until {hi}"

    def summary(self) -> str:
        """One short line of what was understood: "comedy · 1990s · not horror" ("nothing yet" when empty)."""
        parts = [genre_word(g) for g in self.genres]
        parts += list(self.people)
        if self.years_text():
            parts.append(self.years_text())
        parts += [f"like {i.name}" for i in self.liked]
        parts += [f"not {genre_word(g)}" for g in self.not_genres]
        parts += [f"not {p}" for p in self.not_people]
        parts += [f"not {p}" for p in self.not_phrases]
        parts += [f"disliked {i.name}" for i in self.disliked]
        parts += [f"seen {i.name}" for i in self.seen]
        if self.act == "ask_about":
            what = {"more": "about", "why": "why"}.get(self.about or "", self.about or "about")
            parts.append(f"asks {what}: {self.subject.name if self.subject else 'which film?'}")
        elif self.act in ("accept", "reject", "goodbye"):
            parts.append({"accept": "likes the suggestion", "reject": "wants another", "goodbye": "goodbye"}[self.act])
        text = " · ".join(parts) or "nothing yet"
        if self.note:
            text += f" ({self.note})"
        return text

    def record(self) -> dict[str, Any]:
        """The state as stored on a turn (``metadata["understood"]``): plain JSON, catalog names for titles."""
        return {
            "genres": list(self.genres),
            "not_genres": list(self.not_genres),
            "people": list(self.people),
            "not_people": list(self.not_people),
            "liked": [i.name for i in self.liked],
            "disliked": [i.name for i in self.disliked],
            "seen": [i.name for i in self.seen],
            "mentioned": [i.name for i in self.mentioned],
            "min_year": self.min_year,
            "max_year": self.max_year,
            "act": self.act,
            "about": self.about,
            "subject": self.subject.name if self.subject else None,
            "terms": list(self.terms[:12]),
            "not_phrases": list(self.not_phrases),
            "read_by": self.read_by,
            "note": self.note,
            "summary": self.summary(),
        }

    def slot_pairs(self) -> set[tuple[str, str]]:
        """The state as (slot, value) pairs, the unit of the request reader's micro-F1 (names case-folded)."""
        return slot_pairs(self.record())


def slot_pairs(record: dict[str, Any]) -> set[tuple[str, str]]:
    """(slot, value) pairs of a state record or of a labelled expectation (absent slots are empty; "act" defaults
    to "none")."""
    pairs = {(slot, _fold(v)) for slot in LIST_SLOTS for v in record.get(slot) or ()}
    for slot in VALUE_SLOTS:
        value = record.get(slot)
        if slot == "act" and value is None:
            value = "none"
        if value is not None:
            pairs.add((slot, _fold(value)))
    return pairs


def micro_f1(pairs: Iterable[tuple[set[tuple[str, str]], set[tuple[str, str]]]]) -> tuple[float, float, float]:
    """(precision, recall, F1) over (expected, read) pair sets, counted together; 1.0 each when nothing was
    expected and nothing read."""
    tp = fp = fn = 0
    for expected, read in pairs:
        tp += len(expected & read)
        fp += len(read - expected)
        fn += len(expected - read)
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def _fold(value: object) -> str:
    return " ".join(str(value).split()).casefold()


@lru_cache(maxsize=8192)
def record_text(item: Item) -> str:
    """The catalog's record of ``item`` in lower case (title, genres, credits, description): where a name the catalog
    has no person for, or a ruled-out word, is looked for."""
    return " ".join((item.name, *item.genres, *item.directors, *item.cast, *item.writers, item.description)).lower()


def says(text: str, phrase: str) -> bool:
    """Whether ``phrase`` (lowered) stands in ``text`` (lower case, as :func:`record_text`) as whole words."""
    return bool(re.search(r"(?<!\w)" + re.escape(phrase.lower()) + r"(?!\w)", text))


def _credits(item: Item, person: str) -> bool:
    """Whether ``person`` worked on ``item``: a catalog name in its credits, else the name anywhere in its record
    ("a Stephen King novel")."""
    if person in item.directors or person in item.cast or person in item.writers:
        return True
    return says(record_text(item), person)
