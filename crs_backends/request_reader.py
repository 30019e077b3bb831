"""The request reader: the conversation so far, read by rules over the catalog's vocabulary, as a
:class:`~crs_backends.request_state.RequestState`.

Each message of the person is read on its own (:func:`read_message`), then the readings are folded in order
(:func:`read_request`): a later message wins over an earlier one ("no comedies", then "actually a comedy is fine"),
what is ruled out holds until it is taken back, titles accumulate, and the act is the latest message's.

Reading one message:

1. **Finders** mark what it names, each with its place in the text: titles (the catalog's mention finder, and
   after a cue such as "loved", "seen", "like", "about" the catalog's fuzzy title match, so "Incepton" or "Heat"
   are found), people (full names, a surname that one catalog person has or clearly leads, "Spielberg's",
   misspelt surnames, and a capitalised name the catalog lacks after "fan of", "with", "like" and such, kept as
   written), genres (:data:`~crs_backends.request_words.GENRE_WORDS`, misspellings by one letter), years, and
   pronouns for the titles the system named last ("seen it", "both").
2. **Negation with scope**: a cue (:data:`~crs_backends.request_words.NEGATION_CUE`) governs the words after it up
   to the end of its clause (a comma, "but", "so", a new "I want …"; at most eight words) and nothing else:
   "no horror, but something scary-funny is fine" rules horror out, then asks for it with comedy, and the later
   phrase wins. Phrases that only look like a cue ("I don't know", "not sure", "no problem") are blanked first.
3. **Feelings about titles**: in the scope of "don't like", "hate", "can't stand" a title is disliked; after
   "loved", "like", "fan of" (or before "was great") liked; after "seen", "watched" seen; else only mentioned.
4. **The act**: a goodbye, a question about a film (:data:`~crs_backends.request_words.QUESTIONS`: director, cast,
   writer, year, genre, plot, why, more), a new wish (recommend), a rejection or acceptance of the last
   suggestion, a plain request, or none.

A message over :data:`MAX_READ_CHARS` characters, or not in English, is not read (the state says so).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache

from rapidfuzz import process
from rapidfuzz.distance import OSA
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from catalog.catalog import Catalog
from catalog.items import Item
from catalog.matcher import normalize_title
from crs_backends import request_words as w
from crs_backends.preferences import is_goodbye
from crs_backends.request_state import RequestState
from storage.records import Conversation, Turn

MAX_READ_CHARS = 1500  # a longer message is not read: no request is that long
TITLE_WORDS_TRIED = 6  # words after a cue tried as a title, longest first


# -- the vocabulary of a catalog ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Vocabulary:
    """A catalog's names, and the English words the reader must not mistake for them."""

    full: dict[str, str]  # folded full name -> name
    joined: dict[str, str]  # folded full name without spaces, hyphens and dots ("leonardodicaprio") -> name
    surname: dict[str, str]  # folded surname one person has, or clearly leads by credits -> name
    given: frozenset[str]  # folded given names
    known: frozenset[str]  # every word the language check counts as English: the above, and names
    english: frozenset[str]  # words of the catalog's descriptions, stop words, the reader's own words
    genres: dict[str, str]  # lower-case genre -> the catalog's spelling
    title_prefixes: frozenset[str]  # the first two words of every catalog title, normalised
    newest: int | None


@lru_cache(maxsize=8)
def vocabulary(catalog: Catalog) -> Vocabulary:
    credits: dict[str, int] = {}
    for item in catalog.items:
        for person in {*item.directors, *item.cast, *item.writers}:
            if person:
                credits[person] = credits.get(person, 0) + 1
    full = {" ".join(_words(fold(p))): p for p in credits}
    joined = {re.sub(r"[\s.'-]", "", fold(p)): p for p in credits}
    by_surname: dict[str, list[str]] = {}
    given: set[str] = set()
    for person in credits:
        parts = _words(fold(person))
        if len(parts) >= 2:
            given.add(parts[0])
            if len(parts[-1]) >= 4 and parts[-1] not in ("jr", "sr"):
                by_surname.setdefault(parts[-1], []).append(person)
    surname = {}
    for name, people in by_surname.items():
        people.sort(key=lambda p: -credits[p])
        if len(people) == 1 or credits[people[0]] >= 2 * credits[people[1]]:
            surname[name] = people[0]  # "Nolan": Christopher (8 films) over Jonathan (4)
    description_words = {
        word.lower() for item in catalog.items for word in re.findall(r"\b[a-z][a-z'-]{2,}\b", item.description)
    }
    english = frozenset(
        description_words
        | set(ENGLISH_STOP_WORDS)
        | w.GENERIC_WORDS
        | set(w.GENRE_WORDS)
        | w.NOT_MISSPELLINGS
        | set(w.DECADE_WORDS)
        | w.SCOPE_FILLER
        | w.SCOPE_ENDS
        | w.SCOPE_SOFT_ENDS
        | set("im dont doesnt didnt cant wont isnt id ive pls plz thx tho".split())
    )
    title_prefixes = frozenset(" ".join(normalize_title(i.title).split()[:2]) for i in catalog.items)
    return Vocabulary(
        full=full,
        joined=joined,
        surname=surname,
        given=frozenset(given),
        known=(english - _NOT_ENGLISH_ENOUGH) | w.REQUEST_WORDS | {x for name in full for x in name.split()},
        english=english,
        genres={g.lower(): g for item in catalog.items for g in item.genres},
        title_prefixes=title_prefixes,
        newest=max((i.year for i in catalog.items if i.year), default=None),
    )


