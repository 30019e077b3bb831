"""Deterministic metrics over one conversation: no LLM, only the turns, the targets and the catalog.

Only ``conversation.turns`` (the judged interaction) is measured; ``history`` is context. Item ids
that are not in the catalog never raise: they count where the metric needs no metadata (recall,
repetition) and are left out, and counted as ``unknown``, where it does (diversity, novelty).

Bands (0-4) come from the CoRE rubric's machine-readable thresholds (:mod:`evaluators.judge.rubric`),
so these metrics and the LLM judge use the same numbers.

Empty input, metric by metric (``None`` means "not measurable", never 0):

* session list: empty when no system turn has a list.
* ``recall@k`` (iEvaLM), ``session_recall@k`` (CoRE's session list), ground-truth hit: ``None``
  without targets; with targets and no list at all, 0 / no hit. A k beyond the list the recall reads is ``None``
  (shown "–", as iEvaLM Table 2 marks what a system did not return): three shown items and no ranking give
  ``recall@1`` only, never a ``recall@5`` of 1.0 (:func:`beyond_list`).
* hallucination rate (CONCEPT's non-existent items): ``None`` when the system recommends nothing. CONCEPT
  reports it pooled per system (:func:`pooled_hallucination`), beside which the per-conversation mean is kept.
* semantic relevance share: ``None`` when the system text recommends no title; the band is then 0
  (CoRE: "no items recommended in the text" scores 0), or ``None`` with no system turn at all.
* diversity: counts of 0 with an empty list; the band is ``None`` when no listed item is in the catalog.
* novelty: ``None`` when the catalog has no popularity (no ranks, no dataset mention counts) or no
  listed item has one.

Reference catalog: a conversation whose ``metadata["dataset"]`` names a dataset (``redial``,
``opendialkg``) is checked against that dataset's catalog where the data is available (hallucinated
titles, novelty), whatever catalog the evaluation was given; see :func:`reference_catalog`.
* repetition: 0 when the user never rejects anything.
* distinct-n: ``None`` when the system text has no n-gram.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from statistics import median
from typing import Any

from catalog.catalog import Catalog, data_dir, get_catalog
from catalog.ievalm_records import iter_records
from catalog.items import Item
from catalog.matcher import normalize_title, plain_title
from catalog.mentions import find_offered_titles
from evaluators.judge.rubric import load_rubric
from storage.records import Conversation, ItemRef, Turn

# every k computed and stored: iEvaLM reports 1, 10, 50 on ReDial (after Zhang et al.) and 1, 10, 25 on
# OpenDialKG (after Zhou et al.) (Wang et al., EMNLP 2023, §2.2 "Evaluation Metrics"); 5 is kept for the reports
KS: tuple[int, ...] = (1, 5, 10, 25, 50)
_IEVALM_KS = {"redial": (1, 10, 50), "opendialkg": (1, 10, 25)}


def ievalm_ks(dataset: str | None) -> tuple[int, ...]:
    """The k iEvaLM reports for ``dataset`` (§2.2; Table 2): ReDial 1/10/50, OpenDialKG 1/10/25; every
    stored k for a dataset iEvaLM did not use."""
    key = (dataset or "").lower().replace("_", "").replace("-", "")
    return _IEVALM_KS.get(key, KS)


DEFAULT_HIT_K = 50  # iEvaLM: a dialogue succeeds when a target is among the recommender's first 50


def beyond_list(k: int, length: int) -> bool:
    """Whether Recall@k is not measurable on a list of ``length`` items: k exceeds what the system returned.

    iEvaLM Table 2 marks ChatGPT's Recall@50 "–" because ChatGPT returned no 50 items; the same holds for any
    system and any k, so a system that showed three items and kept no ranking has Recall@1 and "–" beyond it
    (the rule was "no ranking and k > 10", which gave such a system R@5 = R@10 = 1.0 on any hit). A dialogue
    with no list at all (``length`` 0) measured nothing found: 0, not "–", so a system that never recommends
    does not drop out of the mean."""
    return 0 < length < k


# Lexical cues that the user turns down what was just recommended, matched case-insensitively in
# the user turn that follows a system turn: having seen it ("I've seen Star Wars", "seen it"), a
# refusal ("not that one", "no", "nope"), dislike ("didn't like", "not a fan"), asking for something
# else. "Seen it" does not count after a negation ("I haven't seen it" asks for it rather than
# rejecting it). Deliberately simple: it misses indirect refusals and can fire on "I don't like
# horror" said while describing a wish.
REJECTION_CUES: tuple[str, ...] = (
    r"(?:['’]ve|\bhave|\balready) (?:seen|watched)\b",
    r"(?<!n't )(?<!n’t )(?<!not )(?<!never )\b(?:seen|watched) (?:it|that|this|them|those|both)\b",
    r"\bnot (?:that|this|those|these|it|interested|for me|my (?:thing|taste|type))\b",
    r"\b(?:didn['’]t|did not|don['’]t|do not|won['’]t|wouldn['’]t) (?:like|love|enjoy|want)\b",
    r"\b(?:dislike|disliked|hated?|boring|not a fan|no thanks|no thank you)\b",
    r"\bsomething (?:else|different)\b|\banother (?:one|movie|film|suggestion)\b",
    r"^\W*(?:no|nope|nah)\b",
)
_REJECTION = re.compile("|".join(f"(?:{c})" for c in REJECTION_CUES), re.IGNORECASE | re.MULTILINE)
_TOKEN = re.compile(r"\w+(?:'\w+)?")


# -- session list, recall, hits --------------------------------------------------


def session_list(conversation: Conversation) -> list[ItemRef]:
    """All system turns' lists concatenated in order, de-duplicated by id keeping the first position."""
    seen: set[str] = set()
    out: list[ItemRef] = []
    for turn in _system_turns(conversation):
        for ref in turn.items:
            if ref.id not in seen:
                seen.add(ref.id)
                out.append(ref)
    return out


