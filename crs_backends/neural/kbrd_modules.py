"""KBRD's two networks with the parameter names of the published iEvaLM / CRS Arena checkpoints.

``KBRDforRec`` (``kbrd_rec_<ds>/model.pt``, a plain state dict)::

    node_embeds (N, H)                    entity table, no pad row
    special_token_embeddings (1, H)       frozen zeros, saved; appended after the R-GCN as the pad row
    kg_encoder.{weight (B, H, H), comp (R, B), root (H, H), bias (H,)}   torch_geometric RGCNConv
    attn.attn.0.{weight, bias}, attn.attn.2.{weight, bias}               Linear / Tanh / Linear(H, 1)

``KBRDforConv`` (``kbrd_conv_<ds>/``, a Hugging Face dir): a BART seq2seq model with the standard
``BartForConditionalGeneration`` names plus ``rec_proj`` (vocab, H); the vocabulary logits are
``lm_head(h) + final_logits_bias + rec_proj(user)`` at every decoder step.

No renaming is needed: the module paths equal the published ones (see ``reference/checkpoint-keys.md`` §3.1–3.2).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F
from torch_geometric.nn import RGCNConv
from transformers import BartConfig, BartForConditionalGeneration
from transformers.models.bart.modeling_bart import shift_tokens_right

# keys a Hugging Face safetensors save drops (tied to model.shared.weight) and the buffer HF lets be absent
TIED_KEYS = ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight")
OPTIONAL_CONV_KEYS = TIED_KEYS + ("final_logits_bias",)


class SelfAttention(nn.Module):
    """The published attention pooling. Its softmax runs over a size-1 axis, so every weight is 1:
    the pooled vector is the sum of the (masked or zero pad) entity vectors. Kept literally for fidelity."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.attn = nn.Sequential(nn.Linear(hidden_size, hidden_size), nn.Tanh(), nn.Linear(hidden_size, 1))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        scores = self.attn(x)  # (bs, L, 1)
        if mask is not None:
            scores = scores + (~mask).unsqueeze(-1).to(scores.dtype) * -1e4
        weights = F.softmax(scores, dim=-1)  # size-1 axis, as published
        return (weights.transpose(1, 2) @ x).squeeze(1)  # (bs, H)


class KBRDforRec(nn.Module):
    def __init__(self, hidden_size: int, num_relations: int, num_bases: int, num_entities: int):
        super().__init__()
        self.hidden_size = hidden_size
        self.num_entities = num_entities
        self.kg_encoder = RGCNConv(hidden_size, hidden_size, num_relations=num_relations, num_bases=num_bases)
        self.node_embeds = nn.Parameter(torch.empty(num_entities, hidden_size))
        bound = math.sqrt(6.0 / (num_entities + hidden_size))
        nn.init.uniform_(self.node_embeds, -bound, bound)
        self.special_token_embeddings = nn.Parameter(torch.zeros(1, hidden_size), requires_grad=False)
        self.attn = SelfAttention(hidden_size)

    def get_node_embeds(self, edge_index: torch.Tensor, edge_type: torch.Tensor) -> torch.Tensor:
        """R-GCN output for every entity with the zero pad row appended: (N + 1, H)."""
        nodes = self.kg_encoder(self.node_embeds, edge_index, edge_type)
        return torch.cat([nodes, self.special_token_embeddings], dim=0)

    def user_embeds(
        self, node_table: torch.Tensor, entity_ids: torch.Tensor, entity_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        return self.attn(node_table[entity_ids], entity_mask)

    def forward(
        self,
        entity_ids: torch.Tensor,
        entity_mask: torch.Tensor | None = None,
        *,
        node_table: torch.Tensor | None = None,
        edge_index: torch.Tensor | None = None,
        edge_type: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> dict:
        if node_table is None:
            if edge_index is None or edge_type is None:
                raise ValueError("KBRDforRec needs node_table or both edge_index and edge_type")
            node_table = self.get_node_embeds(edge_index, edge_type)
        user = self.user_embeds(node_table, entity_ids, entity_mask)
        logits = user @ node_table.T  # (bs, N + 1): all entities incl. pad, as published
        loss = F.cross_entropy(logits, labels) if labels is not None else None
        return {"loss": loss, "logits": logits, "user_embeds": user}


class KBRDforConv(BartForConditionalGeneration):
    """BART whose vocabulary logits are biased by the KBRD user vector (``rec_proj``).

    Named like the published class so that ``save_pretrained``/our saver write ``architectures: ["KBRDforConv"]``.
    ``generate(..., decoder_user_embeds=user)`` works with transformers' KV cache: the bias is added in ``forward``.
    """

    def __init__(self, config: BartConfig, user_hidden_size: int = 128):
        super().__init__(config)
        self.user_hidden_size = user_hidden_size
        self.rec_proj = nn.Linear(user_hidden_size, self.model.shared.num_embeddings)
        nn.init.normal_(self.rec_proj.weight, std=getattr(config, "init_std", 0.02))
        nn.init.zeros_(self.rec_proj.bias)

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        decoder_input_ids=None,
        decoder_attention_mask=None,
        encoder_outputs=None,
        past_key_values=None,
        inputs_embeds=None,
        decoder_inputs_embeds=None,
        labels=None,
        use_cache=None,
        decoder_user_embeds=None,
        **kwargs,
    ):
        if labels is not None:
            use_cache = False
            if decoder_input_ids is None and decoder_inputs_embeds is None:
                pad, start = self.config.pad_token_id, self.config.decoder_start_token_id
                if pad is None or start is None:
                    raise ValueError("KBRDforConv needs pad_token_id and decoder_start_token_id in its config")
                decoder_input_ids = shift_tokens_right(labels, pad, start)
        out = super().forward(
            input_ids=input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask,
            encoder_outputs=encoder_outputs,
            past_key_values=past_key_values,
            inputs_embeds=inputs_embeds,
            decoder_inputs_embeds=decoder_inputs_embeds,
            labels=None,
            use_cache=use_cache,
            **kwargs,
        )
        logits = out.logits
        if decoder_user_embeds is not None:
            logits = logits + self.rec_proj(decoder_user_embeds.to(logits.dtype)).unsqueeze(1)
            out.logits = logits
        if labels is not None:
            out.loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=-100)
        return out


def conv_config(
    *,
    vocab_size: int,
    d_model: int,
    layers: int,
    heads: int,
    ffn: int,
    max_positions: int,
    pad_id: int = 1,
    bos_id: int = 0,
    eos_id: int = 2,
) -> BartConfig:
    """bart-base's configuration with KBRD's overrides (published: 300 wide, 2+2 layers, 2 heads, ffn 300)."""
    return BartConfig(
        vocab_size=vocab_size,
        d_model=d_model,
        encoder_layers=layers,
        decoder_layers=layers,
        encoder_attention_heads=heads,
        decoder_attention_heads=heads,
        encoder_ffn_dim=ffn,
        decoder_ffn_dim=ffn,
        max_position_embeddings=max_positions,
        dropout=0.1,
        attention_dropout=0.1,
        activation_dropout=0.1,
        activation_function="gelu",
        scale_embedding=False,
        init_std=0.02,
        pad_token_id=pad_id,
        bos_token_id=bos_id,
        eos_token_id=eos_id,
        decoder_start_token_id=eos_id,
        forced_eos_token_id=None,
        tie_word_embeddings=True,
        architectures=["KBRDforConv"],
    )
