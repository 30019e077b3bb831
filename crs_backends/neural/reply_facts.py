"""Facts in the small local versions' replies come from the catalog, never from the generator.

The small KBRD, BARCOR and UniCRS are trained on replies whose titles *and* facts are slots:
"You might like <movie>: it is a <genre> film directed by <director>." At answer time each
``<movie>`` takes the next item of the model's ranking, and each fact slot after it is filled from
that item's catalog record (preferring a value the user mentioned), so what a reply says about a
title is what the catalog says. :func:`contradictions` checks any reply against the catalog; the
fidelity benchmark and the tests count with it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from catalog.catalog import Catalog
from catalog.items import Item

MOVIE = "<movie>"
FACT_SLOTS = {"<genre>": "genre", "<director>": "director", "<actor>": "actor", "<year>": "year"}
SLOT_TOKENS = (MOVIE, *FACT_SLOTS)
_SLOT = re.compile("|".join(re.escape(s) for s in SLOT_TOKENS))

# how a genre reads in "a ___ film" (the synthetic dialogues use the same words)
GENRE_ADJECTIVE = {
    "Action": "action",
    "Adventure": "adventure",
    "Animation": "animated",
    "Biography": "biographical",
    "Comedy": "comedy",
    "Crime": "crime",
    "Documentary": "documentary",
    "Drama": "drama",
    "Family": "family",
    "Fantasy": "fantasy",
    "History": "historical",
    "Horror": "horror",
    "Music": "music",
    "Musical": "musical",
    "Mystery": "mystery",
    "Romance": "romance",
    "Sci-Fi": "sci-fi",
    "Sport": "sports",
    "Thriller": "thriller",
    "War": "war",
    "Western": "western",
}
_ADJECTIVE_GENRE = {v: k for k, v in GENRE_ADJECTIVE.items()}

# a fact phrase whose value is missing is removed with its lead-in
_DANGLING = (
    re.compile(r",?\s*directed by\s*(?=[,.;:!?)]|$)"),
    re.compile(r",?\s*(?:starring|with)\s*(?=[,.;:!?)]|$)"),
    re.compile(r",?\s*from\s*(?=[,.;:!?)]|$)"),
)
_ARTICLE = re.compile(r"\b([Aa]n?) (?=(\w))")
_DOUBLE_STOP = re.compile(r"(?<!\.)\.\.(?!\.)")


# the words people (and the synthetic training dialogues) use for each catalog genre, plural first
GENRE_NOUNS: dict[str, tuple[str, ...]] = {
    "Action": ("action movies", "action", "action films", "action flicks"),
    "Adventure": ("adventure movies", "adventures", "adventure films"),
    "Animation": ("animated movies", "animation", "cartoons", "animated films"),
    "Biography": ("biopics", "biographies", "movies based on real people"),
    "Comedy": ("comedies", "comedy", "funny movies", "comedy films"),
    "Crime": ("crime movies", "crime films", "gangster movies", "crime"),
    "Documentary": ("documentaries", "documentary films"),
    "Drama": ("dramas", "drama", "serious movies", "drama films"),
    "Family": ("family movies", "movies for kids", "family films"),
    "Fantasy": ("fantasy", "fantasy movies", "fantasy films"),
    "History": ("history movies", "historical films", "period pieces"),
    "Horror": ("horror movies", "horror", "scary movies", "horror films"),
    "Music": ("movies about music", "music films"),
    "Musical": ("musicals", "musical films"),
    "Mystery": ("mysteries", "mystery movies", "whodunits"),
    "Romance": ("romantic movies", "romance", "rom coms", "love stories"),
    "Sci-Fi": ("sci-fi", "science fiction", "sci fi movies", "scifi"),
    "Sport": ("sports movies", "movies about sports"),
    "Thriller": ("thrillers", "suspense movies", "tense thrillers"),
    "War": ("war movies", "war films", "movies about war"),
    "Western": ("westerns", "cowboy movies", "western films"),
}


def genre_word(genre: str) -> str:
    return GENRE_ADJECTIVE.get(genre, genre.lower())


def _value(item: Item, slot: str, mentioned: set[str]) -> str:
    kind = FACT_SLOTS[slot]
    if kind == "year":
        return str(item.year) if item.year else ""
    values: Sequence[str] = {"genre": item.genres, "director": item.directors, "actor": item.cast}[kind]
    if not values:
        return ""
    chosen = next((v for v in values if v.lower() in mentioned), values[0])
    return genre_word(chosen) if kind == "genre" else chosen


_LEAD_INS = (
    (re.compile(r"directed by\s*$", re.IGNORECASE), "<director>"),
    (re.compile(r"(?:starring|with)\s*$", re.IGNORECASE), "<actor>"),
    (re.compile(r"\bfrom\s*$", re.IGNORECASE), "<year>"),
)
_IS_A = re.compile(r"\b(?:is|was) an?\s*$", re.IGNORECASE)
_GENRE_FRAME = (re.compile(r"\b(?:a|an)\s*$", re.IGNORECASE), re.compile(r"^\s*(?:film|movie)\b", re.IGNORECASE))


def _kind_by_phrase(text: str, match: re.Match) -> str:
    """The slot its phrase asks for: "directed by <actor>" is filled with the director, "a <movie> film" with a genre.
    A small model sometimes writes the wrong slot token; the phrase around it decides what is true to say there."""
    before, after = text[max(0, match.start() - 20) : match.start()], text[match.end() : match.end() + 8]
    for pattern, slot in _LEAD_INS:
        if pattern.search(before):
            return slot
    if _GENRE_FRAME[0].search(before) and (_GENRE_FRAME[1].search(after) or _IS_A.search(before)):
        return "<genre>"  # "a <movie> film", "it is a <movie>." are genre phrases
    return match.group(0)


def fill(text: str, items: Sequence[Item | None], names: Sequence[str], mentioned: Iterable[str] = ()) -> str:
    """Fill ``<movie>`` slots with ``names`` in order and each fact slot from the item of the last movie slot
    (the first ranked item before any movie slot). A slot with no value drops its phrase."""
    if not _SLOT.search(text):
        return text
    lowered = {m.lower() for m in mentioned}
    queue = list(range(len(names)))
    current: list[int] = [0]

    def value(slot: str) -> str:
        if slot == MOVIE:
            if not queue:
                return ""
            current[0] = queue.pop(0)
            return names[current[0]]
        item = items[current[0]] if current[0] < len(items) else None
        return _value(item, slot, lowered) if item is not None else ""

    def put(match: re.Match) -> str:
        filled = value(_kind_by_phrase(text, match))
        if not filled:
            return ""
        # a model may leave out the space token before or after a slot: "a<genre> film" must not read "aaction"
        before = text[match.start() - 1] if match.start() > 0 else " "
        after = text[match.end()] if match.end() < len(text) else " "
        return (" " if before.isalnum() else "") + filled + (" " if after.isalnum() else "")

    out = _SLOT.sub(put, text)
    for pattern in _DANGLING:
        out = pattern.sub("", out)
    out = _ARTICLE.sub(
        lambda m: (
            (
                ("An" if m.group(1)[0] == "A" else "an")
                if m.group(2).lower() in "aeiou"
                else ("A" if m.group(1)[0] == "A" else "a")
            )
            + " "
        ),
        out,
    )
    out = re.sub(r"\s+([,.;:!?])", r"\1", " ".join(out.split()))
    return _DOUBLE_STOP.sub(".", out)  # a value ending in a period ("Robert Downey Jr.") before the sentence's own


def mentioned_values(entities: Iterable[str]) -> set[str]:
    """The values a conversation named: its entity names without the KG builder's " [type]" suffix."""
    return {e.split(" [")[0] for e in entities}


