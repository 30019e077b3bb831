"""One way through batch evaluation: the command line and the Evaluate tab give the same results for one
upload, a repeated id is judged once, and a conversation whose scorer fails is reported while the rest
are judged (issue #13: one failure used to stop a whole command-line batch). Also the Chat tab's
judgement stream, and that the app's proxy scorer loads without the scikit-learn fitting module."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from catalog.catalog import load_bundled
from commands import cli
from evaluators.factors import FACTORS
from evaluators.pipeline import EvaluationSetup
from evaluators.proxy import scorer as proxy_scorer
from evaluators.proxy.scorer import load_proxy_judge
from evaluators.service import INTERNAL_ERROR, DebateSaid, FactorScored, Failed, Finished, judge_stream, select
from storage.records import Conversation, ItemRef, Turn
from ui.evaluate_tab import evaluate_upload
from ui.services import Services

COMPARED = ("conversation_id", "scorer", "status", "overall", "factor_mean", "factors", "errors", "metrics")


def _conversation(cid: str, reply: str, *, system: bool = True) -> Conversation:
    turns = [Turn("user", "I want a tense heist movie.")]
    if system:
        turns.append(Turn("system", reply, items=[ItemRef("heat-1995", "Heat (1995)")]))
        turns.append(Turn("user", "Sounds good, thanks!"))
    return Conversation(system_id="kbrd", id=cid, turns=turns)


@pytest.fixture
def upload(tmp_path):
    """Five records: two good ones, a repeat of the first id, one the scorer fails on, one with no reply."""
    records = [
        _conversation("a", "Try Heat (1995), a tense crime story starring Al Pacino and Robert De Niro."),
        _conversation("b", "Heat (1995)? It is a heist film."),
        _conversation("a", "A different reply under a repeated id."),
        _conversation("boom", "Heat (1995) is a crime film by Michael Mann."),
        _conversation("quiet", "", system=False),
    ]
    path = tmp_path / "upload.jsonl"
    path.write_text("".join(json.dumps(c.to_dict()) + "\n" for c in records), encoding="utf-8")
    return path


@pytest.fixture
def failing_scorer(monkeypatch):
    """The proxies raise (as a scorer bug would) for the conversation with id ``boom``."""
    real = proxy_scorer.proxy_scores

    def proxies(conversation, catalog, **kwargs):
        if conversation.id == "boom":
            raise RuntimeError("proxy bug on purpose")
        return real(conversation, catalog, **kwargs)

    monkeypatch.setattr(proxy_scorer, "proxy_scores", proxies)


def _rows(path) -> dict[str, dict]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {r["conversation_id"]: {k: r[k] for k in COMPARED} for r in rows}


def test_the_command_line_and_the_evaluate_tab_give_the_same_results(upload, failing_scorer, tmp_path, caplog):
    out = tmp_path / "cli.jsonl"
    result = CliRunner().invoke(
        cli,
        ["evaluate", str(upload), "--scorer", "proxy", "--workers", "2", "--db", str(tmp_path / "cli.db")]
        + ["--out", str(out)],
    )
    assert result.exit_code == 1, result.output  # the batch finished, and says that one conversation failed
    assert f"failed boom: {INTERNAL_ERROR}" in result.output
    assert "skipped a: uploaded more than once (judged once)" in result.output
    assert "skipped quiet: no system turn to judge" in result.output
    assert "evaluated 2 conversation(s): 2 complete, 0 with gaps (run again to fill them), 2 skipped, 1 failed" in (
        result.output
    )
    assert "proxy bug on purpose" not in result.output  # logged, not shown
    assert "proxy bug on purpose" in caplog.text
    from_cli = _rows(out)

    status, table, _, _, files = evaluate_upload(
        Services(db_path=tmp_path / "app.db"), [str(upload)], "auto", "probability", False, 1, 0, "proxy"
    )
    assert f"Failed: boom: {INTERNAL_ERROR}" in status
    assert "a: uploaded more than once (judged once)" in status and "quiet: no system turn to judge" in status
    assert "Evaluated **2** conversation(s): 2 complete" in status
    assert list(table["conversation_id"]) == ["a", "b"]
    from_app = _rows(next(Path(p) for p in files if Path(p).name == "results.jsonl"))

    assert set(from_cli) == {"a", "b"}
    assert from_app == from_cli
    assert all(r["scorer"] == "proxy" and len(r["factors"]) == len(FACTORS) for r in from_cli.values())
    # the repeat was judged as its first occurrence says, in both
    assert from_cli["a"]["metrics"]["proxy_features"] == from_app["a"]["metrics"]["proxy_features"]


def test_select_keeps_the_first_of_a_repeated_id_and_applies_the_limit_to_judgeable_ones():
    first, again = _conversation("a", "Heat (1995)?"), _conversation("a", "other")
    chosen, skipped = select([_conversation("q", "", system=False), first, again, _conversation("b", "Heat?")], limit=1)
    assert chosen == [first]
    assert skipped == ["q: no system turn to judge", "a: uploaded more than once (judged once)"]


def test_the_judgement_stream_yields_each_factor_then_the_evaluation(db_path):
    setup = EvaluationSetup(load_proxy_judge(), catalog=load_bundled())
    events = list(judge_stream(_conversation("s", "Try Heat (1995), a crime story."), setup, db_path=db_path))
    factors = [e for e in events if isinstance(e, FactorScored)]
    assert [e.score.factor for e in factors] == list(FACTORS)
    assert not any(isinstance(e, DebateSaid) for e in events)  # the proxy has no debate
    assert isinstance(events[-1], Finished) and events[-1].evaluation.status == "done"
    # the last event always settles; whether a factor event does depends on how far the scorer's thread ran ahead
    # (all twelve proxy factors can be queued before the first is read, seen under load), so it is not asserted
    assert events[-1].settled
    again = list(judge_stream(_conversation("s", "Try Heat (1995), a crime story."), setup, db_path=db_path))
    assert again[-1].evaluation.id == events[-1].evaluation.id  # stored and reused: replayed, not redone


def test_the_judgement_stream_ends_with_a_safe_reason_when_the_scorer_fails(db_path, failing_scorer):
    setup = EvaluationSetup(load_proxy_judge(), catalog=load_bundled())
    events = list(judge_stream(_conversation("boom", "Heat (1995)."), setup, db_path=db_path))
    assert events == [Failed(INTERNAL_ERROR)]


def test_the_runtime_proxy_scorer_does_not_load_the_fitting_module():
    code = (
        "import sys; import evaluators.scorer_setup, evaluators.service, evaluators.proxy.scorer; "
        "evaluators.proxy.scorer.load_proxy_judge(); print('evaluators.proxy.calibration' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
