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

This module reads and folds; the parts it uses: :mod:`~crs_backends.request_vocabulary` (the catalog's names and
words, the English check), :mod:`~crs_backends.request_finders` (titles, pronouns, people, genres),
:mod:`~crs_backends.request_years` (years) and :mod:`~crs_backends.request_scopes` (negation scopes, feelings).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from catalog.catalog import Catalog
from catalog.items import Item
from crs_backends import request_words as w
from crs_backends.preferences import is_goodbye
from crs_backends.request_finders import find_cue_titles, find_genres, find_people, find_references, find_titles
from crs_backends.request_scopes import LISTED, Scope, mask, negation_scopes, scope_at, title_feeling
from crs_backends.request_state import RequestState
from crs_backends.request_vocabulary import fold, reads_as_english, vocabulary
from crs_backends.request_years import find_years
from storage.records import Conversation, Turn

MAX_READ_CHARS = 1500  # a longer message is not read: no request is that long


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
    if not reads_as_english(low, vocab):
        return Reading(note="not read: not English")
    if is_goodbye(text):
        return Reading(act="goodbye")
    question = next((aspect for aspect, pattern in w.QUESTIONS if pattern.search(low)), None)
    masked = mask(low, w.NO_SLOT)  # "doesn't have to be new": neither a wish nor a ruling-out
    cues = mask(masked, w.NOT_NEGATIONS)  # "I don't know", "not sure": no cue
    scopes = negation_scopes(cues)
    claimed: list[tuple[int, int]] = []
    found: list[Found] = []

    titles = find_titles(text, masked, catalog, vocab)
    claimed += [(start, end) for start, end, _item in titles]
    people = find_people(text, masked, vocab, claimed)
    claimed += [(start, end) for start, end, _name in people]
    more = find_cue_titles(text, masked, catalog, vocab, question is not None, claimed)
    claimed += [(start, end) for start, end, _item in more]
    titles = sorted([*titles, *more], key=lambda t: t[0])
    genres = find_genres(masked, vocab, claimed)
    for start, end, _genre in genres:
        claimed.append((start, end))
    refs = find_references(masked, titles, last_named)

    subject: Item | None = None
    if question:
        in_question = [item for _s, _e, item in titles]
        subject = in_question[0] if in_question else (last_named[0] if last_named else None)
    else:
        previous: Found | None = None
        for start, end, item in titles:
            sign = title_feeling(masked, start, end, scopes)
            if sign == "mention" and previous is not None and LISTED.fullmatch(masked[previous.end : start]):
                sign = previous.sign  # "I liked Superbad and Step Brothers": the list shares its feeling
            previous = Found(start, end, "title", item, sign)
            if sign != "unseen":  # "I haven't seen Casino": no slot, and still a film to offer
                found.append(previous)
        for start, end, name in people:
            found.append(Found(start, end, "person", name, "-" if scope_at(scopes, start) else "+"))
        for start, end, genre in genres:
            found.append(Found(start, end, "genre", genre, "-" if scope_at(scopes, start) else "+"))
    for start, end, items, sign in refs:
        found.append(Found(start, end, "ref", items, sign))
    found.sort(key=lambda f: f.start)
    years = None if question else find_years(masked, scopes, claimed, vocab.newest)
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


def _terms(masked: str, scopes: list[Scope], claimed: list, catalog: Catalog) -> list[str]:
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


def _phrases(masked: str, scopes: list[Scope], found: list[Found]) -> list[str]:
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


def genres_named(text: str, catalog: Catalog) -> list[str]:
    """The catalog genres ``text`` names by a genre word ("Is it a comedy?" -> ["Comedy"]), in order."""
    found = find_genres(fold(" ".join((text or "").split())), vocabulary(catalog), [])
    return list(dict.fromkeys(genre for _s, _e, genre in found))


def title_feelings(text: str, spans: Sequence[tuple[int, int]]) -> list[str]:
    """How the writer of ``text`` feels about the title at each of ``spans`` (places in ``text``; the titles may be
    any, the catalog's or not): "+" liked, "-" disliked, "seen", "unseen" ("I haven't seen it") or "mention" (no
    feeling said). The reader's own cues and scopes, for titles found by someone else (ReDial's "@123" mentions)."""
    text = (text or "").replace("’", "'").replace("‘", "'")
    low = fold(text)
    masked = mask(low, w.NO_SLOT)
    scopes = negation_scopes(mask(masked, w.NOT_NEGATIONS))
    out: list[str] = []
    previous: tuple[int, str] | None = None
    for start, end in spans:
        if _UNSEEN_BEFORE.search(low[max(0, start - 40) : start]):
            sign = "unseen"
        else:
            sign = title_feeling(masked, start, end, scopes)
            if sign == "mention" and previous is not None and LISTED.fullmatch(masked[previous[0] : start]):
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
