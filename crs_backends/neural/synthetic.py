"""Seeded synthetic recommendation dialogues over a catalog, as training data for the small local versions.

A dialogue has 2–4 exchanges (user, then system). Users state preferences by genre,
director, actor, decade or "something like <title>", in varied wording (several
templates per act, lower-casing, dropped punctuation, the odd typo); they turn items
down ("I've seen it"), ask for something older or newer, narrow the request, or
accept. The system asks a question when it knows too little, otherwise recommends
catalog items that share the stated attributes and says why ("You might like
Heat (1995): it is a crime film directed by Michael Mann."), and closes politely.

Every system turn becomes one :class:`~catalog.ievalm_records.Record` in the
iEvaLM processed layout: ``context`` (all earlier utterances, user first),
``entity`` (KG entity names mentioned so far, in order, each once), ``rec`` (the items
named in the reply; empty for questions and closings) and ``resp``: the reply with each
recommended title as ``<movie>`` (the slot CRS Arena's policy fills with the ranking) and
every fact as written ("You might like <movie>: it is a crime film directed by Michael
Mann."). Only recommended items are named in system replies, so :func:`movie_template`
(titles → ``<movie>``) gives that target, with slots in ``rec`` order.

Deterministic for a seed (no hash-order iteration anywhere); 2,000 dialogues take
well under a second.
"""

from __future__ import annotations

import os
import random
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from catalog.ievalm_records import Record
from crs_backends.neural.engine import MOVIE_SLOT
from crs_backends.neural.reply_facts import GENRE_ADJECTIVE, GENRE_NOUNS, genre_word

KINDS = ("genre", "director", "actor", "decade", "similar")
N_DIALOGUES = 2000

# ---------------------------------------------------------------- wording
# genre entity -> (the adjective of "a ___ film", ways a user names it): reply_facts.GENRE_ADJECTIVE and GENRE_NOUNS
GENRE_WORDS: dict[str, tuple[str, tuple[str, ...]]] = {
    g: (GENRE_ADJECTIVE[g], nouns) for g, nouns in GENRE_NOUNS.items()
}
DECADE_WORDS = {
    "1920s": ("the twenties", "the 1920s"),
    "1930s": ("the thirties", "the 1930s", "the 30s"),
    "1940s": ("the forties", "the 1940s", "the 40s"),
    "1950s": ("the fifties", "the 1950s", "the 50s"),
    "1960s": ("the sixties", "the 1960s", "the 60s"),
    "1970s": ("the seventies", "the 1970s", "the 70s"),
    "1980s": ("the eighties", "the 1980s", "the 80s"),
    "1990s": ("the nineties", "the 1990s", "the 90s"),
    "2000s": ("the 2000s", "the early 2000s", "the noughties"),
    "2010s": ("the 2010s", "the last decade", "the 2010s"),
    "2020s": ("the 2020s", "the last few years"),
}

