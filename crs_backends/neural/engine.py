"""What every neural system (KBRD, BARCOR, UniCRS) offers the common interface.

A model sees a conversation the way the published code does: ``ConvInput``
(utterances, user first and alternating, plus the KG entity names linked in
them; defined beside the iEvaLM records it is read from, in :mod:`catalog.ievalm_records`).
It returns ranked item entity ids and a reply text. Mapping to catalog items, placeholder
filling and storage live in :mod:`crs_backends.neural.system`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path

from catalog.ievalm_records import ConvInput
from crs_backends.neural.kg_reader import KGData

TOP_K = 50  # items kept per turn, as published
MOVIE_SLOT = "<movie>"  # what our models and the adapter use for "an item goes here"


def fill_movie_slots(text: str, items: list[str] | None) -> str:
    """Replace each ``MOVIE_SLOT`` with the next of ``items`` (cycling when there are more slots than items);
    the text is left as it is without items (the adapter then rephrases, see ``system.repair_text``)."""
    if MOVIE_SLOT not in text or not items:
        return text
    pieces = text.split(MOVIE_SLOT)
    out = [pieces[0]]
    for i, rest in enumerate(pieces[1:]):
        out.append(items[i % len(items)])
        out.append(rest)
    return "".join(out)


@dataclass
class TrainConfig:
    """Knobs shared by the three trainers. ``size``: ``small`` (local, minutes on CPU) or ``full`` (published sizes)."""

    size: str = "small"
    epochs: int = 1
    max_steps: int | None = None  # stop after this many optimizer steps in total (rec + conv)
    batch_size: int = 16
    lr: float = 1e-3
    seed: int = 0
    device: str = "cpu"
    resume: bool = True  # continue each stage from its state (training.state_path: <out>/.train/.../trainer_state.pt)
    progress: bool = True


@dataclass
class TrainReport:
    system: str
    out: Path
    steps: int
    losses: dict[str, list[float]]  # part ("rec", "conv") -> loss per logged step
    seconds: float


ProgressFn = Callable[[str, int, int], None]  # (phase, done, total)


class NeuralModel(ABC):
    """A loaded KBRD/BARCOR/UniCRS: recommendation + generation over one KG."""

    system: str  # "kbrd" | "barcor" | "unicrs"
    kg: KGData

    @abstractmethod
    def recommend(self, inp: ConvInput, k: int = TOP_K) -> list[tuple[int, float]]:
        """The top-``k`` item entity ids (restricted to ``kg.item_ids``) with scores, best first."""

    @abstractmethod
    def generate(self, inp: ConvInput, *, items: list[str] | None = None) -> str:
        """The reply text. ``items`` (top recommended item names) fill movie slots when the model emits them;
        a model that emits slots returns them as ``MOVIE_SLOT`` when ``items`` is None."""

    def reply_text(self, inp: ConvInput) -> str:
        """The reply as the published ``get_response`` shows it when it does not recommend, before any item
        fills the model's placeholder (see :attr:`placeholder`)."""
        return self.generate(inp, items=None)

    @property
    def placeholder(self) -> str:
        """The token the CRS Arena policy replaces with ranked item names, in order."""
        return MOVIE_SLOT

    def stream(self, inp: ConvInput, *, items: list[str] | None = None) -> Iterator[str]:
        yield self.generate(inp, items=items)

    def option_scores(self, inp: ConvInput, options: list[str]) -> list[float]:
        """The model's raw score for each option letter (iEvaLM's ``get_choice``, before the state is added).

        Each model reads the letters at the step its published ``get_choice`` reads them; see the overrides."""
        raise NotImplementedError(f"{self.system} has no option scores")

    # how the published get_response penalises the option just chosen: KBRD and UniCRS add -1e5 to its state
    # (``state[i] += -1e5``), BARCOR sets it (``state[i] = -1e5``); see crs_backends.neural.policy
    penalty_rule: str = "add"

    def choose(self, inp: ConvInput, options: list[str], used: AbstractSet[str] = frozenset()) -> str:
        """iEvaLM attribute mode: the option letter with the highest score, options already used penalised."""
        if not options:
            raise ValueError("no options to choose from")
        scores = self.option_scores(inp, options)
        values = [score + (-1e5 if option in used else 0.0) for option, score in zip(options, scores)]
        return options[max(range(len(options)), key=values.__getitem__)]

    @property
    def description(self) -> str:
        return self.system


class WordRepeatGuard:
    """Forbids a token that would repeat the previous word back to back ("The The"), for the small local
    versions only: the published systems decode with ``no_repeat_ngram_size`` 3 alone, which lets a
    small model stutter. A token's word is its text stripped and lower-cased (letters only)."""

    def __init__(self, tokenizer):
        self.word_of: dict[int, str] = {}
        by_word: dict[str, list[int]] = {}
        for token_id in range(len(tokenizer)):
            word = tokenizer.decode([token_id], skip_special_tokens=True).strip().lower()
            if len(word) > 1 and word.isalpha():
                self.word_of[token_id] = word
                by_word.setdefault(word, []).append(token_id)
        self.ids_of = by_word

    def banned(self, previous: int) -> list[int]:
        word = self.word_of.get(int(previous))
        return self.ids_of.get(word, []) if word else []

    def __call__(self, input_ids, scores):
        """As a transformers ``LogitsProcessor``."""
        for row in range(input_ids.shape[0]):
            ids = self.banned(int(input_ids[row, -1]))
            if ids:
                scores[row, ids] = -float("inf")
        return scores
