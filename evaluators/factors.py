"""The twelve CoRE factors, their dimensions and the debate persona responsible for each.

Ids are stable: they are stored with every score. Wording, thresholds and
evaluation steps live in the rubric data (``assets/rubrics/``).
"""

from __future__ import annotations

DIMENSIONS: dict[str, tuple[str, ...]] = {
    "dialogue_actions": ("coherence", "recoverability", "proactiveness"),
    "language_expression": ("grammatical_correctness", "naturalness", "appropriateness"),
    "recommended_items": ("effectiveness", "novelty", "diversity"),
    "response_content": ("semantic_relevance", "explainability", "groundedness"),
}

FACTORS: tuple[str, ...] = tuple(f for factors in DIMENSIONS.values() for f in factors)

LABELS: dict[str, str] = {
    "coherence": "Coherence",
    "recoverability": "Recoverability",
    "proactiveness": "Proactiveness",
    "grammatical_correctness": "Grammatical correctness",
    "naturalness": "Naturalness",
    "appropriateness": "Appropriateness",
    "effectiveness": "Effectiveness",
    "novelty": "Novelty",
    "diversity": "Diversity",
    "semantic_relevance": "Semantic relevance",
    "explainability": "Explainability",
    "groundedness": "Groundedness",
}

# Debate personas (CoRE §4.2), keyed by the llm role that serves each.
PERSONA_FACTORS: dict[str, tuple[str, ...]] = {
    "debate_user": ("effectiveness", "recoverability", "coherence"),
    "debate_expert": ("novelty", "diversity", "groundedness"),
    "debate_linguist": ("naturalness", "grammatical_correctness", "appropriateness"),
    "debate_hci": ("explainability", "proactiveness", "semantic_relevance"),
}

DIMENSION_OF: dict[str, str] = {f: d for d, fs in DIMENSIONS.items() for f in fs}

assert sorted(FACTORS) == sorted(f for fs in PERSONA_FACTORS.values() for f in fs)
