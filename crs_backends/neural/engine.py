"""What every neural system (KBRD, BARCOR, UniCRS) offers the common interface.

A model sees a conversation the way the published code does: ``ConvInput``
(utterances, user first and alternating, plus the KG entity names linked in
them; defined beside the iEvaLM records it is read from, in :mod:`catalog.ievalm_records`).
It returns ranked item entity ids and a reply text. Mapping to catalog items, placeholder
filling and storage live in :mod:`crs_backends.neural.system`.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from catalog.ievalm_records import ConvInput
from crs_backends.neural.kg_reader import KGData

TOP_K = 50  # items kept per turn, as published
MOVIE_SLOT = "<movie>"  # what our models and the adapter use for "an item goes here"


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
    # the reply model's learning rate (None: ``lr``). The small BARCOR's BART learnt at 2e-3 to ignore its encoder: it
    # wrote one sentence for every conversation ("Hi!" and a horror request alike); at 5e-4 it answers each
    reply_lr: float | None = None
    # the gradient-norm limit of KBRD's recommender (None: not clipped; 1.0, every stage's limit, is what the shipped
    # small-v5 was built with). CRSLab trains it unclipped (config/crs/kbrd/redial.yaml sets no gradient_clip; its
    # base system clips only when one is set), and so does the dataset configuration (small.DATASET_SETTINGS): on
    # ReDial (23,183 rec examples, two epochs, first 1,000 test records, width 128) clipping at 1.0 held the small
    # KBRD's R@10 at .169 (.171 with plainly shuffled batches), unclipped it reached .183 (2026-11-26)
    rec_clip: float | None = 1.0
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
    # the small sets' BARCOR and UniCRS rank with a pretrained text encoder (text_rec.TextRecommender), attached by
    # system.load_model when the set holds <system>_textrec_<ds>/; None: the model's own recommender ranks
    text_rec: Any = None
    # the small sets' UniCRS decodes within the words of its training replies (LexiconGuard, keep_to_lexicon)
    lexicon_guard: Any = None

    def keep_to_lexicon(
        self, lexicon: Iterable[str], pairs: dict[str, frozenset[str]], triples: dict[str, frozenset[str]]
    ) -> None:
        """Decode the small version's replies within these words, word pairs and triples (:class:`LexiconGuard`); models
        whose replies need no guard ignore it (the small KBRD and BARCOR: 0 made-up words in 300 held-back
        replies without it)."""
        return None

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

    @property
    def fills_placeholder(self) -> bool:
        """Whether CRS Arena's ``get_response`` fills this model's placeholder with its ranking: only UniCRS's does
        (iai-group/iEvaLM-CRS ``src/model/UNICRS.py`` L503-512); KBRD's and BARCOR's show the generated text as it
        is. The ``crs_arena`` variant and the small versions fill every model's slots."""
        return self.system == "unicrs"

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


_REPLY_ITEM = re.compile(r"<[a-z]+>|[^\W\d_]+(?:'[^\W\d_]*)?|[.,!?;:]")
_LAST_ITEM = re.compile(rf"(?:{_REPLY_ITEM.pattern})[^<\w.,!?;:]*$")  # a reply's last item and what trails it


START = "^"  # the start of a reply, as the first of a triple ("^ i" -> "'d", "couldn't")


def _may_follow(item: str, follows: frozenset[str], exact: bool) -> bool:
    """A punctuation mark or a complete word must be one of ``follows``; a word being written must begin one."""
    if exact or not (item[0].isalpha() or item.startswith("<")):
        return item in follows
    return any(w.startswith(item) for w in follows)


def reply_items(text: str) -> list[str]:
    """A reply as the lexicon guard reads it, lower case: slots (``<movie>``), words (one apostrophe part) and
    punctuation marks; the word pairs it checks (``synthetic.reply_pairs``) are read the same way."""
    return _REPLY_ITEM.findall(text.lower())


