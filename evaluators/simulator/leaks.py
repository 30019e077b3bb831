"""Does a simulated user's message name one of its targets? Find it, and redact it (the ``described``
seeker), or drop the sentence as iEvaLM does (the ``ievalm`` seeker, :func:`ievalm_filter`).

A title counts as named when a run of words in the message matches it with a fuzzy score of at
least 90 (rapidfuzz ``ratio`` over lower-cased words, punctuation ignored), with or without a
leading article, with or without the year. Runs one word shorter or longer than the title are tried
too, so "the dark knight rises" still catches "The Dark Knight Rises (2012)" and a dropped or extra
word does not hide a title.

Titles of one short word ("Up", "Her", "Heat") are also ordinary words; for them only the capitalised
word counts, and not as the first word of a sentence unless the year follows — otherwise every
"her" would be a leak.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rapidfuzz import fuzz

from catalog.items import Item
from catalog.matcher import ARTICLES

THRESHOLD = 90.0
REDACTED = "[title withheld]"
SHORT_TITLE = 6  # letters: a one-word title shorter than this is matched as a capitalised word only
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)


@dataclass(frozen=True)
class Leak:
    item_id: str
    title: str
    start: int  # character span in the message
    end: int


def _words(text: str) -> list[tuple[str, int, int]]:
    return [(m.group().lower().replace("’", "'"), m.start(), m.end()) for m in _WORD.finditer(text)]


def _variants(item: Item) -> list[list[str]]:
    """The title's word sequences to look for: as written, and without a leading article."""
    words = [w for w, _, _ in _words(item.title)]
    variants = [words] if words else []
    if len(words) > 1 and words[0] in ARTICLES:
        variants.append(words[1:])
    return variants


def find_leaks(text: str, targets: list[Item] | tuple[Item, ...], *, threshold: float = THRESHOLD) -> list[Leak]:
    """Every place in ``text`` that names one of ``targets`` (non-overlapping, in order)."""
    words = _words(text)
    found: list[Leak] = []
    for item in targets:
        for variant in _variants(item):
            if len(variant) == 1 and len(variant[0]) < SHORT_TITLE:
                found += _short_title(text, item, variant[0])
                continue
            wanted = " ".join(variant)
            for size in {max(1, len(variant) - 1), len(variant), len(variant) + 1}:
                for i in range(0, len(words) - size + 1):
                    window = words[i : i + size]
                    if fuzz.ratio(" ".join(w for w, _, _ in window), wanted) >= threshold:
                        found.append(Leak(item.id, item.name, window[0][1], _end_with_year(text, window[-1][2])))
    return _disjoint(found)


def _short_title(text: str, item: Item, word: str) -> list[Leak]:
    leaks = []
    for m in re.finditer(rf"(?<![\w'’]){re.escape(word)}(?![\w'’])", text, re.IGNORECASE):
        written = m.group()
        year_follows = item.year is not None and re.match(rf"\s*\(?{item.year}\)?", text[m.end() :])
        capitalised = written[:1].isupper()
        sentence_start = not text[: m.start()].strip() or text[: m.start()].rstrip()[-1] in ".!?\"'“"
        if year_follows or (capitalised and not sentence_start):
            leaks.append(Leak(item.id, item.name, m.start(), _end_with_year(text, m.end())))
    return leaks


def _end_with_year(text: str, end: int) -> int:
    """Extend a title span over a following "(1999)" or "1999"."""
    m = re.match(r"\s*\(?\d{4}\)?", text[end:])
    return end + m.end() if m else end


def _disjoint(leaks: list[Leak]) -> list[Leak]:
    out: list[Leak] = []
    for leak in sorted(leaks, key=lambda x: (x.start, -(x.end - x.start))):
        if out and leak.start < out[-1].end:
            if leak.end > out[-1].end:
                last = out[-1]
                out[-1] = Leak(last.item_id, last.title, last.start, leak.end)
            continue
        out.append(leak)
    return out


def redact(text: str, leaks: list[Leak]) -> str:
    """``text`` with every leaked span replaced by :data:`REDACTED`."""
    for leak in sorted(leaks, key=lambda x: x.start, reverse=True):
        text = text[: leak.start] + REDACTED + text[leak.end :]
    return text


# -- iEvaLM's rule (the ``ievalm`` seeker) ------------------------------------------------------------------

IEVALM_PARTIAL = 90.0  # iEvaLM drops a sentence whose partial ratio with a target title exceeds this
SORRY = "Sorry, "
_SENTENCE = re.compile(r"(?<=[.!?…])\s+")


def _title_forms(item: Item) -> list[str]:
    """A target's title as iEvaLM compares it: with its year, and without."""
    bare = item.title.strip().lower()
    forms = [bare]
    if item.year:
        forms.insert(0, f"{bare} ({item.year})")
    return forms


def ievalm_filter(
    text: str, targets: list[Item] | tuple[Item, ...], *, sorry: bool
) -> tuple[str, list[tuple[str, str]]]:
    """``text`` as iEvaLM's seeker passes it on: every sentence that names a target dropped (rapidfuzz
    ``partial_ratio`` > 90 with the title, with or without its year), and, when ``sorry`` (the round was no
    hit), "Sorry, " put first. Returns the text and the dropped (sentence, title) pairs.

    ``partial_ratio`` finds a title inside a longer sentence, so a short title that is also a word ("Up",
    "Heat") drops every sentence holding that word: iEvaLM's behaviour, kept (the ``described`` seeker is
    the careful one)."""
    kept: list[str] = []
    dropped: list[tuple[str, str]] = []
    for sentence in _SENTENCE.split(text.strip()):
        if not sentence:
            continue
        lowered = sentence.lower()
        named = next(
            (
                item
                for item in targets
                if any(fuzz.partial_ratio(form, lowered) > IEVALM_PARTIAL for form in _title_forms(item))
            ),
            None,
        )
        if named is None:
            kept.append(sentence)
        else:
            dropped.append((sentence, named.name))
    out = " ".join(kept).strip()
    if sorry and not out.lower().startswith("sorry"):
        out = SORRY + out if out else SORRY.strip(", ") + "."
    return out, dropped