def final_list(conversation: Conversation, hit_k: int = DEFAULT_HIT_K) -> list[ItemRef]:
    """The ranking an iEvaLM dialogue ends on: the first system turn whose ranking holds a target among its first
    ``hit_k`` entries (iEvaLM stops at that success), else the last system turn that ranked anything. A turn's
    ranking is the recommender's whole ranking where the system kept one (:meth:`Turn.ranked`: a neural model's
    top 50), else the items it showed."""
    targets = {t.id for t in conversation.targets}
    lists = [ranked for ranked in (turn.ranked() for turn in _system_turns(conversation)) if ranked]
    for items in lists:
        if targets & {ref.id for ref in items[:hit_k]}:
            return list(items)
    return list(lists[-1]) if lists else []


def recall_at_k(
    conversation: Conversation, ks: tuple[int, ...] = KS, *, hit_k: int = DEFAULT_HIT_K
) -> dict[int, float | None] | None:
    """iEvaLM's Recall@k: the share of the targets in the top k of the ranking the dialogue ended on.

    iEvaLM (§2.2 "Evaluation Metrics" for the metric and its k; §4.4 "Performance Measurement": recall at every
    recommendation action of the interaction) scores the recommender's ranking (its ``get_rec``, top 50) at the
    dialogue's last recommending turn, and its dialogues end at the first success (a target among the first 50).
    The ranking is the turn's whole ranking where the system kept one, not the three titles a reply names under
    CRS Arena's policy (:meth:`Turn.ranked`). A dialogue that went on after a hit (CoRE's protocol) is scored on
    the ranking of that first hit, as iEvaLM would have stopped there (:func:`final_list`). Each target counts
    once (iEvaLM's per-label recall); pooled over dialogues, weight each by its number of targets
    (``recall_targets``) to get iEvaLM's mean over (example, label) pairs. ``None`` without targets.

    A k beyond the length of that list is ``None`` (shown "–", :func:`beyond_list`): a system that kept no
    ranking and showed three items (ChatCRS) has Recall@1 only, as iEvaLM's Table 2 marks ChatGPT's Recall@50.
    """
    targets = {t.id for t in conversation.targets}
    if not targets:
        return None
    ranked = [ref.id for ref in final_list(conversation, hit_k)]
    return {k: None if beyond_list(k, len(ranked)) else len(targets & set(ranked[:k])) / len(targets) for k in ks}


