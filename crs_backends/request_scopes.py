"""Negation with scope, and feelings about titles, for the request reader (:mod:`crs_backends.request_reader`).

A cue (:data:`~crs_backends.request_words.NEGATION_CUE`) governs the words after it up to the end of its clause (a
comma, "but", "so", a new "I want …"; at most eight words) and nothing else; "rather X than Y" and "Y is not my
thing" govern Y. A title in a scope is disliked (or only not seen: "seen Heat but not Casino"); outside one, the
words around it say whether it was liked, seen or only mentioned."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from crs_backends import request_words as w


@dataclass
class Scope:
    cue_start: int
    start: int
    end: int
    feeling: bool  # "don't like", "hate": a title in it is disliked (else only ruled out)
    content: bool = field(default=False)
    cue: str = ""


def mask(text: str, pattern: re.Pattern[str]) -> str:
    """``text`` with every match of ``pattern`` blanked (places kept)."""
    return pattern.sub(lambda m: " " * len(m.group(0)), text)


_SEEN_VERB = re.compile(r"\b(?:seen|saw|watched)\b")

_TOKEN = re.compile(r"[\w'-]+|[^\w\s]")

LISTED = re.compile(r"\s*(?:,|,?\s*(?:and|or|&|as\s+well\s+as))\s*(?:also\s+|the\s+)?")


def negation_scopes(cues: str) -> list[Scope]:
    """The phrase each negation cue governs: from the cue to its clause's end, at most eight words."""
    scopes: list[Scope] = []
    for m in w.NEGATION_CUE.finditer(cues):
        scope = Scope(m.start(), m.end(), m.end(), feeling=m.group("feeling") is not None, cue=m.group(0))
        tokens = list(_TOKEN.finditer(cues, m.end()))
        words = 0
        for k, t in enumerate(tokens):
            token = t.group(0)
            if not token[0].isalnum() and token[0] != "'":
                break
            if token in w.SCOPE_ENDS:
                break
            if token in ("and", "or", "nor", "&"):
                after = tokens[k + 1].group(0) if k + 1 < len(tokens) else ""
                if after in w.CLAUSE_STARTS or not after[:1].isalnum():
                    break
            elif scope.content and token in w.SCOPE_SOFT_ENDS:
                break
            if w.NEGATION_CUE.match(cues, t.start()) and scope.content:
                break  # a new cue starts its own scope ("no musicals no westerns")
            words += 1
            if words > w.SCOPE_MAX_WORDS:
                break
            if token not in w.SCOPE_FILLER and token not in ENGLISH_STOP_WORDS and token not in w.GENERIC_WORDS:
                scope.content = True
            scope.end = t.end()
        scopes.append(scope)
    for m in w.RATHER_THAN.finditer(cues):  # "rather a comedy than a drama": what follows "than"
        end = re.search(r"[,.;!?]|\s(?:but|and\s+i|so)\s|$", cues[m.end() :])
        scopes.append(Scope(m.end() - 4, m.end(), m.end() + (end.start() if end else 0), feeling=False, content=True))
    for m in w.NEGATION_AFTER.finditer(cues):  # "horror is not my thing": the clause before it
        start = max(cues.rfind(c, 0, m.start()) for c in ",.;!?") + 1
        for word in (" but ", " and "):
            at = cues.rfind(word, start, m.start())
            if at >= 0:
                start = at + len(word)
        scopes.append(Scope(start, start, m.start(), feeling=True, content=True))
    return scopes


def scope_at(scopes: list[Scope], position: int) -> Scope | None:
    """The scope ``position`` lies in (the latest cue's when they nest)."""
    inside = [s for s in scopes if s.start <= position < s.end]
    return max(inside, key=lambda s: s.cue_start) if inside else None


def title_feeling(masked: str, start: int, end: int, scopes: list[Scope]) -> str:
    """How the person feels about the title at ``start:end``: "+" liked, "-" disliked, "seen", or "mention"."""
    scope = scope_at(scopes, start)
    if scope is not None:
        sentence = masked[max(masked.rfind(c, 0, scope.cue_start) for c in ".!?") + 1 : scope.cue_start]
        if scope.cue.strip() in ("not", "never") and _SEEN_VERB.search(sentence):
            return "unseen"  # "I've seen Heat but not Casino": Casino is not disliked, only not seen
        return "-"
    before = masked[max(0, start - 60) : start]
    after = masked[end : end + 60]
    if w.DISLIKED_AFTER.match(after):
        return "-"
    if w.LIKED_BEFORE.search(before) or w.LIKED_AFTER.match(after):
        return "+"
    if w.SEEN_BEFORE.search(before):
        return "seen"
    return "mention"
