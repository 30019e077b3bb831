"""One pass for the reply and the option letters of the small UniCRS (#72, item 9): the policy asks for the reply
first, then scores the option letters from the same input (UniCRS's ``get_choice``); where llama.cpp wrote the reply,
its prefill's logits are those scores, and no second prefill runs; where torch read the input (a torch reply, or one
llama.cpp decodes from torch's cache), torch's prefill gives them. Another input gets a torch prefill of its own; the
turn records which route gave them."""

from __future__ import annotations

import pytest
import torch
from neural_fixtures import one_thread  # noqa: F401 (an autouse fixture)

from catalog.catalog import Catalog, get_catalog
from crs_backends.neural.engine import ConvInput
from crs_backends.neural.kg_reader import kg_from_catalog
from crs_backends.neural.unicrs_smollm import UniCRSSmall

LETTERS = ["A", "B", "C"]


@pytest.fixture(scope="module")
def model() -> UniCRSSmall:
    kg = kg_from_catalog(Catalog(list(get_catalog("bundled").items)[:12], name="tiny"))
    return UniCRSSmall.create(kg, seed=1, decoder="llamacpp")


def _torch_scores(model: UniCRSSmall, inp: ConvInput) -> list[float]:
    model._option_logits = None  # nothing kept: a torch prefill
    return model.option_scores(inp, LETTERS)


def test_the_reply_pass_gives_the_option_letters(model):
    inp = ConvInput(["Hi! Any good movie for tonight?"], [])
    with torch.inference_mode():
        reply = model.generate_ids(inp, max_new_tokens=4)
    assert model.llama_decoder() is not None and reply
    kept = model._option_logits[1]
    scores = model.option_scores(inp, LETTERS)
    assert model.option_route == "the reply's llama.cpp prefill"
    # the logits read are the reply's own: its first token is their arg-max (no ban applies to a first token)
    assert int(torch.argmax(kept)) == reply[0]
    letters = [model.tokenizer(o, add_special_tokens=False)["input_ids"][0] for o in LETTERS]
    assert scores == [float(kept[t]) for t in letters]
    # read once: asked again, a torch prefill gives them (llama.cpp's quantized products move them a little only)
    again = model.option_scores(inp, LETTERS)
    assert model.option_route == "a torch prefill"
    assert max(abs(a - b) for a, b in zip(scores, again)) < 0.1 * max(abs(b) for b in again) + 0.5


def test_another_input_gets_a_prefill_of_its_own_and_a_torch_reply_gives_its_prefill_s(model):
    first = ConvInput(["I want a scary movie for tonight."], [])
    other = ConvInput(["Something funny, maybe a comedy?"], [])
    with torch.inference_mode():
        model.generate_ids(first, max_new_tokens=2)
    assert model.option_scores(other, LETTERS) == _torch_scores(model, other)
    assert model.option_route == "a torch prefill"
    with torch.inference_mode():
        model.generate_ids(first, max_new_tokens=2, decoder="torch")
    model.option_scores(first, LETTERS)
    assert model.option_route == "the reply's torch prefill" and model.reply_route == "torch"


def test_a_reply_torch_prefilled_and_llama_cpp_decoded_gives_the_letters_from_torch_s_prefill(model):
    inp = ConvInput(["Hi! Any good movie for tonight?"], [])
    with torch.inference_mode():
        reply = model.generate_ids(inp, max_new_tokens=4, decoder="torch-prefill")
    assert model.reply_route == "torch prefill, llama.cpp decode"
    kept = model._option_logits[1]
    assert int(torch.argmax(kept)) == reply[0]  # the first token is the prefill's own choice
    assert model.option_scores(inp, LETTERS) == _torch_scores(model, inp)  # exactly torch's get_choice
    assert model.option_route == "a torch prefill"
