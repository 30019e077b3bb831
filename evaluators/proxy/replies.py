"""Each system turn of a conversation read with the user turns around it (:class:`Reply`): the user's reaction
(negative feedback, a repeated request, acceptance), the reply's text statistics and its flags (a question, a
reason, a stock answer, a run-on)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from catalog.catalog import Catalog
from catalog.mentions import Mention
from evaluators import metrics
from evaluators.proxy.similarity import LEXICAL, MINILM, Similarity
from evaluators.proxy.text_checks import (
    ACCEPT,
    COMPLAINT,
    ENGLISH_SHARE,
    GENERIC,
    PREFERENCE,
    REASON,
    REPEAT_SIMILARITY,
    RUN_ON_WORDS,
    SENTENCE_END,
    SUGGESTION,
    UNFINISHED,
    UNKNOWN_SHARE,
    WORD,
    clean_reply,
    content_words,
    is_degenerate,
    known,
    overlap,
    stutters,
    unknown_words,
)
from evaluators.proxy.word_lists import Resources
from storage.records import Conversation, Turn

REQUEST_SIMILARITY = {LEXICAL: 0.6, MINILM: 0.75}  # a reaction this similar to the request repeats it


@dataclass
class Reply:
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
            or (not WORD.search(self.turn.text) and not self.turn.items)
            or self.degenerate
        )

    @property
    def recommends(self) -> bool:
        return bool(self.turn.items) or any(m.item for m in self.mentions) or self.flags["suggests"]


class MemoCatalog:
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


def effective_words(r: Reply) -> int:
    """The reply's word count; a degenerate reply counts its distinct words only (repeating adds nothing)."""
    words = WORD.findall(r.turn.text)
    return len({w.lower() for w in words}) if r.degenerate else len(words)


def analyse(conversation: Conversation, catalog: Catalog, res: Resources, similarity: Similarity) -> list[Reply]:
    turns = conversation.turns
    replies: list[Reply] = []
    for k, turn in enumerate(turns):
        if turn.role != "system":
            continue
        before = next((t.text for t in reversed(turns[:k]) if t.role == "user"), None)
        after = turns[k + 1].text if k + 1 < len(turns) and turns[k + 1].role == "user" else None
        reply = Reply(turn, before, after, catalog.mentions(turn.text))
        reply.degenerate = is_degenerate(turn.text)
        reply.clean_text = clean_reply(turn.text, reply.mentions)
        reply.words, reply.unknown = unknown_words(reply.clean_text, res.lexicon)
        reply.stutters = stutters(reply.clean_text)
        reply.unfinished = len(UNFINISHED.findall(reply.clean_text))
        content = content_words(turn.text)
        reply.repeats_earlier = reply.degenerate or any(
            (content and overlap(content, content_words(r.turn.text)) >= REPEAT_SIMILARITY)
            or turn.text.strip().lower() == r.turn.text.strip().lower()
            for r in replies
        )
        question = "?" in reply.clean_text
        reply.flags = {
            "question": question,
            "preference": bool(PREFERENCE.search(turn.text)),
            "suggests": bool(SUGGESTION.search(turn.text)),
            "options": len(turn.items) + sum(1 for m in reply.mentions if m.item) >= 2,
            "reason": bool(REASON.search(reply.clean_text)),
            "generic": (
                not turn.items
                and not reply.mentions
                and len(WORD.findall(turn.text)) <= 15
                and bool(GENERIC.search(turn.text))
            ),
            "run_on": reply.words > RUN_ON_WORDS and not SENTENCE_END.search(reply.clean_text),
        }
        if after is not None:
            reply.negative = metrics.is_rejection(after) or bool(COMPLAINT.search(after))
            reply.accepted = not reply.negative and bool(ACCEPT.search(after))
        replies.append(reply)
    pairs = [(r.request, r.reaction) for r in replies if r.request and r.reaction]
    threshold = REQUEST_SIMILARITY[similarity.name]
    for r, s in zip([r for r in replies if r.request and r.reaction], similarity.pairs(pairs)):
        r.repeated_request = (
            s >= threshold and min(len(content_words(r.request or "")), len(content_words(r.reaction or ""))) >= 2
        )
    return replies


def looks_english(conversation: Conversation, res: Resources) -> tuple[bool, float | None]:
    """Whether the user's words are mostly in the English word list (True when too few to tell)."""
    words = [w for t in conversation.turns if t.role == "user" for w in WORD.findall(t.text)]
    if len(words) < 5:
        return True, None
    share = sum(1 for w in words if known(w, res.lexicon)) / len(words)
    return share >= ENGLISH_SHARE, share
