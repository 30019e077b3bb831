"""The multi-agent debate (CoRE §4.2): four personas turn the factor results into one 0-100 score.

Each persona (common user, domain expert, linguist, HCI expert; see
``PERSONA_FACTORS``) speaks for three factors. In round 1 every persona reads
the conversation and the factor report and gives an overall score with a
statement. What the report holds is ``DebateConfig.reading``: by default
(``"own"``, CoRE §4.2 round 1: "the factor-wise scores and corresponding reasons
relevant to their interests") a persona reads its own three factors' scores and
reasons and nothing of the other nine factors; ``"own+scores"`` (this project's
earlier default) adds the other nine factors' scores without reasons; ``"all"``
gives every persona all twelve scores with their reasons. The common user also
reads the conversation's target items when it has them (simulated conversations do): CoRE App. D has it compare the
recommendation list with ``<groundtruth_item>`` (Effectiveness). From round 2
on every persona also reads the discussion so far and may revise its score or
argue with the others. The debate stops as soon as all four personas' scores
agree within ``tolerance`` (CoRE §4.2: "all roles provide the same score") or
after ``max_rounds``; the final score is the mean of the last round's scores.

Rules where the paper is silent:

* **Invalid answers.** An answer that is not a JSON object with a non-empty
  ``statement`` and a numeric ``score`` in 0-100 gets one repair request. If the
  repair fails too, or the model call itself fails (the client has already
  retried), the message is kept with ``score=None`` and ``error`` set. Such a
  role is left out of that round's consensus check and mean, and its statement
  is not shown to the others. Consensus needs every role's valid score: CoRE
  §4.2 ends the debate when "all roles provide the same score", and three
  agreeing personas out of four are not all roles, so a round with a failed
  persona never ends the debate by consensus. The final score is the mean of the
  last round's valid scores; ``DebateResult.valid`` says of how many and
  ``DebateResult.missing`` which personas gave none, and the evaluation ends
  ``partial`` naming them (:func:`missing_personas`). A round without any valid
  score ends the debate with ``final_score=None``.
* **Order of opinions.** The statements of each finished round are shown in an
  order shuffled by an RNG seeded with (seed, that round), so no persona is
  always read first. Every reader of a round sees the same order, which keeps
  the prompts of one round identical up to the persona (prefix caches, and
  llama.cpp's KV reuse for the embedded model). In sequential mode the speaking
  order rotates by one place each round, and later speakers read the earlier
  statements of the current round in speaking order.
* **Prompt layout.** System text (shared by all calls), then the conversation,
  the factor report, the discussion, the persona with its three factors, and
  the round's instruction. Factor reasons are passed whole: CoRE gives the
  roles the judge's reasons as they are, and their length is already bounded by
  the factor judge's answer limit (``factor_judge.MAX_TOKENS``); only runs of
  white space are folded. With the CoRE reading the report differs per persona,
  so the prompt prefix shared across roles ends after the conversation.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from statistics import fmean
from string import Template
from typing import Any

from evaluators.factors import FACTORS, LABELS, PERSONA_FACTORS
from llm_clients.base import LLMClient
from llm_clients.prompts import prompt
from llm_clients.types import LLMError, Message
from storage.records import DebateMessage, FactorScore

ROLES: tuple[str, ...] = tuple(PERSONA_FACTORS)
MAX_TOKENS = 600
STATEMENT_CHARS = 300  # statement length the embedded model's grammar allows
# CoRE §4.2 (own factors' scores and reasons only) / ours: plus the others' scores / every factor with reasons
READINGS = ("own", "own+scores", "all")
RAW_SEPARATOR = "\n\n--- repair answer ---\n\n"

# JSON answer shape forced on the embedded model: its own evaluator name, a
# one-line statement, an integer score 0-100.
_GRAMMAR = Template(
    r"""root ::= "{\"evaluator\": \"$name\", \"statement\": \"" char{1,$chars} "\", \"score\": " score "}"