# stop words that other languages share ("un film", "de los"): they do not make a message English
_NOT_ENGLISH_ENOUGH = frozenset("de un co con le la ie eg re etc".split())


def fold(text: str) -> str:
    """Lower case without accents, one character for one ("García" -> "garcia"), so places in the text hold."""
    out = []
    for c in text:
        lower = c.lower()
        c = lower if len(lower) == 1 else c  # "İ" lowers to two characters: kept as it is
        base = unicodedata.normalize("NFKD", c)
        out.append(base[0] if len(base) > 1 and unicodedata.combining(base[1]) else c)
    return "".join(out)


def _words(text: str) -> list[str]:
    return [t.removesuffix("'s").strip(".'") for t in re.findall(r"[\w.'-]+", text)]


# -- one message ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Found:
    """Something a message names: a genre, a person, a title, or a reference to the titles named last."""

    start: int
    end: int
    kind: str  # "genre" | "person" | "title" | "ref"
    value: str | Item | tuple[Item, ...]
    sign: str = "+"  # "+" wanted / liked, "-" ruled out / disliked, "seen", "mention"


@dataclass(frozen=True)
class Reading:
    """What one message says, in the order it says it."""

    found: tuple[Found, ...] = ()
    years: tuple[int | None, int | None] | None = None
    act: str = "none"
    about: str | None = None
    subject: Item | None = None
    terms: tuple[str, ...] = ()
    phrases: tuple[str, ...] = ()  # ruled out, matching nothing in the catalog
    change: bool = False  # the message replaces earlier wishes ("instead", "actually")
    add: bool = False  # it adds to them ("too", "as well")
    new_request: bool = False  # it asks for a film anew ("a funny movie like Superbad")
    note: str = ""


@dataclass
class _Scope:
    cue_start: int
    start: int
    end: int
    feeling: bool  # "don't like", "hate": a title in it is disliked (else only ruled out)
    content: bool = field(default=False)
    cue: str = ""


def read_message(text: str, catalog: Catalog, last_named: tuple[Item, ...] = ()) -> Reading:
    """One message, read on its own (``last_named``: the titles the system named last, for "seen it")."""
    return _read_message(text or "", catalog, tuple(last_named))


@lru_cache(maxsize=2048)
def _read_message(text: str, catalog: Catalog, last_named: tuple[Item, ...]) -> Reading:
    text = " ".join(text.replace("’", "'").replace("‘", "'").split())
    if len(text) > MAX_READ_CHARS:
        return Reading(note=f"not read: over {MAX_READ_CHARS:,} characters")
    vocab = vocabulary(catalog)
    low = fold(text)
    if not _english(low, vocab):
        return Reading(note="not read: not English")
    if is_goodbye(text):
        return Reading(act="goodbye")
    question = next((aspect for aspect, pattern in w.QUESTIONS if pattern.search(low)), None)
    masked = _mask(low, w.NO_SLOT)  # "doesn't have to be new": neither a wish nor a ruling-out
    cues = _mask(masked, w.NOT_NEGATIONS)  # "I don't know", "not sure": no cue
    scopes = _scopes(cues)
    claimed: list[tuple[int, int]] = []
    found: list[Found] = []

    titles = _mentioned_titles(text, masked, catalog, vocab)
    claimed += [(start, end) for start, end, _item in titles]
    people = _people(text, masked, vocab, claimed)
    claimed += [(start, end) for start, end, _name in people]
    more = _cue_titles(text, masked, catalog, vocab, question is not None, claimed)
    claimed += [(start, end) for start, end, _item in more]
    titles = sorted([*titles, *more], key=lambda t: t[0])
    genres = _genres(masked, vocab, claimed)
    for start, end, _genre in genres:
        claimed.append((start, end))
    refs = _references(masked, titles, last_named)

    subject: Item | None = None
    if question:
        in_question = [item for _s, _e, item in titles]
        subject = in_question[0] if in_question else (last_named[0] if last_named else None)
    else:
        previous: Found | None = None
        for start, end, item in titles:
            sign = _feeling(masked, start, end, scopes)
            if sign == "mention" and previous is not None and _LISTED.fullmatch(masked[previous.end : start]):
                sign = previous.sign  # "I liked Superbad and Step Brothers": the list shares its feeling
            previous = Found(start, end, "title", item, sign)
            if sign != "unseen":  # "I haven't seen Casino": no slot, and still a film to offer
                found.append(previous)
        for start, end, name in people:
            found.append(Found(start, end, "person", name, "-" if _scope_at(scopes, start) else "+"))
        for start, end, genre in genres:
            found.append(Found(start, end, "genre", genre, "-" if _scope_at(scopes, start) else "+"))
    for start, end, items, sign in refs:
        found.append(Found(start, end, "ref", items, sign))
    found.sort(key=lambda f: f.start)
    years = None if question else _years(masked, scopes, claimed, vocab.newest)
    phrases = () if question else _phrases(masked, scopes, found)
    terms = () if question else _terms(masked, scopes, claimed, catalog)

    wishes = [f for f in found if f.kind != "ref"] or years is not None or any(sc.content for sc in scopes)
    if question:
        act = "ask_about"
    elif wishes:
        act = "recommend"
    elif w.REJECT.search(low) or any(f.kind == "ref" and f.sign in ("-", "seen") for f in found):
        act = "reject"
    elif w.ACCEPT.search(low):
        act = "accept"
    elif w.REQUEST.search(low) or found:
        act = "recommend"
    else:
        act = "none"
    return Reading(
        found=tuple(found),
        years=years,
        act=act,
        about=question,
        subject=subject,
        terms=tuple(terms),
        phrases=tuple(phrases),
        change=bool(w.CHANGE.search(low)),
        add=bool(w.ADD.search(low)),
        new_request=bool(w.NEW_REQUEST.search(low)),
    )


