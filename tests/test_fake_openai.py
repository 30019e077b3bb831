"""Tests for tests/fake_openai.py, driven through the real ``openai`` package."""

from __future__ import annotations

import json
import time

import openai
import pytest
from fake_openai import Delay, Error, FakeOpenAI, Garbage, Reply  # conftest puts tests/ on sys.path

MSGS = [{"role": "user", "content": "Say something"}]


@pytest.fixture
def fake():
    with FakeOpenAI() as server:
        yield server


def make_client(fake: FakeOpenAI, **kw) -> openai.OpenAI:
    kw.setdefault("max_retries", 0)
    kw.setdefault("timeout", 5.0)
    return openai.OpenAI(base_url=fake.base_url, api_key="sk-test-123", **kw)


def test_binds_loopback_only(fake):
    assert fake.base_url.startswith("http://127.0.0.1:")
    assert fake.base_url.endswith("/v1")


def test_plain_reply_and_usage(fake):
    fake.enqueue(Reply("hello there world", prompt_tokens=7))
    client = make_client(fake)
    out = client.chat.completions.create(model="my-model", messages=MSGS)
    assert out.object == "chat.completion"
    assert out.model == "my-model"
    assert out.choices[0].message.role == "assistant"
    assert out.choices[0].message.content == "hello there world"
    assert out.choices[0].finish_reason == "stop"
    assert out.choices[0].logprobs is None
    assert out.usage.prompt_tokens == 7
    assert out.usage.completion_tokens == 3
    assert out.usage.total_tokens == 10

    assert len(fake.requests) == 1
    req = fake.requests[0]
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["authorization"] == "Bearer sk-test-123"
    assert req["json"]["model"] == "my-model"
    assert req["json"]["messages"] == MSGS


def test_default_reply_when_queue_empty(fake):
    client = make_client(fake)
    out = client.chat.completions.create(model="m", messages=MSGS)
    assert out.choices[0].message.content == "OK"
    fake.default = Reply("changed", finish_reason="length")
    out = client.chat.completions.create(model="m", messages=MSGS)
    assert out.choices[0].message.content == "changed"
    assert out.choices[0].finish_reason == "length"


def test_n_choices(fake):
    fake.enqueue(Reply("one"), Reply("two"))
    client = make_client(fake)
    out = client.chat.completions.create(model="m", messages=MSGS, n=3)
    assert [c.message.content for c in out.choices] == ["one", "two", "two"]
    assert [c.index for c in out.choices] == [0, 1, 2]


def test_logprobs_and_top_logprobs(fake):
    lps = {"Yes": -0.05, "No": -3.2, "Maybe": -5.0, "yes": -1.5}
    fake.enqueue(Reply("Yes", logprobs=lps), Reply("Yes", logprobs=lps))
    client = make_client(fake)

    out = client.chat.completions.create(model="m", messages=MSGS, logprobs=True, top_logprobs=2)
    content = out.choices[0].logprobs.content
    assert content[0].token == "Yes"
    assert content[0].logprob == pytest.approx(-0.05)
    assert content[0].bytes == list(b"Yes")
    assert [t.token for t in content[0].top_logprobs] == ["Yes", "yes"]
    assert fake.requests[0]["json"]["top_logprobs"] == 2
    assert fake.requests[0]["json"]["logprobs"] is True

    out = client.chat.completions.create(model="m", messages=MSGS, logprobs=True, top_logprobs=20)
    top = out.choices[0].logprobs.content[0].top_logprobs
    assert [t.token for t in top] == ["Yes", "yes", "No", "Maybe"]
    assert [t.logprob for t in top] == sorted((t.logprob for t in top), reverse=True)


def test_streaming_with_usage(fake):
    fake.enqueue(Reply("the quick brown fox jumps over", prompt_tokens=4))
    client = make_client(fake)
    stream = client.chat.completions.create(
        model="m", messages=MSGS, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    content_chunks = [c for c in chunks if c.choices]
    assert content_chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in content_chunks)
    assert text == "the quick brown fox jumps over"
    assert sum(1 for c in content_chunks if c.choices[0].delta.content) == 3
    assert content_chunks[-1].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == []
    assert chunks[-1].usage.prompt_tokens == 4
    assert chunks[-1].usage.completion_tokens == 6
    assert chunks[-1].usage.total_tokens == 10


