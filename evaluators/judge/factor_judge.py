"""The CoRE factor judge: one LLM call (or a short exchange) per factor, twelve factors per conversation.

API::

    config = JudgeConfig(clients=[judge])  # default: reasoned+probability (CoRE's answer, G-Eval's reading)
    scores = judge_conversation(conversation, config, catalog=catalog,
                                factors=None, on_result=show)   # -> list[FactorScore]

Modes (``JudgeConfig.mode``):

``reasoned+probability`` (the default: CoRE's answer, G-Eval's reading)
    The judge explains its judgement step by step, then ends with
    ``<rating>n</rating>``, in one answer, as CoRE §4.1 asks ("rationale your
    rating ... first, then put the score ... in the format of <rating>{score}</rating>").
    The score is not CoRE's reading of that answer but G-Eval's (Liu et al. 2023:
    probability-weighted scoring): the expected value over
    "0".."4" read **at the rating token** of that answer
    (:meth:`LLMClient.read_answer`, :mod:`llm_clients.probability`): the endpoint's top-20
    log-probabilities of the token after the last rating tag, or the embedded
    model's logits there. When the endpoint returns no log-probabilities, or the
    digits hold less than ``min_mass`` of the probability at that token, the
    written rating is the score (``method="explicit"``, the reason in
    ``fallback``) — so on an endpoint without log-probabilities this mode *is*
    ``reasoned``. The reasons are the factor's rationale and reach the debate.
``reasoned`` (CoRE's method, §4.1)
    The same answer; the written rating alone is the score: CoRE parses the
    rating the judge wrote.
``probability`` (the fast rating-only option)
    The judge answers with the tag only (no reasons); the score is the expected
    value over "0".."4" from :meth:`LLMClient.score` after the prefix
    ``<rating>``. Cheaper, but not CoRE's procedure: the debate then gets scores
    without reasons.

In the reasoned modes the *last* rating tag counts. Without a valid tag (none,
not an integer, outside 0-4) one repair message asks for the tag alone (its
rating token is read the same way). If that fails too, the factor's score is
None with ``error="rating_parse_failure"``: never a silent 0.

On the embedded model every answer that must be a bare rating is constrained by
the grammar :data:`RATING_GRAMMAR`; remote endpoints ignore grammars.

Judge models: ``JudgeConfig.clients`` judge every factor unless
``per_factor`` names others for a factor. With several models the factor's
score is the mean of their scores (and its distribution the mean of theirs);
each model's own result is kept in ``metadata["models"]``. The judge is named
``llm:<model>`` for one model and ``ensemble(<a>+<b>)`` for several. If any
model of a factor fails, the factor has ``score=None`` and ``error`` says
which model failed and why, so a re-run can fill it (the others' calls come
from the cache).

A failure never spreads: an :class:`LLMError` on one factor sets that factor's
``error`` (``"<kind>: <message>"``) and the others go on. Calls run in a
thread pool of ``max_concurrency`` workers. ``on_result(score)`` is called in
the thread that called :func:`judge_conversation`, once per factor, as soon as
that factor's last call finishes (so the UI can stream results without
locking); an exception it raises stops the run. ``factors=`` limits the run to
a subset, e.g. the factors a previous run left without a score.

Every score records ``rubric_version`` and, in ``metadata``, the mode, the
judge prompts' version and, per model, the raw answers and how the score was
read: ``method`` (logprobs | logits | sampling | explicit), ``position`` (the
rating token's index in the answer), ``mass`` (probability on the digits
there), ``parsed`` (the written rating) and ``fallback`` (why the written
rating was used, when it was).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

from catalog.catalog import Catalog
from evaluators.factors import FACTORS
from evaluators.judge.inputs import (
    MAX_CHARS,
    MAX_ITEMS,
    MAX_TURNS,
    RenderedLog,
    factor_messages,
    render_log,
    score_choice,
)
from evaluators.judge.rubric import Rubric, load_rubric
from llm_clients.base import LLMClient
from llm_clients.probability import MIN_MASS
from llm_clients.prompts import prompt, prompts_version
from llm_clients.types import LLMError, Message
from storage.records import Conversation, FactorScore

MODES = ("reasoned+probability", "reasoned", "probability")
# What each mode is, in the words the command line, the Judge settings and the docs use. CoRE §4.1 parses the
# written <rating>; the expectation over 0-4 at the rating token is G-Eval's (Liu et al. 2023) reading.
MODE_METHODS: dict[str, str] = {
    "reasoned+probability": "CoRE's reasons, then G-Eval's reading: the expectation over 0-4 at the rating token",
    "reasoned": "CoRE's method: reasons, then the written rating",
    "probability": "no reasons: the expectation over 0-4 after <rating> (fast; the debate gets no reasons)",
}
# The default keeps G-Eval's reading: a 0-4 integer scale ties many conversations, which a rank correlation
# with people punishes, and every score also stores the written rating (``parsed`` in ``FactorScore.metadata``),
# so CoRE's own figure comes from the same run; on an endpoint without log-probabilities it *is* ``reasoned``.
DEFAULT_MODE = "reasoned+probability"
OPTIONS = ("0", "1", "2", "3", "4")
RATING_PREFIX = "<rating>"
RATING_GRAMMAR = 'root ::= "<rating>" [0-4] "</rating>"'


def rating_grammar(options: tuple[str, ...] = OPTIONS) -> str:
    """The grammar of a bare rating tag holding one of ``options`` (core-v3's appropriateness: 0 or 4)."""
    return f'root ::= "<rating>" [{"".join(options)}] "</rating>"' if options != OPTIONS else RATING_GRAMMAR


PARSE_FAILURE = "rating_parse_failure"
_RATING_TAG = re.compile(r"<rating>(.*?)</rating>", re.DOTALL)
_RATING_MAX_TOKENS = 12


@dataclass
class JudgeConfig:
    """How to judge: mode, models, concurrency, decoding and log limits.

    :param clients: the default judge model(s); several are averaged
    :param per_factor: other model(s) for some factors, by factor id
    :param max_tokens: length limit of an explanation
    :param seed: sampling seed sent with every chat call
    :param samples: sampled answers per distribution where an endpoint gives no log-probabilities
    :param rubric_version: rubric to judge with (default: the current one)
    :param min_mass: below this probability on the digits at the rating token, the written rating is used
    :param max_turns, max_log_chars, max_items: log limits passed to :func:`render_log`
    """

    clients: list[LLMClient]
    mode: str = DEFAULT_MODE
    per_factor: dict[str, list[LLMClient]] = field(default_factory=dict)
    max_concurrency: int = 6
    temperature: float = 0.0
    max_tokens: int = 600
    seed: int = 0
    samples: int = 10
    rubric_version: str | None = None
    min_mass: float = MIN_MASS
    max_turns: int = MAX_TURNS
    max_log_chars: int = MAX_CHARS
    max_items: int = MAX_ITEMS

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"judge mode must be one of {MODES}, got {self.mode!r}")
        if not self.clients:
            raise ValueError("a judge needs at least one model")
        unknown = set(self.per_factor) - set(FACTORS)
        if unknown:
            raise ValueError(f"per_factor names unknown factors: {sorted(unknown)}")
        if any(not clients for clients in self.per_factor.values()):
            raise ValueError("per_factor entries need at least one model")
        if self.max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")

    def clients_for(self, factor_id: str) -> list[LLMClient]:
        return self.per_factor.get(factor_id) or self.clients