char ::= [^"\\\x00-\x1f]
score ::= "100" | [1-9] [0-9] | [0-9]
"""
)


@dataclass
class DebateConfig:
    """How to run a debate.

    :param clients: role id (a key of ``PERSONA_FACTORS``) -> client; each role
        may use a different model (a heterogeneous debate)
    :param max_rounds: the debate stops after this many rounds at the latest
    :param tolerance: consensus when max(score) - min(score) <= tolerance
        (0: all valid scores are equal)
    :param sequential: False: the four roles of a round speak concurrently;
        True: one by one, later speakers see the earlier statements of the round
    :param domain: what is recommended (movies, books, music, ...) when the conversation does not say;
        :func:`run_debate` takes the conversation's own domain first
    :param reading: what each persona reads of the factor report: ``"own"`` (the default, CoRE §4.2
        round 1) its own three factors' scores with reasons and nothing else; ``"own+scores"`` also the
        other factors' scores alone; ``"all"`` every factor's score with its reasons
    """

    clients: dict[str, LLMClient]
    max_rounds: int = 4
    tolerance: float = 0.0
    sequential: bool = False
    domain: str = "movies"
    temperature: float = 0.0
    seed: int = 0
    reading: str = "own"


@dataclass
class DebateResult:
    """The outcome of a debate.

    ``final_score`` is the mean of the last round's valid scores (None if there
    are none). ``messages`` holds every message, failed ones included, round by
    round; within a round in role order (concurrent) or speaking order (sequential).
    """

    final_score: float | None
    rounds_used: int
    consensus: bool
    messages: list[DebateMessage]
    valid: int = 0  # how many valid scores of the last round the final score is the mean of
    missing: tuple[str, ...] = ()  # roles without a valid score in the last round (the outcome is partial)


def run_debate(
    log_text: str,
    factor_scores: list[FactorScore],
    config: DebateConfig,
    *,
    on_message: Callable[[DebateMessage], None] | None = None,
    domain: str | None = None,
    targets: str = "",
) -> DebateResult:
    """Run the debate over one rendered conversation and its factor results.

    :param log_text: the conversation as rendered for judges (shown as data)
    :param factor_scores: the factor judge's results, each with its score **and its reasons** (the
        rationale), as CoRE §4.2 gives every role; failed ones are shown as "not scored"
    :param domain: the conversation's domain (``Conversation.domain``); ``config.domain`` when None
    :param targets: the conversation's target items, one line each (``RenderedLog.target_lines``); the
        common user reads them (CoRE App. D), and nobody when empty
    :param on_message: called with every message, failed ones included, as soon as
        it is ready. It is always called from the thread that called
        ``run_debate`` (concurrent answers are handed over as they complete), so
        it needs no locking.
    """
    _check(config)
    debate = _Debate(log_text, factor_scores, config, domain=domain or config.domain, targets=targets)
    emit = on_message or (lambda message: None)
    messages: list[DebateMessage] = []
    scores: list[float] = []
    consensus = False
    with ThreadPoolExecutor(max_workers=len(ROLES)) as pool:
        for round_no in range(1, config.max_rounds + 1):
            if config.sequential:
                current: list[DebateMessage] = []
                for role in speaking_order(round_no):
                    current.append(debate.speak(role, round_no, messages, current))
                    emit(current[-1])
            else:
                futures = [pool.submit(debate.speak, role, round_no, messages, []) for role in ROLES]
                by_role = {}
                for future in as_completed(futures):
                    message = future.result()
                    by_role[message.role] = message
                    emit(message)
                current = [by_role[role] for role in ROLES]
            messages.extend(current)
            scores = [m.score for m in current if m.score is not None]
            # CoRE §4.2: consensus is when all roles give the same score; a failed role is not agreement
            consensus = len(scores) == len(ROLES) and max(scores) - min(scores) <= config.tolerance
            if consensus or not scores:
                break
    return DebateResult(
        final_score=fmean(scores) if scores else None,
        rounds_used=round_no,
        consensus=consensus,
        messages=messages,
        valid=len(scores),
        missing=missing_personas(messages),
    )


def missing_personas(messages: list[DebateMessage]) -> tuple[str, ...]:
    """The roles with no valid score in a debate's last round, in ``ROLES`` order (all of them with no messages).

    Such a debate's overall is the mean of fewer than four personas, which CoRE never reports: the evaluation
    is ``partial`` and names them, and a rerun with the same setup debates again."""
    if not messages:
        return ROLES
    last = max(m.round for m in messages)
    valid = {m.role for m in messages if m.round == last and m.score is not None}
    return tuple(role for role in ROLES if role not in valid)


def persona_names(roles) -> str:
    """Role ids as the personas' names: ("debate_expert",) → "Domain Expert"."""
    return _and([_name(role) for role in roles]) if len(roles) > 1 else "".join(_name(role) for role in roles)


