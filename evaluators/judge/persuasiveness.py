"""iEvaLM persuasiveness: would the user accept the last recommendation after its explanation?

After the dialogue an LLM, speaking as the user, reads the conversation, the system's explanation
of its last recommendation and, when known, the target items, and answers 0, 1 or 2. With targets
the rules are iEvaLM's (appendix C.4), in its order: 2 when the explanation mentions a target; else
0 when the recommended items are worse than the targets; else 1 when they are comparable; else 2
when they are better. Without targets (not in iEvaLM) the user judges against the wishes it
expressed, on the same 0/1/2 scale.

The score is the **integer answer**, as iEvaLM scores it (it reports the mean of the 0/1/2 answers
over examples). Two modes:

* ``probability``: ``client.score`` over "0", "1", "2", read at the answer token
  (:mod:`llm_clients.probability`). The score is the answer the model wrote (the greedy answer; where no
  answer was written, as with the embedded model's logits or sampling, the most probable option);
  the expected value under the distribution is kept as the extra field ``expected``, and the
  distribution too. iEvaLM's released code forces the answer onto these three tokens with a logit
  bias and takes it; reading the probabilities is our addition.
* ``reasoned``: the model explains first and ends with ``<score>N</score>``; one repair request
  follows an answer without that tag. An answer that still cannot be read is an error (score None),
  never a 0.

What the judge reads of the recommender's lists (``variant``):

* ``shown`` (default): each system turn's text, then the items it showed (at most :data:`LIST_SHOWN`).
* ``ievalm_released``: iEvaLM's released code (iai-group/iEvaLM-CRS at b33b8b3, ``script/chat.py`` L341-346)
  puts ``"I would recommend the following items: 1: …\n…50: …\n:"`` — the recommender's whole top 50 — in front
  of the recommender's text on the turn that succeeds (a target in its top 50), or on the last turn when none
  does. The turn iEvaLM would have stopped at (:func:`evaluators.metrics.final_list`'s turn) reads so here,
  its explanation too when no other is given; so the rule "2 when the explanation mentions a target" fires on
  most successes. Every result says which variant produced it (``Persuasiveness.variant``).

Which explanation: ``explanation`` when the caller has one (iEvaLM asks the system to explain its
last recommendation after the dialogue); otherwise the text of the last system turn that carries a
list, or of the last system turn if none does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from evaluators.judge.inputs import escape_data
from llm_clients.base import LLMClient
from llm_clients.prompts import prompt, prompts_version
from llm_clients.types import LLMError, Message
from storage.records import Conversation, Turn

OPTIONS = ("0", "1", "2")
MODES = ("probability", "reasoned")
VARIANTS = ("shown", "ievalm_released")
RELEASED_TOP = 50  # script/chat.py L343: rec_items[0][:50]
RELEASED_TEMPLATE = "I would recommend the following items: {}:"  # script/chat.py L316
LIST_SHOWN = 10  # items of a system list written into the transcript
_SCORE_TAG = re.compile(r"<score>\s*([012])\s*</score>", re.IGNORECASE)


@dataclass
class Persuasiveness:
    """One persuasiveness judgement. ``score`` (the 0/1/2 answer) is None exactly when ``error`` is set;
    ``expected`` is the expected value under ``distribution`` (probability mode only); ``reading`` says
    how the answer was read (:meth:`llm_clients.types.Distribution.record`)."""

    score: int | None
    mode: str
    model: str
    prompt_version: str
    distribution: dict[str, float] | None = None
    rationale: str = ""
    explanation: str = ""
    error: str | None = None
    expected: float | None = None
    reading: dict | None = None
    variant: str = "shown"


def score_persuasiveness(
    conversation: Conversation,
    client: LLMClient,
    *,
    mode: str = "probability",
    explanation: str | None = None,
    variant: str = "shown",
) -> Persuasiveness:
    """Judge the persuasiveness of the last recommendation's explanation in ``conversation``."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    version = prompts_version("persuasiveness")
    result = Persuasiveness(None, mode, client.name, version, variant=variant)
    released = released_turn(conversation) if variant == "ievalm_released" else None
    if explanation is None:
        turn = released or _explained_turn(conversation)
        if turn is None:
            result.error = "the conversation has no system turn to judge"
            return result
        explanation = released_text(turn) if turn is released else turn.text
    result.explanation = explanation
    messages = build_messages(conversation, explanation, mode, released=released)
    try:
        if mode == "probability":
            dist = client.score(messages, OPTIONS)
            result.reading = dist.record()
            result.score = int(dist.parsed if dist.parsed is not None else max(OPTIONS, key=lambda o: dist.probs[o]))
            if dist.method != "explicit":
                result.distribution = dict(dist.probs)
                result.expected = dist.expected()
        else:
            _reasoned(client, messages, result)
    except LLMError as e:
        result.error = f"model call failed: {e}"
    return result


