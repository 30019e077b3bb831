"""The OpenAI-compatible backend against a real HTTP server on 127.0.0.1."""

import math

import pytest
from fake_openai import Delay, Error, Garbage, Reply

from llm_clients.base import LLMClient
from llm_clients.config import role_config
from llm_clients.registry import model_for
from llm_clients.remote import OpenAICompatibleModel
from llm_clients.types import LLMError
from storage.db import get_db

MSGS = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]


def _client(fake, db_path, **kw) -> LLMClient:
    model = OpenAICompatibleModel(
        kw.pop("name", "gpt-4o-mini"),
        base_url=fake.base_url,
        api_key="sk-secret-123",
        timeout=kw.pop("timeout", 5.0),
        max_retries=kw.pop("max_retries", 2),
    )
    return LLMClient(model, role="judge", db_path=db_path, **kw)


def test_chat_returns_text_usage_and_cost(fake_openai, db_path):
    fake_openai.enqueue(Reply("Hello there", prompt_tokens=1000, completion_tokens=500))
    c = _client(fake_openai, db_path).chat(MSGS, temperature=0, max_tokens=20)
    assert c.text == "Hello there"
    assert (c.usage.prompt_tokens, c.usage.completion_tokens) == (1000, 500)
    assert c.usage.cost_usd == pytest.approx((1000 * 0.15 + 500 * 0.60) / 1e6)
    sent = fake_openai.requests[0]
    assert sent["json"]["messages"] == MSGS and sent["json"]["max_tokens"] == 20
    assert sent["headers"]["authorization"] == "Bearer sk-secret-123"


def test_second_identical_call_is_served_from_the_cache(fake_openai, db_path):
    fake_openai.enqueue(Reply("first"), Reply("second"))
    client = _client(fake_openai, db_path)
    assert client.chat(MSGS, temperature=0).text == "first"
    again = client.chat(MSGS, temperature=0)
    assert again.text == "first" and again.cache_hit
    assert len(fake_openai.requests) == 1
    assert client.chat(MSGS, temperature=0.5).text == "second"  # other parameters, other key
    rows = list(get_db(db_path)["llm_calls"].rows)
    assert [r["cache_hit"] for r in rows] == [0, 1, 0]


def test_stream_yields_pieces_then_completion(fake_openai, db_path):
    fake_openai.enqueue(Reply("one two three four five six", prompt_tokens=7))
    pieces = list(_client(fake_openai, db_path).stream(MSGS))
    *texts, final = pieces
    assert len(texts) >= 2 and "".join(texts) == "one two three four five six"
    assert final.text == "one two three four five six" and final.usage.prompt_tokens == 7


def test_score_reads_log_probabilities(fake_openai, db_path):
    logprobs = {"3": math.log(0.6), "4": math.log(0.3), "2": math.log(0.05), "x": math.log(0.05)}
    fake_openai.enqueue(Reply("3", logprobs=logprobs))
    dist = _client(fake_openai, db_path).score(MSGS, ["0", "1", "2", "3", "4"])
    assert dist.method == "logprobs"
    assert sum(dist.probs.values()) == pytest.approx(1.0)
    assert dist.probs["3"] == pytest.approx(0.6 / 0.95)
    assert dist.mass == pytest.approx(0.95)
    assert dist.expected() == pytest.approx((3 * 0.6 + 4 * 0.3 + 2 * 0.05) / 0.95)
    assert fake_openai.requests[0]["json"]["logprobs"] is True


def test_score_falls_back_to_sampling_without_logprobs(fake_openai, db_path):
    fake_openai.enqueue(Reply("2", no_logprobs=True), Reply("Rating: 3"), Reply("3"), Reply("no idea"), Reply("3."))
    dist = _client(fake_openai, db_path).score(MSGS, ["0", "1", "2", "3", "4"], samples=4)
    # the first reply had no logprobs, so four samples follow, asked for in one request (n = 4)
    assert dist.method == "sampling" and dist.samples == 4 and dist.invalid == 1
    assert dist.probs == {"0": 0.0, "1": 0.0, "2": 0.0, "3": 1.0, "4": 0.0}
    assert len(fake_openai.requests) == 2
    assert fake_openai.requests[1]["json"]["temperature"] == 1.0 and fake_openai.requests[1]["json"]["n"] == 4


def test_rate_limit_then_success_is_retried(fake_openai, db_path):
    fake_openai.enqueue(Error(429, retry_after=0.1), Error(500), Reply("made it"))
    assert _client(fake_openai, db_path).chat(MSGS).text == "made it"
    assert len(fake_openai.requests) == 3


@pytest.mark.parametrize(
    "script,kind,words",
    [
        ([Error(429, retry_after=0.05)] * 3, "rate_limit", "429"),
        ([Error(500)] * 3, "server", "HTTP 500"),
        ([Garbage("{not json")], "bad_response", "could not be read"),
    ],
)
def test_failures_become_clear_errors(fake_openai, db_path, script, kind, words):
    fake_openai.enqueue(*script)
    with pytest.raises(LLMError) as info:
        _client(fake_openai, db_path).chat(MSGS)
    assert info.value.kind == kind and words in str(info.value)
    assert "sk-secret-123" not in str(info.value)
    row = list(get_db(db_path)["llm_calls"].rows)[-1]
    assert row["error"] and "sk-secret" not in row["error"]


