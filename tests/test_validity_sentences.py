"""Every sentence the app and the docs say about the embedded judge's validity quotes the latest recorded figure.

The figure is read from one place, :data:`evaluators.meta.recorded.EMBEDDED_JUDGE_OVERALL`, and checked
against the validity table in ``docs/evaluation.md`` (the embedded LLM judge's overall row: ρ 0.016
[−0.34, 0.37], n = 35). An interval that holds zero is no measurable correlation, in either direction: no
sentence may say the ratings ran *against* human judgement (issue #42, point 12).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evaluators.meta.recorded import EMBEDDED_JUDGE_OVERALL as FIG
from llm_clients.config import EMBEDDED, RoleConfig
from ui.render import roles_notice
from ui.settings_tab import embedded_notice

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", ROOT / "docs" / "evaluation.md", ROOT / "docs" / "architecture.md"]
QUOTE = re.compile(r"ρ (−?\d+\.\d+), 95% interval \[(−?\d+\.\d+), (−?\d+\.\d+)\]")


def _num(text: str) -> float:
    return float(text.replace("−", "-"))


def _flat(path: Path) -> str:
    return re.sub(r"\s+", " ", path.read_text(encoding="utf-8").replace("\n> ", " "))


def test_the_record_is_the_validity_table_row():
    table = (ROOT / "docs" / "evaluation.md").read_text(encoding="utf-8")
    rows = [line for line in table.splitlines() if line.startswith("| embedded LLM judge")]
    row = next(line for line in rows if "overall (debate)" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert int(cells[3]) == FIG.n
    rho, low, high = re.fullmatch(r"(−?[\d.]+) \[(−?[\d.]+), (−?[\d.]+)\]", cells[4]).groups()
    assert (_num(rho), _num(low), _num(high)) == pytest.approx((FIG.rho, FIG.low, FIG.high))


def test_the_interval_holds_zero_so_the_words_say_no_measurable_correlation():
    assert FIG.low < 0 < FIG.high
    assert FIG.verdict() == "no measurable correlation with human ratings"


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_every_quote_in_the_docs_matches_the_record(path):
    text = _flat(path)
    quotes = QUOTE.findall(text)
    assert quotes, f"{path.name} quotes no figure"
    for rho, low, high in quotes:
        assert (_num(rho), _num(low), _num(high)) == pytest.approx((FIG.rho, FIG.low, FIG.high))
    assert "no measurable correlation" in text


def _configs() -> list[RoleConfig]:
    return [RoleConfig(role="judge", model=EMBEDDED), RoleConfig(role="crs", model=EMBEDDED)]


@pytest.mark.parametrize("render", [roles_notice, embedded_notice], ids=["banner", "settings"])
def test_the_app_quotes_the_record(render):
    text = render(_configs())
    (rho, low, high), *_ = QUOTE.findall(text)
    assert (_num(rho), _num(low), _num(high)) == pytest.approx((FIG.rho, FIG.low, FIG.high))
    assert f"n = {FIG.n}" in text
    assert "no measurable correlation" in text


def test_nothing_says_the_ratings_ran_against_people():
    paths = [*DOCS, *(ROOT / "ui").glob("*.py")]
    for path in paths:
        text = _flat(path).lower()
        for claim in ("ran against", "ran *against*", "against human judgement", "anti-correlat"):
            assert claim not in text, f"{path.name}: {claim!r}"