def _mask(text: str, pattern: re.Pattern[str]) -> str:
    """``text`` with every match of ``pattern`` blanked (places kept)."""
    return pattern.sub(lambda m: " " * len(m.group(0)), text)


def _english(low: str, vocab: Vocabulary) -> bool:
    """Whether a message reads as English: of three words or more, at least a third known (English words of the
    catalog's descriptions, stop words, the reader's own words, the names of people)."""
    tokens = re.findall(r"[^\W\d_][\w'-]*", low)
    if len(tokens) < 3:
        return True
    known = sum(1 for t in tokens if t in vocab.known or t.removesuffix("'s") in vocab.known)
    return 3 * known >= len(tokens)


_SEEN_VERB = re.compile(r"\b(?:seen|saw|watched)\b")
_TOKEN = re.compile(r"[\w'-]+|[^\w\s]")
_LISTED = re.compile(r"\s*(?:,|,?\s*(?:and|or|&|as\s+well\s+as))\s*(?:also\s+|the\s+)?")


def _scopes(cues: str) -> list[_Scope]:
    """The phrase each negation cue governs: from the cue to its clause's end, at most eight words."""
    scopes: list[_Scope] = []
    for m in w.NEGATION_CUE.finditer(cues):
        scope = _Scope(m.start(), m.end(), m.end(), feeling=m.group("feeling") is not None, cue=m.group(0))
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
        scopes.append(_Scope(m.end() - 4, m.end(), m.end() + (end.start() if end else 0), feeling=False, content=True))
    for m in w.NEGATION_AFTER.finditer(cues):  # "horror is not my thing": the clause before it
        start = max(cues.rfind(c, 0, m.start()) for c in ",.;!?") + 1
        for word in (" but ", " and "):
            at = cues.rfind(word, start, m.start())
            if at >= 0:
                start = at + len(word)
        scopes.append(_Scope(start, start, m.start(), feeling=True, content=True))
    return scopes


def _scope_at(scopes: list[_Scope], position: int) -> _Scope | None:
    """The scope ``position`` lies in (the latest cue's when they nest)."""
    inside = [s for s in scopes if s.start <= position < s.end]
    return max(inside, key=lambda s: s.cue_start) if inside else None


# -- titles ---------------------------------------------------------------------------------------------------

_TITLE_CUE = re.compile(
    r"\b(?:loved?|loves|liked?|likes|enjoyed?|enjoys|adored?|seen|saw|watched|hated?|hates|disliked?|like|love"
    r"|about|than|to|as|of"
    r"|stand|is|was|favou?rite(?:\s+(?:movie|film))?\s+(?:is|was))\s+",
    re.IGNORECASE,
)
_QUESTION_TITLE_CUE = re.compile(
    r"\b(?:directed|made|wrote|in|is|was|did|does|stars\s+in|plays\s+in|seen|what'?s)\s+", re.IGNORECASE
)
_PIECE_SPLIT = re.compile(r"\s*(?:,|\band\b|\bor\b|&|\bbut\b|\bthough\b|\bbecause\b|[.;!?])\s*")
_NOT_TITLES = frozenset(
    "it that this those these them both one ones all something anything everything nothing a an the some any more "
    "much lot his her their my your its".split()
)


def _mentioned_titles(text: str, masked: str, catalog: Catalog, vocab: Vocabulary) -> list[tuple]:
    """(start, end, item) of the catalog titles the message writes out (the catalog's mention finder)."""
    out = []
    for m in catalog.mentions(text):
        if m.item is not None and not masked[m.start : m.start + len(m.text)].isspace():
            if not _common_phrase(m.text, vocab):
                out.append((m.start, m.start + len(m.text), m.item))
    return out


