"""One precedence rule for the LLM roles' settings: model, base URL and key fall back along
CRS_LLM_<ROLE>_ -> CRS_LLM_DEBATE_ (debate personas) -> CRS_LLM_, the endpoint (base URL + key) as one set,
and OPENAI_API_KEY only ever for OpenAI's own endpoint. A real request to the fake server proves where a
role's calls go."""

import pytest
from fake_openai import Reply

from llm_clients.base import LLMClient
from llm_clients.config import ROLES, role_config
from llm_clients.registry import model_for

LOCAL = "http://127.0.0.1:11434/v1"


def test_a_role_that_names_only_its_model_keeps_the_global_endpoint():
    env = {
        "CRS_LLM_BASE_URL": LOCAL,
        "CRS_LLM_MODEL": "llama3",
        "CRS_LLM_JUDGE_MODEL": "qwen2.5",
        "OPENAI_API_KEY": "sk-openai",
    }
    judge, crs = role_config("judge", env), role_config("crs", env)
    assert (judge.model, judge.base_url, judge.api_key) == ("qwen2.5", LOCAL, None)
    assert (crs.model, crs.base_url, crs.api_key) == ("llama3", LOCAL, None)
    assert judge.public()["endpoint"] == LOCAL and judge.source == "CRS_LLM_JUDGE_MODEL"


def test_the_endpoint_travels_as_a_set_with_its_key():
    env = {
        "CRS_LLM_MODEL": "llama3",
        "CRS_LLM_BASE_URL": LOCAL,
        "CRS_LLM_API_KEY": "local-key",
        "CRS_LLM_JUDGE_MODEL": "gpt-4o",
        "CRS_LLM_JUDGE_API_KEY": "sk-judge",  # a key without a base URL: OpenAI's endpoint with that key
    }
    judge = role_config("judge", env)
    assert (judge.base_url, judge.api_key) == (None, "sk-judge")
    assert judge.public()["endpoint"] == "https://api.openai.com/v1"
    simulator = role_config("simulator", env)
    assert (simulator.model, simulator.base_url, simulator.api_key) == ("llama3", LOCAL, "local-key")


def test_debate_personas_read_the_debate_settings_before_the_global_ones():
    env = {
        "CRS_LLM_MODEL": "llama3",
        "CRS_LLM_BASE_URL": LOCAL,
        "CRS_LLM_DEBATE_MODEL": "mistral",
        "CRS_LLM_DEBATE_BASE_URL": "http://127.0.0.1:8001/v1",
        "CRS_LLM_DEBATE_HCI_MODEL": "phi3",
    }
    hci, expert = role_config("debate_hci", env), role_config("debate_expert", env)
    assert (hci.model, hci.base_url) == ("phi3", "http://127.0.0.1:8001/v1")
    assert (expert.model, expert.base_url) == ("mistral", "http://127.0.0.1:8001/v1")
    assert role_config("judge", env).base_url == LOCAL


def test_openai_api_key_goes_only_to_openai():
    assert role_config("crs", {"CRS_LLM_MODEL": "gpt-4o-mini", "OPENAI_API_KEY": "sk-o"}).api_key == "sk-o"
    local = role_config("crs", {"CRS_LLM_MODEL": "m", "CRS_LLM_BASE_URL": LOCAL, "OPENAI_API_KEY": "sk-o"})
    assert local.api_key is None
    explicit = {"CRS_LLM_MODEL": "m", "CRS_LLM_BASE_URL": "https://api.openai.com/v1", "OPENAI_API_KEY": "sk-o"}
    assert role_config("crs", explicit).api_key == "sk-o"


@pytest.mark.parametrize("role", ROLES)
def test_no_model_anywhere_is_the_embedded_model_and_embedded_is_explicit(role):
    assert role_config(role, {"CRS_LLM_BASE_URL": LOCAL}).is_embedded
    assert role_config(role, {"CRS_LLM_MODEL": "embedded", "CRS_LLM_BASE_URL": LOCAL}).is_embedded


def test_the_prices_follow_the_same_chain():
    env = {"CRS_LLM_MODEL": "m", "CRS_LLM_PRICE": "1,2", "CRS_LLM_JUDGE_MODEL": "j"}
    assert role_config("judge", env).price == (1.0, 2.0)
    assert role_config("judge", env | {"CRS_LLM_JUDGE_PRICE": "3,4"}).price == (3.0, 4.0)


def test_the_judge_named_per_role_really_calls_the_global_endpoint(fake_openai):
    env = {
        "CRS_LLM_BASE_URL": fake_openai.base_url,
        "CRS_LLM_API_KEY": "sk-local",
        "CRS_LLM_MODEL": "llama3",
        "CRS_LLM_JUDGE_MODEL": "qwen2.5",
        "OPENAI_API_KEY": "sk-openai-never-sent",
    }
    fake_openai.enqueue(Reply("ok"))
    assert LLMClient(model_for(role_config("judge", env))).chat([{"role": "user", "content": "hi"}]).text == "ok"
    request = fake_openai.requests[0]
    assert request["json"]["model"] == "qwen2.5" and request["headers"]["authorization"] == "Bearer sk-local"