def session_recall_at_k(conversation: Conversation, ks: tuple[int, ...] = KS) -> dict[int, float | None] | None:
    """Recall@k over CoRE's session list: every system list of the dialogue concatenated in order
    (each item at its first position, :func:`session_list`). With ten items per turn, a target
    ranked first at turn 3 sits at position 21: it counts from k = 21 on. A k beyond the session list's
    length is ``None`` (shown "–", :func:`beyond_list`). ``None`` without targets."""
    targets = {t.id for t in conversation.targets}
    if not targets:
        return None
    ranked = [ref.id for ref in session_list(conversation)]
    return {k: None if beyond_list(k, len(ranked)) else len(targets & set(ranked[:k])) / len(targets) for k in ks}


@dataclass(frozen=True)
class Hit:
    """Whether any target was in any system list, and the 1-based number of the first such system turn."""

    hit: bool | None
    turn: int | None = None


def ground_truth_hit(conversation: Conversation) -> Hit:
    """The first system turn whose list holds a target. ``Hit(None)`` without targets."""
    targets = {t.id for t in conversation.targets}
    if not targets:
        return Hit(None)
    for number, turn in enumerate(_system_turns(conversation), 1):
        if targets & {ref.id for ref in turn.items}:
            return Hit(True, number)
    return Hit(False)


# -- titles in the system text -----------------------------------------------------


@dataclass(frozen=True)
class UnmatchedTitles:
    """Title spans written with a year ("Made Up Film (2019)") that match no item of the reference
    catalog, over all titles mentioned in the system text (one per turn). The proxy's calibrated feature
    ``unmatched_title_share``; CONCEPT's hallucination rate is :func:`hallucination_rate`."""

    share: float | None
    mentioned: int
    unmatched: tuple[str, ...] = ()


def unmatched_title_share(conversation: Conversation, catalog: Catalog) -> UnmatchedTitles:
    """Judged against :func:`reference_catalog`: the conversation's dataset catalog when known."""
    catalog = reference_catalog(conversation, catalog)
    mentioned = 0
    unmatched: list[str] = []
    for turn in _system_turns(conversation):
        for mention in catalog.mentions(turn.text):
            mentioned += 1
            if mention.item is None:
                unmatched.append(mention.text)
    return UnmatchedTitles(len(unmatched) / mentioned if mentioned else None, mentioned, tuple(unmatched))


@dataclass(frozen=True)
class Hallucination:
    """CONCEPT's ratio of non-existent items (Huang et al. 2024, §3.2 Cooperation/Sincerity and A.2.4: "how
    many items recommended by the CRS do not exist in the dataset"): of the distinct items the system
    recommends, the share that do not exist in **the conversation's dataset** (``metadata["dataset"]``:
    ReDial's catalog for a ReDial conversation). Existence elsewhere does not rescue an item: a film ReDial
    holds is non-existent in an OpenDialKG conversation, and so is one only the bundled catalog holds. A
    conversation with no dataset (a chat on the app's catalog) is checked against the catalog in use and the
    domain's dataset (:func:`existence_catalogs`).

    Recommended items are what the system offers in its text. A neural system's turn
    (``metadata["generated"]``: KBRD, BARCOR, UniCRS) is read from the text the model generated, not from the
    list the serving policy builds from its ranking (those items exist by construction and are no
    recommendation of the model's text). Other systems: the items of each system turn's list and the titles
    its text offers (:func:`catalog.mentions.find_offered_titles`: titles with or without a year, quoted or emphasised
    spans, list lines, "I recommend X"), each matched fuzzily after normalisation (rapidfuzz ≥
    :data:`EXISTS_THRESHOLD`, stricter than entity linking: CONCEPT counts misspellings such as "The
    Prestigige" as non-existent, and so does this). Titles the user wrote earlier are references, not
    recommendations, and are left out.
    ``None`` when the system recommends nothing.
    """

    rate: float | None
    recommended: int
    nonexistent: tuple[str, ...] = ()
    checked_against: tuple[str, ...] = ()


