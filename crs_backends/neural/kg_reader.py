"""The knowledge graph the neural systems read, in the iEvaLM layout, and entity linking.

Files in a KG directory: ``entity2id.json`` {name: id} (ids 0..N-1, no pad entry),
``relation2id.json`` {relation: id}, ``kg.json`` {head id (str): [[relation id, tail id], ...]},
``item_ids.json`` [entity ids of recommendable items].

Facts the published loaders fix (``reference/checkpoint-keys.md`` §1–2):
- the pad entity id is ``len(entity2id)``; KBRD and BARCOR size their tables with the
  pre-pad count, UniCRS with the post-pad count (the pad row is a real, learned row);
- every unique triple is used in both directions with the *same* relation id, no
  inverse relation types and no self loops; duplicates collapse.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import torch
from rapidfuzz import fuzz, process

LINK_THRESHOLD = 90  # rapidfuzz WRatio, as the published systems link entities
LINK_LIMIT = 20
KG_FILES = ("entity2id.json", "relation2id.json", "kg.json", "item_ids.json")


class KGError(ValueError):
    """A knowledge-graph directory is missing or malformed (the message names the file)."""


@dataclass
class KGData:
    entity2id: dict[str, int]
    relation2id: dict[str, int]
    triples: dict[str, list[list[int]]]  # kg.json as read
    item_ids: list[int]
    name: str = "kg"
    _id2entity: list[str] = field(default_factory=list, repr=False)

    def __post_init__(self):
        self._id2entity = [""] * len(self.entity2id)
        for entity, i in self.entity2id.items():
            if not 0 <= i < len(self.entity2id):
                raise KGError(
                    f"{self.name}: entity2id.json ids must be 0..{len(self.entity2id) - 1}, got {i} for {entity!r}"
                )
            self._id2entity[i] = entity

    # ---- sizes ----
    @property
    def n_entities(self) -> int:
        """Entities without the pad row (KBRD, BARCOR)."""
        return len(self.entity2id)

    @property
    def n_entities_with_pad(self) -> int:
        """Entities with the pad row (UniCRS)."""
        return len(self.entity2id) + 1

    @property
    def pad_id(self) -> int:
        return len(self.entity2id)

    @property
    def n_relations(self) -> int:
        return len(self.relation2id)

    def entity_name(self, entity_id: int) -> str:
        return self._id2entity[entity_id] if 0 <= entity_id < len(self._id2entity) else "<pad>"

    def ids_of(self, names: list[str]) -> list[int]:
        """Exact-name lookup; unknown names are dropped (as the published loaders do)."""
        return [self.entity2id[n] for n in names if n in self.entity2id]

    # ---- graph ----
    @cached_property
    def edges(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(edge_index (2, E), edge_type (E,))`` with both directions of every unique triple."""
        seen: set[tuple[int, int, int]] = set()
        for head, pairs in self.triples.items():
            h = int(head)
            for relation, tail in pairs:
                seen.add((h, int(tail), int(relation)))
                seen.add((int(tail), h, int(relation)))
        # sorted for a deterministic summation order (the published order is set iteration order)
        rows = torch.tensor(sorted(seen), dtype=torch.long).reshape(-1, 3)
        return rows[:, :2].t().contiguous(), rows[:, 2].contiguous()

    # ---- linking ----
    @cached_property
    def _names(self) -> list[str]:
        return list(self.entity2id)

    def link(
        self, text: str, *, threshold: float = LINK_THRESHOLD, limit: int = LINK_LIMIT, as_sent: bool = False
    ) -> list[str]:
        """Entity names found in ``text`` by fuzzy matching (WRatio >= 90, at most 20), best first.

        :param as_sent: match the text untrimmed, as CRS Arena's ``get_entity`` does (iai-group/iEvaLM-CRS at
            b33b8b3, ``src/model/utils.py`` L138-145: ``process.extract(text, …)`` on the message as sent).
            WRatio scales its partial scores by the length ratio of the two strings, so the list reply's
            trailing ``"  \n"`` links differently; the ``crs_arena_exact`` policy uses it. Default: stripped.
        """
        text = text or ""
        if not as_sent:
            text = text.strip()
        if not text.strip():
            return []
        found = process.extract(text, self._names, scorer=fuzz.WRatio, limit=limit, score_cutoff=threshold)
        return [name for name, _score, _i in found]

    # ---- io ----
    def save(self, directory: str | os.PathLike) -> Path:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for fname, value in zip(KG_FILES, (self.entity2id, self.relation2id, self.triples, self.item_ids)):
            (directory / fname).write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")
        return directory


def load_kg(directory: str | os.PathLike) -> KGData:
    """Read a KG directory in the iEvaLM layout; a missing or malformed file raises :class:`KGError` naming it."""
    directory = Path(directory)
    values = []
    for fname in KG_FILES:
        path = directory / fname
        if not path.exists():
            raise KGError(f"knowledge graph file missing: {path}")
        try:
            values.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError) as e:
            raise KGError(f"cannot read {path}: {e}") from e
    entity2id, relation2id, triples, item_ids = values
    if not isinstance(entity2id, dict) or not isinstance(relation2id, dict) or not isinstance(triples, dict):
        raise KGError(f"{directory}: entity2id.json, relation2id.json and kg.json must hold JSON objects")
    if not isinstance(item_ids, list):
        raise KGError(f"{directory / 'item_ids.json'}: expected a JSON list of entity ids")
    return KGData(entity2id, relation2id, triples, [int(i) for i in item_ids], name=directory.name)


def kg_from_catalog(catalog) -> KGData:
    """The KG of a catalog (items first, then their genres, people and decades) — for the small local versions."""
    from catalog.kg_builder import build_kg

    built = build_kg(catalog)
    return KGData(built.entity2id, built.relation2id, built.kg, built.item_ids, name=f"{catalog.name}_kg")
