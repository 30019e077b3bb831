"""The genre words the small versions' data and linking share, and checks of a shown reply against the catalog.

:data:`GENRE_ADJECTIVE` (how a genre reads in "a ___ film") and :data:`GENRE_NOUNS` (how people name it) are the
words the synthetic dialogues write and the small versions' linker reads (:mod:`crs_backends.neural.mentions`).
:func:`contradictions` (facts a reply states that disagree with the catalog) and :func:`stutters` (a word repeated
back to back) only measure: the fidelity check (:mod:`crs_backends.neural.fidelity`) and the tests count with them.
Nothing here changes what a model says; the small versions' replies are shown through CRS Arena's policy alone
(:mod:`crs_backends.neural.policy`), their ``<movie>`` slot filled with the ranking.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from catalog.catalog import Catalog

MOVIE = "<movie>"
# the slot token the small versions' tokenizers reserve (crs_backends.neural.tokenizer): ``<movie>``, which the
# policy fills with the ranking (small-v7's tokenizers also carry four fact slots, <genre> <director> <actor> <year>,
# that no training reply wrote and nothing filled; small-v8's were trained without them)
SLOT_TOKENS = (MOVIE,)

# how a genre reads in "a ___ film" (the synthetic dialogues use the same words)
GENRE_ADJECTIVE = {
    "Action": "action",
    "Adventure": "adventure",
    "Animation": "animated",
    "Biography": "biographical",
    "Comedy": "comedy",
    "Crime": "crime",
    "Documentary": "documentary",
    "Drama": "drama",
    "Family": "family",
    "Fantasy": "fantasy",
    "History": "historical",
    "Horror": "horror",
    "Music": "music",
    "Musical": "musical",
    "Mystery": "mystery",
    "Romance": "romance",
    "Sci-Fi": "sci-fi",
    "Sport": "sports",
    "Thriller": "thriller",
    "War": "war",
    "Western": "western",
}
_ADJECTIVE_GENRE = {v: k for k, v in GENRE_ADJECTIVE.items()}

# the words people (and the synthetic training dialogues) use for each catalog genre, plural first
GENRE_NOUNS: dict[str, tuple[str, ...]] = {
    "Action": ("action movies", "action", "action films", "action flicks"),
    "Adventure": ("adventure movies", "adventures", "adventure films"),
    "Animation": ("animated movies", "animation", "cartoons", "animated films"),
    "Biography": ("biopics", "biographies", "movies based on real people"),
    "Comedy": ("comedies", "comedy", "funny movies", "comedy films"),
    "Crime": ("crime movies", "crime films", "gangster movies", "crime"),
    "Documentary": ("documentaries", "documentary films"),
    "Drama": ("dramas", "drama", "serious movies", "drama films"),
    "Family": ("family movies", "movies for kids", "family films"),
    "Fantasy": ("fantasy", "fantasy movies", "fantasy films"),
    "History": ("history movies", "historical films", "period pieces"),
    "Horror": ("horror movies", "horror", "scary movies", "horror films"),
    "Music": ("movies about music", "music films"),
    "Musical": ("musicals", "musical films"),
    "Mystery": ("mysteries", "mystery movies", "whodunits"),
    "Romance": ("romantic movies", "romance", "rom coms", "love stories"),
    "Sci-Fi": ("sci-fi", "science fiction", "sci fi movies", "scifi"),
    "Sport": ("sports movies", "movies about sports"),
    "Thriller": ("thrillers", "suspense movies", "tense thrillers"),
    "War": ("war movies", "war films", "movies about war"),
    "Western": ("westerns", "cowboy movies", "western films"),
}


def genre_word(genre: str) -> str:
    return GENRE_ADJECTIVE.get(genre, genre.lower())


_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")  # letters (accents too: "Léon"), with one apostrophe part


def words(text: str) -> list[str]:
    """The words of ``text``: letters only (accents too: "Léon"), with one apostrophe part, lower case."""
    return [w.lower() for w in _WORD.findall(text)]


# ----------------------------------------------------------------------------- checking
_YEAR_CLAIM = re.compile(r"\bfrom (\d{4})\b")
_DIRECTOR_CLAIM = re.compile(r"\bdirected by ([A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,3})")
_ACTOR_CLAIM = re.compile(r"\b(?:starring|with) ([A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,3})")
_GENRE_CLAIM = re.compile(r"\b(?:an?|both are) ((?:[\w-]+ ){0,2}?)(?:film|movie)s?\b", re.IGNORECASE)


def contradictions(text: str, catalog: Catalog) -> list[str]:
    """Facts the reply states about a catalog title that disagree with the catalog, one line each.

    Each title the reply names (catalog mentions) owns the text up to the next title; in it a year
    ("from 1995"), a director ("directed by …"), an actor ("starring …", "with …") or a genre ("a crime
    film") must match that item's record."""
    found = [(m, m.item) for m in catalog.mentions(text) if m.item is not None]
    found.sort(key=lambda pair: pair[0].start)
    problems: list[str] = []
    for n, (mention, item) in enumerate(found):
        end = found[n + 1][0].start if n + 1 < len(found) else len(text)
        clause = text[mention.start + len(mention.text) : end]
        for year in _YEAR_CLAIM.findall(clause):
            if item.year and int(year) != item.year:
                problems.append(f"{item.name}: year {year}")
        for name in _DIRECTOR_CLAIM.findall(clause):
            if not any(name.startswith(d) or d.startswith(name) for d in item.directors):
                problems.append(f"{item.name}: directed by {name}")
        for name in _ACTOR_CLAIM.findall(clause):
            if name.split()[0] in ("The", "A", "An"):
                continue  # "with The …" is not a person
            people = item.cast + item.directors
            if not any(name.startswith(p) or p.startswith(name) for p in people):
                problems.append(f"{item.name}: with {name}")
        for words in _GENRE_CLAIM.findall(clause):
            for word in words.split():
                genre = _ADJECTIVE_GENRE.get(word.lower())
                if genre and genre not in item.genres:
                    problems.append(f"{item.name}: {word} film")
    return problems


def stutters(text: str, titles: Iterable[str] = ()) -> list[str]:
    """Words repeated back to back ("The The"), ignoring case and punctuation between them. A title in
    ``titles`` counts as one word, so "La La Land" and "How about It (2017)? It is ..." are no stutters."""
    for title in sorted(set(titles), key=len, reverse=True):
        if title:
            text = text.replace(title, " TITLE ")
    words = re.findall(r"[A-Za-z0-9']+", text)  # a number is a word too: "from 1939, from" repeats no word
    return [a for a, b in zip(words, words[1:]) if a.lower() == b.lower() and len(a) > 1 and not a.isdigit()]
