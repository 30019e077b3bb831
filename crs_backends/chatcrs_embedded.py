"""ChatCRS on the embedded demo model: the model chooses, the catalog speaks.

SmolLM2-135M writes fluent sentences about films that do not exist. So on the embedded model
ChatCRS lets it choose, not write. Its choice is decoding constrained to a closed set of options:
the probability that it writes each option next (an opening phrase, then a title exactly as the
catalog names it, "Heat (1995)"; or one question from a fixed list) is read from its logits, and
the option is sampled from those probabilities with a seed. (A GBNF grammar gives the same set of
outputs, but llama-cpp-python applies it to all 49,152 vocabulary entries at every step: about
7 CPU-seconds per turn here, against about 1 for reading the options' probabilities.)
Code then writes the reply around the choice: every fact it states (genres, director, lead actor,
year) comes from the catalog record of the chosen item. Code also decides the act of the turn:
ask when the person has said nothing a search could use yet, explain the last recommendation when
asked "why", otherwise recommend.

This module holds the pieces that need no model: sampling a choice (:func:`sample`,
:func:`second_choice`) and writing the reply (:func:`recommendation_text`, :func:`explanation_text`).
:class:`crs_backends.chatcrs.ChatCRS` puts them together. What the person asked for is read by the request
reader (:mod:`crs_backends.request_reader`); :class:`Wishes` here only carries the asked genres into the reply.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from catalog.catalog import Catalog
from catalog.items import Item

# words people use for a catalog genre (lower case) -> the genre as the bundled catalog names it
GENRE_WORDS: dict[str, str] = {
    "comedy": "Comedy",
    "comedies": "Comedy",
    "funny": "Comedy",
    "hilarious": "Comedy",
    "laugh": "Comedy",
    "horror": "Horror",
    "scary": "Horror",
    "creepy": "Horror",
    "frightening": "Horror",
    "sci-fi": "Sci-Fi",
    "scifi": "Sci-Fi",
    "science fiction": "Sci-Fi",
    "space": "Sci-Fi",
    "futuristic": "Sci-Fi",
    "animated": "Animation",
    "animation": "Animation",
    "cartoon": "Animation",
    "cartoons": "Animation",
    "kids": "Family",
    "children": "Family",
    "family": "Family",
    "romantic": "Romance",
    "romance": "Romance",
    "love story": "Romance",
    "rom-com": "Romance",
    "action": "Action",
    "adventure": "Adventure",
    "adventures": "Adventure",
    "thriller": "Thriller",
    "thrillers": "Thriller",
    "suspense": "Thriller",
    "thrilling": "Thriller",
    "crime": "Crime",
    "heist": "Crime",
    "gangster": "Crime",
    "mafia": "Crime",
    "mystery": "Mystery",
    "detective": "Mystery",
    "whodunit": "Mystery",
    "war": "War",
    "western": "Western",
    "westerns": "Western",
    "cowboy": "Western",
    "musical": "Musical",
    "musicals": "Musical",
    "music": "Music",
    "documentary": "Documentary",
    "documentaries": "Documentary",
    "sport": "Sport",
    "sports": "Sport",
    "biography": "Biography",
    "biopic": "Biography",
    "true story": "Biography",
    "history": "History",
    "historical": "History",
    "fantasy": "Fantasy",
    "magic": "Fantasy",
    "drama": "Drama",
    "dramas": "Drama",
    "dramatic": "Drama",
}

# how a genre reads inside "a … film"
GENRE_PHRASES: dict[str, str] = {
    "Sci-Fi": "sci-fi",
    "Animation": "animated",
    "Biography": "biographical",
    "History": "historical",
    "Sport": "sports",
    "Family": "family",
}


def years_fit(year: int | None, min_year: int | None, max_year: int | None) -> bool:
    """Whether ``year`` is within the asked years (either bound may be open); a film without a year fits only when
    no year is asked."""
    if year is None:
        return min_year is None and max_year is None
    return (min_year is None or year >= min_year) and (max_year is None or year <= max_year)


def genre_rank(item: Item, genres: Sequence[str]) -> int:
    """0: ``item`` has every genre in ``genres`` (or none is asked), 1: some, 2: none."""
    shared = sum(1 for g in genres if g in item.genres)
    return 0 if shared == len(genres) else (1 if shared else 2)


@dataclass(frozen=True)
class Wishes:
    """What the person has asked for, read from their turns."""

    genres: tuple[str, ...] = ()  # catalog genres, in the order asked
    terms: tuple[str, ...] = ()  # other words a search can use (names, topics)
    min_year: int | None = None
    max_year: int | None = None

    @property
    def said_something(self) -> bool:
        return bool(self.genres or self.terms or self.min_year or self.max_year)

    def fits(self, item: Item) -> bool:
        return years_fit(item.year, self.min_year, self.max_year)

    def record(self) -> dict:
        return {
            "genres": list(self.genres),
            "terms": list(self.terms[:12]),
            "min_year": self.min_year,
            "max_year": self.max_year,
        }


@lru_cache(maxsize=8)
def _catalog_genres(catalog: Catalog) -> dict[str, str]:
    return {g.lower(): g for item in catalog.items for g in item.genres}


_GENRE_PATTERNS = [
    (re.compile(r"(?<![\w-])" + re.escape(word) + r"(?![\w-])"), genre) for word, genre in GENRE_WORDS.items()
]


def genres_in(text: str, catalog: Catalog) -> list[str]:
    """The catalog genres one text asks for by its genre words (:data:`GENRE_WORDS`), in the words' order."""
    lowered = text.lower()
    known = _catalog_genres(catalog)
    found: list[str] = []
    for pattern, genre in _GENRE_PATTERNS:
        if pattern.search(lowered):
            name = known.get(genre.lower())
            if name and name not in found:
                found.append(name)
    return found