def _cue_titles(
    text: str, masked: str, catalog: Catalog, vocab: Vocabulary, question: bool, claimed: list
) -> list[tuple]:
    """(start, end, item) of titles named after a cue ("loved Heat", "seen Incepton", "Zodiac was great"), matched
    by the catalog's fuzzy title match, where nothing else was found."""
    out: list[tuple[int, int, Item]] = []

    def free(start: int, end: int) -> bool:
        return all(end <= s or start >= e for s, e, *_ in [*claimed, *out])

    for cue in [_TITLE_CUE, _QUESTION_TITLE_CUE] if question else [_TITLE_CUE]:
        for c in cue.finditer(masked):
            if not free(c.start(), c.end()):
                continue
            rest = masked[c.end() : c.end() + 120]
            stop = re.search(r"[.;!?]|\s(?:but|though|because|since|so|if)\s", rest)
            rest = rest[: stop.start()] if stop else rest
            at = c.end()
            for piece in _PIECE_SPLIT.split(rest):
                offset = masked.find(piece, at) if piece else -1
                if offset < 0:
                    continue
                at = offset + len(piece)
                hit = _title_prefix(text, offset, piece, catalog, vocab)
                if hit is not None and free(hit[0], hit[1]):
                    out.append(hit)
    for pattern in (w.LIKED_AFTER, w.DISLIKED_AFTER):
        for end in _after_positions(masked, pattern):
            hit = _title_suffix(text, end, catalog, vocab)
            if hit is not None and free(hit[0], hit[1]):
                out.append(hit)
    return out


def _after_positions(masked: str, pattern: re.Pattern[str]) -> list[int]:
    """Places where ``pattern`` (anchored at its start) follows a word: "Zodiac| was great"."""
    return [m.start() for m in re.finditer(r"(?<=\w)(?=\s)", masked) if pattern.match(masked, m.start())]


def _title_prefix(text: str, offset: int, piece: str, catalog: Catalog, vocab: Vocabulary) -> tuple | None:
    words = list(re.finditer(r"\S+", piece))
    for k in range(min(TITLE_WORDS_TRIED, len(words)), 0, -1):
        start, end = offset + words[0].start(), offset + words[k - 1].end()
        item = _title_match(text[start:end], catalog, vocab)
        if item is not None:
            return start, end, item
    return None


def _title_suffix(text: str, end: int, catalog: Catalog, vocab: Vocabulary) -> tuple | None:
    clause_start = max(text.rfind(c, 0, end) for c in ",.;!?") + 1
    words = list(re.finditer(r"\S+", text[clause_start:end]))
    for k in range(max(0, len(words) - TITLE_WORDS_TRIED), len(words)):
        start = clause_start + words[k].start()
        item = _title_match(text[start:end], catalog, vocab)
        if item is not None:
            return start, end, item
    return None


def _title_match(span: str, catalog: Catalog, vocab: Vocabulary) -> Item | None:
    """The catalog title ``span`` names (exactly, or misspelt by a little), unless it is a pronoun, a genre word,
    a person or a common word."""
    span = span.strip(" \"'*“”")
    norm = normalize_title(span)
    if not norm or norm in _NOT_TITLES or span.lower().split()[0] in _NOT_TITLES - {"the", "a", "an"}:
        return None
    words = norm.split()
    if norm in w.GENRE_WORDS or norm in w.GENERIC_WORDS or norm in ENGLISH_STOP_WORDS:
        return None
    if fold(norm) in vocab.full or fold(norm) in vocab.surname:
        return None  # a person ("I like Keanu Reeves")
    exact = _exact(norm, catalog)
    if exact is not None:  # "Heat"; "heat" after a cue ("something like heat"), but not "it" or "up"
        return exact if len(norm) >= 4 or span[:1].isupper() else None
    if len(words) == 1 and (len(norm) < 6 or norm in vocab.known):
        return None  # a misspelt one-word title is long and no English word or name ("Steven" is no "Seven")
    if len(words) > 1 and not span[:1].isupper() and all(x in vocab.english for x in words):
        return None  # "the horror ones": ordinary words in lower case
    return catalog.match(span) if len(norm) >= 5 else None


def _exact(norm: str, catalog: Catalog) -> Item | None:
    item = catalog.match(norm)
    return item if item is not None and normalize_title(item.title) == norm else None


def _common_phrase(span: str, vocab: Vocabulary) -> bool:
    """A mention that is more likely ordinary words than the title ("get out of the house" is not Get Out): all
    words common, written in lower case."""
    return span.islower() and all(x in vocab.english for x in span.split()) and len(span.split()) <= 2


