"""The conformance checker: scripted conversations sent to a system, and a pass/fail report per rule.

``python -m crs_backends check <id or URL>`` prints it; the Settings tab shows it for every system of the
systems file. The probes (all in :data:`PROBES`): a cold start, two opposite preferences, a rejection, a
follow-up question, a non-English line and an empty history. The rules:

- ``valid_response``: every probe got an answer the protocol accepts (HTTP 200, JSON, right types, limits);
- ``in_time``: every probe answered within the time limit;
- ``text_and_items``: text and at least one item on every probe but the empty history (text there);
- ``catalog_items``: the share of returned items that map onto the catalog is at least 90%;
- ``preference_changes_ranking``: the two opposite preferences do not get the same top five;
- ``no_empty_slot``: no reply leaves a placeholder or a dangling title slot ("Have you seen ?");
- ``no_html``: no reply holds HTML markup (the app shows it as text; a CRS should send plain text);
- ``respects_rejection``: the title the user turned down is not recommended again.

The checker sends each probe once, without retries (a system that needs retries is reported as it is).
"""

from __future__ import annotations

import re
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from catalog.catalog import Catalog
from crs_backends.base import CRSSystem
from llm_clients.types import LLMError
from storage.records import Conversation, ItemRef, Turn

DEFAULT_TIME_LIMIT = 10.0
MIN_MAPPED_SHARE = 0.9
TOP = 5

RULES: dict[str, str] = {
    "valid_response": "answers every probe with a valid response",
    "in_time": "answers within the time limit",
    "text_and_items": "returns text and ranks at least one item (shown, or in its ranking)",
    "catalog_items": f"items map to the catalog (at least {MIN_MAPPED_SHARE:.0%})",
    "preference_changes_ranking": "ranking changes when the preference changes",
    "no_empty_slot": "no empty slot in the text",
    "no_html": "no HTML in the text",
    "respects_rejection": "does not recommend a rejected title again",
}

_SLOT = re.compile(
    r"<\s*(?:movie|item|title|mask|unk)\s*>|\[\s*(?:movie|item|title|mask)\s*\]|\{\s*(?:movie|item|title|\d*)\s*\}"
    r"|(?<![\w@])@\d+\b|_{2,}|\b(?:seen|watched|recommend|suggest|try)\s+[?.!,]"
    r"|\b(?:the|a|an)\s+[?!,]|\(\s*\)",
    re.IGNORECASE,
)
_HTML = re.compile(
    r"<\s*/?\s*(?!(?:movie|item|title|mask|unk)\s*>)[a-zA-Z][a-zA-Z0-9-]*(?:\s[^<>]*)?/?\s*>|<!--|&(?:lt|gt|amp|quot|#\d+);|javascript:",
    re.IGNORECASE,
)


def has_empty_slot(text: str) -> bool:
    return bool(_SLOT.search(text or ""))


def has_html(text: str) -> bool:
    return bool(_HTML.search(text or ""))


@dataclass(frozen=True)
class Probe:
    name: str
    about: str
    turns: tuple[Turn, ...]
    needs_items: bool = True


def _probes(catalog: Catalog) -> list[Probe]:
    rejected = catalog.match_name("The Godfather (1972)") or catalog.popular(1)[0]
    earlier = catalog.match_name("Heat (1995)") or catalog.popular(2)[-1]
    return [
        Probe(
            "cold_start",
            "a first message with no preference",
            (Turn("user", "Hi! Can you recommend a movie for tonight?"),),
        ),
        Probe(
            "preference_scifi",
            "a preference: science fiction in space",
            (Turn("user", "I love science fiction movies set in space, with aliens and spaceships."),),
        ),
        Probe(
            "preference_romcom",
            "the opposite preference: a light romantic comedy",
            (Turn("user", "I want a light, funny romantic comedy about falling in love."),),
        ),
        Probe(
            "rejection",
            f"the user turns down {rejected.name}",
            (
                Turn("user", "Can you recommend a crime movie?"),
                Turn("system", f"You might like {rejected.name}.", items=[rejected.ref()]),
                Turn("user", f"I have already seen {rejected.title} and I did not like it. Something else, please?"),
            ),
        ),
        Probe(
            "follow_up",
            f"a question about {earlier.name}, recommended just before",
            (
                Turn("user", "I'm looking for a tense heist movie."),
                Turn("system", f"How about {earlier.name}? It is a tense crime film.", items=[earlier.ref()]),
                Turn("user", "Who is in it, and is it very violent?"),
            ),
        ),
        Probe(
            "non_english",
            "a line in Spanish",
            (Turn("user", "¿Me recomiendas una película de animación para ver con mis hijos?"),),
        ),
        Probe("empty_history", "no turns at all: the system speaks first", (), needs_items=False),
    ]


