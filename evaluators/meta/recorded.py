"""The latest recorded validity figure of the embedded judge, in one place.

Every sentence the app and the docs say about the embedded 135M judge's agreement with people quotes this
record (``ui/render.py``, ``ui/settings_tab.py``, the README, ``docs/evaluation.md``,
``docs/architecture.md``); ``tests/test_validity_sentences.py`` reads it and checks each sentence. The
figure is the embedded LLM judge's row of the validity table in ``docs/evaluation.md`` (its overall,
from the debate, against human ``dialogue_overall`` of CRSArena-Eval: Spearman ρ with a 95% bootstrap
interval), measured on 2026-11-22. No imports beyond the standard library: the UI reads it on every page.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RecordedFigure:
    """One recorded Spearman correlation with its 95% interval."""

    rho: float
    low: float
    high: float
    n: int
    measured: str

    @property
    def interval_holds_zero(self) -> bool:
        return self.low <= 0.0 <= self.high

    def verdict(self) -> str:
        """What the figure says, in words: no claim of a direction when the interval holds zero."""
        if self.interval_holds_zero:
            return "no measurable correlation with human ratings"
        if self.high < 0:
            return "a negative correlation with human ratings"
        return "a positive correlation with human ratings"

    def quoted(self) -> str:
        """The figure as the app and the docs quote it: ``ρ 0.016, 95% interval [−0.34, 0.37], n = 35``."""
        return f"ρ {_num(self.rho, 3)}, 95% interval [{_num(self.low, 2)}, {_num(self.high, 2)}], n = {self.n}"

    def sentence(self) -> str:
        """The one sentence the app shows about it."""
        return f"in our check its overall score showed {self.verdict()}: {self.quoted()} real dialogues"


def _num(x: float, places: int) -> str:
    """A number with a typographic minus sign, as the docs write it."""
    text = f"{x:.{places}f}"
    return text.replace("-", "−")


# docs/evaluation.md, "Validity figures": embedded LLM judge (SmolLM2-135M), overall (debate), dialogue, n = 35.
EMBEDDED_JUDGE_OVERALL = RecordedFigure(rho=0.016, low=-0.34, high=0.37, n=35, measured="2026-11-22")
