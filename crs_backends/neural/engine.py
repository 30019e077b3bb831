"""What every neural system (KBRD, BARCOR, UniCRS) offers the common interface.

A model sees a conversation the way the published code does: ``ConvInput``
(utterances, user first and alternating, plus the KG entity names linked in
them; defined beside the iEvaLM records it is read from, in :mod:`catalog.ievalm_records`).
It returns ranked item entity ids and a reply text. Mapping to catalog items, placeholder
filling and storage live in :mod:`crs_backends.neural.system`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from catalog.ievalm_records import ConvInput
from crs_backends.neural.kg_reader import KGData

if TYPE_CHECKING:
    import torch
    from torch import nn

TOP_K = 50  # items kept per turn, as published
MOVIE_SLOT = "<movie>"  # what our models and the adapter use for "an item goes here"


def top_items(scores: torch.Tensor, item_ids: Sequence[int] | torch.Tensor, k: int) -> list[tuple[int, float]]:
    """The ``k`` best (item entity id, score) of one row of item scores, best first; ``scores[i]`` is the score of
    ``item_ids[i]``."""
    top = scores.topk(min(k, scores.numel()))
    return [(int(item_ids[i]), float(v)) for v, i in zip(top.values.tolist(), top.indices.tolist())]


# transformers 4.28 (the version CRS Arena pins) decoded with ``clean_up_tokenization_spaces`` on by default for
# the BART and GPT-2 tokenizers: ``PreTrainedTokenizerBase.clean_up_tokenization`` in
# transformers/tokenization_utils_base.py made these replacements, in this order. transformers 5 leaves them off.
_LEGACY_CLEANUP = (
    (" .", "."),
    (" ?", "?"),
    (" !", "!"),
    (" ,", ","),
    (" ' ", "'"),
    (" n't", "n't"),
    (" 'm", "'m"),
    (" 's", "'s"),
    (" 've", "'ve"),
    (" 're", "'re"),
)


def legacy_cleanup(text: str) -> str:
    """The decode clean-up CRS Arena's published BARCOR and UniCRS got from transformers 4.28 ("Heat ." ->
    "Heat.", "it 's" -> "it's"), applied whatever transformers version is installed."""
    for before, after in _LEGACY_CLEANUP:
        text = text.replace(before, after)
    return text


def pad_as_published(ids: list[int], length: int, pad_id: int, *, left: bool = False) -> tuple[list[int], list[int]]:
    """``ids`` and their attention mask padded as the published code's ``tokenizer.pad(padding="max_length",
    max_length=length, pad_to_multiple_of=8)`` pads them: to ``length`` rounded up to a multiple of 8, on the right
    (BART) or the ``left`` (UniCRS's GPT-2); ids already that long are left as they are."""
    width = -(-length // 8) * 8
    fill = max(0, width - len(ids))
    if left:
        return [pad_id] * fill + ids, [0] * fill + [1] * len(ids)
    return ids + [pad_id] * fill, [1] * len(ids) + [0] * fill


def fill_slots(text: str, token: str, items: Sequence[str] | None) -> str:
    """The one slot filler: each ``token`` in turn becomes the next of ``items``, CRS Arena's rule
    (:func:`crs_backends.neural.policy.fill_placeholders`: a slot past the last item is removed); ``items=None``
    leaves the text as it is."""
    from crs_backends.neural.policy import fill_placeholders

    return text if items is None else fill_placeholders(text, token, list(items))


@dataclass
class TrainConfig:
    """Knobs shared by the three trainers. ``size``: ``small`` (local, minutes on CPU) or ``full`` (published sizes)."""

    size: str = "small"
    epochs: int = 1
    max_steps: int | None = None  # stop after this many optimizer steps in total (rec + conv)
    batch_size: int = 16
    lr: float = 1e-3
    # the reply model's learning rate (None: ``lr``). The small BARCOR's BART learnt at 2e-3 to ignore its encoder: it
    # wrote one sentence for every conversation ("Hi!" and a horror request alike); at 5e-4 it answers each
    reply_lr: float | None = None
    # the gradient-norm limit of KBRD's recommender (None: not clipped; 1.0, every stage's limit, is what the shipped
    # small-v5 was built with). CRSLab trains it unclipped (config/crs/kbrd/redial.yaml sets no gradient_clip; its
    # base system clips only when one is set), and so does the dataset configuration (recipes.DATASET_SETTINGS): on
    # ReDial (23,183 rec examples, two epochs, first 1,000 test records, width 128) clipping at 1.0 held the small
    # KBRD's R@10 at .169 (.171 with plainly shuffled batches), unclipped it reached .183 (2026-11-26)
    rec_clip: float | None = 1.0
    # steps of a named stage at most, taken before ``max_steps`` is shared out (UniCRS's dataset configuration: its
    # recommendation prompt an epoch, its conversation prompt 150 steps; see recipes.DATASET_SETTINGS)
    stage_steps: dict[str, int] | None = None
    # epochs of a named stage that a trainer runs only when named here (the small UniCRS's prompt pre-training, ``pre``:
    # UniCRS's train_pre.py), outside ``max_steps``
    stage_epochs: dict[str, int] | None = None
    # the small UniCRS's recommendation prompt also learns from the seeker's turns that name a film
    # (TrainData.seeker_records), as UniCRS learns from every turn of either speaker (RUCAIBox/UniCRS
    # src/data/redial/process.py, dataset_rec.py); its conversation prompt keeps the recommender's turns
    rec_every_turn: bool = False
    # what a new model is created with in place of its SIZES' settings (``create(form=...)``; the small UniCRS alone:
    # unicrs_smollm_settings.FORM_KEYS). The dataset configuration gives its prompt UniCRS's windows
    # (recipes.DATASET_SETTINGS)
    form: dict | None = None
    seed: int = 0
    device: str = "cpu"
    resume: bool = True  # continue each stage from its state (training.state_path: <out>/.train/.../trainer_state.pt)
    progress: bool = True

    @property
    def reply_rate(self) -> float:
        return self.reply_lr if self.reply_lr is not None else self.lr


@dataclass
class TrainReport:
    system: str
    out: Path
    steps: int
    losses: dict[str, list[float]]  # part ("rec", "conv") -> loss per logged step
    seconds: float


ProgressFn = Callable[[str, int, int], None]  # (phase, done, total)


def size_settings(sizes: dict[str, dict], size: str) -> dict:
    """The settings of ``size`` in a model's ``SIZES`` (what every ``create`` checks first)."""
    if size not in sizes:
        raise ValueError(f"unknown size {size!r}; choose one of {', '.join(sizes)}")
    return sizes[size]


def check_vocab_fits(vocab_size: int, *tokenizers) -> None:
    """A model's vocabulary must hold every token of its tokenizers (what every ``create`` checks)."""
    lengths = [len(t) for t in tokenizers]
    if any(vocab_size < n for n in lengths):
        held = ", ".join(str(n) for n in lengths)
        raise ValueError(f"vocab_size {vocab_size} is smaller than the tokenizer ({held} tokens)")


class NeuralModel(ABC):
    """A loaded KBRD/BARCOR/UniCRS: recommendation + generation over one KG."""

    system: str  # "kbrd" | "barcor" | "unicrs"
    kg: KGData

    @abstractmethod
    def recommend(self, inp: ConvInput, k: int = TOP_K) -> list[tuple[int, float]]:
        """The top-``k`` item entity ids (restricted to ``kg.item_ids``) with scores, best first."""

    def recommend_many(self, inps: list[ConvInput], k: int = TOP_K) -> list[list[tuple[int, float]]]:
        """:meth:`recommend` of each input (a model that ranks faster in batches overrides it; a bench's loop)."""
        return [self.recommend(inp, k) for inp in inps]

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

    @property
    def fills_placeholder(self) -> bool:
        """Whether CRS Arena's ``get_response`` fills this model's placeholder with its ranking: only UniCRS's does
        (iai-group/iEvaLM-CRS ``src/model/UNICRS.py`` L503-512); KBRD's and BARCOR's show the generated text as it
        is. Our small versions of all three were trained to write :data:`MOVIE_SLOT` for a title, as UniCRS writes
        its placeholder, so theirs is filled too. The ``crs_arena`` variant fills every model's placeholder."""
        return self.system == "unicrs" or getattr(self, "size", "") == "small"

    @property
    def variant(self) -> dict[str, str]:
        """What sets this model apart from others of its architecture and size that its figures depend on, in words
        (the small UniCRS: its recommendation prompt's form); {} where nothing does. ``bench/crs_fidelity.py``
        records it beside the figures, so that a set of another variant does not show them as its own."""
        return {}

    @classmethod
    def variant_of(cls, root, dataset: str) -> dict[str, str]:
        """:attr:`variant` of the set at ``root`` without loading it ({} where it cannot be read)."""
        return {}

    def prepared_modules(self) -> list[nn.Module]:
        """The modules CRS Arena ``prepare``d with its accelerator (fp16 on a GPU under ``crs_arena_exact``: their
        ``forward`` alone, :mod:`crs_backends.neural.mixed_precision`); none unless a model names them."""
        return []

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