@dataclass
class ProbeResult:
    name: str
    about: str
    seconds: float
    text: str = ""
    items: list[ItemRef] = field(default_factory=list)
    ranking: list[ItemRef] = field(default_factory=list)  # what it ranked: its whole ranking, else its items
    returned: int = 0  # items the system sent (before mapping)
    unmapped: int = 0
    error: str | None = None
    needs_items: bool = True

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class RuleResult:
    rule: str
    passed: bool
    detail: str

    @property
    def description(self) -> str:
        return RULES[self.rule]


@dataclass
class Report:
    target: str  # the system id or the URL checked
    label: str
    time_limit: float
    probes: list[ProbeResult]
    rules: list[RuleResult]

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.rules)

    def failed(self) -> list[str]:
        return [r.rule for r in self.rules if not r.passed]

    def rule(self, name: str) -> RuleResult:
        return next(r for r in self.rules if r.rule == name)

    def to_text(self) -> str:
        lines = [
            f"Conformance of {self.label} ({self.target}), {len(self.probes)} probes, time limit {self.time_limit:g} s"
        ]
        for r in self.rules:
            lines.append(f"  {'PASS' if r.passed else 'FAIL'}  {r.rule:<27} {r.description}: {r.detail}")
        lines.append("Probes:")
        for p in self.probes:
            what = f"error: {p.error}" if p.error else f"{len(p.items)} item(s) of {p.returned} sent"
            lines.append(f"  {p.name:<18} {p.seconds * 1000:7.0f} ms  {what}")
        passed = sum(r.passed for r in self.rules)
        lines.append(
            f"{passed}/{len(self.rules)} rules passed"
            + ("" if self.passed else f"; failed: {', '.join(self.failed())}")
        )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "label": self.label,
            "time_limit": self.time_limit,
            "passed": self.passed,
            "rules": [
                {"rule": r.rule, "passed": r.passed, "description": r.description, "detail": r.detail}
                for r in self.rules
            ],
            "probes": [
                {
                    "name": p.name,
                    "about": p.about,
                    "ms": round(p.seconds * 1000, 1),
                    "error": p.error,
                    "items": [i.id for i in p.items],
                    "returned": p.returned,
                    "unmapped": p.unmapped,
                }
                for p in self.probes
            ],
        }


def run_probe(system: CRSSystem, probe: Probe, *, system_id: str, domain: str) -> ProbeResult:
    conversation = Conversation(
        system_id=system_id,
        domain=domain,
        source="chat",
        turns=[Turn(t.role, t.text, items=list(t.items)) for t in probe.turns],
    )
    start = time.perf_counter()
    try:
        turn = system.respond(conversation)
    except LLMError as e:
        return ProbeResult(
            probe.name, probe.about, time.perf_counter() - start, error=str(e), needs_items=probe.needs_items
        )
    except Exception as e:  # a built-in or plug-in system that raised: the report names the type only
        return ProbeResult(
            probe.name,
            probe.about,
            time.perf_counter() - start,
            error=f"the system raised {type(e).__name__}",
            needs_items=probe.needs_items,
        )
    seconds = time.perf_counter() - start
    if not isinstance(turn, Turn):
        return ProbeResult(
            probe.name, probe.about, seconds, error="the system returned no turn", needs_items=probe.needs_items
        )
    meta = turn.metadata or {}
    returned = meta.get("items_returned", len(turn.items))
    unmapped = meta.get("items_unmapped", 0)
    return ProbeResult(
        probe.name,
        probe.about,
        seconds,
        text=turn.text or "",
        items=list(turn.items),
        ranking=list(turn.ranked()),
        returned=int(returned),
        unmapped=int(unmapped),
        needs_items=probe.needs_items,
    )