EXISTENCE_DATASETS = {"movies": ("redial",)}
# how close a written title must be to an existing one: CONCEPT counts BARCOR's "The Prestigige" (88.9 against
# "Prestige") and "The Adventures of Milo and Ours" (92.6 against "... Otis") as non-existent, so the
# entity-linking threshold of 90 is too loose here; case, punctuation, articles and the year never matter
EXISTS_THRESHOLD = 95.0  # the dataset a catalog's domain is checked against too


def existence_catalogs(conversation: Conversation, catalog: Catalog) -> list[Catalog]:
    """Where an item may exist. A conversation of a dataset (``metadata["dataset"]``, its catalog loadable):
    that dataset's catalog alone (CONCEPT A.2.4: items that "do not exist in the dataset"). Otherwise the
    catalog in use and the domain's dataset catalogs (ReDial's 6,576 movies) where their files are in the
    data directory."""
    reference = reference_catalog(conversation, catalog)
    if (conversation.metadata or {}).get("dataset") and reference.name != catalog.name:
        return [reference]
    found = {catalog.name: catalog}
    found.setdefault(reference.name, reference)
    for name in EXISTENCE_DATASETS.get(conversation.domain or catalog.domain, ()):
        if name not in found:
            try:
                found[name] = get_catalog(name)
            except (FileNotFoundError, OSError, ValueError):
                continue
    return list(found.values())


def hallucination_rate(conversation: Conversation, catalog: Catalog) -> Hallucination:
    catalogs = existence_catalogs(conversation, catalog)
    people = _people(catalog)
    said = " "  # what the user wrote so far (history included), as plain words: titles there are references
    recommended: dict[str, bool] = {}  # title key -> exists
    names: dict[str, str] = {}

    def offer(title: str, found: bool) -> None:
        key = normalize_title(title)
        if key and key not in recommended and f" {key} " not in said:
            recommended[key], names[key] = found, title

    def exists(title: str) -> bool:
        return any(_exists_in(c, title) for c in catalogs)

    def written_right(mention) -> bool:
        """A mention the finder linked at its looser threshold, held to :data:`EXISTS_THRESHOLD`."""
        written, title = normalize_title(mention.text), normalize_title(mention.item.title)
        return written == title or written.endswith(" " + title) or exists(mention.text)

    for turn in conversation.history:
        if turn.role == "user":
            said += plain_title(turn.text) + " "
    for turn in conversation.turns:
        if turn.role == "user":
            said += plain_title(turn.text) + " "
            continue
        generated = (turn.metadata or {}).get("generated")
        neural = isinstance(generated, str)  # a neural system: its generated text, not the policy's list
        offered_text = str(generated) if neural else turn.text
        for ref in [] if neural else turn.items:
            offer(ref.title or ref.id, any(ref.id in c for c in catalogs) or bool(ref.title and exists(ref.title)))
        for mention in find_offered_titles(offered_text, catalog.matcher, people=people):
            if mention.item is not None and written_right(mention):
                # found in the catalog in use; it exists only if the conversation's dataset holds it too
                offer(mention.item.name, any(mention.item.id in c for c in catalogs) or exists(mention.item.name))
            else:
                written = _as_title(mention.text)
                offer(written, exists(written))
    missing = tuple(names[k] for k, ok in recommended.items() if not ok)
    rate = len(missing) / len(recommended) if recommended else None
    return Hallucination(rate, len(recommended), missing, tuple(c.name for c in catalogs))


@dataclass(frozen=True)
class PooledHallucination:
    """One system's hallucination rate over many conversations. ``pooled`` is CONCEPT's figure (§3.2, A.2.4;
    Table 3 reports one ratio per system): non-existent items over recommended items, summed over its
    conversations. ``mean`` is the mean of the per-conversation rates (conversations recommending nothing
    left out), which weighs a conversation with one item as much as one with twenty."""

    pooled: float | None
    mean: float | None
    conversations: int
    recommended: int
    nonexistent: int


