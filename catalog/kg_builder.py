"""Building a knowledge graph in the iEvaLM layout from catalog metadata.

Output files (the shapes the published KBRD/BARCOR/UniCRS code reads):
``entity2id.json`` {name: id}, ``relation2id.json`` {relation: id},
``kg.json`` {head id (str): [[relation id, tail id], ...]}, ``item_ids.json``
[entity ids of items], ``entity2type.json`` {name: movie|genre|person|decade}.
Items get the lowest ids, in catalog order; feature entities follow.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from catalog.catalog import Catalog

RELATIONS = ("genre", "star", "director", "writer", "decade")
_TYPE = {"genre": "genre", "star": "person", "director": "person", "writer": "person", "decade": "decade"}


@dataclass
class KnowledgeGraph:
    entity2id: dict[str, int]
    relation2id: dict[str, int]
    kg: dict[str, list[list[int]]]
    item_ids: list[int]
    entity2type: dict[str, str]

    @property
    def n_entities(self) -> int:
        return len(self.entity2id)

    @property
    def n_edges(self) -> int:
        return sum(len(v) for v in self.kg.values())

    def save(self, directory: str | os.PathLike) -> Path:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for fname, value in (
            ("entity2id.json", self.entity2id),
            ("relation2id.json", self.relation2id),
            ("kg.json", self.kg),
            ("item_ids.json", self.item_ids),
            ("entity2type.json", self.entity2type),
        ):
            (directory / fname).write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")
        return directory


def build_kg(catalog: Catalog, relations: tuple[str, ...] = RELATIONS) -> KnowledgeGraph:
    """Items and their metadata values as entities, metadata fields as relations."""
    relation2id = {r: i for i, r in enumerate(relations)}
    entity2id: dict[str, int] = {}
    entity2type: dict[str, str] = {}
    for item in catalog.items:
        if item.name not in entity2id:
            entity2id[item.name] = len(entity2id)
            entity2type[item.name] = "movie"
    item_ids = [entity2id[i.name] for i in catalog.items]
    kg: dict[str, list[list[int]]] = {}
    for item in catalog.items:
        head = entity2id[item.name]
        edges = kg.setdefault(str(head), [])
        for relation, values in item.features().items():
            if relation not in relation2id:
                continue
            for value in values:
                # a person may also be a title; keep the entity names distinct by type
                name = (
                    value
                    if value not in entity2type or entity2type[value] == _TYPE[relation]
                    else f"{value} [{relation}]"
                )
                if name not in entity2id:
                    entity2id[name] = len(entity2id)
                    entity2type[name] = _TYPE[relation]
                edge = [relation2id[relation], entity2id[name]]
                if edge not in edges:
                    edges.append(edge)
    return KnowledgeGraph(entity2id, relation2id, kg, sorted(set(item_ids)), entity2type)