def unnamed_positions(names: Sequence[str], entities: Iterable[str]) -> list[int]:
    """Positions of the ranked ``names`` the conversation's ``entities`` do not hold (the user's titles and earlier
    suggestions), in ranking order; all positions when every one was named. What the small versions offer."""
    named = set(entities)
    return [n for n, name in enumerate(names) if name not in named] or list(range(len(names)))


def fill_unnamed(text: str, items: Sequence[Item | None], names: Sequence[str], entities: Iterable[str]) -> str:
    """:func:`fill` as the small versions answer (ours; the app's policy and the fidelity check both call this):
    the movie slots skip the ranked titles among the conversation's ``entities`` (:func:`unnamed_positions`),
    and a fact slot prefers a value the conversation named."""
    entities = list(entities)
    keep = unnamed_positions(names, entities)
    return fill(text, [items[n] for n in keep], [names[n] for n in keep], mentioned_values(entities))


def small_reply(
    text: str,
    items: Sequence[Item | None],
    names: Sequence[str],
    entities: Iterable[str],
    lexicon: frozenset[str],
) -> str:
    """What a small version shows for its generated ``text`` (the app's policy and the fidelity check both call
    this): slots filled by :func:`fill_unnamed`, then clauses with a word its training replies never used dropped
    (:func:`drop_unknown_clauses`); a slot written twice back to back counts once ("It is a <genre> <genre>!", a
    repeat the decoding guard cannot see: a slot is no word until it is filled); the reply ends with a sentence
    mark."""
    text = _SLOT_REPEAT.sub(r"\1", text)
    text = mend_sentence_marks(drop_stray_letters(text))
    shown = drop_unknown_clauses(fill_unnamed(text, items, names, entities), lexicon).rstrip()
    # a reply ends with a sentence mark ("I hope you like John Wick (2014)" from the small BARCOR had none)
    return shown + "." if shown and shown[-1] not in _SENTENCE_END else shown


