"""The small UniCRS's prompt encoder (:class:`SoftPrompt`): UniCRS's knowledge-enhanced prompt for one task, an R-GCN
over the knowledge graph fused with the text encoder's reading of the conversation, giving vectors of the frozen
decoder's width (see :mod:`crs_backends.neural.unicrs_smollm` for the whole model and its deviations from UniCRS).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from crs_backends.neural.unicrs_prompt import KGTokenParts, mlp
from crs_backends.neural.unicrs_smollm_settings import LEGACY_REC_SCORE, NUM_BASES, REC_SCORES


class SoftPrompt(KGTokenParts):
    """UniCRS's prompt encoder for one task (``rec`` or ``conv``), giving prompt vectors of the decoder's width.

    Parameters as UniCRS's ``KGPrompt`` names them (``node_embeds``, ``kg_encoder``, ``entity_proj1/2``,
    ``token_proj1/2``, ``cross_attn``, ``prompt_proj1/2``), plus ``task_embeds`` / ``task_proj`` (UniCRS's task
    prefix), ``out_gain`` (the output's RMS gain) and, for ``rec``, ``hidden_proj`` (the decoder's hidden state before
    it is scored against the items, where ``score`` is "standardised"; see :data:`REC_SCORES`)."""

    edge_index: torch.Tensor
    edge_type: torch.Tensor
    hidden_mean: torch.Tensor
    hidden_std: torch.Tensor

    def __init__(
        self,
        task: str,
        *,
        hidden_size: int,
        token_hidden_size: int,
        n_entity: int,
        num_relations: int,
        edge_index: torch.Tensor,
        edge_type: torch.Tensor,
        task_init: torch.Tensor,
        conv_slots: int,
        embed_scale: float,
        num_bases: int = NUM_BASES,
        layer_prefix: tuple[int, int, int] | None = None,
        score: str = LEGACY_REC_SCORE,
    ):
        super().__init__()
        if task not in ("rec", "conv"):
            raise ValueError(f"unknown task {task!r}")
        if score not in REC_SCORES:
            raise ValueError(f"unknown recommendation score {score!r}; one of {', '.join(REC_SCORES)}")
        self.task, self.score, self.hidden_size, self.conv_slots = task, score, hidden_size, conv_slots
        kg_sizes = (n_entity, hidden_size // 2, token_hidden_size, hidden_size, num_relations, num_bases)
        self.add_kg_and_token_parts(*kg_sizes, edge_index, edge_type)
        self.task_embeds = nn.Parameter(task_init.detach().clone().float())
        last = nn.Linear(hidden_size // 2, hidden_size)
        nn.init.zeros_(last.weight)  # the task vectors start as the instruction's token embeddings
        nn.init.zeros_(last.bias)
        self.task_proj = nn.Sequential(nn.Linear(hidden_size, hidden_size // 2), nn.ReLU(), last)
        self.prompt_proj1 = mlp(hidden_size, hidden_size // 2, hidden_size)
        self.prompt_proj2 = nn.Linear(hidden_size, hidden_size)
        self.out_gain = nn.Parameter(torch.full((hidden_size,), float(embed_scale)))
        if task == "rec":
            # built under either score, so that a set's modules and their seeded start do not depend on it; scored
            # "raw", nothing reads it and no gradient reaches it (AdamW leaves it as initialised)
            self.hidden_proj = nn.Linear(hidden_size, hidden_size)
            # the decoder's final hidden state, standardised per dimension before ``hidden_proj`` (SmolLM2's has a
            # few dimensions tens of times larger than the rest, nearly the same for every input): set from the
            # training contexts before the first step (unicrs_smollm_training.calibrate_hidden), saved with the module
            self.register_buffer("hidden_mean", torch.zeros(hidden_size))
            self.register_buffer("hidden_std", torch.ones(hidden_size))
        # (layers, KV heads, head width) of the decoder: each prompt position also becomes a key and a value in every
        # layer (UniCRS's prefix), through one linear map that starts small so that the prefix starts near silent
        self.layer_prefix = layer_prefix
        if layer_prefix is not None:
            if task != "rec":
                raise ValueError("the per-layer prefix is the recommendation prompt's (llama.cpp takes input vectors)")
            n_layer, n_kv, head_dim = layer_prefix
            self.layer_kv = nn.Linear(hidden_size, n_layer * 2 * n_kv * head_dim)
            nn.init.normal_(self.layer_kv.weight, std=0.02)
            nn.init.zeros_(self.layer_kv.bias)

    def query(self, hidden: torch.Tensor) -> torch.Tensor:
        """The recommendation query of the decoder's final hidden state (``rec`` only): the state itself as UniCRS
        scores (``score`` "raw"), or standardised and through ``hidden_proj`` (sets from before recipe r9)."""
        if self.score == "raw":
            return hidden
        return self.hidden_proj((hidden - self.hidden_mean) / self.hidden_std)

    def prefix_kv(self, prompt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The per-layer keys and values of the prompt vectors (batch, positions, hidden): two tensors of (layers,
        batch, KV heads, positions, head width), the keys as attention reads them (no RoPE: a past key is not
        rotated again)."""
        if self.layer_prefix is None:
            raise ValueError("this prompt has no per-layer prefix")
        n_layer, n_kv, head_dim = self.layer_prefix
        b, p = prompt.shape[:2]
        kv = self.layer_kv(prompt).view(b, p, n_layer, 2, n_kv, head_dim).permute(2, 3, 0, 4, 1, 5)
        return kv[:, 0], kv[:, 1]

    def prefix_cache(self, prompt: torch.Tensor) -> Any:
        """:meth:`prefix_kv` as the torch decoder's past: a cache whose every layer holds (batch, KV heads, positions,
        head width)."""
        from transformers import DynamicCache

        keys, values = self.prefix_kv(prompt)
        cache = DynamicCache()
        for layer in range(keys.shape[0]):
            cache.update(keys[layer], values[layer], layer)
        return cache

    def entity_table(self) -> torch.Tensor:
        """Every entity's embedding (n_entity, hidden): e = RGCN(node) + node; e = proj1(e) + e; e = proj2(e)."""
        nodes = self.node_embeds
        if self.edge_index.numel():
            e = self.kg_encoder(nodes, self.edge_index, self.edge_type) + nodes
        else:  # a KG without edges: the R-GCN's self-connection alone
            e = nodes @ self.kg_encoder.root + self.kg_encoder.bias + nodes
        e = self.entity_proj1(e) + e
        return self.entity_proj2(e)

    def forward(
        self,
        entity_ids: torch.Tensor,
        entity_mask: torch.Tensor,
        token_states: torch.Tensor,
        token_mask: torch.Tensor,
        table: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Prompt vectors (batch, n_task + positions, hidden) and their mask (1: a real position).

        ``entity_ids`` / ``entity_mask`` (batch, n_entity): the linked entities (at least one real entry per row, the
        pad entity when none is linked); ``token_states`` / ``token_mask``: the text encoder's output."""
        table = self.entity_table() if table is None else table
        entities = table[entity_ids]  # (bs, n_ent, H)
        t = self.token_proj1(token_states) + token_states
        tokens = self.token_proj2(t)  # (bs, n_tok, H)
        scores = self.cross_attn(tokens) @ entities.transpose(1, 2) / self.hidden_size  # (bs, n_tok, n_ent)
        tok_ok = token_mask.bool()
        ent_ok = entity_mask.bool()
        if self.task == "rec":  # one position per entity: the entity plus the tokens that attend to it
            weights = F.softmax(scores.masked_fill(~tok_ok[:, :, None], float("-inf")), dim=1)
            positions = weights.transpose(1, 2) @ tokens + entities
            mask = ent_ok
        else:  # one position per token: the token plus the entities it attends to, then averaged into groups
            weights = F.softmax(scores.masked_fill(~ent_ok[:, None, :], float("-inf")), dim=2)
            fused = weights @ entities + tokens
            pool = _group_weights(tok_ok, self.conv_slots)  # (bs, slots, n_tok)
            positions = pool @ fused
            mask = pool.sum(-1) > 0
        positions = self.prompt_proj1(positions) + positions
        positions = self.prompt_proj2(positions)
        positions = positions * torch.rsqrt(positions.pow(2).mean(-1, keepdim=True) + 1e-6) * self.out_gain
        task = (self.task_proj(self.task_embeds) + self.task_embeds).expand(positions.shape[0], -1, -1)
        prompt = torch.cat([task, positions], dim=1)
        full_mask = torch.cat([mask.new_ones(mask.shape[0], task.shape[1]), mask], dim=1)
        return prompt, full_mask


def _group_weights(mask: torch.Tensor, groups: int) -> torch.Tensor:
    """(bs, groups, n) averaging weights: each row's real positions split into ``groups`` contiguous runs as even as
    they go (a run with no position gets no weight: fewer positions than groups leave groups empty)."""
    bs, n = mask.shape
    counts = mask.sum(-1, keepdim=True).clamp_min(1)  # (bs, 1)
    rank = mask.long().cumsum(-1) - 1  # the real positions' order
    group = torch.div(rank * groups, counts, rounding_mode="floor")  # (bs, n)
    onehot = (group[:, None, :] == torch.arange(groups, device=mask.device)[None, :, None]) & mask.bool()[:, None, :]
    w = onehot.float()
    return w / w.sum(-1, keepdim=True).clamp_min(1.0)
