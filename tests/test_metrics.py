"""Deterministic metrics on hand-built conversations over the bundled catalog."""

import pytest

from catalog.catalog import load_bundled
from evaluators.metrics import (
    compute_metrics,
    distinct_n,
    diversity,
    ground_truth_hit,
    hallucination_rate,
    is_rejection,
    novelty,
    popularity,
    recall_at_k,
    repetition,
    semantic_relevance,
    session_list,
    session_recall_at_k,
)
from storage.records import Conversation, ItemRef, Turn

EXPECTED_KEYS = [
    "recall@1",
    "recall@5",
    "recall@10",
    "recall@25",
    "recall@50",
    "session_recall@1",
    "session_recall@5",
    "session_recall@10",
    "session_recall@25",
    "session_recall@50",
    "recall_targets",
    "recall_list",
    "recall_hit_k",
    "session_list_size",
    "gt_hit",
    "gt_hit_turn",
    "hallucination_rate",
    "reference_catalog",
    "recommended_items",
    "nonexistent_items",
    "semantic_relevance",
    "semantic_relevance_score",
    "diversity_genre",
    "diversity_director",
    "diversity_lead_actor",
    "diversity_decade",
    "diversity_items",
    "diversity_score",
    "novelty",
    "novelty_less_known",
    "novelty_score",
    "novelty_basis",
    "unknown_items",
    "rejections",
    "repeated_items",
    "repeat_turns",
    "distinct_1",
    "distinct_2",
]


@pytest.fixture(scope="module")
def catalog():
    return load_bundled()


def ref(catalog, title):
    return catalog.match(title).ref()


@pytest.fixture(scope="module")
def dialogue(catalog):
    """Two system turns: a clean one, then one that repeats a rejected title and invents one."""
    raiders, star_wars, godfather = (ref(catalog, t) for t in ("Raiders of the Lost Ark", "Star Wars", "The Godfather"))
    stagecoach, shane = ref(catalog, "Stagecoach"), ref(catalog, "Shane")
    return Conversation(
        system_id="chatcrs",
        history=[Turn("system", "Heat (1995) is on tonight.", items=[ref(catalog, "Heat")])],  # context only
        turns=[
            Turn("user", "I want a classic adventure."),
            Turn(
                "system",
                "You could watch Raiders of the Lost Ark (1981) or Star Wars (1977).",
                items=[raiders, star_wars, godfather],
            ),
            Turn("user", "I've seen Star Wars already."),
            Turn(
                "system",
                "Then Stagecoach (1939) is a great western and Star Wars (1977) is a classic too; "
                "Moonlight Voyage Deluxe (2019) as well.",
                items=[stagecoach, shane, ItemRef("zz-unknown", "Unknown Film (2020)")],
            ),
            Turn("user", "Great, thanks!"),
        ],
        targets=[shane, ref(catalog, "Back to the Future")],
    )


def test_session_list_concatenates_and_deduplicates(dialogue):
    conv = Conversation(
        system_id="x",
        turns=[
            Turn("system", "a", items=[ItemRef("1", "A"), ItemRef("2", "B")]),
            Turn("user", "more"),
            Turn("system", "b", items=[ItemRef("2", "B"), ItemRef("3", "C")]),
        ],
    )
    assert [r.id for r in session_list(conv)] == ["1", "2", "3"]
    assert [r.id for r in session_list(dialogue)] == [
        "raiders-of-the-lost-ark-1981",
        "star-wars-1977",
        "the-godfather-1972",
        "stagecoach-1939",
        "shane-1953",
        "zz-unknown",
    ]


def test_recall_and_hit(dialogue):
    # the dialogue ends on a list of fewer than five items and no ranking: every k beyond it is "–" (iEvaLM marks
    # what a system did not return); the session list holds six items
    assert recall_at_k(dialogue) == {1: 0.0, 5: None, 10: None, 25: None, 50: None}
    assert session_recall_at_k(dialogue) == {1: 0.0, 5: 0.5, 10: None, 25: None, 50: None}
    hit = ground_truth_hit(dialogue)
    assert hit.hit is True and hit.turn == 2