def pooled_hallucination(metrics: list[dict[str, Any]]) -> PooledHallucination:
    """:class:`PooledHallucination` from the stored metrics of one system's conversations
    (``recommended_items``, ``nonexistent_items`` and ``hallucination_rate`` of :func:`compute_metrics`)."""
    used = [m for m in metrics if m.get("recommended_items")]
    recommended = sum(int(m["recommended_items"]) for m in used)
    nonexistent = sum(len(m.get("nonexistent_items") or ()) for m in used)
    rates = [float(m["hallucination_rate"]) for m in used if m.get("hallucination_rate") is not None]
    return PooledHallucination(
        pooled=nonexistent / recommended if recommended else None,
        mean=sum(rates) / len(rates) if rates else None,
        conversations=len(used),
        recommended=recommended,
        nonexistent=nonexistent,
    )


_YEAR_AT_END = re.compile(r"^(.*?)\s*\(((?:18|19|20)\d{2})\)\s*$")
_LEAD_WORDS = {"or", "and", "yes", "no", "so", "also", "then", "but", "maybe", "like", "try", "see", "watch"}


def _as_title(written: str) -> str:
    """A written span without the words a sentence or a list put before the title: "1  Hugo (2011)",
    "Or The Babysitter (2016)", "the The Time Traveler's Wife (2009)" -> the title and its year."""
    match = _YEAR_AT_END.match(written.strip())
    title, year = (match.group(1), match.group(2)) if match else (written.strip(), None)
    words = title.split()
    while len(words) > 1 and (
        not words[0][:1].isupper() or words[0].rstrip(",.:;").lower() in _LEAD_WORDS or words[0].rstrip(".)").isdigit()
    ):
        words = words[1:]
    title = " ".join(words).strip(" ,.:;")
    return f"{title} ({year})" if year else title


def _exists_in(catalog: Catalog, written: str) -> bool:
    """Whether ``catalog`` holds the title written (at :data:`EXISTS_THRESHOLD`). With a year, words may
    also be dropped from the front ("Melissa McCarthy Tammy (2014)" -> "Tammy (2014)") as long as the
    year agrees within one; without one, the span must be the title."""
    match = _YEAR_AT_END.match(written.strip())
    if match is None:
        return catalog.matcher.match(written, threshold=EXISTS_THRESHOLD) is not None
    words, year = match.group(1).split(), int(match.group(2))
    for i in range(len(words)):
        item = catalog.matcher.match(f"{' '.join(words[i:])} ({year})", threshold=EXISTS_THRESHOLD)
        if item is not None and (item.year is None or abs(item.year - year) <= 1):
            return True
    return False


_people_cache: dict[str, frozenset[str]] = {}


def _people(catalog: Catalog) -> frozenset[str]:
    """Normalised names of the catalog's cast, directors and writers, and its genres: never titles."""
    key = f"{catalog.name}:{len(catalog.items)}"
    if key not in _people_cache:
        names = {
            normalize_title(n)
            for item in catalog.items
            for n in (*item.cast, *item.directors, *item.writers, *item.genres)
        }
        _people_cache[key] = frozenset(n for n in names if n)
    return _people_cache[key]


@dataclass(frozen=True)
class SemanticRelevance:
    """A deterministic approximation of CoRE's semantic relevance: of the catalog titles a system turn
    names in its text, the share that are in that same turn's list (pooled over turns), and CoRE's
    0-4 band. It only sees titles the mention finder recognises (see the limits below).

    Every title named in a system turn counts as recommended there (telling a recommendation from a
    passing mention would need an LLM). A title is in the list when it resolves to a listed item's
    id or its normalised title equals a listed title. Comparing turn by turn is stricter than CoRE's
    judge, which sees only the merged session list: a title named in one turn and listed in another
    counts as out of list here.
    """

    share: float | None
    in_list: int
    mentioned: int
    score: int | None


def semantic_relevance(conversation: Conversation, catalog: Catalog) -> SemanticRelevance:
    in_list = mentioned = 0
    system_turns = _system_turns(conversation)
    for turn in system_turns:
        ids = {ref.id for ref in turn.items}
        titles = {normalize_title(ref.title) for ref in turn.items if ref.title}
        for mention in catalog.mentions(turn.text):
            mentioned += 1
            if (mention.item is not None and mention.item.id in ids) or normalize_title(
                mention.item.name if mention.item else mention.text
            ) in titles:
                in_list += 1
    if not system_turns:
        return SemanticRelevance(None, 0, 0, None)
    if not mentioned:
        return SemanticRelevance(None, 0, 0, 0)
    share = in_list / mentioned
    return SemanticRelevance(share, in_list, mentioned, load_rubric().factor("semantic_relevance").score_for(share))