def judge_name(clients: list[LLMClient]) -> str:
    """``llm:<model>`` for one model, ``ensemble(<a>+<b>...)`` for several."""
    if len(clients) == 1:
        return f"llm:{clients[0].name}"
    return "ensemble(" + "+".join(c.name for c in clients) + ")"


def parse_rating(text: str, options: tuple[str, ...] = OPTIONS) -> int | None:
    """The last ``<rating>n</rating>`` in ``text`` if n is one of ``options`` (default 0-4), else None.

    A rating the factor's rubric does not define (a 3 for core-v3's appropriateness, whose only
    levels are 4 and 0) is refused like a missing one: the judge is asked again, and it is never
    moved to a neighbouring level.
    """
    tags = _RATING_TAG.findall(text)
    if not tags:
        return None
    value = tags[-1].strip()
    return int(value) if value in options else None


def judge_conversation(
    conversation: Conversation,
    config: JudgeConfig,
    *,
    catalog: Catalog | None = None,
    factors: Iterable[str] | None = None,
    on_result: Callable[[FactorScore], None] | None = None,
) -> list[FactorScore]:
    """Score ``conversation`` on each factor (all twelve, or ``factors``), in rubric order.

    :raises ValueError: unknown factor ids, or an interaction without a system turn
    """
    wanted = FACTORS if factors is None else tuple(factors)
    unknown = [f for f in wanted if f not in FACTORS]
    if unknown:
        raise ValueError(f"unknown factors: {unknown}")
    factor_ids = [f for f in FACTORS if f in wanted]
    if not any(t.role == "system" for t in conversation.turns):
        raise ValueError("the interaction has no system turn to judge")
    rubric = load_rubric(config.rubric_version)
    log = render_log(
        conversation,
        catalog,
        rubric=rubric,
        max_turns=config.max_turns,
        max_chars=config.max_log_chars,
        max_items=config.max_items,
    )

    verdicts: dict[str, list[_Verdict | None]] = {f: [None] * len(config.clients_for(f)) for f in factor_ids}
    results: dict[str, FactorScore] = {}
    jobs = [(f, i, client) for f in factor_ids for i, client in enumerate(config.clients_for(f))]
    if not jobs:
        return []
    pool = ThreadPoolExecutor(max_workers=min(config.max_concurrency, len(jobs)), thread_name_prefix="judge")
    try:
        futures = {pool.submit(_ask, client, log, rubric, f, config): (f, i) for f, i, client in jobs}
        for future in as_completed(futures):
            factor_id, index = futures[future]
            verdicts[factor_id][index] = future.result()
            done = [v for v in verdicts[factor_id] if v is not None]
            if len(done) == len(verdicts[factor_id]):
                results[factor_id] = _combine(factor_id, done, config, rubric)
                if on_result is not None:
                    on_result(results[factor_id])
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # after an exception, calls not yet started never start
    return [results[f] for f in factor_ids]