def _turns(*lists, targets, ranked=True):
    """A dialogue with one system turn per list of ids (user turns between), and the target ids. ``ranked``: each
    list is also the turn's ranking (a system that keeps one, as iEvaLM's CRSs do)."""
    turns = []
    for ids in lists:
        refs = [ItemRef(i, i) for i in ids]
        turns += [Turn("user", "more please"), Turn("system", "here", items=refs, ranking=refs if ranked else [])]
    return Conversation(system_id="x", turns=turns, targets=[ItemRef(t, t) for t in targets])


def _ten(turn):
    return [f"t{turn}-{rank}" for rank in range(1, 11)]


def test_recall_hand_computed_hit_at_turn_three_rank_one():
    # three turns of ten items; the target is first in turn 3's list. iEvaLM scores the list the
    # dialogue ends on (its first hit): rank 1. CoRE's session list holds it at position 21.
    conv = _turns(_ten(1), _ten(2), ["goal", *_ten(3)[1:]], targets=["goal"])
    assert recall_at_k(conv) == {1: 1.0, 5: 1.0, 10: 1.0, 25: None, 50: None}  # a list of ten: "–" beyond 10
    assert session_recall_at_k(conv) == {1: 0.0, 5: 0.0, 10: 0.0, 25: 1.0, 50: None}  # thirty in the session
    assert session_list(conv)[20].id == "goal"


def test_recall_hand_computed_hit_at_rank_twelve():
    items = [f"i{rank}" for rank in range(1, 21)]
    items[11] = "goal"  # rank 12
    items += [f"j{rank}" for rank in range(21, 51)]  # a ranking of 50
    conv = _turns(items, targets=["goal", "other"])
    assert recall_at_k(conv) == {1: 0.0, 5: 0.0, 10: 0.0, 25: 0.5, 50: 0.5}  # one of two targets
    assert session_recall_at_k(conv) == {1: 0.0, 5: 0.0, 10: 0.0, 25: 0.5, 50: 0.5}


def test_recall_hand_computed_no_hit():
    conv = _turns(_ten(1), _ten(2), targets=["goal"])
    assert recall_at_k(conv) == {1: 0.0, 5: 0.0, 10: 0.0, 25: None, 50: None}
    assert session_recall_at_k(conv) == {1: 0.0, 5: 0.0, 10: 0.0, 25: None, 50: None}  # twenty in the session
    # no list at all measured nothing found: 0, not "–"
    empty = Conversation(system_id="x", turns=[Turn("system", "What do you like?")], targets=[ItemRef("goal", "g")])
    assert recall_at_k(empty) == session_recall_at_k(empty) == {1: 0.0, 5: 0.0, 10: 0.0, 25: 0.0, 50: 0.0}


def test_recall_scores_the_first_hit_list_when_the_dialogue_went_on():
    # hit at rank 3 in turn 1, then first at turn 2: iEvaLM would have stopped after turn 1
    conv = _turns(["a", "b", "goal"], ["goal", "c"], targets=["goal"])
    assert recall_at_k(conv) == {1: 0.0, 5: None, 10: None, 25: None, 50: None}  # a list of three
    assert recall_at_k(conv, hit_k=2)[1] == 1.0  # with success at top 2, turn 1 was no success


def test_hallucination_rate_is_concepts_share_of_recommended_items_that_do_not_exist(dialogue, catalog):
    result = hallucination_rate(dialogue, catalog)
    # recommended: Raiders, Star Wars, The Godfather (list 1); Stagecoach, Shane, the unknown list item and the
    # invented title in the text (turn 2); Star Wars again counts once
    assert result.recommended == 7 and result.rate == pytest.approx(2 / 7)
    assert set(result.nonexistent) == {"Unknown Film (2020)", "Moonlight Voyage Deluxe (2019)"}


def _said(*texts: str) -> Conversation:
    turns = [Turn("system" if i % 2 else "user", t) for i, t in enumerate(texts)]
    return Conversation(system_id="x", turns=turns)


