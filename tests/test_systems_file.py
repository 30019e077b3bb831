"""The operator's systems file (CRS_SYSTEMS_FILE) and plug-ins (entry points in crs_arena.systems): what is
registered, what is refused at start (with the line), and that registered systems reach the registry."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ci_mode import skip_or_fail
from crs_fault_server import FaultServer
from crs_plugin_install import install_toy_plugin

from crs_backends import plugins, registry
from crs_backends.plugins import PluginSystem
from crs_backends.remote_crs import RemoteCRS, RemoteCRSError
from crs_backends.session import ChatSession, UserMessage
from crs_backends.systems_file import SystemsFileError, load_systems_file, registry_entries
from storage.records import Conversation, Turn

ROOT = Path(__file__).resolve().parent.parent

GOOD = """\
# two systems registered by the operator
[[system]]
id = "my_crs"
label = "My CRS"
description = "keyword overlap, v1"
url = "{url}"
key_env = "MY_CRS_KEY"
timeout = 5
max_retries = 1

[[system]]
id = "toy"
label = "Toy plug-in"
entry_point = "toy"
list_size = 5
[system.options]
greeting = "Howdy"
"""


@pytest.fixture
def toy_plugin(tmp_path, monkeypatch):
    """The toy package's entry points, registered at test time."""
    for path in install_toy_plugin(tmp_path / "site"):
        monkeypatch.syspath_prepend(path)
    yield
    sys.modules.pop("toy_crs_plugin", None)


def write(tmp_path, text: str) -> Path:
    path = tmp_path / "systems.toml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_a_good_file_registers_an_http_system_and_a_plugin(tmp_path, toy_plugin):
    entries = load_systems_file(
        write(tmp_path, GOOD.format(url="http://127.0.0.1:8800/")),
        reserved=registry.NEURAL,
        env={"CRS_LLM_TIMEOUT": "30"},
    )
    http, toy = entries
    assert (http.id, http.label, http.kind, http.line, http.url) == (
        "my_crs",
        "My CRS",
        "http",
        2,
        "http://127.0.0.1:8800/",
    )
    assert (http.key_env, http.timeout, http.max_retries, http.variant) == ("MY_CRS_KEY", 5.0, 1, "keyword overlap, v1")
    assert (toy.kind, toy.entry_point, toy.list_size, toy.options, toy.line) == (
        "plugin",
        "toy",
        5,
        {"greeting": "Howdy"},
        11,
    )
    defaults = load_systems_file(
        write(tmp_path, '[[system]]\nid = "x"\nlabel = "X"\nurl = "https://crs.example/"\n'),
        env={"CRS_LLM_TIMEOUT": "30", "CRS_LLM_MAX_RETRIES": "1"},
    )[0]
    assert (defaults.timeout, defaults.max_retries, defaults.list_size) == (30.0, 1, 10)


