"""The three dialogue protocols: CoRE, iEvaLM free-form and iEvaLM attribute.

A *hit* is a target among the first ``hit_k`` items of a system turn's list (iEvaLM: top 50); it is
decided here, by code, never by the simulated user. Turns are counted in system turns.

* ``core`` (CoRE): 3 to 5 system turns. Once a target has been hit and at least 3 system turns have
  passed, the user accepts and the dialogue ends. A hit before turn 3 makes the user ask the system to
  tell more about that item (and, on the turn after, ask a follow-up question about it), so the judge
  sees enough system text; the dialogue then ends at turn 3. No hit in 5 turns ends it.
  (CoRE's "stop when the item was identified and three rounds have passed" read at session level.)
* ``free`` (iEvaLM free-form): at most 5 turns; the first hit ends the dialogue with the user's
  acceptance. Otherwise the user turns the suggestions down and gives another detail.
* ``attr`` (iEvaLM attribute): each round the system chooses to ask about an attribute (genre, actor,
  director; writer too for OpenDialKG) or to recommend; asking uses a fixed question and the user
  answers from the targets' metadata (templates, no model): the bare values, comma-separated
  ("comedy, drama"), or, when the targets have none, a fixed line saying there is no information and
  asking for another option, as iEvaLM's ``script/ask.py`` answers. A recommendation with a hit is
  accepted and ends the dialogue; otherwise the user says no. At most 5 rounds.

How a system chooses in ``attr`` mode: a system object with a ``choose_action(conversation, options)``
method decides itself; a system with an LLM client (``client``, e.g. ChatCRS) is asked with the option
letters scored by its own model; any other system follows the fixed policy "ask each attribute once,
in order, then recommend" (the choice's origin is stored on the turn as ``choice_by``). The model's
menu is iEvaLM's (appendix C.2.1): the full menu every round with letters fixed to the options (A-D,
A-E with the writer), a reminder of the letters already used with the instruction not to repeat them,
and only the unused letters scored (iEvaLM biases the allowed letters).

A system that raises on a turn ends the dialogue with status ``failed`` (the turns so far are kept).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

from catalog.catalog import Catalog
from crs_backends.base import CRSSystem
from evaluators.judge.persuasiveness import score_persuasiveness
from evaluators.metrics import DEFAULT_HIT_K
from evaluators.simulator.personas import list_overlap, sincerity
from evaluators.simulator.records import Case
from evaluators.simulator.user import SimulatedUser, SimulatorError
from llm_clients.base import LLMClient
from llm_clients.prompts import prompt
from llm_clients.types import LLMError
from storage.records import Conversation, ItemRef, Turn

log = logging.getLogger(__name__)

PROTOCOLS = ("core", "free", "attr")
RECOMMEND = "recommend"
LETTERS = "ABCDEFG"


@dataclass(frozen=True)
class Protocol:
    name: str
    min_turns: int
    max_turns: int
    hit_k: int = DEFAULT_HIT_K
    attributes: tuple[str, ...] = ("genre", "actor", "director")

    @classmethod
    def named(
        cls, name: str, *, hit_k: int = DEFAULT_HIT_K, writer: bool = False, max_turns: int | None = None
    ) -> Protocol:
        """The published settings; ``max_turns`` shortens (or lengthens) dialogues, e.g. for quick checks."""
        if name not in PROTOCOLS:
            raise ValueError(f"unknown protocol {name!r}; protocols: {', '.join(PROTOCOLS)}")
        if hit_k < 1:
            raise ValueError("hit_k must be at least 1")
        attributes = ("genre", "actor", "director", "writer") if writer else ("genre", "actor", "director")
        low, high = {"core": (3, 5), "free": (1, 5), "attr": (1, 5)}[name]
        if max_turns is not None:
            if max_turns < 1:
                raise ValueError("max_turns must be at least 1")
            high, low = max_turns, min(low, max_turns)
        return cls(name, low, high, hit_k=hit_k, attributes=attributes)

    def describe(self) -> dict:
        return {
            "name": self.name,
            "min_turns": self.min_turns,
            "max_turns": self.max_turns,
            "hit_k": self.hit_k,
            "attributes": list(self.attributes),
        }


@dataclass
class Outcome:
    """How one simulated dialogue went. ``status``: ``done``, ``failed`` (the system raised) or ``error``."""

    conversation: Conversation
    status: str = "done"
    stop_reason: str = ""  # hit | max_turns | system_failed | simulator_error
    first_hit_turn: int | None = None
    system_turns: int = 0
    error: str | None = None
    extra: dict = field(default_factory=dict)

    def result(self) -> dict:
        turns = self.conversation.turns
        leaks = [leak for t in turns if (leak := t.metadata.get("leak"))]
        return {
            "stop_reason": self.stop_reason,
            "first_hit_turn": self.first_hit_turn,
            "hit": self.first_hit_turn is not None,
            "system_turns": self.system_turns,
            "user_turns": sum(1 for t in turns if t.role == "user"),
            "leaks_regenerated": sum(1 for x in leaks if x.get("regenerated")),
            "leaks_redacted": sum(1 for x in leaks if x.get("redacted")),
            "leaks_dropped": sum(1 for x in leaks if x.get("dropped")),  # the ievalm seeker's dropped sentences
            "per_turn_lists": [[r.id for r in t.items] for t in turns if t.role == "system"],
            **self.extra,
        }


def _hits(turn: Turn, target_ids: set[str], k: int) -> list[ItemRef]:
    """The targets among the first ``k`` of what the system ranked (its whole ranking where it kept one)."""
    return [ref for ref in turn.ranked()[:k] if ref.id in target_ids]


def show_list(turn: Turn, k: int) -> None:
    """Show the seeker the system's top ``k`` on this turn, as iEvaLM does on the turn that hits and on the last.

    A hit is decided on the top ``k`` of the system's ranking (iEvaLM: 50), which is more than the reply names;
    iEvaLM puts that list before the reply on those turns, so its seeker has seen the item it accepts. The titles
    are kept on the turn (``seeker_list``) and the seeker's transcript shows them (:meth:`SimulatedUser.transcript`);
    on other turns the seeker sees only the items the reply showed."""
    turn.metadata["seeker_list"] = [ref.title for ref in turn.ranked()[:k]]


def _ask_system(system: CRSSystem, conversation: Conversation, number: int) -> Turn:
    turn = system.respond(conversation)
    if not isinstance(turn, Turn) or turn.role != "system":
        raise TypeError(f"{type(system).__name__}.respond returned {turn!r}, not a system Turn")
    turn.metadata = {**turn.metadata, "sim_turn": number}
    return turn


def run_dialogue(
    case: Case, system: CRSSystem, user: SimulatedUser, protocol: Protocol, *, conversation: Conversation
) -> Outcome:
    """Play one dialogue into ``conversation`` (history and targets already set). Never raises for a
    failing system (status ``failed``) or simulator (status ``error``)."""
    outcome = Outcome(conversation)
    history, opening = case.history_and_opening()
    conversation.history = history
    conversation.targets = [t.ref() for t in case.targets]
    try:
        if protocol.name == "attr":
            _attribute_dialogue(system, user, protocol, outcome, opening)
        else:
            _free_dialogue(system, user, protocol, outcome, opening)
    except SimulatorError as e:
        outcome.status, outcome.stop_reason, outcome.error = "error", "simulator_error", str(e)
    return outcome


def _system_turn(system: CRSSystem, outcome: Outcome, number: int) -> Turn | None:
    try:
        turn = _ask_system(system, outcome.conversation, number)
    except Exception as e:  # any fault of the system under test: the dialogue is marked failed
        log.warning("system %s failed on turn %d: %s", outcome.conversation.system_id, number, e)
        outcome.status, outcome.stop_reason = "failed", "system_failed"
        outcome.error = f"the system failed on turn {number}: {type(e).__name__}: {e}"
        return None
    outcome.conversation.turns.append(turn)
    outcome.system_turns = number
    return turn


def _free_dialogue(system, user: SimulatedUser, protocol: Protocol, outcome: Outcome, opening: Turn | None) -> None:
    conversation = outcome.conversation
    target_ids = {t.id for t in user.targets}
    conversation.turns.append(opening or user.say(conversation, "open"))
    asked_about: ItemRef | None = None
    for number in range(1, protocol.max_turns + 1):
        turn = _system_turn(system, outcome, number)
        if turn is None:
            return
        hits = _hits(turn, target_ids, protocol.hit_k)
        turn.metadata["hit"] = bool(hits)
        if hits or number == protocol.max_turns:
            show_list(turn, protocol.hit_k)
        if hits and outcome.first_hit_turn is None:
            outcome.first_hit_turn = number
        identified = outcome.first_hit_turn is not None
        if identified and (protocol.name == "free" or number >= protocol.min_turns):
            item = hits[0] if hits else asked_about
            assert item is not None, "a hit on an earlier turn always sets asked_about"
            conversation.turns.append(user.say(conversation, "accept", title=item.title, allowed={item.id}))
            outcome.stop_reason = "hit"
            return
        if number == protocol.max_turns:
            outcome.stop_reason = "max_turns"
            return
        if identified:  # core: a hit before the third turn
            if asked_about is None:
                asked_about = hits[0]
                reply = user.say(conversation, "tell_more", title=asked_about.title, allowed={asked_about.id})
            else:
                reply = user.say(conversation, "follow_up", title=asked_about.title, allowed={asked_about.id})
        elif turn.items:
            shown = ", ".join(r.title for r in turn.items[:3])
            reply = user.say(conversation, "reject", shown=shown)
        else:
            reply = user.say(conversation, "no_list")
        conversation.turns.append(reply)


# -- attribute mode -------------------------------------------------------------------------------


def _attribute_dialogue(
    system, user: SimulatedUser, protocol: Protocol, outcome: Outcome, opening: Turn | None
) -> None:
    conversation = outcome.conversation
    target_ids = {t.id for t in user.targets}
    conversation.turns.append(opening or user.template_turn("attr_opening"))
    asked: list[str] = []
    for number in range(1, protocol.max_turns + 1):
        options = [a for a in protocol.attributes if a not in asked] + [RECOMMEND]
        action, chooser = choose_action(system, conversation, protocol, options, asked, user.items_plural)
        if action != RECOMMEND:
            asked.append(action)
            conversation.turns.append(
                Turn(
                    role="system",
                    text=prompt("simulator", f"ask_{action}"),
                    metadata={
                        "sim_turn": number,
                        "action": "ask",
                        "attribute": action,
                        "choice_by": chooser,
                        "source": "template",
                    },
                )
            )
            outcome.system_turns = number
            conversation.turns.append(user.answer_attribute(action))
            if number == protocol.max_turns:
                outcome.stop_reason = "max_turns"
            continue
        turn = _system_turn(system, outcome, number)
        if turn is None:
            return
        turn.metadata.update({"action": "recommend", "choice_by": chooser})
        hits = _hits(turn, target_ids, protocol.hit_k)
        turn.metadata["hit"] = bool(hits)
        if hits:
            outcome.first_hit_turn = number
            conversation.turns.append(user.template_turn("attr_accept"))
            outcome.stop_reason = "hit"
            return
        if number == protocol.max_turns:
            outcome.stop_reason = "max_turns"
            return
        conversation.turns.append(user.template_turn("attr_reject"))


def choose_action(
    system, conversation: Conversation, protocol: Protocol, options: list[str], asked: list[str], items_plural: str
) -> tuple[str, str]:
    """The system's next move in attribute mode and who chose it (``system``, ``system-llm``, ``policy``)."""
    own = getattr(system, "choose_action", None)
    if callable(own):
        choice = own(conversation, list(options))
        if choice not in options:
            raise ValueError(f"{type(system).__name__}.choose_action returned {choice!r}, not one of {options}")
        return choice, "system"
    client = getattr(system, "client", None)
    if isinstance(client, LLMClient):
        try:
            menu = [*protocol.attributes, RECOMMEND]
            return _llm_choice(client, conversation, menu, options, items_plural), "system-llm"
        except LLMError as e:
            log.warning("attribute choice by the system's model failed (%s); the fixed policy decides", e)
            return options[0], "policy (model failed)"
    return options[0], "policy"


