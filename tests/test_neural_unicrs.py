"""UniCRS: the published KGPrompt names (fabricated checkpoints load strictly), clear errors, round trips,
prefix generation with a KV cache, training, slot filling and bad input."""

from __future__ import annotations

import os

import pytest
import torch
from neural_fixtures import CONVS, TEXTS, TITLES, one_thread  # noqa: F401 (one_thread: an autouse fixture)
from neural_fixtures import tiny_kg as shared_tiny_kg

from catalog.ievalm_records import Record, read_records
from crs_backends.neural import unicrs_training
from crs_backends.neural.checkpoints import CheckpointError, part_dir
from crs_backends.neural.engine import MOVIE_SLOT, ConvInput, TrainConfig
from crs_backends.neural.kg_reader import KGData, load_kg
from crs_backends.neural.tokenizer import train_tokenizer
from crs_backends.neural.unicrs import UniCRS, turn_texts
from crs_backends.neural.unicrs_prompt import RGCN, KGPrompt

os.environ.setdefault("HF_HUB_OFFLINE", "1")

TINY_GPT2 = dict(n_embd=32, n_layer=2, n_head=4, n_positions=320)
TINY_TEXT = dict(
    hidden_size=24, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, max_position_embeddings=136
)


def tiny_kg() -> KGData:
    return shared_tiny_kg(
        {"0": [[0, 8]], "1": [[0, 8], [1, 12]], "3": [[1, 11]], "4": [[1, 13], [0, 8]], "6": [[0, 10]]}
    )


@pytest.fixture(scope="module")
def kg() -> KGData:
    return tiny_kg()


@pytest.fixture(scope="module")
def tokenizers():
    corpus = TEXTS + ["User: " + t for t in TEXTS] + ["System: " + t for t in TEXTS]
    return (
        train_tokenizer(corpus, style="gpt2", vocab_size=600, min_frequency=1),
        train_tokenizer(corpus, style="roberta", vocab_size=600, min_frequency=1),
    )


@pytest.fixture(scope="module")
def small(kg, tokenizers) -> UniCRS:
    model = UniCRS.create(kg, size="tiny", seed=3, tokenizer=tokenizers)
    model.max_new_tokens = 24
    return model


# ---------------------------------------------------------------------------------------------------------------
# the published names and shapes, written out from reference/checkpoint-keys.md §3.5 (independently of our module)


