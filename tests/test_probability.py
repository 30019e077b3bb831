"""The probability reader (llm_clients/probability.py): the distribution at the answer token, checked and recorded.

Unit cases on hand-built token lists, then option scoring over real HTTP against the fake endpoint,
whose answers come as several tokens with top-20 alternatives and stray digits early on.
"""

import json
import math

import pytest
from fake_openai import Reply, answer_position, tokenize

from llm_clients.base import LLMClient
from llm_clients.probability import MIN_MASS, find_answer, read_logprobs
from llm_clients.remote import OpenAICompatibleModel

OPTIONS = ["0", "1", "2", "3", "4"]


def _tokens(*spec):
    """[(token, {alternative: probability})] as Completion.logprobs entries (sampled token first)."""
    out = []
    for token, alternatives in spec:
        top = sorted(alternatives.items(), key=lambda kv: -kv[1])
        out.append(
            {
                "token": token,
                "bytes": len(token.encode()),
                "logprob": math.log(alternatives[token]),
                "top": [[t, math.log(p)] for t, p in top],
            }
        )
    return out


def test_find_answer_takes_the_last_tag_and_its_byte_offset():
    text = "3 of the 5 items fit — <rating>1</rating> no, <rating> 2 </rating>"
    option, offset = find_answer(text, OPTIONS, tag="rating")
    assert option == "2" and text.encode()[offset : offset + 1] == b"2"
    assert find_answer("no tag, a 3", OPTIONS, tag="rating") is None
    assert find_answer("<rating>7</rating>", OPTIONS, tag="rating") is None
    assert find_answer("Answer: B.", ["A", "B", "C"]) == ("B", 8)  # "Answer" is not the option A
    assert find_answer("<rating>3", OPTIONS, prefix="<rating>") == ("3", 8)
    assert find_answer("Score: 3.5", OPTIONS) is None


def test_the_stray_digit_early_is_not_read():
    logprobs = _tokens(
        ("Fine", {"Fine": 0.9, "4": 0.0006}),
        (".", {".": 0.95}),
        ("<", {"<": 0.99}),
        ("rating", {"rating": 0.99}),
        (">", {">": 0.99}),
        ("1", {"1": 0.90, "2": 0.08, "0": 0.02}),
        ("</", {"</": 0.99}),
    )
    text = "Fine.<rating>1</"
    option, offset = find_answer(text + "rating>", OPTIONS, tag="rating")
    dist = read_logprobs(logprobs, text, option, offset, OPTIONS)
    assert dist.method == "logprobs" and dist.position == 5 and dist.parsed == "1"
    assert dist.expected() == pytest.approx(1.06) and dist.mass == pytest.approx(1.0)


def test_a_token_that_joins_the_tag_and_the_digit_is_read_after_the_tag():
    logprobs = _tokens(
        ("ok", {"ok": 0.9}),
        (" <rating", {" <rating": 0.9}),
        (">3", {">3": 0.6, ">4": 0.3, ">10": 0.05, "4": 0.05}),
        ("</rating>", {"</rating>": 1.0}),
    )
    text = "ok <rating>3</rating>"
    option, offset = find_answer(text, OPTIONS, tag="rating")
    dist = read_logprobs(logprobs, text, option, offset, OPTIONS)
    # ">10" spells 10, not 1; a bare "4" does not follow the tag's ">" written before the digit
    assert dist.position == 2 and dist.probs["3"] == pytest.approx(0.6 / 0.9) and dist.mass == pytest.approx(0.9)


def test_low_mass_missing_logprobs_and_a_lost_token_fall_back_to_the_written_answer():
    logprobs = _tokens(
        ("<", {"<": 1.0}), ("rating", {"rating": 1.0}), (">", {">": 1.0}), ("2", {"2": 0.3, " two": 0.6})
    )
    text = "<rating>2"
    low = read_logprobs(logprobs, text, "2", 8, OPTIONS)
    assert low.method == "explicit" and low.expected() == 2.0 and low.mass == pytest.approx(0.3)
    assert low.position == 3 and f"threshold {MIN_MASS:g}" in low.fallback
    assert read_logprobs(logprobs, text, "2", 8, OPTIONS, min_mass=None).method == "logprobs"
    none = read_logprobs(None, text, "2", 8, OPTIONS)
    assert none.method == "explicit" and none.fallback == "the endpoint returned no log-probabilities"
    lost = read_logprobs(logprobs[:2], text, "2", 8, OPTIONS)
    assert lost.method == "explicit" and "not found" in lost.fallback


