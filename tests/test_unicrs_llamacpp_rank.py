"""The small UniCRS ranks through llama.cpp (#72, item 9): its recommendation prompt's per-layer key/value prefix
enters llama.cpp's KV cache through the sequence state (keys rotated for the shifted positions, in the GGUF's
dimension order), and the final hidden state llama.cpp computes is the one torch computes, up to llama.cpp's
quantized products. Torch ranks unless llama.cpp is chosen (it measured slower) and wherever llama.cpp cannot run
it; each ranking says which decoder ran it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from neural_fixtures import one_thread  # noqa: F401 (an autouse fixture)

from catalog.catalog import Catalog, get_catalog
from crs_backends.neural.engine import ConvInput
from crs_backends.neural.kg_reader import kg_from_catalog
from crs_backends.neural.smollm_llamacpp import LlamaCppError, StateLayout, key_layout
from crs_backends.neural.unicrs_smollm import UniCRSSmall

LOUD = 20.0  # the prefix map's weights times this: a prefix that moves the hidden state far (a trained one is quieter)


@pytest.fixture(scope="module")
def model() -> UniCRSSmall:
    items = list(get_catalog("bundled").items)[:12]
    model = UniCRSSmall.create(
        kg_from_catalog(Catalog(items, name="tiny")), seed=1, decoder="llamacpp", form={"rec_layer_prefix": True}
    )
    with torch.no_grad():
        model.rec_prompt.layer_kv.weight.mul_(LOUD)
    return model


def _rows(model: UniCRSSmall, inp: ConvInput):
    prompt, pmask = model.prompts("rec", [model.entity_ids(inp.entities)], [model.text_ids(inp.context)])
    return prompt, pmask, model.context_ids(inp.context)


def _torch_hidden(model: UniCRSSmall, inp: ConvInput, *, prefix: bool = True) -> np.ndarray:
    prompt, pmask, context = _rows(model, inp)
    embeds, mask, positions = model.assemble(prompt, pmask, [context])
    cache = model.rec_prompt.prefix_cache(prompt) if prefix else None
    if prefix:
        mask = torch.cat([pmask.to(mask.dtype), mask], dim=1)
    hidden, _ = model.run(embeds, mask, positions, cache)
    return hidden[0, -1].numpy()


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


INPUTS = [
    ConvInput(["Hi! I loved The Matrix. Anything similar but more recent?"], []),
    ConvInput(["hello", "Hi! What do you like?", "Comedies, and anything with dogs in it."], []),
]


@pytest.mark.parametrize("inp", INPUTS, ids=["one turn", "three turns"])
def test_llama_cpp_reads_the_per_layer_prefix_as_torch_does(model, inp):
    with torch.inference_mode():
        prompt, pmask, context = _rows(model, inp)
        through_llama = model._llama_rec_hidden(prompt, pmask, context)
        with_prefix, without = _torch_hidden(model, inp), _torch_hidden(model, inp, prefix=False)
    assert through_llama is not None
    assert _cos(with_prefix, without) < 0.5  # the loud prefix moves the state far: what follows tells routes apart
    assert _cos(through_llama.numpy(), with_prefix) > 0.95
    assert _cos(through_llama.numpy(), without) < 0.5


def test_keys_not_rotated_for_their_shifted_positions_are_read_differently(model, monkeypatch):
    """The rotation by P is what makes the prefix exact: left out, llama.cpp reads another prefix."""
    inp = INPUTS[0]
    with torch.inference_mode():
        with_prefix = _torch_hidden(model, inp)
        prompt, pmask, context = _rows(model, inp)
        monkeypatch.setattr(model.lm.model.rotary_emb, "forward", lambda x, pos: (torch.ones(1), torch.zeros(1)))
        unrotated = model._llama_rec_hidden(prompt, pmask, context)
    assert unrotated is not None and _cos(unrotated.numpy(), with_prefix) < 0.9


def test_a_ranking_says_which_decoder_ran_it_and_torch_ranks_where_llama_cpp_fails(model, monkeypatch):
    inp = INPUTS[0]
    through_torch = model.item_scores(inp)  # torch ranks unless CRS_UNICRS_SMALL_RANKER says llamacpp
    assert model.rank_route == "torch"
    monkeypatch.setattr(model, "ranker", "llamacpp")
    through_llama = model.item_scores(inp)
    assert model.rank_route == "llama.cpp"
    assert float(np.corrcoef(through_llama.numpy(), through_torch.numpy())[0, 1]) > 0.9

    def fails(*args, **kwargs):
        raise LlamaCppError("llama_state_seq_set_data refused the prefix")

    monkeypatch.setattr(model.llama_decoder(), "prefix_hidden", fails)
    assert torch.equal(model.item_scores(inp), through_torch)
    assert model.rank_route == "torch"
    assert model.recommend_many([inp, INPUTS[1]], k=3) == [
        model.recommend(inp, k=3, decoder="torch"),
        model.recommend(INPUTS[1], k=3, decoder="torch"),
    ]


def test_a_state_layout_other_than_the_one_checked_is_refused(model):
    llama = model.llama_decoder()
    with llama.lock:
        good = llama.real_layout(3, 384).blob
    assert StateLayout(bytes(good), 3, 384).keys  # the real layout parses
    with pytest.raises(LlamaCppError, match="cells"):
        StateLayout(bytes(good), 4, 384)  # another length than it holds
    with pytest.raises(LlamaCppError, match="KV rows"):
        StateLayout(bytes(good), 3, 256)  # another row width
    with pytest.raises(LlamaCppError, match="shorter|bytes more"):
        StateLayout(bytes(good)[:-10], 3, 384)
    with pytest.raises(LlamaCppError, match="bytes more"):
        StateLayout(bytes(good) + b"\0", 3, 384)


def test_key_layout_interleaves_each_head_s_two_halves():
    keys = np.arange(8, dtype=np.float32).reshape(1, 8)
    assert key_layout(keys).tolist() == [[0, 4, 1, 5, 2, 6, 3, 7]]


def test_torch_s_cache_put_into_llama_cpp_gives_torch_s_next_logits(model):
    """The torch-prefill reply: llama.cpp decodes from torch's KV cache, its keys reordered into the GGUF's order
    (already rotated at their own positions). Its next logits are torch's up to its quantized products; with the keys
    in transformers' order they are not."""
    from crs_backends.neural.smollm_llamacpp import StateLayout

    inp = INPUTS[1]
    with torch.inference_mode():
        entities, text, context = model._conv_parts(inp)
        prompt, pmask = model.prompts("conv", [entities], [text])
        embeds, mask, positions = model.assemble(prompt, pmask, [context])
        hidden, cache = model.run(embeds, mask, positions)
        keys, values = model._llama_cache(cache)
        token, n = int(torch.argmax(model.lm.lm_head(hidden[0, -1]))), embeds.shape[1]
        step = model.lm.get_input_embeddings()(torch.tensor([[token]]))
        after, _ = model.run(step, torch.ones(1, n + 1, dtype=torch.long), torch.tensor([[n]]), cache)
        expected = model.lm.lm_head(after[0, -1]).numpy()
    llama = model.llama_decoder()
    heads = keys.shape[2] // 64
    in_transformers_order = keys.reshape(*keys.shape[:2], heads, 32, 2).swapaxes(-1, -2).reshape(keys.shape)
    by_head = in_transformers_order.reshape(*keys.shape[:2], heads, 64)
    assert np.array_equal(key_layout(by_head).reshape(keys.shape), keys)
    got = {}
    for name, k in (("gguf order", keys), ("transformers order", in_transformers_order)):
        with llama.lock:
            assert llama._put_cache(k, values) == n
            llama.step(token, n)
            got[name] = llama.last_logits()
    assert _cos(got["gguf order"], expected) > 0.999
    assert _cos(got["transformers order"], expected) < 0.9
    # the layout grown from one cell is the layout llama.cpp writes for that many cells
    with llama.lock:
        real = llama.real_layout(3, keys.shape[2] * 2)
        grown = StateLayout.grown(llama._template, 3)
    assert (grown.keys, grown.values) == (real.keys, real.values)
    header = real.keys[0] - 12
    assert grown.blob[:header] == real.blob[:header]


