"""The finders of the request reader (:mod:`crs_backends.request_reader`): where a message names catalog titles
(written out, or after a cue and matched fuzzily), the titles the system named last ("seen it", "both"), people
(full names, surnames, misspellings, a capitalised name after "fan of") and genres (genre words, misspellings by a
letter). Each gives ``(start, end, value)`` places in the message, so that one span is claimed by one finder."""

from __future__ import annotations

import re

from rapidfuzz import process
from rapidfuzz.distance import OSA
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from catalog.catalog import Catalog
from catalog.items import Item
from catalog.matcher import normalize_title
from crs_backends import request_words as w
from crs_backends.request_vocabulary import Vocabulary, fold, name_parts

TITLE_WORDS_TRIED = 6  # words after a cue tried as a title, longest first

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


def find_titles(text: str, masked: str, catalog: Catalog, vocab: Vocabulary) -> list[tuple]:
    """(start, end, item) of the catalog titles the message writes out (the catalog's mention finder)."""
    out = []
    for m in catalog.mentions(text):
        if m.item is not None and not masked[m.start : m.start + len(m.text)].isspace():
            if not _common_phrase(m.text, vocab):
                out.append((m.start, m.start + len(m.text), m.item))
    return out


def find_cue_titles(
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


def find_references(masked: str, titles: list[tuple], last_named: tuple[Item, ...]) -> list[tuple]:
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


_NAME_TOKEN = re.compile(r"[\w][\w.'-]*")


def find_people(text: str, masked: str, vocab: Vocabulary, claimed: list) -> list[tuple]:
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
        if before in vocab.given and before != name_parts(fold(name))[0] and before not in w.NOT_GIVEN_NAMES:
            continue  # "Stephen King" is not the catalog's Adrienne King
        if not (
            original[:1].isupper()
            or before in w.PERSON_CUES
            or token.endswith(("'s", "s'"))
            or (text.islower() and word not in vocab.english and word not in w.SURNAMES_THAT_ARE_WORDS)
            or len(name_parts(fold(name))) == 1
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


_GENRE_PATTERN = re.compile(
    r"(?<![\w])(" + "|".join(re.escape(k) for k in sorted(w.GENRE_WORDS, key=len, reverse=True)) + r")(?![\w])"
)

_ONE_WORD_GENRES = [k for k in w.GENRE_WORDS if " " not in k and len(k) >= 5]


def find_genres(masked: str, vocab: Vocabulary, claimed: list) -> list[tuple]:
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