def test_the_fake_answers_like_a_real_endpoint():
    text = "Two replies drift.\n<rating>3</rating>"
    tokens = tokenize(text)
    assert tokens[-7:] == ["<", "rating", ">", "3", "</", "rating", ">"]
    assert answer_position(tokens, text) == len(tokens) - 4


# -- option scoring over HTTP -------------------------------------------------------------------


def _client(fake, db_path) -> LLMClient:
    return LLMClient(
        OpenAICompatibleModel("m", base_url=fake.base_url, api_key="k", max_retries=0, timeout=5), db_path=db_path
    )


def test_option_scoring_reads_the_letter_token_not_an_early_stray(fake_openai, db_path):
    # the simulator's (and ChatCRS's) option choice: "Answer: B" with a stray "A" and "C" early on
    fake_openai.enqueue(
        Reply("Answer: B", at={0: {"Answer": 0.9, "A": 0.05, "C": 0.01}, 2: {" B": 0.6, " A": 0.3, " D": 0.1}})
    )
    dist = _client(fake_openai, db_path).score([{"role": "user", "content": "A, B, C or D?"}], list("ABCD"))
    assert dist.method == "logprobs" and dist.position == 2 and dist.parsed == "B"
    assert dist.probs == pytest.approx({"A": 0.3, "B": 0.6, "C": 0.0, "D": 0.1})
    sent = fake_openai.requests[0]["json"]
    assert sent["logprobs"] is True and sent["top_logprobs"] == 20


def test_option_scoring_records_the_reading_and_its_fallback(fake_openai, db_path):
    fake_openai.enqueue(Reply("2", at={0: {"2": 0.2, "two": 0.8}}))
    dist = _client(fake_openai, db_path).score([{"role": "user", "content": "0, 1 or 2?"}], ["0", "1", "2"])
    assert dist.method == "explicit" and dist.expected() == 2.0
    assert dist.record() == {
        "method": "explicit",
        "mass": pytest.approx(0.2),
        "position": 0,
        "parsed": "2",
        "fallback": dist.fallback,
    }


def test_rate_reads_the_rating_token_over_http(fake_openai, db_path):
    fake_openai.enqueue(Reply("3 of the 5 items fit.\n<rating>2</rating>", at={"answer": {"2": 0.5, "1": 0.5}}))
    completion, dist = _client(fake_openai, db_path).rate([{"role": "user", "content": "Rate it."}])
    assert completion.logprobs and dist.method == "logprobs" and dist.expected() == pytest.approx(1.5)
    again, cached = _client(fake_openai, db_path).rate([{"role": "user", "content": "Rate it."}])
    assert again.cache_hit and cached.probs == dist.probs  # the log-probabilities are cached with the answer
    assert len(fake_openai.requests) == 1


def test_a_long_reasoned_answer_is_cached_compactly_and_reads_the_same(fake_openai, db_path):
    from storage.db import get_db

    reason = " ".join(["The system keeps to the request and names 3 films."] * 40)
    fake_openai.enqueue(Reply(reason + "\n<rating>2</rating>", at={"answer": {"2": 0.6, "3": 0.4}}))
    first, dist = _client(fake_openai, db_path).rate([{"role": "user", "content": "Rate."}])
    again, cached = _client(fake_openai, db_path).rate([{"role": "user", "content": "Rate."}])
    assert again.cache_hit and cached.probs == dist.probs and cached.position == dist.position
    assert len(again.logprobs) == len(first.logprobs) > 400
    kept = [e for e in again.logprobs if e["top"]]
    assert len(kept) == 40 + 16 - 1  # the forty "3"s and the 16-token tail (which holds the rating digit)
    size = max(len(r["response"]) for r in get_db(db_path)["llm_cache"].rows)
    assert size < len(json.dumps(first.logprobs)) / 4
