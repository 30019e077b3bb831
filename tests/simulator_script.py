"""Scripted answers for simulator tests and the simulate benchmark, served by the real fake OpenAI server.

:class:`RoutedFake` is :class:`fake_openai.FakeOpenAI` that answers from the request's content when its
queue is empty: the simulated user, the persuasiveness question, ChatCRS, the paraphrase and the
attribute-mode choice each get a fitting, deterministic answer. Queued responses still come first,
so a test can script a particular answer (a leak, an error) and let the rest be routed.
"""

from __future__ import annotations

import re
import threading

from fake_openai import Delay, FakeOpenAI, Reply

SCORE_LOGPROBS = {"2": -0.105, "1": -2.4, "0": -4.6}  # ~0.90 / 0.09 / 0.01: expected value ~1.89


class _Requests(list):
    """The server's request log, remembering each handler thread's latest request."""

    def __init__(self) -> None:
        super().__init__()
        self.local = threading.local()

    def append(self, item) -> None:
        self.local.last = item
        super().append(item)


def route(body: dict) -> Reply:
    """A deterministic answer for one chat request, chosen by who is asking."""
    messages = body.get("messages") or []
    system = messages[0]["content"] if messages else ""
    last = messages[-1]["content"] if messages else ""
    if system.startswith("You are ChatCRS"):
        return Reply("You might enjoy Heat (1995), a tense crime film with a great heist.")
    if "You play the user of a conversational recommender" in system:
        if "<score>N</score>" in last:
            return Reply("The explanation fits what I wanted. <score>2</score>")
        return Reply("2", logprobs=dict(SCORE_LOGPROBS))
    if "rewrite short chat messages" in system:
        inner = re.search(r"<message>\s*(.*?)\s*</message>", last, re.S)
        return Reply("Put differently: " + (inner.group(1) if inner else "the same request"))
    if "recommender system chatting with a user" in system:
        # a model that heeds the "do not repeat" reminder: the first letter not yet used, clearly ahead
        used = re.search(r"already used: ([A-Z, ]+)\.", last)
        letters = [x for x in "ABCDE" if x not in (used.group(1) if used else "")]
        return Reply(letters[0], logprobs={x: -0.1 if n == 0 else -3.0 - n / 2 for n, x in enumerate(letters)})
    return Reply(user_message(system, last))


def user_message(system: str, last: str) -> str:
    """The simulated user's answer: built from its targets' profile, never their titles."""
    profile = re.search(r"- target 1: (.*)", system)
    details = profile.group(1) if profile else "a good film"
    people = re.findall(r"(?:directed by|starring) ([^;.]*)", details)
    hint = people[0] if people else details[:60]
    if "gave away the title" in last:
        return f"Something with {hint}, please."
    if "Open the conversation" in last:
        return f"Hi! I'd love a film like this: {details[:160]}"
    if "Ask the recommender to tell you more about" in last:
        title = re.search(r"suggested (.*?), and that", last)
        return f"Could you tell me more about {title.group(1) if title else 'it'}?"
    if "React in a few words" in last:
        return "Interesting! Who plays in it?"
    if "Accept the suggestion" in last:
        return "Great, I'll watch it. Thanks!"
    if "None of them is what you have in mind" in last:
        return f"Not quite. I'd like something with {hint}."
    return f"I like films with {hint}."


class RoutedFake(FakeOpenAI):
    """The fake server answering by content (see :func:`route`), each answer after ``latency`` seconds."""

    def __init__(self, latency: float = 0.0) -> None:
        super().__init__()
        self.requests = _Requests()
        self.latency = latency

    def _next(self):
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        body = getattr(self.requests.local, "last", {}).get("json") or {}
        reply = route(body)
        return Delay(self.latency, reply) if self.latency > 0 else reply

    def chat_requests(self) -> list[dict]:
        with self._lock:
            seen = list(self.requests)
        return [r["json"] for r in seen if r["path"].endswith("/chat/completions")]


def fake_env(fake: FakeOpenAI) -> dict[str, str]:
    """Environment that sends every role to ``fake`` (no retries, short timeout)."""
    return {
        "CRS_LLM_MODEL": "fake-model",
        "CRS_LLM_BASE_URL": fake.base_url,
        "CRS_LLM_API_KEY": "sk-test",
        "CRS_LLM_MAX_RETRIES": "0",
        "CRS_LLM_TIMEOUT": "10",
    }