# -- choosing -------------------------------------------------------------------------------------

SECOND_TITLE_RATIO = 0.25  # a second title is named when the model finds it at least this plausible as the first


def distinct_prefixes(options: Sequence[str]) -> dict[str, str]:
    """The shortest word prefix of each option that no other option starts with -> the option.

    Decoding constrained to the options commits to one at the first word only it can continue,
    and the rest of it is forced, so the probability of that prefix is the probability of the option.
    ("The Shining (1980)", "The Thing (1982)" -> "The Shining", "The Thing"; "John Wick (2014)" beside
    "John Wick: Chapter 2 (2017)" keeps its year.) Scoring prefixes costs a few tokens per option
    instead of every token of it.
    """
    options = list(dict.fromkeys(options))
    prefixes: dict[str, str] = {}
    for option in options:
        words = option.split(" ")
        prefix = option
        for k in range(1, len(words) + 1):
            candidate = " ".join(words[:k])
            if not any(other != option and other.startswith(candidate) for other in options):
                prefix = candidate
                break
        prefixes[prefix] = option
    return prefixes


def sample(probs: dict[str, float], rng: random.Random, temperature: float = 0.7) -> str:
    """One option, drawn from ``probs`` sharpened by ``temperature`` (0: the most probable)."""
    if not probs:
        raise ValueError("nothing to choose from")
    options = list(probs)
    if temperature <= 0 or len(options) == 1:
        return max(options, key=lambda o: probs[o])
    top = max(probs.values())
    if top <= 0:
        return options[0]
    weights = [(probs[o] / top) ** (1.0 / temperature) for o in options]
    return rng.choices(options, weights=weights)[0]


def second_choice(probs: dict[str, float], first: str, rng: random.Random, temperature: float = 0.7) -> str | None:
    """Another title to name beside ``first``, when the model finds one nearly as likely; else None."""
    rest = {o: p for o, p in probs.items() if o != first and p >= SECOND_TITLE_RATIO * probs.get(first, 0.0)}
    return sample(rest, rng, temperature) if rest else None


# -- what code writes ------------------------------------------------------------------------------


