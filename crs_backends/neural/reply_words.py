"""The words, word pairs and triples a small set's replies were trained on, kept with the set.

The small versions show only clauses whose words their training replies used (:func:`reply_facts.small_reply`),
and the small UniCRS decodes within those words, pairs and triples (:class:`engine.LexiconGuard`). The training
replies are what the synthetic generator wrote with every slot kept ("You might like <movie>: it is a <genre>
film"), so their words do not depend on the catalog; the builder writes them into the set (``reply_words.json``)
and the running system reads them from there, without the generator. The catalog's own words (titles, people,
genres), which fill the slots, are added at run time from the chat catalog.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from catalog.catalog import Catalog
from crs_backends.neural.engine import START, reply_items
from crs_backends.neural.reply_facts import genre_word, words

FILE = "reply_words.json"


@dataclass(frozen=True)
class ReplyWords:
    """``words``: every word of the training replies (lower case); ``pairs``: word -> what follows it there (a
    word, a slot such as ``<movie>``, or a punctuation mark); ``triples``: two items ("but <movie>", "<actor> ,";
    ``^`` for the reply's start: "^ i") -> what follows them there (empty in a set written before they were kept:
    the guard then checks pairs only)."""

    words: frozenset[str]
    pairs: dict[str, frozenset[str]]
    triples: dict[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, replies: Iterable[str]) -> ReplyWords:
        found: set[str] = set()
        follows: dict[str, set[str]] = defaultdict(set)
        follows_two: dict[str, set[str]] = defaultdict(set)
        for reply in replies:
            found.update(words(reply))
            items = reply_items(reply)
            for a, b in zip(items, items[1:]):
                if a[0].isalpha() or a.startswith("<"):  # what follows a word: a word, a slot or a punctuation mark
                    follows[a].add(b)
            started = [START, *items]
            for a, b, c in zip(started, started[1:], started[2:]):
                follows_two[f"{a} {b}"].add(c)
        return cls(
            frozenset(found),
            {a: frozenset(b) for a, b in follows.items()},
            {ab: frozenset(c) for ab, c in follows_two.items()},
        )

    def lexicon(self, catalog: Catalog) -> frozenset[str]:
        """The words a reply may use over ``catalog``: the training replies' and every slot value's (titles,
        genres and their adjectives, directors, stars, writers)."""
        found = set(self.words)
        for item in catalog.items:
            found.update(words(" ".join([item.name, *item.genres, *item.directors, *item.cast, *item.writers])))
            found.update(words(" ".join(genre_word(g) for g in item.genres)))
        return frozenset(found)

    def write(self, root: str | Path, system: str | None = None) -> Path:
        """The set's file (``reply_words.json``), or one system's (``<system>_reply_words.json``) where the systems
        of a set were trained on different replies."""
        path = Path(root) / (f"{system}_{FILE}" if system else FILE)
        data = {
            "words": sorted(self.words),
            "pairs": {a: sorted(b) for a, b in sorted(self.pairs.items())},
            "triples": {ab: sorted(c) for ab, c in sorted(self.triples.items())},
        }
        path.write_text(json.dumps(data, ensure_ascii=False, indent=0), encoding="utf-8")
        return path

    @classmethod
    def read(cls, root: str | Path, system: str | None = None) -> ReplyWords | None:
        """``system``'s file in the set, else the set's; None when the set has neither (a set built before the file
        existed) or it is unreadable."""
        if system and (Path(root) / f"{system}_{FILE}").exists():
            path = Path(root) / f"{system}_{FILE}"
        else:
            path = Path(root) / FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls(
                frozenset(data["words"]),
                {a: frozenset(b) for a, b in data["pairs"].items()},
                {ab: frozenset(c) for ab, c in data.get("triples", {}).items()},
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