GREETINGS = ("Hi!", "Hello", "hey there", "Hi, can you help me find a movie?", "Good evening!", "hello, I need a movie")
VAGUE = (
    "I want to watch a movie tonight.",
    "Can you recommend something?",
    "I'm bored, any movie ideas?",
    "looking for something to watch",
    "What should I watch this weekend?",
    "recommend me a movie please",
)
ASK_PREF = (
    "Hi! What kind of movies do you like?",
    "Hello! What are you in the mood for?",
    "Sure. Which genres do you usually enjoy?",
    "Happy to help. Any favorite movies, actors or directors?",
    "Of course! What was the last movie you really liked?",
    "What sort of film are you looking for?",
)
STATE = {
    "genre": (
        "I like {g}.",
        "I'm in the mood for {g}.",
        "Can you recommend some {g}?",
        "I really enjoy {g}",
        "Do you know any good {g}?",
        "Something in the {a} genre please.",
        "i love {g}",
    ),
    "director": (
        "I like movies by {p}.",
        "Anything directed by {p}?",
        "I'm a big fan of {p}'s films.",
        "What about something from {p}?",
        "I love {p} movies",
        "Any film by {p} would be great.",
    ),
    "actor": (
        "I like movies with {p}.",
        "Anything starring {p}?",
        "I'm a fan of {p}.",
        "Do you have something with {p} in it?",
        "{p} is my favorite actor",
        "Show me a movie with {p}.",
    ),
    "decade": (
        "I'd like something from {d}.",
        "Any good movies from {d}?",
        "I love films from {d}.",
        "Something made in {d} please.",
        "i'm into movies from {d}",
    ),
    "similar": (
        "I'm looking for something like {t}.",
        "I loved {t}, anything similar?",
        "Can you recommend a movie like {t}?",
        "My favorite movie is {t}.",
        "I just watched {t} and want more like it.",
        "something similar to {t} please",
    ),
}
ASK_ERA = (
    "Nice choice. Do you want something recent or an older classic?",
    "Good taste! Should it be a newer movie or an older one?",
    "Do you prefer recent movies or classics?",
)
ERA_ANSWER = {
    "new": ("Something recent please.", "newer is better", "Recent, I think."),
    "old": ("An older classic.", "older ones please", "I like the classics."),
    "any": ("Doesn't matter.", "Either is fine.", "no preference"),
}
SEEN = (
    "I've seen it.",
    "Already watched that one.",
    "seen it already, anything else?",
    "I saw that last year. Something else?",
    "i have seen that one",
)
REJECT = (
    "Not really my thing.",
    "Hmm, I didn't like that one.",
    "Nah, something else please.",
    "I don't think I'd like that.",
)
OLDER = (
    "Something older?",
    "Do you have anything older?",
    "I'd prefer an older movie.",
    "something a bit older please",
)
NEWER = ("Anything more recent?", "Something newer please.", "Is there a newer one?", "got anything more recent")
ANOTHER = ("Any others like that?", "Sounds good, what else?", "Give me another one.", "more like that please")
ADD_GENRE = ("Maybe something with more {g}?", "Could it be {g} as well?", "I'd like it to be {g} too.")
ADD_ACTOR = ("Anything with {p}?", "Ideally with {p} in it.", "Is there one starring {p}?")
ACCEPT = (
    "Sounds great, thanks!",
    "Perfect, I'll watch it tonight.",
    "ok thanks!",
    "That sounds good, thank you.",
    "Great, I'll check it out.",
)
CLOSE = ("Enjoy the movie!", "You're welcome, have fun!", "Glad I could help. Enjoy!", "Have a great movie night!")
REC_ONE = (
    "You might like {t}: {r}.",
    "How about {t}? {R}.",
    "I'd recommend {t}, {r}.",
    "Have you seen {t}? {R}.",
    "Try {t}. {R}.",
    "You should watch {t}: {r}.",
)
REC_TWO = (
    "You could try {t}: {r}. {t2} is another option.",
    "I'd suggest {t}. {R}. Or maybe {t2}.",
    "How about {t}? {R}. {t2} could work too.",
)
REC_AFTER_SEEN = ("Then how about {t}? {R}.", "Oh, okay. Maybe {t} then: {r}.", "In that case, try {t}. {R}.")
REC_OLDER = (
    "If you want something older, try {t}: {r}.",
    "An older one: {t}. {R}.",
    "Going back a bit, how about {t}? {R}.",
)
REC_NEWER = ("For something newer, try {t}: {r}.", "A more recent one is {t}. {R}.", "How about {t}? It is newer: {r}.")
REC_RELAXED = (
    "I couldn't find exactly that, but you might like {t}: {r}.",
    "Nothing fits all of that, but {t} comes close: {r}.",
)


@dataclass
class Turn:
    role: str  # "user" | "system"
    text: str
    entities: list[str] = field(default_factory=list)  # KG entity names mentioned in this turn, in order
    items: list[str] = field(default_factory=list)  # recommended item names (system turns)
    template: str = ""  # the reply with its titles as <movie> (facts as written): the training target


@dataclass
class Dialogue:
    dialog_id: str
    turns: list[Turn]
    kinds: list[str]  # preference kinds the user expressed

    def records(self) -> list[Record]:
        out: list[Record] = []
        seen: list[str] = []
        for i, turn in enumerate(self.turns):
            if turn.role == "system":
                out.append(
                    Record(
                        context=[t.text for t in self.turns[:i]],
                        entity=list(seen),
                        rec=list(turn.items),
                        resp=turn.template or turn.text,
                        dialog_id=self.dialog_id,
                        turn_id=i,
                    )
                )
            for e in turn.entities:
                if e not in seen:
                    seen.append(e)
        return out


# ---------------------------------------------------------------- helpers
def movie_template(text: str, names: Iterable[str], slot: str = MOVIE_SLOT) -> str:
    """``text`` with each item name in ``names`` replaced by ``slot`` (longest names first)."""
    for name in sorted(set(names), key=lambda n: (-len(n), n)):
        if name:
            text = text.replace(name, slot)
    return text


