"""Finding the titles a piece of text mentions.

Two sources of mentions, in order of position in the text:

* spans that look like titles: ``"Quoted"``, ``*emphasised*``, ``Title (1999)``;
  each is matched to the catalog (fuzzy, ≥ 90), and a span that looks like a
  title with a year but matches nothing is reported as unmatched (a title the
  model may have invented);
* catalog titles written verbatim anywhere in the text (case-insensitive, on
  word boundaries). Short one-word titles ("Up", "Her", "Big") are only taken
  from the marked spans above, since as plain words they are too ambiguous.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from catalog.items import Item
from catalog.matcher import TitleMatcher, normalize_title

_QUOTED = re.compile(r"[\"“”]([^\"“”\n]{2,80})[\"“”]|\*{1,2}([^*\n]{2,80})\*{1,2}")
_WORD = r"(?:[A-Z0-9][\w'’:&.!?,-]*|[–—-]|of|the|a|an|and|in|on|to|for|with|at|from|vs\.?)"
_WITH_YEAR = re.compile(
    rf"({_WORD}(?:\s+{_WORD}){{0,11}})"  # up to 12 words of a title before "(Year)"
    r"[\"”*_]*\s*\(((?:19|20)\d{2})\)"
)
_MIN_PLAIN_LEN = 5  # titles shorter than this are only found in marked spans
_MIN_ONE_WORD_LEN = 8  # one-word titles ("Heat", "Jaws") too: as plain words they are ambiguous


@dataclass(frozen=True)
class Mention:
    text: str  # as written
    start: int
    item: Item | None  # None: looks like a title but matches nothing


def find_mentions(text: str, matcher: TitleMatcher) -> list[Mention]:
    """Mentions of titles in ``text``, in order of first appearance, one per item."""
    found: list[Mention] = []
    taken: list[tuple[int, int]] = []

    def overlaps(start: int, end: int) -> bool:
        return any(start < e and s < end for s, e in taken)

    for m in _WITH_YEAR.finditer(text):
        item = _match_with_trimming(m.group(1), m.group(2), matcher)
        start = m.start()
        if item is None:
            # "Blade Runner and Made Up Film (2019)": the unknown title is the
            # part after the last "and"; the words before stay free for other matches
            words = m.group(1).split()
            if "and" in words[:-1]:
                cut = len(words) - 1 - words[::-1].index("and")
                offset = m.group(1).find(" ".join(words[cut + 1 :]))
                start = m.start() + max(offset, 0)
        found.append(Mention(text[start : m.end()].strip(), start, item))
        taken.append((start, m.end()))
    for m in _QUOTED.finditer(text):
        if overlaps(m.start(), m.end()):
            continue
        span = (m.group(1) or m.group(2)).strip()
        item = matcher.match(span)
        if item is not None:
            found.append(Mention(span, m.start(), item))
            taken.append((m.start(), m.end()))
    plain = _plain(text)
    collapsed = " " + " ".join(plain.split()) + " "
    for key, items in matcher.plain_titles().items():
        if len(key) < _MIN_PLAIN_LEN or (" " not in key and len(key) < _MIN_ONE_WORD_LEN):
            continue
        if f" {key} " not in collapsed:  # cheap test before the regex
            continue
        for m in re.finditer(r"(?<![\w])" + re.escape(key).replace(r"\ ", r"\s+") + r"(?![\w])", plain):
            if not overlaps(m.start(), m.end()):
                item = min(items, key=lambda i: i.popularity if i.popularity is not None else 10**9)
                found.append(Mention(text[m.start() : m.end()], m.start(), item))
                taken.append((m.start(), m.end()))
            break
    found.sort(key=lambda x: x.start)
    unique: list[Mention] = []
    seen: set[str] = set()
    for mention in found:
        ident = mention.item.id if mention.item else "?" + normalize_title(mention.text)
        if ident not in seen:
            seen.add(ident)
            unique.append(mention)
    return unique


def _plain(text: str) -> str:
    """Lower-case with punctuation turned into spaces, keeping character offsets (one char per char)."""
    return "".join(c.lower() if c.isalnum() or c.isspace() else " " for c in text)


def _match_with_trimming(title: str, year: str, matcher: TitleMatcher) -> Item | None:
    """Match "… words Title (1999)", dropping leading words until a title matches.

    The regex is greedy to the left ("I loved The Matrix (1999)"), so try the
    longest span first and shorten it from the left.
    """
    words = title.split()
    for i in range(len(words)):
        candidate = " ".join(words[i:])
        item = matcher.match(f"{candidate} ({year})")
        if item is not None and (item.year is None or abs(item.year - int(year)) <= 1):
            return item
    return None
