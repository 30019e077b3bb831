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
is given (:func:`evaluators.proxy.similarity.load_embedder`: the packaged all-MiniLM-L6-v2);
:attr:`ProxyResult.similarity` says which was used, and the calibration is tied to it.

The spelling list is the whole-word vocabulary of the packaged all-MiniLM-L6-v2 tokenizer (about
21,700 English words), ``assets/proxy/words.txt`` and the words of the catalog's titles and people;
without the package only the last two are used, and :attr:`ProxyResult.notes` says so.

This module assembles the result; the parts, in the order they run: :mod:`~evaluators.proxy.text_checks` (cues and
word-level checks), :mod:`~evaluators.proxy.word_lists` (the lists those read), :mod:`~evaluators.proxy.similarity`,
:mod:`~evaluators.proxy.replies` (each system turn with its user turns), :mod:`~evaluators.proxy.factor_proxies`
(the twelve factors) and :mod:`~evaluators.proxy.turn_evidence` (what the turn scorer reads).

The rules were written while reading the 93 CRSArena-Eval development dialogues; the held-back
CRSArena-Eval dialogues are the independent check.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from catalog.catalog import Catalog
from evaluators import metrics
from evaluators.proxy.factor_proxies import ProxyFactor, coherence, score_factors
from evaluators.proxy.replies import MemoCatalog, Reply, analyse, effective_words, looks_english
from evaluators.proxy.similarity import Embedder, Similarity
from evaluators.proxy.turn_evidence import TurnEvidence, turn_evidence
from evaluators.proxy.word_lists import resources
from storage.records import Conversation

PROXY_VERSION = "proxy-v3"  # v3: per-turn evidence for the turn scorer (#28); v2: core-v2 leads, dataset catalog (#15)


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


def _features(replies: list[Reply], unmatched_titles: float | None) -> dict[str, float | None]:
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
        "log_system_words": math.log1p(sum(effective_words(r) for r in replies) / n),
        "log_system_turns": math.log(n),
    }


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
    memo = cast(Catalog, MemoCatalog(catalog))  # a Catalog in all but its mentions cache
    res = resources(catalog)
    in_dataset = metrics.reference_catalog(conversation, catalog)
    reference = cast(Catalog, MemoCatalog(in_dataset)) if in_dataset is not catalog else None
    similarity = Similarity(embedder)
    replies = analyse(conversation, memo, res, similarity)
    english, share = looks_english(conversation, res)
    factors = score_factors(conversation, memo, replies, res, english, reference)
    notes = [f"similarity: {similarity.name}"]
    if res.vocabulary_note:
        notes.append(res.vocabulary_note)
    if not english:
        notes.append(
            f"only {share:.0%} of the user's words are in the English word list: grammar and naturalness "
            "are not measured"
        )
    unmatched = metrics.unmatched_title_share(conversation, memo).share
    turns = turn_evidence(conversation, memo, replies, similarity)
    scores: tuple[Any, ...] = ()
    informed: dict[str, ProxyFactor] = {}
    if turn_scorer is not None:
        scores = tuple(turn_scorer(turns))
        relevance = [s.relevance for s in scores]
        informed = {"coherence": coherence(replies, relevance)}
    return ProxyResult(
        factors,
        _features(replies, unmatched),
        similarity.name,
        tuple(notes),
        turns=turns,
        turn_scores=scores,
        informed=informed,
    )