def test_hallucination_rate_reads_titles_without_a_year_and_misspellings(catalog):
    # CONCEPT's own example: BARCOR wrote "The Prestigige" for "The Prestige", a non-existent item
    spelt = hallucination_rate(_said("A twisty film?", "I recommend Inception and The Prestigige."), catalog)
    assert spelt.recommended == 2 and spelt.nonexistent == ("The Prestigige",)
    unknown_and = hallucination_rate(_said("Cute?", "You might enjoy The Adventures of Milo and Ours."), catalog)
    assert unknown_and.nonexistent == ("The Adventures of Milo and Ours",) and unknown_and.rate == 1.0
    listing = "Here you go:\n1. Stagecoach\n2. Zorblax Returns: a classic"
    listed = hallucination_rate(_said("Westerns?", listing), catalog)
    assert listed.recommended == 2 and listed.nonexistent == ("Zorblax Returns",)


def test_hallucination_rate_leaves_out_references_people_and_chit_chat(catalog):
    reference = _said("I loved Zorblax Returns.", "Since you liked Zorblax Returns, try Inception.")
    assert (hallucination_rate(reference, catalog).recommended, hallucination_rate(reference, catalog).rate) == (1, 0)
    person = _said("Who directs well?", "How about Christopher Nolan films? I would go with Inception.")
    assert hallucination_rate(person, catalog).nonexistent == ()
    chat = _said("Hi", "Hello! What are you in the mood for? I suggest something light.")
    assert hallucination_rate(chat, catalog).rate is None and hallucination_rate(chat, catalog).recommended == 0


def test_semantic_relevance_is_the_share_in_each_turns_list(dialogue, catalog):
    result = semantic_relevance(dialogue, catalog)
    # turn 1: both titles listed; turn 2: Stagecoach listed, Star Wars and the invented title not
    assert (result.in_list, result.mentioned) == (3, 5)
    assert result.share == pytest.approx(0.6) and result.score == 3


def test_diversity_counts_distinct_metadata(dialogue, catalog):
    result = diversity(dialogue, catalog)
    # genres: Action Adventure Fantasy Sci-Fi Crime Drama Western; first-billed: Ford, Hamill, Brando,
    # Wayne, Ladd; decades 1980s 1970s 1930s 1950s
    assert result.counts == {"genre": 7, "director": 5, "lead_actor": 5, "decade": 4}
    assert (result.items, result.unknown, result.score) == (5, 1, 4)
    single = Conversation(system_id="x", turns=[Turn("system", "", items=[ref(catalog, "The Godfather")])])
    one = diversity(single, catalog)
    assert one.counts == {"genre": 2, "director": 1, "lead_actor": 1, "decade": 1} and one.score == 1


def _listing(catalog, *titles):
    return Conversation(system_id="x", turns=[Turn("system", "", items=[ref(catalog, t) for t in titles])])


def test_diversity_on_obvious_lists(catalog):
    trilogy = diversity(
        _listing(
            catalog,
            "Raiders of the Lost Ark",
            "Indiana Jones and the Temple of Doom",
            "Indiana Jones and the Last Crusade",
        ),
        catalog,
    )
    # one director, one lead (Harrison Ford), one decade: only the two genres vary
    assert trilogy.counts == {"genre": 2, "director": 1, "lead_actor": 1, "decade": 1} and trilogy.score == 1
    varied = diversity(
        _listing(catalog, "Raiders of the Lost Ark", "The Godfather", "Stagecoach", "Shane", "Heat"), catalog
    )
    assert varied.counts["director"] == varied.counts["lead_actor"] == varied.counts["decade"] == 5
    assert varied.score == 4


def test_novelty_counts_items_below_the_median_popularity(dialogue, catalog):
    result = novelty(dialogue, catalog)
    # ranks 3, 2, 1, 499, 500 against a median of 250.5; the unknown id has no rank
    assert (result.less_known, result.ranked) == (2, 5)
    assert result.share == pytest.approx(0.4) and result.score == 3 and result.basis == "rank"