def _references(masked: str, titles: list[tuple], last_named: tuple[Item, ...]) -> list[tuple]:
    """(start, end, items, sign) of pronouns after a feeling verb: "seen it" (the title named last, or the one
    named earlier in this message), "seen both" (every title named last)."""
    out = []
    for m in w.REFERENCE.finditer(masked):
        verb = w.REFERENCE_VERB.search(masked[max(0, m.start() - 40) : m.start()])
        if verb is None:
            continue
        if w.COMPARISON.search(masked[: m.start()]):
            continue  # "more like that": a comparison, no feeling
        earlier = [item for s, _e, item in titles if s < m.start()]
        if m.group("many"):
            items = tuple(last_named)
        else:
            items = (earlier[-1],) if earlier else tuple(last_named[:1])
        if not items:
            continue
        sign = "seen" if verb.group("seen") else ("+" if verb.group("liked") else "-")
        out.append((m.start(), m.end(), items, sign))
    return out


def _feeling(masked: str, start: int, end: int, scopes: list[_Scope]) -> str:
    """How the person feels about the title at ``start:end``: "+" liked, "-" disliked, "seen", or "mention"."""
    scope = _scope_at(scopes, start)
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


# -- people ---------------------------------------------------------------------------------------------------

_NAME_TOKEN = re.compile(r"[\w][\w.'-]*")


def _people(text: str, masked: str, vocab: Vocabulary, claimed: list) -> list[tuple]:
    """(start, end, name) of the people a message names: catalog names, else a capitalised name after a cue."""
    tokens = [(m.start(), m.end(), m.group(0)) for m in _NAME_TOKEN.finditer(masked)]
    out: list[tuple[int, int, str]] = []

    def free(start: int, end: int) -> bool:
        return all(end <= s or start >= e for s, e, *_ in [*claimed, *out])

    def clean(token: str) -> str:
        return token.removesuffix("'s").removesuffix("s'").strip(".'-")

    taken = [False] * len(tokens)
    for n in (4, 3, 2):
        for k in range(len(tokens) - n + 1):
            if any(taken[k : k + n]):
                continue
            parts = [clean(t[2]) for t in tokens[k : k + n]]
            name = vocab.full.get(" ".join(parts)) or vocab.joined.get("".join(parts).replace("-", ""))
            start, end = tokens[k][0], tokens[k + n - 1][1]
            if name and free(start, end):
                out.append((start, end, name))
                taken[k : k + n] = [True] * n
    for k, (start, end, token) in enumerate(tokens):
        if taken[k] or not free(start, end):
            continue
        word = clean(token)
        name = vocab.joined.get(word) if len(word) >= 5 else None
        name = name or vocab.surname.get(word) or (vocab.surname.get(word[:-1]) if word.endswith("s") else None)
        before = clean(tokens[k - 1][2]) if k else ""
        original = text[start:end]
        if name is None and _misspelt_name(word, vocab):
            near = process.extractOne(word, list(vocab.surname), scorer=OSA.distance, score_cutoff=1)
            name = vocab.surname[near[0]] if near else None
        if name is None:
            continue
        if before in vocab.given and before != _words(fold(name))[0] and before not in w.NOT_GIVEN_NAMES:
            continue  # "Stephen King" is not the catalog's Adrienne King
        if not (
            original[:1].isupper()
            or before in w.PERSON_CUES
            or token.endswith(("'s", "s'"))
            or (text.islower() and word not in vocab.english and word not in w.SURNAMES_THAT_ARE_WORDS)
            or len(_words(fold(name))) == 1
        ):
            continue  # a surname alone is a name when written as one: "not too long" is not Nia Long
        out.append((start, end, name))
        taken[k] = True
    # a name the catalog lacks, capitalised, after a cue ("a fan of Bong Joon-ho", "I don't like Stephen King")
    for m in re.finditer(r"(?<![\w'])([A-Z][\w'-]+(?:\s+[A-Z][\w'-]+){1,2})", text):
        start, end = m.start(1), m.end(1)
        if not free(start, end) or masked[start:end].isspace():
            continue
        preceding = re.findall(r"[\w']+", masked[max(0, start - 20) : start])
        if not preceding or preceding[-1] not in w.PERSON_CUES:
            continue
        name = m.group(1).removesuffix("'s")
        parts = name.lower().split()
        if parts[0] in ("i", "the", "a", "an") or any(p in w.GENRE_WORDS or p in w.GENERIC_WORDS for p in parts):
            continue
        if " ".join(normalize_title(name).split()[:2]) in vocab.title_prefixes:
            continue  # "Harry Potter": a title's beginning, not a person
        out.append((start, start + len(name), name))
    out.sort(key=lambda t: t[0])
    return out


def _misspelt_name(word: str, vocab: Vocabulary) -> bool:
    """Whether ``word`` may be a surname misspelt by a letter: long, unknown, no given name, no genre word."""
    if len(word) < 6 or not word.isalpha() or word in vocab.english or word in vocab.given:
        return False
    return process.extractOne(word, _ONE_WORD_GENRES, scorer=OSA.distance, score_cutoff=2) is None


# -- genres ---------------------------------------------------------------------------------------------------

_GENRE_PATTERN = re.compile(
    r"(?<![\w])(" + "|".join(re.escape(k) for k in sorted(w.GENRE_WORDS, key=len, reverse=True)) + r")(?![\w])"
)
_ONE_WORD_GENRES = [k for k in w.GENRE_WORDS if " " not in k and len(k) >= 5]