def test_streaming_without_usage(fake):
    fake.enqueue(Reply("a b"))
    client = make_client(fake)
    chunks = list(client.chat.completions.create(model="m", messages=MSGS, stream=True))
    assert all(c.choices for c in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "a b"


def test_500_then_success_is_retried(fake):
    fake.enqueue(Error(500, "boom", retry_after=0), Reply("recovered"))
    client = make_client(fake, max_retries=1)
    out = client.chat.completions.create(model="m", messages=MSGS)
    assert out.choices[0].message.content == "recovered"
    assert len(fake.requests) == 2


def test_500_without_retries_raises(fake):
    fake.enqueue(Error(500, "boom"))
    client = make_client(fake)
    with pytest.raises(openai.InternalServerError) as ei:
        client.chat.completions.create(model="m", messages=MSGS)
    assert ei.value.status_code == 500
    assert "boom" in str(ei.value)


def test_429_with_retry_after(fake):
    fake.enqueue(Error(429, "slow down", retry_after=0.2))
    client = make_client(fake)
    with pytest.raises(openai.RateLimitError) as ei:
        client.chat.completions.create(model="m", messages=MSGS)
    err = ei.value
    assert err.status_code == 429
    assert err.response.headers["retry-after"] == "0.2"
    assert err.body["message"] == "slow down"
    assert err.code == "rate_limit_exceeded"

    # With a retry, the client asks again after the 429 and then succeeds. (How long it waits is the openai
    # package's reading of the header asserted above; no test here times it.)
    fake.enqueue(Error(429, "slow down", retry_after=0.2), Reply("fine"))
    client = make_client(fake, max_retries=1)
    seen = len(fake.requests)
    out = client.chat.completions.create(model="m", messages=MSGS)
    assert out.choices[0].message.content == "fine"
    assert len(fake.requests) - seen == 2 and fake.requests[-1]["json"] == fake.requests[-2]["json"]


def test_delay_triggers_client_timeout(fake):
    fake.enqueue(Delay(5.0, Reply("too late")))
    client = make_client(fake, timeout=0.5, max_retries=0)
    with pytest.raises(openai.APITimeoutError):  # the reply would come after 5 s: the client gave up first
        client.chat.completions.create(model="m", messages=MSGS)


def test_short_delay_still_answers(fake):
    fake.enqueue(Delay(0.1, Reply("after a nap")))
    client = make_client(fake)
    out = client.chat.completions.create(model="m", messages=MSGS)
    assert out.choices[0].message.content == "after a nap"


def test_garbage_body_raises(fake):
    # A 200 whose body claims to be JSON but is not: openai 3.54.0 does not wrap
    # the decode failure, the stdlib json.JSONDecodeError propagates (no retry).
    fake.enqueue(Garbage("<html>bad gateway</html>"))
    client = make_client(fake, max_retries=2)
    with pytest.raises(json.JSONDecodeError):
        client.chat.completions.create(model="m", messages=MSGS)
    assert len(fake.requests) == 1


def test_garbage_variants(fake):
    client = make_client(fake)
    # Non-JSON content type with status 200: openai returns the raw text, no exception.
    fake.enqueue(Garbage("plain words", content_type="text/plain"))
    out = client.chat.completions.create(model="m", messages=MSGS)
    assert out == "plain words"
    # Non-JSON body with a 5xx status: an ordinary status error.
    fake.enqueue(Garbage("<html>502</html>", status=502, content_type="text/html"))
    with pytest.raises(openai.InternalServerError) as ei:
        client.chat.completions.create(model="m", messages=MSGS)
    assert ei.value.status_code == 502


def test_models_and_404(fake):
    client = make_client(fake)
    models = client.models.list()
    assert [m.id for m in models.data] == ["fake-model"]
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="m", prompt="x")


def test_stop_is_prompt_even_with_pending_delay():
    import threading

    server = FakeOpenAI().start()
    server.enqueue(Delay(30.0, Reply("never")))
    client = make_client(server, timeout=10.0)
    errors: list[BaseException] = []

    def call():
        try:
            client.chat.completions.create(model="m", messages=MSGS)
        except BaseException as e:
            errors.append(e)

    t = threading.Thread(target=call, daemon=True)
    t.start()
    deadline = time.monotonic() + 2
    while not server.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    server.stop()
    t.join(timeout=10)  # a bound on the wait, not a measurement
    assert not t.is_alive()
    assert errors and isinstance(errors[0], openai.APIConnectionError)
