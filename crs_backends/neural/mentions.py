"""The genres and people a message names, as KG entity names: the small local versions' linking.

CRS Arena links entities by fuzzy-matching the *whole message* against every KG name (rapidfuzz WRatio >= 90,
``src/model/utils.py: get_entity``), which the published sets keep. A message like "I loved The Matrix and
Inception. Any mind-bending sci-fi?" links nothing that way: each name scores about 85 against the longer text,
and a short name such as "Sci-Fi" at most 60. The small local versions were trained on conversations whose
entities are annotated (titles, genres, directors, actors), so their rankings only follow a conversation whose
entities are found; they link titles with the chat catalog's mention finder and genres and people here:
a genre by the ways users name it (:func:`genre_phrases`: the wording the small versions were trained on,
:data:`crs_backends.neural.reply_facts.GENRE_NOUNS`, in the plural and the singular), a person by full name, whole
words, case-insensitive.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import replace

from catalog.ievalm_records import Record
from crs_backends.chatcrs_embedded import GENRE_WORDS
from crs_backends.neural.reply_facts import GENRE_ADJECTIVE, GENRE_NOUNS

MIN_PERSON_LENGTH = 6  # "Al Pacino" yes; very short multi-word names match too much ordinary text
_WORD = re.compile(r"\w")
_HEAD = re.compile(r"\w*")  # a phrase's (or the text's) leading run of word characters, maybe empty
_START = re.compile(r"(?<!\w)")  # where a whole-word phrase may start


def _singular(phrase: str) -> str:
    """The singular of a plural genre phrase ("funny movies" -> "funny movie", "comedies" -> "comedy")."""
    head, _, last = phrase.rpartition(" ")
    if last == "movies":
        last = "movie"
    elif last.endswith("ies"):
        last = last[:-3] + "y"
    elif last.endswith("s") and not last.endswith("ss"):
        last = last[:-1]
    return f"{head} {last}".strip()


def genre_phrases(genre: str) -> list[str]:
    """The lower-case phrases that name ``genre`` in a message: its name, the wording the small versions were
    trained on (:data:`GENRE_NOUNS`, plural), their singulars ("a funny movie", "a thriller") and the adjective
    the replies use before "movie" / "film" ("a sci-fi film", "an animated movie")."""
    nouns = [genre.lower(), *(n.lower() for n in GENRE_NOUNS[genre])]
    adjective = GENRE_ADJECTIVE.get(genre, genre.lower())
    phrases = nouns + [_singular(n) for n in nouns] + [f"{adjective} {noun}" for noun in ("movie", "film", "flick")]
    return list(dict.fromkeys(phrases))


class AttributeLinker:
    """Finds the KG's genre and person entities in a text; ``linker(text)`` → entity names, in text order, once each."""

    def __init__(self, entity2id: Mapping[str, int], item_ids: Iterable[int]):
        items = set(item_ids)
        self.phrases: dict[str, str] = {}  # lowercased phrase -> entity name
        for name, eid in entity2id.items():
            if eid in items or name.startswith("<"):
                continue
            base = name.split(" [")[0]  # the KG builder suffixes a name shared by two types
            genre = next((g for g in GENRE_NOUNS if g.lower() == base.lower()), None)
            if genre is not None:
                for phrase in genre_phrases(genre):
                    self.phrases.setdefault(phrase, name)
                # and the words people use that ChatCRS reads too ("heist" and "gangster" for Crime, "scary" for
                # Horror): "Any good heist movies?" linked nothing, so the small KBRD greeted twice
                for word, of in GENRE_WORDS.items():
                    if of == genre:
                        self.phrases.setdefault(word, name)
            elif " " in base.strip() and len(base) >= MIN_PERSON_LENGTH:
                self.phrases.setdefault(base.lower(), name)
        # the phrases by their leading run of word characters, the longest first (the longest wins at one place): a
        # message is read once, left to right, trying only the phrases that begin as the text does there. One regular
        # expression of all of them (20,000 names for ReDial) took a millisecond a message
        self._by_head: dict[str, list[str]] = {}
        for phrase in sorted(self.phrases, key=len, reverse=True):
            self._by_head.setdefault(_HEAD.match(phrase).group(), []).append(phrase)  # type: ignore[union-attr]

    def __call__(self, text: str) -> list[str]:
        """The entity names the text names, in text order, once each: each phrase as whole words (no word character
        just before or after it), any case, the longest at a place, matches not overlapping."""
        if not text or not self._by_head:
            return []
        low = text.lower()
        found: list[str] = []
        resume = 0  # a match ends here: no other starts inside it
        for start in (m.start() for m in _START.finditer(low)):
            if start < resume:
                continue
            for phrase in self._by_head.get(_HEAD.match(low, start).group(), ()):  # type: ignore[union-attr]
                end = start + len(phrase)
                if low.startswith(phrase, start) and not _WORD.match(low, end):
                    found.append(self.phrases[phrase])
                    resume = end
                    break
        return list(dict.fromkeys(found))


def link_conversations(records: Iterable[Record], kg) -> list[Record]:
    """Real conversations linked in ``kg``'s KG as the small versions link a chat: each record's entities are the
    titles it names plus the genres and people its messages name (:class:`AttributeLinker`), and its targets the
    films the KG holds; new records, in order (each distinct message is read once)."""
    linker = AttributeLinker(kg.entity2id, kg.item_ids)
    links: dict[str, list[str]] = {}
    out = []
    for r in records:
        found = list(r.entity)
        for text in r.context:
            if text not in links:
                links[text] = linker(text)
            found += links[text]
        entity = [e for e in dict.fromkeys(found) if e in kg.entity2id]
        out.append(replace(r, entity=entity, rec=[n for n in r.rec if n in kg.entity2id]))
    return out
