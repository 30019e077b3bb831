"""The small UniCRS's decoder run by llama.cpp on the package's GGUF file (Q4_1), with the soft prompt as input
embeddings: llama.cpp's low-level API takes a batch of embedding vectors (``llama_batch_init(n, n_embd, 1)``) as
readily as a batch of tokens, so a turn is one embedding batch (the prompt vectors, positions 0 … P-1), one token
batch (the chat-form context) and then one token a step, all in one KV cache.

A KV cache computed elsewhere has no input in llama.cpp's batch API either: the recommendation prompt's per-layer
key/value prefix (UniCRS's prefix: each prompt position is also a past key and value of every layer;
:meth:`LlamaCppDecoder.prefix_hidden`), or torch's whole prefill of a reply (:meth:`LlamaCppDecoder.greedy_after`).
It enters through the sequence state: the state ``llama_state_seq_get_data`` writes for one placeholder token gives
the layout (its cell's record, then each layer's keys and values as float16 rows), which is grown to n cells at
positions 0 … n-1 (:class:`StateLayout`), filled with the cache's rows, and put back with
``llama_state_seq_set_data``; decoding goes on from position n. llama.cpp stores keys after RoPE, in the GGUF's own
dimension order (:func:`key_layout`): torch's cached keys are rotated already, and a prefix key (never rotated in
torch) is rotated by P by the caller, since a query at position p + P meets a key rotated by P as the torch decoder's
query at p meets the unrotated one (:meth:`UniCRSSmall._llama_prefix`).

The GGUF holds the same weights as the torch copy (that copy is the GGUF dequantized), but llama.cpp multiplies in
its quantized formats, so logits differ a little from torch's: ``bench/unicrs_backends.py`` measures the latency of
both routes and how far their tokens and rankings agree.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

# the recommendation's per-layer prefix and prompt (each ≤ 60 positions) + context (≤ 200 tokens), or the conversation
# prompt (≤ 40 vectors) + context + reply (≤ 40): below
N_CTX = 512
F16 = 1  # ggml's type id of float16, the KV cache's type


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


def key_layout(keys: np.ndarray) -> np.ndarray:
    """Keys (…, head width) from transformers' dimension order into the GGUF's: ``convert_hf_to_gguf.py`` permutes
    each head's query and key rows of a Llama model (``LlamaModel.permute``) so that llama.cpp's RoPE rotates adjacent
    pairs (2i, 2i + 1) where transformers' rotates (i, i + width/2)."""
    width = keys.shape[-1]
    return keys.reshape(*keys.shape[:-1], 2, width // 2).swapaxes(-1, -2).reshape(keys.shape)


def cache_rows(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-layer keys and values as torch holds them, (layers, KV heads, positions, head width), as the rows of
    llama.cpp's sequence state: (layers, positions, KV heads × head width), the keys in the GGUF's order."""
    layers, heads, positions, width = keys.shape
    rows = (layers, positions, heads * width)
    return (
        key_layout(keys).transpose(0, 2, 1, 3).reshape(rows),
        np.ascontiguousarray(values.transpose(0, 2, 1, 3)).reshape(rows),
    )


class StateLayout:
    """Where a sequence state of ``cells`` cells, as ``llama_state_seq_get_data`` writes it, holds each layer's keys
    and values: the state's bytes and the offsets of those float16 rows. Parsed from a real state (placeholder
    tokens) or grown from one (:meth:`grown`), so that nothing of the format but what is checked here is assumed: one
    stream, ``cells`` cells, keys and values of type float16 with rows of ``row`` bytes, the values untransposed.
    Anything else raises LlamaCppError (another llama.cpp version: the caller runs torch instead)."""

    def __init__(self, blob: bytes, cells: int, row: int):
        self.blob = bytearray(blob)
        self.cells, self.row = cells, row
        try:
            self.keys, self.values = self._parse()
        except struct.error as e:
            raise LlamaCppError(f"the sequence state is shorter than its layout says ({e})") from None

    def _parse(self) -> tuple[list[int], list[int]]:
        b, off = self.blob, 8  # a constant 8-byte word, then the KV cache's part
        streams, cells = struct.unpack_from("<II", b, off)
        off += 8
        if streams != 1 or cells != self.cells:
            raise LlamaCppError(f"unexpected sequence state: {streams} streams of {cells} cells, not 1 of {self.cells}")
        for _ in range(cells):
            _pos, n_seq = struct.unpack_from("<iI", b, off)
            off += 8 + 4 * n_seq
        transposed, layers = struct.unpack_from("<II", b, off)
        off += 8
        if transposed:
            raise LlamaCppError("the sequence state stores its values transposed")
        offsets: list[list[int]] = [[], []]
        for part in offsets:  # every layer's keys, then every layer's values
            for _ in range(layers):
                kind, row = struct.unpack_from("<iQ", b, off)
                off += 12
                if kind != F16 or row != self.row:
                    raise LlamaCppError(f"unexpected KV rows: type {kind}, {row} bytes (float16, {self.row} expected)")
                part.append(off)
                off += cells * row
        if off != len(b):
            raise LlamaCppError(f"the sequence state has {len(b) - off} bytes more than its layout")
        return offsets[0], offsets[1]

    @classmethod
    def grown(cls, template: StateLayout, cells: int) -> StateLayout:
        """The layout of ``cells`` cells at positions 0 … cells-1, written from a one-cell ``template`` (a real state:
        its leading word, its cell's record with the position changed, its layers' row headers), and parsed as a
        real one is. Reading a real state of every length would cost a decode of that many placeholder tokens."""
        if template.cells != 1:
            raise LlamaCppError("a layout grows from a one-cell state")
        b = template.blob
        record_at = 16  # the leading word, the stream count and the cell count
        record_end = record_at + 8 + 4 * struct.unpack_from("<I", b, record_at + 4)[0]
        record = b[record_at:record_end]
        rows_at = record_end + 8  # after the transposed flag and the layer count
        out = bytearray(b[:8]) + struct.pack("<II", 1, cells)
        for pos in range(cells):
            out += struct.pack("<i", pos) + record[4:]
        out += b[record_end:rows_at]
        for offsets in (template.keys, template.values):
            for off in offsets:
                out += b[off - 12 : off] + bytes(cells * template.row)
        return cls(bytes(out), cells, template.row)

    def filled(self, keys: np.ndarray, values: np.ndarray) -> bytearray:
        """The state with ``keys``/``values`` (layers, cells, row/2) in place of the placeholders' (float16)."""
        shape = (len(self.keys), self.cells, self.row // 2)
        if keys.shape != shape or values.shape != shape:
            raise LlamaCppError(f"a prefix of shape {keys.shape} / {values.shape} for a state of {shape}")
        for offsets, rows in ((self.keys, keys), (self.values, values)):
            data = np.ascontiguousarray(rows, dtype=np.float16)
            for layer, off in enumerate(offsets):
                self.blob[off : off + self.cells * self.row] = data[layer].tobytes()
        return self.blob


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
        self._template: StateLayout | None = None  # the one-cell state the KV caches put here grow from

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

    def prefill(self, vectors: np.ndarray, ids: list[int], *, hidden: bool = False, start: int = 0) -> int:
        """The prompt ``vectors`` (P, n_embd) as embeddings, then the context ``ids``, from position ``start`` (0: a
        fresh sequence; else after the cells a prefix put there); returns the length. ``hidden``: the output is the
        final hidden state (:meth:`last_hidden`) instead of logits."""
        if start + len(vectors) + len(ids) >= self.n_ctx:
            raise LlamaCppError(
                f"{start} prefix cells + {len(vectors)} prompt vectors + {len(ids)} tokens exceed the context "
                f"({self.n_ctx})"
            )
        if not start:
            self.L.llama_memory_clear(self.L.llama_get_memory(self.ctx), True)
        self._set_embeddings(hidden)
        flat = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1)
        ctypes.memmove(self._embd_batch.embd, flat.ctypes.data, flat.nbytes)
        self._decode(self._embd_batch, len(vectors), start)
        for i, t in enumerate(ids):
            self._token_batch.token[i] = t
        self._decode(self._token_batch, len(ids), start + len(vectors))
        return start + len(vectors) + len(ids)

    def real_layout(self, cells: int, row: int) -> StateLayout:
        """The state of ``cells`` placeholder tokens, as llama.cpp writes it."""
        if cells >= self.n_ctx:
            raise LlamaCppError(f"{cells} cells exceed the context ({self.n_ctx})")
        self.L.llama_memory_clear(self.L.llama_get_memory(self.ctx), True)
        for i in range(cells):
            self._token_batch.token[i] = 0
        self._decode(self._token_batch, cells, 0)
        size = int(self.L.llama_state_seq_get_size(self.ctx, 0))
        buf = (ctypes.c_uint8 * size)()
        if self.L.llama_state_seq_get_data(self.ctx, buf, size, 0) != size:
            raise LlamaCppError("llama_state_seq_get_data failed")
        return StateLayout(bytes(buf), cells, row)

    def _put_cache(self, keys: np.ndarray, values: np.ndarray) -> int:
        """A fresh sequence whose KV cache holds ``keys``/``values`` (layers, n, KV heads × head width) at positions
        0 … n-1; returns n. The layout grows from a one-cell state read once (:meth:`StateLayout.grown`)."""
        cells, row = int(keys.shape[1]), int(keys.shape[2]) * 2
        if cells >= self.n_ctx:
            raise LlamaCppError(f"{cells} cached positions exceed the context ({self.n_ctx})")
        if self._template is None or self._template.row != row:
            self._template = self.real_layout(1, row)
        blob = StateLayout.grown(self._template, cells).filled(keys, values)
        self.L.llama_memory_clear(self.L.llama_get_memory(self.ctx), True)
        src = (ctypes.c_uint8 * len(blob)).from_buffer(blob)
        if not self.L.llama_state_seq_set_data(self.ctx, src, len(blob), 0):
            raise LlamaCppError("llama_state_seq_set_data refused the cache")
        return cells

    def prefix_hidden(self, keys: np.ndarray, values: np.ndarray, vectors: np.ndarray, ids: list[int]) -> np.ndarray:
        """The final hidden state at the last position of: a per-layer key/value prefix at positions 0 … P-1 (``keys``
        and ``values``: (layers, P, KV heads × head width); the keys in the GGUF's order, :func:`key_layout`, and
        rotated as RoPE rotates position P), then the prompt ``vectors`` and the context ``ids`` from position P."""
        with self.lock:
            cells = self._put_cache(keys, values)
            self.prefill(vectors, ids, hidden=True, start=cells)
            return self.last_hidden()

    def hidden(self, vectors: np.ndarray, ids: list[int]) -> np.ndarray:
        """The final hidden state at the last position of the prompt ``vectors`` then the context ``ids``."""
        with self.lock:
            self.prefill(vectors, ids, hidden=True)
            return self.last_hidden()

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
            logits = self.last_logits()
            if first_logits is not None:
                first_logits.append(logits.copy())
            return self._greedy_from(n, logits, max_new_tokens, end_ids, banned)

    def greedy_after(
        self,
        keys: np.ndarray,
        values: np.ndarray,
        logits: np.ndarray,
        max_new_tokens: int,
        *,
        end_ids: set[int],
        banned: Callable[[list[int]], list[int]] | None = None,
    ) -> list[int]:
        """Greedy reply ids after a prefill computed elsewhere: its KV cache (``keys``/``values``: (layers, n, KV heads
        × head width), the keys after RoPE and in the GGUF's order, :func:`key_layout`) and the next token's
        ``logits``; llama.cpp decodes the reply's tokens from there."""
        with self.lock:
            n = self._put_cache(keys, values)
            self._set_embeddings(False)  # the steps give logits (a ranking before may have asked for hidden states)
            return self._greedy_from(n, np.array(logits, dtype=np.float32), max_new_tokens, end_ids, banned)

    def _greedy_from(
        self,
        n: int,
        logits: np.ndarray,
        max_new_tokens: int,
        end_ids: set[int],
        banned: Callable[[list[int]], list[int]] | None,
    ) -> list[int]:
        """Greedy steps from a sequence of ``n`` positions whose next-token ``logits`` are given (lock held)."""
        new: list[int] = []
        for _ in range(max(0, min(max_new_tokens, self.n_ctx - n - 1))):
            if new:
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
