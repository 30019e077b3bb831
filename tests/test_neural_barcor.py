"""BARCOR: published key names (fabricated checkpoints load strictly), clear errors, round trips, training,
generation mechanics and bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from ci_mode import skip_or_fail
from neural_fixtures import CONVS, TEXTS, one_thread  # noqa: F401 (one_thread: an autouse fixture)
from neural_fixtures import tiny_kg as shared_tiny_kg

from catalog.ievalm_records import Record, read_records
from crs_backends.neural import barcor, barcor_training
from crs_backends.neural.barcor import BARCOR, context_text, strip_system
from crs_backends.neural.barcor_backbone import bart_config
from crs_backends.neural.checkpoints import CheckpointError, part_dir
from crs_backends.neural.engine import MOVIE_SLOT, ConvInput, TrainConfig, fill_slots
from crs_backends.neural.kg_reader import KGData, load_kg
from crs_backends.neural.tokenizer import train_tokenizer

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# tiny published-style sizes for fabricated checkpoints
TINY = dict(
    d_model=16,
    encoder_layers=1,
    decoder_layers=2,
    encoder_attention_heads=2,
    decoder_attention_heads=2,
    encoder_ffn_dim=24,
    decoder_ffn_dim=24,
    max_position_embeddings=256,
)


def tiny_kg() -> KGData:
    return shared_tiny_kg({"0": [[0, 8]], "3": [[1, 11]]})


@pytest.fixture(scope="module")
def kg() -> KGData:
    return tiny_kg()


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(
        TEXTS + ["User: " + t for t in TEXTS] + ["System: " + t for t in TEXTS],
        style="bart",
        vocab_size=600,
        min_frequency=1,
    )


@pytest.fixture(scope="module")
def small(kg, tokenizer) -> BARCOR:
    model = BARCOR.create(kg, size="tiny", seed=3, tokenizer=tokenizer)
    model.max_new_tokens = 24
    return model


# ---------------------------------------------------------------------------------------------------------------
# the published names, written out from reference/checkpoint-keys.md §3.3, §3.4, §3.6 (independently of our module)

ATTN = [f"{p}_proj.{w}" for p in ("k", "v", "q", "out") for w in ("weight", "bias")]


def published_keys(*, d, ffn, vocab, positions, enc, dec, labels=None, lm=False, aliases=True) -> dict:
    """{name: shape} of barcor_rec (labels=N) or barcor_conv (lm=True) as iEvaLM's transformers 4.28 saved them."""
    keys = {}
    if lm:
        keys["final_logits_bias"] = (1, vocab)
    keys["model.shared.weight"] = (vocab, d)
    for side, n_layers in (("encoder", enc), ("decoder", dec)):
        if aliases:
            keys[f"model.{side}.embed_tokens.weight"] = (vocab, d)
        keys[f"model.{side}.embed_positions.weight"] = (positions + 2, d)
        keys[f"model.{side}.layernorm_embedding.weight"] = (d,)
        keys[f"model.{side}.layernorm_embedding.bias"] = (d,)
        blocks = ["self_attn"] + (["encoder_attn"] if side == "decoder" else [])
        for i in range(n_layers):
            pre = f"model.{side}.layers.{i}."
            for block in blocks:
                for a in ATTN:
                    keys[pre + f"{block}.{a}"] = (d, d) if a.endswith("weight") else (d,)
                keys[pre + f"{block}_layer_norm.weight"] = (d,)
                keys[pre + f"{block}_layer_norm.bias"] = (d,)
            keys[pre + "fc1.weight"], keys[pre + "fc1.bias"] = (ffn, d), (ffn,)
            keys[pre + "fc2.weight"], keys[pre + "fc2.bias"] = (d, ffn), (d,)
            keys[pre + "final_layer_norm.weight"], keys[pre + "final_layer_norm.bias"] = (d,), (d,)
    if lm and aliases:
        keys["lm_head.weight"] = (vocab, d)
    if labels is not None:
        keys.update(
            {
                "classification_head.dense.weight": (d, d),
                "classification_head.dense.bias": (d,),
                "classification_head.out_proj.weight": (labels, d),
                "classification_head.out_proj.bias": (labels,),
            }
        )
    return keys


