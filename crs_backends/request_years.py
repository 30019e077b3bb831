"""The years a message asks for, for the request reader (:mod:`crs_backends.request_reader`): ranges ("between 1990
and 2000"), bounds ("after 2010", "nothing before 1990"), decades ("the late 80s", "the nineties"), single years,
"the last five years", "recent", "old" and "classics". Years inside a title are the title's; "in my thirties" and
"10 years old" are ages."""

from __future__ import annotations

import re

from rapidfuzz import process
from rapidfuzz.distance import OSA

from crs_backends import request_words as w
from crs_backends.request_scopes import Scope, mask, scope_at

_YEAR = r"(1[89]\d\d|20[0-4]\d)"

_RANGE = re.compile(
    rf"\b(?:between|from)\s+(?:the\s+year\s+)?{_YEAR}\s+(?:and|to|until|till|-|–)\s+{_YEAR}\b"
    rf"|\b{_YEAR}\s*(?:-|–|to)\s*{_YEAR}\b"
)

_BOUND = re.compile(
    rf"\b(after|since|post|later\s+than|newer\s+than|before|pre|earlier\s+than|older\s+than|until|up\s+to)[\s-]+"
    rf"(?:the\s+year\s+)?{_YEAR}\b"
)

_DECADE = re.compile(r"(?<![\w'])(?:(early|mid|late)[\s-]+(?:the\s+)?)?'?(1[89]|20)?(\d)0'?s\b")

_DECADE_WORD = re.compile(r"(?<![\w])(?:(early|mid|late)[\s-]+(?:the\s+)?)?([a-z]{5,10})(?![\w])")

_SINGLE = re.compile(rf"(?<![\w(]){_YEAR}(?![\w)]|'?s\b)")

_LAST_N = re.compile(
    r"\b(?:last|past)\s+(few|couple(?:\s+of)?|two|three|four|five|six|seven|eight|nine|ten|fifteen|twenty|\d{1,2})"
    r"\s+years?\b"
)

_RECENT = re.compile(
    r"\b(?:recent(?:ly)?|newer|newest|latest|modern|new\s+(?:releases?|movies?|films?|ones?)|brand[\s-]+new"
    r"|contemporary|current|this\s+decade|these\s+days|nowadays)\b"
)

_OLD = re.compile(
    r"\b(?:old|older|oldies?|old[\s-]+school|classics?|vintage|black[\s-]+and[\s-]+white|golden[\s-]+age|retro)\b"
)

_AGE = re.compile(r"\b\d+[\s-]*(?:years?|yrs?)[\s-]*old\b|\byears?[\s-]+old\b")

_PART = {"early": (0, 4), "mid": (3, 7), "late": (5, 9), None: (0, 9)}


def find_years(masked: str, scopes: list[Scope], claimed: list, newest: int | None) -> tuple | None:
    """(min, max) of the years asked for, either end None; None when none are."""
    text = masked
    for s, e in claimed:
        text = text[:s] + " " * (e - s) + text[e:]  # years inside a title are the title's
    text = mask(text, _AGE)

    def negated(position: int) -> bool:
        return scope_at(scopes, position) is not None

    for m in _RANGE.finditer(text):
        a, b = (int(x) for x in m.groups() if x)
        return min(a, b), max(a, b)
    for m in _BOUND.finditer(text):
        word, year = m.group(1), int(m.group(2))
        later = word.startswith(("after", "since", "post", "later", "newer"))
        if negated(m.start()):  # "nothing before 1990", "nothing after 2000"
            return (None, year) if later else (year, None)
        if later:
            return (year + 1 if word in ("after", "post") or word.startswith("later") else year), None
        return None, (year - 1 if word in ("before", "pre") or word.startswith("earlier") else year)
    decades: list[tuple[int, int]] = []  # "the 80s or 90s": every decade named, as one range
    for m in _DECADE.finditer(text):
        if negated(m.start()):
            continue
        century = m.group(2) or ("19" if m.group(3) >= "3" else "20")
        first = int(century + m.group(3) + "0")
        lo, hi = _PART[m.group(1)]
        decades.append((first + lo, first + hi))
    for m in _DECADE_WORD.finditer(text):
        word = m.group(2)
        first_year = w.DECADE_WORDS.get(word)
        if first_year is None and len(word) >= 7 and word.endswith(("ies", "ys", "es", "s")):
            near = process.extractOne(word, list(w.DECADE_WORDS), scorer=OSA.distance, score_cutoff=2)
            first_year = w.DECADE_WORDS[near[0]] if near else None
        if first_year is None or negated(m.start()):
            continue
        if re.search(r"\b(?:my|his|her|their|our|your|in\s+(?:my|his|her|their))\s+$", text[: m.start()]):
            continue  # "in my thirties": an age
        lo, hi = _PART[m.group(1)]
        decades.append((first_year + lo, first_year + hi))
    if decades:
        return min(d[0] for d in decades), max(d[1] for d in decades)
    for m in _SINGLE.finditer(text):
        if not negated(m.start()):
            year = int(m.group(1))
            return year, year
    if newest is not None:
        for m in _LAST_N.finditer(text):
            n = m.group(1)
            return newest - (int(n) if n.isdigit() else w.NUMBER_WORDS.get(n, 5)), None
        for m in _RECENT.finditer(text):
            if not negated(m.start()):
                return newest - w.RECENT_YEARS, None
    for m in _OLD.finditer(text):
        if negated(m.start()):  # "nothing too old"
            return w.NOT_OLD_FROM, None
        return None, w.OLD_UNTIL
    return None