def check_system(
    system: CRSSystem, catalog: Catalog, *, target: str | None = None, time_limit: float = DEFAULT_TIME_LIMIT
) -> Report:
    """Send every probe (one after the other) and judge the answers."""
    info = system.info
    probes = _probes(catalog)
    results = [run_probe(system, p, system_id=info.id, domain=catalog.domain) for p in probes]
    return Report(
        target=target or info.id,
        label=info.label,
        time_limit=time_limit,
        probes=results,
        rules=judge(results, probes, time_limit),
    )


def judge(results: list[ProbeResult], probes: list[Probe], time_limit: float) -> list[RuleResult]:
    by_name = {r.name: r for r in results}
    answered = [r for r in results if r.ok]
    rules = []

    failed = [r for r in results if not r.ok]
    rules.append(
        RuleResult(
            "valid_response",
            not failed,
            f"{len(answered)}/{len(results)} answered" + "".join(f"; {r.name}: {r.error}" for r in failed[:3]),
        )
    )

    slow = [r for r in results if r.seconds > time_limit]
    times = [r.seconds * 1000 for r in results]
    timing = f"median {statistics.median(times):.0f} ms, slowest {max(times):.0f} ms" if times else "no probe"
    rules.append(
        RuleResult(
            "in_time",
            not slow and not any(_is_timeout(r) for r in results),
            timing + (f"; over {time_limit:g} s: {', '.join(r.name for r in slow)}" if slow else ""),
        )
    )

    # a system that asks a question first may show no list, but it must have ranked something (its ranking)
    missing = [r.name for r in results if r.ok and (not r.text.strip() or (r.needs_items and not r.ranking))]
    rules.append(
        RuleResult(
            "text_and_items",
            bool(answered) and not missing and not failed,
            "every answered probe"
            if not missing
            else f"missing on {', '.join(missing)}"
            if answered
            else "no probe answered",
        )
    )

    returned = sum(r.returned for r in answered)
    mapped = returned - sum(r.unmapped for r in answered)
    share = mapped / returned if returned else None
    rules.append(
        RuleResult(
            "catalog_items",
            share is not None and share >= MIN_MAPPED_SHARE,
            f"{mapped}/{returned} mapped ({share:.0%})" if share is not None else "no items returned",
        )
    )

    a, b = by_name.get("preference_scifi"), by_name.get("preference_romcom")
    if a and b and a.ok and b.ok and a.ranking and b.ranking:
        top_a, top_b = [i.id for i in a.ranking[:TOP]], [i.id for i in b.ranking[:TOP]]
        overlap = len(set(top_a) & set(top_b))
        rules.append(
            RuleResult(
                "preference_changes_ranking",
                top_a != top_b,
                f"top {TOP} lists share {overlap} item(s)" + (" and are identical" if top_a == top_b else ""),
            )
        )
    else:
        rules.append(RuleResult("preference_changes_ranking", False, "no list for one of the two preferences"))

    slots = [r.name for r in answered if has_empty_slot(r.text)]
    rules.append(
        RuleResult(
            "no_empty_slot",
            bool(answered) and not slots,
            f"empty slot in {', '.join(slots)}" if slots else f"{len(answered)} replies clean",
        )
    )

    html = [r.name for r in answered if has_html(r.text)]
    rules.append(
        RuleResult(
            "no_html",
            bool(answered) and not html,
            f"HTML in {', '.join(html)}" if html else f"{len(answered)} replies clean",
        )
    )

    rejection = by_name.get("rejection")
    probe = next((p for p in probes if p.name == "rejection"), None)
    turned_down = probe.turns[1].items[0].id if probe else None
    if rejection and rejection.ok:
        again = turned_down in {i.id for i in rejection.items}
        rules.append(
            RuleResult(
                "respects_rejection", not again, "the rejected title came back" if again else "not recommended again"
            )
        )
    else:
        rules.append(RuleResult("respects_rejection", False, "no answer to the rejection probe"))
    return rules


def _is_timeout(result: ProbeResult) -> bool:
    return bool(result.error) and "did not answer within" in (result.error or "")


# -- checking by id or URL ----------------------------------------------------------------------------


def is_url(target: str) -> bool:
    return "://" in target