# a sentence that states or suggests, and one that asks, by how it opens (read on the slotted text, before titles
# with their own punctuation are filled in)
_STATES = re.compile(
    r"^(?:you (?:should|might|could|may|would|will|can)|you['’](?:ll|d)|i['’]d (?:recommend|suggest)"
    r"|i (?:would |really |also )?(?:recommend|suggest)|try|it is|it['’]s|this is|that is|that['’]s|they are)\b",
    re.IGNORECASE,
)
_ASKS = re.compile(
    r"^(?:have you|did you|do you|would you|are you|is there|how about|which|who|where|when|why|can you|could you"
    r"|what(?! a\b))\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"[^.!?]+[.!?]+|[^.!?]+$")


def mend_sentence_marks(text: str) -> str:
    """A sentence ends with the mark its opening calls for: "You should watch <movie>?" becomes "…<movie>." and
    "Have you seen <movie>." becomes "…<movie>?" (seen from the small UniCRS, whose decoding may follow a title slot
    with either mark; ours, for the small versions only)."""
    out = []
    for sentence in _SENTENCE.findall(text):
        body = sentence.rstrip()
        tail = sentence[len(body) :]
        opening = body.lstrip()
        if body.endswith("?") and not body.endswith("??") and _STATES.match(opening):
            body = body[:-1] + "."
        elif body.endswith(".") and not body.endswith("..") and _ASKS.match(opening):
            body = body[:-1] + "?"
        out.append(body + tail)
    return "".join(out)


_LONE_WORDS = frozenset({"a", "i", "o"})  # the one-letter words English writes


def drop_stray_letters(text: str) -> str:
    """``text`` without the clauses where the model wrote a lone letter ("You're w the movie!": a word ban in
    decoding cut "welcome" short). Read before the slots are filled, so a title such as "V for Vendetta" is no
    stray letter; the lexicon cannot catch these, since titles and initials put every letter in it."""
    written = _WORD.findall(_SLOT.sub(" ", text))
    letters = {w.lower() for w in written if len(w) == 1 and w.lower() not in _LONE_WORDS}
    if not letters:
        return text
    allowed = frozenset(w.lower() for w in written) - letters
    return drop_unknown_clauses(text, allowed | _slot_words())


def _slot_words() -> frozenset[str]:
    return frozenset(w.lower() for token in SLOT_TOKENS for w in _WORD.findall(token))


def has_slot(text: str) -> bool:
    """Whether a generated reply holds a movie or fact slot (it means to name or describe a title)."""
    return bool(_SLOT.search(text or ""))


_SLOT_REPEAT = re.compile(rf"({_SLOT.pattern})(?:\s*\1)+")  # the slots of SLOT_TOKENS, one list


_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")  # letters (accents too: "Léon"), with one apostrophe part
_CLAUSE = re.compile(r"[^,.!?:;]*[,.!?:;]*")  # text up to and including its run of punctuation
_SENTENCE_END = ".!?"


def words(text: str) -> list[str]:
    """The words of ``text`` as :func:`unknown_words` counts them (letters only, lower case)."""
    return [w.lower() for w in _WORD.findall(text)]


def unknown_words(text: str, lexicon: frozenset[str]) -> list[str]:
    """Words of ``text`` outside ``lexicon``: in a small version's reply, a word its training replies never used
    ("withs", "starringight": a word ban in decoding steered into a suffix)."""
    return [w for w in _WORD.findall(text) if w.lower() not in lexicon]


def drop_unknown_clauses(text: str, lexicon: frozenset[str]) -> str:
    """``text`` without the clauses (runs between punctuation) that hold a word outside ``lexicon``; the
    sentence they ended is closed with a full stop and the text starts with a capital. Ours, for the small
    versions: "…, with Brad Pitt, withs you mentioned." becomes "…, with Brad Pitt."."""
    if not unknown_words(text, lexicon):
        return text
    kept: list[str] = []
    for clause in _CLAUSE.findall(text):
        if not clause:
            continue
        if not unknown_words(clause, lexicon):
            kept.append(clause)
            continue
        ending = clause.rstrip()[-1:]
        if ending in _SENTENCE_END and kept:  # the dropped clause ended a sentence: so does the one before it
            body = kept[-1].rstrip().rstrip(",:;")
            if body and body[-1] not in _SENTENCE_END:
                body += "."
            kept[-1] = body + " "
    out = re.sub(r" {2,}", " ", "".join(kept)).strip()
    if out and out[-1] in ",:;":
        out = out.rstrip(",:;").rstrip() + "."
    return out[:1].upper() + out[1:]


# ----------------------------------------------------------------------------- checking
_YEAR_CLAIM = re.compile(r"\bfrom (\d{4})\b")
_DIRECTOR_CLAIM = re.compile(r"\bdirected by ([A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,3})")
_ACTOR_CLAIM = re.compile(r"\b(?:starring|with) ([A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,3})")
_GENRE_CLAIM = re.compile(r"\b(?:an?|both are) ((?:[\w-]+ ){0,2}?)(?:film|movie)s?\b", re.IGNORECASE)


def contradictions(text: str, catalog: Catalog) -> list[str]:
    """Facts the reply states about a catalog title that disagree with the catalog, one line each.

    Each title the reply names (catalog mentions) owns the text up to the next title; in it a year
    ("from 1995"), a director ("directed by …"), an actor ("starring …", "with …") or a genre ("a crime
    film") must match that item's record."""
    found = [(m, m.item) for m in catalog.mentions(text) if m.item is not None]
    found.sort(key=lambda pair: pair[0].start)
    problems: list[str] = []
    for n, (mention, item) in enumerate(found):
        end = found[n + 1][0].start if n + 1 < len(found) else len(text)
        clause = text[mention.start + len(mention.text) : end]
        for year in _YEAR_CLAIM.findall(clause):
            if item.year and int(year) != item.year:
                problems.append(f"{item.name}: year {year}")
        for name in _DIRECTOR_CLAIM.findall(clause):
            if not any(name.startswith(d) or d.startswith(name) for d in item.directors):
                problems.append(f"{item.name}: directed by {name}")
        for name in _ACTOR_CLAIM.findall(clause):
            if name.split()[0] in ("The", "A", "An"):
                continue  # "with The …" is not a person
            people = item.cast + item.directors
            if not any(name.startswith(p) or p.startswith(name) for p in people):
                problems.append(f"{item.name}: with {name}")
        for words in _GENRE_CLAIM.findall(clause):
            for word in words.split():
                genre = _ADJECTIVE_GENRE.get(word.lower())
                if genre and genre not in item.genres:
                    problems.append(f"{item.name}: {word} film")
    return problems


def stutters(text: str, titles: Iterable[str] = ()) -> list[str]:
    """Words repeated back to back ("The The"), ignoring case and punctuation between them. A title in
    ``titles`` counts as one word, so "La La Land" and "How about It (2017)? It is ..." are no stutters."""
    for title in sorted(set(titles), key=len, reverse=True):
        if title:
            text = text.replace(title, " TITLE ")
    words = re.findall(r"[A-Za-z0-9']+", text)  # a number is a word too: "from 1939, from" repeats no word
    return [a for a, b in zip(words, words[1:]) if a.lower() == b.lower() and len(a) > 1 and not a.isdigit()]
