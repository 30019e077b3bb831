"""The Simulate tab in the real app (`python app.py`), driven with gradio_client; models on the fake server."""

from __future__ import annotations

import json

import pytest
from app_server import AppServer
from gradio_client import Client
from simulator_script import RoutedFake, fake_env

from storage.db import open_db


@pytest.fixture
def app_with_fake(shared_data, tmp_path):
    with RoutedFake() as fake:
        env = fake_env(fake) | {"CRS_LLM_JUDGE_MODEL": "embedded", "CRS_NEURAL_BUILD": "never"}
        with AppServer(tmp_path / "app.db", env=env) as server:
            yield server, fake


def plot_traces(value) -> list[dict]:
    """The traces of a Plot output as gradio_client returns it ({"type": "plotly", "plot": JSON})."""
    assert isinstance(value, dict) and value.get("type") == "plotly", value
    return json.loads(value["plot"])["data"]


def test_simulate_tab_runs_a_batch_and_shows_the_report(app_with_fake):
    server, fake = app_with_fake
    client = Client(server.url, verbose=False)
    assert "/simulate" in client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    status, table, factors, overall, recall, files = client.predict(
        ["retrieval"], "redial", "attr", 2, 0, False, api_name="/simulate"
    )
    assert "2 dialogue(s) done" in status and "scorer(s): proxy" in status
    assert table["headers"][:3] == ["system", "done", "failed"] and table["data"][0][:2] == ["retrieval", 2]
    (bars,) = plot_traces(factors)  # the retrieval system's twelve factor means on CoRE's 0-4 scale
    assert bars["name"] == "retrieval" and len(bars["x"]) == 12 and "Coherence" in bars["x"]
    assert len(bars["y"]) == 12 and all(0 <= y <= 4 for y in bars["y"])
    (total,) = plot_traces(overall)  # the overall score, 0-100
    assert list(total["x"]) == ["retrieval"] and 0 <= total["y"][0] <= 100
    (recall_bars,) = plot_traces(recall)
    # a k beyond every list is "–" (None: no bar), as iEvaLM marks what a system did not return
    measured = [y for y in recall_bars["y"] if y is not None]
    assert "iEvaLM R@10" in recall_bars["x"] and measured and all(0 <= y <= 1 for y in measured)
    assert sorted(f.rsplit("/", 1)[-1] for f in files) == [
        "conversations.jsonl",
        "dialogues.csv",
        "report.html",
        "summary.csv",
    ]
    db = open_db(server.db_path)
    assert db["conversations"].count_where("source = 'simulation' and system_id = 'retrieval'") == 2
    again = client.predict(["retrieval"], "redial", "attr", 2, 0, False, api_name="/simulate")[0]
    assert "2 were already finished" in again  # the same settings resume: nothing is redone
    error = client.predict([], "redial", "core", 2, 0, False, api_name="/simulate")[0]
    assert "Choose at least one system" in error