def _llm_choice(
    client: LLMClient, conversation: Conversation, menu: list[str], options: list[str], items_plural: str
) -> str:
    """The model's pick among ``options``, asked with the full ``menu`` under fixed letters (iEvaLM's attr menu).

    A letter stays with its option for the whole dialogue (A is always genre), the options already used
    are named by letter with the instruction not to repeat them, and only the open options' letters are
    scored, so a used one can never be chosen.
    """
    letters = LETTERS[: len(menu)]
    letter_of = dict(zip(menu, letters))
    used = [letter_of[o] for o in menu if o not in options]
    allowed = [letter_of[o] for o in options]
    lines = [
        f"{letter}: "
        + (
            prompt("simulator", "choice_recommend").format(items_plural=items_plural)
            if option == RECOMMEND
            else prompt("simulator", "choice_ask").format(attribute=option)
        )
        for letter, option in zip(letters, menu)
    ]
    transcript = "\n".join(f"{'User' if t.role == 'user' else 'You'}: {t.text}" for t in conversation.all_turns[-8:])
    messages = [
        {"role": "system", "content": prompt("simulator", "choice_system").format(items_plural=items_plural)},
        {
            "role": "user",
            "content": transcript
            + "\n\n"
            + prompt("simulator", "choice_menu").format(
                options="\n".join(lines), used=", ".join(used) or prompt("simulator", "nothing_asked")
            ),
        },
    ]
    dist = client.score(messages, allowed)
    best = max(allowed, key=lambda letter: dist.probs.get(letter, 0.0))
    return menu[letters.index(best)]