def test_novelty_on_obvious_lists(catalog):
    famous = novelty(_listing(catalog, "The Godfather", "Star Wars", "Raiders of the Lost Ark"), catalog)
    assert (famous.less_known, famous.ranked, famous.score) == (0, 3, 0)
    obscure = novelty(_listing(catalog, "Stagecoach", "Shane"), catalog)
    assert (obscure.less_known, obscure.share, obscure.score) == (2, 1.0, 4)


def test_dataset_conversations_use_the_datasets_catalog_and_mention_counts(shared_data, catalog):
    from catalog.catalog import get_catalog

    redial = get_catalog("redial")
    known = popularity(redial)
    assert known.basis == "mentions in redial dialogues" and 100 < len(known.well_known) < 1000
    hits = [
        redial.match_name(n).ref()
        for n in ("Black Panther (2018)", "Deadpool 2 (2018)", "Avengers: Infinity War (2018)")
    ]
    blockbusters = Conversation(system_id="x", turns=[Turn("system", "", items=hits)], metadata={"dataset": "redial"})
    assert novelty(blockbusters, redial).score == 0
    rare = [i.ref() for i in redial.items if i.id not in known.well_known][:4]
    unseen = Conversation(system_id="x", turns=[Turn("system", "", items=rare)], metadata={"dataset": "redial"})
    assert novelty(unseen, redial).score == 4 and novelty(unseen, redial).share == 1.0
    # an item exists when the catalog in use or the dataset (ReDial's movies) holds it
    text = Turn("system", "You should watch Pari (1995).")
    assert "Pari" not in {i.title for i in catalog.items}
    assert hallucination_rate(Conversation(system_id="x", turns=[text]), catalog).rate == 0.0
    checked = hallucination_rate(Conversation(system_id="x", turns=[text]), catalog).checked_against
    assert checked == ("bundled", "redial")
    invented = Turn("system", "You should watch Parimoonvoyage (1995).")
    assert hallucination_rate(Conversation(system_id="x", turns=[invented]), catalog).rate == 1.0
    in_redial = Conversation(system_id="x", turns=[text], metadata={"dataset": "redial"})
    assert hallucination_rate(in_redial, catalog).rate == 0.0
    assert compute_metrics(in_redial, catalog)["reference_catalog"] == "redial"


def test_repetition_after_the_user_rejects_a_named_title(dialogue, catalog):
    result = repetition(dialogue, catalog)
    assert result.rejections == 1 and result.repeated == ("star-wars-1977",) and result.repeat_turns == 1


def test_repetition_after_ive_seen_it(catalog):
    heat, godfather = ref(catalog, "Heat"), ref(catalog, "The Godfather")
    conv = Conversation(
        system_id="x",
        turns=[
            Turn("system", "How about Heat (1995)?", items=[heat]),
            Turn("user", "I've seen it."),
            Turn("system", "Then The Godfather (1972).", items=[godfather]),
            Turn("user", "Hmm, maybe."),
            Turn("system", "Or Heat (1995) after all?", items=[heat, godfather]),
        ],
    )
    result = repetition(conv, catalog)
    assert result.rejections == 1 and result.repeated == ("heat-1995",) and result.repeat_turns == 1
    assert repetition(conv).repeated == ("heat-1995",)  # lists alone suffice without a catalog


@pytest.mark.parametrize(
    "text,rejects",
    [
        ("I've seen it.", True),
        ("I’ve seen that", True),
        ("I have already watched that one", True),
        ("No, something else please", True),
        ("Nope", True),
        ("I didn't like it", True),
        ("Not that one.", True),
        ("I haven't seen it, tell me more", False),
        ("I have not seen it", False),
        ("I haven’t seen it", False),
        ("Sounds great, I'll watch it", False),
        ("I know nothing about it, what is it about?", False),
        ("Yes please!", False),
    ],
)
def test_rejection_cues(text, rejects):
    assert is_rejection(text) is rejects


