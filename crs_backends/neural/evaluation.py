"""How KBRD, BARCOR and UniCRS are measured, each figure defined once: the validation split the recipes are chosen
on, Recall@k, the generation figures the CRS papers report (BLEU-2, Distinct-n) and how alike two systems rank.

Plain Python over records, rankings and texts (no model, no torch), read by the trainer
(:mod:`crs_backends.neural.train_command`) and ``bench/crs_fidelity.py``:

- **validation split** (:func:`is_validation`): a fixed tenth of the training conversations, chosen by a hash of
  the conversation id and never trained on; recipes are compared on it, the test split is reported once;
- **Recall@k** (:func:`recall_at_k`): as iEvaLM and CRSLab count it, one sample per (record, gold item that is an
  item of the knowledge graph), the share of samples whose item is in the top k; :func:`recall_named_and_new` the
  same on two parts of the samples: the gold items the conversation already names and the others
  (:func:`recall_named_by_repeats` parts the first again: films the training records repeat, and the others);
- **Distinct-n** (:func:`distinct_n`): as UniCRS's own evaluation script computes it (wxl1999/UniCRS
  ``src/evaluate_conv.py``, ``collect_ngram`` and ``report``): the unique word n-grams (split on whitespace) over
  all the responses, divided by the number of non-empty responses; movie names masked first (:func:`mask_movies`).
  Not CRSLab's, whose evaluator takes the n-grams of the reply's characters (a known bug);
- **BLEU-2** (:func:`bleu`): sentence-level BLEU with all the weight on bigrams, as UniCRS's ``compute_bleu`` and
  CRSLab's ``BleuMetric`` (``crslab/evaluator/metrics/gen.py``) call NLTK's ``sentence_bleu`` (weights
  ``[0, 1, 0, 0]``, one reference, no smoothing): the brevity penalty times the clipped bigram precision, summed
  over the responses and divided by the number of non-empty ones, as UniCRS's ``report`` does;
- **top-10 overlap** (:func:`top_k_overlap`): the mean Jaccard index of two systems' top 10 on the same contexts;
- **references** (:func:`reference_rankings`): rankings that read no text (a popularity list counted from the training
  records, the conversation's own named titles first), printed beside the models on either split.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from crs_backends.neural.kg_reader import KGData

RECALL_KS = (1, 10, 50)
# iEvaLM (Wang et al., EMNLP 2023), ReDial test set, Recall@1/10/50 of the published checkpoints
PUBLISHED_RECALL = {
    "kbrd": (0.028, 0.169, 0.366),
    "barcor": (0.031, 0.170, 0.372),
    "unicrs": (0.050, 0.215, 0.413),
}
DISTINCT_NS = (2, 3, 4)
# Distinct-2/3/4 of the published UniCRS on ReDial's test set, computed by its own script: the one public
# reproduction (wxl1999/UniCRS, issue #4)
PUBLISHED_UNICRS_DISTINCT = {2: 0.550, 3: 0.936, 4: 1.211}
MOVIE = "<movie>"  # what a masked movie name becomes: the slot token UniCRS's replies carry


class HasDialogId(Protocol):
    dialog_id: str


class HasTargets(Protocol):
    rec: list[str]


class HasEntities(HasTargets, Protocol):
    entity: list[str]


D = TypeVar("D", bound=HasDialogId)


# ---------------------------------------------------------------------------------------------------------------
# the validation split

VALIDATION_SHARE = 0.1


def is_validation(dialog_id: str) -> bool:
    """Whether a training conversation is in the validation split: a fixed tenth, by a hash of its id, the same
    whichever file or tool reads the conversation (404 of the 4,101 ReDial conversations in the data folder)."""
    return int(hashlib.sha256(str(dialog_id).encode()).hexdigest()[:8], 16) % 100 < VALIDATION_SHARE * 100


def split_by_conversation(records: Iterable[D]) -> tuple[list[D], list[D]]:
    """(training, validation): ``records`` parted by :func:`is_validation` of their conversation, order kept."""
    train: list[D] = []
    validation: list[D] = []
    for record in records:
        (validation if is_validation(record.dialog_id) else train).append(record)
    return train, validation


# ---------------------------------------------------------------------------------------------------------------
# Recall@k


@dataclass(frozen=True)
class Recall:
    """Recall@k for each k, over ``samples`` (record, gold item) pairs from ``records`` records."""

    at: dict[int, float]
    records: int
    samples: int


def gold_items(record: HasTargets, kg: KGData) -> list[int]:
    """The record's gold items that are items of ``kg``, one sample each (a target outside the item set cannot be
    ranked by anyone, so it is not counted, as iEvaLM's ``get_rec`` drops it)."""
    items = frozenset(kg.item_ids)
    return [g for g in dict.fromkeys(kg.ids_of(record.rec)) if g in items]


