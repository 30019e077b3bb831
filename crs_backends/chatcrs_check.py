"""Checking ChatCRS replies against the catalog, and the seeded offline batch the tests and benches run.

* :func:`invented_titles`: every title-like span in a reply that is not one of the turn's candidates
  (a "Title (Year)" that is not a candidate's exact catalog name, a catalog title that was not offered,
  a capitalised span the catalog records of the candidates do not account for).
* :func:`fact_errors`: facts a reply states about a candidate (its genres in "a … film", the director
  in "directed by …", actors in "starring …" / "It stars …", any catalog person named near it) that
  its catalog record does not hold.
* :func:`run_batch`: :data:`SCRIPTS` (20 user turns in 10 conversations: greetings, genres, titles,
  years, "why?", a request nothing in the catalog fits) sent to a ChatCRS, each reply checked.

Both checks are strict on purpose: they are written for the constrained replies (where anything
unaccounted for is a failure), and would flag the free text of a capable model much more often.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from catalog.catalog import Catalog
from catalog.items import Item
from crs_backends.chatcrs_embedded import GENRE_PHRASES
from storage.records import Conversation, Turn

# 20 user turns: the three-message check, greetings, genres, people, decades, "why?",
# and one request nothing in the catalog can fit (the empty candidate list)
SCRIPTS: tuple[tuple[str, ...], ...] = (
    (
        "Hi! I loved The Matrix and Inception. Can you recommend a mind-bending sci-fi movie?",
        "I've already seen that. Something more recent, maybe from the last ten years?",
        "Why would I like it?",
    ),
    ("Hello!", "Something funny please", "Tell me more about it"),
    ("I want a funny animated movie for kids.", "Another one?"),
    ("Any good horror films from the 80s?", "Who directed it?"),
    ("I'm in the mood for a romantic comedy tonight", "Not that one, something else"),
    ("Recommend me a crime thriller like Heat", "Why that one?"),
    ("Can you suggest a movie?", "I don't know, anything"),
    ("A western with Clint Eastwood please",),
    ("I love Tom Hanks", "Something from the 90s?"),
    ("Do you have any movies from the 2050s?",),
)

_YEAR = re.compile(r"\((?:18|19|20)\d{2}\)")
_CAPITALISED = re.compile(r"(?<![\w'’])[A-Z][\w'’&-]*")
_SENTENCE_START = re.compile(r"(?:^|[.!?:]\)?\s+|\(\s*|[\"“]\s*)$")
_ALWAYS_CAPITALISED = {"I", "I'd", "I'm", "I'll", "I've"}
_GENRE_CLAUSE = re.compile(
    r"\b(?:a|an|the)\s+([\w-]+(?:(?:,\s*|\s+and\s+)[\w-]+)*)\s+(?:kind of\s+)?(?:film|movie)\b", re.I
)
_DIRECTED = re.compile(r"\bdirected by\s+([A-Z][\w.'’-]*(?:\s+[A-Z][\w.'’-]*)*)")
_STARRING = re.compile(r"\b(?:starring|[Ii]t stars)\s+(.+?)(?:[,;]?\s+who\b|\.\s|\.$|$)")


def _allowed(catalog: Catalog, allowed: Iterable[Item | str]) -> list[Item]:
    items = []
    for a in allowed:
        item = a if isinstance(a, Item) else catalog.match_name(a)
        if item is not None:
            items.append(item)
    return items


def _mask(text: str, spans: Iterable[str]) -> str:
    """``text`` with every occurrence of ``spans`` (longest first) blanked out, offsets kept."""
    for span in sorted({s for s in spans if s}, key=len, reverse=True):
        text = text.replace(span, " " * len(span))
    return text


def invented_titles(text: str, catalog: Catalog, allowed: Iterable[Item | str]) -> list[str]:
    """Title-like spans of ``text`` that are not among ``allowed`` (items or catalog names "Title (Year)")."""
    items = _allowed(catalog, allowed)
    ids = {i.id for i in items}
    found: list[str] = []
    for mention in catalog.mentions(text):
        if mention.item is None:
            found.append(mention.text)
        elif mention.item.id not in ids:
            found.append(mention.item.name)  # a real title, but not one offered this turn
    # what is found already, the candidates' catalog records and people's names (facts, checked by
    # fact_errors) are masked; what is left must be plain words
    known = found + [m.text for m in catalog.mentions(text)] + [i.name for i in items] + [i.title for i in items]
    known += [p for i in items for p in (*i.directors, *i.cast, *i.writers, *i.genres)]
    known += [i.description.strip() for i in items]
    known += [p for i in catalog.items for p in (*i.directors, *i.cast, *i.writers)]
    rest = _mask(text, known)
    for year in _YEAR.finditer(rest):  # a "(Year)" not part of a candidate's exact name
        found.append(rest[max(0, year.start() - 40) : year.end()].strip())
    spans: list[str] = []
    previous_end = None
    for m in _CAPITALISED.finditer(rest):
        word = m.group(0)
        if word in _ALWAYS_CAPITALISED or _SENTENCE_START.search(text[: m.start()]):  # masking keeps offsets
            previous_end = None
            continue
        if previous_end is not None and rest[previous_end : m.start()] == " ":
            spans[-1] += " " + word  # "The Last Kingdoms": one span
        else:
            spans.append(word)
        previous_end = m.end()
    found += spans
    return list(dict.fromkeys(found))


def _genre_words(item: Item) -> set[str]:
    words = set()
    for g in item.genres:
        words.add(g.lower())
        words.add(GENRE_PHRASES.get(g, g.lower()))
    return words


def fact_errors(text: str, catalog: Catalog, allowed: Iterable[Item | str]) -> list[str]:
    """Facts ``text`` states about an allowed item that its catalog record contradicts.

    A statement is about the item named last before it (in the same or an earlier sentence).
    """
    items = _allowed(catalog, allowed)
    if not items:
        return []
    people = {p for i in catalog.items for p in (*i.directors, *i.cast, *i.writers)}
    all_genre_words = {w for i in catalog.items for w in _genre_words(i)}
    positions = sorted((m.start(), i) for i in items for m in re.finditer(re.escape(i.name), text))
    errors: list[str] = []
    for n, (start, item) in enumerate(positions):
        end = positions[n + 1][0] if n + 1 < len(positions) else len(text)
        segment = _mask(text[start:end], [item.name, item.description.strip()])
        for m in _GENRE_CLAUSE.finditer(segment):
            for word in re.split(r",\s*|\s+and\s+", m.group(1).lower()):
                if word in all_genre_words and word not in _genre_words(item):
                    errors.append(f"{item.name}: genre {word!r} (catalog: {', '.join(item.genres)})")
        for m in _DIRECTED.finditer(segment):
            if not any(d.startswith(m.group(1)) or m.group(1).startswith(d) for d in item.directors):
                errors.append(f"{item.name}: directed by {m.group(1)!r} (catalog: {', '.join(item.directors)})")
        for m in _STARRING.finditer(segment):
            for name in re.split(r",\s*|\s+and\s+", m.group(1)):
                name = name.strip().rstrip(".")
                if name and name not in {c.rstrip(".") for c in item.cast}:
                    errors.append(f"{item.name}: starring {name!r} (catalog: {', '.join(item.cast)})")
        for person in people:
            if (
                person in segment
                and person not in (*item.directors, *item.cast, *item.writers)
                and re.search(r"(?<!\w)" + re.escape(person) + r"(?!\w)", segment)
            ):
                errors.append(f"{item.name}: names {person!r}, who the catalog does not list for it")
    return list(dict.fromkeys(errors))


@dataclass
class CheckedTurn:
    user: str
    reply: str
    act: str
    candidates: list[str]
    chosen: list[str]
    invented: list[str]
    fact_errors: list[str]
    seconds: float
    items: list[str] = field(default_factory=list)  # the turn's ranked list, by name
    metadata: dict = field(default_factory=dict, repr=False)


def check_turn(user: str, turn: Turn, catalog: Catalog, seconds: float) -> CheckedTurn:
    """Check one ChatCRS turn against the candidates its metadata records."""
    candidates = list(turn.metadata.get("candidates") or [])
    return CheckedTurn(
        user=user,
        reply=turn.text,
        act=turn.metadata.get("act", ""),
        candidates=candidates,
        chosen=list(turn.metadata.get("chosen") or []),
        invented=invented_titles(turn.text, catalog, candidates),
        fact_errors=fact_errors(turn.text, catalog, candidates),
        seconds=seconds,
        items=[ref.title for ref in turn.items],
        metadata=turn.metadata,
    )


def run_batch(crs, catalog: Catalog, scripts: Sequence[Sequence[str]] = SCRIPTS) -> list[CheckedTurn]:
    """Send every script to ``crs`` (a ChatCRS) as one conversation each, checking every reply.

    The embedded model samples with a seed per turn, so a batch is repeatable.
    """
    checked = []
    for script in scripts:
        conversation = Conversation(system_id="chatcrs")
        for text in script:
            conversation.turns.append(Turn("user", text))
            start = time.perf_counter()
            turn = crs.respond(conversation)
            seconds = time.perf_counter() - start
            conversation.turns.append(turn)
            checked.append(check_turn(text, turn, catalog, seconds))
    return checked


def summary(checked: Sequence[CheckedTurn]) -> dict:
    """Counts over a batch: turns, invented titles, fact errors, median and slowest seconds per turn."""
    seconds = [c.seconds for c in checked]
    return {
        "turns": len(checked),
        "invented_titles": sum(len(c.invented) for c in checked),
        "fact_errors": sum(len(c.fact_errors) for c in checked),
        "median_s": statistics.median(seconds) if seconds else 0.0,
        "max_s": max(seconds, default=0.0),
        "acts": {a: sum(c.act == a for c in checked) for a in sorted({c.act for c in checked})},
    }
