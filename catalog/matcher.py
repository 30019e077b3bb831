"""Finding catalog items from the way people and models write titles.

Handles case, punctuation, leading articles ("The Matrix" / "Matrix, The"),
"Title (Year)" vs "Title", and small typos (rapidfuzz, score ≥ 90 by default,
the threshold the published CRSs use for entity linking).
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Sequence

from rapidfuzz import fuzz, process

from catalog.items import Item, split_name

ARTICLES = ("the", "a", "an")
DEFAULT_THRESHOLD = 90.0


def normalize_title(text: str) -> str:
    """Lower-case, accents and punctuation removed, leading/trailing article dropped, year removed."""
    title, _ = split_name(text)
    title = unicodedata.normalize("NFKD", title)
    title = "".join(c for c in title if not unicodedata.combining(c)).lower()
    title = title.replace("&", " and ")
    title = re.sub(r"[^\w\s]", " ", title)
    words = title.split()
    if len(words) > 1 and words[-1] in ARTICLES:  # "matrix, the"
        words = words[:-1]
    if len(words) > 1 and words[0] in ARTICLES:
        words = words[1:]
    return " ".join(words)


def plain_title(text: str) -> str:
    """Lower-case, punctuation turned into spaces, whitespace collapsed; articles kept."""
    return " ".join("".join(c.lower() if c.isalnum() else " " for c in text).split())


class TitleMatcher:
    """Index of item titles for exact and fuzzy lookup."""

    def __init__(self, items: Iterable[Item], *, threshold: float = DEFAULT_THRESHOLD):
        self.threshold = threshold
        self._by_norm: dict[str, list[Item]] = defaultdict(list)
        self._by_plain: dict[str, list[Item]] = defaultdict(list)
        for item in items:
            self._by_norm[normalize_title(item.title)].append(item)
            self._by_plain[plain_title(item.title)].append(item)
        self._keys: list[str] = list(self._by_norm)

    def match(self, text: str, *, threshold: float | None = None) -> Item | None:
        """The best item for ``text`` or None. A year in ``text`` disambiguates remakes."""
        _, year = split_name(text)
        norm = normalize_title(text)
        if not norm:
            return None
        candidates = self._by_norm.get(norm)
        if candidates:
            return _pick(candidates, year)
        found = process.extractOne(norm, self._keys, scorer=fuzz.ratio, score_cutoff=threshold or self.threshold)
        if found is None:
            return None
        return _pick(self._by_norm[found[0]], year)

    def match_all(self, texts: Sequence[str]) -> list[Item | None]:
        return [self.match(t) for t in texts]

    def plain_titles(self) -> dict[str, list[Item]]:
        """Titles as written (lower-case, punctuation as spaces, article kept) → items."""
        return self._by_plain


def _pick(candidates: list[Item], year: int | None) -> Item:
    if year is not None:
        for item in candidates:
            if item.year == year:
                return item
        close = [i for i in candidates if i.year and abs(i.year - year) <= 1]
        if close:
            return close[0]
    # no year given: the best-known version
    return min(candidates, key=lambda i: i.popularity if i.popularity is not None else 10**9)
