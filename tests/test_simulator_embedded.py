"""A short real simulation: the embedded model plays the user against the retrieval baseline, 3 ReDial records.

No fake server: every simulator and persuasiveness call runs SmolLM2-135M in-process (ChatCRS is left out
to keep the test short on two shared cores; the fake-server tests cover it). Dialogues are cut to two
system turns; the scores mean nothing (135M demo model), the path is what is checked.
"""

from __future__ import annotations

import pytest

from evaluators.simulator import SimulationConfig, run_simulation
from storage.conversations import get_conversation
from storage.db import get_db
from storage.simulations import run_dialogues


@pytest.fixture
def embedded_only(monkeypatch):
    for key in ("CRS_CATALOG", "CRS_LLM_MODEL", "CRS_LLM_SIMULATOR_MODEL", "CRS_LLM_CRS_MODEL"):
        monkeypatch.delenv(key, raising=False)


@pytest.mark.timeout(900)  # a handful of 135M calls: seconds on two free cores, minutes on a busy machine
def test_three_redial_records_with_the_embedded_model(shared_data, embedded_model, embedded_only, db_path, tmp_path):
    config = SimulationConfig(
        systems=["retrieval"],
        dataset="redial",
        n=3,
        protocol="free",
        max_turns=2,
        seed=0,
        concurrency=2,
        out_dir=tmp_path / "report",
    )
    result = run_simulation(config, db_path=db_path)
    assert result.report["notes"][-1].startswith("The simulated user runs the embedded 135M demo model")
    rows = run_dialogues(get_db(db_path), result.run_id)
    assert len(rows) == 3 and {r["system_id"] for r in rows} == {"retrieval"}
    assert all(r["status"] in ("done", "error") for r in rows), [r["error"] for r in rows]
    done = [r for r in rows if r["status"] == "done"]
    assert len(done) >= 2, [r["error"] for r in rows]
    assert result.counts["evaluated"] == len(done)
    for row in done:
        conversation = get_conversation(get_db(db_path), row["conversation_id"])
        assert conversation.source == "simulation" and conversation.targets and conversation.history
        assert 1 <= row["result"]["system_turns"] <= 2
        assert all(t.text.strip() for t in conversation.turns)
        assert all(t.items for t in conversation.turns if t.role == "system")
        for t in conversation.turns:  # no unredacted target title in what the simulated user wrote
            if t.metadata.get("source") == "simulator" and t.metadata.get("situation") != "accept":
                assert all(
                    target.title.split(" (")[0].lower() not in t.text.lower()
                    for target in conversation.targets
                    if len(target.title) > 12
                )
        p = row["result"]["persuasiveness"]
        assert (p["score"] is not None and 0 <= p["score"] <= 2) or (isinstance(p["error"], str) and p["error"])
    judged = [r["result"]["persuasiveness"]["score"] for r in done]
    assert any(score is not None for score in judged), [r["result"]["persuasiveness"]["error"] for r in done]
    assert (tmp_path / "report" / "report.html").exists()
    summary = {r["system"]: r for r in result.report["summary_records"]}
    assert summary["retrieval"]["dialogues"] == 3