def _genres(masked: str, vocab: Vocabulary, claimed: list) -> list[tuple]:
    """(start, end, genre) of every catalog genre the message asks for by a genre word or a near misspelling."""
    out: list[tuple[int, int, str]] = []

    def free(start: int, end: int) -> bool:
        return all(end <= s or start >= e for s, e, *_ in claimed)

    for m in _GENRE_PATTERN.finditer(masked):
        if free(m.start(), m.end()):
            for genre in w.GENRE_WORDS[m.group(1)]:
                if genre.lower() in vocab.genres:
                    out.append((m.start(), m.end(), vocab.genres[genre.lower()]))
    family = vocab.genres.get("family")
    for m in w.YOUNG_AUDIENCE.finditer(masked):
        age = m.group("age")
        if family and free(m.start(), m.end()) and (age is None or int(age) <= w.YOUNG_AGE):
            out.append((m.start(), m.end(), family))
    for m in re.finditer(r"[a-z][a-z'-]{4,}", masked):
        token = m.group(0)
        if token in vocab.english or token in w.GENRE_WORDS or not free(m.start(), m.end()):
            continue
        if any(s <= m.start() < e for s, e, _ in out):
            continue
        near = process.extractOne(token, _ONE_WORD_GENRES, scorer=OSA.distance, score_cutoff=1 + (len(token) >= 8))
        if near:
            for genre in w.GENRE_WORDS[near[0]]:
                if genre.lower() in vocab.genres:
                    out.append((m.start(), m.end(), vocab.genres[genre.lower()]))
    out.sort(key=lambda t: t[0])
    return out


# -- years ----------------------------------------------------------------------------------------------------

_YEAR = r"(1[89]\d\d|20[0-4]\d)"
_RANGE = re.compile(
    rf"\b(?:between|from)\s+(?:the\s+year\s+)?{_YEAR}\s+(?:and|to|until|till|-|–)\s+{_YEAR}\b"
    rf"|\b{_YEAR}\s*(?:-|–|to)\s*{_YEAR}\b"
)
_BOUND = re.compile(
    rf"\b(after|since|post|later\s+than|newer\s+than|before|pre|earlier\s+than|older\s+than|until|up\s+to)[\s-]+"
    rf"(?:the\s+year\s+)?{_YEAR}\b"
)
_DECADE = re.compile(r"(?<![\w'])(?:(early|mid|late)[\s-]+(?:the\s+)?)?'?(1[89]|20)?(\d)0'?s\b")
_DECADE_WORD = re.compile(r"(?<![\w])(?:(early|mid|late)[\s-]+(?:the\s+)?)?([a-z]{5,10})(?![\w])")
_SINGLE = re.compile(rf"(?<![\w(]){_YEAR}(?![\w)]|'?s\b)")
_LAST_N = re.compile(
    r"\b(?:last|past)\s+(few|couple(?:\s+of)?|two|three|four|five|six|seven|eight|nine|ten|fifteen|twenty|\d{1,2})"
    r"\s+years?\b"
)
_RECENT = re.compile(
    r"\b(?:recent(?:ly)?|newer|newest|latest|modern|new\s+(?:releases?|movies?|films?|ones?)|brand[\s-]+new"
    r"|contemporary|current|this\s+decade|these\s+days|nowadays)\b"
)
_OLD = re.compile(
    r"\b(?:old|older|oldies?|old[\s-]+school|classics?|vintage|black[\s-]+and[\s-]+white|golden[\s-]+age|retro)\b"
)
_AGE = re.compile(r"\b\d+[\s-]*(?:years?|yrs?)[\s-]*old\b|\byears?[\s-]+old\b")
_PART = {"early": (0, 4), "mid": (3, 7), "late": (5, 9), None: (0, 9)}


