"""The judge modes are named for their method (issue #42, point 3).

CoRE §4.1 asks the judge to "rationale your rating according to the guideline first, then put the score you
assigned in the format of <rating>{score}</rating>" and parses that written rating. The expectation over the
rating's probabilities is G-Eval's reading (Liu et al. 2023, "probability-weighted scoring", which CoRE's
related work credits to G-Eval, not to itself). Every place that describes the modes must say so.
"""

from __future__ import annotations

import re
from pathlib import Path

from evaluators.judge.factor_judge import DEFAULT_MODE, MODE_METHODS, MODES

ROOT = Path(__file__).resolve().parent.parent


def _flat(path: Path) -> str:
    return re.sub(r"\s+", " ", path.read_text(encoding="utf-8"))


def test_each_mode_is_described_by_its_method():
    assert set(MODE_METHODS) == set(MODES)
    assert "CoRE's method" in MODE_METHODS["reasoned"] and "written rating" in MODE_METHODS["reasoned"]
    assert "G-Eval" in MODE_METHODS["reasoned+probability"]
    assert "CoRE's method" not in MODE_METHODS["reasoned+probability"]


def test_no_description_calls_the_probability_reading_cores_procedure():
    paths = [
        ROOT / "evaluators" / "judge" / "factor_judge.py",
        ROOT / "evaluators" / "cli.py",
        ROOT / "ui" / "chat_tab.py",
        ROOT / "docs" / "evaluation.md",
    ]
    for path in paths:
        text = _flat(path)
        assert not re.search(r"reasoned\+probability`?,? (?:\(the default: )?(?:is )?CoRE's procedure", text), path
        assert "G-Eval" in text, path


def test_the_docs_say_why_the_default_is_what_it_is():
    text = _flat(ROOT / "docs" / "evaluation.md")
    assert f"`{DEFAULT_MODE}`, the command line's default, is **G-Eval's reading**" in text
    assert "Why the default is G-Eval's reading" in text and "`--mode reasoned`" in text
