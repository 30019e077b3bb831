"""UniCRS's knowledge-graph prompt encoder (``KGPrompt``), with the published parameter names.

The published ``unicrs_{rec,conv}_<ds>/model.pt`` files are state dicts of this module
(``reference/checkpoint-keys.md`` §3.5): 24 tensors, ``node_embeds`` (n_entity incl. pad, hidden/2),
``kg_encoder`` (an R-GCN with 8 bases), ``entity_proj1`` / ``token_proj1`` / ``prompt_proj1``
(Linear, ReLU, Linear as a Sequential: keys ``.0`` / ``.2``), ``entity_proj2``, ``token_proj2``,
``cross_attn`` (no bias) and ``prompt_proj2`` (hidden → n_layer · n_block · hidden).

The KG edges are non-persistent buffers, so they never enter a state dict (the published
``save`` filtered them out). Optional ``rec_prefix_*`` / ``conv_prefix_*`` parameters exist only
when the module is built with ``n_prefix_rec`` / ``n_prefix_conv`` (the published files, trained
without them, do not have them; :func:`prefix_sizes` reads them off a file).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import RGCNConv


class RGCN(RGCNConv):
    """PyG's ``RGCNConv`` (same parameters ``weight``/``comp``/``root``/``bias``, same mean-aggregation math) with a
    faster CPU forward: one ``index_add`` over all relations instead of a scatter-mean per relation.

    ``out_i = x_i·root + bias + Σ_r mean_{j→i of type r} x_j · W_r``, ``W_r = Σ_b comp[r, b] · weight[b]``.
    A test checks it against ``RGCNConv.forward``.
    """

    def forward(self, x, edge_index, edge_type=None):
        if not (
            isinstance(x, torch.Tensor)
            and x.is_floating_point()
            and isinstance(edge_index, torch.Tensor)
            and self.num_blocks is None
            and edge_type is not None
        ):
            return super().forward(x, edge_index, edge_type)
        n, r = x.shape[0], self.num_relations
        key = (edge_index.data_ptr(), edge_type.data_ptr(), edge_index.shape[1], n, x.device)
        cached = getattr(self, "_index", None)
        if cached is None or cached[0] != key:
            with torch.inference_mode(False), torch.no_grad():  # plain tensors, usable later under autograd
                src, dst = edge_index[0].clone(), edge_index[1]
                slot = edge_type * n + dst  # row of (relation, target) in a (r·n, in) table
                count = torch.zeros(r * n, device=x.device).index_add_(0, slot, torch.ones(slot.shape, device=x.device))
                cached = (key, src, slot, (1.0 / count[slot]).unsqueeze(1))
            self._index = cached
        _, src, slot, scale = cached
        weight = self.weight
        if self.num_bases is not None:
            weight = (self.comp @ weight.view(self.num_bases, -1)).view(r, self.in_channels_l, self.out_channels)
        agg = torch.zeros(r * n, x.shape[1], dtype=x.dtype, device=x.device).index_add(0, slot, x[src] * scale)
        out = torch.bmm(agg.view(r, n, -1), weight).sum(0)
        if self.root is not None:
            out = out + x @ self.root
        if self.bias is not None:
            out = out + self.bias
        return out


class KGTokenParts(nn.Module):
    """UniCRS's knowledge and text parts of a prompt encoder, under the published names: entity rows through an
    R-GCN over the KG's edges, the entity and token projections, and the bilinear cross interaction (the published
    :class:`KGPrompt` and the small UniCRS's prompt both have them; :meth:`add_kg_and_token_parts` adds them)."""

    node_embeds: nn.Parameter
    kg_encoder: RGCN
    edge_index: torch.Tensor
    edge_type: torch.Tensor
    entity_proj1: nn.Sequential
    entity_proj2: nn.Linear
    token_proj1: nn.Sequential
    token_proj2: nn.Linear
    cross_attn: nn.Linear

    def add_kg_and_token_parts(
        self,
        n_entity: int,
        entity_hidden: int,
        token_hidden_size: int,
        hidden_size: int,
        num_relations: int,
        num_bases: int,
        edge_index: torch.Tensor,
        edge_type: torch.Tensor,
    ) -> None:
        self.node_embeds = nn.Parameter(torch.empty(n_entity, entity_hidden))
        bound = math.sqrt(6.0 / (n_entity + entity_hidden))
        nn.init.uniform_(self.node_embeds, -bound, bound)
        self.kg_encoder = RGCN(entity_hidden, entity_hidden, num_relations=max(1, num_relations), num_bases=num_bases)
        self.register_buffer("edge_index", edge_index.long(), persistent=False)
        self.register_buffer("edge_type", edge_type.long(), persistent=False)
        self.entity_proj1 = mlp(entity_hidden, entity_hidden // 2, entity_hidden)
        self.entity_proj2 = nn.Linear(entity_hidden, hidden_size)
        self.token_proj1 = mlp(token_hidden_size, token_hidden_size // 2, token_hidden_size)
        self.token_proj2 = nn.Linear(token_hidden_size, hidden_size)
        self.cross_attn = nn.Linear(hidden_size, hidden_size, bias=False)


def mlp(width: int, inner: int, out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(width, inner), nn.ReLU(), nn.Linear(inner, out))


class KGPrompt(KGTokenParts):
    """Entity + context-token prompt → per-layer key/value prefixes for GPT-2."""

    def __init__(
        self,
        hidden_size: int,
        token_hidden_size: int,
        n_head: int,
        n_layer: int,
        n_block: int,
        n_entity: int,
        num_relations: int,
        num_bases: int,
        edge_index: torch.Tensor,
        edge_type: torch.Tensor,
        n_prefix_rec: int | None = None,
        n_prefix_conv: int | None = None,
    ):
        super().__init__()
        if hidden_size % n_head:
            raise ValueError(f"hidden size {hidden_size} is not a multiple of {n_head} heads")
        self.hidden_size = hidden_size
        self.n_head = n_head
        self.head_dim = hidden_size // n_head
        self.n_layer = n_layer
        self.n_block = n_block
        self.n_prefix_rec = n_prefix_rec
        self.n_prefix_conv = n_prefix_conv
        entity_hidden = hidden_size // 2

        self.add_kg_and_token_parts(
            n_entity,
            entity_hidden,
            token_hidden_size,
            hidden_size,
            num_relations,
            num_bases,
            edge_index,
            edge_type,
        )
        self.prompt_proj1 = mlp(hidden_size, hidden_size // 2, hidden_size)
        self.prompt_proj2 = nn.Linear(hidden_size, n_layer * n_block * hidden_size)

        if n_prefix_rec:
            self.rec_prefix_embeds = nn.Parameter(torch.randn(n_prefix_rec, hidden_size))
            self.rec_prefix_proj = mlp(hidden_size, hidden_size // 2, hidden_size)
        if n_prefix_conv:
            self.conv_prefix_embeds = nn.Parameter(torch.randn(n_prefix_conv, hidden_size))
            self.conv_prefix_proj = mlp(hidden_size, hidden_size // 2, hidden_size)

    def get_entity_embeds(self) -> torch.Tensor:
        """The entity table (n_entity, hidden): e = RGCN(node) + node; e = proj1(e) + e; e = proj2(e)."""
        nodes = self.node_embeds
        e = self.kg_encoder(nodes, self.edge_index, self.edge_type) + nodes
        e = self.entity_proj1(e) + e
        return self.entity_proj2(e)

    def forward(
        self,
        entity_ids: torch.Tensor | None = None,
        token_embeds: torch.Tensor | None = None,
        *,
        output_entity: bool = False,
        use_rec_prefix: bool = False,
        use_conv_prefix: bool = False,
        entity_table: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Prefixes of shape (n_layer, n_block, batch, n_head, prompt_len, head_dim).

        ``output_entity=True`` (recommendation): the prompt has one position per entity, each a
        softmax-over-token-positions mix of the (projected) context tokens plus the entity.
        ``output_entity=False`` (conversation): one position per context token, a softmax-over-
        entities mix of the entities plus the token. Attention scores are divided by the hidden size
        and no mask is applied (pads take part), as published. ``entity_table`` reuses a table
        already computed by :meth:`get_entity_embeds`.
        """
        entity_embeds = tokens = None
        if entity_ids is not None:
            table = self.get_entity_embeds() if entity_table is None else entity_table
            entity_embeds = table[entity_ids]  # (bs, n_ent, hidden)
        if token_embeds is not None:
            t = self.token_proj1(token_embeds) + token_embeds
            tokens = self.token_proj2(t)  # (bs, n_tok, hidden)
        if entity_embeds is not None and tokens is not None:
            scores = self.cross_attn(tokens) @ entity_embeds.transpose(1, 2) / self.hidden_size  # (bs, n_tok, n_ent)
            if output_entity:
                weights = F.softmax(scores, dim=1).transpose(1, 2)  # over token positions → (bs, n_ent, n_tok)
                prompt = weights @ tokens + entity_embeds
            else:
                weights = F.softmax(scores, dim=2)  # over entities → (bs, n_tok, n_ent)
                prompt = weights @ entity_embeds + tokens
        elif entity_embeds is not None:
            prompt = entity_embeds
        elif tokens is not None:
            prompt = tokens
        else:
            raise ValueError("KGPrompt needs entity ids, token embeddings or both")

        for wanted, name in ((use_rec_prefix, "rec"), (use_conv_prefix, "conv")):
            if wanted and getattr(self, f"n_prefix_{name}"):
                raw = getattr(self, f"{name}_prefix_embeds")
                prefix = getattr(self, f"{name}_prefix_proj")(raw) + raw
                prompt = torch.cat([prefix.expand(prompt.shape[0], -1, -1), prompt], dim=1)

        prompt = self.prompt_proj1(prompt) + prompt
        prompt = self.prompt_proj2(prompt)
        bs, length = prompt.shape[:2]
        prompt = prompt.reshape(bs, length, self.n_layer, self.n_block, self.n_head, self.head_dim)
        return prompt.permute(2, 3, 0, 4, 1, 5)


def prefix_sizes(state: dict[str, torch.Tensor]) -> tuple[int | None, int | None]:
    """``(n_prefix_rec, n_prefix_conv)`` present in a KGPrompt state dict (None when absent, as published)."""
    rec = state.get("rec_prefix_embeds")
    conv = state.get("conv_prefix_embeds")
    return (int(rec.shape[0]) if rec is not None else None, int(conv.shape[0]) if conv is not None else None)
