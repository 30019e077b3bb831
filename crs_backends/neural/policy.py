"""How a neural CRS turns its model's outputs into the reply a person reads.

Three named policies:

``crs_arena_exact`` (the default for the published checkpoints) and ``crs_arena`` (its clean variant, the default
for the small local versions)
    CRS Arena's serving logic, written from a reading of iai-group/iEvaLM-CRS
    ``crs_arena/crs_fighter.py`` (how the conversation is handed over) and ``src/model/{KBRD,BARCOR,
    UNICRS}.py`` (``get_response``). Each turn the model generates its reply, then *chooses* between the
    options of iEvaLM's attribute mode (``src/model/utils.py: get_options``: for ReDial A genre, B actor,
    C director, D recommend; OpenDialKG adds D writer and E recommend) by the scores its conversation
    model gives the option letters, plus a per-conversation state. The chosen option is penalised by
    -1e5 (KBRD and UniCRS add it, BARCOR sets it), so each option is taken about once per cycle. When the
    last option (recommend) wins, the reply is the fixed list template with the top 3 of the model's own
    ranking over its dataset's item set, by KG entity name; otherwise it is the generated text as the
    model produced it (UniCRS: the movie placeholder filled with the ranking in order).

    ``crs_arena_exact`` also reproduces what CRS Arena's serving code did to the input, quirks included (each is
    cited where :mod:`crs_backends.neural.system` and the model files do it): the newest user message is given
    twice (``crs_arena/arena.py`` stores it in the history before ``crs_fighter.py`` appends it again), messages
    go in as typed, only UniCRS fills its placeholder and strips its reply, and UniCRS generates over its
    left-padded input with positions counted from 0 across the padding (its model file under transformers 4.28).
    ``crs_arena`` sends each message once, as iEvaLM's own evaluation builds its contexts (``''`` first when the
    system spoke first), runs each model with the positions it was trained with, and fills every model's
    placeholder (the small versions write ``<movie>`` as UniCRS does); these are the published models without the
    serving quirks. Under both an empty generation is shown empty, as CRS Arena showed it, and the turn says so.

``enhanced``
    Our earlier adapter: every turn generates, fills slots with the top items of the chat catalog and
    repairs empty slots, and shows a top-10 list beside the reply.

Every turn records which policy ran, the option scores, the state before and after, and the choice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

EXACT = "crs_arena_exact"
CLEAN = "crs_arena"
POLICIES = (EXACT, CLEAN, "enhanced")
DEFAULT_POLICY = CLEAN  # the small local versions (trained on contexts built like iEvaLM's)
PUBLISHED_POLICY = EXACT  # the published checkpoints: what CRS Arena's people saw
PENALTY = -1e5
LIST_SIZE = 3  # get_response lists recommended_items[0][:3]
LIST_HEADER = "I would recommend the following items:  \n"

# iEvaLM get_options: (letter, attribute); the last one is "recommend"
OPTIONS: dict[str, tuple[tuple[str, str], ...]] = {
    "redial": (("A", "genre"), ("B", "actor"), ("C", "director"), ("D", "recommend")),
    "opendialkg": (("A", "genre"), ("B", "actor"), ("C", "director"), ("D", "writer"), ("E", "recommend")),
}


def options_for(dataset: str) -> tuple[tuple[str, str], ...]:
    """The option menu of a dataset (``get_options`` matches by substring; anything else is a movie set
    like ReDial, which is what our small local versions are)."""
    return OPTIONS["opendialkg"] if "opendialkg" in (dataset or "") else OPTIONS["redial"]


def check_policy(name: str) -> str:
    name = (name or DEFAULT_POLICY).strip().lower()
    if name not in POLICIES:
        raise ValueError(f"unknown reply policy {name!r}; known: {', '.join(POLICIES)}")
    return name


def default_policy(small: bool) -> str:
    """The policy a set answers with when none is asked for: the published checkpoints as CRS Arena served them,
    the small local versions with the clean variant."""
    return DEFAULT_POLICY if small else PUBLISHED_POLICY


@dataclass
class Choice:
    """One turn's option choice: what the model scored, the state it saw and left, what it chose."""

    letters: list[str]
    attributes: list[str]
    scores: list[float]
    state_before: list[float]
    state_after: list[float] = field(default_factory=list)
    index: int = 0

    @property
    def letter(self) -> str:
        return self.letters[self.index]

    @property
    def attribute(self) -> str:
        return self.attributes[self.index]

    @property
    def recommend(self) -> bool:
        return self.index == len(self.letters) - 1

    def record(self) -> dict:
        return {
            "letter": self.letter,
            "option": self.attribute,
            "scores": dict(zip(self.letters, self.scores)),
            "state_before": list(self.state_before),
            "state_after": list(self.state_after),
        }


def choose(scores: list[float], state: list[float] | None, dataset: str, rule: str = "add") -> Choice:
    """``get_choice`` + the state update of ``get_response``: argmax of scores + state; then the chosen
    option's state gets -1e5 added (``rule="add"``: KBRD, UniCRS) or set (``rule="set"``: BARCOR).

    The sum is taken in float32, as ``get_choice`` adds ``torch.as_tensor(state)`` to the float32 logits
    (``src/model/{KBRD,UNICRS}.py`` L269/L429; ``BARCOR.py`` L250 casts to the logits' dtype): once an option
    carries -1e5, float32 keeps about 0.008 of its score, so near-ties break as they broke there. The state
    itself stays a list of Python floats, as ``get_response`` keeps it."""
    menu = options_for(dataset)
    letters = [letter for letter, _ in menu]
    if len(scores) != len(letters):
        raise ValueError(f"{len(scores)} option scores for {len(letters)} options")
    # crs_fighter.reply: a missing state, or one of another length, starts again at zeros
    before = [float(s) for s in state] if state is not None and len(state) == len(letters) else [0.0] * len(letters)
    totals = (np.asarray(scores, dtype=np.float32) + np.asarray(before, dtype=np.float32)).tolist()
    index = max(range(len(totals)), key=totals.__getitem__)  # torch.argmax: the first maximum
    after = list(before)
    after[index] = after[index] + PENALTY if rule == "add" else PENALTY
    return Choice(
        letters=letters,
        attributes=[a for _, a in menu],
        scores=[float(s) for s in scores],
        state_before=before,
        state_after=after,
        index=index,
    )


def list_reply(names: list[str]) -> str:
    """The fixed recommendation template of ``get_response``, top 3, Markdown line breaks as published."""
    lines = "".join(f"{i + 1}: {name}  \n" for i, name in enumerate(names[:LIST_SIZE]))
    return LIST_HEADER + lines


def fill_placeholders(text: str, token: str, names: list[str]) -> str:
    """UniCRS ``get_response``: each occurrence of ``token`` in turn becomes the next ranked name; when the
    ranking runs out, the occurrence is removed (as the published IndexError branch does)."""
    if not token:
        return text
    for i in range(text.count(token)):
        text = text.replace(token, names[i] if i < len(names) else "", 1)
    return text


def previous_state(turns, system_id: str) -> list[float] | None:
    """The option state the last system turn of this system left (``None``: start at zeros)."""
    for turn in reversed(list(turns)):
        if turn.role != "system":
            continue
        meta = turn.metadata or {}
        if meta.get("system") not in (None, system_id):
            return None
        choice = meta.get("choice") or {}
        state = choice.get("state_after") if isinstance(choice, dict) else None
        if isinstance(state, list) and all(isinstance(v, (int, float)) for v in state):
            return [float(v) for v in state]
        return None
    return None
