"""The simulated user: an LLM that wants known target items and talks to a system without naming them.

Each message is produced for one *situation* (open the dialogue, turn suggestions down, ask about a
suggested target, accept it …) chosen by the protocol, which decides hits by code — the model only
phrases them. When a persona is given, the user writes in that persona's style. Two seekers
(:data:`SEEKERS`):

* ``ievalm`` (the default; iEvaLM appendix C.3 and its released ``chat.py``, CoRE §6.4 "the ground
  truth item [is] provided"): the instruction names the target items ("Your target items: …"), the
  user reads the whole conversation, answers in at most 128 tokens, and a leak is handled as iEvaLM
  handles it: every sentence naming a target (rapidfuzz ``partial_ratio`` > 90 with the title, with
  and without its year) is dropped, and until a hit the answer starts with "Sorry, "
  (:func:`ievalm_filter`). The dropped sentences are kept on the turn (``metadata["leak"]``).
* ``described`` (this project's leak-safe variant, answering SimpleUserSim's finding that a seeker
  told the titles leaks them): the user knows its targets only by catalog metadata (genres, year,
  director, cast, writers, plot), reads the last :data:`TRANSCRIPT_TURNS` turns and answers in at most
  80 tokens; a message that names a target the system has not itself recommended (fuzzy match ≥ 90,
  see :mod:`evaluators.simulator.leaks`) is regenerated once with a reminder; if the new message leaks
  too, its titles are replaced by ``[title withheld]``.

Leak events are recorded on the turn (``metadata["leak"]``) and counted by the batch report. An empty
answer is asked for once more with another seed; a second empty answer is an error
(:class:`SimulatorError`), never an empty turn.

Attribute mode (iEvaLM "attr") uses no model for the user: answers are templates filled with the
targets' attribute values.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from catalog.items import Item
from evaluators.simulator.leaks import find_leaks, ievalm_filter, redact
from evaluators.simulator.personas import Persona
from llm_clients.base import LLMClient
from llm_clients.prompts import prompt, prompts_version
from llm_clients.types import LLMError
from storage.records import Conversation, Turn

SITUATIONS = ("open", "reject", "no_list", "tell_more", "follow_up", "accept")
NOT_YET = ("reject", "no_list")  # answers to a system turn without a hit: iEvaLM's seeker starts them "Sorry, "


class Seeker:
    """What one seeker variant knows and how it is run (see the module docstring)."""

    def __init__(self, name: str, *, names_targets: bool, transcript_turns: int | None, max_tokens: int):
        self.name = name
        self.names_targets = names_targets
        self.transcript_turns = transcript_turns  # None: the whole conversation
        self.max_tokens = max_tokens


SEEKERS = {
    "ievalm": Seeker("ievalm", names_targets=True, transcript_turns=None, max_tokens=128),
    "described": Seeker("described", names_targets=False, transcript_turns=10, max_tokens=80),
}
TRANSCRIPT_TURNS = SEEKERS["described"].transcript_turns  # the most recent turns the described seeker reads
DEFAULT_SEEKER = "ievalm"
ATTRIBUTES = ("genre", "actor", "director", "writer")
LIST_SHOWN = 5  # items of a system list the simulated user is shown
PLOT_CHARS = 320
MAX_MESSAGE_CHARS = 600
STOP = ["\nRecommender:", "\nYou:", "\nUser:"]  # a model that starts writing the next line of the transcript stops
_LABEL = re.compile(r"^\s*(?:you|user|me|seeker|person|human)\s*:\s*", re.IGNORECASE)
_OTHER_SPEAKER = re.compile(r"^\s*(?:recommender|system|assistant|chatbot)\s*:", re.IGNORECASE | re.MULTILINE)


class SimulatorError(Exception):
    """The simulated user could not produce a usable message (its model failed or answered nothing)."""


def turn_seed(*parts: object) -> int:
    """A stable 31-bit seed from any parts (seed, case id, turn number …)."""
    return int(hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()[:8], 16) & 0x7FFFFFFF


def describe_item(item: Item, domain: str = "movies") -> str:
    """What the user knows about one target, without its title. The kind of item comes from the
    domain (``item_kind_<domain>`` in the simulator prompts: a film, a book …; "item" otherwise)."""
    genres = ", ".join(g.lower() for g in item.genres[:4]) or "no particular genre"
    try:
        noun = prompt("simulator", f"item_kind_{domain.strip().lower()}")
    except KeyError:
        noun = prompt("simulator", "item_kind")
    parts = [f"a {item.year} {noun} ({genres})" if item.year else f"a {noun} ({genres})"]
    if item.directors:
        parts.append("directed by " + ", ".join(item.directors[:2]))
    if item.cast:
        parts.append("starring " + ", ".join(item.cast[:3]))
    if item.writers:
        parts.append("written by " + ", ".join(item.writers[:2]))
    text = "; ".join(parts) + "."
    if item.description:
        plot = item.description.strip()
        if len(plot) > PLOT_CHARS:
            plot = plot[:PLOT_CHARS].rsplit(" ", 1)[0] + " …"
        text += f" What it is about: {plot}"
    return text


def clean_message(text: str) -> str:
    """The message alone: no speaker label, nothing after a line the model wrote for the other side."""
    cut = _OTHER_SPEAKER.search(text)
    if cut:
        text = text[: cut.start()]
    text = _LABEL.sub("", text.strip())
    text = " ".join(text.split())
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'“”":
        text = text[1:-1].strip()
    text = text.strip('“”"').strip()
    return text[:MAX_MESSAGE_CHARS]


def seen_titles(turn: Turn) -> list[str]:
    """The titles of a system turn the simulated user has seen: the top of the system's ranking where the
    protocol showed it (``seeker_list``: the turn that hits, the last turn, as iEvaLM shows its top 50),
    else the first :data:`LIST_SHOWN` items the reply showed."""
    listed = turn.metadata.get("seeker_list")
    if isinstance(listed, list) and listed:
        return [str(t) for t in listed]
    return [r.title for r in turn.items[:LIST_SHOWN]]


class SimulatedUser:
    """One simulated user with its targets (and optional persona), for one dialogue.

    :param client: the simulator role's model
    :param targets: the catalog items the user wants
    :param seed: base seed; each message's seed is derived from it and the turn number
    :param temperature: sampling temperature (iEvaLM used 0)
    """

    def __init__(
        self,
        client: LLMClient | None,
        targets: Iterable[Item],
        *,
        persona: Persona | None = None,
        seed: int = 0,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        domain: str = "movies",
        seeker: str = DEFAULT_SEEKER,
    ):
        if seeker not in SEEKERS:
            raise ValueError(f"unknown seeker {seeker!r}; seekers: {', '.join(SEEKERS)}")
        self.client = client
        self.targets = tuple(targets)
        if not self.targets:
            raise ValueError("a simulated user needs at least one target item")
        self.persona = persona
        self.seed = seed
        self.temperature = temperature
        self.seeker = SEEKERS[seeker]
        self.max_tokens = max_tokens if max_tokens is not None else self.seeker.max_tokens
        self.items_plural = domain or "movies"
        self.leaks = {"regenerated": 0, "redacted": 0, "dropped": 0}

    @property
    def prompts_version(self) -> str:
        return prompts_version("simulator")

    # -- the prompt ------------------------------------------------------------------------

    def system_prompt(self) -> str:
        persona = ""
        if self.persona is not None:
            emotion, age = self.persona.texts()
            persona = prompt("simulator", "persona").format(emotion=emotion, age=age)
        if self.seeker.names_targets:
            titles = ", ".join(item.name for item in self.targets)
            return (
                prompt("simulator", "system_ievalm")
                .format(items_plural=self.items_plural, targets=titles, persona=persona)
                .strip()
            )
        profile = "\n".join(
            prompt("simulator", "profile_item").format(n=n, description=describe_item(item, self.items_plural))
            for n, item in enumerate(self.targets, 1)
        )
        return (
            prompt("simulator", "system")
            .format(items_plural=self.items_plural, profile=profile, persona=persona)
            .strip()
        )

    def transcript(self, conversation: Conversation) -> str:
        lines = []
        window = self.seeker.transcript_turns
        for turn in conversation.all_turns[-window:] if window else conversation.all_turns:
            lines.append(f"{'You' if turn.role == 'user' else 'Recommender'}: {turn.text}")
            if turn.role == "system":
                shown = seen_titles(turn)
                if shown:
                    lines.append(prompt("simulator", "list_shown").format(titles=", ".join(shown)))
        return "\n".join(lines)

    def messages(self, conversation: Conversation, situation: str, **slots) -> list[dict]:
        if situation not in SITUATIONS:
            raise ValueError(f"unknown situation {situation!r}")
        context = (
            prompt("simulator", "conversation").format(transcript=self.transcript(conversation))
            if conversation.all_turns
            else prompt("simulator", "empty_conversation")
        )
        instruction = prompt("simulator", f"situation_{situation}").format(items_plural=self.items_plural, **slots)
        user = "\n\n".join([context, instruction, prompt("simulator", "answer_only")])
        return [{"role": "system", "content": self.system_prompt()}, {"role": "user", "content": user}]

    # -- speaking ----------------------------------------------------------------------------

    def say(self, conversation: Conversation, situation: str, *, allowed: Iterable[str] = (), **slots) -> Turn:
        """The user's next turn for ``situation``; targets in ``allowed`` (ids) may be named.

        :raises SimulatorError: the model failed, or answered nothing twice
        """
        number = len(conversation.turns)
        messages = self.messages(conversation, situation, **slots)
        text = self._generate(messages, number, 0)
        forbidden = [t for t in self.targets if t.id not in set(allowed)]
        metadata: dict = {"source": "simulator", "situation": situation, "seeker": self.seeker.name}
        if self.seeker.names_targets:
            # iEvaLM: drop what names a target, and say "Sorry, " while no target has been recommended
            raw = text
            text, dropped = ievalm_filter(raw, forbidden, sorry=situation in NOT_YET)
            if dropped:
                self.leaks["dropped"] += 1
                metadata["leak"] = {"titles": sorted({t for _, t in dropped}), "dropped": [x for x, _ in dropped]}
            if not text:  # every sentence named a target: iEvaLM would send nothing, we never send an empty turn
                text = redact(raw, find_leaks(raw, forbidden)) or prompt("simulator", "answer_unknown")
                metadata["leak"]["redacted"] = True
            return Turn(role="user", text=text, metadata=metadata)
        leaks = find_leaks(text, forbidden)
        if leaks:
            self.leaks["regenerated"] += 1
            metadata["leak"] = {
                "titles": sorted({leak.title for leak in leaks}),
                "regenerated": True,
                "redacted": False,
            }
            retry = [
                *messages,
                {"role": "assistant", "content": text},
                {"role": "user", "content": prompt("simulator", "regenerate")},
            ]
            try:
                second = self._generate(retry, number, 1)
            except SimulatorError:
                second = text  # keep the first answer; it is redacted below
            again = find_leaks(second, forbidden)
            if again:
                self.leaks["redacted"] += 1
                metadata["leak"]["redacted"] = True
                second = redact(second, again)
            text = second
        return Turn(role="user", text=text, metadata=metadata)

    def paraphrase(self, text: str, number: int) -> str:
        """The same request in other words (for the reliability probe); target titles redacted."""
        messages = [
            {"role": "system", "content": prompt("simulator", "paraphrase_system")},
            {"role": "user", "content": prompt("simulator", "paraphrase").format(text=text)},
        ]
        out = self._generate(messages, number, 7)
        leaks = find_leaks(out, self.targets)
        return redact(out, leaks) if leaks else out

    def _generate(self, messages: list[dict], number: int, attempt: int) -> str:
        if self.client is None:
            raise SimulatorError("this simulated user has no model (attribute mode uses templates only)")
        for retry in range(2):  # a second try with another seed when the answer is empty
            try:
                completion = self.client.chat(
                    messages,
                    temperature=self.temperature if retry == 0 else max(self.temperature, 0.7),
                    max_tokens=self.max_tokens,
                    seed=turn_seed(self.seed, number, attempt, retry),
                    stop=STOP,
                )
            except LLMError as e:
                raise SimulatorError(f"simulator model failed: {e}") from e
            text = clean_message(completion.text)
            if text:
                return text
        raise SimulatorError("the simulator answered with an empty message twice")

    # -- attribute mode (templates) ----------------------------------------------------------------

    def attribute_values(self, attribute: str) -> list[str]:
        """The targets' values of ``attribute`` (genre, actor, director, writer), first seen first."""
        field = {"genre": "genres", "actor": "cast", "director": "directors", "writer": "writers"}[attribute]
        per_item = 4 if attribute == "genre" else 3
        values: dict[str, None] = {}
        for item in self.targets:
            for value in getattr(item, field)[:per_item]:
                values.setdefault(value.lower() if attribute == "genre" else value, None)
        return list(values)

    def answer_attribute(self, attribute: str) -> Turn:
        """iEvaLM's attr answer (``script/ask.py``): the targets' values alone, joined by ", ", or a fixed
        no-information line that asks the system to choose another option."""
        values = self.attribute_values(attribute)
        text = ", ".join(values) if values else prompt("simulator", "answer_unknown")
        return Turn(
            role="user", text=text, metadata={"source": "template", "attribute": attribute, "known": bool(values)}
        )

    @staticmethod
    def template_turn(name: str) -> Turn:
        return Turn(role="user", text=prompt("simulator", name), metadata={"source": "template", "template": name})
