"""The twelve CoRE factor proxies, each a 0-4 score (None: not measurable) with the counted quantity and what was
counted, from the analysed replies (:mod:`evaluators.proxy.replies`). The module docstring of
:mod:`evaluators.proxy.features` tables what each measures and misses."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from catalog.catalog import Catalog
from catalog.matcher import normalize_title
from evaluators import metrics
from evaluators.factors import FACTORS
from evaluators.judge.rubric import load_rubric
from evaluators.proxy.replies import Reply
from evaluators.proxy.text_checks import ACCEPT, REPEAT_SIMILARITY, WORD, content_words, overlap
from evaluators.proxy.word_lists import Resources, appropriateness_terms
from storage.records import Conversation


@dataclass(frozen=True)
class ProxyFactor:
    """One factor's proxy: the 0-4 score (None: not measurable), the counted quantity, and what was counted."""

    score: float | None
    value: Any
    detail: str


LOW_RELEVANCE = 0.5  # a turn relevance (0-2) under this reads as off the request (coherence)

# "starring X", "directed by X", "X starred in …": claims about an item's lead credits (catalog cast
# lists hold the leads, so supporting roles are not checked).
_PERSON_CLAIM = re.compile(
    r"(?:starring|stars|directed by|written by)\s+((?:[A-Z][\w'’.-]+\s?){2,3})"
    r"|((?:[A-Z][\w'’.-]+\s){1,2}[A-Z][\w'’.-]+)\s+(?:starred|stars) in\b"
)


# The proxy's rubric: core-extended (core-v2), not core's default. Its appropriateness gives the extended
# rubric's intermediate levels (curt phrases), and the shipped calibration was fitted on those scores; the
# bands of the count- and share-based factors are the same in both rubrics. Stored with every proxy score.
PROXY_RUBRIC = "core-extended"


def _band(factor: str, value, **kw) -> float | None:
    score = load_rubric(PROXY_RUBRIC).factor(factor).score_for(value, **kw)
    return None if score is None else float(score)


def coherence(replies: list[Reply], relevance: list[float | None] | None = None) -> ProxyFactor:
    """CoRE's count of misaligned replies; with ``relevance`` (each reply's turn score, in order), a reply the
    turn scorer reads as off the request (under :data:`LOW_RELEVANCE`) that the user did not accept counts too."""
    marked = [
        k
        for k, r in enumerate(replies, 1)
        if r.flagged
        or r.gibberish
        or r.repeats_earlier
        or (r.flags["generic"] and r.request is not None and not ACCEPT.search(r.request))
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


def _recoverability(replies: list[Reply]) -> ProxyFactor:
    flagged = unrepaired = 0
    for k, r in enumerate(replies[:-1]):
        if not r.flagged:
            continue
        flagged += 1
        nxt = replies[k + 1]
        shown = {ref.id for ref in r.turn.items} | {m.item.id for m in r.mentions if m.item}
        again = shown & ({ref.id for ref in nxt.turn.items} | {m.item.id for m in nxt.mentions if m.item})
        same = overlap(content_words(r.turn.text), content_words(nxt.turn.text)) >= REPEAT_SIMILARITY
        if again or same or nxt.flagged or nxt.gibberish:
            unrepaired += 1
    detail = (
        f"{flagged} flagged mistake(s) followed by a system reply, {unrepaired} left unrepaired"
        if flagged
        else "the user flagged no mistake that a later reply could repair (CoRE: full marks)"
    )
    return ProxyFactor(_band("recoverability", unrepaired), unrepaired, detail)


def _proactiveness(replies: list[Reply]) -> ProxyFactor:
    asked: set[str] = set()
    proactive = 0
    for r in replies:
        initiative = r.flags["question"] or r.flags["preference"] or r.flags["suggests"] or r.flags["options"]
        question = " ".join(sorted(content_words(r.clean_text))) if r.flags["question"] else ""
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


def _grammar(replies: list[Reply], english: bool) -> ProxyFactor:
    if not english:
        return ProxyFactor(None, None, "not measurable: the conversation does not look English")
    errors = sum(r.unknown + r.stutters + r.unfinished for r in replies)
    return ProxyFactor(
        _band("grammatical_correctness", errors),
        errors,
        f"{sum(r.unknown for r in replies)} unknown word(s), {sum(r.stutters for r in replies)} "
        f"stutter(s), {sum(r.unfinished for r in replies)} unfinished sentence(s)",
    )


def _unnatural(r: Reply) -> bool:
    return r.gibberish or r.stutters > 0 or r.unfinished > 0 or r.repeats_earlier or r.flags["run_on"]


def _naturalness(replies: list[Reply], english: bool) -> ProxyFactor:
    if not english:
        return ProxyFactor(None, None, "not measurable: the conversation does not look English")
    weights = [max(1, len(WORD.findall(r.turn.text))) for r in replies]  # a degenerate reply weighs in full
    bad = sum(w for r, w in zip(replies, weights) if _unnatural(r))
    share = bad / sum(weights)
    return ProxyFactor(
        _band("naturalness", share),
        share,
        f"{sum(_unnatural(r) for r in replies)} of {len(replies)} replies read as unnatural "
        f"({share:.0%} of the system's words)",
    )


def _appropriateness(replies: list[Reply]) -> ProxyFactor:
    offensive, lapses = appropriateness_terms()
    hits = [m.group(0) for r in replies for m in offensive.finditer(r.clean_text)]
    if hits:
        return ProxyFactor(0.0, len(hits), f"offensive language: {', '.join(sorted(set(hits)))}")
    curt = sum(1 for r in replies if lapses.search(r.clean_text))
    return ProxyFactor(float(4 - min(curt, 3)), curt, f"{curt} reply(ies) with a curt or dismissive phrase")


def _effectiveness(conversation: Conversation, replies: list[Reply]) -> ProxyFactor:
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


def _novelty(conversation: Conversation, catalog: Catalog, res: Resources) -> ProxyFactor:
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


def _explainability(replies: list[Reply]) -> ProxyFactor:
    recommending = [r for r in replies if r.recommends]
    if not recommending:
        return ProxyFactor(0.0, None, "nothing recommended (CoRE: 0)")
    explained = sum(1 for r in recommending if r.flags["reason"])
    share = explained / len(recommending)
    return ProxyFactor(
        _band("explainability", share), share, f"{explained} of {len(recommending)} recommending replies give a reason"
    )


def _groundedness(replies: list[Reply], res: Resources, reference: Catalog | None = None) -> ProxyFactor:
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


def score_factors(
    conversation: Conversation,
    catalog: Catalog,
    replies: list[Reply],
    res: Resources,
    english: bool,
    reference: Catalog | None,
) -> dict[str, ProxyFactor]:
    """The twelve proxies in :data:`evaluators.factors.FACTORS` order (``english``: grammar and naturalness are
    measurable; ``reference``: the dataset catalog that titles and credits are checked against, when it differs)."""
    factors = {
        "coherence": coherence(replies),
        "recoverability": _recoverability(replies),
        "proactiveness": _proactiveness(replies),
        "grammatical_correctness": _grammar(replies, english),
        "naturalness": _naturalness(replies, english),
        "appropriateness": _appropriateness(replies),
        "effectiveness": _effectiveness(conversation, replies),
        "novelty": _novelty(conversation, catalog, res),
        "diversity": _diversity(conversation, catalog),
        "semantic_relevance": _semantic_relevance(conversation, catalog),
        "explainability": _explainability(replies),
        "groundedness": _groundedness(replies, res, reference),
    }
    assert tuple(factors) == FACTORS
    return factors