def published_config(*, d, ffn, vocab, positions, enc, dec, heads, labels=None) -> dict:
    """A config.json as transformers 4.28 wrote it for a fine-tuned facebook/bart-base (tiny sizes)."""
    cfg = {
        "_name_or_path": "facebook/bart-base",
        "activation_dropout": 0.1,
        "activation_function": "gelu",
        "add_bias_logits": False,
        "add_final_layer_norm": False,
        "attention_dropout": 0.1,
        "bos_token_id": 0,
        "classif_dropout": 0.1,
        "classifier_dropout": 0.0,
        "d_model": d,
        "decoder_attention_heads": heads,
        "decoder_ffn_dim": ffn,
        "decoder_layerdrop": 0.0,
        "decoder_layers": dec,
        "decoder_start_token_id": 2,
        "dropout": 0.1,
        "early_stopping": True,
        "encoder_attention_heads": heads,
        "encoder_ffn_dim": ffn,
        "encoder_layerdrop": 0.0,
        "encoder_layers": enc,
        "eos_token_id": 2,
        "forced_bos_token_id": 0,
        "forced_eos_token_id": 2,
        "gradient_checkpointing": False,
        "init_std": 0.02,
        "is_encoder_decoder": True,
        "max_position_embeddings": positions,
        "model_type": "bart",
        "no_repeat_ngram_size": 3,
        "normalize_before": False,
        "normalize_embedding": True,
        "num_beams": 4,
        "num_hidden_layers": enc,
        "pad_token_id": 1,
        "scale_embedding": False,
        "torch_dtype": "float32",
        "transformers_version": "4.28.1",
        "use_cache": True,
        "vocab_size": vocab,
        "task_specific_params": {
            "summarization": {"length_penalty": 1.0, "max_length": 128, "min_length": 12, "num_beams": 4}
        },
    }
    if labels is None:
        cfg["architectures"] = ["BartForConditionalGeneration"]
    else:
        cfg["architectures"] = ["BartForSequenceClassification"]
        cfg["id2label"] = {str(i): f"LABEL_{i}" for i in range(labels)}
        cfg["label2id"] = {f"LABEL_{i}": i for i in range(labels)}
    return cfg


def fabricate(root: Path, kg: KGData, tokenizer, *, dataset="tiny", conv_safetensors=True, seed=0) -> dict:
    """Write barcor_rec_<ds>/ (pytorch_model.bin with tied aliases) and barcor_conv_<ds>/ (safetensors without
    aliases, or a bin) with the published names at tiny sizes; returns the tensors written."""
    g = torch.Generator().manual_seed(seed)
    dims = dict(
        d=TINY["d_model"],
        ffn=TINY["encoder_ffn_dim"],
        vocab=len(tokenizer),
        positions=TINY["max_position_embeddings"],
        enc=TINY["encoder_layers"],
        dec=TINY["decoder_layers"],
    )
    written = {}
    for part, labels, lm in (("rec", kg.n_entities, False), ("conv", None, True)):
        d = part_dir(root, "barcor", part, dataset)
        d.mkdir(parents=True)
        cfg = published_config(heads=TINY["encoder_attention_heads"], labels=labels, **dims)
        (d / "config.json").write_text(json.dumps(cfg))
        alias_free = part == "conv" and conv_safetensors
        state = {
            k: torch.randn(shape, generator=g) * 0.5
            for k, shape in published_keys(labels=labels, lm=lm, aliases=not alias_free, **dims).items()
        }
        if not alias_free:  # tied: the aliases are the shared table (same storage, as HF saved them)
            for k in list(state):
                if k.endswith("embed_tokens.weight") or k == "lm_head.weight":
                    state[k] = state["model.shared.weight"]
        if lm:
            state["final_logits_bias"] = torch.zeros(1, dims["vocab"])
        if alias_free:
            from safetensors.torch import save_file

            save_file(state, str(d / "model.safetensors"))
        else:
            torch.save(state, d / "pytorch_model.bin")
        written[part] = state
    tokenizer.save_pretrained(str(part_dir(root, "barcor", "conv", dataset)))
    return written


# ---------------------------------------------------------------------------------------------------------------
# format conformance


def test_published_size_key_lists_match_the_reference():
    """Our modules at the published size have exactly the published names and shapes (265 / 263 tensors)."""
    from transformers import BartForConditionalGeneration, BartForSequenceClassification

    full = barcor.SIZES["full"]
    dims = dict(d=768, ffn=3072, vocab=50265, positions=1024, enc=6, dec=6)
    with torch.device("meta"):
        rec = BartForSequenceClassification(bart_config(full, vocab_size=50265, num_labels=24630))
        conv = BartForConditionalGeneration(bart_config(full, vocab_size=50265))
    for module, expected, n in (
        (rec, published_keys(labels=24630, **dims), 265),
        (conv, published_keys(lm=True, **dims), 263),
    ):
        got = {k: tuple(v.shape) for k, v in module.state_dict().items()}
        assert len(expected) == n
        assert got == expected


