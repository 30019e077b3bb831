"""Whole evaluations: judge + debate + metrics stored, re-runs fill gaps, the command line."""

import json

import pytest
from click.testing import CliRunner
from fake_openai import Error, Reply

from catalog.catalog import load_bundled
from commands import cli
from evaluators.factors import FACTORS, PERSONA_FACTORS
from evaluators.judge.debate import DebateConfig
from evaluators.judge.factor_judge import JudgeConfig
from evaluators.judge.llm_scorer import LLMJudge, llm_judge
from evaluators.pipeline import EvaluationSetup, evaluate_conversation
from llm_clients.base import LLMClient
from llm_clients.remote import OpenAICompatibleModel
from storage.db import get_db
from storage.evaluations import get_evaluation
from storage.records import Conversation, DebateMessage, FactorScore, ItemRef, Turn

# one answer both parsers accept: the judge reads the rating tag, the debaters the JSON
# 4: a rating every factor of the default rubric accepts (core-v3's Appropriateness is 4 or 0)
BOTH = Reply('{"evaluator": "x", "statement": "Solid overall. <rating>4</rating>", "score": 70}')


@pytest.fixture(scope="module")
def catalog():
    return load_bundled()


def _conversation(system_id="chatcrs", **kw) -> Conversation:
    return Conversation(
        system_id=system_id,
        turns=[
            Turn("user", "I want a heist movie."),
            Turn(
                "system",
                "Try Heat (1995) and Ocean's Eleven (2001).",
                items=[ItemRef("heat-1995", "Heat (1995)"), ItemRef("oceans-eleven-2001", "Ocean's Eleven (2001)")],
            ),
            Turn("user", "I've seen Heat. Something else?"),
            Turn(
                "system",
                "Then Inception (2010), a heist inside dreams.",
                items=[ItemRef("inception-2010", "Inception (2010)")],
            ),
        ],
        targets=[ItemRef("inception-2010", "Inception (2010)")],
        **kw,
    )


def _client(fake, db_path, name="judge-a"):
    model = OpenAICompatibleModel(name, base_url=fake.base_url, api_key="k", max_retries=0, timeout=5)
    return LLMClient(model, db_path=db_path)


def _setup(fake, db_path, catalog, **judge) -> EvaluationSetup:
    return EvaluationSetup(
        llm_judge(
            JudgeConfig(clients=[_client(fake, db_path)], mode="reasoned", **judge),
            DebateConfig(clients={r: _client(fake, db_path, f"debater-{r}") for r in PERSONA_FACTORS}),
        ),
        catalog=catalog,
    )


def test_full_evaluation_is_stored_and_a_rerun_costs_nothing(fake_openai, db_path, catalog):
    fake_openai.default = BOTH
    seen_factors: list[FactorScore] = []
    seen_messages: list[DebateMessage] = []
    setup = _setup(fake_openai, db_path, catalog)
    ev = evaluate_conversation(
        _conversation(), setup, db_path=db_path, on_factor=seen_factors.append, on_debate=seen_messages.append
    )
    assert ev.status == "done" and ev.error is None
    assert [s.factor for s in ev.factor_scores] == list(FACTORS) and all(s.score == 4 for s in ev.factor_scores)
    assert (ev.overall, ev.rounds_used, ev.consensus) == (70.0, 1, True)
    assert len(seen_factors) == 12 and len(seen_messages) == 4
    # iEvaLM's recall reads the list of the hit (turn 2, rank 1); CoRE's session list holds it third
    assert ev.metrics["recall@1"] == 1.0 and ev.metrics["gt_hit_turn"] == 2
    # the session holds three items: R@5 is "–" (None), as iEvaLM marks a k beyond what the system returned
    assert ev.metrics["session_recall@1"] == 0.0 and ev.metrics["session_recall@5"] is None
    assert ev.usage["calls"] == 16 and ev.scorer == "llm:judge-a"
    system_turns = [k for k, t in enumerate(_conversation().turns) if t.role == "system"]
    assert [s["turn"] for s in ev.metrics["turn_scores"]] == system_turns  # the offline turn scorer's, beside it
    assert isinstance(setup.scorer, LLMJudge)
    assert ev.config["judges"] == [setup.scorer.judge.clients[0].model.key]
    requests = len(fake_openai.requests)
    again = evaluate_conversation(
        _conversation(id=ev.conversation_id), _setup(fake_openai, db_path, catalog), db_path=db_path
    )
    assert again.id == ev.id and len(fake_openai.requests) == requests
    stored = get_evaluation(get_db(db_path), ev.id)
    assert stored is not None and stored.debate[0].score == 70.0


