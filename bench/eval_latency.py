"""A full evaluation (12 factors + a 4-round debate) against an endpoint with fixed latency L.

The judge runs the default mode, CoRE's procedure: each factor's answer is reasons, then
``<rating>n</rating>``, generated with top-20 log-probabilities and read at the rating token (one
call per factor). The fake OpenAI-compatible server (tests/fake_openai.py, on 127.0.0.1) answers
every call after L seconds with a multi-token answer and per-position alternatives, and with debate
scores that never agree, so all four rounds run. The same evaluation runs twice side by side: as
the product runs it (12 factor calls in parallel, each round's four personas in parallel) and fully
sequentially. The critical path is 5 L (one factor wave + 4 rounds).

    python bench/eval_latency.py [--latency 0.25]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from fake_openai import Delay, FakeOpenAI, Reply

from catalog.catalog import load_bundled
from evaluators.factors import FACTORS, PERSONA_FACTORS
from evaluators.judge.debate import DebateConfig
from evaluators.judge.factor_judge import DEFAULT_MODE, JudgeConfig
from evaluators.judge.llm_scorer import llm_judge
from evaluators.pipeline import EvaluationSetup, evaluate_conversation
from llm_clients.base import LLMClient
from llm_clients.remote import OpenAICompatibleModel
from storage.db import get_db
from storage.records import Conversation, ItemRef, Turn

ROUNDS = 4


def conversation() -> Conversation:
    return Conversation(
        system_id="bench",
        turns=[
            Turn("user", "Something like Heat?"),
            Turn("system", "Try Ronin (1998).", items=[ItemRef("ronin-1998", "Ronin (1998)")]),
            Turn("user", "Seen it. Another?"),
            Turn("system", "The Town (2010), a tense heist.", items=[ItemRef("the-town-2010", "The Town (2010)")]),
        ],
    )


def script(fake: FakeOpenAI, latency: float) -> None:
    """12 judge answers, then 4 rounds x 4 debaters whose scores never agree."""
    answers = [
        Reply(
            "The replies follow the request; 2 of the 3 lists fit it.\n<rating>3</rating>",
            at={"answer": {"3": 0.7, "2": 0.2, "4": 0.1}},
        )
    ] * len(FACTORS)
    answers += [
        Reply(json.dumps({"evaluator": "x", "statement": "Fine.", "score": 20 + 10 * (i % 4)}))
        for i in range(ROUNDS * 4)
    ]
    fake.enqueue(*[Delay(latency, a) for a in answers])


def run(fake: FakeOpenAI, latency: float, *, parallel: bool, catalog) -> float:
    def client(name: str) -> LLMClient:
        return LLMClient(OpenAICompatibleModel(name, base_url=fake.base_url, api_key="k", max_retries=0, timeout=30))

    setup = EvaluationSetup(
        llm_judge(
            JudgeConfig(clients=[client("judge")], max_concurrency=12 if parallel else 1),  # the default mode
            DebateConfig(clients={r: client(r) for r in PERSONA_FACTORS}, max_rounds=ROUNDS, sequential=not parallel),
        ),
        catalog=catalog,
    )
    script(fake, latency)
    with tempfile.TemporaryDirectory() as d:
        db_path = Path(d) / "bench.db"
        get_db(db_path)  # created and migrated before the clock starts, as the app's database is
        start = time.perf_counter()
        evaluation = evaluate_conversation(conversation(), setup, db_path=db_path)
        wall = time.perf_counter() - start
    assert evaluation.rounds_used == ROUNDS and evaluation.usage["calls"] == 12 + 4 * ROUNDS, evaluation.usage
    assert all(
        s.metadata["mode"] == DEFAULT_MODE
        and s.metadata["models"][0]["method"] == "logprobs"
        and s.score is not None
        and abs(s.score - 2.9) < 1e-6
        for s in evaluation.factor_scores
    ), "not read at the rating token"
    return wall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.25, help="seconds per call (L)")
    latency = parser.parse_args().latency
    catalog = load_bundled()
    with FakeOpenAI() as fake:
        run(fake, latency, parallel=True, catalog=catalog)  # warm-up: imports, first connections, rubric
        parallel = run(fake, latency, parallel=True, catalog=catalog)
        sequential = run(fake, latency, parallel=False, catalog=catalog)
    calls = 12 + 4 * ROUNDS
    print(f"L = {latency} s; {calls} calls; critical path 5 L = {5 * latency:.2f} s")
    print(
        f"parallel: {parallel:.2f} s ({parallel / latency:.1f} L); sequential: {sequential:.2f} s "
        f"({sequential / latency:.1f} L)"
    )
    print(
        f"BENCH eval_wall_in_L {parallel / latency:.1f} x target <= 6 (default mode {DEFAULT_MODE}: "
        "12 reasoned factors read at the rating token + 4-round debate)"
    )
    print(f"BENCH eval_parallel_speedup {sequential / parallel:.1f} x target >= 4")


if __name__ == "__main__":
    main()
