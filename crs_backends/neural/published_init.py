"""The rows UniCRS's added tokens get when CRS Arena starts the published UniCRS, drawn in the order it drew them.

The published UniCRS files hold the prompt encoders only; its GPT-2 (DialoGPT-small) and RoBERTa come from the
Hub, and two GPT-2 tokens (``<pad>`` and the movie token) and one RoBERTa token (the movie token) are added at
start-up. Their rows are random, and GPT-2's output layer shares its rows, so which random numbers they get
decides where UniCRS writes its placeholders. Followed: iai-group/iEvaLM-CRS ``src/model/UNICRS.py`` L38-86:

1. ``set_seed(42)`` (L39; the seed of ``data/arena/crs_config/UniCRS/unicrs_*.yaml``);
2. ``PromptGPT2forCRS.from_pretrained`` (L73). transformers 4.28 built the model before loading it, and every
   torch module constructor drew its random initial weights on the way (skipping them came in transformers 4.36,
   huggingface/transformers#27709; the library's own ``_init_weights`` was skipped already). In
   ``src/model/unicrs/model_gpt2.py`` order: ``wte``, ``wpe``, then per block ``attn.c_attn``, ``attn.c_proj``,
   ``mlp.c_fc``, ``mlp.c_proj`` (``Conv1D``: normal, std 0.02), then ``lm_head`` (``nn.Linear``, no bias);
3. ``resize_token_embeddings`` (L74): 4.28 built a new ``nn.Embedding`` of the new size (one normal draw over
   all of it), drew it again with ``_init_weights`` (normal, std ``initializer_range``), and copied the old rows
   over; the added rows are the last rows of that second draw;
4. ``AutoModel.from_pretrained`` RoBERTa (L84): its three embeddings, per layer query, key, value, attention
   output, intermediate and output (``nn.Linear``: weight and bias), then the pooler; and its resize (L85), as 3.

Assumed: loading initialised nothing else (no missing weights beyond the buffers the model file tells
transformers to ignore). We cannot run transformers 4.28 offline; the golden test rebuilds the same order
from the real module constructors. The same start-up runs in iEvaLM's own evaluation, so both CRS Arena
policies load the rows this way.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch

SEED = 42

# (kind, shape): "normal" draws normal values over the shape; "linear" is an nn.Linear's reset (kaiming-uniform
# weight of shape (out, in), then a uniform bias of (out,)); "linear_nobias" the weight alone
Draw = tuple[str, tuple[int, ...]]


def gpt2_draws(config) -> Iterator[Draw]:
    """What constructing ``PromptGPT2forCRS(config)`` drew (step 2 of the module docstring)."""
    width, vocab = config.n_embd, config.vocab_size
    inner = config.n_inner if config.n_inner is not None else 4 * width
    yield "normal", (vocab, width)  # wte
    yield "normal", (config.n_positions, width)  # wpe
    for _ in range(config.n_layer):
        yield "normal", (width, 3 * width)  # attn.c_attn
        yield "normal", (width, width)  # attn.c_proj
        yield "normal", (width, inner)  # mlp.c_fc
        yield "normal", (inner, width)  # mlp.c_proj
    yield "linear_nobias", (vocab, width)  # lm_head


def roberta_draws(config) -> Iterator[Draw]:
    """What constructing ``RobertaModel(config)`` (with its pooler) drew (step 4)."""
    hidden, inner = config.hidden_size, config.intermediate_size
    yield "normal", (config.vocab_size, hidden)  # word_embeddings
    yield "normal", (config.max_position_embeddings, hidden)  # position_embeddings
    yield "normal", (config.type_vocab_size, hidden)  # token_type_embeddings
    for _ in range(config.num_hidden_layers):
        for _qkv in range(3):
            yield "linear", (hidden, hidden)  # query, key, value
        yield "linear", (hidden, hidden)  # attention.output.dense
        yield "linear", (inner, hidden)  # intermediate.dense
        yield "linear", (hidden, inner)  # output.dense
    yield "linear", (hidden, hidden)  # pooler.dense


def _replay(draws: Iterator[Draw]) -> None:
    """Consume the random numbers these draws consumed (same operations, same sizes; the values are dropped)."""
    for kind, shape in draws:
        if kind == "normal":
            torch.empty(shape).normal_()
            continue
        weight = torch.empty(shape)
        torch.nn.init.kaiming_uniform_(weight, a=math.sqrt(5))
        if kind == "linear":
            bound = 1 / math.sqrt(shape[1]) if shape[1] > 0 else 0
            torch.empty(shape[0]).uniform_(-bound, bound)


def _resize_rows(old: int, new: int, width: int, std: float) -> torch.Tensor:
    """Step 3: the rows ``old`` … ``new``-1 a 4.28 resize gave the added tokens."""
    torch.empty(new, width).normal_()  # nn.Embedding(new, width) initialising itself
    return torch.empty(new, width).normal_(mean=0.0, std=std)[old:].clone()


def added_rows(gpt2_config, gpt2_size: int, roberta_config, roberta_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The added rows of GPT-2's and RoBERTa's token embeddings, as CRS Arena's start-up drew them. The global
    random state is left as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        _replay(gpt2_draws(gpt2_config))
        gpt2_rows = _resize_rows(gpt2_config.vocab_size, gpt2_size, gpt2_config.n_embd, gpt2_config.initializer_range)
        _replay(roberta_draws(roberta_config))
        roberta_rows = _resize_rows(
            roberta_config.vocab_size, roberta_size, roberta_config.hidden_size, roberta_config.initializer_range
        )
    return gpt2_rows, roberta_rows


def resize_as_crs_arena(gpt2, roberta, gpt2_size: int, roberta_size: int) -> None:
    """Resize both backbones to their tokenizers and give the added rows CRS Arena's values (GPT-2's output layer
    shares its rows, so it gets them too). Call with the backbones as loaded, before any other resize."""
    gpt2_rows, roberta_rows = added_rows(gpt2.config, gpt2_size, roberta.config, roberta_size)
    for model, size, rows in ((gpt2, gpt2_size, gpt2_rows), (roberta, roberta_size, roberta_rows)):
        old = model.get_input_embeddings().weight.shape[0]
        with torch.random.fork_rng(devices=[]):  # its own draws are overwritten below
            model.resize_token_embeddings(size, mean_resizing=False)
        if size > old:
            with torch.no_grad():
                model.get_input_embeddings().weight[old:size] = rows.to(model.get_input_embeddings().weight)
