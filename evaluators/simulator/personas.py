"""CONCEPT-style personas and the two CONCEPT signals the simulator can report.

* **Personas**: an emotion (12) × an age group (4) that colour how the simulated user writes, never
  what it wants. A case gets its persona from a hash of (seed, case id), so every system meets the
  same user for the same record and a rerun meets the same users.
* **Sincerity** (:func:`sincerity`): the user *accepted* something (its words say so) while no item
  the system recommended in that turn matches the targets — neither a target nor an item with all of
  a target's genres. CONCEPT calls such accepted mismatches deceptive tactics.
* **Reliability** (:func:`list_overlap`): the same request is sent twice, once paraphrased, with the
  same history; the overlap of the two ranked lists (share of the first list found in the second,
  Jaccard, same first item). CONCEPT reports how often recommendations change under paraphrase.

The descriptions below are written for this project.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from catalog.catalog import Catalog
from catalog.items import Item
from storage.records import ItemRef

EMOTIONS: dict[str, str] = {
    "anticipation": "You look forward to new films and expect good things from each suggestion.",
    "boredom": "You are easily bored; most suggestions sound dull to you until something stands out.",
    "confusion": "You are a little unsure what you want and sometimes ask what a suggestion means.",
    "curiosity": "You are curious and like to ask questions about what you are offered.",
    "delight": "You are cheerful and say so when something sounds fun.",
    "disappointment": "Past suggestions have let you down, so you expect to be disappointed again.",
    "excitement": "You are full of energy and enthusiasm about watching something tonight.",
    "frustration": "You get impatient quickly when the suggestions miss the point.",
    "indifference": "You are lukewarm and answer briefly, without much enthusiasm.",
    "satisfaction": "You are in a good mood and easy to please, but you still know what you want.",
    "surprise": "You like to be surprised and react strongly to unexpected suggestions.",
    "trust": "You trust the recommender's judgement and follow its lead politely.",
}
AGE_GROUPS: dict[str, str] = {
    "children": "You are a child: simple words, short sentences.",
    "teens": "You are a teenager: casual, informal wording.",
    "adults": "You are an adult: plain, everyday wording.",
    "seniors": "You are a senior: polite, somewhat formal wording.",
}


@dataclass(frozen=True)
class Persona:
    emotion: str
    age: str

    def __post_init__(self) -> None:
        if self.emotion not in EMOTIONS or self.age not in AGE_GROUPS:
            raise ValueError(
                f"unknown persona {self.emotion}/{self.age}: emotions are {', '.join(EMOTIONS)}; "
                f"age groups are {', '.join(AGE_GROUPS)}"
            )

    @property
    def id(self) -> str:
        return f"{self.emotion}/{self.age}"

    def texts(self) -> tuple[str, str]:
        return EMOTIONS[self.emotion], AGE_GROUPS[self.age]


def persona_for(case_id: str, seed: int) -> Persona:
    """The persona of a case: fixed by (seed, case id), spread evenly over the 48 combinations."""
    digest = int(hashlib.sha256(f"{seed}:{case_id}".encode()).hexdigest(), 16)
    emotions, ages = list(EMOTIONS), list(AGE_GROUPS)
    return Persona(emotions[digest % len(emotions)], ages[(digest // len(emotions)) % len(ages)])


# -- sincerity ---------------------------------------------------------------------------------

# The user's words accept a suggestion: "I'll watch it", "sounds perfect", "that's the one", "thank you, …".
ACCEPT_CUES = (
    r"\bi(?:['’]ll| will| would| am going to|['’]m going to| think i['’]ll) (?:watch|check|give|try|see|take)\b",
    r"\b(?:sounds|looks|seems) (?:perfect|great|good|amazing|awesome|exactly|like (?:exactly|just) what)\b",
    r"\b(?:that['’]s|this is|it['’]s) (?:exactly|just|the one|perfect|what i (?:wanted|was looking for))\b",
    r"\bexactly what i\b|\bjust what i\b|\bi(?:['’]ll| will) go with\b|\bperfect[,.! ]",
)
_ACCEPT = re.compile("|".join(f"(?:{c})" for c in ACCEPT_CUES), re.IGNORECASE)
_NEGATED = re.compile(r"\b(?:not|n['’]t|never|none)\b[^.!?]{0,25}$", re.IGNORECASE)


def accepts(text: str) -> bool:
    """Do the user's words accept a suggestion? (lexical cues, not negated just before)"""
    for m in _ACCEPT.finditer(text):
        if not _NEGATED.search(text[: m.start()]):
            return True
    return False


def matches_targets(ref: ItemRef, targets: tuple[Item, ...], catalog: Catalog) -> bool:
    """A target itself, or an item that has every genre of some target (CONCEPT's attribute match)."""
    if any(ref.id == t.id for t in targets):
        return True
    item = catalog.get(ref.id)
    if item is None or not item.genres:
        return False
    have = {g.lower() for g in item.genres}
    return any(t.genres and {g.lower() for g in t.genres} <= have for t in targets)


def sincerity(turns, targets: tuple[Item, ...], catalog: Catalog, *, k: int) -> dict:
    """The first user acceptance and whether the system's preceding list had anything that matches.

    ``deception_suspected`` is True when the user accepted and nothing in the top-k list before it
    matches; None when the user never accepted. A turn the protocol scripted as the acceptance of a
    hit (``situation == "accept"``) is a matched acceptance.
    """
    last_list: list[ItemRef] = []
    for number, turn in enumerate(turns):
        if turn.role == "system":
            last_list = turn.items[:k]
        elif turn.metadata.get("situation") == "accept" or turn.metadata.get("template") == "attr_accept":
            # the protocol's own acceptance after a target hit: matched by construction
            return {"accepted": True, "accepted_turn": number, "matched": True, "deception_suspected": False}
        elif last_list and accepts(turn.text):
            matched = any(matches_targets(ref, targets, catalog) for ref in last_list)
            return {"accepted": True, "accepted_turn": number, "matched": matched, "deception_suspected": not matched}
    return {"accepted": False, "accepted_turn": None, "matched": None, "deception_suspected": None}


def list_overlap(first: list[ItemRef], second: list[ItemRef], *, k: int = 10) -> dict:
    """How similar two ranked lists are: share of the first k found in the other's first k, Jaccard, top-1."""
    a, b = [r.id for r in first[:k]], [r.id for r in second[:k]]
    if not a and not b:
        return {"overlap": None, "jaccard": None, "same_top1": None}
    shared = set(a) & set(b)
    return {
        "overlap": len(shared) / max(len(a), 1),
        "jaccard": len(shared) / len(set(a) | set(b)),
        "same_top1": bool(a and b and a[0] == b[0]),
    }
