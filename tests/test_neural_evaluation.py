"""The measurement definitions of crs_backends/neural/evaluation.py, checked against examples worked by hand from the
published definitions: Recall@k as iEvaLM and CRSLab count it, Distinct-n and BLEU-2 as UniCRS's
``src/evaluate_conv.py`` computes them (NLTK's ``sentence_bleu`` with weights [0, 1, 0, 0]), the Jaccard overlap of
two top-k lists, and the validation split held out of training by conversation id."""

from __future__ import annotations

import json
import math

import pytest

from catalog.ievalm_records import Record
from crs_backends.neural.evaluation import (
    MOVIE,
    bleu,
    distinct_n,
    gold_items,
    is_validation,
    jaccard,
    mask_movies,
    recall_at_k,
    recall_interval,
    sentence_bleu,
    split_by_conversation,
    top_k_overlap,
)
from crs_backends.neural.kg_reader import KGData


def test_recall_counts_one_sample_per_gold_item_and_skips_records_without_one():
    pairs = [
        ([1, 2, 3], [2]),  # second
        ([4, 5, 6], [6, 9]),  # 6 third, 9 not ranked
        ([7], []),  # no gold item: not a sample
    ]
    recall = recall_at_k(pairs, ks=(1, 2, 3))
    assert recall.records == 2 and recall.samples == 3
    assert recall.at == {1: 0.0, 2: pytest.approx(1 / 3), 3: pytest.approx(2 / 3)}
    assert recall_at_k([], ks=(1, 10)).at == {1: 0.0, 10: 0.0}


def _conversations(n_conv: int, per_conv: int, rate: float, seed: int):
    """Records in conversations whose hits go together (a conversation's records share its films): a conversation
    is found at ``rate``, and then all its records are hits."""
    import random

    rng = random.Random(seed)
    rankings, gold, groups = [], [], []
    for c in range(n_conv):
        found = rng.random() < rate
        for _ in range(per_conv):
            gold.append([7])
            rankings.append([7, 1, 2] if found else [1, 2, 3])
            groups.append(f"c{c}")
    return rankings, gold, groups


def test_recalls_interval_resamples_conversations_and_holds_the_figure():
    rankings, gold, groups = _conversations(200, 5, 0.3, seed=1)
    interval = recall_interval(rankings, gold, groups, k=10)
    assert interval.value == pytest.approx(recall_at_k(zip(rankings, gold)).at[10])
    assert interval.low < interval.value < interval.high and interval.groups == 200
    # read as 1,000 independent records the same hits look five times surer than they are: the interval is wider
    # when it resamples whole conversations
    alone = recall_interval(rankings, gold, [str(i) for i in range(len(groups))], k=10)
    assert alone.value == pytest.approx(interval.value)
    assert (interval.high - interval.low) > 1.5 * (alone.high - alone.low)
    with pytest.raises(ValueError, match="one entry per record"):
        recall_interval(rankings, gold[:-1], groups)
    with pytest.raises(ValueError, match="two conversations"):
        recall_interval(rankings, gold, ["one"] * len(groups))


def test_the_difference_of_two_models_is_paired_on_the_same_records():
    rankings, gold, groups = _conversations(200, 3, 0.3, seed=2)
    same = recall_interval(rankings, gold, groups, against=rankings)
    assert same.value == 0 and same.low == 0 and same.high == 0
    # a model that finds every film of one conversation in three more: the difference and an interval above 0
    better = [[7, *r[1:]] if int(g[1:]) % 3 == 0 else r for r, g in zip(rankings, groups)]
    diff = recall_interval(better, gold, groups, against=rankings)
    assert diff.value == pytest.approx(recall_at_k(zip(better, gold)).at[10] - recall_at_k(zip(rankings, gold)).at[10])
    assert 0 < diff.low < diff.value < diff.high
    with pytest.raises(ValueError, match="one entry per record"):
        recall_interval(better, gold, groups, against=rankings[:-1])


def test_gold_items_are_the_targets_the_kg_holds_as_items():
    kg = KGData({"A (2001)": 0, "B (2002)": 1, "Horror": 2}, {"genre": 0}, {"0": [[0, 2]]}, [0, 1], name="tiny")
    record = Record(["hi"], [], ["B (2002)", "Horror", "Unknown (1999)", "B (2002)"], "")
    assert gold_items(record, kg) == [1]  # a genre is no item, an unknown title no entity; each item once


