"""Golden tests of what a published-layout KBRD, BARCOR and UniCRS receive under the two CRS Arena policies.

``crs_arena_exact`` reproduces CRS Arena's serving code (iai-group/iEvaLM-CRS at b33b8b3), quirks included;
``crs_arena`` sends each message once. The expected inputs are written here from a reading of that code, with
the tokenizers' own calls, not with our model files' helpers:

- ``crs_arena/arena.py`` L184-186 + L249 and ``crs_arena/crs_fighter.py`` L87: the newest user message twice;
- ``src/model/KBRD.py`` L178-192: messages joined by ``</s>``, left-truncated to 200, right-padded to 200;
- ``src/model/BARCOR.py`` L160-207: "User: " / "System: " by position (empty messages skipped), the same lengths;
- ``src/model/UNICRS.py`` L282-373 + ``unicrs/model_gpt2.py`` L668-696: GPT-2 text joined by ``<|endoftext|>``,
  left-truncated to 128, "System:" appended, left-padded to 136, positions 0 … L-1 across the padding;
- ``src/model/UNICRS.py`` L38-86 under transformers 4.28: GPT-2's added token rows drawn once GPT-2 is built and
  resized, before RoBERTa exists; RoBERTa's once it is built and resized.
"""

from __future__ import annotations

import math

import pytest
import torch
from neural_fixtures import catalog, one_thread  # noqa: F401 (module fixtures; one_thread is autouse)
from test_neural_barcor import fabricate as fabricate_barcor
from test_neural_barcor import tiny_kg as barcor_kg
from test_neural_kbrd import DS as KBRD_DS
from test_neural_kbrd import fabricate as fabricate_kbrd
from test_neural_kbrd import tiny_kg as kbrd_kg
from test_neural_unicrs import fabricate as fabricate_unicrs
from test_neural_unicrs import tiny_kg as unicrs_kg

from crs_backends.neural import policy
from crs_backends.neural.engine import TOP_K, ConvInput, NeuralModel
from crs_backends.neural.sources import CheckpointSource
from crs_backends.neural.system import NeuralCRS, policy_setting
from crs_backends.neural.tokenizer import train_tokenizer
from storage.records import Conversation, Turn

EXACT, CLEAN = "crs_arena_exact", "crs_arena"

# the fixed conversation: user messages with the spacing a person typed (double spaces are kept by CRS Arena)
USER = {
    "kbrd": ["Hi!  I like  Alpha (2001), a drama", "Something with Tom Hanks?", "Thanks,  that is all"],
    "barcor": ["Hi!  I like  Heat (1995), so good", "Something  with Tom Hanks?", "Alien (1979) maybe"],
    "unicrs": ["Hi!  I like  Heat (1995), so good", "Something  with Tom Hanks?", "Alien (1979) maybe"],
}


def _source(system: str, root, dataset: str) -> CheckpointSource:
    return CheckpointSource(system, root, dataset, root, "local dir", "published layout, tiny")


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    """One tiny published-layout set per system, loaded as the app loads published checkpoints."""
    from crs_backends.neural.barcor import BARCOR
    from crs_backends.neural.kbrd import KBRD
    from crs_backends.neural.unicrs import UniCRS

    root = tmp_path_factory.mktemp("published")
    out = {}
    kg = kbrd_kg()
    fabricate_kbrd(root / "kbrd", kg)
    out["kbrd"] = (KBRD.load(root / "kbrd", KBRD_DS, kg), root / "kbrd", KBRD_DS)
    kg = barcor_kg()
    corpus = ["Hi, I like Heat (1995)", "Have you seen Alien (1979)?", "Something with Tom Hanks"] * 3
    btok = train_tokenizer(
        corpus + ["User: " + t for t in corpus] + ["System: " + t for t in corpus], style="bart", vocab_size=300
    )
    fabricate_barcor(root / "barcor", kg, btok)
    out["barcor"] = (BARCOR.load(root / "barcor", "tiny", kg), root / "barcor", "tiny")
    kg = unicrs_kg()
    corpus = corpus + ["User: " + t for t in corpus] + ["System: " + t for t in corpus]
    toks = (
        train_tokenizer(corpus, style="gpt2", vocab_size=300, min_frequency=1),
        train_tokenizer(corpus, style="roberta", vocab_size=300, min_frequency=1),
    )
    fabricate_unicrs(root / "unicrs", kg, toks)
    model = UniCRS.load(root / "unicrs", "tiny", kg)
    model.max_new_tokens = 6  # a CPU test: the inputs are what is checked, not the length of the replies
    out["unicrs"] = (model, root / "unicrs", "tiny")
    return out