def test_distinct_n():
    conv = Conversation(system_id="x", turns=[Turn("system", "A b a"), Turn("user", "b b b"), Turn("system", "b, c!")])
    assert distinct_n(conv, 1) == pytest.approx(3 / 5)
    assert distinct_n(conv, 2) == pytest.approx(3 / 3)  # (a b) (b a) | (b c): no n-gram across turns
    assert distinct_n(Conversation(system_id="x", turns=[Turn("system", "one")]), 2) is None


def test_compute_metrics_has_stable_keys(dialogue, catalog):
    metrics = compute_metrics(dialogue, catalog)
    assert list(metrics) == EXPECTED_KEYS
    assert (
        metrics["session_recall@5"] == 0.5
        and metrics["recall@5"] is None
        and metrics["gt_hit_turn"] == 2
        and metrics["unknown_items"] == 1
    )
    assert set(metrics["nonexistent_items"]) == {"Unknown Film (2020)", "Moonlight Voyage Deluxe (2019)"}
    assert metrics["distinct_1"] < 1


def test_empty_conversation(catalog):
    metrics = compute_metrics(Conversation(system_id="x"), catalog)
    assert list(metrics) == EXPECTED_KEYS
    assert all(metrics[f"recall@{k}"] is None for k in (1, 5, 10, 50)) and metrics["gt_hit"] is None
    assert metrics["session_list_size"] == 0 and metrics["hallucination_rate"] is None
    assert metrics["semantic_relevance"] is None and metrics["semantic_relevance_score"] is None
    assert metrics["diversity_genre"] == 0 and metrics["diversity_score"] is None
    assert metrics["novelty"] is None and metrics["novelty_score"] is None
    assert metrics["rejections"] == metrics["repeated_items"] == 0 and metrics["distinct_1"] is None


def test_no_system_turn_with_targets(catalog):
    conv = Conversation(
        system_id="x", turns=[Turn("user", "Hi, no idea what to watch")], targets=[ref(catalog, "Heat")]
    )
    metrics = compute_metrics(conv, catalog)
    assert metrics["recall@50"] == 0.0 and metrics["gt_hit"] is False and metrics["gt_hit_turn"] is None
    assert metrics["semantic_relevance_score"] is None and metrics["rejections"] == 0


def test_system_turns_without_lists(catalog):
    conv = Conversation(
        system_id="x",
        turns=[
            Turn("user", "Something scary?"),
            Turn("system", "What kind of scary?"),
            Turn("user", "Ghosts."),
            Turn("system", "Try The Shining (1980)."),
        ],
    )
    metrics = compute_metrics(conv, catalog)
    assert metrics["session_list_size"] == 0 and metrics["diversity_score"] is None
    assert metrics["semantic_relevance"] == 0.0 and metrics["semantic_relevance_score"] == 0
    silent = Conversation(system_id="x", turns=[Turn("system", "What kind of scary?")])
    assert semantic_relevance(silent, catalog).share is None and semantic_relevance(silent, catalog).score == 0


def test_unknown_ids_do_not_crash(catalog):
    unknown = ItemRef("not-in-catalog", "Nope (2030)")
    conv = Conversation(
        system_id="x", turns=[Turn("system", "Nope (2030)!", items=[unknown]), Turn("user", "No.")], targets=[unknown]
    )
    metrics = compute_metrics(conv, catalog)
    assert metrics["recall@1"] == 1.0 and metrics["gt_hit"] is True
    assert metrics["unknown_items"] == 1 and metrics["diversity_items"] == 0 and metrics["diversity_score"] is None
    assert metrics["novelty"] is None and metrics["hallucination_rate"] == 1.0
    assert metrics["semantic_relevance"] == 1.0  # the invented title is in its own turn's list