# -- the list's metadata -------------------------------------------------------------


@dataclass(frozen=True)
class Diversity:
    """Distinct metadata values per feature dimension over the session list's catalog items, and
    CoRE's band. The dimensions are the rubric's for the conversation's domain (movies: genre,
    director, lead actor = the first-billed cast member, decade: rubric core-v2); a dimension the
    catalog does not hold counts 0."""

    counts: dict[str, int]
    items: int
    unknown: int
    score: int | None


def diversity(conversation: Conversation, catalog: Catalog) -> Diversity:
    rubric = load_rubric()
    items, unknown = _catalog_items(session_list(conversation), catalog)
    counts = {
        dim.id: len({v for item in items for v in dim.values(item)}) for dim in rubric.features_for(conversation.domain)
    }
    return Diversity(counts, len(items), unknown, rubric.factor("diversity").score_for(counts) if items else None)


@dataclass(frozen=True)
class Novelty:
    """Share of the session list's items that are less known in the reference catalog.

    Popularity comes from the catalog in use (:func:`popularity`): a dataset catalog (ReDial,
    OpenDialKG) by how many of that dataset's dialogues mention each item, the bundled catalog by its
    popularity ranks. Items without popularity (unknown ids, a catalog without any) are left out, also
    from the list length the band's share conditions use.
    """

    share: float | None
    less_known: int
    ranked: int
    score: int | None
    basis: str | None = None  # how "less known" was decided (see Popularity.basis)


def novelty(conversation: Conversation, catalog: Catalog) -> Novelty:
    reference = reference_catalog(conversation, catalog)
    known = popularity(reference)
    if known is None:
        return Novelty(None, 0, 0, None)
    items = _resolve(session_list(conversation), catalog, reference)
    judged = [i for i in items if known.judges(i)]
    if not judged:
        return Novelty(None, 0, 0, None, known.basis)
    less_known = sum(1 for i in judged if known.less_known(i))
    return Novelty(
        less_known / len(judged),
        less_known,
        len(judged),
        load_rubric().factor("novelty").score_for(less_known, total=len(judged)),
        known.basis,
    )


@dataclass(frozen=True)
class Popularity:
    """Which items of a catalog count as well known.

    * ``mentions``: a dataset catalog. Each item's count is the number of the dataset's dialogues
      (``<data dir>/<name>_eval/*_data_processed.jsonl``, all splits) that mention it in their
      entities or recommendations. The well-known items are the *short head*: the most-mentioned
      items that together hold half of all mentions (249 of 6,576 items for ReDial); every other
      item, never-mentioned ones included, is less known. CoRE describes novel items as "not widely
      known, with little media coverage"; mention counts in the dataset are the closest measure of
      exposure the data holds.
    * ``rank``: a catalog with popularity ranks (the bundled one): less known = a rank worse than the
      median rank of the catalog. The bundled catalog holds only well-known films, so this is
      relative to that catalog.
    """

    basis: str
    well_known: frozenset[str] = frozenset()
    ranks: dict[str, int] | None = None
    cut: float = 0.0

    def judges(self, item: Item) -> bool:
        return self.ranks is None or item.id in self.ranks

    def less_known(self, item: Item) -> bool:
        if self.ranks is not None:
            return self.ranks[item.id] > self.cut
        return item.id not in self.well_known


_popularity: dict[str, Popularity | None] = {}
HEAD_SHARE = 0.5  # the well-known head holds this share of all mentions


def popularity(catalog: Catalog) -> Popularity | None:
    """The catalog's :class:`Popularity` (cached by catalog name), None when it has none."""
    key = f"{catalog.name}:{len(catalog.items)}"
    if key not in _popularity:
        ranks = {i.id: i.popularity for i in catalog.items if i.popularity is not None}
        if ranks:
            _popularity[key] = Popularity("rank", ranks=ranks, cut=median(ranks.values()))
        else:
            counts = mention_counts(catalog)
            _popularity[key] = (
                None
                if counts is None
                else Popularity(f"mentions in {catalog.name} dialogues", well_known=_head(counts))
            )
    return _popularity[key]