@dataclass
class Fit:
    """Why an item fits: the asked-for genres it has, and people it shares with the person's own titles."""

    genres: list[str] = field(default_factory=list)
    director: str | None = None
    actor: str | None = None


def fit_of(item: Item, wishes: Wishes, user_titles: Sequence[Item]) -> Fit:
    fit = Fit(genres=[g for g in wishes.genres if g in item.genres])
    theirs_directors = {d for t in user_titles if t.id != item.id for d in t.directors}
    theirs_cast = {c for t in user_titles if t.id != item.id for c in t.cast}
    fit.director = next((d for d in item.directors if d in theirs_directors), None)
    fit.actor = next((c for c in item.cast if c in theirs_cast), None)
    return fit


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def genre_phrase(item: Item, first: Sequence[str] = ()) -> str:
    """'a crime and drama film', the asked-for genres first; 'a film' when the catalog has none."""
    ordered = [g for g in first if g in item.genres] + [g for g in item.genres if g not in first]
    words = [GENRE_PHRASES.get(g, g.lower()) for g in ordered[:2]]
    if not words:
        return "a film"
    text = " and ".join(words)
    return f"{_article(text)} {text} film"


def item_clause(item: Item, fit: Fit) -> str:
    """'a crime and drama film directed by Michael Mann, starring Al Pacino', from the catalog record."""
    parts = [genre_phrase(item, fit.genres)]
    if item.directors:
        director = fit.director or item.directors[0]
        parts.append(f" directed by {director}" + (", like a film you mentioned" if fit.director else ""))
    if item.cast:
        actor = fit.actor or item.cast[0]
        parts.append(f", starring {actor}" + (", who was also in a film you mentioned" if fit.actor else ""))
    return "".join(parts)


def _end(sentence: str) -> str:
    """A full stop, unless the sentence already ends with one ("… Robert Downey Jr.")."""
    return sentence if sentence.endswith((".", "!", "?")) else sentence + "."


def recommendation_text(opener: str, items: Sequence[Item], fits: Sequence[Fit], followup: str) -> str:
    """'I'd suggest Heat (1995), a crime and drama film directed by Michael Mann, starring Al Pacino.
    Or Alien (1979), … Would you like something different?'"""
    sentences = [_end(f"{opener} {items[0].name}, {item_clause(items[0], fits[0])}")]
    for item, fit in zip(items[1:], fits[1:]):
        sentences.append(_end(f"Or {item.name}, {item_clause(item, fit)}"))
    return " ".join([*sentences, followup]).strip()


def explanation_text(item: Item, fit: Fit, followup: str, catalog: Catalog) -> str:
    """What the catalog says about ``item`` and how it matches what the person asked for."""
    about = genre_phrase(item, fit.genres) + (f" directed by {item.directors[0]}" if item.directors else "")
    sentences = [_end(f"{item.name} is {about}")]
    if item.cast:
        sentences.append(_end(f"It stars {_and(item.cast[:3])}"))
    if item.description and _names_only(item.description, item, catalog):
        sentences.append(item.description.strip())
    reasons = []
    if fit.genres:
        reasons.append(
            f"it is the {_and(GENRE_PHRASES.get(g, g.lower()) for g in fit.genres)} kind of film you asked for"
        )
    if fit.director:
        reasons.append(f"{fit.director} also directed a film you mentioned")
    if fit.actor:
        reasons.append(f"{fit.actor} was in a film you mentioned")
    if reasons:
        sentences.append("You might like it because " + _and(reasons) + ".")
    sentences.append(followup)
    return " ".join(s.strip() for s in sentences if s.strip())


def _and(words: Iterable[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    words = list(words)
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _names_only(text: str, item: Item, catalog: Catalog) -> bool:
    """True when ``text`` names no catalog title other than ``item`` (a description may mention a sequel's original)."""
    return all(m.item is not None and m.item.id == item.id for m in catalog.mentions(text))


def lines(text: str) -> list[str]:
    """The non-empty lines of a prompt text (a list kept one option per line)."""
    return [line.strip() for line in text.splitlines() if line.strip()]