def record_template(record: Record, slot: str = MOVIE_SLOT) -> str:
    """The UniCRS-style target of a record: its response with the recommended titles as ``<movie>``."""
    return movie_template(record.resp, record.rec, slot)


def record_texts(records: Iterable[Record]) -> list[str]:
    """Every distinct utterance (contexts and responses, plus slot templates), in first-seen order:
    tokenizer training text."""
    seen: dict[str, None] = {}
    for r in records:
        for t in (*r.context, r.resp, record_template(r)):
            if t:
                seen.setdefault(t, None)
    return list(seen)


_WORD = re.compile(r"[A-Za-z]{4,}")


def _typo(text: str, rng: random.Random) -> str:
    words = list(_WORD.finditer(text))
    if not words:
        return text
    m = rng.choice(words)
    w = m.group(0)
    j = rng.randrange(len(w) - 1)
    w = w[:j] + w[j + 1] + w[j] + w[j + 2 :] if rng.random() < 0.5 else w[:j] + w[j + 1 :]
    return text[: m.start()] + w + text[m.end() :]


def _noisy(template: str, rng: random.Random) -> str:
    """User wording noise on the template only (never inside the entity slots): typos, case, punctuation."""
    parts = re.split(r"(\{[a-z0-9]+\})", template)
    if rng.random() < 0.12:
        k = rng.randrange(len(parts))
        if not parts[k].startswith("{"):
            parts[k] = _typo(parts[k], rng)
    text = "".join(parts)
    if rng.random() < 0.2:
        text = "".join(p if p.startswith("{") else p.lower() for p in re.split(r"(\{[a-z0-9]+\})", text))
    if rng.random() < 0.2:
        text = text.rstrip(".!?")
    return text


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