def test_faults_keep_finished_factors_and_a_rerun_fills_only_the_gaps(fake_openai, db_path, catalog):
    fake_openai.default = BOTH
    fake_openai.enqueue(Error(500), BOTH, Error(500))  # the 1st and 3rd factor fail
    conversation = _conversation()
    ev = evaluate_conversation(conversation, _setup(fake_openai, db_path, catalog, max_concurrency=1), db_path=db_path)
    failed = [s.factor for s in ev.factor_scores if s.score is None]
    assert failed == [FACTORS[0], FACTORS[2]] and ev.status == "partial"
    assert (
        ev.error is not None and "Run again" in ev.error and all(s.error for s in ev.factor_scores if s.score is None)
    )
    before = len(fake_openai.requests)
    ev2 = evaluate_conversation(conversation, _setup(fake_openai, db_path, catalog), db_path=db_path)
    assert ev2.id == ev.id and ev2.status == "done"
    # a request the client gave up on before its body arrived (a busy machine) is recorded with no body: no judgement
    bodies = [r["json"] for r in fake_openai.requests[before:] if isinstance(r["json"], dict)]
    judged = [body for body in bodies if body["model"] == "judge-a"]
    assert len(judged) == 2  # only the two gaps were judged again
    stored = get_evaluation(get_db(db_path), ev.id)
    assert stored is not None and len(stored.debate) == 4  # the debate was redone, not appended to
    assert ev2.usage["calls"] == ev.usage["calls"] + 6


def test_a_conversation_without_a_system_turn_is_refused(fake_openai, db_path, catalog):
    with pytest.raises(ValueError, match="no system turn"):
        evaluate_conversation(
            Conversation(system_id="x", turns=[Turn("user", "hi")]),
            _setup(fake_openai, db_path, catalog),
            db_path=db_path,
        )


def test_end_to_end_with_the_embedded_model(embedded_model, db_path, catalog):
    """Plumbing only: the 135M model's scores mean nothing."""
    client = LLMClient(embedded_model, db_path=db_path)
    setup = EvaluationSetup(
        llm_judge(
            JudgeConfig(clients=[client], mode="probability"),
            DebateConfig(clients=dict.fromkeys(PERSONA_FACTORS, client), max_rounds=2),
        ),
        catalog=catalog,
    )
    ev = evaluate_conversation(_conversation(), setup, db_path=db_path)
    assert len(ev.factor_scores) == 12
    for s in ev.factor_scores:  # a distribution at the rating token, or (digit mass below 0.5) the constrained answer
        read = s.metadata["models"][0]
        assert s.error or (
            s.score is not None
            and 0 <= s.score <= 4
            and (
                s.distribution is not None and abs(sum(s.distribution.values()) - 1) < 1e-6
                if read["method"] == "logits"
                else "threshold" in read["fallback"]
            )
        )
    # the model's scores mean nothing, but the path must carry them: probability mode reads the rating token's
    # distribution, which a loaded model always gives, so most factors are scored, and an error says what failed
    scored = [s for s in ev.factor_scores if s.score is not None]
    assert len(scored) >= 6, [s.error for s in ev.factor_scores]
    assert all(s.error for s in ev.factor_scores if s.score is None)
    assert (
        ev.rounds_used is not None
        and 1 <= ev.rounds_used <= 2
        and all(m.score is None or 0 <= m.score <= 100 for m in ev.debate)
    )
    assert any(m.score is not None for m in ev.debate), [m.error for m in ev.debate]
    assert ev.status in ("done", "partial") and ev.metrics["session_list_size"] == 3


def test_command_line_evaluate_then_meta(fake_openai, db_path, tmp_path, monkeypatch):
    monkeypatch.setenv("CRS_LLM_MODEL", "judge-a")
    monkeypatch.setenv("CRS_LLM_BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("CRS_LLM_MAX_RETRIES", "0")
    fake_openai.default = BOTH
    logs = tmp_path / "logs.jsonl"
    convs = [_conversation(system_id=s) for s in ("chatcrs", "kbrd", "chatcrs")]
    convs.append(Conversation(system_id="kbrd", turns=[Turn("user", "hello?")]))  # nothing to judge
    logs.write_text("\n".join(json.dumps(c.to_dict()) for c in convs) + "\n")
    out = tmp_path / "results.jsonl"
    runner = CliRunner()
    result = runner.invoke(cli, ["evaluate", str(logs), "--out", str(out), "--db", str(db_path)])
    assert result.exit_code == 0, result.output
    assert "3 complete" in result.output and "1 skipped" in result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    # the rating 4, read with the fake endpoint's neighbour mass on 3 (its rule for an answer digit): just under 4;
    # Appropriateness, 4 or 0 under the default rubric, reads the 4 alone
    assert len(rows) == 3 and all(r["overall"] == 70.0 and 3.5 < r["factors"]["coherence"] < 4 for r in rows)
    assert all(r["factors"]["appropriateness"] == pytest.approx(4.0) for r in rows)
    human = tmp_path / "human.csv"
    human.write_text("id,value\n" + "\n".join(f"{c.id},{i}" for i, c in enumerate(convs[:3])) + "\n")
    result = runner.invoke(
        cli,
        [
            "meta",
            "--scores",
            str(out),
            "--human",
            str(human),
            "--score",
            "metric:distinct_1",
            "--boot",
            "50",
            "--out-dir",
            str(tmp_path / "meta"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "dialogue" in result.output and (tmp_path / "meta" / "factor_matrix.html").exists()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    result = runner.invoke(cli, ["evaluate", str(bad), "--db", str(db_path)])
    assert result.exit_code != 0 and "bad.jsonl" in result.output