def _crs(sets, catalog, system: str, variant: str) -> NeuralCRS:
    model, root, dataset = sets[system]
    return NeuralCRS(model, catalog, source=_source(system, root, dataset), policy=variant)


class Spy:
    """Records what a method of ``owner`` is called with, then calls it."""

    def __init__(self, monkeypatch, owner, name: str):
        self.calls: list[tuple[tuple, dict]] = []
        real = getattr(owner, name)

        def wrapper(*args, **kwargs):
            self.calls.append((args, kwargs))
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, wrapper)


def _exact_context(turns: list[Turn]) -> list[str]:
    texts = [t.text or "" for t in turns]
    return texts + [texts[-1]]


def _clean_context(turns: list[Turn]) -> list[str]:
    return [" ".join((t.text or "").split()) for t in turns]


def _ids(tok, text: str, max_length: int) -> list[int]:
    tok.truncation_side = "left"
    return tok(text, truncation=True, max_length=max_length)["input_ids"]


def _padded(ids: list[int], width: int, pad: int) -> tuple[list[int], list[int]]:
    return ids + [pad] * (width - len(ids)), [1] * len(ids) + [0] * (width - len(ids))


def _roles(context: list[str]) -> list[str]:
    return [("User: " if i % 2 == 0 else "System: ") + u for i, u in enumerate(context) if u]


def _three_turns(crs: NeuralCRS, system: str, on_turn) -> list[Turn]:
    conv = Conversation(system_id=system, turns=[])
    for text in USER[system]:
        conv.turns.append(Turn(role="user", text=text))
        on_turn(list(conv.turns))
        turn = crs.respond(conv)
        assert turn.metadata["policy"] == crs.policy
        conv.turns.append(turn)
    return conv.turns


# ---------------------------------------------------------------------------------------------------------------
# KBRD and BARCOR: the encoder ids (and masks) of both the reply and the option choice, turns 1-3