def system_for(
    target: str, *, catalog: str | None = None, key_env: str | None = None, time_limit: float = DEFAULT_TIME_LIMIT
) -> tuple[CRSSystem, Catalog, bool]:
    """The system to check, its catalog and whether it was built for this check (then it is closed after).

    ``target``: an ad hoc http(s) URL, a systems-file id (built afresh, no retries, the time limit as timeout)
    or any other registered id. Raises KeyError for an unknown id, ValueError for a URL that is not http(s).
    """
    from catalog.catalog import get_catalog
    from crs_backends.registry import entry_of, get_system
    from crs_backends.remote_crs import RemoteConfig, RemoteCRS, http_url

    if is_url(target):
        url = http_url(target)
        chosen = get_catalog(catalog or "bundled")
        config = RemoteConfig(
            id="checked",
            label="The system checked",
            url=url,
            key_env=key_env,
            catalog=catalog,
            timeout=time_limit,
            max_retries=0,
        )
        return RemoteCRS(config, chosen), chosen, True
    entry = entry_of(target)
    if entry is not None:
        system = entry.build(max_retries=0, timeout=time_limit)
        return system, getattr(system, "catalog", None) or get_catalog(entry.catalog_name()), True
    system = get_system(target)
    return system, getattr(system, "catalog", None) or get_catalog(catalog or "bundled"), False


def check(
    target: str, *, catalog: str | None = None, key_env: str | None = None, time_limit: float = DEFAULT_TIME_LIMIT
) -> Report:
    """Check a system by id or URL (see :func:`system_for`)."""
    system, chosen, owned = system_for(target, catalog=catalog, key_env=key_env, time_limit=time_limit)
    try:
        return check_system(system, chosen, target=target, time_limit=time_limit)
    finally:
        close = getattr(system, "close", None)
        if owned and close is not None:
            close()


_reports: dict[str, tuple[float, Report]] = {}  # cache: system id -> (when, report), for the Settings tab
_reports_lock = threading.Lock()


def cached_check(system_id: str, *, max_age: float = 60.0) -> Report:
    """:func:`check` for a registered id, reusing a report younger than ``max_age`` seconds (the Settings
    tab's button must not let anyone flood a remote system)."""
    with _reports_lock:
        found = _reports.get(system_id)
        if found and time.monotonic() - found[0] < max_age:
            return found[1]
        report = check(system_id)
        _reports[system_id] = (time.monotonic(), report)
        return report


# -- the Settings tab's table --------------------------------------------------------------------------

TABLE_COLUMNS = ["system", "rule", "result", "detail"]


def registered_table(*, max_age: float = 60.0) -> list[list[str]]:
    """One row per rule for every system of the systems file (reports younger than ``max_age`` s reused);
    a system that cannot be checked gets one row saying why. No URL and no key appear."""
    from crs_backends.systems_file import registered

    rows: list[list[str]] = []
    for entry in registered():
        name = f"{entry.label} ({entry.id})"
        try:
            report = cached_check(entry.id, max_age=max_age)
        except Exception as e:  # e.g. a plug-in that cannot be loaded: SystemUnavailable says why in words
            rows.append([name, "—", "not checked", str(e) if isinstance(e, RuntimeError) else type(e).__name__])
            continue
        rows += [[name, r.rule, "pass" if r.passed else "FAIL", r.detail] for r in report.rules]
    return rows


def registered_summary() -> str:
    """Markdown lines about the systems file: which systems, what kind, whether their key variable is set."""
    import os

    from crs_backends.systems_file import ENV, configured_path, registered

    path = configured_path()
    if path is None:
        return (
            f"No systems file: set `{ENV}` to a TOML file to register remote (HTTP) systems and plug-ins "
            "(see docs/remote-crs.md). Only the operator can register systems."
        )
    lines = []
    for e in registered():
        how = "HTTP" if e.kind == "http" else f"plug-in `{e.entry_point}`"
        if e.key_env:
            how += f", key from `{e.key_env}` ({'set' if os.environ.get(e.key_env) else 'not set'})"
        lines.append(f"- **{_md(e.label)}** (`{e.id}`): {_md(e.variant)} — {how}")
    return f"Systems file `{path.name}`: {len(lines)} system(s).\n\n" + "\n".join(lines)


def _md(text: str) -> str:
    import html

    return html.escape(text, quote=False).replace("*", "\\*").replace("_", "\\_").replace("`", "'")