def _years(masked: str, scopes: list[_Scope], claimed: list, newest: int | None) -> tuple | None:
    """(min, max) of the years asked for, either end None; None when none are."""
    text = masked
    for s, e in claimed:
        text = text[:s] + " " * (e - s) + text[e:]  # years inside a title are the title's
    text = _mask(text, _AGE)

    def negated(position: int) -> bool:
        return _scope_at(scopes, position) is not None

    for m in _RANGE.finditer(text):
        a, b = (int(x) for x in m.groups() if x)
        return min(a, b), max(a, b)
    for m in _BOUND.finditer(text):
        word, year = m.group(1), int(m.group(2))
        later = word.startswith(("after", "since", "post", "later", "newer"))
        if negated(m.start()):  # "nothing before 1990", "nothing after 2000"
            return (None, year) if later else (year, None)
        if later:
            return (year + 1 if word in ("after", "post") or word.startswith("later") else year), None
        return None, (year - 1 if word in ("before", "pre") or word.startswith("earlier") else year)
    decades: list[tuple[int, int]] = []  # "the 80s or 90s": every decade named, as one range
    for m in _DECADE.finditer(text):
        if negated(m.start()):
            continue
        century = m.group(2) or ("19" if m.group(3) >= "3" else "20")
        first = int(century + m.group(3) + "0")
        lo, hi = _PART[m.group(1)]
        decades.append((first + lo, first + hi))
    for m in _DECADE_WORD.finditer(text):
        word = m.group(2)
        first_year = w.DECADE_WORDS.get(word)
        if first_year is None and len(word) >= 7 and word.endswith(("ies", "ys", "es", "s")):
            near = process.extractOne(word, list(w.DECADE_WORDS), scorer=OSA.distance, score_cutoff=2)
            first_year = w.DECADE_WORDS[near[0]] if near else None
        if first_year is None or negated(m.start()):
            continue
        if re.search(r"\b(?:my|his|her|their|our|your|in\s+(?:my|his|her|their))\s+$", text[: m.start()]):
            continue  # "in my thirties": an age
        lo, hi = _PART[m.group(1)]
        decades.append((first_year + lo, first_year + hi))
    if decades:
        return min(d[0] for d in decades), max(d[1] for d in decades)
    for m in _SINGLE.finditer(text):
        if not negated(m.start()):
            year = int(m.group(1))
            return year, year
    if newest is not None:
        for m in _LAST_N.finditer(text):
            n = m.group(1)
            return newest - (int(n) if n.isdigit() else w.NUMBER_WORDS.get(n, 5)), None
        for m in _RECENT.finditer(text):
            if not negated(m.start()):
                return newest - w.RECENT_YEARS, None
    for m in _OLD.finditer(text):
        if negated(m.start()):  # "nothing too old"
            return w.NOT_OLD_FROM, None
        return None, w.OLD_UNTIL
    return None


# -- what else: searchable words, and ruled-out words the catalog does not know ----------------------------------


def _terms(masked: str, scopes: list[_Scope], claimed: list, catalog: Catalog) -> list[str]:
    """Words a search can use from what is wanted: not ruled out, not a name or title, not generic."""
    text = masked
    for s, e in [*claimed, *((sc.cue_start, sc.end) for sc in scopes)]:
        text = text[:s] + " " * (e - s) + text[e:]
    out: list[str] = []
    for term in catalog.retriever.known_terms(text):
        if len(term) < 3 or term in w.GENERIC_WORDS or term in w.GENRE_WORDS or term.isdigit() or term in out:
            continue
        if term in w.DECADE_WORDS or re.fullmatch(r"\d+s", term):
            continue
        out.append(term)
    return out


def _phrases(masked: str, scopes: list[_Scope], found: list[Found]) -> list[str]:
    """What a feeling cue rules out when it names nothing the catalog knows ("I don't like Zorblax"): kept as
    words, honoured by text."""
    out = []
    for scope in scopes:
        if not scope.feeling or scope.end <= scope.start:
            continue
        if any(scope.start <= f.start < scope.end for f in found):
            continue
        words = [x for x in re.findall(r"[\w'-]+", masked[scope.start : scope.end]) if x not in w.SCOPE_FILLER]
        words = [x for x in words if x not in ENGLISH_STOP_WORDS and x not in w.GENERIC_WORDS]
        phrase = " ".join(words)
        if 3 <= len(phrase) <= 40 and phrase not in out:
            out.append(phrase)
    return out


# -- the conversation -------------------------------------------------------------------------------------------


def named_in(turn: Turn, catalog: Catalog) -> tuple[Item, ...]:
    """The titles a system turn named: as it recorded them (its choice, the film it answered about), else the
    catalog titles its text mentions."""
    names = turn.metadata.get("chosen") if isinstance(turn.metadata, dict) else None
    if names:
        found = [catalog.match_name(n) for n in names if isinstance(n, str)]
        items = tuple(i for i in found if i is not None)
        if items:
            return items
    return tuple(dict.fromkeys(m.item for m in catalog.mentions(turn.text or "") if m.item is not None))


