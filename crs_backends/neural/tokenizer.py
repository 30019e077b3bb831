"""Byte-level BPE tokenizers trained locally (the pretrained ones cannot be downloaded offline).

Three styles mirror the tokenizers the published systems use, so the model code
treats ours and theirs alike:

- ``bart``: ``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3, ``<mask>`` last; encodes ``<s> text </s>``
  (facebook/bart-base, also what roberta-base looks like).
- ``roberta``: ``bart`` plus the ``<movie>`` slot token (UniCRS's prompt encoder).
- ``gpt2``: ``<|endoftext|>`` as bos/eos/unk, ``<pad>`` and ``<movie>`` added, no template
  (microsoft/DialoGPT-small after UniCRS adds its tokens).

Every style also carries the small versions' ``<movie>`` slot (:mod:`crs_backends.neural.reply_facts`) as a single
token that decoding keeps.
"""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from crs_backends.neural.reply_facts import SLOT_TOKENS

STYLES = ("bart", "roberta", "gpt2")


def train_tokenizer(
    texts: Iterable[str], *, style: str = "bart", vocab_size: int = 4000, min_frequency: int = 2
) -> PreTrainedTokenizerFast:
    if style not in STYLES:
        raise ValueError(f"unknown tokenizer style {style!r}; choose one of {', '.join(STYLES)}")
    if style == "gpt2":
        specials = ["<|endoftext|>", "<pad>", "<movie>"]
    else:
        specials = ["<s>", "<pad>", "</s>", "<unk>"] + (["<movie>"] if style == "roberta" else []) + ["<mask>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator((t for t in texts if t), trainer=trainer)
    # the small versions' slot stays one token and survives decoding (it is not "special")
    tok.add_tokens([AddedToken(slot, special=False, normalized=False) for slot in SLOT_TOKENS if slot not in specials])
    if style == "gpt2":
        fast = PreTrainedTokenizerFast(
            tokenizer_object=tok,
            bos_token="<|endoftext|>",
            eos_token="<|endoftext|>",
            unk_token="<|endoftext|>",
            pad_token="<pad>",
            additional_special_tokens=["<movie>"],
        )
    else:
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A </s>",
            pair="<s> $A </s> </s> $B </s>",
            special_tokens=[("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))],
        )
        fast = PreTrainedTokenizerFast(
            tokenizer_object=tok,
            bos_token="<s>",
            eos_token="</s>",
            sep_token="</s>",
            cls_token="<s>",
            unk_token="<unk>",
            pad_token="<pad>",
            mask_token="<mask>",
            additional_special_tokens=["<movie>"] if style == "roberta" else None,
        )
    return fast
