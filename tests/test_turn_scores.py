"""The offline turn scorer (#28): ordered on a hand-made pair, guarded on bad input, fitted out of fold."""

from __future__ import annotations

import numpy as np
import pytest

from catalog.catalog import load_bundled
from evaluators.proxy import calibration
from evaluators.proxy.calibration import TrainingData, cross_validate
from evaluators.proxy.features import proxy_scores
from evaluators.proxy.scorer import FEATURES, load_calibration, load_proxy_judge
from evaluators.proxy.turn_evidence import TURN_FEATURES, TurnEvidence
from evaluators.proxy.turn_scores import AGGREGATES, DEGENERATE_CAP, aggregate
from storage.records import Conversation, Turn

REQUEST = "I'd like a funny comedy movie for tonight, something like Superbad."


def scores_of(reply: str, request: str | None = REQUEST):
    turns = ([Turn("user", request)] if request is not None else []) + [Turn("system", reply)]
    verdict = load_proxy_judge().score(Conversation(system_id="x", turns=turns), load_bundled())
    [score] = verdict.turns
    return score, verdict


def test_an_on_request_reply_naming_fitting_items_scores_above_an_off_topic_one_and_a_greeting():
    fitting, _ = scores_of(
        "You might like The Hangover (2009), a hilarious comedy about a bachelor party gone wrong, "
        "or Step Brothers (2008)."
    )
    off_topic, _ = scores_of("You should watch The Exorcist (1973), a terrifying horror classic.")
    greeting, _ = scores_of("Hello! How are you today?")
    assert fitting.relevance > off_topic.relevance
    assert fitting.relevance > greeting.relevance
    assert all(0 <= s <= 2 for s in (fitting.relevance, fitting.interestingness, off_topic.relevance))


@pytest.mark.parametrize(
    ("reply", "asked", "expect"),
    [
        ("", REQUEST, "not scorable: empty reply"),
        ("Te recomiendo una película muy divertida para esta noche con tus amigos.", REQUEST, "not English"),
        ("great movie " * 900, REQUEST, "degenerate"),  # 10,800 characters of repetition
        ("I I I can can can the the the Godzilla Godzilla Godzilla", REQUEST, "gibberish"),
        ("Try Superbad (2007), a comedy.", None, ""),  # no user request before it: scored all the same
    ],
)
def test_bad_turns_get_a_defined_score_or_a_reason_and_never_a_high_score(reply, asked, expect):
    score, verdict = scores_of(reply, asked)
    assert expect in score.note
    if score.relevance is None:
        assert score.interestingness is None and score.note.startswith("not scorable")
        assert aggregate([score]) == [0.0, 0.0, 0.0, 0.0]  # counts as 0 in the conversation's aggregates
    elif expect:
        assert score.relevance <= DEGENERATE_CAP and score.interestingness <= DEGENERATE_CAP
    else:
        assert 0 <= score.relevance <= 2
    assert 0 <= verdict.overall <= 4


def test_the_shipped_calibration_reads_the_turn_aggregates():
    calibration_file = load_calibration()
    assert calibration_file.features[-len(AGGREGATES) :] == list(AGGREGATES)
    assert calibration_file.turns.features == list(TURN_FEATURES)


def _synthetic_with_turns(n: int = 40, seed: int = 2) -> TrainingData:
    """Dialogues of three system turns each, with turn labels that follow the first turn feature."""
    rng = np.random.default_rng(seed)
    turns, labels = [], []
    for _ in range(n):
        evidence = tuple(
            TurnEvidence(index=2 * k + 1, features=tuple(rng.normal(size=len(TURN_FEATURES)))) for k in range(3)
        )
        turns.append(evidence)
        labels.append({t.index: {"relevance": float(t.features[0] > 0) * 2, "interestingness": 1.0} for t in evidence})
    X = rng.normal(size=(n, len(FEATURES)))
    y = np.array([np.mean([lab["relevance"] for lab in d.values()]) * 2 for d in labels])
    return TrainingData(
        X=X,
        y=y,
        ids=[f"c{k}" for k in range(n)],
        systems=[f"s{k % 4}" for k in range(n)],
        users=[f"u{k // 2}" for k in range(n)],
        A=np.empty((0, len(FEATURES))),
        B=np.empty((0, len(FEATURES))),
        outcome=np.empty(0),
        vote_users=[],
        datasets=["redial"] * n,
        turns=turns,
        turn_labels=labels,
    )


def test_cross_validation_never_fits_the_turn_scorer_on_a_held_out_dialogue(monkeypatch):
    data = _synthetic_with_turns()
    fitted_on: list[set[int]] = []
    real = calibration.fit_turn_model

    def recording(turns, labels, **kwargs):
        fitted_on.append({id(t) for t in turns})
        return real(turns, labels, **kwargs)

    monkeypatch.setattr(calibration, "fit_turn_model", recording)
    cv = cross_validate(data, seed=1)
    assert len(fitted_on) == len(cv.folds)
    for seen, (_train, test) in zip(fitted_on, cv.folds, strict=True):
        held_out = {id(data.turns[i]) for i in test if i < len(data.y)}
        assert held_out and not (seen & held_out)
    assert len(cv.turn_predictions["relevance"]) == 3 * len(data.y)  # every turn predicted out of fold
    summary = cv.summary(data, n_boot=50)
    assert summary["turn_relevance"]["spearman"]["value"] > 0.5  # the turn labels follow one feature
    assert {"within_system", "turn_interestingness"} <= set(summary)


def test_coherence_also_counts_a_reply_the_turn_scorer_reads_as_off_the_request():
    from evaluators.proxy.factor_proxies import LOW_RELEVANCE
    from evaluators.proxy.turn_scores import TurnScore

    conversation = Conversation(
        system_id="x",
        turns=[Turn("user", REQUEST), Turn("system", "You should watch The Exorcist (1973), a horror classic.")],
    )
    catalog = load_bundled()
    rule_only = proxy_scores(conversation, catalog)
    assert rule_only.informed == {} and rule_only.factors["coherence"].value == 0

    def off(evidence):
        return [TurnScore(t.index, LOW_RELEVANCE / 2, 0.0) for t in evidence]

    informed = proxy_scores(conversation, catalog, turn_scorer=off)
    assert (
        informed.informed["coherence"].value == 1 and "read as off the request" in informed.informed["coherence"].detail
    )
    assert informed.factors == rule_only.factors  # what the calibrated overall reads is unchanged
    verdict = load_proxy_judge().score(conversation, catalog)
    assert verdict.result.informed["coherence"].value == (verdict.turns[0].relevance < LOW_RELEVANCE)