def published_kgprompt_shapes(
    hidden: int, token_hidden: int, n_layer: int, n_entity: int, n_rel: int, bases: int = 8
) -> dict[str, tuple[int, ...]]:
    e = hidden // 2
    return {
        "node_embeds": (n_entity, e),
        "kg_encoder.weight": (bases, e, e),
        "kg_encoder.comp": (n_rel, bases),
        "kg_encoder.root": (e, e),
        "kg_encoder.bias": (e,),
        "entity_proj1.0.weight": (e // 2, e),
        "entity_proj1.0.bias": (e // 2,),
        "entity_proj1.2.weight": (e, e // 2),
        "entity_proj1.2.bias": (e,),
        "entity_proj2.weight": (hidden, e),
        "entity_proj2.bias": (hidden,),
        "token_proj1.0.weight": (token_hidden // 2, token_hidden),
        "token_proj1.0.bias": (token_hidden // 2,),
        "token_proj1.2.weight": (token_hidden, token_hidden // 2),
        "token_proj1.2.bias": (token_hidden,),
        "token_proj2.weight": (hidden, token_hidden),
        "token_proj2.bias": (hidden,),
        "cross_attn.weight": (hidden, hidden),
        "prompt_proj1.0.weight": (hidden // 2, hidden),
        "prompt_proj1.0.bias": (hidden // 2,),
        "prompt_proj1.2.weight": (hidden, hidden // 2),
        "prompt_proj1.2.bias": (hidden,),
        "prompt_proj2.weight": (n_layer * 2 * hidden, hidden),
        "prompt_proj2.bias": (n_layer * 2 * hidden,),
    }


def fabricate(root, kg: KGData, tokenizers, dataset="tiny", seed=0) -> dict[str, dict[str, torch.Tensor]]:
    """Published-layout files at tiny sizes: two KGPrompt state dicts + HF-format backbone dirs."""
    from transformers import GPT2Config, GPT2LMHeadModel, RobertaConfig, RobertaModel

    gtok, ptok = tokenizers
    torch.manual_seed(seed)
    gcfg = GPT2Config(
        vocab_size=len(gtok),
        bos_token_id=gtok.eos_token_id,
        eos_token_id=gtok.eos_token_id,
        pad_token_id=gtok.pad_token_id,
        **TINY_GPT2,
    )
    rcfg = RobertaConfig(
        vocab_size=len(ptok), pad_token_id=1, bos_token_id=0, eos_token_id=2, type_vocab_size=1, **TINY_TEXT
    )
    gdir, rdir = root / f"unicrs_gpt2_{dataset}", root / f"unicrs_roberta_{dataset}"
    GPT2LMHeadModel(gcfg).save_pretrained(str(gdir))
    RobertaModel(rcfg).save_pretrained(str(rdir))
    gtok.save_pretrained(str(gdir))
    ptok.save_pretrained(str(rdir))
    shapes = published_kgprompt_shapes(32, 24, 2, kg.n_entities_with_pad, kg.n_relations)
    states = {}
    for part in ("rec", "conv"):
        state = {k: torch.randn(s) * 0.05 for k, s in shapes.items()}
        path = part_dir(root, "unicrs", part, dataset) / "model.pt"
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(state, path)
        states[part] = state
    return states


def test_kgprompt_has_exactly_the_published_keys(kg):
    ei, et = kg.edges
    prompt = KGPrompt(768, 768, 12, 12, 2, kg.n_entities_with_pad, kg.n_relations, 8, ei, et)
    got = {k: tuple(v.shape) for k, v in prompt.state_dict().items()}
    assert got == published_kgprompt_shapes(768, 768, 12, kg.n_entities_with_pad, kg.n_relations)
    assert len(got) == 24 and not any("edge" in k for k in got)
    assert got["prompt_proj2.weight"] == (18432, 768)
    # the edges live in the module (buffers) but never in a state dict
    assert prompt.edge_index.shape == (2, ei.shape[1]) and "edge_index" in dict(prompt.named_buffers())


def test_fast_rgcn_equals_pyg_rgcnconv(kg):
    from torch_geometric.nn import RGCNConv

    torch.manual_seed(0)
    ei, et = kg.edges
    fast = RGCN(16, 16, num_relations=kg.n_relations, num_bases=8)
    x = torch.randn(kg.n_entities_with_pad, 16)
    ref = RGCNConv.forward(fast, x, ei, et)
    assert torch.allclose(fast(x, ei, et), ref, atol=1e-5)


def test_prompt_math_follows_the_published_formulas(kg):
    """Hand computation of §5.2 for both modes: divided by the hidden size, softmax over tokens (rec) /
    entities (conv)."""
    torch.manual_seed(1)
    ei, et = kg.edges
    p = KGPrompt(32, 24, 4, 2, 2, kg.n_entities_with_pad, kg.n_relations, 8, ei, et).eval()
    ents = torch.tensor([[0, 3, kg.pad_id]])
    tok = torch.randn(1, 7, 24)
    with torch.no_grad():
        table = p.get_entity_embeds()
        nodes = p.node_embeds
        e = p.kg_encoder(nodes, ei, et) + nodes
        e = p.entity_proj1(e) + e
        assert torch.allclose(table, p.entity_proj2(e), atol=1e-6)
        t = p.token_proj2(p.token_proj1(tok) + tok)
        ent = table[ents]
        scores = p.cross_attn(t) @ ent.transpose(1, 2) / 32
        for output_entity, prompt, length in (
            (True, torch.softmax(scores, 1).transpose(1, 2) @ t + ent, 3),
            (False, torch.softmax(scores, 2) @ ent + t, 7),
        ):
            q = p.prompt_proj2(p.prompt_proj1(prompt) + prompt)
            q = q.reshape(1, length, 2, 2, 4, 8).permute(2, 3, 0, 4, 1, 5)
            out = p(ents, tok, output_entity=output_entity)
            assert out.shape == (2, 2, 1, 4, length, 8)
            assert torch.allclose(out, q, atol=1e-5)


# ---------------------------------------------------------------------------------------------------------------
# loading the published layout


def test_fabricated_checkpoint_loads_strictly(tmp_path, kg, tokenizers):
    states = fabricate(tmp_path, kg, tokenizers)
    model = UniCRS.load(tmp_path, "tiny", kg)
    for part, module in (("rec", model.rec_prompt), ("conv", model.conv_prompt)):
        own = module.state_dict()
        assert set(own) == set(states[part])
        assert all(torch.equal(own[k], v) for k, v in states[part].items())
    assert model.gpt2.config.n_layer == 2 and model.roberta.config.hidden_size == 24
    assert model.rec_prompt.n_prefix_rec is None  # no prefix keys in the file → no prefix module
    recs = model.recommend(CONVS[0])
    assert len(recs) == len(TITLES) and all(i in kg.item_ids for i, _ in recs)
    assert isinstance(model.generate(CONVS[0], items=["Heat (1995)"]), str)


def _expect_error(tmp_path, kg, needle):
    with pytest.raises(CheckpointError) as info:
        UniCRS.load(tmp_path, "tiny", kg)
    assert needle in str(info.value), str(info.value)
    return str(info.value)


@pytest.mark.parametrize("damage", ["missing", "extra", "shape", "truncated", "edges"])
def test_bad_prompt_file_is_refused_naming_it(tmp_path, kg, tokenizers, damage):
    states = fabricate(tmp_path, kg, tokenizers)
    path = part_dir(tmp_path, "unicrs", "conv", "tiny") / "model.pt"
    state = dict(states["conv"])
    if damage == "missing":
        del state["cross_attn.weight"]
    elif damage == "extra":
        state["cross_attn.bias"] = torch.zeros(32)
    elif damage == "shape":
        state["node_embeds"] = torch.zeros(kg.n_entities, 16)  # pre-pad count: KBRD's size, not UniCRS's
    elif damage == "edges":  # iEvaLM's live module had edges as parameters; a file with them is not the published one
        state["edge_index"], state["edge_type"] = kg.edges
    torch.save(state, path)
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:200])
    message = _expect_error(tmp_path, kg, str(path))
    assert {
        "missing": "cross_attn.weight",
        "extra": "cross_attn.bias",
        "shape": "node_embeds",
        "truncated": "corrupt",
        "edges": "edge_index",
    }[damage] in message


def test_bad_backbone_is_refused_naming_it(tmp_path, kg, tokenizers):
    from safetensors.torch import load_file, save_file

    fabricate(tmp_path, kg, tokenizers)
    weights = tmp_path / "unicrs_roberta_tiny" / "model.safetensors"
    state = load_file(str(weights))
    state.pop(next(k for k in state if k.endswith("attention.self.query.weight")))
    save_file(state, str(weights))
    _expect_error(tmp_path, kg, str(weights))
    (tmp_path / "unicrs_gpt2_tiny" / "config.json").unlink()
    _expect_error(tmp_path, kg, "config.json")


def test_prefix_keys_are_optional(tmp_path, kg, tokenizers):
    states = fabricate(tmp_path, kg, tokenizers)
    state = dict(states["rec"])
    state["rec_prefix_embeds"] = torch.randn(5, 32)
    state.update(
        {
            "rec_prefix_proj.0.weight": torch.randn(16, 32),
            "rec_prefix_proj.0.bias": torch.randn(16),
            "rec_prefix_proj.2.weight": torch.randn(32, 16),
            "rec_prefix_proj.2.bias": torch.randn(32),
        }
    )
    torch.save(state, part_dir(tmp_path, "unicrs", "rec", "tiny") / "model.pt")
    model = UniCRS.load(tmp_path, "tiny", kg)
    assert model.rec_prompt.n_prefix_rec == 5 and model.conv_prompt.n_prefix_rec is None
    with torch.no_grad():
        assert model._prefix("rec", CONVS[0]).shape[-2] == 5 + 2  # 5 prefix tokens + 2 entities
    assert model.recommend(CONVS[0])


def test_save_load_round_trip_identical(tmp_path, kg, small):
    small.save(tmp_path, "tiny")
    assert not any("edge" in k for k in torch.load(tmp_path / "unicrs_rec_tiny" / "model.pt"))
    again = UniCRS.load(tmp_path, "tiny", kg)
    assert again.size == "tiny" and again.movie_token == MOVIE_SLOT
    for conv in CONVS:
        assert again.recommend(conv) == small.recommend(conv)
        assert again.generate_ids(conv, max_new_tokens=12) == small.generate_ids(conv, max_new_tokens=12)


# ---------------------------------------------------------------------------------------------------------------
# inference mechanics


def test_kv_cache_generation_equals_full_recompute(small):
    for conv in CONVS:
        cached = small.generate_ids(conv, max_new_tokens=16)
        assert cached == small.generate_ids(conv, max_new_tokens=16, use_cache=False)
        assert len(cached) >= 1


def test_kv_cache_equals_hf_style_manual_loop(small):
    """Independent loop: every step a NEW prefix cache over the whole sequence, through GPT2LMHeadModel itself."""
    from transformers import DynamicCache

    conv = CONVS[0]
    with torch.no_grad():
        prefix = small._prefix("conv", conv)
        seq = small.conv_context(conv)
        for _ in range(10):
            cache = DynamicCache(tuple((prefix[i, 0], prefix[i, 1]) for i in range(prefix.shape[0])))
            ids = torch.tensor([seq])
            out = small.gpt2(
                input_ids=ids,
                past_key_values=cache,
                attention_mask=torch.ones(1, prefix.shape[-2] + len(seq), dtype=torch.long),
                position_ids=torch.arange(len(seq))[None],
            )
            logits = out.logits[0, -1].clone()
            # HF's no_repeat_ngram_size, as the published generate runs it: a trigram of context or reply is not
            # written again
            banned = small._ban_repeats(seq, 3)
            logits[banned] = -float("inf")
            seq.append(int(logits.argmax()))
            if seq[-1] == small.eos_id:
                break
    assert small.generate_ids(conv, max_new_tokens=10) == seq[len(small.conv_context(conv)) :]


def test_left_padding_does_not_change_rec_scores(small):
    """Published rec left-pads to 128 with cumsum positions; we run unpadded — same numbers."""
    conv = CONVS[0]
    ids = small.context_ids(conv.context)
    pad = 128 - len(ids)
    padded = torch.tensor([[small.pad_id] * pad + ids])
    mask = torch.tensor([[0] * pad + [1] * len(ids)])
    with torch.no_grad():
        hidden, _ = small.run_gpt2(padded, mask, small._prefix("rec", conv))
        scores = hidden[0, -1] @ small._table("rec").T
    assert torch.allclose(scores, small.scores(conv), atol=1e-4)


def test_context_formatting_follows_published(small):
    assert turn_texts(["", "Hi", "horror please", ""]) == ["System: Hi", "User: horror please"]
    long = ["word " * 400, "more " * 300, "and the end"]
    n = small.context_max_length  # 128 published; 64 in our small size
    ids = small.context_ids(long)
    assert len(ids) == n and ids[-1] == small.eos_id  # left-truncated, trailing eos kept
    prompt, mask = small.prompt_ids(long)
    assert len(prompt) == n and all(mask)
    assert prompt[0] == small.prompt_tokenizer.bos_token_id and prompt[-1] == small.prompt_tokenizer.eos_token_id
    prompt, mask = small.prompt_ids([])
    assert prompt[:2] == [0, 2] and sum(mask) == 2 and len(prompt) == n
    assert small.entity_ids([]) == [small.kg.pad_id]
    assert small.entity_ids(["unknown entity"] + TITLES[:3]) == [0, 1, 2]
    assert small.bot_ids and small.tokenizer.decode(small.bot_ids) == "System:"


@pytest.mark.parametrize(
    "conv",
    [
        ConvInput([]),
        ConvInput([""]),
        ConvInput(["Je cherche un film d'horreur français, comme Amélie (2001)?"], ["Amélie (2001)"]),
        ConvInput(["我想看一部恐怖电影"]),
        ConvInput(["a very long message " * 300] * 9, TITLES * 10),
    ],
)
def test_bad_input_still_answers(small, conv):
    recs = small.recommend(conv)
    assert recs and all(i in small.kg.item_ids for i, _ in recs)
    reply = small.generate(conv, items=["Heat (1995)", "Up (2009)"])
    assert reply.strip() and "<movie>" not in reply and "<pad>" not in reply
    assert small.choose(conv, ["A", "B", "C", "D"]) in "ABCD"


def test_choose_skips_used_options(small):
    got = {small.choose(CONVS[0], ["A", "B", "C", "D"], used={"A", "B", "C", "D"} - {x}) for x in "ABCD"}
    assert got == set("ABCD")


# ---------------------------------------------------------------------------------------------------------------
# slots


def test_model_fills_its_own_slot_tokens(small):
    movie = small.tokenizer.convert_tokens_to_ids(MOVIE_SLOT)
    space = small.tokenizer(" ", add_special_tokens=False)["input_ids"]  # written before a slot, as in ReDial
    ids = (  # a trained reply starts with the space the published decoding drops after "System:"
        small.tokenizer(" Have you seen", add_special_tokens=False)["input_ids"]
        + space
        + [movie]
        + small.tokenizer("? It is great, like", add_special_tokens=False)["input_ids"]
        + space
        + [small.pad_id]
        + small.tokenizer(".", add_special_tokens=False)["input_ids"]
        + [small.eos_id]
    )
    assert (
        small.decode_reply(ids, ["Heat (1995)", "Up (2009)"])
        == "Have you seen Heat (1995)? It is great, like Up (2009)."
    )
    assert small.decode_reply(ids, None) == f"Have you seen {MOVIE_SLOT}? It is great, like {MOVIE_SLOT}."
    # CRS Arena's rule: a slot past the last ranked item is removed (policy.fill_placeholders)
    assert small.decode_reply(ids, ["Heat (1995)"]) == "Have you seen Heat (1995)? It is great, like ."
    # an immediate end of text, decoded as published: the character after "System:" dropped blindly leaves the rest
    assert small.decode_reply([small.eos_id], ["Up (2009)"]) == small.tokenizer.eos_token[1:]


# ---------------------------------------------------------------------------------------------------------------
# training


def test_training_lowers_loss_and_resumes(tmp_path, shared_data):
    kg = load_kg(shared_data / "redial")
    records = read_records(shared_data / "redial_eval" / "valid_data_processed.jsonl", limit=12)
    texts = [u for r in records for u in r.context + [r.resp]]
    model = UniCRS.create(kg, texts, size="tiny", seed=0)
    model.max_new_tokens = 8
    config = TrainConfig(size="tiny", epochs=10, max_steps=12, batch_size=6, lr=3e-3, seed=0)
    report = unicrs_training.train(model, records, tmp_path, "redial", config)
    # the recommendation path is pre-trained first (4 steps of 12), then rec and conv train together (6), then the
    # conversation prompt alone (2; unicrs_training.STAGE_SHARES)
    assert report.steps == 12
    for part in ("prompt", "rec", "conv"):
        losses = report.losses[part]
        assert len(losses) == (4 if part == "prompt" else 6)
        assert sum(losses[-2:]) / 2 < sum(losses[:2]) / 2, (part, losses)
    assert len(report.losses["reply"]) == 2
    # the result answers through the common interface with KG items
    loaded = UniCRS.load(tmp_path, "redial", kg)
    conv = records[0].conv_input()
    recs = loaded.recommend(conv)
    assert len(recs) == 50 and all(i in set(kg.item_ids) for i, _ in recs)
    assert loaded.generate(conv, items=[kg.entity_name(i) for i, _ in recs[:3]]).strip()
    # resumable: a longer run continues from the saved steps (joint 6 -> 7, reply 2 -> 3)
    again = UniCRS.create(kg, texts, size="tiny", seed=0)
    report2 = unicrs_training.train(
        again,
        records,
        tmp_path,
        "redial",
        TrainConfig(size="tiny", epochs=10, max_steps=14, batch_size=6, lr=3e-3, seed=0),
    )
    assert report2.steps == 2 and len(report2.losses["conv"]) == 7 and len(report2.losses["reply"]) == 3
    state = torch.load(tmp_path / ".train" / "unicrs_joint_redial" / "trainer_state.pt", weights_only=False)
    assert state["step"] == 7 and state["losses"]["conv"][:6] == report.losses["conv"]


def test_records_become_slot_masked_examples(small):
    rec = Record(
        context=["I like horror", "Have you seen Alien (1979)?"],
        entity=["horror", "Alien (1979)"],
        rec=["The Shining (1980)", "Not In KG"],
        resp="Try The Shining (1980), it is scary.",
    )
    ex = unicrs_training.example(small, rec)
    assert ex["targets"] == [0]
    text = small.tokenizer.decode(ex["resp"], skip_special_tokens=False)
    assert text.startswith("System: Try <movie>") and text.endswith(small.tokenizer.eos_token)
    rec_loss, conv_loss = unicrs_training.joint_losses(
        small, [ex, unicrs_training.example(small, Record(["hi"], [], [], "hello"))]
    )
    assert rec_loss is not None and torch.isfinite(rec_loss) and torch.isfinite(conv_loss)