# -- after the dialogue -----------------------------------------------------------------------------


def persuasiveness(
    conversation: Conversation,
    client: LLMClient,
    mode: str,
    *,
    system: CRSSystem | None = None,
    variant: str = "shown",
) -> dict:
    """The simulated user's iEvaLM persuasiveness answer (0, 1 or 2), with the expected value under its
    distribution as the extra ``expected`` (probability mode).

    As iEvaLM runs it (appendix C.2.2), the user first asks ``system`` to explain its last recommendation
    and the answer to that request is what is judged. The request and the answer are kept in the result
    (``explanation_request``, ``explanation``) and never join the dialogue's turns, so neither recall nor
    the CoRE factors read them. Without a ``system`` (a stored conversation), the last system turn with a
    list stands in for the explanation, as before.

    An unreadable answer is recorded as an error with score None; ``retry`` says whether running again
    could help (the endpoint failed). A system that fails to explain is an error too, not a 0.

    ``variant`` is what the judge reads of the lists (:data:`evaluators.judge.persuasiveness.VARIANTS`):
    ``ievalm_released`` puts the top 50 before the reply of the turn iEvaLM stopped at, as its released script
    does; ``shown`` the items each reply showed.
    """
    request = explanation = None
    if system is not None:
        request = prompt("persuasiveness", "request")
        asked = replace(conversation, turns=[*conversation.turns, Turn("user", request)])
        try:
            answer = _ask_system(system, asked, len(conversation.turns) + 1)
        except Exception as e:  # the system under test failed: no explanation to judge
            log.warning("system %s failed to explain: %s", conversation.system_id, e)
            return {
                "score": None,
                "expected": None,
                "mode": mode,
                "distribution": None,
                "reading": None,
                "error": f"the system failed to explain its recommendation: {type(e).__name__}: {e}",
                "rationale": "",
                "explanation_request": request,
                "explanation": None,
                "retry": False,
            }
        explanation = answer.text.strip() or "(the system gave no explanation)"
    result = score_persuasiveness(conversation, client, mode=mode, explanation=explanation, variant=variant)
    return {
        "score": result.score,
        "expected": result.expected,
        "mode": mode,
        "variant": result.variant,
        "distribution": result.distribution,
        "reading": result.reading,
        "error": result.error,
        "rationale": result.rationale[:500],
        "explanation_request": request,
        "explanation": result.explanation[:2000],
        "retry": bool(result.error and "model call failed" in result.error),
    }