def mention_counts(catalog: Catalog) -> dict[str, int] | None:
    """Dialogues of the catalog's dataset that mention each item (entities or recommendations), by
    item id; None when the dataset's processed dialogues are not in the data directory."""
    base = data_dir()
    folder = base / f"{catalog.name}_eval" if base else None
    files = sorted(folder.glob("*_data_processed.jsonl")) if folder and folder.is_dir() else []
    if not files:
        return None
    by_name: dict[str, str] = {}
    for item in catalog.items:
        by_name.setdefault(str(item.extra.get("entity_name") or item.name), item.id)
    mentioned: dict[tuple[str, str], set[str]] = {}
    for path in files:
        for _line, record in iter_records(path):
            dialogue = mentioned.setdefault((path.name, record.dialog_id), set())
            dialogue.update(by_name[n] for n in [*record.entity, *record.rec] if n in by_name)
    counts = {item.id: 0 for item in catalog.items}
    for ids in mentioned.values():
        for item_id in ids:
            counts[item_id] += 1
    return counts


def _head(counts: dict[str, int]) -> frozenset[str]:
    total = sum(counts.values())
    head, held = [], 0
    for item_id, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if held >= HEAD_SHARE * total or n == 0:
            break
        head.append(item_id)
        held += n
    return frozenset(head)


# -- the reference catalog ------------------------------------------------------------


def reference_catalog(conversation: Conversation, catalog: Catalog) -> Catalog:
    """The catalog a conversation's items and titles are checked against: its dataset's
    (``metadata["dataset"]``, e.g. ``redial``) when known and loadable, else ``catalog``."""
    dataset = (conversation.metadata or {}).get("dataset")
    if not dataset or dataset == catalog.name:
        return catalog
    try:
        return get_catalog(str(dataset))
    except (FileNotFoundError, OSError, ValueError):
        return catalog


def _resolve(refs: list[ItemRef], catalog: Catalog, reference: Catalog) -> list[Item]:
    """The listed items as items of ``reference``: by id in the catalog in use, by name across catalogs."""
    items = []
    for ref in refs:
        if reference is catalog:
            item = catalog.get(ref.id)
        else:
            own = catalog.get(ref.id)
            name = own.name if own is not None else ref.title
            item = reference.match_name(name) if name else None
        if item is not None:
            items.append(item)
    return items


# -- repetition and text statistics -------------------------------------------------


@dataclass(frozen=True)
class Repetition:
    """Items recommended again after the user turned them down.

    A user turn rejects when it matches :data:`REJECTION_CUES`. What it rejects: the items of the
    system turn just before it (its list plus the catalog titles in its text) — only those the user
    names, if the user names any of them. A later system turn repeats when it shows a rejected item
    again (in its list or text).
    """

    rejections: int
    repeated: tuple[str, ...] = ()  # ids of the rejected items shown again, first repeat first
    repeat_turns: int = 0  # system turns that showed at least one rejected item


def repetition(conversation: Conversation, catalog: Catalog | None = None) -> Repetition:
    rejected: set[str] = set()
    repeated: list[str] = []
    rejections = repeat_turns = 0
    previous: set[str] | None = None
    for turn in conversation.turns:
        if turn.role == "system":
            shown = _shown(turn, catalog)
            again = [i for i in shown if i in rejected]
            if again:
                repeat_turns += 1
                repeated.extend(i for i in again if i not in repeated)
            previous = set(shown)
        elif previous is not None and is_rejection(turn.text):
            rejections += 1
            named = {m.item.id for m in catalog.mentions(turn.text) if m.item} if catalog else set()
            rejected |= (previous & named) or previous
            previous = None
    return Repetition(rejections, tuple(repeated), repeat_turns)


def is_rejection(text: str) -> bool:
    """Does this user text turn down a recommendation? (see :data:`REJECTION_CUES`)"""
    return _REJECTION.search(text) is not None