@dataclass
class _Verdict:
    """One model's judgement of one factor."""

    model: str
    score: float | None
    distribution: dict[str, float] | None = None
    rationale: str = ""
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def as_metadata(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "score": self.score,
            "distribution": self.distribution,
            "error": self.error,
            **self.details,
        }


def _ask(client: LLMClient, log: RenderedLog, rubric: Rubric, factor_id: str, config: JudgeConfig) -> _Verdict:
    factor = rubric.factor(factor_id)
    options = tuple(str(s) for s in factor.scores)
    try:
        if config.mode == "probability":
            messages = factor_messages(log, rubric, factor_id, answer="rating_only")
            return _probability(client, messages, config, options)
        return _reasoned(
            client,
            factor_messages(log, rubric, factor_id, answer="reasoned"),
            factor.label.lower(),
            config,
            read=config.mode == "reasoned+probability",
            options=options,
        )
    except LLMError as e:
        return _Verdict(model=client.name, score=None, error=f"{e.kind}: {e}")


def _reasoned(
    client: LLMClient,
    messages: list[Message],
    label: str,
    config: JudgeConfig,
    *,
    read: bool,
    options: tuple[str, ...] = OPTIONS,
) -> _Verdict:
    """Reasons, then ``<rating>n</rating>`` (CoRE §4.1); with ``read`` the score is read at the rating token.

    Only the factor's ``options`` are ratings: another digit is refused and repaired like a missing tag,
    and the probability reading spreads over ``options`` alone.
    """

    def answer(msgs: list[Message], max_tokens: int, grammar: str | None):
        if read:
            return client.rate(
                msgs,
                options,
                tag="rating",
                min_mass=config.min_mass,
                temperature=config.temperature,
                max_tokens=max_tokens,
                seed=config.seed,
                grammar=grammar,
            )
        return client.chat(
            msgs, temperature=config.temperature, max_tokens=max_tokens, seed=config.seed, grammar=grammar
        ), None

    first, dist = answer(messages, config.max_tokens, None)
    rating = parse_rating(first.text, options)
    raw = [first.text]
    if rating is None:
        ask = prompt("judge", "repair").format(label=label, scores=score_choice(tuple(int(o) for o in options)))
        repair = [*messages, {"role": "assistant", "content": first.text}, {"role": "user", "content": ask}]
        retry, dist = answer(repair, _RATING_MAX_TOKENS, rating_grammar(options))
        rating = parse_rating(retry.text, options)
        raw.append(retry.text)
    details: dict[str, Any] = {"raw": raw, "repaired": len(raw) > 1, "parsed": rating}
    if rating is None:
        details["method"] = None
        return _Verdict(model=client.name, score=None, rationale=first.text, error=PARSE_FAILURE, details=details)
    rationale = _before_rating(first.text)
    if dist is None:  # reasoned: the written rating
        details["method"] = "explicit"
        return _Verdict(model=client.name, score=float(rating), rationale=rationale, details=details)
    details.update(dist.record(), parsed=rating)
    distribution = dict(dist.probs) if dist.method != "explicit" else None
    return _Verdict(
        model=client.name, score=dist.expected(), distribution=distribution, rationale=rationale, details=details
    )


