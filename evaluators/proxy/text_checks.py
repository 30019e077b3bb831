"""Word-level checks of a reply's text, for the LLM-free proxies (:mod:`evaluators.proxy.features`): the cues of
``assets/proxy/cues.toml``, content words and their overlap, the spelling check against a word list, stutters,
unfinished sentences and degenerate repetition."""

from __future__ import annotations

import math
import re
import tomllib
from pathlib import Path

from catalog.mentions import Mention

ASSETS = Path(__file__).resolve().parents[2] / "assets" / "proxy"

# -- cues (assets/proxy/cues.toml, matched case-insensitively) ----------------------------------

_CUES = tomllib.loads((ASSETS / "cues.toml").read_text(encoding="utf-8"))
_FLAGS = re.IGNORECASE | re.MULTILINE


def _compile(cues: list[str]) -> re.Pattern:
    return re.compile("|".join(f"(?:{c})" for c in cues), _FLAGS)


COMPLAINT = _compile(_CUES["complaint"])  # beyond the rejection cues of evaluators.metrics
ACCEPT = _compile(_CUES["accept"])
PREFERENCE = _compile(_CUES["preference"])
SUGGESTION = _compile(_CUES["suggestion"])
REASON = _compile(_CUES["reason"])
GENERIC = _compile(_CUES["generic"])  # stock replies that carry no content
UNFINISHED = re.compile(_CUES["unfinished"], re.IGNORECASE)  # a sentence a lost title slot left unfinished

WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")

_LIST_LINE = re.compile(r"^\s*\d{1,2}\s*[:.)]?\s+\S.*$|i would recommend the following items?[^\n]*", _FLAGS)

SENTENCE_END = re.compile(r"[.!?]")

_TITLE = "Title"  # stands in for each title a reply names while its text is checked

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


def _stem(word: str) -> str:
    word = word.lower().replace("’", "'").removesuffix("'s")
    for suffix, repl in (("ations", "e"), ("ation", "e"), ("ies", "y"), ("ing", ""), ("ed", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            return word[: -len(suffix)] + repl
    return word


def content_words(text: str) -> set[str]:
    return {_stem(w) for w in WORD.findall(text.lower()) if w not in _STOPWORDS and len(w) > 1}


def overlap(a: set[str], b: set[str]) -> float:
    return len(a & b) / math.sqrt(len(a) * len(b)) if a and b else 0.0


def known(word: str, lexicon: frozenset[str]) -> bool:
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


def unknown_words(text: str, lexicon: frozenset[str]) -> tuple[int, int]:
    """(checked words, unknown words). Capitalised words are taken as names and not checked;
    a word with a capital after a lower-case letter ("invisSystem") is always unknown."""
    checked = unknown = 0
    for word in WORD.findall(text):
        if re.search(r"[a-z][A-Z]", word):
            checked += 1
            unknown += 1
        elif word[0].isupper():
            continue
        else:
            checked += 1
            unknown += not known(word, lexicon)
    return checked, unknown


def stutters(text: str) -> int:
    """Adjacent repeated words ("the the"), the title placeholder aside."""
    words = [w.lower() for w in WORD.findall(text)]
    return sum(1 for a, b in zip(words, words[1:]) if a == b and a != _TITLE.lower())


def is_degenerate(text: str) -> bool:
    """Massive repetition: few distinct words among many, or one word making up most of them."""
    words = [w.lower() for w in WORD.findall(text)]
    if len(words) < DEGENERATE_WORDS:
        return False
    counts: dict[str, int] = {}
    for w in words:
        counts[w] = counts.get(w, 0) + 1
    return len(counts) / len(words) < DEGENERATE_DISTINCT or max(counts.values()) / len(words) > DEGENERATE_TOP


def clean_reply(text: str, mentions: list[Mention]) -> str:
    """The reply without its numbered list, each title it names replaced by the word "Title" (a capitalised
    word, so a name to the spelling check, and the sentence around it stays whole)."""
    for m in sorted(mentions, key=lambda m: -m.start):
        text = text[: m.start] + _TITLE + text[m.start + len(m.text) :]
    return _LIST_LINE.sub(" ", text)