class LexiconGuard:
    """Keeps a small version's greedy reply within the words, word pairs and triples its training replies used:
    among the ``top`` most likely next tokens, one that would make the word being written something no training
    reply word begins with ("I'd" + "un" -> "I'dun"), that would follow the previous word with one no training reply
    puts after it ("You" + " about"), or the previous two items with one no training reply puts after them ("but
    <movie>" + "."; "<actor> ," + " with"), is banned, so the decoding takes the best token that stays in the
    language it was taught. The end of text (``end_id``) is allowed only where a training reply may end: after a
    sentence mark, or after a word a sentence may end with. ``pairs``: word -> the words that follow it in the
    training replies (slots such as ``<movie>`` count as words; a punctuation mark after a word must be one the
    training replies put there); ``triples``: "a b" -> what follows those two items (none given: pairs only).

    Seen in a small UniCRS retrained with the shipped recipe (v4): 10 of 300 held-back replies came out "I'dun!",
    shown empty once their made-up word was dropped (``facts.drop_unknown_clauses`` works after the fact, on whole
    clauses; this works while decoding, on one token), and 127 began "You about …". With pairs alone, the shipped v5
    UniCRS still wrote "You're welcome, but <movie>." and "…, with <actor>, with." in 300 held-back replies."""

    def __init__(
        self,
        tokenizer,
        lexicon: Iterable[str],
        pairs: dict[str, frozenset[str]] | None = None,
        triples: dict[str, frozenset[str]] | None = None,
        *,
        end_id: int | None = None,
        top: int = 30,
    ):
        self.tokenizer = tokenizer
        self.top = top
        lexicon = list(lexicon)
        self.prefixes: set[str] = set()
        for word in lexicon:
            for n in range(1, len(word) + 1):
                self.prefixes.add(word[:n])
        self.words = frozenset(lexicon)
        self.pairs = pairs or {}
        self.triples = triples or {}
        self.end_id = end_id
        self._pieces: dict[int, str] = {}

    def _piece(self, token: int) -> str:
        piece = self._pieces.get(token)
        if piece is None:
            piece = self._pieces[token] = self.tokenizer.decode([token], skip_special_tokens=False)
        return piece

    def allows(self, text: str, token: int) -> bool:
        """Whether appending ``token`` to the reply ``text`` keeps every word a lexicon word's beginning, the item
        being written one that can follow the word (and the two items) before it, and a word it completes one that
        could stand where it stands; the end of text only where a reply may end (:meth:`may_end`)."""
        if self.end_id is not None and token == self.end_id:
            return self.may_end(text)
        piece = self._piece(token)
        slot = piece.strip().startswith("<") and piece.strip().endswith(">")
        items = reply_items(text + piece)
        if not items:
            return True
        if not slot:  # the piece's words (a word it continues included) must begin lexicon words
            continued = self._tail(text) if piece[:1].isalpha() or piece[:1] == "'" else ""
            for word in reply_items(continued + piece):
                if word[0].isalpha() and word not in self.prefixes:
                    return False
        items = [START, *items]
        if len(items) > 2 and items[-2][0].isalpha() and not self._fits_at(items, len(items) - 2, exact=True):
            return False  # the word before is complete now ("I couldn" + " exactly", "it" + " 's" + " you")
        return self._fits_at(items, len(items) - 1, exact=False)

    def _fits_at(self, items: list[str], n: int, *, exact: bool) -> bool:
        """Whether ``items[n]`` may follow the word before it (pairs) and the two items before it (triples): as
        written (``exact``), or as the beginning of what may follow (a word still being written)."""
        item = items[n]
        if exact and item[0].isalpha() and self.words and item not in self.words:
            return False
        before = items[n - 1]
        follows = self.pairs.get(before)
        if follows is not None and (before[0].isalpha() or before.startswith("<")):
            if not _may_follow(item, follows, exact):
                return False
        # after punctuation, or after a word the replies never used, no pair to check: the two items before may tell
        follows_two = self.triples.get(f"{items[n - 2]} {before}") if n > 1 else None
        return follows_two is None or _may_follow(item, follows_two, exact)

    def keeps_to(self, text: str) -> bool:
        """Whether a finished reply keeps to what the guard allows: every item as written where it stands, and an
        end where a reply may end."""
        items = [START, *reply_items(text)]
        return all(self._fits_at(items, n, exact=True) for n in range(1, len(items))) and self.may_end(text)

    def may_end(self, text: str) -> bool:
        """Whether a reply may end after ``text``: after a sentence mark, or after a word the training replies end a
        sentence with (its shown form gets the full stop), written in full where it stands; an empty reply may end
        (it is shown as the fallback)."""
        items = [START, *reply_items(text)]
        if len(items) == 1:
            return True
        if items[-1][0].isalpha() and not self._fits_at(items, len(items) - 1, exact=True):
            return False
        if items[-1] in (".", "!", "?"):
            return True
        return "." in self.pairs.get(items[-1], ()) or not self.pairs

    def finish(self, text: str) -> str:
        """A reply the decoding ended where no reply may end (the guard left it nothing to write, or the token limit
        came): its trailing items are dropped back to where one may ("…, with <actor>, with" -> "…, with <actor>"),
        then it ends with a full stop; a reply with no such point is returned with a full stop as it was."""
        kept = text.rstrip()
        while kept and not self.may_end(kept):
            shorter = _LAST_ITEM.sub("", kept).rstrip()
            if shorter == kept:
                break
            kept = shorter
        kept = (kept if kept and self.may_end(kept) else text).rstrip(" ,;:")
        if kept and kept[-1] not in ".!?":
            kept += "."
        return kept

    def _tail(self, text: str) -> str:
        m = re.search(r"[^\W\d_]+(?:'[^\W\d_]*)?$", text)
        return m.group(0) if m else ""

    def banned(self, text: str, logits) -> list[int] | None:
        """Of the ``top`` most likely tokens, those ranked above the first allowed one (greedy decoding then takes
        it); None when no token among them is allowed: the reply should end where it is (seen: "…, with Ellen
        Burstyn, with mentioned." when the decoding went on past that point)."""
        candidates = logits.topk(min(self.top, logits.shape[-1])).indices.tolist()
        out: list[int] = []
        for token in candidates:
            if self.allows(text, token):
                return out
            out.append(token)
        return None