def test_movie_names_are_masked_whole_and_in_any_case():
    text = "Have you seen Heat (1995)? heat (1995) is great, better than Heat (1995) Returns and Heatwave"
    masked = mask_movies(text, ["Heat (1995)", "Heat (1995) Returns"])
    assert masked == f"Have you seen {MOVIE}? {MOVIE} is great, better than {MOVIE} and Heatwave"
    assert mask_movies("nothing to mask", []) == "nothing to mask"


def test_distinct_n_is_unique_ngrams_of_the_whole_set_over_non_empty_responses():
    responses = ["I like <movie> a lot", "I like it", "  "]
    # bigrams: (I like) (like <movie>) (<movie> a) (a lot) | (I like) (like it): 5 different, 2 non-empty responses
    # trigrams: 3 + 1 = 4; 4-grams: 2 + 0 = 2
    assert distinct_n(responses) == {2: 2.5, 3: 2.0, 4: 1.0}
    assert distinct_n(["i like", "I like"], ns=(1, 2)) == {1: 1.5, 2: 1.0}  # words as written: "i" is not "I"
    assert distinct_n(["", " "]) == {2: 0.0, 3: 0.0, 4: 0.0}


def test_sentence_bleu_2_is_the_brevity_penalty_times_the_clipped_bigram_precision():
    # hypothesis bigrams: the-cat cat-sat sat-on on-the the-mat; the reference holds the-cat on-the the-mat: 3 of 5;
    # both six words long: no penalty (NLTK's sentence_bleu(weights=(0, 1, 0, 0)) gives 0.6 as well)
    assert sentence_bleu("the cat sat on the mat", "the cat is on the mat") == pytest.approx(0.6)
    # one bigram, matched; two words against six: penalty exp(1 - 6/2)
    assert sentence_bleu("the cat", "the cat sat on the mat") == pytest.approx(math.exp(-2))
    # the-the twice, but the reference has it once: clipped to 1 of 2
    assert sentence_bleu("the the the", "the the cat") == pytest.approx(0.5)
    # a longer hypothesis has no penalty: 1 of 3 bigrams (a-b)
    assert sentence_bleu("a b c d", "a b") == pytest.approx(1 / 3)
    assert sentence_bleu("cat", "the cat") == 0.0  # no bigram at all
    assert sentence_bleu("dog bites man", "man bites dog") == 0.0  # words match, no bigram does
    assert sentence_bleu("", "the cat") == 0.0


def test_bleu_sums_over_responses_and_divides_by_the_non_empty_ones():
    responses = ["the cat sat on the mat", "", "the cat"]
    references = ["the cat is on the mat", "hello there", "the cat sat on the mat"]
    assert bleu(responses, references) == pytest.approx((0.6 + 0.0 + math.exp(-2)) / 2)
    assert bleu([""], ["x y"]) == 0.0
    with pytest.raises(ValueError):
        bleu(["a b"], [])


def test_top_k_overlap_is_the_mean_jaccard_of_each_pair_on_the_same_contexts():
    assert jaccard([1, 2, 3], [2, 3, 4]) == 0.5
    assert jaccard([], []) == 1.0
    rankings = {"a": [[1, 2, 3], [5, 6]], "b": [[2, 1, 9], [7, 8]], "c": [[1, 9], [5, 7]]}
    overlap = top_k_overlap(rankings, k=2)
    assert overlap[("a", "b")] == 0.5  # the same two, then none
    assert overlap[("a", "c")] == pytest.approx(1 / 3)  # one of three each time
    assert overlap[("b", "c")] == pytest.approx(1 / 3)  # {2, 1} and {1, 9}; {7, 8} and {5, 7}
    with pytest.raises(ValueError):
        top_k_overlap({"a": [[1]], "b": []})


def test_the_validation_split_keeps_conversations_whole_and_in_order():
    records = [Record([str(n)], [], [], "", dialog_id=str(n // 3)) for n in range(300)]  # 3 records per dialogue
    train, validation = split_by_conversation(records)
    assert len(train) + len(validation) == 300 and validation
    assert {r.dialog_id for r in train}.isdisjoint({r.dialog_id for r in validation})
    assert all(is_validation(r.dialog_id) for r in validation) and not any(is_validation(r.dialog_id) for r in train)
    assert [int(r.context[0]) for r in train] == sorted(int(r.context[0]) for r in train)
    share = len({r.dialog_id for r in validation}) / 100
    assert 0.03 <= share <= 0.2  # about a tenth


def test_a_tenth_of_redials_training_conversations_is_held_out(shared_data):
    ids = [
        json.loads(line)["conversationId"]
        for name in ("redial/valid_data.jsonl", "redial_train_partial/train_partial.jsonl")
        for line in (shared_data / name).read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    assert len(ids) == 4101 and sum(map(is_validation, ids)) == 404