def distinct_n(conversation: Conversation, n: int) -> float | None:
    """Distinct-n of the system text: distinct n-grams over all n-grams (lower-cased word tokens,
    n-grams never cross turns). ``None`` when there is no n-gram."""
    grams: list[tuple[str, ...]] = []
    for turn in _system_turns(conversation):
        tokens = _TOKEN.findall(turn.text.lower())
        grams.extend(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))
    return len(set(grams)) / len(grams) if grams else None


# -- everything at once -----------------------------------------------------------------


def recall_source(conversation: Conversation) -> str:
    """Which list iEvaLM's Recall@k read: ``ranking`` (a system's whole ranking) or ``items`` (the shown lists)."""
    return "ranking" if any(t.ranking for t in _system_turns(conversation)) else "items"


def hit_k_of(conversation: Conversation) -> int:
    """The hit cut-off the conversation was run with (a simulation records its protocol's), else iEvaLM's 50."""
    protocol = (conversation.metadata.get("simulation") or {}).get("protocol") or {}
    try:
        return max(1, int(protocol.get("hit_k") or DEFAULT_HIT_K)) if isinstance(protocol, dict) else DEFAULT_HIT_K
    except (TypeError, ValueError):
        return DEFAULT_HIT_K


def compute_metrics(conversation: Conversation, catalog: Catalog) -> dict[str, Any]:
    """All metrics with stable keys (see :data:`METRIC_KEYS`); values are numbers, None or small lists."""
    hit_k = hit_k_of(conversation)
    recall = recall_at_k(conversation, hit_k=hit_k)
    session_recall = session_recall_at_k(conversation)
    hit = ground_truth_hit(conversation)
    hallucination = hallucination_rate(conversation, catalog)
    relevance = semantic_relevance(conversation, catalog)
    div = diversity(conversation, catalog)
    nov = novelty(conversation, catalog)
    rep = repetition(conversation, catalog)
    out: dict[str, Any] = {f"recall@{k}": (recall[k] if recall else None) for k in KS}
    out.update({f"session_recall@{k}": (session_recall[k] if session_recall else None) for k in KS})
    out.update(
        {
            "recall_targets": len({t.id for t in conversation.targets}) or None,
            "recall_list": recall_source(conversation),  # which list Recall@k read
            "recall_hit_k": hit_k,
            "session_list_size": len(session_list(conversation)),
            "gt_hit": hit.hit,
            "gt_hit_turn": hit.turn,
            "hallucination_rate": hallucination.rate,  # CONCEPT's ratio of non-existent items
            "reference_catalog": reference_catalog(conversation, catalog).name,
            "recommended_items": hallucination.recommended,
            "nonexistent_items": list(hallucination.nonexistent),
            "semantic_relevance": relevance.share,
            "semantic_relevance_score": relevance.score,
            **{f"diversity_{dim}": count for dim, count in div.counts.items()},
            "diversity_items": div.items,
            "diversity_score": div.score,
            "novelty": nov.share,
            "novelty_less_known": nov.less_known,
            "novelty_score": nov.score,
            "novelty_basis": nov.basis,
            "unknown_items": div.unknown,
            "rejections": rep.rejections,
            "repeated_items": len(rep.repeated),
            "repeat_turns": rep.repeat_turns,
            "distinct_1": distinct_n(conversation, 1),
            "distinct_2": distinct_n(conversation, 2),
        }
    )
    return out


# -- helpers ------------------------------------------------------------------------------


def _system_turns(conversation: Conversation) -> list[Turn]:
    return [t for t in conversation.turns if t.role == "system"]


def _catalog_items(refs: list[ItemRef], catalog: Catalog) -> tuple[list[Item], int]:
    items = [catalog.get(ref.id) for ref in refs]
    return [i for i in items if i is not None], sum(1 for i in items if i is None)


def _shown(turn: Turn, catalog: Catalog | None) -> list[str]:
    shown = [ref.id for ref in turn.items]
    if catalog is not None:
        shown += [m.item.id for m in catalog.mentions(turn.text) if m.item and m.item.id not in shown]
    return shown