def reliability_probe(system: CRSSystem, user: SimulatedUser, conversation: Conversation, *, k: int = 10) -> dict:
    """CONCEPT reliability: the first user request paraphrased and sent again with the same history; the
    overlap of the two lists. Errors are recorded, never raised."""
    turns = conversation.turns
    index = next(
        (
            i
            for i in range(len(turns) - 1)
            if turns[i].role == "user" and turns[i + 1].role == "system" and turns[i + 1].items
        ),
        None,
    )
    if index is None:
        return {"error": "no user request followed by a recommendation list"}
    original = turns[index]
    try:
        text = user.paraphrase(original.text, index)
    except SimulatorError as e:
        return {"error": str(e), "retry": True}
    probe = Conversation(
        system_id=conversation.system_id,
        source="simulation",
        history=list(conversation.history),
        turns=[*turns[:index], Turn(role="user", text=text)],
        targets=list(conversation.targets),
    )
    try:
        second = _ask_system(system, probe, index // 2 + 1)
    except Exception as e:
        return {"error": f"the system failed on the paraphrase: {type(e).__name__}: {e}"}
    return {
        "turn": index,
        "original": original.text,
        "paraphrase": text,
        "second_list": [r.id for r in second.items],
        **list_overlap(turns[index + 1].items, second.items, k=k),
    }


def sincerity_signal(conversation: Conversation, case: Case, catalog: Catalog, k: int) -> dict:
    """CONCEPT sincerity over the interaction (the dataset's own utterances are not the simulated user's)."""
    spoken = [t for t in conversation.turns if t.metadata.get("source") != "dataset"]
    return sincerity(spoken, case.targets, catalog, k=k)
