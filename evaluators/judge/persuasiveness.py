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


def score_persuasiveness(
    conversation: Conversation,
    client: LLMClient,
    *,
    mode: str = "probability",
    explanation: str | None = None,
) -> Persuasiveness:
    """Judge the persuasiveness of the last recommendation's explanation in ``conversation``."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    version = prompts_version("persuasiveness")
    result = Persuasiveness(None, mode, client.name, version)
    if explanation is None:
        turn = _explained_turn(conversation)
        if turn is None:
            result.error = "the conversation has no system turn to judge"
            return result
        explanation = turn.text
    result.explanation = explanation
    messages = build_messages(conversation, explanation, mode)
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


def build_messages(conversation: Conversation, explanation: str, mode: str) -> list[Message]:
    """The prompt: the transcript first, the targets and the explanation next, the question last."""
    targets = escape_data(", ".join(t.title or t.id for t in conversation.targets))
    user = "\n\n".join(
        [
            f"<conversation>\n{transcript(conversation)}\n</conversation>",
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


def transcript(conversation: Conversation) -> str:
    """History and interaction as ``User:`` / ``System:`` lines; a system list follows its text.

    Tags in the data are escaped, so a turn cannot close the ``<conversation>`` block.
    """
    lines = []
    for turn in conversation.all_turns:
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


def _explained_turn(conversation: Conversation) -> Turn | None:
    system_turns = [t for t in conversation.turns if t.role == "system"]
    with_list = [t for t in system_turns if t.items]
    chosen = with_list or system_turns
    return chosen[-1] if chosen else None
