"""A small set's figures for people, from its manifest alone: the README's small-system section is this text for the
shipped set (``python -m crs_backends.neural.small report``; a test holds the README to it), so the README states
what ``bench/crs_fidelity.py --set`` measured on the set the app serves, and nothing else.

The section says which set, how it was built and how it was measured (command, date, machine load), then one row per
system: Recall@1/10/50 with R@10's 95% interval, R@10 on the gold items the conversation named before and on new
ones, the published figures, BLEU-2 and Distinct-2; the references that read no text (popularity, named first) and
people's replies beside them; the top-10 overlap of each pair; and whether the systems are told apart (R@10
intervals that do not overlap) or not.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import combinations
from typing import Any

from crs_backends.neural.evaluation import PUBLISHED_RECALL
from crs_backends.neural.names import SMALL_LABELS, SYSTEMS

REFERENCES = {"popularity": "popularity (reads no text)", "named first": "named first (reads no text)"}


def _f(value: Any) -> str:
    """A share as the papers print it (.169), or a dash where the manifest has none."""
    if not isinstance(value, int | float):
        return "–"
    text = f"{value:.3f}"
    return text[1:] if text.startswith("0.") else text


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def told_apart(recall: Mapping[str, Any]) -> str:
    """Whether the systems' R@10 intervals separate them: every pair named that does, or the sentence that they are
    not told apart where all overlap. A system without an interval is left out."""
    intervals = {
        s: iv for s in recall if isinstance(iv := _dict(recall[s]).get("interval_10"), list | tuple) and len(iv) == 2
    }
    if len(intervals) < 2:
        return "Not enough intervals to tell the systems apart."
    apart = [
        (a, b)
        for a, b in combinations(intervals, 2)
        if intervals[a][1] < intervals[b][0] or intervals[b][1] < intervals[a][0]
    ]
    if not apart:
        return (
            "Their R@10 intervals overlap: the three are not told apart on ReDial at this size."
            if len(intervals) == 3
            else "Their R@10 intervals overlap: they are not told apart on ReDial at this size."
        )
    pairs = ", ".join(f"{SMALL_LABELS.get(a, a)} and {SMALL_LABELS.get(b, b)}" for a, b in apart)
    together = [p for p in combinations(intervals, 2) if p not in apart]
    rest = (
        "; " + ", ".join(f"{SMALL_LABELS.get(a, a)} and {SMALL_LABELS.get(b, b)}" for a, b in together) + " are not"
        if together
        else ""
    )
    return f"Told apart by R@10 (intervals that do not overlap): {pairs}{rest}."


def readme_section(manifest: Mapping[str, Any]) -> str:
    """The markdown section for a set's manifest (see the module docstring); a set that was never measured on ReDial's
    test split says so in one line."""
    version = manifest.get("version") or "the small set"
    built = f"`{manifest['command']}`" if manifest.get("command") else "its build command"
    reading = _dict(manifest.get("redial_test"))
    if not reading:
        return f"**{version}** (built by {built}) is not measured on ReDial's test split."
    recall = _dict(reading.get("recall"))
    by_gold = _dict(reading.get("recall_by_gold"))
    generation = _dict(reading.get("generation"))
    references = _dict(reading.get("references"))
    systems = [s for s in SYSTEMS if s in recall]
    lines = [
        f"**{version}** (built by {built}, recipe {manifest.get('recipe', '?')}), measured by "
        f"`{reading.get('command', 'bench/crs_fidelity.py')}` on {reading.get('date', '?')} "
        f"({reading.get('machine', '?')}): {reading.get('test_records', '?')} ReDial test records, the test split read "
        "once for this set.",
        "",
        "| | R@1 | R@10 (95% interval) | R@50 | R@10 on named / new gold | published R@1 / R@10 / R@50 | BLEU-2 | "
        "Distinct-2 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for system in systems:
        r = _dict(recall[system])
        iv = r.get("interval_10")
        interval = f" ({_f(iv[0])}–{_f(iv[1])})" if isinstance(iv, list | tuple) and len(iv) == 2 else ""
        parts = _dict(by_gold.get(system))
        published = " / ".join(_f(v) for v in PUBLISHED_RECALL.get(system, ()))
        g = _dict(generation.get(system))
        label = SMALL_LABELS.get(system, system)
        lines.append(
            f"| {label} | {_f(r.get('1'))} | {_f(r.get('10'))}{interval} | {_f(r.get('50'))} "
            f"| {_f(_dict(parts.get('named')).get('10'))} / {_f(_dict(parts.get('new')).get('10'))} | {published} "
            f"| {_f(g.get('bleu2'))} | {_f(_dict(g.get('distinct')).get('2'))} |"
        )
    for name, label in REFERENCES.items():
        r = _dict(references.get(name))
        if not r:
            continue
        parts = _dict(by_gold.get(name))
        lines.append(
            f"| {label} | {_f(r.get('1'))} | {_f(r.get('10'))} | {_f(r.get('50'))} "
            f"| {_f(_dict(parts.get('named')).get('10'))} / {_f(_dict(parts.get('new')).get('10'))} | | | |"
        )
    people = _dict(reading.get("people_distinct"))
    if people:
        lines.append(f"| people (ReDial's replies) | | | | | | | {_f(people.get('2'))} |")
    overlap = _dict(reading.get("top10_overlap"))
    if overlap:
        pairs = ", ".join(
            f"{' / '.join(SMALL_LABELS.get(s, s) for s in pair.split('/'))} {_f(v)}" for pair, v in overlap.items()
        )
        lines += ["", f"Top-10 overlap (mean Jaccard, one test context per dialogue): {pairs}."]
    lines += ["", told_apart({s: recall[s] for s in systems})]
    return "\n".join(lines)