def test_recall_reads_the_whole_ranking_not_the_named_top_three(db_path):
    """CRS Arena's policy names three titles; iEvaLM's recall reads the recommender's top 50 (Turn.ranking)."""
    from storage.conversations import get_conversation, save_conversation
    from storage.db import get_db

    ranking = [ItemRef(f"r{rank}", f"R{rank}") for rank in range(1, 51)]
    ranking[7] = ItemRef("goal-a", "Goal A")  # rank 8
    ranking[29] = ItemRef("goal-b", "Goal B")  # rank 30
    conv = Conversation(
        system_id="kbrd",
        turns=[Turn("user", "a film please"), Turn("system", "Try R1, R2, R3.", items=ranking[:3], ranking=ranking)],
        targets=[ItemRef("goal-a", "Goal A"), ItemRef("goal-b", "Goal B")],
    )
    assert recall_at_k(conv) == {1: 0.0, 5: 0.0, 10: 0.5, 25: 0.5, 50: 1.0}
    assert session_recall_at_k(conv) == {1: 0.0, 5: None, 10: None, 25: None, 50: None}  # CoRE's: the three shown
    shown_only = Conversation(system_id="kbrd", turns=[Turn("system", "x", items=ranking[:3])], targets=conv.targets)
    assert recall_at_k(shown_only)[1] == 0.0 and recall_at_k(shown_only)[5] is None  # three shown, no ranking: "–"
    metrics = compute_metrics(conv, load_bundled())
    assert metrics["recall@10"] == 0.5 and metrics["recall@50"] == 1.0
    assert metrics["recall_list"] == "ranking" and metrics["recall_hit_k"] == 50
    assert compute_metrics(shown_only, load_bundled())["recall_list"] == "items"
    # stored and read back with the turn
    db = get_db(db_path)
    save_conversation(db, conv)
    again = get_conversation(db, conv.id)
    assert again.turns[1].ranking == ranking and again.turns[1].items == ranking[:3]
    assert Turn.from_dict(conv.turns[1].to_dict()).ranking == ranking


def test_recall_uses_the_hit_k_the_simulation_ran_with():
    ranking = [ItemRef(f"r{rank}", f"R{rank}") for rank in range(1, 51)]
    ranking[19] = ItemRef("goal", "Goal")  # rank 20
    later = [ItemRef("goal", "Goal")] + ranking[1:]
    conv = Conversation(
        system_id="kbrd",
        turns=[
            Turn("system", "a", items=ranking[:3], ranking=ranking),
            Turn("system", "b", items=later[:3], ranking=later),
        ],
        targets=[ItemRef("goal", "Goal")],
        metadata={"simulation": {"protocol": {"hit_k": 10}}},
    )
    # with success at the top 10, the first turn (rank 20) was no success: the dialogue went on to rank 1
    assert compute_metrics(conv, load_bundled())["recall@1"] == 1.0
    conv.metadata = {}
    assert compute_metrics(conv, load_bundled())["recall@1"] == 0.0  # iEvaLM's 50: it stopped at rank 20


def test_recall_beyond_the_list_a_system_returned_is_a_dash():
    """iEvaLM Table 2 marks ChatGPT's Recall@50 '–': it returned no 50 items. The same holds for any k beyond the
    list a system returned (issue #74, point 5): three shown items and no ranking are Recall@1 only, not
    R@5 = R@10 = 1.0 on a hit."""
    three = _turns(["a", "goal", "b"], targets=["goal"], ranked=False)
    assert recall_at_k(three) == {1: 0.0, 5: None, 10: None, 25: None, 50: None}
    assert session_recall_at_k(three) == {1: 0.0, 5: None, 10: None, 25: None, 50: None}
    first = _turns(["goal", "a", "b"], targets=["goal"], ranked=False)
    metrics = compute_metrics(first, load_bundled())
    assert metrics["recall@1"] == 1.0 and metrics["recall@5"] is None and metrics["session_recall@10"] is None
    items = [f"i{rank}" for rank in range(1, 21)]
    items[11] = "goal"  # rank 12 of a 20-item shown list
    rankless = _turns(items, targets=["goal"], ranked=False)
    assert recall_at_k(rankless) == {1: 0.0, 5: 0.0, 10: 0.0, 25: None, 50: None}
    metrics = compute_metrics(rankless, load_bundled())
    assert metrics["recall@25"] is None and metrics["recall@50"] is None and metrics["recall@10"] == 0.0
    assert metrics["recall_list"] == "items"
    # the same twenty kept as the system's ranking: still "–" at 25, the list is what the system returned
    assert recall_at_k(_turns(items, targets=["goal"]))[25] is None
    assert recall_at_k(_turns(items + [f"x{n}" for n in range(5)], targets=["goal"]))[25] == 1.0