BAD = [
    ('[[system]]\nid = "a"\nlabel = "A"\nurl = "http://h/"\nurll = "http://h/"\n', 5, "unknown key 'urll'"),
    (
        '[[system]]\nid = "a"\nlabel = "A"\nurl = "http://h/"\n\n[[system]]\nid = "a"\nlabel = "B"\nurl = "http://h/"\n',
        7,
        "duplicate id 'a' (first used on line 2)",
    ),
    ('[[system]]\nid = "kbrd"\nlabel = "Mine"\nurl = "http://h/"\n', 2, "duplicate id 'kbrd': a built-in system"),
    (
        '[[system]]\nid = "a"\nlabel = "A"\nurl = "http://h/"\n[[system]]\nid = "b"\nlabel = "a"\nurl = "http://h/"\n',
        7,
        "duplicate label 'a'",
    ),
    ('[[system]]\nid = "a"\nlabel = "A"\nurl = "ftp://h/crs"\n', 4, "only http:// and https://"),
    ('[[system]]\nid = "a"\nlabel = "A"\nurl = "file:///etc/passwd"\n', 4, "only http:// and https://"),
    (
        '[[system]]\nid = "a"\nlabel = "A"\nurl = "http://h/"\nkey_env = "sk-live-abcdef123"\n',
        5,
        "NAME of an environment variable",
    ),
    ('[[system]]\nid = "a"\nurl = "http://h/"\n', 1, "'label' is required"),
    ('[[system]]\nid = "A B"\nlabel = "A"\nurl = "http://h/"\n', 2, "'id' is required: lower-case"),
    ('[[system]]\nid = "a"\nlabel = "A"\n', 1, "needs a 'url'"),
    ('[[system]]\nid = "a"\nlabel = "A"\nurl = "http://h/"\ntimeout = "fast"\n', 5, "'timeout' must be a number"),
    ('[[system]]\nid = "a"\nlabel = "A"\nurl = "http://h/"\nmax_retries = 99\n', 5, "'max_retries' must be"),
    (
        '[[system]]\nid = "a"\nlabel = "A"\nurl = "http://h/"\nentry_point = "toy"\n',
        5,
        "either a 'url' (HTTP) or an 'entry_point' (plug-in), not both",
    ),
    (
        '[[system]]\nid = "a"\nlabel = "A"\nkind = "http"\nentry_point = "toy"\n',
        5,
        "key 'entry_point' does not apply to an HTTP system",
    ),
    (
        '[[system]]\nid = "a"\nlabel = "A"\nentry_point = "not_installed"\n',
        4,
        "no installed package provides the plug-in 'not_installed'",
    ),
    ('[[system]]\nid = "a"\nlabel = "A"\nkind = "grpc"\nurl = "http://h/"\n', 4, "'kind' must be one of"),
    ('[[system]]\nid = "a"\nlabel = "A"\nurl = "http://h/"\ncatalog = "nowhere"\n', 5, "no catalog 'nowhere'"),
    ('systems_dir = "x"\n[[system]]\nid = "a"\nlabel = "A"\nurl = "http://h/"\n', 1, "unknown key 'systems_dir'"),
    ('[[system]]\nid = "a"\nlabel = "A"\nurl = "http://h/\n', 4, "not valid TOML"),
    ('[[system]]\nid = "a"\nlabel = "A"\nurl = "http://h/"\n[system.options]\nx = 1\n', 5, "'options' does not apply"),
]


@pytest.mark.parametrize("text, line, says", BAD)
def test_a_bad_file_is_refused_with_its_line(tmp_path, toy_plugin, text, line, says):
    path = write(tmp_path, text)
    with pytest.raises(SystemsFileError) as err:
        load_systems_file(path, reserved=registry.NEURAL)
    assert str(err.value).startswith(f"{path}:{line}: ") and says in str(err.value), str(err.value)
    assert "sk-live" not in str(err.value)  # a key pasted into the wrong field is never echoed


def test_registered_systems_reach_the_registry(tmp_path, toy_plugin, monkeypatch):
    from ui.services import Services

    entries = load_systems_file(write(tmp_path, GOOD.format(url="http://127.0.0.1:9/")))
    monkeypatch.setattr(registry, "_built", {})
    for system_id, value in registry_entries(entries).items():
        monkeypatch.setitem(registry.SYSTEMS, system_id, value)
    assert {"my_crs", "toy"} <= set(registry.system_ids()) and {"my_crs", "toy"} <= set(registry.ready_system_ids())
    assert isinstance(registry.get_system("my_crs"), RemoteCRS)  # built without a request: nothing listens on :9
    info = registry.system_info("toy")
    assert (info.id, info.label, info.variant) == ("toy", "Toy plug-in", "genre lookup")  # the plug-in's own
    choices = Services(db_path=tmp_path / "x.db").system_choices()
    assert ("My CRS · keyword overlap, v1", "my_crs") in choices and ("Toy plug-in · genre lookup", "toy") in choices


