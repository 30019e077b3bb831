"""The small BARCOR is BARCOR's architecture: the packaged all-MiniLM-L6-v2 as its pretrained (frozen) encoder, a reply
decoder attending to that encoding, and a recommender that reads no knowledge graph: its own fine-tuned copy of the
encoder's top layers under BART's classification head. Real MiniLM weights, real training on a handful of records."""

from __future__ import annotations

import json

import pytest
import torch
from neural_fixtures import one_thread  # noqa: F401 (an autouse fixture)

from catalog.catalog import load_bundled
from catalog.ievalm_records import Record
from crs_backends.neural import barcor_backbone, barcor_training
from crs_backends.neural.barcor import BARCOR, wordpiece_text
from crs_backends.neural.checkpoints import CheckpointError, part_dir
from crs_backends.neural.engine import MOVIE_SLOT, ConvInput, TrainConfig
from crs_backends.neural.kg_reader import kg_from_catalog
from crs_backends.neural.names import SMALL_BUILD_COMMAND


@pytest.fixture(scope="module")
def kg():
    return kg_from_catalog(load_bundled())


@pytest.fixture(scope="module")
def records(kg):
    names = [kg.entity_name(i) for i in kg.item_ids[:6]]
    return [
        Record(
            [f"I like space movies, anything like {names[i % 6]}?"],
            [names[i % 6]],
            [names[(i + 1) % 6]],
            f"Have you seen {names[(i + 1) % 6]}? It is great.",
        )
        for i in range(24)
    ]


@pytest.fixture(scope="module")
def trained(tmp_path_factory, kg, records):
    model = BARCOR.create(kg, size="small", seed=0)
    before = {k: v.clone() for k, v in model.conv_model.model.encoder.state_dict().items()}
    shared = model.conv_model.model.shared.weight.detach().clone()
    decoder = {k: v.clone() for k, v in barcor_backbone.decoder_state(model.conv_model).items()}
    rec = {k: v.clone() for k, v in model.rec_top.state_dict().items()}
    root = tmp_path_factory.mktemp("barcor-small")
    config = TrainConfig(size="small", epochs=2, max_steps=4, batch_size=8, lr=1e-3, reply_lr=1e-3, progress=False)
    report = barcor_training.train(model, records, root, "bundled", config)
    return model, root, report, before, shared, decoder, rec


def test_minilm_weights_compute_what_minilm_computes():
    from transformers import BertModel

    tok = barcor_backbone.minilm_tokenizer()
    bart = barcor_backbone.minilm_conv_model(len(tok), seed=0).eval()
    bert = BertModel.from_pretrained(str(barcor_backbone.minilm_dir())).eval()
    batch = tok(["I loved The Matrix, something like it please", "hi"], padding=True, return_tensors="pt")
    with torch.no_grad():
        ours = bart.get_encoder()(**batch).last_hidden_state
        theirs = bert(**batch).last_hidden_state
    mask = batch["attention_mask"].bool()
    assert torch.allclose(ours[mask], theirs[mask], atol=1e-4)


def test_encoder_frozen_decoder_and_recommender_learn(trained):
    model, _root, report, before, shared, decoder, rec = trained
    after = model.conv_model.model.encoder.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert torch.equal(shared, model.conv_model.model.shared.weight)
    changed = barcor_backbone.decoder_state(model.conv_model)
    assert any(not torch.equal(decoder[k], changed[k]) for k in decoder)
    assert report.losses["conv"][-1] < report.losses["conv"][0]
    assert len(report.losses["rec"]) > 0
    # the recommender's own copy of the top layers trained (the encoder's originals did not: above), and its head
    learned = model.rec_top.state_dict()
    assert any(not torch.equal(rec[k], learned[k]) for k in rec if k.startswith("layers."))
    assert any(not torch.equal(rec[k], learned[k]) for k in rec if k.startswith("head."))


def test_recommender_copies_the_encoders_top_layers(kg):
    model = BARCOR.create(kg, size="small", seed=0)
    top = model.rec_top
    encoder = model.conv_model.get_encoder()
    assert len(top.layers) == 2 and top.split == len(encoder.layers) - 2
    for copy, original in zip(top.layers, encoder.layers[top.split :]):
        assert copy is not original
        assert all(torch.equal(a, b) for a, b in zip(copy.state_dict().values(), original.state_dict().values()))
    # before training it computes the encoder's own top: the head reads what the frozen encoder's mean state would be
    ids = model.context_ids(["I like space movies with robots"])
    t = torch.tensor([ids])
    mask = torch.ones_like(t)
    with torch.no_grad():
        out = encoder(input_ids=t, attention_mask=mask, output_hidden_states=True)
        expected = top.head(out.last_hidden_state.mean(dim=1))
        assert torch.allclose(model.rec_logits(t, mask), expected, atol=1e-4)


