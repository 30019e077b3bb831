"""Lexical retrieval over item documents (TF-IDF, cosine), used to top up lists."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

from catalog.items import Item


class Retriever:
    def __init__(self, items: Sequence[Item]):
        self.items = list(items)
        self._vectorizer = TfidfVectorizer(
            ngram_range=(1, 2), sublinear_tf=True, stop_words="english", min_df=1, dtype=np.float32
        )
        self._matrix = self._vectorizer.fit_transform([i.document() for i in self.items])
        ranks = np.array([i.popularity or len(self.items) for i in self.items], dtype=np.float32)
        # a tie-breaker only: 0.01 for the best-known item, ~0 for the least known
        self._prior = 0.01 * (1.0 - ranks / (ranks.max() + 1.0))

    def known_terms(self, text: str) -> list[str]:
        """The words of ``text`` the index knows (English stop words dropped), in order: none means
        the text says nothing a search could use."""
        vocabulary = self._vectorizer.vocabulary_
        return [t for t in self._vectorizer.build_analyzer()(text) if " " not in t and t in vocabulary]

    def search(self, query: str, k: int = 10, *, exclude: Iterable[str] = ()) -> list[Item]:
        """The ``k`` items whose documents best match ``query``; popular items break ties."""
        excluded = set(exclude)
        scores = self._prior.copy()
        if query.strip():
            scores += (self._matrix @ self._vectorizer.transform([query]).T).toarray().ravel()
        order = np.argsort(-scores, kind="stable")
        out: list[Item] = []
        for idx in order:
            item = self.items[idx]
            if item.id not in excluded:
                out.append(item)
                if len(out) == k:
                    break
        return out
