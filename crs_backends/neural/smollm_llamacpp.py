"""The small UniCRS's decoder run by llama.cpp on the package's GGUF file (Q4_1), with the soft prompt as input
embeddings: llama.cpp's low-level API takes a batch of embedding vectors (``llama_batch_init(n, n_embd, 1)``) as
readily as a batch of tokens, so a turn is one embedding batch (the prompt vectors, positions 0 … P-1), one token
batch (the chat-form context) and then one token a step, all in one KV cache.

The GGUF holds the same weights as the torch copy (that copy is the GGUF dequantized), but llama.cpp multiplies in
its quantized formats, so logits differ a little from torch's: ``bench/unicrs_backends.py`` measures the latency of
both routes and how far their tokens and rankings agree.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

N_CTX = 512  # prompt (≤ 12 vectors) + context (≤ 80 tokens) + reply (≤ 40): far below


# llama.cpp holds one log callback for the whole process and calls it from every later model load (the embedded
# judge's too): the silent callback is made once and lives as long as the process. One kept on a decoder was freed
# with it and the next load called freed memory (a segmentation fault, tests/test_unicrs_smollm.py).
_QUIET: list[Any] = []


def _silence(llama_cpp: Any) -> None:
    if not _QUIET:
        _QUIET.append(llama_cpp.llama_log_callback(lambda *args: None))
    llama_cpp.llama_log_set(_QUIET[0], ctypes.c_void_p(0))


class LlamaCppError(RuntimeError):
    """llama.cpp is missing or could not load / run the model."""


class LlamaCppDecoder:
    """One llama.cpp context over the GGUF; not thread-safe by itself (calls hold :attr:`lock`)."""

    def __init__(self, gguf: Path, n_embd: int, *, threads: int = 2, n_ctx: int = N_CTX):
        try:
            import llama_cpp
        except ImportError as e:
            raise LlamaCppError("llama-cpp-python is not installed (pip install llama-cpp-python)") from e
        self.L: Any = llama_cpp
        self.lock = threading.Lock()
        llama_cpp.llama_backend_init()
        _silence(llama_cpp)
        self.model = llama_cpp.llama_model_load_from_file(str(gguf).encode(), llama_cpp.llama_model_default_params())
        if not self.model:
            raise LlamaCppError(f"llama.cpp could not load {gguf}")
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = params.n_batch = params.n_ubatch = n_ctx
        params.n_threads = params.n_threads_batch = max(1, threads)
        self.ctx = llama_cpp.llama_init_from_model(self.model, params)
        if not self.ctx:
            llama_cpp.llama_model_free(self.model)
            raise LlamaCppError(f"llama.cpp could not start a context for {gguf}")
        self.n_ctx = n_ctx
        self.n_embd = int(llama_cpp.llama_model_n_embd(self.model))
        if self.n_embd != n_embd:
            self.close()
            raise LlamaCppError(f"{gguf} has width {self.n_embd}, the prompt {n_embd}")
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(self.model)))
        self._embd_batch = llama_cpp.llama_batch_init(n_ctx, n_embd, 1)
        self._token_batch = llama_cpp.llama_batch_init(n_ctx, 0, 1)
        self._embeddings = False

    # ---- steps ----
    def _set_embeddings(self, on: bool) -> None:
        if on != self._embeddings:
            self.L.llama_set_embeddings(self.ctx, on)
            self._embeddings = on

    def _decode(self, batch: Any, n: int, start: int) -> None:
        for i in range(n):
            batch.pos[i] = start + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = 1 if i == n - 1 else 0
        batch.n_tokens = n
        if self.L.llama_decode(self.ctx, batch) != 0:
            raise LlamaCppError("llama_decode failed")

    def prefill(self, vectors: np.ndarray, ids: list[int], *, hidden: bool = False) -> int:
        """A fresh sequence: the prompt ``vectors`` (P, n_embd) as embeddings, then the context ``ids``; returns the
        length. ``hidden``: the output is the final hidden state (:meth:`last_hidden`) instead of logits."""
        if len(vectors) + len(ids) >= self.n_ctx:
            raise LlamaCppError(f"{len(vectors)} prompt vectors + {len(ids)} tokens exceed the context ({self.n_ctx})")
        self.L.llama_memory_clear(self.L.llama_get_memory(self.ctx), True)
        self._set_embeddings(hidden)
        flat = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1)
        ctypes.memmove(self._embd_batch.embd, flat.ctypes.data, flat.nbytes)
        self._decode(self._embd_batch, len(vectors), 0)
        for i, t in enumerate(ids):
            self._token_batch.token[i] = t
        self._decode(self._token_batch, len(ids), len(vectors))
        return len(vectors) + len(ids)

    def step(self, token: int, position: int) -> None:
        self._token_batch.token[0] = token
        self._decode(self._token_batch, 1, position)

    def last_logits(self) -> np.ndarray:
        ptr = self.L.llama_get_logits_ith(self.ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy()

    def last_hidden(self) -> np.ndarray:
        """The final hidden state (after the last norm) at the last position of a ``hidden=True`` prefill."""
        ptr = self.L.llama_get_embeddings_ith(self.ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self.n_embd,)).copy()

    def greedy(
        self,
        vectors: np.ndarray,
        ids: list[int],
        max_new_tokens: int,
        *,
        end_ids: set[int],
        banned: Callable[[list[int]], list[int]] | None = None,
        first_logits: list[np.ndarray] | None = None,
    ) -> list[int]:
        """Greedy reply ids after the prompt and context (the end token excluded). ``first_logits``: a list the
        prefill's logits (the next token's, before any ban) are appended to, for a caller that reads more than the
        reply from the same pass (the small UniCRS's option letters)."""
        with self.lock:
            n = self.prefill(vectors, ids)
            if first_logits is not None:
                first_logits.append(self.last_logits())
            new: list[int] = []
            for _ in range(max(0, min(max_new_tokens, self.n_ctx - n - 1))):
                logits = self.last_logits()
                if banned is not None:
                    off = banned(new)
                    if off:
                        logits[off] = -np.inf
                token = int(np.argmax(logits))
                if token in end_ids:
                    break
                new.append(token)
                self.step(token, n)
                n += 1
            return new

    def close(self) -> None:
        L = self.L
        for name in ("_embd_batch", "_token_batch"):
            batch = self.__dict__.pop(name, None)
            if batch is not None:
                L.llama_batch_free(batch)
        if getattr(self, "ctx", None):
            L.llama_free(self.ctx)
            self.ctx = None
        if getattr(self, "model", None):
            L.llama_model_free(self.model)
            self.model = None
