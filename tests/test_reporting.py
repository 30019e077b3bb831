"""Tables, charts, transcripts and report files made from evaluation results."""

import csv
import json

import pytest

from evaluators.factors import FACTORS, PERSONA_FACTORS
from evaluators.judge.debate import DebateConfig
from evaluators.judge.factor_judge import JudgeConfig
from evaluators.judge.llm_scorer import debate_summary, llm_judge
from evaluators.pipeline import EvaluationSetup
from evaluators.reporting import (
    DEMO_NOTICE,
    debate_lines,
    distribution_text,
    factor_means_figure,
    factor_table,
    overall_figure,
    radar_figure,
    result_table,
    scorer_label,
    system_factor_means,
    write_reports,
)
from llm_clients.base import LLMClient
from llm_clients.remote import OpenAICompatibleModel
from storage.records import Conversation, DebateMessage, Evaluation, FactorScore, Turn


def _score(factor, score, error=None, distribution=None, rationale=""):
    return FactorScore(
        factor=factor,
        score=score,
        judge="llm:j",
        rubric_version="r",
        error=error,
        distribution=distribution,
        rationale=rationale,
    )


def _evaluation(system, overall, factor_value, *, failed=(), status="done"):
    conversation = Conversation(system_id=system, turns=[Turn("user", "hi"), Turn("system", "Heat (1995)?")])
    scores = [_score(f, None, error="server: boom") if f in failed else _score(f, factor_value) for f in FACTORS]
    evaluation = Evaluation(
        conversation_id=conversation.id,
        scorer="llm:j",
        status=status,
        overall=overall,
        rounds_used=2,
        consensus=False,
        factor_scores=scores,
        config={"debate": {"max_rounds": 4}},
    )
    return conversation, evaluation


def test_factor_table_shows_pending_failed_and_scored_factors_never_a_zero():
    table = factor_table(
        [
            _score("coherence", 3.256, distribution={"0": 0, "1": 0.05, "2": 0.1, "3": 0.4, "4": 0.45}, rationale="ok"),
            _score("naturalness", None, error="rating_parse_failure"),
        ]
    )
    assert len(table) == 12
    assert list(table.columns) == ["factor", "dimension", "score", "distribution", "rationale", "error"]
    rows = {r.factor: r for r in table.itertuples()}
    assert rows["Coherence"].score == "3.26" and rows["Coherence"].dimension == "dialogue actions"
    assert rows["Coherence"].distribution == "0:0% 1:5% 2:10% 3:40% 4:45%" and rows["Coherence"].rationale == "ok"
    assert rows["Naturalness"].score == "failed" and rows["Naturalness"].error == "rating_parse_failure"
    assert rows["Grammatical correctness"].score == "…" and rows["Grammatical correctness"].error == ""
    assert distribution_text(None) == ""


def test_radar_leaves_unscored_factors_as_gaps_and_names_the_scorer():
    figure = radar_figure([_score("coherence", 2.0), _score("novelty", None, error="x")], "llm:smol", demo=True)
    r = list(figure.data[0].r)
    assert r[0] == 2.0 and r[FACTORS.index("novelty")] is None and 0 not in r[1:]
    assert "llm:smol" in figure.layout.title.text and DEMO_NOTICE in figure.layout.title.text
    assert radar_figure([]).layout.title.text is None


def test_debate_lines_keep_rounds_in_order_and_name_the_personas():
    messages = [
        DebateMessage(round=2, role="debate_user", model="m", statement="Still 60.", score=60),
        DebateMessage(round=1, role="debate_hci", model="m", statement="", score=None, error="bad_response: no JSON"),
        DebateMessage(round=1, role="debate_user", model="m", statement="Good picks.", score=65),
    ]
    lines = debate_lines(messages)
    assert [(line.round, line.persona) for line in lines] == [(1, "HCI Expert"), (1, "Common User"), (2, "Common User")]
    assert lines[0].title == "Round 1 · HCI Expert: no valid score"
    assert lines[1].title == "Round 1 · Common User: 65/100"


def test_debate_summary_says_what_happened():
    _, evaluation = _evaluation("kbrd", 62.5, 3.0)
    assert debate_summary(evaluation) == "Overall 62.5/100 after 2 rounds, no consensus (mean of the last round)."
    evaluation.overall = None
    assert debate_summary(evaluation) == "The debate produced no valid score."
    evaluation.config = {"debate": None}
    assert debate_summary(evaluation) == "No debate was run."


def test_result_table_means_and_plots_skip_missing_scores():
    results = [
        _evaluation("kbrd", 60.0, 2.0),
        _evaluation("kbrd", 80.0, 4.0, failed=("novelty",), status="partial"),
        _evaluation("chatcrs", None, 3.0),
    ]
    table = result_table(results)
    assert list(table["system"]) == ["kbrd", "kbrd", "chatcrs"] and list(table["status"]) == ["done", "partial", "done"]
    assert table["factor_mean"].iloc[0] == 2.0 and table["novelty"].isna().iloc[1]
    means = system_factor_means(table)
    assert means.loc["kbrd", "coherence"] == 3.0 and means.loc["kbrd", "novelty"] == 2.0  # the failed one is left out
    bars = factor_means_figure(table)
    assert sorted(trace.name for trace in bars.data) == ["chatcrs", "kbrd"]
    histogram = overall_figure(table)
    assert {trace.name: len(trace.x) for trace in histogram.data} == {"chatcrs": 0, "kbrd": 2}
    assert overall_figure(result_table([])).data == ()


def test_write_reports_gives_a_csv_and_the_command_line_jsonl(tmp_path):
    results = [_evaluation("kbrd", 60.0, 2.0, failed=("novelty",), status="partial"), _evaluation("chatcrs", 75.0, 3.0)]
    csv_path, jsonl_path = write_reports(results, tmp_path / "out", labels={})
    with open(csv_path, encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [r["system"] for r in rows] == ["kbrd", "chatcrs"]
    assert rows[0]["novelty"] == "" and rows[0]["coherence"] == "2.0" and rows[1]["overall"] == "75.0"
    lines = [json.loads(line) for line in jsonl_path.read_text(encoding="utf-8").splitlines()]
    assert lines[0]["factors"]["novelty"] is None and lines[0]["errors"] == {"novelty": "server: boom"}
    assert lines[1]["conversation_id"] == results[1][0].id and lines[1]["status"] == "done"


@pytest.fixture
def remote_client(db_path):
    model = OpenAICompatibleModel("gpt-test", base_url="http://127.0.0.1:9/v1", api_key="k", max_retries=0)
    return LLMClient(model, db_path=db_path)


def test_scorer_label_flags_the_demo_model(remote_client, embedded_model, db_path):
    demo = LLMClient(embedded_model, db_path=db_path)
    remote = EvaluationSetup(llm_judge(JudgeConfig(clients=[remote_client])))
    assert scorer_label(remote) == "llm:gpt-test"
    mixed = EvaluationSetup(
        llm_judge(JudgeConfig(clients=[remote_client]), DebateConfig(clients=dict.fromkeys(PERSONA_FACTORS, demo)))
    )
    assert scorer_label(mixed) == f"llm:gpt-test; debate: {demo.name} ({DEMO_NOTICE})"
