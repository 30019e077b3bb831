"""What the neural model tests share: a tiny KG, a small multilingual corpus, two conversations, and the
bundled catalog with its KG (module fixtures ``catalog`` and ``kg``)."""

from __future__ import annotations

import pytest
import torch

from catalog.catalog import Catalog, get_catalog
from crs_backends.neural.engine import ConvInput
from crs_backends.neural.kg_reader import KGData, kg_from_catalog

TITLES = [
    "The Shining (1980)",
    "Alien (1979)",
    "Heat (1995)",
    "Up (2009)",
    "Jaws (1975)",
    "Se7en (1995)",
    "Amélie (2001)",
    "Spirited Away (2001)",
]
OTHERS = ["horror", "comedy", "drama", "Tom Hanks", "Sigourney Weaver", "Steven Spielberg"]
TEXTS = [
    "Hi, what kind of movies do you like?",
    "I like horror movies like The Shining (1980).",
    "Have you seen Alien (1979)? It is a classic.",
    "I loved Heat (1995), great cast.",
    "Something funny please, maybe with Tom Hanks.",
    "You might like Up (2009), it is sweet and sad.",
    "Ich mag französische Filme wie Amélie (2001).",
    "我喜欢宫崎骏的电影，比如千与千寻。",
    "Thanks, I will watch it tonight!",
    "Jaws (1975) is scary, Steven Spielberg directed it.",
] * 3
CONVS = [
    ConvInput(
        ["", "Hi, what kind of movies do you like?", "I like horror movies like The Shining (1980)."],
        ["horror", "The Shining (1980)"],
    ),
    ConvInput(["Something funny please"]),
]


def tiny_kg(triples: dict[str, list[list[int]]]) -> KGData:
    """TITLES (the items) and OTHERS as entities, relations genre 0 and star 1, the given ``kg.json`` triples."""
    names = TITLES + OTHERS
    return KGData(
        {n: i for i, n in enumerate(names)}, {"genre": 0, "star": 1}, triples, list(range(len(TITLES))), name="tiny"
    )


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """(autouse in every module that imports it) Tiny models on a shared 2-core machine: one intra-op thread
    avoids OpenMP spin contention."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return get_catalog("bundled")


@pytest.fixture(scope="module")
def kg(catalog) -> KGData:
    return kg_from_catalog(catalog)