def test_hallucination_counts_items_missing_from_the_conversations_dataset(shared_data, catalog):
    """CONCEPT A.2.4: "how many items recommended by the CRS do not exist in the dataset". Pari (1995) is a ReDial
    movie and Stagecoach (1939) a bundled one, neither in OpenDialKG: in an OpenDialKG conversation both count."""
    from catalog.catalog import get_catalog

    opendialkg = get_catalog("opendialkg")
    assert opendialkg.matcher.match("Pari (1995)", threshold=95) is None
    assert opendialkg.matcher.match("Stagecoach (1939)", threshold=95) is None
    text = Turn("system", "You should watch Pari (1995) or Stagecoach (1939).")
    kg = Conversation(system_id="x", turns=[text], metadata={"dataset": "opendialkg"})
    result = hallucination_rate(kg, catalog)
    assert result.checked_against == ("opendialkg",)
    assert result.recommended == 2 and result.rate == 1.0
    # the same reply in a ReDial conversation: ReDial holds both
    rd = hallucination_rate(Conversation(system_id="x", turns=[text], metadata={"dataset": "redial"}), catalog)
    assert rd.checked_against == ("redial",) and rd.rate == 0.0


def test_a_neural_turn_is_read_from_its_generated_text_not_the_policys_list(catalog):
    """Issue #42 point 5: for KBRD/BARCOR/UniCRS the items offered are those of the generated text; the list the
    serving policy builds from the ranking (metadata["generated"] marks a neural turn) is not the model's text."""
    listed = [ref(catalog, t) for t in ("Stagecoach", "Shane", "Heat")]
    neural = Turn(
        "system",
        "I would recommend the following items: Stagecoach (1939), Shane (1953), Heat (1995)",
        items=listed,
        metadata={"generated": "You will love Zorblax Returns (2011)!", "policy": "crs_arena_exact"},
    )
    result = hallucination_rate(Conversation(system_id="kbrd", turns=[Turn("user", "hi"), neural]), catalog)
    assert result.recommended == 1 and result.nonexistent == ("Zorblax Returns (2011)",) and result.rate == 1.0


def test_pooled_hallucination_is_concepts_per_system_ratio_beside_the_mean():
    """CONCEPT reports one ratio per system: non-existent over recommended items, pooled over conversations."""
    from evaluators.metrics import pooled_hallucination

    rows = [
        {"hallucination_rate": 1.0, "recommended_items": 1, "nonexistent_items": ["Zorblax (2011)"]},
        {"hallucination_rate": 0.0, "recommended_items": 9, "nonexistent_items": []},
        {"hallucination_rate": None, "recommended_items": 0, "nonexistent_items": []},
    ]
    result = pooled_hallucination(rows)
    assert (result.recommended, result.nonexistent, result.conversations) == (10, 1, 2)
    assert result.pooled == pytest.approx(1 / 10) and result.mean == pytest.approx(1 / 2)
    assert pooled_hallucination([]).pooled is None


def test_the_simulation_summary_reports_the_pooled_rate_beside_the_mean():
    from evaluators.simulator.report import DIALOGUE_COLUMNS, summary_rows

    def dialogue(rate, recommended, missing):
        row = dict.fromkeys(DIALOGUE_COLUMNS) | {"system": "kbrd", "status": "done", "accepted": False}
        return row | {"hallucination_rate": rate, "recommended_items": recommended, "nonexistent_items": missing}

    (row,) = summary_rows([dialogue(1.0, 1, 1), dialogue(0.0, 9, 0)], ["kbrd"])
    assert row["hallucination_pooled"] == pytest.approx(0.1) and row["hallucination_mean"] == pytest.approx(0.5)
