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


# -- titles a reply offers (CONCEPT's recommended items) ------------------------------------------------

# a capitalised run that may be a title: up to 8 words, small connecting words allowed inside
_CONNECTOR = r"(?:of|the|an|and|a|or|in|on|to|for|with|at|from|vs)\b\.?"
_TITLE_RUN = r"((?:[A-Z0-9][\w'’:&.!-]*)(?:[ \t]+(?:[A-Z0-9][\w'’:&.!-]*|" + _CONNECTOR + r")){0,7})"
# a reply offering something: "I recommend X", "try X", "how about X", "you might enjoy X", "check out X"
_OFFER = re.compile(
    r"\b(?:recommend(?:ing)?|suggest(?:ing)?|try|watch(?:ing)?|check\s+out|how\s+about|what\s+about|"
    r"might\s+(?:like|enjoy|love)|would\s+(?:like|enjoy|love)|(?:I|I'd|I\s+would)\s+go\s+with)\s+" + _TITLE_RUN
)
# a list line: "1. X", "2) X", "- X", "• X", up to a separator (":", " - ", "(", ",", end of line)
_LIST_LINE = re.compile(r"(?m)^\s*(?:\d{1,2}[.)]|[-*•])\s+\**" + _TITLE_RUN)
_NOT_TITLES = {
    "i", "you", "it", "this", "that", "these", "those", "one", "some", "something", "anything", "all",
    "them", "movie", "movies", "film", "films", "yes", "no", "sure", "ok", "okay", "thanks", "hi", "hello",
}  # fmt: skip


def find_offered_titles(text: str, matcher: TitleMatcher, *, people: frozenset[str] = frozenset()) -> list[Mention]:
    """What a reply offers as items: every mention :func:`find_mentions` finds, plus spans written the
    way recommendations are written that match nothing — a quoted or emphasised span, the head of a
    list line, a capitalised run after an offer ("I recommend X", "you might enjoy X") — reported with
    ``item`` None. Runs that are a person's name (``people``, normalised) or a pronoun are not titles.
    A run is trimmed at its first separator (", ", " - ", ":" followed by a space, " (", ".").
    """
    found = find_mentions(text, matcher)
    known = {normalize_title(m.text) for m in found} | {normalize_title(m.item.title) for m in found if m.item}
    spans = [(m.start, m.start + len(m.text)) for m in found]

    def inside_known(start: int, end: int) -> bool:
        return any(start < e and s < end for s, e in spans)

    candidates: list[tuple[int, str]] = []
    for m in _QUOTED.finditer(text):
        candidates.append((m.start(), (m.group(1) or m.group(2))))
    for pattern in (_LIST_LINE, _OFFER):
        for m in pattern.finditer(text):
            candidates.append((m.start(1), m.group(1)))
    extra: list[Mention] = []
    for start, raw in candidates:
        whole = _trim_title(raw)
        for span in _pieces(whole, matcher):
            span = span.strip()
            offset = start + max(raw.find(span), 0)
            norm = normalize_title(span)
            if not norm or norm in known or norm in people or norm.split()[0] in _NOT_TITLES:
                continue
            if not span[:1].isupper() and not span[:1].isdigit():
                continue  # "something lighter", a quoted phrase in lower case
            if inside_known(offset, offset + len(span)):
                continue
            known.add(norm)
            extra.append(Mention(span, offset, matcher.match(span)))
    return sorted(found + extra, key=lambda x: x.start)


def _pieces(run: str, matcher: TitleMatcher) -> list[str]:
    """A run as the titles it names: split at " or "; a part that is no title as a whole is split at
    " and " only where that reveals a catalog title ("Inception and The Prestigige"), so an unknown
    title with "and" in it ("The Adventures of Milo and Ours") stays whole."""
    out: list[str] = []
    for part in re.split(r"\s+or\s+", run):
        halves = re.split(r"\s+(?:and|&)\s+", part)
        if len(halves) > 1 and matcher.match(part) is None and any(matcher.match(h) for h in halves):
            out.extend(halves)
        else:
            out.append(part)
    return out


def _trim_title(raw: str) -> str:
    span = re.split(r",\s|\s[-–—]\s|:\s|\s\(|\.(?:\s|$)|[!?]", raw.strip(), maxsplit=1)[0]
    return span.strip(" *_\"'“”‘’.:;")
