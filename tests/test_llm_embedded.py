"""The embedded SmolLM2-135M model through llama.cpp: real weights, real inference."""

import threading

import pytest

from llm_clients.base import LLMClient
from llm_clients.types import Completion, LLMError

JUDGE = [
    {"role": "system", "content": "You rate conversations. Answer with <rating>N</rating>, N from 0 to 4."},
    {
        "role": "user",
        "content": "User: I want a comedy.\nSystem: Try Groundhog Day (1993), a clever comedy.\nRate its coherence.",
    },
]


def test_a_chat_turn(embedded_model, db_path):
    client = LLMClient(embedded_model, role="crs", db_path=db_path)
    c = client.chat(
        [{"role": "system", "content": "You recommend movies."}, {"role": "user", "content": "Suggest a funny movie."}],
        max_tokens=40,
    )
    assert c.text.strip()
    assert c.usage.prompt_tokens > 10 and 0 < c.usage.completion_tokens <= 41
    assert client.is_demo


def test_score_over_digits_is_a_distribution(embedded_model):
    client = LLMClient(embedded_model)
    dist = client.score(JUDGE, ["0", "1", "2", "3", "4"], prefix="<rating>", min_mass=None)
    assert set(dist.probs) == {"0", "1", "2", "3", "4"}
    assert sum(dist.probs.values()) == pytest.approx(1.0, abs=1e-6)
    assert all(p >= 0 for p in dist.probs.values())
    assert dist.method == "logits" and 0 < dist.mass <= 1
    assert 0 <= dist.expected() <= 4


def test_low_option_mass_falls_back_to_the_constrained_answer(embedded_model):
    client = LLMClient(embedded_model)
    raw = client.score(JUDGE, ["0", "1", "2", "3", "4"], prefix="<rating>", min_mass=None)
    dist = client.score(JUDGE, ["0", "1", "2", "3", "4"], prefix="<rating>", min_mass=1.01)
    assert dist.method == "explicit" and "threshold 1.01" in dist.fallback
    assert dist.mass == pytest.approx(raw.mass) and dist.parsed == max(raw.probs, key=raw.probs.get)
    assert dist.probs[dist.parsed] == 1.0


def test_an_answers_rating_is_read_from_the_logits_at_its_token(embedded_model):
    """read_answer: the logits after the prompt and the answer up to the rating digit."""
    client = LLMClient(embedded_model)
    answer = Completion(text="It stays on topic.\n<rating>3</rating>", model=embedded_model.name)
    dist = client.read_answer(JUDGE, answer, min_mass=None)
    direct = client.score(JUDGE, ["0", "1", "2", "3", "4"], prefix="It stays on topic.\n<rating>", min_mass=None)
    assert dist.method == "logits" and dist.parsed == "3"
    assert dist.probs == pytest.approx(direct.probs)
    assert client.read_answer(JUDGE, Completion(text="no tag here", model="m")) is None


def test_prefix_reuse_gives_the_same_numbers(embedded_model):
    """Scoring after an unrelated prompt (fresh KV) equals scoring after a prompt sharing the prefix."""
    client = LLMClient(embedded_model)
    client.score([{"role": "user", "content": "Something else entirely."}], ["0", "1"], min_mass=None)
    fresh = client.score(JUDGE, ["0", "1", "2", "3", "4"], prefix="<rating>", min_mass=None)
    longer = [*JUDGE[:-1], {"role": "user", "content": JUDGE[-1]["content"] + " Be strict."}]
    client.score(longer, ["0", "1", "2", "3", "4"], prefix="<rating>", min_mass=None)
    again = LLMClient(embedded_model).score(JUDGE, ["0", "1", "2", "3", "4"], prefix="<rating>", min_mass=None)
    for option in fresh.probs:
        assert again.probs[option] == pytest.approx(fresh.probs[option], abs=1e-3)


def test_multi_token_options(embedded_model):
    dist = LLMClient(embedded_model).score(
        [{"role": "user", "content": "Is the sky blue? Answer yes or no."}], ["yes", "no", "maybe not"], min_mass=None
    )
    assert sum(dist.probs.values()) == pytest.approx(1.0)


def test_greedy_is_deterministic_and_streams(embedded_model):
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a famous film director."}]
    client = LLMClient(embedded_model)
    a = client.chat(msgs, temperature=0, max_tokens=20)
    pieces = list(client.stream(msgs, temperature=0, max_tokens=20))
    assert isinstance(pieces[-1], Completion)
    assert pieces[-1].text == a.text
    assert len(pieces) > 2


def test_thread_safe_under_concurrent_calls(embedded_model):
    client = LLMClient(embedded_model)
    results, errors = [], []

    def call(i):
        try:
            results.append(
                client.chat([{"role": "user", "content": f"Say the number {i}."}], max_tokens=8, temperature=0)
            )
        except Exception as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors and len(results) == 4


def test_long_conversation_is_fitted_into_the_context(embedded_model):
    long_turns = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "word " * 400} for i in range(30)
    ]
    messages = [{"role": "system", "content": "Be brief."}, *long_turns]
    fitted = embedded_model._fit(messages, 100)
    prompt_tokens = len(embedded_model._tokens(embedded_model.prompt(fitted)))
    assert prompt_tokens <= embedded_model.llm.n_ctx() - 100
    assert fitted[0]["content"] == "Be brief."  # the system message stays
    assert fitted[-1] == long_turns[-1]  # the newest turns stay
    # one message alone longer than the context is cut, not refused
    huge = embedded_model._fit([{"role": "user", "content": "x " * 20000}], 100)
    assert len(embedded_model._tokens(embedded_model.prompt(huge))) <= embedded_model.llm.n_ctx() - 100


def test_grammar_constrains_the_answer(embedded_model):
    client = LLMClient(embedded_model)
    for seed in range(3):
        c = client.chat(
            JUDGE, temperature=0.8, seed=seed, max_tokens=12, grammar='root ::= "<rating>" [0-4] "</rating>"'
        )
        assert c.text[:8] == "<rating>" and c.text[8] in "01234" and c.text.endswith("</rating>")


def test_its_threads_come_from_the_setting_and_a_bad_one_is_named(monkeypatch):
    """``CRS_LLM_THREADS``: llama.cpp's threads for the embedded model (every core unless set); a value that is not a
    whole number of at least 1 is a configuration error naming the setting, never a traceback from llama.cpp."""
    import os

    from llm_clients.embedded import EmbeddedModel, embedded_threads, smollm2_path

    assert embedded_threads({}) == (os.cpu_count() or 2)
    assert embedded_threads({"CRS_LLM_THREADS": " 1 "}) == 1
    for bad in ("0", "-2", "two", "1.5"):
        with pytest.raises(LLMError, match="CRS_LLM_THREADS") as err:
            embedded_threads({"CRS_LLM_THREADS": bad})
        assert err.value.kind == "config"
    monkeypatch.setenv("CRS_LLM_THREADS", "1")
    model = EmbeddedModel(smollm2_path())  # its own instance: the shared one keeps its threads
    try:
        assert model.llm.n_threads == 1
    finally:
        model.llm.close()
        model._worker.shutdown(wait=False)
