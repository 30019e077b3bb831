"""The simulated user: an LLM that wants known target items and talks to a system without naming them.

It knows its targets' catalog metadata (genres, year, director, cast, writers, plot) and, when a
persona is given, writes in that persona's style. Each message is produced for one *situation*
(open the dialogue, turn suggestions down, ask about a suggested target, accept it …) chosen by the
protocol, which decides hits by code — the model only phrases them.

Leaks: a message that names a target the system has not itself recommended (fuzzy match ≥ 90, see
:mod:`evaluators.simulator.leaks`) is regenerated once with a reminder; if the new message leaks too,
its titles are replaced by ``[title withheld]``. Both events are recorded on the turn
(``metadata["leak"]``) and counted by the batch report. An empty answer is asked for once more with
another seed; a second empty answer is an error (:class:`SimulatorError`), never an empty turn.

Attribute mode (iEvaLM "attr") uses no model for the user: answers are templates filled with the
targets' attribute values.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from catalog.items import Item
from evaluators.simulator.leaks import find_leaks, redact
from evaluators.simulator.personas import Persona
from llm_clients.base import LLMClient
from llm_clients.prompts import prompt, prompts_version
from llm_clients.types import LLMError
from storage.records import Conversation, Turn

SITUATIONS = ("open", "reject", "no_list", "tell_more", "follow_up", "accept")
ATTRIBUTES = ("genre", "actor", "director", "writer")
LIST_SHOWN = 5  # items of a system list the simulated user is shown
TRANSCRIPT_TURNS = 10  # the most recent turns (history included) the simulated user is shown
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
        max_tokens: int = 80,
        domain: str = "movies",
    ):
        self.client = client
        self.targets = tuple(targets)
        if not self.targets:
            raise ValueError("a simulated user needs at least one target item")
        self.persona = persona
        self.seed = seed
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.items_plural = domain or "movies"
        self.leaks = {"regenerated": 0, "redacted": 0}

    @property
    def prompts_version(self) -> str:
        return prompts_version("simulator")

    # -- the prompt ------------------------------------------------------------------------

    def system_prompt(self) -> str:
        profile = "\n".join(
            prompt("simulator", "profile_item").format(n=n, description=describe_item(item, self.items_plural))
            for n, item in enumerate(self.targets, 1)
        )
        persona = ""
        if self.persona is not None:
            emotion, age = self.persona.texts()
            persona = prompt("simulator", "persona").format(emotion=emotion, age=age)
        return (
            prompt("simulator", "system")
            .format(items_plural=self.items_plural, profile=profile, persona=persona)
            .strip()
        )

    def transcript(self, conversation: Conversation) -> str:
        lines = []
        for turn in conversation.all_turns[-TRANSCRIPT_TURNS:]:
            lines.append(f"{'You' if turn.role == 'user' else 'Recommender'}: {turn.text}")
            if turn.role == "system" and turn.items:
                lines.append("[Recommender's list: " + ", ".join(r.title for r in turn.items[:LIST_SHOWN]) + "]")
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
        metadata: dict = {"source": "simulator", "situation": situation}
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
        values = self.attribute_values(attribute)
        if not values:
            text = prompt("simulator", "answer_unknown")
        else:
            joined = values[0] if len(values) == 1 else ", ".join(values[:-1]) + " and " + values[-1]
            text = prompt("simulator", f"answer_{attribute}").format(values=joined)
        return Turn(
            role="user", text=text, metadata={"source": "template", "attribute": attribute, "known": bool(values)}
        )

    @staticmethod
    def template_turn(name: str) -> Turn:
        return Turn(role="user", text=prompt("simulator", name), metadata={"source": "template", "template": name})