def test_recommender_reads_no_knowledge_graph(trained, kg):
    model = trained[0]
    context = ["I like space movies with robots"]
    with_entities = ConvInput(context, [kg.entity_name(i) for i in kg.item_ids[:3]])
    without = ConvInput(context, [])
    assert model.recommend(with_entities, k=20) == model.recommend(without, k=20)
    other = model.recommend(ConvInput(["a romantic comedy for tonight"], []), k=20)
    assert other != model.recommend(without, k=20)  # the text is what it reads
    assert {e for e, _ in other} <= set(kg.item_ids)


def test_set_holds_what_it_learned_and_loads_strictly(trained, kg):
    model, root, *_ = trained
    conv_dir, rec_dir = part_dir(root, "barcor", "conv", "bundled"), part_dir(root, "barcor", "rec", "bundled")
    assert (conv_dir / "decoder.pt").is_file() and (rec_dir / "recommender.pt").is_file()
    assert not (conv_dir / "pytorch_model.bin").exists()  # the encoder comes from the installed package
    loaded = BARCOR.load(root, "bundled", kg)
    inp = ConvInput(["I like space movies, anything like that?"], [])
    assert loaded.recommend(inp) == model.recommend(inp)
    assert loaded.generate_ids(inp) == model.generate_ids(inp)
    assert loaded.choose(inp, list("ABC")) == model.choose(inp, list("ABC"))
    assert "MiniLM" in loaded.description


def test_another_encoder_is_refused_with_the_rebuild_command(trained, kg, tmp_path):
    import shutil

    root = tmp_path / "set"
    shutil.copytree(trained[1], root)
    meta_path = part_dir(root, "barcor", "conv", "bundled") / barcor_backbone.SMALL_FILE
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "encoder_sha256": "0" * 64}))
    with pytest.raises(CheckpointError, match="rebuild the set") as info:
        BARCOR.load(root, "bundled", kg)
    assert SMALL_BUILD_COMMAND in str(info.value)


def test_a_set_of_the_older_head_only_recommender_is_refused_with_the_rebuild_command(trained, kg, tmp_path):
    import shutil

    root = tmp_path / "set"
    shutil.copytree(trained[1], root)
    rec_dir = part_dir(root, "barcor", "rec", "bundled")
    (rec_dir / "recommender.pt").rename(rec_dir / "head.pt")
    with pytest.raises(CheckpointError, match="rebuild the set") as info:
        BARCOR.load(root, "bundled", kg)
    assert SMALL_BUILD_COMMAND in str(info.value)


def test_a_damaged_decoder_file_names_the_file(trained, kg, tmp_path):
    import shutil

    root = tmp_path / "set"
    shutil.copytree(trained[1], root)
    path = part_dir(root, "barcor", "conv", "bundled") / "decoder.pt"
    state = torch.load(path, weights_only=True)
    state.pop(next(iter(state)))
    torch.save(state, path)
    with pytest.raises(CheckpointError, match="decoder.pt"):
        BARCOR.load(root, "bundled", kg)


def test_replies_name_films_with_the_slot(kg, records):
    model = BARCOR.create(kg, size="small", seed=0)
    examples = barcor_training.conv_examples(model, records[:2])
    slot = model.tokenizer.convert_tokens_to_ids(MOVIE_SLOT)
    assert all(slot in target for _ctx, target in examples)
    assert all(records[0].rec[0].lower() not in model.tokenizer.decode(t) for _c, t in examples)
    long = Record(["hi"], [], [], "so " * 300)  # cut to the published 128 tokens, ending with BERT's [SEP]
    ((_ctx, target),) = barcor_training.conv_examples(model, [long])
    assert len(target) == 128 and target[-1] == model.conv_model.config.eos_token_id and None not in target


def test_bad_input_gets_what_the_model_generates(trained):
    model = trained[0]
    for text in ("", "x" * 10_000, "¿Qué película me recomiendas?", "🎬🍿🤖"):
        inp = ConvInput([text], [])
        assert len(model.recommend(inp, k=5)) == 5
        assert isinstance(model.reply_text(inp), str)


def test_wordpiece_text_is_written_as_text():
    assert wordpiece_text("system : it ' s great , isn ' t it ?") == "system: it's great, isn't it?"


@pytest.mark.parametrize("layers", ["two", 9, -1, True])
def test_a_set_that_names_an_impossible_recommender_is_refused(trained, kg, tmp_path, layers):
    import shutil

    root = tmp_path / "set"
    shutil.copytree(trained[1], root)
    meta_path = part_dir(root, "barcor", "conv", "bundled") / barcor_backbone.SMALL_FILE
    meta_path.write_text(json.dumps({**json.loads(meta_path.read_text()), "rec_layers": layers}))
    with pytest.raises(CheckpointError, match="rec_layers|layers"):
        BARCOR.load(root, "bundled", kg)
