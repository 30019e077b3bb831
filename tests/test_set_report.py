"""A small set's figures for people (crs_backends/neural/set_report.py): the README's small-set section is the report
of the set the app serves, read from its manifest; a reading becomes one row per system with its interval, the
references and people beside them, and the sentence that says whether the systems are told apart."""

from __future__ import annotations

from pathlib import Path

from crs_backends.neural import names
from crs_backends.neural.set_report import readme_section, told_apart
from crs_backends.neural.small import main

ROOT = Path(__file__).resolve().parent.parent
START, END = (
    "<!-- small-set report: python -m crs_backends.neural.small report -->",
    "<!-- end of the small-set report -->",
)


def _reading(intervals: dict[str, list[float]]) -> dict:
    """A reading as bench/crs_fidelity.py records it (its ``reading``), with made-up figures."""
    recall = {
        s: {"1": 0.03, "10": (iv[0] + iv[1]) / 2, "50": 0.35, "records": 3341, "interval_10": iv}
        for s, iv in intervals.items()
    }
    parts = {"named": {"1": 0.1, "10": 0.5, "50": 0.7}, "new": {"1": 0.01, "10": 0.11, "50": 0.3}}
    return {
        "command": "python bench/crs_fidelity.py --set assets/models/small-v9",
        "date": "2026-12-09",
        "machine": "2 cores, load average 0.4 at start",
        "test_records": 3341,
        "recall": recall,
        "references": {"popularity": {"1": 0.01, "10": 0.07, "50": 0.2}, "named first": {"1": 0.2, "10": 0.3}},
        "recall_by_gold": {**dict.fromkeys(intervals, parts), "popularity": parts},
        "top10_overlap": {"kbrd/barcor": 0.21, "kbrd/unicrs": 0.1, "barcor/unicrs": 0.15},
        "generation": {s: {"bleu2": 0.012, "distinct": {"2": 0.4, "3": 0.9}} for s in intervals},
        "people_distinct": {"2": 7.383},
    }


def test_the_readme_shows_the_report_of_the_set_the_app_serves():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert START in readme and END in readme
    shown = readme.split(START, 1)[1].split(END, 1)[0].strip()
    assert shown == readme_section(names.read_manifest_quietly(names.SHIPPED_SMALL_ROOT))


def test_a_reading_is_one_row_per_system_beside_the_references_and_people(capsys, tmp_path):
    manifest = {
        "version": "small-v9",
        "command": "python -m crs_backends.neural.small build --out assets/models/small-v9",
        "recipe": "r15",
        "redial_test": _reading({"kbrd": [0.14, 0.17], "barcor": [0.15, 0.18], "unicrs": [0.15, 0.19]}),
    }
    text = readme_section(manifest)
    assert "**small-v9** (built by `python -m crs_backends.neural.small build --out assets/models/small-v9`" in text
    assert "on 2026-12-09 (2 cores, load average 0.4 at start): 3341 ReDial test records" in text
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("| ")}
    assert (
        rows["KBRD (small)"]
        == "| KBRD (small) | .030 | .155 (.140–.170) | .350 | .500 / .110 | .028 / .169 / .366 | .012 | .400 |"
    )
    assert rows["UniCRS (small)"].split(" | ")[5] == ".050 / .215 / .413"  # the published figures beside it
    assert rows["popularity (reads no text)"].startswith(
        "| popularity (reads no text) | .010 | .070 | .200 | .500 / .110"
    )
    assert rows["named first (reads no text)"].startswith("| named first (reads no text) | .200 | .300 | – | – / –")
    assert rows["people (ReDial's replies)"].endswith("| 7.383 |")
    assert "KBRD (small) / BARCOR (small) .210" in text
    assert text.endswith("the three are not told apart on ReDial at this size.")
    # the command line prints the same text for a set's folder
    (tmp_path / "manifest.json").write_text(__import__("json").dumps(manifest), encoding="utf-8")
    assert main(["report", "--set", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == text
    assert main(["report", "--set", str(tmp_path / "nowhere")]) == 2


def test_intervals_that_do_not_overlap_tell_those_systems_apart():
    recall = _reading({"kbrd": [0.10, 0.12], "barcor": [0.15, 0.18], "unicrs": [0.16, 0.20]})["recall"]
    assert told_apart(recall) == (
        "Told apart by R@10 (intervals that do not overlap): KBRD (small) and BARCOR (small), KBRD (small) and "
        "UniCRS (small); BARCOR (small) and UniCRS (small) are not."
    )
    assert told_apart({"kbrd": recall["kbrd"]}) == "Not enough intervals to tell the systems apart."
    assert readme_section({"version": "small-v9"}) == (
        "**small-v9** (built by its build command) is not measured on ReDial's test split."
    )