def test_a_plugin_answers_with_its_options_and_checked_items(tmp_path, toy_plugin, db_path):
    text = GOOD.format(url="http://127.0.0.1:9/").replace('greeting = "Howdy"', 'greeting = "Howdy"\ninvent = true')
    toy = load_systems_file(write(tmp_path, text))[1].build()
    assert isinstance(toy, PluginSystem) and toy.info.label == "Toy plug-in"
    *_, turn = ChatSession(toy, db_path=db_path).send(UserMessage("Any good horror?"))
    assert turn.text.startswith("Howdy! Try ") and len(turn.items) == 5
    assert all("Horror" in toy.catalog.get(i.id).genres for i in turn.items)
    assert turn.metadata["items_unmapped"] == 1 and turn.metadata["unmapped"] == [
        {"id": "nope", "title": "A Film Nobody Made (1931)"}
    ]
    assert turn.metadata["genres"] == ["Horror"] and turn.metadata["plugin"] == "toy"


def test_a_failing_plugin_gives_a_plain_message_and_logs_the_details(tmp_path, toy_plugin, caplog):
    path = write(tmp_path, '[[system]]\nid = "broken"\nlabel = "Broken"\nentry_point = "toy_broken"\n')
    system = load_systems_file(path)[0].build()
    with caplog.at_level(logging.ERROR), pytest.raises(RemoteCRSError) as err:
        system.respond(Conversation(system_id="broken", turns=[Turn("user", "hi")]))
    assert str(err.value) == "Broken failed on this turn; the details are in the server log."
    assert "secret internal detail" in caplog.text  # for the operator, not for the person chatting


def test_a_plugin_that_cannot_be_loaded_is_listed_as_not_available(tmp_path, toy_plugin, caplog):
    path = write(tmp_path, '[[system]]\nid = "gone"\nlabel = "Gone"\nentry_point = "toy_missing"\n')
    with caplog.at_level(logging.ERROR):
        system = load_systems_file(path)[0].build()
    assert system.info.variant == "not available: its plug-in 'toy_missing' could not be loaded (see the server log)"
    assert "No module named" in caplog.text
    with pytest.raises(RemoteCRSError, match="^Gone is not available: its plug-in 'toy_missing' could not be loaded"):
        system.respond(Conversation(system_id="gone", turns=[Turn("user", "hi")]))


def test_a_plugin_giving_no_turn_is_refused(tmp_path, toy_plugin, monkeypatch):
    import toy_crs_plugin

    monkeypatch.setattr(toy_crs_plugin.ToyCRS, "respond", lambda self, conversation: "just a string")
    system = load_systems_file(write(tmp_path, GOOD.format(url="http://127.0.0.1:9/")))[1].build()
    with pytest.raises(RemoteCRSError, match="invalid answer \\(not a system turn\\)"):
        system.respond(Conversation(system_id="toy", turns=[Turn("user", "hi")]))


def test_plugins_lists_installed_entry_points(toy_plugin):
    found = plugins.available()
    assert {"toy", "toy_broken"} <= set(found)
    assert plugins.describe(found["toy"]) == "toy = toy_crs_plugin:ToyCRS (toy-crs-plugin 0.1.0)"


def _run(args, env_extra, tmp_path):
    return _run_module("crs_backends", args, env_extra, tmp_path)