def test_fabricated_published_checkpoint_loads_strictly(tmp_path, kg, tokenizer):
    written = fabricate(tmp_path, kg, tokenizer)
    model = BARCOR.load(tmp_path, "tiny", kg)
    rec_state = model.rec_model.state_dict()
    for k, v in written["rec"].items():
        assert torch.equal(rec_state[k], v), k
    conv_state = model.conv_model.state_dict()
    for k, v in written["conv"].items():
        assert torch.equal(conv_state[k], v), k
    # the aliases absent from the safetensors file are tied to the shared table
    assert model.conv_model.lm_head.weight is model.conv_model.model.shared.weight
    assert model.gen["forced_bos_token_id"] == 0 and model.gen["no_repeat_ngram_size"] == 3
    ranked = model.recommend(CONVS[0])
    assert [i for i, _ in ranked] and all(i in kg.item_ids for i, _ in ranked)
    assert len(ranked) == len(kg.item_ids)  # fewer items than 50
    assert isinstance(model.generate(CONVS[0]), str)


def test_fabricated_bin_with_aliases_for_conv_loads(tmp_path, kg, tokenizer):
    fabricate(tmp_path, kg, tokenizer, conv_safetensors=False)
    model = BARCOR.load(tmp_path, "tiny", kg)
    assert model.conv_model.model.decoder.embed_tokens.weight is model.conv_model.model.shared.weight


def _rewrite_bin(path: Path, edit) -> None:
    state = torch.load(path, weights_only=True)
    edit(state)
    torch.save(state, path)


