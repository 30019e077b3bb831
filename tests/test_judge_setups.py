"""The leaderboard's automatic scores come from one judge setup (scorer + configuration), never a mix,
and its recall columns are named by source."""

from arena.board_compute import RECALL_COLUMNS, compute_leaderboard, scorers, setup_label
from storage.conversations import save_conversation
from storage.db import get_db
from storage.evaluations import finish_evaluation, save_factor_score, start_evaluation
from storage.records import Conversation, Evaluation, FactorScore, Turn

FAST = {
    "mode": "probability",
    "rubric": "core-v2",
    "judge_prompts": "judge@2026-11-23.2",
    "debate": {"prompts": "debate@2026-11-23.1"},
}
CORE = {**FAST, "mode": "reasoned+probability"}


def _conversation(db, system: str, source: str = "import") -> str:
    return save_conversation(
        db,
        Conversation(system_id=system, source=source, turns=[Turn("user", "a comedy?"), Turn("system", "Airplane!")]),
    ).id


def _evaluate(db, conversation_id, config, fingerprint, overall, coherence, metrics=None) -> None:
    e = start_evaluation(
        db,
        Evaluation(conversation_id=conversation_id, scorer="llm:gpt-4o-mini", config=config, fingerprint=fingerprint),
    )
    save_factor_score(db, e.id, FactorScore("coherence", coherence, "llm:gpt-4o-mini", "core-v2"))
    finish_evaluation(db, e.id, overall=overall, metrics=metrics or {})


def test_two_modes_of_one_judge_model_are_two_setups(db_path):
    db = get_db(db_path)
    a, b = _conversation(db, "x"), _conversation(db, "x")
    _evaluate(db, a, CORE, "c0re0000aaaa1111", 80.0, 3.0)
    _evaluate(db, b, CORE, "c0re0000aaaa1111", 60.0, 2.0)
    _evaluate(db, a, FAST, "fa570000bbbb2222", 10.0, 0.0)  # the same model, the rating-only mode

    labels = scorers(db)
    core = setup_label("llm:gpt-4o-mini", CORE, "c0re0000aaaa1111")
    fast = setup_label("llm:gpt-4o-mini", FAST, "fa570000bbbb2222")
    assert labels == [core, fast]  # the most used first
    assert core == (
        "llm:gpt-4o-mini · reasoned+probability · core-v2 · judge@2026-11-23.2 · debate@2026-11-23.1 · #c0re0000"
    )

    [row] = compute_leaderboard(db, scorer=core, uploads=False)[0]
    assert (row["judged"], row["overall_mean"], row["coherence"]) == (2, 70.0, 2.5)
    [row] = compute_leaderboard(db, scorer=fast, uploads=False)[0]
    assert (row["judged"], row["overall_mean"], row["coherence"]) == (1, 10.0, 0.0)
    # a bare scorer name means its most used setup, never the mix of both
    [row] = compute_leaderboard(db, scorer="llm:gpt-4o-mini", uploads=False)[0]
    assert row["overall_mean"] == 70.0


def test_recall_columns_name_their_source_and_pool_over_targets(db_path):
    db = get_db(db_path)
    assert RECALL_COLUMNS[:5] == ("recall@1", "recall@5", "recall@10", "recall@25", "recall@50")
    assert RECALL_COLUMNS[5:] == tuple(f"session_{c}" for c in RECALL_COLUMNS[:5])
    one, two = _conversation(db, "y", "simulation"), _conversation(db, "y", "simulation")
    _evaluate(
        db, one, CORE, "c0re0000aaaa1111", None, 2.0, {"recall@1": 1.0, "session_recall@1": 0.0, "recall_targets": 1}
    )
    _evaluate(
        db, two, CORE, "c0re0000aaaa1111", None, 2.0, {"recall@1": 0.5, "session_recall@1": 0.5, "recall_targets": 2}
    )
    [row] = compute_leaderboard(db, uploads=False)[0]
    # pooled over (dialogue, target) pairs as iEvaLM averages: (1 + 1) / 3 and (0 + 1) / 3
    assert row["recall@1"] == 2 / 3 and row["session_recall@1"] == 1 / 3 and row["simulations"] == 2