def _run_module(module, args, env_extra, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRS_LLM_")}
    env.update(
        {
            "CRS_NEURAL_BUILD": "never",
            "CRS_ARENA_DB": str(tmp_path / "cli.db"),
            "HF_HUB_OFFLINE": "1",
            "CRS_ARENA_CACHE": str(tmp_path / "cache"),
            **env_extra,
        }
    )
    # quiet: 2-8 s per command line (a fresh interpreter); the bound below is 10x that or more
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_command_line_lists_the_file_and_refuses_a_bad_one(tmp_path):
    with FaultServer("ok") as server:
        good = write(tmp_path, GOOD.format(url=server.url).split('[[system]]\nid = "toy"')[0])
        listed = _run(["systems"], {"CRS_SYSTEMS_FILE": str(good), "MY_CRS_KEY": "sk-not-shown-123"}, tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "my_crs" in listed.stdout and "My CRS · keyword overlap, v1" in listed.stdout
    assert "key from MY_CRS_KEY (set)" in listed.stdout and "sk-not-shown" not in listed.stdout
    assert "retrieval" in listed.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text('[[system]]\nid = "a"\nlabel = "A"\nurl = "gopher://h/"\n', encoding="utf-8")
    refused = _run(["systems"], {"CRS_SYSTEMS_FILE": str(bad)}, tmp_path)
    assert refused.returncode != 0 and f"{bad}:4: 'url': only http:// and https://" in refused.stderr


def test_every_command_line_reports_a_bad_systems_file_in_one_line_with_exit_code_2(tmp_path):
    """The file is read on first use, never at import: each command that needs the registry says
    `file:line: reason` and exits 2, without a traceback; a command that does not need it still runs."""
    bad = tmp_path / "bad.toml"
    bad.write_text('[[system]]\nid = "a"\nlabel = "A"\nurl = "gopher://h/"\n', encoding="utf-8")
    line = f"{bad}:4: 'url': only http:// and https://"
    records = tmp_path / "records.jsonl"
    records.write_text("", encoding="utf-8")
    commands = {
        "crs_backends": ["systems"],
        "crs_backends ": ["check", "retrieval"],
        "evaluators": ["simulate", "--systems", "retrieval", "--dataset", str(records), "--no-evaluate"],
    }
    for module, args in commands.items():
        done = _run_module(module.strip(), args, {"CRS_SYSTEMS_FILE": str(bad)}, tmp_path)
        assert done.returncode == 2, (module, args, done.stdout, done.stderr)
        assert line in done.stderr and "Traceback" not in done.stderr, (module, args, done.stderr)
    untouched = _run_module("evaluators", ["--help"], {"CRS_SYSTEMS_FILE": str(bad)}, tmp_path)
    assert untouched.returncode == 0 and "Traceback" not in untouched.stderr


def test_importing_the_package_reads_no_systems_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("not toml [", encoding="utf-8")
    code = "import crs_backends, crs_backends.registry, crs_backends.neural.kbrd; print('imported')"
    env = {**os.environ, "CRS_SYSTEMS_FILE": str(bad)}
    # quiet: 8 s; the bound below is 10x that or more
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "imported" in done.stdout, done.stderr


def test_a_pip_installed_plugin_is_found_by_its_entry_point(tmp_path):
    """The toy package installed for real (pip, into a target folder, offline), then checked by id."""
    import shutil

    source = tmp_path / "src"
    shutil.copytree(ROOT / "tests" / "crs_plugin_example", source)  # pip writes build files next to the source
    site = tmp_path / "site"
    pip = subprocess.run(
        [
            # quiet: 3 s; the bound below is 10x that or more
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--quiet",
            "--target",
            str(site),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    if pip.returncode != 0:  # CI's environment has setuptools: there a failed build is a failure, not a skip
        skip_or_fail(f"pip cannot build the package offline here (setuptools missing?): {pip.stderr[-300:]}")
    systems = write(tmp_path, '[[system]]\nid = "toy"\nlabel = "Toy plug-in"\nentry_point = "toy"\n')
    done = _run(["check", "toy", "--json"], {"CRS_SYSTEMS_FILE": str(systems), "PYTHONPATH": str(site)}, tmp_path)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])  # 0: every rule passed
    import json

    report = json.loads(done.stdout)
    assert report["label"] == "Toy plug-in" and report["target"] == "toy"
    rules = {r["rule"]: r["passed"] for r in report["rules"]}
    assert rules["valid_response"] and rules["catalog_items"] and rules["no_html"]