@pytest.mark.parametrize("route", ["torch-prefill", "llamacpp"])
def test_a_reply_llama_cpp_fails_to_write_is_written_by_torch_once(model, monkeypatch, route):
    inp = INPUTS[0]
    with torch.inference_mode():
        by_torch = model.generate_ids(inp, max_new_tokens=5, decoder="torch")
    calls: list[str] = []

    def fails(name):
        def call(*args, **kwargs):
            calls.append(name)
            raise LlamaCppError("llama_decode failed")

        return call

    llama = model.llama_decoder()
    monkeypatch.setattr(llama, "greedy", fails("greedy"))
    monkeypatch.setattr(llama, "greedy_after", fails("greedy_after"))
    with torch.inference_mode():
        assert model.generate_ids(inp, max_new_tokens=5, decoder=route) == by_torch
    assert model.reply_route == "torch"
    assert calls == ["greedy_after" if route == "torch-prefill" else "greedy"]


def test_a_reply_decoded_after_a_llama_cpp_ranking_asks_for_logits_again(model):
    """A llama.cpp ranking leaves its context giving hidden states; the next reply's steps ask for logits again (this
    llama.cpp computes both in that mode, and the reply reads the same: nothing relies on it)."""
    inp = INPUTS[1]
    llama = model.llama_decoder()
    with torch.inference_mode():
        before = model.generate_ids(inp, max_new_tokens=6, decoder="torch-prefill")
        model.item_scores(inp, decoder="llamacpp")
        assert model.rank_route == "llama.cpp" and llama._embeddings
        after = model.generate_ids(inp, max_new_tokens=6, decoder="torch-prefill")
    assert not llama._embeddings and after == before
