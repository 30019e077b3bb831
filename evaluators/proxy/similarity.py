"""Similarity of two texts for the proxies: content-word overlap (lexical), or the cosine of sentence embeddings
(the packaged all-MiniLM-L6-v2, :func:`load_embedder`). A result says which was used, and the calibration is tied
to it."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from evaluators.proxy.text_checks import content_words, overlap

LEXICAL = "lexical"

MINILM = "minilm"


class Embedder(Protocol):
    """What a sentence embedder must offer (a sentence-transformers model does)."""

    def encode(self, sentences: list[str], **kwargs: Any) -> np.ndarray: ...


def load_embedder() -> tuple[Embedder | None, str]:
    """The packaged all-MiniLM-L6-v2 on the CPU (one per process, shared with the small systems' text
    recommender), or None and why (then the proxies stay lexical)."""
    from llm_clients.sentence_encoder import SentenceEncoderMissing, load_sentence_encoder

    try:
        return load_sentence_encoder(), "all-MiniLM-L6-v2 (packaged, offline)"
    except SentenceEncoderMissing as e:
        return None, f"sentence embeddings unavailable ({e}); using lexical similarity"


class Similarity:
    """Similarity of two texts: content-word overlap, or cosine of sentence embeddings."""

    def __init__(self, embedder: Embedder | None):
        self.embedder = embedder
        self.name = MINILM if embedder is not None else LEXICAL

    def pairs(self, pairs: list[tuple[str, str]]) -> list[float]:
        if not pairs:
            return []
        if self.embedder is None:
            return [overlap(content_words(a), content_words(b)) for a, b in pairs]
        texts = sorted({t for p in pairs for t in p})
        vectors = np.asarray(self.embedder.encode(texts, normalize_embeddings=True, show_progress_bar=False))
        index = {t: i for i, t in enumerate(texts)}
        return [float(vectors[index[a]] @ vectors[index[b]]) for a, b in pairs]
