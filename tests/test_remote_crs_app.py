"""Bring your own CRS, end to end: systems described only in a systems file (an HTTP system on the reference
server, a broken one, a plug-in) chat in the real app (gradio_client), fight in the arena, are simulated from
the command line, reach the leaderboard, and get the checker's report on the Settings tab."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from app_server import AppServer
from crs_fault_server import FaultServer
from crs_plugin_install import install_toy_plugin
from gradio_client import Client
from reference_crs import ReferenceServer
from simulator_script import RoutedFake, fake_env

from storage.conversations import get_conversation
from storage.db import open_db

ROOT = Path(__file__).resolve().parent.parent
KEY = "sk-remote-app-7c41d9e2"
RECORDS = [
    {"dialog_id": "1", "turn_id": 1, "context": ["Hi! Any good sci-fi?"], "rec": ["Inception (2010)"]},
    {"dialog_id": "3", "turn_id": 1, "context": ["Something for the kids?"], "rec": ["Toy Story (1995)"]},
]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("byo")
    paths = install_toy_plugin(tmp / "site")
    with (
        RoutedFake() as fake,
        ReferenceServer(("127.0.0.1", 0), key=KEY) as reference,
        FaultServer("invalid_json") as broken,
    ):
        systems = tmp / "systems.toml"
        systems.write_text(
            f"""\
[[system]]
id = "my_crs"
label = "My CRS"
description = "keyword overlap over the bundled catalog"
url = "{reference.url}"
key_env = "MY_CRS_KEY"
timeout = 10
max_retries = 1

[[system]]
id = "broken_crs"
label = "Broken CRS"
url = "{broken.url}"
max_retries = 0