def recall_at_k(pairs: Iterable[tuple[Sequence[int], Sequence[int]]], ks: Sequence[int] = RECALL_KS) -> Recall:
    """Recall@k over (ranking, gold items) pairs, one pair per record: every gold item is a sample, a hit at k when
    it is among the ranking's first k (CRSLab's ``RECMetric``, iEvaLM's ``RecMetric``). A record without gold items
    counts nothing; no samples at all gives 0.0 for every k."""
    hits = dict.fromkeys(ks, 0)
    records = samples = 0
    for ranking, gold in pairs:
        if not gold:
            continue
        records += 1
        tops = {k: set(ranking[:k]) for k in ks}
        for g in gold:
            samples += 1
            for k in ks:
                hits[k] += g in tops[k]
    return Recall({k: hits[k] / samples if samples else 0.0 for k in ks}, records, samples)


@dataclass(frozen=True)
class Interval:
    """A Recall@k (or the difference of two models' on the same records) and its bootstrap interval."""

    value: float
    low: float
    high: float
    groups: int  # the conversations resampled
    level: float = 0.95


def recall_interval(
    rankings: Sequence[Sequence[int]],
    gold: Sequence[Sequence[int]],
    groups: Sequence[str],
    k: int = 10,
    *,
    against: Sequence[Sequence[int]] | None = None,
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> Interval:
    """Recall@k of ``rankings`` (one per record, ``gold`` its gold items as in :func:`recall_at_k`) with a
    percentile bootstrap interval that resamples whole conversations (``groups``: each record's conversation id;
    a conversation's records share its films, so resampling records would make the interval too narrow). With
    ``against`` (another model's rankings of the same records), the difference ``rankings`` minus ``against``,
    resampled in pairs: what tells two recipes read on the same split apart."""
    import numpy as np
    from scipy.stats import bootstrap

    if not len(rankings) == len(gold) == len(groups) or (against is not None and len(against) != len(rankings)):
        raise ValueError("rankings, gold, groups (and against) must have one entry per record")
    index = {g: i for i, g in enumerate(dict.fromkeys(groups))}
    hits = np.zeros((2, len(index)))
    samples = np.zeros(len(index))
    for n, (ranking, items) in enumerate(zip(rankings, gold)):
        i = index[groups[n]]
        samples[i] += len(items)
        top = set(ranking[:k])
        hits[0, i] += sum(g in top for g in items)  # as recall_at_k counts them
        if against is not None:
            other = set(against[n][:k])
            hits[1, i] += sum(g in other for g in items)
    keep = samples > 0
    hits, samples = hits[:, keep], samples[keep]
    if samples.size < 2:
        raise ValueError("an interval needs gold items in at least two conversations")

    def statistic(a, b, s, axis=-1):
        return (a.sum(axis=axis) - b.sum(axis=axis)) / s.sum(axis=axis)

    value = float(statistic(hits[0], hits[1], samples))
    result = bootstrap(
        (hits[0], hits[1], samples),
        statistic,
        paired=True,
        vectorized=True,
        n_resamples=resamples,
        confidence_level=level,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    ci = result.confidence_interval
    return Interval(value, float(ci.low), float(ci.high), int(samples.size), level)


def interval_at_10(rankings, gold, groups, against=None) -> Interval | None:
    """R@10's interval over the records' conversations (:func:`recall_interval`; of the difference, with
    ``against``); None where the records come from fewer than two conversations (they do not name theirs, or a
    limit kept one)."""
    try:
        return recall_interval(rankings, gold, groups, 10, against=against)
    except ValueError:
        return None


def named_and_new_gold(record: HasEntities, kg: KGData) -> tuple[list[int], list[int]]:
    """The record's :func:`gold_items` in two parts: those its conversation already names (its linked entities) and
    the others. ReDial's gold lists often repeat a title named before (the seeker's favourite, the film just
    proposed); a ranking can hit those by repeating what it read, the others only by finding a new film."""
    context = set(kg.ids_of(record.entity))
    gold = gold_items(record, kg)
    return [g for g in gold if g in context], [g for g in gold if g not in context]


def recall_named_and_new(
    rankings: Iterable[Sequence[int]], records: Iterable[HasEntities], kg: KGData, ks: Sequence[int] = RECALL_KS
) -> dict[str, Recall]:
    """:func:`recall_at_k` of one ranking per record on its gold items the conversation already names (``named``)
    and on the others (``new``); the two parts' samples add up to the whole's."""
    named, new = _recall_in_two_parts(rankings, records, lambda record: named_and_new_gold(record, kg), ks)
    return {"named": named, "new": new}


def _recall_in_two_parts(
    rankings: Iterable[Sequence[int]],
    records: Iterable[HasEntities],
    part: Callable[[HasEntities], tuple[list[int], list[int]]],
    ks: Sequence[int],
) -> tuple[Recall, Recall]:
    """:func:`recall_at_k` of one ranking per record on each of the two lists of gold items ``part`` gives a record."""
    first: list[tuple[Sequence[int], list[int]]] = []
    second: list[tuple[Sequence[int], list[int]]] = []
    for ranking, record in zip(rankings, records, strict=True):
        a, b = part(record)
        first.append((ranking, a))
        second.append((ranking, b))
    return recall_at_k(first, ks), recall_at_k(second, ks)


# ---------------------------------------------------------------------------------------------------------------
# the reference rankings, which read no text: what a split's records give away without a model


def popularity_ranking(train: Iterable[HasTargets], kg: KGData) -> list[int]:
    """``kg``'s items by how often the training records ``train`` recommend them (ties keep the KG's order)."""
    counts = Counter(e for r in train for e in kg.ids_of(r.rec))
    items = list(dict.fromkeys(kg.item_ids))
    return sorted(items, key=lambda e: -counts.get(e, 0))  # a stable sort: ties keep the KG's order


def named_first_ranking(record: HasEntities, popular: list[int], kg: KGData) -> list[int]:
    """The items the conversation itself names (its entity annotations, the latest first), then ``popular``.

    A reference, not a recommender: ReDial's gold lists often hold a title the conversation already named (10% of
    the gold items of the first 1,000 test records), and Recall@k counts those as hits, so repeating the named
    titles scores where a model cannot read them."""
    items = frozenset(kg.item_ids)
    named = [e for e in reversed(kg.ids_of(record.entity)) if e in items]
    return list(dict.fromkeys(named + list(popular)))


def named_share(records: Iterable[HasEntities], kg: KGData) -> float:
    """The share of gold items (in the KG's item set) that the record's conversation already names."""
    named = total = 0
    for record in records:
        seen, fresh = named_and_new_gold(record, kg)
        named += len(seen)
        total += len(seen) + len(fresh)
    return named / total if total else 0.0


def reference_rankings(
    train: Iterable[HasTargets], records: Sequence[HasEntities], kg: KGData
) -> dict[str, list[list[int]]]:
    """One ranking per record of each reference: ``popularity`` (one list for every record, counted from the training
    records ``train``) and ``named first`` (the record's own named titles, then that list). Their Recall read beside a
    model's says how much a split gives away without reading a word: popular targets, named titles repeated."""
    popular = popularity_ranking(train, kg)
    return {
        "popularity": [popular] * len(records),
        "named first": [named_first_ranking(r, popular, kg) for r in records],
    }


def repeated_films(records: Iterable[HasEntities], kg: KGData) -> frozenset[int]:
    """The films that some of ``records`` (the training records) has as a gold item its conversation already names. A
    model can learn those repeats film by film; a held-out named gold item outside this set it can hit only by
    carrying whichever film the conversation holds."""
    return frozenset(g for record in records for g in named_and_new_gold(record, kg)[0])


def recall_named_by_repeats(
    rankings: Iterable[Sequence[int]],
    records: Iterable[HasEntities],
    kg: KGData,
    repeated: frozenset[int],
    ks: Sequence[int] = RECALL_KS,
) -> dict[str, Recall]:
    """:func:`recall_at_k` on the gold items the conversation already names, in two parts: films in ``repeated``
    (:func:`repeated_films` of the training records) and the others; the parts' samples add up to ``named``'s."""

    def part(record: HasEntities) -> tuple[list[int], list[int]]:
        named = named_and_new_gold(record, kg)[0]
        return [g for g in named if g in repeated], [g for g in named if g not in repeated]

    seen, other = _recall_in_two_parts(rankings, records, part, ks)
    return {"named_repeated": seen, "named_other": other}


# ---------------------------------------------------------------------------------------------------------------
# generation: movie names masked, Distinct-n, BLEU-2


def movie_masker(names: Iterable[str]) -> Callable[[str], str]:
    """A function that replaces every occurrence of ``names`` in a text (whole words, any case, the longest first)
    with :data:`MOVIE`, as UniCRS's processed replies carry a slot for each movie (built once for many texts)."""
    wanted = sorted({n.strip() for n in names if n and n.strip()}, key=len, reverse=True)
    if not wanted:
        return lambda text: text
    pattern = re.compile(r"(?<!\w)(?:" + "|".join(re.escape(n) for n in wanted) + r")(?!\w)", re.IGNORECASE)
    return lambda text: pattern.sub(MOVIE, text)


def mask_movies(text: str, names: Iterable[str]) -> str:
    """``text`` with ``names`` masked (:func:`movie_masker`)."""
    return movie_masker(names)(text)


def _ngrams(words: Sequence[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]


def distinct_n(responses: Iterable[str], ns: Sequence[int] = DISTINCT_NS) -> dict[int, float]:
    """Distinct-n of a set of responses as UniCRS's script computes it: the number of different word n-grams in
    all of them together, divided by the number of non-empty responses (so it can exceed 1). No non-empty
    response: 0.0 (UniCRS's ``report`` gives 0 then)."""
    seen: dict[int, set[tuple[str, ...]]] = {n: set() for n in ns}
    count = 0
    for response in responses:
        words = response.split()
        count += bool(response.strip())
        for n in ns:
            seen[n].update(_ngrams(words, n))
    return {n: len(seen[n]) / count if count else 0.0 for n in ns}


def sentence_bleu(hypothesis: str, reference: str, n: int = 2) -> float:
    """BLEU of one response against one reference with all the weight on ``n``-grams (NLTK's ``sentence_bleu`` with
    weights one-hot at n and no smoothing, as UniCRS and CRSLab call it): the brevity penalty times the clipped
    n-gram precision. No matching n-gram gives 0.0 (NLTK returns 0, or 2.2e-308 with a warning)."""
    hyp, ref = hypothesis.split(), reference.split()
    grams = Counter(_ngrams(hyp, n))
    if not hyp or not grams:
        return 0.0
    reference_grams = Counter(_ngrams(ref, n))
    matched = sum(min(c, reference_grams[g]) for g, c in grams.items())
    if not matched:
        return 0.0
    penalty = 1.0 if len(hyp) > len(ref) else math.exp(1 - len(ref) / len(hyp))
    return penalty * matched / sum(grams.values())


def bleu(responses: Sequence[str], references: Sequence[str], n: int = 2) -> float:
    """BLEU-``n`` of the responses against their references (pairwise, in order) as UniCRS reports it: the sum of
    :func:`sentence_bleu` over all responses divided by the number of non-empty ones (0.0 when there is none)."""
    if len(responses) != len(references):
        raise ValueError(f"{len(responses)} responses but {len(references)} references")
    count = sum(bool(r.strip()) for r in responses)
    if not count:
        return 0.0
    return sum(sentence_bleu(r, g, n) for r, g in zip(responses, references)) / count


# ---------------------------------------------------------------------------------------------------------------
# how alike the systems rank


def jaccard(a: Iterable[int], b: Iterable[int]) -> float:
    """|A ∩ B| / |A ∪ B| of two item sets; two empty sets are alike (1.0)."""
    sa, sb = set(a), set(b)
    return len(sa & sb) / len(sa | sb) if sa | sb else 1.0


def top_k_overlap(rankings: Mapping[str, Sequence[Sequence[int]]], k: int = 10) -> dict[tuple[str, str], float]:
    """For each pair of systems, the mean :func:`jaccard` of their top ``k`` over the same contexts
    (``rankings[system][i]``: the system's ranking of context ``i``; every system ranks the same contexts)."""
    sizes = {len(r) for r in rankings.values()}
    if len(sizes) > 1:
        raise ValueError(f"the systems ranked different numbers of contexts: {sorted(sizes)}")
    out: dict[tuple[str, str], float] = {}
    for a, b in combinations(rankings, 2):
        pairs = list(zip(rankings[a], rankings[b]))
        out[(a, b)] = sum(jaccard(x[:k], y[:k]) for x, y in pairs) / len(pairs) if pairs else 0.0
    return out