# ---------------------------------------------------------------- generator
class _Generator:
    def __init__(self, catalog, entity2id: dict[str, int]):
        self.items = [i for i in catalog.items if i.name in entity2id]
        if not self.items:
            raise ValueError("no catalog item is a KG entity; build the KG from this catalog (kg_from_catalog)")
        self.e2i = entity2id
        self.index: dict[tuple[str, str], list[int]] = defaultdict(list)  # (relation, value) -> item positions
        for n, item in enumerate(self.items):
            for relation, values in item.features().items():
                for v in values:
                    self.index[(relation, v)].append(n)
        # rank = popularity order, so "best known first" is stable
        self.rank = {n: (item.popularity or 10**6, n) for n, item in enumerate(self.items)}
        self.genres = [g for g in GENRE_WORDS if len(self.index[("genre", g)]) >= 3]
        self.directors = sorted({d for i in self.items for d in i.directors if len(self.index[("director", d)]) >= 2})
        self.actors = sorted({a for i in self.items for a in i.cast if len(self.index[("star", a)]) >= 2})
        self.decades = sorted({i.decade for i in self.items if i.decade and len(self.index[("decade", i.decade)]) >= 3})
        self.popular = sorted(range(len(self.items)), key=lambda n: self.rank[n])[:300]
        self._pos = {item.name: n for n, item in enumerate(self.items)}

    # entity name for a feature value (the KG builder suffixes a name that collides with another type)
    def ent(self, relation: str, value: str) -> str | None:
        for name in (value, f"{value} [{relation}]"):
            if name in self.e2i:
                return name
        return None

    def surface_title(self, item, rng: random.Random) -> str:
        r = rng.random()
        if r < 0.55:
            return item.name
        if r < 0.85:
            return item.title
        return item.title.lower()

    def surface_person(self, name: str, rng: random.Random) -> str:
        r = rng.random()
        return name.lower() if r < 0.15 else name

    # ------------------------------------------------------------ choosing items
    def candidates(self, cons: dict, exclude: set[int]) -> list[int]:
        """Items satisfying every constraint, best first; 'like' ranks by shared attributes with the seed."""
        pools = []
        for rel in ("genre", "director", "star", "decade"):
            for v in cons.get(rel, ()):
                pools.append(set(self.index[(rel, v)]))
        if "like" in cons:
            seed = self.items[cons["like"]]
            score: dict[int, float] = defaultdict(float)
            weights = {"genre": 1.0, "director": 3.0, "star": 2.0, "writer": 2.0, "decade": 0.5}
            for rel, values in seed.features().items():
                for v in values:
                    for n in self.index[(rel, v)]:
                        score[n] += weights[rel]
            base = {n for n, s in score.items() if s >= 2.0}
            pools.append(base)
        else:
            score = {}
        if not pools:
            pool = set(self.popular)
        else:
            pool = set.intersection(*pools)
        if "after" in cons:
            pool = {n for n in pool if (self.items[n].year or 0) > cons["after"]}
        if "before" in cons:
            pool = {n for n in pool if (self.items[n].year or 10**4) < cons["before"]}
        pool -= exclude
        return sorted(pool, key=lambda n: (-score.get(n, 0.0), self.rank[n]))

    def pick(self, cands: list[int], rng: random.Random, k: int) -> list[int]:
        head = cands[: max(k, 8)]
        return sorted(rng.sample(head, min(k, len(head))), key=lambda n: cands.index(n))

    # ------------------------------------------------------------ explanations
    def reason(self, n: int, cons: dict, rng: random.Random) -> tuple[str, list[str]]:
        """Why item ``n`` fits, and the entities the text mentions: one genre, a director, an actor and a year of
        the item, preferring the value the user asked for, written out (a reply's facts are its own words)."""
        item = self.items[n]
        ents: list[str] = []
        bits: list[str] = []
        genres = [g for g in cons.get("genre", ()) if g in item.genres]
        if "like" in cons:
            seed = self.items[cons["like"]]
            genres = genres or [g for g in item.genres if g in seed.genres][:1]
        genres = genres or list(item.genres[:1])
        directors = [d for d in cons.get("director", ()) if d in item.directors]
        stars = [a for a in cons.get("star", ()) if a in item.cast]
        if "like" in cons:
            seed = self.items[cons["like"]]
            directors = directors or [d for d in item.directors if d in seed.directors]
            stars = stars or [a for a in item.cast if a in seed.cast][:1]
        directors = directors or (list(item.directors[:1]) if rng.random() < 0.6 else [])
        if genres:
            word = genre_word(genres[0])
            bits.append(f"it is {_article(word)} {word} film")
            ents += [e for e in [self.ent("genre", genres[0])] if e]
        else:
            bits.append("it is a film")
        if directors:
            bits[-1] += f" directed by {directors[0]}"
            ents += [e for e in [self.ent("director", directors[0])] if e]
        if stars:
            bits.append(f"starring {stars[0]}")
            ents += [e for e in [self.ent("star", stars[0])] if e]
        elif rng.random() < 0.4 and item.cast and item.cast[0] not in directors:
            bits.append(f"with {item.cast[0]}")
            ents += [e for e in [self.ent("star", item.cast[0])] if e]
        if "decade" in cons and item.decade in cons["decade"]:
            bits.append(f"from {item.year}")
        text = ", ".join(bits)
        if "like" in cons:
            text += rng.choice((", like the one you mentioned", ", much like your favorite", ", so it should be close"))
        return text, ents

    def recommend(
        self, cons: dict, exclude: set[int], rng: random.Random, templates=REC_ONE, two: bool = True
    ) -> Turn | None:
        cands = self.candidates(cons, exclude)
        relaxed = False
        if not cands:
            # drop the narrowing constraints one at a time, most recent first
            for key in ("star", "genre", "decade", "director", "after", "before"):
                if key in cons and len([k for k in cons if k != "like"]) > (0 if "like" in cons else 1):
                    cons = {k: v for k, v in cons.items() if k != key}
                    cands = self.candidates(cons, exclude)
                    if cands:
                        relaxed = True
                        break
        if not cands:
            return None
        k = 2 if two and templates is REC_ONE and len(cands) >= 2 and rng.random() < 0.25 else 1
        chosen = self.pick(cands, rng, k)
        reason, ents = self.reason(chosen[0], cons, rng)
        if relaxed:
            templates = REC_RELAXED
        pattern = rng.choice(REC_TWO if k == 2 else templates)
        names = [self.items[n].name for n in chosen]
        text = pattern.format(t=names[0], t2=names[-1], r=reason, R=_cap(reason))
        template = pattern.format(t=MOVIE_SLOT, t2=MOVIE_SLOT, r=reason, R=_cap(reason))
        entities = list(dict.fromkeys(names + ents))
        return Turn("system", text, entities, names, template)

    # ------------------------------------------------------------ preferences
    def preference(self, kind: str, rng: random.Random) -> tuple[str, list[str], dict]:
        tpl = _noisy(rng.choice(STATE[kind]), rng)
        if kind == "genre":
            g = rng.choice(self.genres)
            adj, nouns = GENRE_WORDS[g]
            text = tpl.format(g=rng.choice(nouns), a=adj)
            return text, [e for e in [self.ent("genre", g)] if e], {"genre": [g]}
        if kind == "director":
            p = rng.choice(self.directors)
            return (
                tpl.format(p=self.surface_person(p, rng)),
                [e for e in [self.ent("director", p)] if e],
                {"director": [p]},
            )
        if kind == "actor":
            p = rng.choice(self.actors)
            return tpl.format(p=self.surface_person(p, rng)), [e for e in [self.ent("star", p)] if e], {"star": [p]}
        if kind == "decade":
            d = rng.choice(self.decades)
            words = DECADE_WORDS.get(d, (d,))
            return tpl.format(d=rng.choice(words)), [e for e in [self.ent("decade", d)] if e], {"decade": [d]}
        n = rng.choice(self.popular)
        item = self.items[n]
        return tpl.format(t=self.surface_title(item, rng)), [item.name], {"like": n}

    def dialogue(self, dialog_id: str, rng: random.Random) -> Dialogue:
        exchanges = rng.randint(2, 4)
        turns: list[Turn] = []
        kinds: list[str] = []
        cons: dict = {}
        shown: set[int] = set()

        def user(text, ents=()):
            turns.append(Turn("user", text, list(ents)))

        def system(turn: Turn):
            turns.append(turn)
            for name in turn.items:
                shown.add(self._pos[name])

        opening = rng.random()
        if opening < 0.3:  # greeting or vague request, the system asks
            user(_noisy(rng.choice(GREETINGS + VAGUE), rng))
            system(Turn("system", rng.choice(ASK_PREF)))
        kind = rng.choice(KINDS)
        text, ents, cons = self.preference(kind, rng)
        kinds.append(kind)
        if "like" in cons:
            shown.add(cons["like"])
        user(text, ents)
        if rng.random() < 0.15 and len(turns) < 2 * exchanges - 1:
            system(Turn("system", rng.choice(ASK_ERA)))
            era = rng.choice(("new", "old", "any"))
            user(_noisy(rng.choice(ERA_ANSWER[era]), rng))
            if era == "new":
                cons["after"] = 1999
            elif era == "old":
                cons["before"] = 1990
        turn = self.recommend(cons, shown, rng)
        if turn is None:
            cons = {}
            turn = self.recommend(cons, shown, rng)
        if turn is None:
            raise ValueError(f"dialogue {dialog_id}: no catalog item left to recommend, even without constraints")
        system(turn)
        while len(turns) < 2 * exchanges:
            last_year = self.items[self._pos[turns[-1].items[0]]].year if turns[-1].items else None
            acts = ["seen", "reject", "another", "older", "newer", "add", "second", "accept"]
            weights = [3, 1, 2, 1.2, 1.2, 1.5, 1, 1.5 if len(turns) >= 4 else 0.2]
            act = rng.choices(acts, weights)[0]
            if len(turns) == 2 * exchanges - 2 and rng.random() < 0.35:
                act = "accept"
            if act in ("older", "newer") and not last_year:
                act = "seen"
            templates: tuple[str, ...] = REC_ONE
            if act == "accept":
                user(_noisy(rng.choice(ACCEPT), rng))
                system(Turn("system", rng.choice(CLOSE)))
                break
            if act == "seen":
                user(_noisy(rng.choice(SEEN), rng))
                templates = REC_AFTER_SEEN
            elif act == "reject":
                user(_noisy(rng.choice(REJECT), rng))
                templates = REC_AFTER_SEEN
            elif act == "another":
                user(_noisy(rng.choice(ANOTHER), rng))
            elif act == "older":
                user(_noisy(rng.choice(OLDER), rng))
                cons = {k: v for k, v in cons.items() if k not in ("after", "before")} | {"before": last_year}
                templates = REC_OLDER
            elif act == "newer":
                user(_noisy(rng.choice(NEWER), rng))
                cons = {k: v for k, v in cons.items() if k not in ("after", "before")} | {"after": last_year}
                templates = REC_NEWER
            elif act == "add":
                if rng.random() < 0.5:
                    g = rng.choice(self.genres)
                    adj, nouns = GENRE_WORDS[g]
                    user(_noisy(rng.choice(ADD_GENRE), rng).format(g=adj), [e for e in [self.ent("genre", g)] if e])
                    cons = cons | {"genre": [g]}
                    kinds.append("genre")
                else:
                    a = rng.choice(self.actors)
                    user(
                        _noisy(rng.choice(ADD_ACTOR), rng).format(p=self.surface_person(a, rng)),
                        [e for e in [self.ent("star", a)] if e],
                    )
                    cons = cons | {"star": [a]}
                    kinds.append("actor")
            else:  # a fresh preference of another kind
                kind = rng.choice([k for k in KINDS if k not in kinds] or list(KINDS))
                text, ents, cons = self.preference(kind, rng)
                kinds.append(kind)
                if "like" in cons:
                    shown.add(cons["like"])
                user(text, ents)
            turn = self.recommend(cons, shown, rng, templates)
            if turn is None:  # nothing left that fits: ask instead
                system(
                    Turn(
                        "system",
                        rng.choice(
                            (
                                "I'm out of ideas for that. What else do you like?",
                                "Hmm, that's all I have. Any other favorite actors or genres?",
                            )
                        ),
                    )
                )
                cons = {}
            else:
                system(turn)
        return Dialogue(dialog_id, turns, kinds)


