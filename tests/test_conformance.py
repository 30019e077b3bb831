"""The conformance checker (`python -m crs_backends check`) against the reference server and deliberately
broken ones, over real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from crs_fault_server import FaultServer

from commands import cli
from crs_backends import registry
from crs_backends.conformance import RULES, check, has_empty_slot, has_html
from crs_backends.systems_file import load_systems_file, registry_entries

ROOT = Path(__file__).resolve().parent.parent


def test_the_reference_server_passes_every_rule():
    with FaultServer("ok") as server:
        report = check(server.url)
    assert report.passed, report.to_text()
    assert [r.rule for r in report.rules] == list(RULES)
    assert [p.name for p in report.probes] == [
        "cold_start",
        "preference_scifi",
        "preference_romcom",
        "rejection",
        "follow_up",
        "non_english",
        "empty_history",
    ]
    assert server.requests == 7  # one request per probe, no retries
    assert server.bodies[-1]["turns"] == []  # the empty history
    assert "100%" in report.rule("catalog_items").detail
    assert "8/8 rules passed" in report.to_text()


@pytest.mark.parametrize(
    "fault, failed",
    [
        ("html", ["no_html"]),
        ("empty_slot", ["no_empty_slot"]),
        ("same_list", ["preference_changes_ranking", "respects_rejection"]),  # one list: it holds the rejected title
        ("rejected_again", ["respects_rejection"]),
        ("no_items", ["text_and_items", "catalog_items", "preference_changes_ranking"]),
        ("unmapped", ["text_and_items", "catalog_items", "preference_changes_ranking"]),
        ("status:500", [r for r in RULES if r != "in_time"]),  # quick failures are still in time
        ("invalid_json", [r for r in RULES if r != "in_time"]),
    ],
)
def test_a_broken_server_fails_the_rules_it_breaks(fault, failed):
    with FaultServer(fault) as server:
        report = check(server.url, time_limit=5)
    assert report.failed() == failed, report.to_text()
    assert server.requests == 7


def test_a_slow_server_fails_in_time():
    with FaultServer("slow:0.7") as server:
        report = check(server.url, time_limit=0.4)
    assert {"in_time", "valid_response"} <= set(report.failed())
    assert "did not answer within 0.4 s" in report.rule("valid_response").detail


def test_checking_a_registered_system_by_id(tmp_path, monkeypatch):
    with FaultServer("html") as server:
        path = tmp_path / "systems.toml"
        path.write_text(
            f'[[system]]\nid = "my_crs"\nlabel = "My CRS"\nurl = "{server.url}"\nmax_retries = 3\n', encoding="utf-8"
        )
        for system_id, value in registry_entries(load_systems_file(path)).items():
            monkeypatch.setitem(registry.SYSTEMS, system_id, value)
        report = check("my_crs")
    assert report.label == "My CRS" and report.target == "my_crs" and report.failed() == ["no_html"]
    baseline = check("retrieval")  # built-in systems can be checked too
    assert baseline.rule("valid_response").passed and baseline.rule("catalog_items").passed


def test_the_command_prints_the_report_and_exits_by_the_result():
    with FaultServer("ok") as good, FaultServer("html") as bad:
        passed = CliRunner().invoke(cli, ["check", good.url])
        failed = CliRunner().invoke(cli, ["check", bad.url, "--json"])
    assert passed.exit_code == 0 and "PASS  no_html" in passed.output and "8/8 rules passed" in passed.output
    assert failed.exit_code == 1
    data = json.loads(failed.output)
    assert data["passed"] is False and [r["rule"] for r in data["rules"] if not r["passed"]] == ["no_html"]
    refused = CliRunner().invoke(cli, ["check", "ftp://127.0.0.1/crs"])
    assert refused.exit_code == 2 and "only http:// and https://" in refused.output
    unknown = CliRunner().invoke(cli, ["check", "nope"])
    assert unknown.exit_code == 2 and "unknown system 'nope'" in unknown.output


def test_crs_arena_check_as_a_process(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRS_LLM_")}
    env.update({"CRS_NEURAL_BUILD": "never", "CRS_ARENA_DB": str(tmp_path / "x.db"), "HF_HUB_OFFLINE": "1"})
    with FaultServer("empty_slot") as server:
        done = subprocess.run(
            [sys.executable, str(ROOT / "commands.py"), "check", server.url],  # crs-arena check
            # quiet: about 1 s; the bound below is 10x that or more
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 1, done.stderr
    assert "FAIL  no_empty_slot" in done.stdout and "7/8 rules passed; failed: no_empty_slot" in done.stdout


def test_slot_and_html_detectors():
    for text in (
        "Have you seen ?",
        "I recommend <movie>.",
        "Try [MOVIE] tonight",
        "You'll love @12345",
        "Watch __ now",
        "Try the , it is good",
    ):
        assert has_empty_slot(text), text
    for text in ("Have you seen Heat (1995)?", "I'd recommend it.", "Try Se7en, email me@example.org", "Who is in it?"):
        assert not has_empty_slot(text), text
    for text in ("<b>Heat</b>", "<script>x</script>", "a <img src=x onerror=y>", "&lt;b&gt;", "javascript:go()"):
        assert has_html(text), text
    for text in ("I rate it 5 < 6 > 4", "Heat (1995) & Ronin", "Tom & Jerry"):
        assert not has_html(text), text