@pytest.mark.parametrize("variant", [EXACT, CLEAN])
@pytest.mark.parametrize("system", ["kbrd", "barcor"])
def test_bart_systems_receive_the_published_ids(sets, catalog, monkeypatch, system, variant):
    crs = _crs(sets, catalog, system, variant)
    model = crs.model
    bart = model.conv if system == "kbrd" else model.conv_model
    spy = Spy(monkeypatch, bart, "generate")
    tok = model.tokenizer
    width = 200  # context_max_length of both published configs (a multiple of 8)
    assert (model.settings["context_max_length"] if system == "kbrd" else model.context_max_length) == width
    expected: list[tuple[list[int], list[int]]] = []

    def expect(turns: list[Turn]) -> None:
        context = _exact_context(turns) if variant == EXACT else _clean_context(turns)
        text = "</s>".join(context) if system == "kbrd" else "</s>".join(_roles(context))
        ids = _ids(tok, text, width)
        expected.append(_padded(ids, width, 1) if variant == EXACT else (ids, [1] * len(ids)))

    turns = _three_turns(crs, system, expect)
    # each turn generates twice (the reply, then get_choice) from the same encoder input
    assert len(spy.calls) == 6
    for n, (_args, kwargs) in enumerate(spy.calls):
        ids, mask = expected[n // 2]
        assert kwargs["input_ids"][0].tolist() == ids, f"turn {n // 2 + 1}"
        assert kwargs["attention_mask"][0].tolist() == mask
    assert all(t.metadata["policy"] == variant for t in turns if t.role == "system")
    # the reply bans repeating a context trigram; get_choice (KBRD.py L270-277, BARCOR.py L237-244) passes no
    # encoder_no_repeat_ngram_size, so its two or five tokens are scored without that ban
    reply_cfg, choice_cfg = spy.calls[0][1]["generation_config"], spy.calls[1][1]["generation_config"]
    assert reply_cfg.encoder_no_repeat_ngram_size == 3 and not choice_cfg.encoder_no_repeat_ngram_size


def test_kbrd_links_the_newest_message_twice_under_the_exact_policy(sets, catalog):
    """crs_fighter.py L88-91 links every utterance of its context, the copy included: KBRD's summed user vector
    counts the newest message's entities twice."""
    exact, clean = _crs(sets, catalog, "kbrd", EXACT), _crs(sets, catalog, "kbrd", CLEAN)
    conv = Conversation(system_id="kbrd", turns=[Turn(role="user", text="I like Alpha (2001)")])
    assert exact.exact_input(conv).entities.count("Alpha (2001)") == 2
    assert exact.exact_input(conv).context == ["I like Alpha (2001)", "I like Alpha (2001)"]
    assert clean.arena_input(conv).entities.count("Alpha (2001)") == 1


# ---------------------------------------------------------------------------------------------------------------
# UniCRS: ids, mask and positions of the reply and the option choice, turns 1-3


@pytest.mark.parametrize("variant", [EXACT, CLEAN])
def test_unicrs_receives_the_published_ids_and_positions(sets, catalog, monkeypatch, variant):
    crs = _crs(sets, catalog, "unicrs", variant)
    model = crs.model
    spy = Spy(monkeypatch, model, "run_gpt2")
    tok = model.tokenizer
    bot = tok.convert_tokens_to_ids(tok.tokenize("System:"))
    assert model.context_max_length == 128
    width = math.ceil((128 + len(bot)) / 8) * 8
    assert width == 136 or len(bot) != 2
    expected = []
    starts = []

    def expect(turns: list[Turn]) -> None:
        starts.append(len(spy.calls))
        context = _exact_context(turns) if variant == EXACT else _clean_context(turns)
        text = tok.eos_token.join(_roles(context)) + tok.eos_token
        ids = tok(text, add_special_tokens=False)["input_ids"][-128:] + bot
        if variant == EXACT:
            pad = width - len(ids)
            expected.append(([tok.pad_token_id] * pad + ids, [0] * pad + [1] * len(ids), list(range(width))))
        else:
            expected.append((ids, [1] * len(ids), list(range(len(ids)))))

    _three_turns(crs, "unicrs", expect)
    starts.append(len(spy.calls))
    for turn in range(3):
        # the calls with positions given: the reply's first step (the whole input), its later steps (one token
        # each), then get_choice (the whole input again); the recommender's call counts its own positions
        full = [
            c
            for c in spy.calls[starts[turn] : starts[turn + 1]]
            if c[1].get("positions") is not None and c[0][0].shape[1] > 1
        ]
        assert len(full) == 2, f"turn {turn + 1}"
        ids, mask, positions = expected[turn]
        for args, kwargs in full:
            assert args[0][0].tolist() == ids
            assert args[1][0].tolist() == mask
            assert kwargs["positions"][0].tolist() == positions
        if variant == EXACT:  # the last context token always sits at position 135
            assert positions[-1] == 135 and mask[0] == 0


def _ngram_banned(seq: list[int], n: int = 3) -> list[int]:
    """HF's no_repeat_ngram_size rule, written out: tokens that would repeat an n-gram already in ``seq``."""
    tail = seq[-(n - 1) :]
    return [seq[i + n - 1] for i in range(len(seq) - n + 1) if seq[i : i + n - 1] == tail]


def test_unicrs_exact_generation_equals_a_full_recompute_over_the_padded_input(sets):
    """What transformers 4.28 did each step (checkpoint-keys.md §5.2): no cache, the whole left-padded sequence
    with positions 0 … L-1 and the conv prompt as a fresh prefix, greedy with no_repeat_ngram_size 3 over the
    whole input (the pads included); our cached loop must give the same tokens."""
    from transformers import DynamicCache

    model = sets["unicrs"][0]
    inp = ConvInput(["Hi!  I like  Heat (1995)", "Hi!  I like  Heat (1995)"], ["Heat (1995)"] * 2, served=True)
    tok = model.tokenizer
    bot = tok.convert_tokens_to_ids(tok.tokenize("System:"))
    text = tok.eos_token.join(_roles(inp.context)) + tok.eos_token
    ids = tok(text, add_special_tokens=False)["input_ids"][-128:] + bot
    pad = 136 - len(ids)
    seq = [tok.pad_token_id] * pad + ids
    with torch.no_grad():
        prefix = model._prefix("conv", inp)
        for _ in range(8):
            cache = DynamicCache(tuple((prefix[i, 0], prefix[i, 1]) for i in range(prefix.shape[0])))
            mask = [1] * prefix.shape[-2] + [0] * pad + [1] * (len(seq) - pad)
            logits = model.gpt2(
                input_ids=torch.tensor([seq]),
                past_key_values=cache,
                attention_mask=torch.tensor([mask]),
                position_ids=torch.arange(len(seq))[None],
            ).logits[0, -1]
            logits[_ngram_banned(seq)] = -float("inf")
            seq.append(int(logits.argmax()))
            if seq[-1] == tok.eos_token_id:
                break
    assert model.generate_ids(inp, max_new_tokens=8) == seq[136:]
    assert model.generate_ids(inp, max_new_tokens=8, use_cache=False) == seq[136:]


# ---------------------------------------------------------------------------------------------------------------
# UniCRS: the added token rows in CRS Arena's seed order


def test_unicrs_added_rows_follow_crs_arenas_seed_order():
    """Rebuilt from the real module constructors in the order transformers 4.28 ran them for ``UNICRS.__init__``:
    set_seed(42), GPT-2 built (wte, wpe, per block c_attn, c_proj, c_fc, c_proj, then lm_head), resized (a new
    Embedding, then _init_weights), RoBERTa built (embeddings, per layer q, k, v, out, intermediate, output,
    then the pooler), resized."""
    from torch import nn
    from transformers import GPT2Config, GPT2LMHeadModel, RobertaConfig, RobertaModel
    from transformers.pytorch_utils import Conv1D

    from crs_backends.neural.published_init import resize_as_crs_arena

    g = GPT2Config(n_embd=16, n_layer=2, n_head=2, vocab_size=50, n_positions=32, bos_token_id=0, eos_token_id=0)
    r = RobertaConfig(
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        vocab_size=60,
        max_position_embeddings=40,
        type_vocab_size=1,
    )
    torch.manual_seed(42)
    nn.Embedding(50, 16), nn.Embedding(32, 16)
    for _ in range(2):
        Conv1D(48, 16), Conv1D(16, 16), Conv1D(64, 16), Conv1D(16, 64)
    nn.Linear(16, 50, bias=False)
    grown = nn.Embedding(52, 16)
    grown.weight.data.normal_(mean=0.0, std=g.initializer_range)
    gpt2_rows = grown.weight[50:].detach().clone()
    nn.Embedding(60, 16, padding_idx=1), nn.Embedding(40, 16, padding_idx=1), nn.Embedding(1, 16)
    for _ in range(2):
        for _linear in range(4):
            nn.Linear(16, 16)
        nn.Linear(16, 32), nn.Linear(32, 16)
    nn.Linear(16, 16)
    grown = nn.Embedding(61, 16)
    grown.weight.data.normal_(mean=0.0, std=r.initializer_range)
    roberta_rows = grown.weight[60:].detach().clone()

    torch.manual_seed(7)
    gpt2, roberta = GPT2LMHeadModel(g), RobertaModel(r)
    old = gpt2.transformer.wte.weight[:50].detach().clone()
    before = torch.random.get_rng_state()
    resize_as_crs_arena(gpt2, roberta, 52, 61)
    assert torch.equal(torch.random.get_rng_state(), before)  # the global random state is left alone
    assert torch.equal(gpt2.transformer.wte.weight[50:], gpt2_rows)
    assert torch.equal(gpt2.transformer.wte.weight[:50], old)
    assert torch.equal(gpt2.lm_head.weight[50:], gpt2_rows)  # the output layer shares the rows
    assert torch.equal(roberta.embeddings.word_embeddings.weight[60:], roberta_rows)


# ---------------------------------------------------------------------------------------------------------------
# the reply: empty generations, placeholders, the decode clean-up, a system that speaks first


class Recording(NeuralModel):
    """A model with a fixed reply and option scores that remembers every input it was given."""

    def __init__(self, kg, system: str, reply: str, scores: list[float]):
        self.kg, self.system, self.reply, self.scores = kg, system, reply, scores
        self.inputs: list[ConvInput] = []

    def recommend(self, inp, k=TOP_K):
        return [(e, -float(i)) for i, e in enumerate(self.kg.item_ids[:k])]

    def generate(self, inp, *, items=None):
        self.inputs.append(inp)
        return self.reply

    def option_scores(self, inp, options):
        return list(self.scores)


def _recording_crs(catalog, system, reply, variant, tmp_path):
    from crs_backends.neural.kg_reader import kg_from_catalog

    model = Recording(kg_from_catalog(catalog), system, reply, [5.0, 0.0, 0.0, 0.0])  # always "A": generate
    return model, NeuralCRS(model, catalog, source=_source(system, tmp_path, "redial"), policy=variant)


def test_an_empty_generation_is_shown_empty_and_stays_in_the_context(catalog, tmp_path):
    model, crs = _recording_crs(catalog, "kbrd", "", EXACT, tmp_path)
    conv = Conversation(system_id="kbrd", turns=[Turn(role="user", text="hi")])
    first = crs.respond(conv)
    assert first.text == "" and first.items == []
    assert any("shown empty" in n for n in first.metadata["notes"])
    conv.turns += [first, Turn(role="user", text="hello?")]
    crs.respond(conv)
    assert model.inputs[-1].context == ["hi", "", "hello?", "hello?"]
    # the clean variant too: nothing of ours is put in the model's place
    _model, clean = _recording_crs(catalog, "kbrd", "", CLEAN, tmp_path)
    turn = clean.respond(Conversation(system_id="kbrd", turns=[Turn(role="user", text="hi")]))
    assert turn.text == "" and any("shown empty" in n for n in turn.metadata["notes"])


@pytest.mark.parametrize(
    ("system", "reply", "exact_text"),
    [
        ("kbrd", "Have you seen <movie>?", "Have you seen <movie>?"),  # KBRD.py L334: nothing filled
        ("barcor", "Have you seen <movie>?", "Have you seen <movie>?"),  # BARCOR.py L298-299
        ("unicrs", " Have you seen <pad>?  ", "Have you seen {top}?"),  # UNICRS.py L503-513: filled, stripped
    ],
)
def test_only_unicrs_fills_its_placeholder_under_the_exact_policy(catalog, tmp_path, system, reply, exact_text):
    class Published(Recording):
        placeholder = "<pad>" if system == "unicrs" else "<movie>"

    from crs_backends.neural.kg_reader import kg_from_catalog

    kg = kg_from_catalog(catalog)
    top = kg.entity_name(kg.item_ids[0])
    for variant in (EXACT, CLEAN):
        model = Published(kg, system, reply, [5.0, 0.0, 0.0, 0.0])
        crs = NeuralCRS(model, catalog, source=_source(system, tmp_path, "redial"), policy=variant)
        turn = crs.respond(Conversation(system_id=system, turns=[Turn(role="user", text="hi")]))
        if variant == EXACT:
            assert turn.text == exact_text.format(top=top)
        else:  # the clean variant fills every model's slot with the ranking
            assert top in turn.text and "<movie>" not in turn.text and "<pad>" not in turn.text


def test_a_system_that_speaks_first_gets_no_empty_message_in_front(catalog, tmp_path):
    turns = [Turn(role="system", text="Hello!  What do you like?"), Turn(role="user", text="Heat (1995)")]
    for variant, context in (
        (EXACT, ["Hello!  What do you like?", "Heat (1995)", "Heat (1995)"]),
        (CLEAN, ["", "Hello! What do you like?", "Heat (1995)"]),  # iEvaLM's records: '' when the system began
    ):
        model, crs = _recording_crs(catalog, "unicrs", "Great.", variant, tmp_path)
        crs.respond(Conversation(system_id="unicrs", turns=list(turns)))
        assert model.inputs[-1].context == context and model.inputs[-1].served is (variant == EXACT)


def test_published_kbrd_replies_get_the_decode_clean_up_of_transformers_4_28(sets, monkeypatch):
    """transformers 4.28 (CRS Arena's) decoded BART with ``clean_up_tokenization_spaces`` on; 5 leaves it off."""
    model = sets["kbrd"][0]
    ids = model.tokenizer("I like Alpha (2001) . It 's  a drama", add_special_tokens=False)["input_ids"]
    monkeypatch.setattr(model, "generate_ids", lambda inp, **kw: torch.tensor([[2, *ids, 2]]))
    served = model.reply_text(ConvInput(["hi"], served=True))
    assert ". It's" in served and " ." not in served
    assert model.reply_text(ConvInput(["hi"])) == " ".join(served.split())


# ---------------------------------------------------------------------------------------------------------------
# the option state in float32, and which variant answers by default


def test_near_ties_break_in_float32_as_get_choice_broke_them():
    """After every option was used once, each state is -1e5: float32 keeps about 0.008 of a score there, so 0.001
    and 0.0035 tie and torch.argmax takes the first; float64 would have taken B."""
    chosen = policy.choose([0.001, 0.0035, -5.0, -5.0], [-1e5] * 4, "redial")
    assert chosen.letter == "A"
    assert chosen.state_after == [-2e5, -1e5, -1e5, -1e5]  # the state itself stays Python floats


def test_published_sets_answer_exactly_by_default_and_the_clean_variant_is_one_setting_away(
    catalog,
    tmp_path,
    monkeypatch,
):
    _model, published = _recording_crs(catalog, "kbrd", "Hi.", None, tmp_path)
    assert published.policy == EXACT
    model = Recording(published.kg, "kbrd", "Hi.", [5.0, 0.0, 0.0, 0.0])
    small = NeuralCRS(
        model, catalog, source=CheckpointSource("kbrd", tmp_path, "bundled", tmp_path, "small local", "v")
    )
    assert small.policy == CLEAN
    monkeypatch.setenv("CRS_NEURAL_POLICY", "crs_arena")
    assert policy_setting() == CLEAN
    monkeypatch.setenv("CRS_NEURAL_POLICY", "")
    assert policy_setting() is None
    monkeypatch.setenv("CRS_NEURAL_POLICY", "verbatim")
    with pytest.raises(ValueError):
        policy_setting()


def test_an_empty_reply_is_said_to_be_one_in_the_chat():
    from ui.render import EMPTY_REPLY, chat_messages

    conv = Conversation(system_id="kbrd", turns=[Turn(role="user", text="hi"), Turn(role="system", text="")])
    assert [m["content"] for m in chat_messages(conv)] == ["hi", EMPTY_REPLY]


def test_exact_links_the_list_reply_as_sent_and_the_clean_variant_its_stripped_text(catalog, tmp_path):
    """CRS Arena's ``get_entity`` (iai-group/iEvaLM-CRS at b33b8b3, ``src/model/utils.py`` L138-145) runs
    ``process.extract(text, entity_list, scorer=fuzz.WRatio, limit=20)`` on each message as sent and keeps the
    matches scoring >= 90. The list reply (``src/model/KBRD.py`` L321-327: the header and every line end in
    ``"  \\n"``) is longer untrimmed, and WRatio scales partial matches by the length ratio: here "Casino (1995)"
    falls below 90 as sent and is linked from the stripped text. The expectation is computed the way
    ``get_entity`` does, not with our linker."""
    from rapidfuzz import fuzz, process

    from crs_backends.neural.kg_reader import KGData

    names = ["Scarface (1932)", "Casino (1995)", "The Godfather (1972)", "Heat (1995)"]
    kg = KGData({n: i for i, n in enumerate(names)}, {}, {}, list(range(len(names))), name="tiny")
    reply = (
        "I would recommend the following items:  \n1: Scarface (1932)  \n2: Casino (1995)  \n"
        "3: The Godfather (1972)  \n"
    )
    assert reply == policy.list_reply(["Scarface (1932)", "Casino (1995)", "The Godfather (1972)"])

    def get_entity(text: str) -> list[str]:  # utils.py L138-145, as written there
        return [e[0] for e in process.extract(text, names, scorer=fuzz.WRatio, limit=20) if e[1] >= 90]

    turns = [Turn(role="user", text="hi"), Turn(role="system", text=reply), Turn(role="user", text="more")]
    conv = Conversation(system_id="kbrd", turns=turns)
    crs = {}
    for variant in (EXACT, CLEAN):
        model = Recording(kg, "kbrd", "ok", [5.0, 0.0, 0.0, 0.0])
        crs[variant] = NeuralCRS(model, catalog, source=_source("kbrd", tmp_path, "redial"), policy=variant)
    exact = crs[EXACT].exact_input(conv)
    assert exact.entities == [e for text in ["hi", reply, "more", "more"] for e in get_entity(text)]
    assert "Casino (1995)" not in exact.entities and "Scarface (1932)" in exact.entities
    clean = crs[CLEAN].arena_input(conv)
    assert "Casino (1995)" in clean.entities  # the clean variant links the stripped, collapsed text


def test_kbrd_inherits_the_generation_settings_its_config_carries(tmp_path):
    """CRS Arena's KBRD calls ``generate(**gen_inputs, **gen_args)`` (``src/model/KBRD.py`` L241-251 for the reply,
    L258-266 for get_choice) under transformers 4.28, whose ``generate`` starts from the generation config built
    from the checkpoint's config.json and overrides only what is passed. So a setting the config carries and the
    call does not pass (here ``forced_bos_token_id``, and for get_choice ``no_repeat_ngram_size``) applies;
    the reply's explicit no-repeat sizes (3 and 3) win over the config's; generation_config.json wins over
    config.json, as in BARCOR's path."""
    import json

    from crs_backends.neural.kbrd import KBRD

    kg = kbrd_kg()
    fabricate_kbrd(tmp_path, kg)
    conv_dir = next(tmp_path.glob("kbrd_conv_*"))
    config = json.loads((conv_dir / "config.json").read_text(encoding="utf-8"))
    config.update(forced_bos_token_id=0, no_repeat_ngram_size=4, encoder_no_repeat_ngram_size=5)
    (conv_dir / "config.json").write_text(json.dumps(config), encoding="utf-8")
    model = KBRD.load(tmp_path, KBRD_DS, kg)
    assert model.gen == {"forced_bos_token_id": 0, "no_repeat_ngram_size": 4, "encoder_no_repeat_ngram_size": 5}
    reply = model.generation_config()
    assert (reply.forced_bos_token_id, reply.no_repeat_ngram_size, reply.encoder_no_repeat_ngram_size) == (0, 3, 3)
    choice = model.generation_config(2, 2, True, True, 0)
    assert (choice.forced_bos_token_id, choice.no_repeat_ngram_size, choice.encoder_no_repeat_ngram_size) == (0, 4, 5)
    assert choice.forced_eos_token_id is None  # a setting the config does not name stays unset
    (conv_dir / "generation_config.json").write_text(json.dumps({"forced_bos_token_id": 2}), encoding="utf-8")
    assert KBRD.load(tmp_path, KBRD_DS, kg).generation_config().forced_bos_token_id == 2


@pytest.mark.parametrize(
    ("exact", "device", "system", "expected"),
    [
        # KBRD.py L70/L90/L113 and BARCOR.py L43/L64: Accelerator(mixed_precision="fp16") and prepare(): on a GPU
        (True, "cuda", "kbrd", "fp16 autocast"),
        (True, "cuda", "barcor", "fp16 autocast"),
        (True, "cpu", "kbrd", "fp32"),  # accelerate keeps fp32 on a CPU
        (False, "cuda", "kbrd", "fp32"),  # the clean variant
        (True, "cuda", "unicrs", "fp32"),  # only its prompt encoders were prepared: not reproduced, stated
    ],
)
def test_the_precision_follows_crs_arenas_accelerator(exact, device, system, expected):
    from crs_backends.neural.system import served_precision

    assert served_precision(exact, device, system) == expected


@pytest.mark.parametrize(
    ("system", "prepared"), [("kbrd", ["conv", "rec"]), ("barcor", ["conv_model"]), ("unicrs", [])]
)
def test_the_modules_crs_arena_prepared(sets, system, prepared):
    """KBRD.py prepares both models, BARCOR.py its conversation model alone; UniCRS's prompt-encoder mix is not
    reproduced (served_precision keeps it in fp32)."""
    model = sets[system][0]
    assert model.prepared_modules() == [getattr(model, name) for name in prepared]


def _autocast_seen(watched: dict):
    """Forward pre-hooks recording, per watched module, whether (CPU) autocast was on each time it ran."""
    seen: dict[str, list[bool]] = {name: [] for name in watched}
    handles = [
        module.register_forward_pre_hook(lambda _m, _a, name=name: seen[name].append(torch.is_autocast_enabled("cpu")))
        for name, module in watched.items()
    ]
    return seen, handles


def test_only_the_prepared_forward_runs_in_half_precision_kbrd(sets):
    """accelerate 0.18 wrapped the prepared models' forward alone: in a reply (transformers 4.28's generate) the
    encoder runs through get_encoder() outside it and the user vector's R-GCN outside the recommender's forward (full
    precision), the decoder's steps inside (half); a recommendation goes through the recommender's forward (half).
    Shown on the CPU with bfloat16 standing in for the GPU's float16, through the function the serving path calls."""
    from crs_backends.neural.mixed_precision import is_prepared, prepared_forward

    model = sets["kbrd"][0]
    inp = ConvInput(["Hi! I like Alpha (2001), a drama"], [model.kg.entity_name(i) for i in model.kg.item_ids[:2]])
    watched = {"encoder": model.conv.model.encoder, "decoder": model.conv.model.decoder, "rgcn": model.rec.kg_encoder}
    seen, handles = _autocast_seen(watched)
    try:
        model.invalidate()  # the reply computes the node table itself
        with prepared_forward(model.prepared_modules(), "cpu", torch.bfloat16):
            model.reply_text(inp)
            assert seen["encoder"] == [False] and seen["rgcn"] == [False]
            assert seen["decoder"] and all(seen["decoder"])
            model.recommend(inp, k=5)
            assert seen["rgcn"] == [False, True]  # get_rec: through the prepared forward
        assert not any(is_prepared(m) for m in model.prepared_modules())  # restored after the turn
        model.recommend(inp, k=5)
        assert seen["rgcn"] == [False, True]  # unprepared: the cached full-precision table, no R-GCN pass
    finally:
        for handle in handles:
            handle.remove()


def test_only_the_prepared_forward_runs_in_half_precision_barcor(sets):
    from crs_backends.neural.mixed_precision import prepared_forward

    model = sets["barcor"][0]
    inp = ConvInput(["Hi! I like Heat (1995), so good"], [])
    watched = {"encoder": model.conv_model.model.encoder, "decoder": model.conv_model.model.decoder}
    if model.rec_model is not None:
        watched["recommender"] = model.rec_model
    seen, handles = _autocast_seen(watched)
    try:
        with prepared_forward(model.prepared_modules(), "cpu", torch.bfloat16):
            model.reply_text(inp)
            model.recommend(inp, k=5)
    finally:
        for handle in handles:
            handle.remove()
    assert seen["encoder"] and not any(seen["encoder"]) and seen["decoder"] and all(seen["decoder"])
    assert not any(seen.get("recommender", []))  # not prepared: fp32


def test_a_gpu_precision_turn_wraps_the_prepared_models_during_the_turn(sets, catalog, monkeypatch):
    """The serving path itself: where the turn's precision is fp16 autocast (a GPU under the exact policy), the
    prepared modules' forward is wrapped while the turn runs and restored after (checked on any machine: the hook
    sees the wrapping, whatever the device)."""
    from crs_backends.neural import system as system_module
    from crs_backends.neural.mixed_precision import is_prepared

    model, root, dataset = sets["kbrd"]
    monkeypatch.setattr(system_module, "served_precision", lambda *a, **k: system_module.FP16_AUTOCAST)
    monkeypatch.setattr(system_module, "prepared_forward", _cpu_prepared_forward)
    wrapped: list[bool] = []
    handle = model.conv.register_forward_pre_hook(lambda m, _a: wrapped.append(is_prepared(m)))
    try:
        crs = NeuralCRS(model, catalog, source=_source("kbrd", root, dataset), policy=EXACT)
        turn = crs.respond(Conversation(system_id="kbrd", turns=[Turn(role="user", text="hi")]))
    finally:
        handle.remove()
    assert turn.metadata["precision"] == "fp16 autocast" and wrapped and all(wrapped)
    assert not any(is_prepared(m) for m in model.prepared_modules())


def _cpu_prepared_forward(modules, _device_type, _dtype):
    from crs_backends.neural.mixed_precision import prepared_forward

    return prepared_forward(modules, "cpu", torch.bfloat16)


def test_a_cpu_turn_records_fp32(catalog, tmp_path):
    _model, crs = _recording_crs(catalog, "kbrd", "Hello there.", EXACT, tmp_path)
    turn = crs.respond(Conversation(system_id="kbrd", turns=[Turn(role="user", text="hi")]))
    assert turn.metadata["precision"] == "fp32"
