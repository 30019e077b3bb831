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


# Phrases that credit the probability reading to CoRE (its §4.1 parses the written rating)
_CREDITS_CORE = (
    r"reasoned\+probability`?,? (?:\(the default: )?(?:is )?CoRE's procedure",
    r"CoRE's reasoned\+probability",
    r"follows CoRE §4\.1",
    r"CoRE's (?:probability|expectation|expected)",
)
# Phrases that describe the probability reading itself; a file that has one must name G-Eval
_DESCRIBES_READING = (r"expectation over", r"probability-weighted", r"weights the rating", r"reasoned\+probability:")


def _described_files() -> list[Path]:
    """Every file the project writes about itself in: code, prompts and docs (not the tests, whose docstrings
    quote the wrong names on purpose, nor the changelog, which records what earlier versions said)."""
    files = [
        p
        for d in ("evaluators", "llm_clients", "ui", "arena", "crs_backends", "bench", "scripts")
        for p in (ROOT / d).rglob("*.py")
    ]
    files += list((ROOT / "docs").glob("*.md")) + [ROOT / "README.md", ROOT / "commands.py", ROOT / "app.py"]
    files += list((ROOT / "assets").rglob("*.toml"))
    return sorted(p for p in files if p.is_file())


def test_no_description_calls_the_probability_reading_cores_procedure():
    paths = _described_files()
    assert len(paths) > 50  # the whole tree, not a hand-picked list (issue #74, point 9)
    for path in [
        ROOT / "evaluators" / "judge" / "factor_judge.py",
        ROOT / "evaluators" / "cli.py",
        ROOT / "ui" / "chat_tab.py",
        ROOT / "docs" / "evaluation.md",
    ]:
        assert "G-Eval" in _flat(path), path
    for path in paths:
        text = _flat(path)
        for pattern in _CREDITS_CORE:
            assert not re.search(pattern, text), f"{path.relative_to(ROOT)}: {pattern}"
        if any(re.search(pattern, text) for pattern in _DESCRIBES_READING):
            assert "G-Eval" in text, f"{path.relative_to(ROOT)} describes the probability reading without G-Eval"


def test_the_docs_say_why_the_default_is_what_it_is():
    text = _flat(ROOT / "docs" / "evaluation.md")
    assert f"`{DEFAULT_MODE}`, the command line's default, is **G-Eval's reading**" in text
    assert "Why the default is G-Eval's reading" in text and "`--mode reasoned`" in text
