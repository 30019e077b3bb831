"""What the person does not want, and when they are leaving: read from their turns, honoured by every system
that writes its own text (ChatCRS offline, the retrieval baseline, the small local versions).

A dislike is a clause like "I don't like Christopher Nolan films", "not a fan of Jonah Hill", "no horror
please", "I hated Titanic". Its object is matched against the catalog: titles (the catalog's mention finder),
genres (the genre words ChatCRS reads, ``chatcrs_embedded.GENRE_WORDS``) and people (every director, writer and star
of the catalog, by full name, or by surname when only one catalog person has it). What matches nothing is kept
as a phrase and honoured by text: an item whose record names the phrase is not recommended either. A later
"actually I do like horror" does not lift an earlier dislike; a person who changes their mind says so plainly
and the systems follow the latest wishes they can read, which is all a rule-based reader can promise.

A goodbye is a message that only thanks or takes leave ("Thanks, bye!", "Great, thanks!", "That's all, see you"):
it gets a goodbye and no recommendation.

ChatCRS and the retrieval baseline now read dislikes with everything else through the request reader
(:mod:`crs_backends.request_reader`, which uses :func:`is_goodbye` from here); :func:`read_dislikes` and
:func:`without_dislikes` stay, unchanged, for the small neural versions until they move to it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from catalog.catalog import Catalog
from catalog.items import Item
from crs_backends.chatcrs_embedded import GENRE_WORDS
from crs_backends.request_state import record_text, says

# the cue that opens a dislike; its object runs to the end of the clause
_CUE = (
    r"(?:i|we)\s+(?:really\s+|just\s+|also\s+)?(?:do\s*n[o']t|don't|dont|do not|did\s*n[o']t|didn't|didnt|did not)\s+"
    r"(?:really\s+)?(?:like|love|enjoy|want|care for|dig)"
    r"|(?:i|we)\s+(?:really\s+|just\s+)?(?:hate|hated|dislike|disliked|detest|can't stand|cannot stand|cant stand)"
    r"|(?:i'm|im|i am|we're|we are)\s+(?:really\s+|just\s+)?not\s+"
    r"(?:a\s+(?:big\s+|huge\s+)?fan\s+of|into|in the mood for|keen on)"
    r"|not\s+(?:a\s+(?:big\s+|huge\s+)?fan\s+of|into|keen on)"
    r"|(?:no|nothing with|nothing by|nothing from|anything but|nothing like|without|except|avoid|skip|enough of)"
    r"|no more"
)
_DISLIKE = re.compile(r"(?<![\w'])(?:" + _CUE + r")\s+(?P<what>[^.!?;]+)", re.IGNORECASE)
# where the object of a dislike ends: "I don't like horror but I love comedies" dislikes horror only
_CLAUSE_END = re.compile(
    r"\s*(?:,|\bbut\b|\bthough\b|\balthough\b|\bhowever\b|\bso\b|\bbecause\b|\bsince\b|\band (?:i|we)\b|"
    r"\bplease\b|\banymore\b|\bany more\b|\bthis time\b|\btoday\b|\btonight\b|\bfor now\b)",
    re.IGNORECASE,
)
# "no" and friends open a dislike only before a taste word, not in "no, I meant…" or "no problem"
_WEAK_CUES = re.compile(r"^(?:no|without|except|skip|avoid)\s", re.IGNORECASE)
_FILLER = re.compile(
    r"\b(?:movies?|films?|ones?|stuff|things?|anything|something|any|the|a|an|those|these|that|this|kinds?|"
    r"sorts?|of|type|types|genre|genres|very|much|really|at all|directed by|by|with|starring|in it|either|"
    r"too|so|all|his|her|their|work|works)\b",
    re.IGNORECASE,
)
_APPROVAL = r"(?:ok(?:ay)?|great|perfect|cool|awesome|nice|alright|all right|sounds good|good|wonderful|excellent)"
_THANKS = r"(?:thanks?(?: you)?(?: so much| a lot| very much)?|thx|ty|cheers|much appreciated|appreciate it)"
_LEAVE = (
    r"(?:that'?s all|that is all|that'?s it|i'?m (?:good|done|all set)|i am (?:good|done|all set)|"
    r"no(?:,)? thanks?|nothing else|i'?ll (?:watch|check out|try) (?:it|that|those|them|one)(?: tonight)?|"
    r"i'?ll check (?:it|that|those|them) out|"
    r"good ?bye|bye(?: ?bye)?|see (?:you|ya)(?: later)?|have a (?:good|nice|great) (?:one|day|night|evening)|"
    r"take care|later|gotta go|i have to go|i need to go)"
)
_GOODBYE = re.compile(
    rf"^(?:{_APPROVAL}[\s,!.]*)*(?:(?:{_THANKS}|{_LEAVE})[\s,!.]*)+$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Dislikes:
    """What the person said they do not want: catalog titles, genres and people, and unmatched phrases."""

    items: frozenset[str] = frozenset()  # catalog item ids
    titles: tuple[str, ...] = ()  # their names, for the record
    genres: frozenset[str] = frozenset()  # catalog genres
    people: frozenset[str] = frozenset()  # catalog person names
    phrases: tuple[str, ...] = ()  # objects that match nothing in the catalog, lower case
    spans: tuple[str, ...] = field(default=(), compare=False)  # the clauses as said

    def __bool__(self) -> bool:
        return bool(self.items or self.genres or self.people or self.phrases)

    def excludes(self, item: Item) -> bool:
        """Whether ``item`` is something the person said they do not want."""
        if item.id in self.items or self.genres & set(item.genres):
            return True
        if self.people & {*item.directors, *item.cast, *item.writers}:
            return True
        if self.phrases:  # the catalog's record of the item, its description included ("a Stephen King novel")
            record = record_text(item)
            return any(says(record, p) for p in self.phrases)
        return False

    def keep(self, items: Iterable[Item]) -> list[Item]:
        return [i for i in items if not self.excludes(i)]

    def mentions_disliked(self, text: str) -> bool:
        """Whether ``text`` (a reply) names a disliked person, genre word or phrase."""
        lowered = text.lower()
        words = [*self.people, *self.phrases, *(w for w, g in GENRE_WORDS.items() if g in self.genres)]
        return any(re.search(r"(?<![\w-])" + re.escape(w.lower()) + r"(?![\w-])", lowered) for w in words)

    def record(self) -> dict:
        return {
            "titles": list(self.titles),
            "genres": sorted(self.genres),
            "people": sorted(self.people),
            "phrases": list(self.phrases),
        }


def dislike_spans(text: str) -> list[str]:
    """The objects of the dislikes in ``text``: "I don't like Christopher Nolan films, but Heat was great"
    -> ["Christopher Nolan films"]."""
    return [span for span, _weak in _dislikes(text)]


def _dislikes(text: str) -> list[tuple[str, bool]]:
    """(object, whether a weak cue opened it: "no …", "without …", which count only when the catalog knows
    the object, so "no way" or "without subtitles" exclude nothing)."""
    out = []
    for m in _DISLIKE.finditer(text or ""):
        cue = m.group(0)[: m.start("what") - m.start()]
        what = _CLAUSE_END.split(m.group("what"), maxsplit=1)[0].strip(" ,'\"")
        if not what:
            continue
        weak = bool(_WEAK_CUES.match(cue))
        if weak and not _tasteful(what):
            continue  # "no, I meant a comedy", "no problem": not a dislike
        out.append((what, weak))
    return out


def _tasteful(what: str) -> bool:
    """Whether the object of a weak cue ("no …") names something a taste can be about (not "no, thanks")."""
    lowered = what.lower()
    if re.match(r"(?:problem|worries|thanks?|idea|i\b|it\b|that\b|not\b|more\b(?! than))", lowered):
        return False
    return True


def without_dislikes(text: str) -> str:
    """``text`` with its dislike clauses removed: what a search should read ("Not a fan of Jonah Hill. Another
    one?" -> "Another one?")."""
    text = text or ""
    pieces, at = [], 0
    for m in _DISLIKE.finditer(text):
        if not dislike_spans(m.group(0)):
            continue
        end = _CLAUSE_END.search(m.group("what"))  # the clause ends there; what follows ("but I love …") stays
        stop = m.start("what") + (end.start() if end else len(m.group("what")))
        pieces.append(text[at : m.start()])
        at = stop
    pieces.append(text[at:])
    return " ".join(" ".join(pieces).split()).lstrip(" .,;!?")


def read_dislikes(texts: Sequence[str], catalog: Catalog) -> Dislikes:
    """Every dislike in the person's turns, matched to the catalog where it can be."""
    people = _people(catalog)
    items: dict[str, Item] = {}
    genres: set[str] = set()
    found_people: set[str] = set()
    phrases: list[str] = []
    spans: list[str] = []
    known_genres = {g.lower(): g for item in catalog.items for g in item.genres}
    for text in texts:
        for span, weak in _dislikes(text):
            spans.append(span)
            matched = False
            for mention in catalog.mentions(span):
                if mention.item is not None:
                    items.setdefault(mention.item.id, mention.item)
                    matched = True
            lowered = span.lower()
            for word, genre in GENRE_WORDS.items():
                if re.search(r"(?<![\w-])" + re.escape(word) + r"(?![\w-])", lowered):
                    name = known_genres.get(genre.lower())
                    if name:
                        genres.add(name)
                        matched = True
            for person in _people_in(lowered, people):
                found_people.add(person)
                matched = True
            rest = " ".join(_FILLER.sub(" ", span).split()).strip(" ,.'\"")
            if not matched and len(rest) >= 3:  # a bare title ("I hated Titanic"), which mention finding skips
                item = catalog.match(rest)
                if item is not None:
                    items.setdefault(item.id, item)
                    matched = True
            if not matched and not weak and len(rest) >= 3 and rest.lower() not in phrases:
                phrases.append(rest.lower())
    return Dislikes(
        items=frozenset(items),
        titles=tuple(i.name for i in items.values()),
        genres=frozenset(genres),
        people=frozenset(found_people),
        phrases=tuple(phrases),
        spans=tuple(spans),
    )


@dataclass(frozen=True)
class _People:
    full: dict[str, str]  # lower-case full name -> name
    surname: dict[str, str]  # lower-case surname shared by no other catalog person -> name


@lru_cache(maxsize=8)
def _people(catalog: Catalog) -> _People:
    """Every person the catalog names, by full name and by a surname only one of them has."""
    names = sorted({p for i in catalog.items for p in (*i.directors, *i.cast, *i.writers) if p})
    full = {" ".join(_words(n)): n for n in names}
    by_surname: dict[str, set[str]] = {}
    for n in names:
        parts = _words(n)
        if len(parts) >= 2 and len(parts[-1]) >= 4:
            by_surname.setdefault(parts[-1], set()).add(n)
    surname = {s: next(iter(ns)) for s, ns in by_surname.items() if len(ns) == 1 and s not in GENRE_WORDS}
    return _People(full, surname)


def _words(text: str) -> list[str]:
    """Lower-case words, possessives and full stops dropped ("Nolan's" -> "nolan", "Jr." -> "jr")."""
    return [w.removesuffix("'s").strip(".'") for w in re.findall(r"[\w.'-]+", text.lower())]


def _people_in(lowered: str, people: _People) -> list[str]:
    """Catalog people named in ``lowered``: full names (up to four words), else a unique surname."""
    words = _words(lowered)
    found = []
    for n in range(4, 1, -1):
        for k in range(len(words) - n + 1):
            name = people.full.get(" ".join(words[k : k + n]))
            if name and name not in found:
                found.append(name)
    if found:
        return found
    by_surname = []
    for k, w in enumerate(words):
        name = people.surname.get(w)
        if name is None:
            continue
        given = words[k - 1] if k else ""
        if given and given not in _NOT_GIVEN_NAMES and given != _words(name)[0]:
            continue  # "Stephen King" is not the catalog's Adrienne King: another person, honoured as text
        by_surname.append(name)
    return list(dict.fromkeys(by_surname))


# words that may stand right before a bare surname without being a given name ("anything by Nolan", "no Tarantino")
_NOT_GIVEN_NAMES = frozenset(
    "a an the any anything something by of with from starring featuring directed written like and or nor but "
    "no not fan fans mr mrs ms dr director actor actress films movies film movie stuff about".split()
)


def is_goodbye(text: str) -> bool:
    """Whether ``text`` only thanks or takes leave ("Thanks, bye!", "Great, thanks!", "That's all. See you!"): it
    gets "you're welcome" and no more films. A thanks followed by anything else ("Thanks! Anything else like it?")
    asks on."""
    cleaned = " ".join((text or "").replace("’", "'").split()).strip()
    return bool(cleaned) and bool(_GOODBYE.match(cleaned))


_FAREWELL = re.compile(
    r"\b(?:you'?re welcome|welcome|enjoy|good ?bye|bye|have fun|have a (?:good|great|nice)|glad|take care|see you)\b",
    re.IGNORECASE,
)


def is_farewell_reply(text: str) -> bool:
    """Whether a generated reply reads as a goodbye ("You're welcome, have fun!"): a farewell word, no question."""
    return bool(_FAREWELL.search(text or "")) and "?" not in text