def _probability(
    client: LLMClient, messages: list[Message], config: JudgeConfig, options: tuple[str, ...] = OPTIONS
) -> _Verdict:
    dist = client.score(messages, options, prefix=RATING_PREFIX, samples=config.samples, min_mass=config.min_mass)
    distribution = dict(dist.probs) if dist.method != "explicit" else None
    return _Verdict(model=client.name, score=dist.expected(), distribution=distribution, details=dist.record())


def _before_rating(text: str) -> str:
    """The explanation: the answer up to its last rating tag."""
    matches = list(_RATING_TAG.finditer(text))
    return (text[: matches[-1].start()] if matches else text).strip()


def _combine(factor_id: str, verdicts: list[_Verdict], config: JudgeConfig, rubric: Rubric) -> FactorScore:
    """One FactorScore from each model's verdict: the mean when all succeeded, else an error."""
    ensemble = len(verdicts) > 1
    metadata = {
        "mode": config.mode,
        "prompt_version": prompts_version("judge"),
        "models": [v.as_metadata() for v in verdicts],
    }
    rationale = "\n\n".join(f"[{v.model}] {v.rationale}" if ensemble else v.rationale for v in verdicts if v.rationale)
    failed = [v for v in verdicts if v.error is not None]
    judge = judge_name(config.clients_for(factor_id))
    if failed:
        error = "; ".join(f"{v.model}: {v.error}" if ensemble else f"{v.error}" for v in failed)
        return FactorScore(factor_id, None, judge, rubric.version, rationale=rationale, error=error, metadata=metadata)
    distributions = [v.distribution for v in verdicts if v.distribution is not None]
    distribution = None
    if len(distributions) == len(verdicts):
        # a level the rubric leaves out has probability 0 (the reading spread over the factor's levels only)
        distribution = {o: fmean(d.get(o, 0.0) for d in distributions) for o in OPTIONS}
    score = fmean(v.score for v in verdicts if v.score is not None)
    return FactorScore(
        factor_id, score, judge, rubric.version, distribution=distribution, rationale=rationale, metadata=metadata
    )