def overall_formed(messages: list[DebateMessage]) -> str:
    """How the overall was formed, from a debate's messages: "the mean of 3 of the 4 personas' scores in round 2"."""
    if not messages:
        return ""
    last = max(m.round for m in messages)
    final = [m for m in messages if m.round == last]
    valid = sum(m.score is not None for m in final)
    if not valid:
        return f"no persona gave a valid score in round {last}"
    return f"the mean of {valid} of the {len(final)} personas' scores in round {last}"


def speaking_order(round_no: int) -> list[str]:
    """Sequential mode: the roles in ``ROLES`` order, rotated by one place per round."""
    shift = (round_no - 1) % len(ROLES)
    return [*ROLES[shift:], *ROLES[:shift]]


def parse_answer(text: str) -> tuple[str, float]:
    """(statement, score) from a debater's answer; ValueError says what is wrong.

    Takes the first JSON object with a ``score`` key anywhere in the text (so
    code fences and prose around it do no harm). The score may be a number or a
    numeric string and must lie in 0-100: nothing is clamped.
    """
    decoder = json.JSONDecoder()
    found_object = False
    for match in re.finditer(r"\{", text):
        try:
            obj, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        found_object = True
        if "score" in obj:
            break
    else:
        raise ValueError('the JSON object has no "score"' if found_object else "no JSON object was found")
    statement = obj.get("statement")
    if not isinstance(statement, str) or not statement.strip():
        raise ValueError('"statement" is missing or empty')
    return statement.strip(), _score(obj["score"])


def _score(value) -> float:
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise ValueError(f"the score {value!r} is not a number") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"the score {value!r} is not a number")
    if not 0 <= value <= 100:
        raise ValueError(f"the score {value:g} is outside 0-100")
    return float(value)


def _check(config: DebateConfig) -> None:
    if set(config.clients) != set(ROLES):
        raise ValueError(f"the debate needs a client for exactly these roles: {', '.join(ROLES)}")
    if config.max_rounds < 1:
        raise ValueError("max_rounds must be at least 1")
    if config.tolerance < 0:
        raise ValueError("tolerance must not be negative")
    if config.reading not in READINGS:
        raise ValueError(f"reading must be one of: {', '.join(READINGS)}")


class _Debate:
    """The prompts of one debate and the single-message exchange with one role."""

    def __init__(
        self, log_text: str, factor_scores: list[FactorScore], config: DebateConfig, *, domain: str, targets: str = ""
    ):
        self.config = config
        items, expert = _domain_words(domain)
        key = config.reading.replace("+", "_")
        self.system = prompt("debate", "system").format(
            items=items,
            reading=prompt("debate", f"reading_{key}"),
            weigh=prompt("debate", f"weigh_{key}"),
        )
        conversation = f"<conversation>\n{log_text}\n</conversation>"
        self.reports = {
            role: "\n\n".join(
                part
                for part in (
                    conversation,
                    # CoRE App. D: the common user compares the list with <groundtruth_item> (Effectiveness)
                    prompt("debate", "targets").format(items=targets) if targets and role == "debate_user" else "",
                    "<evaluation_result>\n"
                    + _report(
                        factor_scores,
                        reasons_for=None if config.reading == "all" else PERSONA_FACTORS[role],
                        only=PERSONA_FACTORS[role] if config.reading == "own" else None,
                    )
                    + "\n</evaluation_result>",
                )
                if part
            )
            for role in ROLES
        }
        self.personas = {
            role: prompt("debate", f"persona_{role}").format(items=items, expert=expert)
            + "\n"
            + prompt("debate", "responsibility").format(factors=_and(LABELS[f] for f in PERSONA_FACTORS[role]))
            for role in ROLES
        }

    def speak(
        self, role: str, round_no: int, earlier: list[DebateMessage], current: list[DebateMessage]
    ) -> DebateMessage:
        """Ask one role for its statement in this round, with one repair if needed."""
        client = self.config.clients[role]
        name = _name(role)
        messages: list[Message] = [
            {"role": "system", "content": self.system},
            {"role": "user", "content": self.user_prompt(role, round_no, earlier, current)},
        ]
        params: dict[str, Any] = dict(temperature=self.config.temperature, seed=self.config.seed, max_tokens=MAX_TOKENS)
        if client.model.backend == "embedded":
            params["grammar"] = _GRAMMAR.substitute(name=name, chars=STATEMENT_CHARS)
        else:
            params["json_mode"] = True
        raws: list[str] = []

        def failed(error: str) -> DebateMessage:
            return DebateMessage(round_no, role, client.name, "", None, error=error, raw=RAW_SEPARATOR.join(raws))

        try:
            raws.append(client.chat(messages, **params).text)
            try:
                statement, score = parse_answer(raws[-1])
            except ValueError as first:
                repair = prompt("debate", "repair").format(problem=first, name=name)
                messages += [{"role": "assistant", "content": raws[-1]}, {"role": "user", "content": repair}]
                raws.append(client.chat(messages, **params).text)
                statement, score = parse_answer(raws[-1])
        except LLMError as e:
            return failed(f"the model call failed: {e}")
        except ValueError as e:
            return failed(f"no valid answer after one repair: {e}")
        return DebateMessage(round_no, role, client.name, statement, score, raw=RAW_SEPARATOR.join(raws))

    def user_prompt(self, role: str, round_no: int, earlier: list[DebateMessage], current: list[DebateMessage]) -> str:
        """Conversation and report, discussion so far (if any), persona, instruction."""
        discussion = self.discussion(round_no, earlier, current)
        instruction = prompt("debate", "instruction_discussion" if discussion else "instruction_alone")
        instruction = instruction.format(round=round_no, max_rounds=self.config.max_rounds)
        parts = [self.reports[role], discussion, self.personas[role], instruction]
        return "\n\n".join(part for part in parts if part)

    def discussion(self, round_no: int, earlier: list[DebateMessage], current: list[DebateMessage]) -> str:
        """The valid statements so far: finished rounds in a seeded shuffle, this round in speaking order."""
        blocks = []
        for past in range(1, round_no):
            said = [m for m in earlier if m.round == past and m.score is not None]
            random.Random(f"{self.config.seed}:{past}").shuffle(said)
            blocks.append(_block(prompt("debate", "discussion_round").format(round=past), said))
        said = [m for m in current if m.score is not None]
        if said:
            blocks.append(_block(prompt("debate", "discussion_round_open").format(round=round_no), said))
        return "<discussion>\n" + "\n\n".join(blocks) + "\n</discussion>" if blocks else ""