def generate_dialogues(
    catalog=None,
    n: int = N_DIALOGUES,
    seed: int = 0,
    *,
    entity2id: dict[str, int] | None = None,
) -> list[Dialogue]:
    """``n`` dialogues over ``catalog`` (default: the bundled one); ``entity2id`` of its KG (built when omitted)."""
    if catalog is None:
        from catalog.catalog import load_bundled

        catalog = load_bundled()
    if entity2id is None:
        from catalog.kg_builder import build_kg

        entity2id = build_kg(catalog).entity2id
    gen = _Generator(catalog, entity2id)
    rng = random.Random(seed)
    return [gen.dialogue(f"syn{seed}-{i}", random.Random(rng.getrandbits(64))) for i in range(n)]


def synthetic_records(catalog=None, n: int = N_DIALOGUES, seed: int = 0, *, kg=None) -> list[Record]:
    """Records (one per system turn) of :func:`generate_dialogues`; ``kg``: a KGData of the catalog (optional)."""
    dialogues = generate_dialogues(catalog, n, seed, entity2id=kg.entity2id if kg is not None else None)
    return [r for d in dialogues for r in d.records()]


def dataset_records(
    kg_dir: str | os.PathLike, real: Iterable[Record], n: int, seed: int = 0, *, kg=None
) -> list[Record]:
    """Records of ``n`` synthetic dialogues over a dataset's own catalog (``id2info.json`` in ``kg_dir``, the iEvaLM
    layout), added to its real records when a small configuration trains on the dataset.

    The items a real conversation rarely names are the ones a synthetic dialogue should rarely recommend, so the
    catalog's popularity order is how many of the ``real`` records mention each item (context entities and
    targets; items never mentioned come last). Only the training records count: no test record leaks in.
    Measured (small KBRD, first 1,000 ReDial test records): Recall@10 .088–.091 trained on the 2,716 real
    ``redial_eval/valid`` records alone, .114 with 3,000 synthetic dialogues added (a popularity list: .072)."""
    from catalog.catalog import load_ievalm

    real = list(real)
    if n <= 0:
        return []
    folder = Path(kg_dir)
    if not (folder / "id2info.json").is_file():
        raise ValueError(f"{folder} has no id2info.json: synthetic dialogues need the dataset's item metadata")
    catalog = load_ievalm(folder)
    mentions: dict[str, int] = defaultdict(int)
    for r in real:
        for name in dict.fromkeys([*r.entity, *r.rec]):
            mentions[name] += 1

    def count(item) -> int:
        return mentions.get(str(item.extra.get("entity_name") or item.name), 0)

    order = sorted((i for i in catalog.items if count(i)), key=lambda i: -count(i))
    rank = {item.id: n + 1 for n, item in enumerate(order)}
    ranked = type(catalog)(
        [replace(i, popularity=rank.get(i.id)) for i in catalog.items], name=catalog.name, domain=catalog.domain
    )
    return synthetic_records(ranked, n, seed, kg=kg)


def describe(records: list[Record]) -> dict:
    """Counts for a manifest: records, dialogues, records with a target, distinct target items."""
    return {
        "generator": "crs_backends.neural.synthetic",
        "records": len(records),
        "dialogues": len({r.dialog_id for r in records}),
        "with_rec": sum(1 for r in records if r.rec),
        "items": len({n for r in records for n in r.rec}),
    }
