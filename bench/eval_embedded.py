"""Seconds to judge a 6-turn conversation on the 12 factors with the embedded model
(probability mode), with the conversation first in every prompt (as the judge
builds them) and with the factor rubric first, side by side.

Conversation first lets llama.cpp keep the shared log in its KV cache across the
12 calls; rubric first makes every call start from scratch.

    python bench/eval_embedded.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catalog.catalog import load_bundled
from evaluators.judge import inputs as render
from evaluators.judge.factor_judge import JudgeConfig, judge_conversation
from llm_clients.base import LLMClient
from llm_clients.embedded import get_embedded_model
from storage.records import Conversation, ItemRef, Turn


def conversation() -> Conversation:
    return Conversation(
        system_id="bench",
        turns=[
            Turn("user", "Hi! I'm in the mood for a clever science fiction movie tonight."),
            Turn(
                "system",
                "You might enjoy Arrival (2016), a thoughtful first-contact story, or Ex Machina (2014).",
                items=[ItemRef("arrival-2016", "Arrival (2016)"), ItemRef("ex-machina-2014", "Ex Machina (2014)")],
            ),
            Turn("user", "I've seen Arrival and loved it. Something with more action?"),
            Turn(
                "system",
                "Then try Edge of Tomorrow (2014): a soldier relives one battle until he wins it.",
                items=[ItemRef("edge-of-tomorrow-2014", "Edge of Tomorrow (2014)")],
            ),
            Turn("user", "Great, that sounds fun. Anything older, maybe from the eighties?"),
            Turn(
                "system",
                "Aliens (1986) and The Terminator (1984) are classics with plenty of action.",
                items=[
                    ItemRef("aliens-1986", "Aliens (1986)"),
                    ItemRef("the-terminator-1984", "The Terminator (1984)"),
                ],
            ),
        ],
    )


def rubric_first(factor_messages):
    """The same prompts with the factor-specific text moved before the conversation."""

    def build(log, rubric, factor_id, *, answer):
        system, user = factor_messages(log, rubric, factor_id, answer=answer)
        rest = user["content"][len(log.text) :].strip()
        return [system, {"role": "user", "content": rest + "\n\n" + log.text}]

    return build


def timed(client: LLMClient, catalog, model) -> float:
    model.call(model.llm.reset)
    config = JudgeConfig(clients=[client], mode="probability")
    start = time.perf_counter()
    scores = judge_conversation(conversation(), config, catalog=catalog)
    elapsed = time.perf_counter() - start
    assert len(scores) == 12
    return elapsed


def main() -> None:
    model = get_embedded_model()
    client = LLMClient(model, use_cache=False)
    catalog = load_bundled()
    timed(client, catalog, model)  # warm-up: load and first allocations
    conversation_first = timed(client, catalog, model)
    original = render.factor_messages
    import evaluators.judge.factor_judge as judge

    judge.factor_messages = rubric_first(original)
    try:
        rubric_first_s = timed(client, catalog, model)
    finally:
        judge.factor_messages = original
    print(f"12 factors, probability mode, {model.describe()}")
    print(
        f"conversation first: {conversation_first:.1f} s; rubric first: {rubric_first_s:.1f} s; "
        f"ratio {rubric_first_s / conversation_first:.2f}"
    )
    print(f"BENCH embedded_eval_s {conversation_first:.1f} s target <= 15")
    print(f"BENCH embedded_prefix_first_speedup {rubric_first_s / conversation_first:.2f} x target >= 1.5")


if __name__ == "__main__":
    main()