@pytest.mark.parametrize("case", ["missing", "extra", "shape", "truncated", "alias_differs", "no_weights"])
def test_bad_checkpoint_raises_naming_the_file(tmp_path, kg, tokenizer, case):
    fabricate(tmp_path, kg, tokenizer)
    weights = part_dir(tmp_path, "barcor", "rec", "tiny") / "pytorch_model.bin"
    if case == "missing":
        _rewrite_bin(weights, lambda s: s.pop("model.decoder.layers.1.fc2.bias"))
    elif case == "extra":
        _rewrite_bin(weights, lambda s: s.__setitem__("model.decoder.layer_norm.weight", torch.ones(16)))
    elif case == "shape":
        _rewrite_bin(weights, lambda s: s.__setitem__("classification_head.dense.weight", torch.ones(16, 8)))
    elif case == "truncated":
        data = weights.read_bytes()
        weights.write_bytes(data[: len(data) // 2])
    elif case == "alias_differs":
        _rewrite_bin(
            weights, lambda s: s.__setitem__("model.encoder.embed_tokens.weight", s["model.shared.weight"].clone() + 1)
        )
    elif case == "no_weights":
        weights.unlink()
    with pytest.raises(CheckpointError) as err:
        BARCOR.load(tmp_path, "tiny", kg)
    assert str(weights.parent if case == "no_weights" else weights) in str(err.value)
    if case == "missing":
        assert "model.decoder.layers.1.fc2.bias" in str(err.value)
    if case == "shape":
        assert "classification_head.dense.weight" in str(err.value)


def test_bad_config_and_kg_mismatch_raise_naming_the_file(tmp_path, kg, tokenizer):
    fabricate(tmp_path, kg, tokenizer)
    # a KG with another entity count does not fit the classification head
    other = KGData({**kg.entity2id, "Extra (2020)": kg.n_entities}, kg.relation2id, kg.triples, kg.item_ids)
    with pytest.raises(CheckpointError, match="classification_head.out_proj.weight") as err:
        BARCOR.load(tmp_path, "tiny", other)
    assert "barcor_rec_tiny" in str(err.value)
    cfg = part_dir(tmp_path, "barcor", "conv", "tiny") / "config.json"
    cfg.write_text("{not json")
    with pytest.raises(CheckpointError, match=str(cfg)):
        BARCOR.load(tmp_path, "tiny", kg)
    cfg.unlink()
    with pytest.raises(CheckpointError, match=str(cfg)):
        BARCOR.load(tmp_path, "tiny", kg)
    with pytest.raises(CheckpointError, match="barcor_rec_other"):
        BARCOR.load(tmp_path, "other", kg)


def test_save_load_round_trip_identical(tmp_path, small, kg):
    small.save(tmp_path, "tiny")
    for part in ("rec", "conv"):
        d = part_dir(tmp_path, "barcor", part, "tiny")
        assert (d / "config.json").exists() and (d / "pytorch_model.bin").exists() and (d / "tokenizer.json").exists()
    conv_cfg = json.loads((part_dir(tmp_path, "barcor", "conv", "tiny") / "config.json").read_text())
    assert conv_cfg["forced_bos_token_id"] == 0 and conv_cfg["architectures"] == ["BartForConditionalGeneration"]
    saved = torch.load(part_dir(tmp_path, "barcor", "rec", "tiny") / "pytorch_model.bin", weights_only=True)
    assert "model.encoder.embed_tokens.weight" in saved and "classification_head.out_proj.weight" in saved
    assert BARCOR.load(tmp_path, "tiny", kg).max_new_tokens == barcor.SIZES["tiny"]["max_new_tokens"]
    loaded = BARCOR.load(tmp_path, "tiny", kg, max_new_tokens=small.max_new_tokens)
    for inp in CONVS + [ConvInput([])]:
        assert loaded.recommend(inp) == small.recommend(inp)
        assert loaded.generate_ids(inp) == small.generate_ids(inp)
        assert loaded.generate(inp) == small.generate(inp)
        assert loaded.choose(inp, list("ABCD")) == small.choose(inp, list("ABCD"))


# ---------------------------------------------------------------------------------------------------------------
# inference mechanics and formatting


def test_context_format_as_published():
    ctx = ["", "Hi, what do you like?", "Horror, please", "", "Thanks"]
    assert context_text(ctx) == "System: Hi, what do you like?</s>User: Horror, please</s>User: Thanks"
    assert context_text([]) == ""
    assert barcor.response_prefix(ctx) == "System: " and barcor.response_prefix(ctx[:2]) == "User: "
    assert strip_system("System: Have you seen it?") == "Have you seen it?"
    assert strip_system("System:; Sure thing ") == "Sure thing"
    assert strip_system("Sure thing") == "ure thing"  # the published character-set strip, quirk included
    assert fill_slots(f"Try {MOVIE_SLOT} or {MOVIE_SLOT}!", MOVIE_SLOT, ["Up (2009)"]) == "Try Up (2009) or !"
    assert fill_slots(f"Try {MOVIE_SLOT}", MOVIE_SLOT, None) == f"Try {MOVIE_SLOT}"


def test_kv_cache_and_encoder_reuse_equal_plain_generation(small):
    for inp in CONVS:
        cached = small.generate_ids(inp)
        assert cached == small.generate_ids(inp, use_cache=False, reuse_encoder=False)
        assert cached == small.generate_ids(inp, reuse_encoder=False)
        assert cached[:2] == [2, 0]  # decoder start, then the forced <s>
        assert len(cached) <= 1 + small.max_new_tokens


def test_published_generation_limit(small):
    cap = small.max_new_tokens
    try:
        small.max_new_tokens = None
        ids = small.generate_ids(CONVS[0])
        assert len(ids) <= barcor.RESP_MAX_LENGTH
    finally:
        small.max_new_tokens = cap


def test_recommend_returns_item_ids_best_first(small, kg):
    ranked = small.recommend(CONVS[0], k=5)
    assert len(ranked) == 5
    assert all(i in kg.item_ids for i, _ in ranked)
    scores = [s for _, s in ranked]
    assert scores == sorted(scores, reverse=True)
    # the rec pooling: the classification head over the decoder state at the final </s>
    ids = torch.tensor([small.context_ids(CONVS[0].context)])
    with torch.inference_mode():
        full = small.rec_model.model(input_ids=ids).last_hidden_state[0, -1]
        expected = small.rec_model.classification_head(full)[kg.item_ids]
    assert ranked[0][0] == kg.item_ids[int(expected.argmax())]
    # right padding does not change the scores (published batches are padded)
    padded = torch.cat([ids, torch.full((1, 7), 1)], dim=1)
    mask = torch.cat([torch.ones_like(ids), torch.zeros(1, 7, dtype=torch.long)], dim=1)
    with torch.inference_mode():
        a = small.rec_logits(ids, torch.ones_like(ids))
        b = small.rec_logits(padded, mask)
    assert torch.allclose(a, b, atol=1e-5)


def test_choose_letter_logits(small):
    options = ["A", "B", "C", "D"]
    first = small.choose(CONVS[0], options)
    assert first in options
    second = small.choose(CONVS[0], options, used={first})
    assert second in options and second != first
    assert small.choose(CONVS[0], options, used=set(options)) in options


def test_bad_input_long_empty_non_english(small):
    words = " ".join(f"word{i % 97}" for i in range(5000))
    long = ConvInput([words, "System reply", "the very last words here"])
    ids = small.context_ids(long.context)
    assert len(ids) == barcor.CONTEXT_MAX_LENGTH and ids[0] == 0 and ids[-1] == 2
    assert small.tokenizer.decode(ids, skip_special_tokens=True).endswith("the very last words here")
    for inp in (
        long,
        ConvInput([]),
        ConvInput(["", ""]),
        ConvInput(["Je cherche un film d'horreur, s'il vous plaît 🎬", "", "Привет! 你好，推荐一部电影"]),
    ):
        ranked = small.recommend(inp)
        assert 0 < len(ranked) <= 50 and all(isinstance(i, int) for i, _ in ranked)
        assert isinstance(small.generate(inp), str)


def test_full_vocab_beyond_tokenizer_is_never_generated(kg, tokenizer):
    model = BARCOR.create(kg, size="tiny", seed=1, tokenizer=tokenizer, vocab_size=len(tokenizer) + 300)
    model.max_new_tokens = 30
    ids = model.generate_ids(CONVS[0])
    assert max(ids) < len(tokenizer)


# ---------------------------------------------------------------------------------------------------------------
# training on ReDial


@pytest.fixture(scope="module")
def redial(shared_data):
    kg_dir, valid = shared_data / "redial", shared_data / "redial_eval" / "valid_data_processed.jsonl"
    if not (kg_dir / "kg.json").exists() or not valid.exists():
        skip_or_fail("redial KG or redial_eval not found")
    return load_kg(kg_dir), read_records(valid, limit=40)


def test_training_lowers_loss_resumes_and_loads(tmp_path, redial):
    kg, records = redial
    texts = [u for r in records for u in r.context] + [r.resp for r in records]
    model = BARCOR.create(kg, texts, size="tiny", seed=0)
    model.max_new_tokens = 12
    seen = []
    config = TrainConfig(size="tiny", epochs=3, max_steps=10, batch_size=8, lr=2e-3, seed=0)
    report = barcor_training.train(model, records, tmp_path, "redial", config, progress=lambda *a: seen.append(a))
    assert report.system == "barcor" and report.steps == 10
    assert len(report.losses["rec"]) + len(report.losses["conv"]) == 10
    assert {p for p, _, _ in seen} == {"rec", "conv"}
    # resume: a rerun with a larger budget continues from the saved steps
    config.max_steps = 30
    report = barcor_training.train(model, records, tmp_path, "redial", config)
    assert report.steps == 20
    for part in ("rec", "conv"):
        losses = report.losses[part]
        assert len(losses) >= 10
        assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3, (part, losses)
    # a finished run does nothing more
    assert barcor_training.train(model, records, tmp_path, "redial", config).steps == 0
    loaded = BARCOR.load(tmp_path, "redial", kg, max_new_tokens=12)
    inp = records[3].conv_input()
    ranked = loaded.recommend(inp)
    assert len(ranked) == 50 and all(i in set(kg.item_ids) for i, _ in ranked)
    assert ranked == model.recommend(inp)
    assert loaded.generate(inp) == model.generate(inp)


def test_records_without_known_targets_still_train_conv(tmp_path, kg, tokenizer):
    model = BARCOR.create(kg, size="tiny", seed=2, tokenizer=tokenizer)
    records = [
        Record(
            context=["Hi", "Hello! What do you like?", "Horror"],
            entity=["horror"],
            rec=["Not In The KG (1999)"],
            resp="Have you seen The Shining (1980)?",
        )
    ] * 4
    report = barcor_training.train(model, records, tmp_path, "tiny", TrainConfig(epochs=2, batch_size=2))
    assert report.losses["rec"] == [] and len(report.losses["conv"]) == 4
    assert (part_dir(tmp_path, "barcor", "rec", "tiny") / "pytorch_model.bin").exists()
