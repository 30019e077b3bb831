"""What every scorer is: the :class:`Scorer` protocol, the :class:`Outcome` it returns and the
:class:`Recorder` it writes through.

A scorer turns one conversation into twelve factor scores and (maybe) an overall score. The
implementations are :class:`evaluators.judge.llm_scorer.LLMJudge` (the CoRE factor judge and the
four-persona debate, stored as ``llm:<model>``), :class:`evaluators.judge.llm_scorer.EnsembleJudge`
(several judge models averaged per factor, ``ensemble(<a>+<b>)``) and
:class:`evaluators.proxy.scorer.ProxyJudge` (the LLM-free proxies and a calibrated overall,
``proxy``). :func:`evaluators.pipeline.evaluate_conversation` does everything they share (storing
the conversation, reusing a finished evaluation with the same fingerprint, starting and finishing
the evaluation row, the deterministic metrics); a scorer only scores. A new scorer is one class
that satisfies the protocol plus one entry in :data:`evaluators.scorer_setup.SCORER_KINDS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from catalog.catalog import Catalog
from llm_clients.base import UsageTotals
from storage.records import Conversation, DebateMessage, Evaluation, FactorScore

DEMO_NOTICE = "135M demo model — not validated"


class Recorder(Protocol):
    """Where a scorer puts its results: each one is stored at once and reported to the caller."""

    def start(self) -> None:
        """Create the evaluation row now (it is created on the first write otherwise)."""

    def factor(self, score: FactorScore) -> None:
        """Store a factor score and report it."""

    def show_factor(self, score: FactorScore) -> None:
        """Report a factor score that is stored already (kept from an earlier run)."""

    def debate(self, message: DebateMessage) -> None:
        """Store a debate message and report it."""

    def show_debate(self, message: DebateMessage) -> None:
        """Report a debate message that is stored already."""

    def clear_debate(self) -> None:
        """Drop the stored debate (it is about to run again)."""


@dataclass
class Outcome:
    """How one scoring run ended; the pipeline stores it on the evaluation.

    :param status: ``done``, or ``partial`` when running again with the same setup could fill gaps
    :param overall: the overall score (0-100), None when there is none
    :param rounds_used: debate rounds (None without a debate)
    :param consensus: whether the debate reached consensus (None without a debate)
    :param error: what is missing, for a ``partial`` outcome
    :param metrics: the scorer's own figures, stored after the deterministic metrics
    :param usage: tokens and calls this run spent (the pipeline adds earlier runs')
    """

    status: str = "done"
    overall: float | None = None
    rounds_used: int | None = None
    consensus: bool | None = None
    error: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    usage: UsageTotals = field(default_factory=UsageTotals)


class Scorer(Protocol):
    """Scores a conversation on the twelve CoRE factors (and, maybe, overall).

    ``name`` is stored with every evaluation and factor score (``proxy``, ``llm:<model>``,
    ``ensemble(<a>+<b>)``); ``describe()`` is stored as the evaluation's configuration and decides
    its fingerprint, so it must hold everything that changes a result and nothing secret.
    """

    @property
    def name(self) -> str: ...

    @property
    def rubric_version(self) -> str:
        """The rubric version stored with the evaluation."""
        ...

    @property
    def demo(self) -> bool:
        """True when a model that is not validated (the embedded 135M demo model) takes part."""
        ...

    def describe(self) -> dict[str, Any]:
        """What decides this scorer's results (no keys, no secrets)."""
        ...

    def label(self) -> str:
        """Who gives the scores, for people (e.g. ``llm:gpt-4o-mini; debate: …``)."""
        ...

    def notices(self, why: str = "") -> list[str]:
        """Lines an operator should read before a batch (``why``: why this scorer was chosen)."""
        ...

    def summary(self, evaluation: Evaluation) -> str:
        """A finished evaluation's outcome in one line (overall score, and how it came about)."""
        ...

    def run(
        self, conversation: Conversation, earlier: Evaluation | None, *, catalog: Catalog, record: Recorder
    ) -> Outcome:
        """Score ``conversation``, writing each result through ``record`` as soon as it is ready.

        :param earlier: the unfinished evaluation with the same setup being completed, if any; a
            scorer may keep what it holds (the LLM judge keeps scored factors)
        """
        ...