def _block(title: str, said: list[DebateMessage]) -> str:
    entry = prompt("debate", "discussion_entry")
    lines = [
        entry.format(name=_name(m.role), score=_number(m.score) if m.score is not None else "–", statement=m.statement)
        for m in said
    ]
    return "\n".join([title, *lines])


def _report(
    factor_scores: list[FactorScore],
    reasons_for: tuple[str, ...] | None = None,
    *,
    only: tuple[str, ...] | None = None,
) -> str:
    """The factor results in factor order; a failed factor reads "not scored", never 0.

    :param reasons_for: the factors whose reasons are shown; the others show their score alone. None: every
        factor's reasons.
    :param only: the factors shown at all (CoRE §4.2: those relevant to the persona); None: all twelve.
    """
    unknown = {fs.factor for fs in factor_scores} - set(FACTORS)
    if unknown:
        raise ValueError(f"unknown factors: {', '.join(sorted(unknown))}")
    lines = [prompt("debate", "factor_header")]
    for fs in sorted(factor_scores, key=lambda fs: FACTORS.index(fs.factor)):
        if only is not None and fs.factor not in only:
            continue
        label = LABELS[fs.factor]
        if fs.score is None:
            lines.append(prompt("debate", "factor_failed").format(label=label, error=fs.error or "no score"))
            continue
        if reasons_for is not None and fs.factor not in reasons_for:
            lines.append(prompt("debate", "factor_score_only").format(label=label, score=_number(fs.score)))
            continue
        rationale = " ".join(fs.rationale.split()) or "none given"
        scored = prompt("debate", "factor_scored")
        lines.append(scored.format(label=label, score=_number(fs.score), rationale=rationale))
    return "\n".join(lines)


def _domain_words(domain: str) -> tuple[str, str]:
    """(what is recommended, what the expert is) for a domain, e.g. ("books", "literature expert")."""
    try:
        return prompt("debate", f"items_{domain}"), prompt("debate", f"expert_{domain}")
    except KeyError:
        return domain, f"expert on {domain}"


def _name(role: str) -> str:
    return prompt("debate", f"name_{role}")


def _number(value: float) -> str:
    return f"{round(value, 2):g}"


def _and(words) -> str:
    words = list(words)
    return ", ".join(words[:-1]) + " and " + words[-1]