def build_messages(
    conversation: Conversation, explanation: str, mode: str, *, released: Turn | None = None
) -> list[Message]:
    """The prompt: the transcript first, the targets and the explanation next, the question last."""
    targets = escape_data(", ".join(t.title or t.id for t in conversation.targets))
    user = "\n\n".join(
        [
            f"<conversation>\n{transcript(conversation, released=released)}\n</conversation>",
            prompt("persuasiveness", "targets").format(targets=targets)
            if targets
            else prompt("persuasiveness", "no_targets"),
            prompt("persuasiveness", "explanation").format(explanation=escape_data(explanation)),
            prompt("persuasiveness", "rules_targets" if targets else "rules_no_targets"),
            prompt("persuasiveness", "answer_score" if mode == "probability" else "answer_reasoned"),
        ]
    )
    system = prompt("persuasiveness", "system").format(items=conversation.domain)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def transcript(conversation: Conversation, *, released: Turn | None = None) -> str:
    """History and interaction as ``User:`` / ``System:`` lines; a system list follows its text. ``released``: that
    turn reads as iEvaLM's released code wrote it (:func:`released_text`) and has no list line.

    Tags in the data are escaped, so a turn cannot close the ``<conversation>`` block.
    """
    lines = []
    for turn in conversation.all_turns:
        if turn is released:
            lines.append(f"System: {released_text(turn)}")
            continue
        lines.append(f"{'User' if turn.role == 'user' else 'System'}: {turn.text}")
        if turn.items:
            shown = ", ".join(ref.title or ref.id for ref in turn.items[:LIST_SHOWN])
            more = f" (and {len(turn.items) - LIST_SHOWN} more)" if len(turn.items) > LIST_SHOWN else ""
            lines.append(f"[System's recommendation list: {shown}{more}]")
    return escape_data("\n".join(lines))


def parse_score(text: str) -> int | None:
    """The last ``<score>N</score>`` (N in 0-2) in ``text``, or None."""
    found = _SCORE_TAG.findall(text)
    return int(found[-1]) if found else None


def _reasoned(client: LLMClient, messages: list[Message], result: Persuasiveness) -> None:
    answer = client.chat(messages, temperature=0.0, max_tokens=300).text
    result.rationale = answer.strip()
    score = parse_score(answer)
    if score is None:
        repair = [
            *messages,
            {"role": "assistant", "content": answer},
            {"role": "user", "content": prompt("persuasiveness", "repair")},
        ]
        score = parse_score(client.chat(repair, temperature=0.0, max_tokens=20).text)
    if score is None:
        result.error = "unparseable answer: no <score>0|1|2</score> after one repair request"
    else:
        result.score = score


def released_turn(conversation: Conversation) -> Turn | None:
    """The turn iEvaLM's released code prepends its top 50 to (``script/chat.py`` L341-346): the first system turn
    whose ranking holds a target among its first 50 (``rec_success``; iEvaLM stops there), else the last one."""
    targets = {t.id for t in conversation.targets}
    system_turns = [t for t in conversation.turns if t.role == "system"]
    for turn in system_turns:
        if targets & {ref.id for ref in turn.ranked()[:RELEASED_TOP]}:
            return turn
    return system_turns[-1] if system_turns else None


def released_text(turn: Turn) -> str:
    """The turn's text behind iEvaLM's template holding its whole top 50 (``f"{j+1}: {name}\n"`` each)."""
    ranked = "".join(f"{j + 1}: {ref.title or ref.id}\n" for j, ref in enumerate(turn.ranked()[:RELEASED_TOP]))
    return RELEASED_TEMPLATE.format(ranked) + turn.text


def _explained_turn(conversation: Conversation) -> Turn | None:
    system_turns = [t for t in conversation.turns if t.role == "system"]
    with_list = [t for t in system_turns if t.items]
    chosen = with_list or system_turns
    return chosen[-1] if chosen else None