[[system]]
id = "toy"
label = "Toy plug-in"
entry_point = "toy"
""",
            encoding="utf-8",
        )
        env = fake_env(fake) | {
            "CRS_SYSTEMS_FILE": str(systems),
            "MY_CRS_KEY": KEY,
            "PYTHONPATH": os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")]),
            "CRS_DATA_DIR": str(tmp / "no_data"),
        }
        with AppServer(tmp / "app.db", env=env) as server:
            yield {"server": server, "env": env, "tmp": tmp, "reference": reference, "broken": broken}


def test_a_system_from_the_file_chats_in_the_app(setup):
    server = setup["server"]
    client = Client(server.url, verbose=False)
    variant = client.predict("my_crs", api_name="/new_conversation")[-1]
    assert "My CRS" in variant and "keyword overlap over the bundled catalog" in variant
    chat, items, status, conversation_id, box = client.predict(
        "I love science fiction movies set in space, with aliens", "my_crs", api_name="/chat"
    )
    assert status == "" and box == "" and [m["role"] for m in chat] == ["user", "assistant"]
    assert "sci-fi" in str(chat[-1]["content"])
    titles = [row[items["headers"].index("title")] for row in items["data"]]
    genres = [row[items["headers"].index("genres")] for row in items["data"]]
    assert len(titles) == 10 and all("Sci-Fi" in g for g in genres[:3])
    conversation = get_conversation(open_db(server.db_path), conversation_id)
    assert conversation.system_id == "my_crs" and [t.role for t in conversation.turns] == ["user", "system"]
    assert conversation.turns[1].metadata["system_version"] == "reference-crs 1.0"
    assert len(conversation.turns[1].items) == 10 and conversation.turns[1].metadata["remote"]
    # the version the system reported joins the variant line once it has answered
    assert "version reference-crs 1.0" in client.predict("my_crs", api_name="/new_conversation")[-1]


def test_a_plugin_from_the_file_chats_in_the_app(setup):
    client = Client(setup["server"].url, verbose=False)
    chat, items, status, _, _ = client.predict("Any good horror?", "toy", api_name="/chat")
    assert status == "" and "Hello! Try" in str(chat[-1]["content"]) and items["data"]


def test_a_broken_system_gives_a_clear_message_and_stores_no_turn(setup):
    server = setup["server"]
    client = Client(server.url, verbose=False)
    chat, items, status, conversation_id, box = client.predict("A comedy, please", "broken_crs", api_name="/chat")
    assert "Broken CRS sent a response that is not valid JSON; nothing was stored." in status
    assert "Your message is saved" in status and box == "A comedy, please"
    assert "Traceback" not in status and "<html>" not in status and "127.0.0.1" not in status
    stored = get_conversation(open_db(server.db_path), conversation_id)
    assert [t.role for t in stored.turns] == ["user"] and "not valid JSON" in stored.metadata["last_error"]


def test_it_fights_in_the_arena_and_reaches_the_leaderboard(setup):
    client = Client(setup["server"].url, verbose=False)
    revealed = None
    for _ in range(10):  # ten pairs among five systems: the fewest-battles rule reaches a my_crs pair in time
        client.predict(api_name="/arena_new")
        chat_a, chat_b, status, _ = client.predict("A tense heist movie, please", api_name="/arena_send")
        assert "my_crs" not in str((chat_a, chat_b)).lower() and "my crs" not in str((chat_a, chat_b)).lower()
        if status:  # one side is the broken system: no vote possible, next battle
            assert "could not answer" in status
            continue
        client.predict("", api_name="/arena_vote_tie")
        _, _, name_a, name_b, _ = client.predict(api_name="/arena_reveal")  # skip the ratings: the names follow
        if "my_crs" in name_a + name_b:
            revealed = name_a + name_b
            break
    assert revealed and "My CRS" in revealed
    table = client.predict("All", "All", None, api_name="/leaderboard")[0]
    systems = [row[table["headers"].index("System")] for row in table["data"]]
    assert "my_crs" in systems


def test_it_is_simulated_and_its_rows_reach_the_leaderboard(setup):
    server, tmp = setup["server"], setup["tmp"]
    records = tmp / "records.jsonl"
    records.write_text("\n".join(json.dumps(r) for r in RECORDS) + "\n", encoding="utf-8")
    out = tmp / "sim"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRS_LLM_")} | server.env
    done = subprocess.run(
        [
            # quiet: 4 s; the bound below is 10x that or more
            sys.executable,
            "-m",
            "evaluators",
            "simulate",
            "--systems",
            "my_crs",
            "--dataset",
            str(records),
            "--n",
            "2",
            "--protocol",
            "free",
            "--scorer",
            "proxy",
            "--out",
            str(out),
            "--db",
            str(server.db_path),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 dialogue(s) done" in done.stdout + done.stderr
    assert "my_crs" in (out / "summary.csv").read_text(encoding="utf-8")
    table = Client(server.url, verbose=False).predict("All", "All", None, api_name="/leaderboard")[0]
    rows = {r[table["headers"].index("System")]: dict(zip(table["headers"], r)) for r in table["data"]}
    assert rows.get("my_crs", {}).get("Simulations") == "2", table


def test_the_settings_tab_shows_the_checker_report(setup):
    client = Client(setup["server"].url, verbose=False)
    table = client.predict(api_name="/settings_conformance")
    rows = [dict(zip(table["headers"], r)) for r in table["data"]]
    mine = {r["rule"]: r["result"] for r in rows if r["system"] == "My CRS (my_crs)"}
    broken = {r["rule"]: r["result"] for r in rows if r["system"] == "Broken CRS (broken_crs)"}
    assert len(mine) == 8 and set(mine.values()) == {"pass"}
    assert broken["valid_response"] == "FAIL" and broken["in_time"] == "pass"
    assert {r["system"] for r in rows} == {"My CRS (my_crs)", "Broken CRS (broken_crs)", "Toy plug-in (toy)"}
    assert setup["reference"].url not in str(table)


def test_the_key_is_never_stored_logged_or_shown(setup):
    server = setup["server"]
    assert KEY.encode() not in Path(server.db_path).read_bytes()
    assert KEY not in Path(server.log_path).read_text(encoding="utf-8", errors="replace")
    client = Client(server.url, verbose=False)
    assert KEY not in str(client.predict(api_name="/settings_health"))


def test_a_bad_systems_file_stops_the_start_with_its_line(tmp_path):
    bad = tmp_path / "systems.toml"
    bad.write_text(
        '[[system]]\nid = "a"\nlabel = "A"\nurl = "http://127.0.0.1:9/"\n\n[[system]]\nid = "a"\n'
        'label = "B"\nurl = "http://127.0.0.1:9/"\n',
        encoding="utf-8",
    )
    with pytest.raises(RuntimeError) as err:
        with AppServer(tmp_path / "app.db", env={"CRS_SYSTEMS_FILE": str(bad)}, startup_timeout=60):
            pass
    assert f"CRS Arena cannot start: {bad}:7: duplicate id 'a' (first used on line 2)" in str(err.value)
    assert "Traceback" not in str(err.value)  # one line for the operator, no Python trace