def read_request(conversation: Conversation | Sequence[Turn], catalog: Catalog) -> RequestState:
    """The conversation's user turns, read in order and folded into one state."""
    turns = conversation.all_turns if isinstance(conversation, Conversation) else list(conversation)
    genres: list[str] = []
    not_genres: list[str] = []
    people: list[str] = []
    not_people: list[str] = []
    feelings: dict[str, tuple[Item, set[str]]] = {}  # item id -> (item, {"+", "-", "seen", "mention"})
    years: tuple[int | None, int | None] = (None, None)
    terms: list[str] = []
    phrases: list[str] = []
    last = Reading()
    last_named: tuple[Item, ...] = ()
    for turn in turns:
        if turn.role != "user":
            named = named_in(turn, catalog)
            last_named = named or last_named
            continue
        last = read_message(turn.text or "", catalog, last_named)
        if last.note:
            continue
        wanted_genres: list[str] = []
        wanted_people: list[str] = []
        for f in last.found:
            if f.kind == "genre":
                _sign(str(f.value), f.sign, genres, not_genres, wanted_genres)
            elif f.kind == "person":
                _sign(str(f.value), f.sign, people, not_people, wanted_people)
            else:
                items = (f.value,) if isinstance(f.value, Item) else f.value if isinstance(f.value, tuple) else ()
                for item in items:
                    _feel(feelings, item, f.sign)
        genres[:] = _merge(genres, wanted_genres, last)
        people[:] = _merge(people, wanted_people, last)
        if last.years is not None:
            years = last.years
        terms += [t for t in last.terms if t not in terms]
        phrases += [p for p in last.phrases if p not in phrases]

    def having(sign: str) -> tuple[Item, ...]:
        return tuple(item for item, signs in feelings.values() if sign in signs)

    liked, disliked = having("+"), having("-")
    mentioned = tuple(i for i in having("mention") if i not in liked and i not in disliked and i not in having("seen"))
    return RequestState(
        genres=tuple(genres),
        not_genres=tuple(not_genres),
        people=tuple(people),
        not_people=tuple(not_people),
        liked=liked,
        disliked=disliked,
        seen=having("seen"),
        mentioned=mentioned,
        min_year=years[0],
        max_year=years[1],
        act=last.act,
        about=last.about,
        subject=last.subject,
        terms=tuple(terms),
        not_phrases=tuple(phrases),
        note=last.note,
    )


def _sign(value: str, sign: str, wanted: list[str], ruled_out: list[str], said: list[str]) -> None:
    """One genre or person, said in a wish ("+") or ruled out ("-"): the later word takes back the earlier."""
    if sign == "-":
        if value in wanted:
            wanted.remove(value)
        if value in said:
            said.remove(value)
        if value not in ruled_out:
            ruled_out.append(value)
    else:
        if value in ruled_out:
            ruled_out.remove(value)
        if value not in said:
            said.append(value)


def _merge(before: list[str], said: list[str], reading: Reading) -> list[str]:
    """The wishes after a message: its own replace the earlier ones when it asks anew ("actually, a comedy
    instead", "a funny movie like Superbad"), else they are added ("could it be funny as well?")."""
    if not said:
        return before
    if reading.change or (reading.new_request and not reading.add):
        return list(said)
    return before + [s for s in said if s not in before]


def _feel(feelings: dict[str, tuple[Item, set[str]]], item: Item, sign: str) -> None:
    _, signs = feelings.setdefault(item.id, (item, set()))
    if sign == "+":
        signs.discard("-")
    elif sign == "-":
        signs.discard("+")
    signs.add(sign)


def with_note(state: RequestState, note: str) -> RequestState:
    return replace(state, note=note)


def genres_named(text: str, catalog: Catalog) -> list[str]:
    """The catalog genres ``text`` names by a genre word ("Is it a comedy?" -> ["Comedy"]), in order."""
    found = _genres(fold(" ".join((text or "").split())), vocabulary(catalog), [])
    return list(dict.fromkeys(genre for _s, _e, genre in found))


def title_feelings(text: str, spans: Sequence[tuple[int, int]]) -> list[str]:
    """How the writer of ``text`` feels about the title at each of ``spans`` (places in ``text``; the titles may be
    any, the catalog's or not): "+" liked, "-" disliked, "seen", "unseen" ("I haven't seen it") or "mention" (no
    feeling said). The reader's own cues and scopes, for titles found by someone else (ReDial's "@123" mentions)."""
    text = (text or "").replace("’", "'").replace("‘", "'")
    low = fold(text)
    masked = _mask(low, w.NO_SLOT)
    scopes = _scopes(_mask(masked, w.NOT_NEGATIONS))
    out: list[str] = []
    previous: tuple[int, str] | None = None
    for start, end in spans:
        if _UNSEEN_BEFORE.search(low[max(0, start - 40) : start]):
            sign = "unseen"
        else:
            sign = _feeling(masked, start, end, scopes)
            if sign == "mention" and previous is not None and _LISTED.fullmatch(masked[previous[0] : start]):
                sign = previous[1]  # "I liked X and Y": the list shares its feeling
        out.append(sign)
        previous = (end, sign)
    for m in w.REFERENCE.finditer(masked):  # "I've seen X, didn't really like that": the pronoun's title
        verb = w.REFERENCE_VERB.search(masked[max(0, m.start() - 40) : m.start()])
        before = [k for k, (_s, e) in enumerate(spans) if e <= m.start()]
        if verb is not None and before and not w.COMPARISON.search(masked[: m.start()]):
            felt = "seen" if verb.group("seen") else ("+" if verb.group("liked") else "-")
            k = before[-1]
            if felt != "seen" or out[k] == "mention":
                out[k] = felt
    return out


_UNSEEN_BEFORE = re.compile(
    r"\b(?:(?:have|has|'ve)\s*n['o]?t\s+(?:yet\s+)?(?:seen|watched)|never\s+(?:seen|watched|saw|heard\s+of)"
    r"|(?:did|do)\s*n['o]?t\s+(?:see|watch)|not\s+seen)(?:\s+(?:it|that|yet))?\s+$"
)