def test_timeout_becomes_a_clear_error(fake_openai, db_path):
    fake_openai.enqueue(Delay(3.0, Reply("late")), Delay(3.0, Reply("late")))
    with pytest.raises(LLMError) as info:
        _client(fake_openai, db_path, timeout=0.3, max_retries=1).chat(MSGS)
    assert info.value.kind == "timeout" and "0.3 s" in str(info.value)


def test_endpoint_down_is_a_connection_error(db_path):
    model = OpenAICompatibleModel("m", base_url="http://127.0.0.1:9/v1", api_key="k", timeout=1, max_retries=0)
    with pytest.raises(LLMError) as info:
        LLMClient(model, db_path=db_path).chat(MSGS)
    assert info.value.kind == "connection"


def test_secrets_never_reach_the_database(fake_openai, db_path):
    fake_openai.enqueue(Reply("fine"))
    _client(fake_openai, db_path).chat(MSGS)
    dump = "\n".join(get_db(db_path).conn.iterdump())
    assert "sk-secret-123" not in dump


def test_role_configuration_from_environment(fake_openai, db_path):
    env = {
        "CRS_LLM_JUDGE_MODEL": "judge-model",
        "CRS_LLM_JUDGE_BASE_URL": fake_openai.base_url,
        "CRS_LLM_JUDGE_API_KEY": "sk-judge",
        "OPENAI_API_KEY": "sk-openai",
    }
    cfg = role_config("judge", env)
    assert (cfg.model, cfg.api_key, cfg.source) == ("judge-model", "sk-judge", "CRS_LLM_JUDGE_MODEL")
    assert "sk-judge" not in str(cfg.public())
    fake_openai.enqueue(Reply("ok"))
    assert LLMClient(model_for(cfg)).chat(MSGS).text == "ok"
    assert fake_openai.requests[0]["headers"]["authorization"] == "Bearer sk-judge"
    # a custom endpoint never receives OPENAI_API_KEY
    custom = role_config(
        "crs", {"CRS_LLM_MODEL": "m", "CRS_LLM_BASE_URL": "http://127.0.0.1:1/v1", "OPENAI_API_KEY": "sk-openai"}
    )
    assert custom.api_key is None
    openai_cfg = role_config("crs", {"CRS_LLM_MODEL": "gpt-4o-mini", "OPENAI_API_KEY": "sk-openai"})
    assert openai_cfg.api_key == "sk-openai"
    # debate roles fall back to the shared debate settings, then the global ones, then embedded
    assert (
        role_config(
            "debate_hci", {"CRS_LLM_DEBATE_MODEL": "d", "CRS_LLM_DEBATE_BASE_URL": "http://127.0.0.1:2/v1"}
        ).model
        == "d"
    )
    assert role_config("simulator", {}).is_embedded
    assert role_config("judge", {"CRS_LLM_MODEL": "embedded"}).is_embedded
    with pytest.raises(ValueError):
        role_config("nobody", {})


def test_json_mode_asks_for_a_json_object_and_grammar_is_not_sent(fake_openai, db_path):
    fake_openai.enqueue(Reply('{"a": 1}'))
    _client(fake_openai, db_path).chat(MSGS, json_mode=True, grammar='root ::= "x"')
    sent = fake_openai.requests[0]["json"]
    assert sent["response_format"] == {"type": "json_object"} and "grammar" not in sent


def test_usage_totals_per_client_and_clone(fake_openai, db_path):
    fake_openai.enqueue(Reply("a", prompt_tokens=100, completion_tokens=10), Error(500), Error(500), Error(500))
    client = _client(fake_openai, db_path)
    client.chat(MSGS)
    client.chat(MSGS)  # cache hit: counted as a call, not as tokens
    with pytest.raises(LLMError):
        client.chat(MSGS, temperature=0.1)
    t = client.totals
    assert (t.calls, t.cache_hits, t.errors, t.prompt_tokens, t.completion_tokens) == (3, 1, 1, 100, 10)
    assert t.cost_usd == pytest.approx((100 * 0.15 + 10 * 0.6) / 1e6)
    twin = client.clone()
    assert twin.totals.calls == 0 and twin.model is client.model


def test_sampled_answers_in_tags_are_read(fake_openai, db_path):
    fake_openai.enqueue(
        Reply("<rating>3</rating>", no_logprobs=True),
        Reply("<rating>3</rating>"),
        Reply("<rating>4</rating>"),
        Reply("Score: 3.5"),
        Reply("<rating>x</rating>"),
    )
    dist = _client(fake_openai, db_path).score(MSGS, ["0", "1", "2", "3", "4"], prefix="<rating>", samples=4)
    assert dist.method == "sampling" and dist.invalid == 2
    assert dist.probs["3"] == pytest.approx(0.5) and dist.probs["4"] == pytest.approx(0.5)


def test_logprobs_at_the_first_position_holding_an_option(fake_openai, db_path):
    fake_openai.enqueue(Reply("3", logprobs={"3": math.log(0.7), "2": math.log(0.3)}))
    dist = _client(fake_openai, db_path).score(MSGS, ["0", "1", "2", "3", "4"], prefix="<rating>")
    assert dist.method == "logprobs" and dist.probs["3"] == pytest.approx(0.7)
