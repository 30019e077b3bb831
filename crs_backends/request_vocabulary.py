"""A catalog's vocabulary for the request reader (:mod:`crs_backends.request_reader`): its people by full name,
joined name and surname, its genres, the English words a name must not be mistaken for, and the check that a
message reads as English."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from catalog.catalog import Catalog
from catalog.matcher import normalize_title
from crs_backends import request_words as w


@dataclass(frozen=True)
class Vocabulary:
    """A catalog's names, and the English words the reader must not mistake for them."""

    full: dict[str, str]  # folded full name -> name
    joined: dict[str, str]  # folded full name without spaces, hyphens and dots ("leonardodicaprio") -> name
    surname: dict[str, str]  # folded surname one person has, or clearly leads by credits -> name
    given: frozenset[str]  # folded given names
    known: frozenset[str]  # every word the language check counts as English: the above, and names
    english: frozenset[str]  # words of the catalog's descriptions, stop words, the reader's own words
    genres: dict[str, str]  # lower-case genre -> the catalog's spelling
    title_prefixes: frozenset[str]  # the first two words of every catalog title, normalised
    newest: int | None


@lru_cache(maxsize=8)
def vocabulary(catalog: Catalog) -> Vocabulary:
    credits: dict[str, int] = {}
    for item in catalog.items:
        for person in {*item.directors, *item.cast, *item.writers}:
            if person:
                credits[person] = credits.get(person, 0) + 1
    full = {" ".join(name_parts(fold(p))): p for p in credits}
    joined = {re.sub(r"[\s.'-]", "", fold(p)): p for p in credits}
    by_surname: dict[str, list[str]] = {}
    given: set[str] = set()
    for person in credits:
        parts = name_parts(fold(person))
        if len(parts) >= 2:
            given.add(parts[0])
            if len(parts[-1]) >= 4 and parts[-1] not in ("jr", "sr"):
                by_surname.setdefault(parts[-1], []).append(person)
    surname = {}
    for name, people in by_surname.items():
        people.sort(key=lambda p: -credits[p])
        if len(people) == 1 or credits[people[0]] >= 2 * credits[people[1]]:
            surname[name] = people[0]  # "Nolan": Christopher (8 films) over Jonathan (4)
    description_words = {
        word.lower() for item in catalog.items for word in re.findall(r"\b[a-z][a-z'-]{2,}\b", item.description)
    }
    english = frozenset(
        description_words
        | set(ENGLISH_STOP_WORDS)
        | w.GENERIC_WORDS
        | set(w.GENRE_WORDS)
        | w.NOT_MISSPELLINGS
        | set(w.DECADE_WORDS)
        | w.SCOPE_FILLER
        | w.SCOPE_ENDS
        | w.SCOPE_SOFT_ENDS
        | set("im dont doesnt didnt cant wont isnt id ive pls plz thx tho".split())
    )
    title_prefixes = frozenset(" ".join(normalize_title(i.title).split()[:2]) for i in catalog.items)
    return Vocabulary(
        full=full,
        joined=joined,
        surname=surname,
        given=frozenset(given),
        known=(english - _NOT_ENGLISH_ENOUGH) | w.REQUEST_WORDS | {x for name in full for x in name.split()},
        english=english,
        genres={g.lower(): g for item in catalog.items for g in item.genres},
        title_prefixes=title_prefixes,
        newest=max((i.year for i in catalog.items if i.year), default=None),
    )


# stop words that other languages share ("un film", "de los"): they do not make a message English
_NOT_ENGLISH_ENOUGH = frozenset("de un co con le la ie eg re etc".split())


def fold(text: str) -> str:
    """Lower case without accents, one character for one ("García" -> "garcia"), so places in the text hold."""
    out = []
    for c in text:
        lower = c.lower()
        c = lower if len(lower) == 1 else c  # "İ" lowers to two characters: kept as it is
        base = unicodedata.normalize("NFKD", c)
        out.append(base[0] if len(base) > 1 and unicodedata.combining(base[1]) else c)
    return "".join(out)


def name_parts(text: str) -> list[str]:
    return [t.removesuffix("'s").strip(".'") for t in re.findall(r"[\w.'-]+", text)]


def reads_as_english(low: str, vocab: Vocabulary) -> bool:
    """Whether a message reads as English: of three words or more, at least a third known (English words of the
    catalog's descriptions, stop words, the reader's own words, the names of people)."""
    tokens = re.findall(r"[^\W\d_][\w'-]*", low)
    if len(tokens) < 3:
        return True
    known = sum(1 for t in tokens if t in vocab.known or t.removesuffix("'s") in vocab.known)
    return 3 * known >= len(tokens)
