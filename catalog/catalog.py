"""The item catalog: the bundled movies or any dataset in the iEvaLM layout."""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable
from functools import cached_property
from pathlib import Path

from catalog.items import Item, split_name
from catalog.matcher import TitleMatcher
from catalog.mentions import Mention, find_mentions
from catalog.retrieval import Retriever
from storage.jsonutil import JsonLineError, iter_json_lines

ASSETS = Path(__file__).resolve().parent.parent / "assets"
BUNDLED_MOVIES = ASSETS / "catalog" / "movies.jsonl"
MENTIONS_REMEMBERED = 4096  # texts whose mentions a catalog keeps (Mention and Item are immutable)


class Catalog:
    """Items with lookups by id, title matching, mention finding and retrieval."""

    def __init__(self, items: Iterable[Item], *, name: str, domain: str = "movies"):
        self.items: list[Item] = list(items)
        self.name = name
        self.domain = domain
        self.by_id: dict[str, Item] = {i.id: i for i in self.items}
        self._mentions: OrderedDict[str, tuple[Mention, ...]] = OrderedDict()
        self._mentions_lock = threading.Lock()
        if len(self.by_id) != len(self.items):
            raise ValueError(f"catalog {name!r} has duplicate item ids")

    def __len__(self) -> int:
        return len(self.items)

    def __contains__(self, item_id: str) -> bool:
        return item_id in self.by_id

    def get(self, item_id: str) -> Item | None:
        return self.by_id.get(item_id)

    @cached_property
    def matcher(self) -> TitleMatcher:
        return TitleMatcher(self.items)

    @cached_property
    def retriever(self) -> Retriever:
        return Retriever(self.items)

    def match(self, title: str) -> Item | None:
        return self.matcher.match(title)

    def match_name(self, name: str) -> Item | None:
        """The item a dataset name such as "Heat (1995)" denotes: the title match, unless both years are known
        and differ by more than one (then it is another film of the same title)."""
        item = self.match(name)
        _, year = split_name(name)
        if item is not None and year is not None and item.year is not None and abs(item.year - year) > 1:
            return None
        return item

    def mentions(self, text: str) -> list[Mention]:
        """The titles ``text`` mentions (:func:`catalog.mentions.find_mentions`). Remembered per text (the metrics
        and the proxy read the same replies several times over: about a millisecond each time)."""
        with self._mentions_lock:
            found = self._mentions.get(text)
            if found is not None:
                self._mentions.move_to_end(text)
                return list(found)
        found = tuple(find_mentions(text, self.matcher))
        with self._mentions_lock:
            self._mentions[text] = found
            while len(self._mentions) > MENTIONS_REMEMBERED:
                self._mentions.popitem(last=False)
        return list(found)

    def search(self, query: str, k: int = 10, *, exclude: Iterable[str] = ()) -> list[Item]:
        return self.retriever.search(query, k, exclude=exclude)

    def popular(self, k: int = 10) -> list[Item]:
        return sorted(self.items, key=lambda i: i.popularity or 10**9)[:k]


def load_bundled(path: str | os.PathLike = BUNDLED_MOVIES) -> Catalog:
    """The catalog written for this project (assets/catalog/movies.jsonl)."""
    items = []
    try:
        for n, d in iter_json_lines(path):
            try:
                items.append(
                    Item(
                        id=d["id"],
                        title=d["title"],
                        year=int(d["year"]),
                        genres=tuple(d.get("genres", ())),
                        directors=tuple(d.get("directors", ())),
                        cast=tuple(d.get("cast", ())),
                        writers=tuple(d.get("writers", ())),
                        description=d.get("description", ""),
                        popularity=d.get("popularity"),
                    )
                )
            except (KeyError, ValueError, TypeError) as e:
                raise ValueError(f"{path}:{n}: bad catalog line ({e})") from e
    except JsonLineError as e:
        raise ValueError(f"{path}:{e.line}: bad catalog line ({e.detail})") from e
    return Catalog(items, name="bundled")


def load_ievalm(directory: str | os.PathLike, *, name: str | None = None) -> Catalog:
    """A catalog from a dataset in the iEvaLM layout (``id2info.json`` + ``entity2id.json``).

    ReDial names carry the year ("Super Troopers (2001)"); OpenDialKG keeps it
    in a ``year`` field. Each item's knowledge-graph entity id is kept in
    ``extra["entity_id"]`` so neural systems' outputs map back to items.
    """
    directory = Path(directory)
    id2info = json.loads((directory / "id2info.json").read_text(encoding="utf-8"))
    entity2id = json.loads((directory / "entity2id.json").read_text(encoding="utf-8"))
    item_entity_ids = set()
    if (directory / "item_ids.json").exists():
        item_entity_ids = set(json.loads((directory / "item_ids.json").read_text(encoding="utf-8")))
    items: list[Item] = []
    for key, info in id2info.items():
        raw_name = info.get("name", "").strip()
        if not raw_name:
            continue
        title, year = split_name(raw_name)
        if year is None and str(info.get("year", "")).isdigit():
            year = int(info["year"])
        entity_id = entity2id.get(raw_name)
        items.append(
            Item(
                id=str(key),
                title=title,
                year=year,
                genres=tuple(dict.fromkeys(_genre(g) for g in info.get("genre", []) if g)),
                directors=tuple(dict.fromkeys(info.get("director", []))),
                cast=tuple(dict.fromkeys(info.get("star", []) or info.get("actor", []))),
                writers=tuple(dict.fromkeys(info.get("writer", []))),
                description=info.get("plot", "") or "",
                popularity=None,
                extra={
                    "entity_id": entity_id,
                    "entity_name": raw_name,
                    "is_item": entity_id in item_entity_ids if item_entity_ids else True,
                },
            )
        )
    return Catalog(items, name=name or directory.name)


def _genre(text: str) -> str:
    text = text.strip()
    return text[:1].upper() + text[1:] if text.islower() else text


NO_DATA = "none"  # CRS_DATA_DIR=none: no research data, as on a fresh clone with nothing beside it


def data_dir() -> Path | None:
    """Where public research data lives (``CRS_DATA_DIR``, else ``../shared/data`` if present); None when there is
    none, or when ``CRS_DATA_DIR`` is ``none`` (a machine that has the data runs as a fresh clone does)."""
    configured = os.environ.get("CRS_DATA_DIR", "").strip()
    if configured.lower() == NO_DATA:
        return None
    if configured:
        return Path(configured)
    guess = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
    return guess if guess.is_dir() else None


_loaded: dict[str, Catalog] = {}


def get_catalog(name: str = "bundled") -> Catalog:
    """A cached catalog by name: ``bundled``, or a dataset folder name under the data dir."""
    if name not in _loaded:
        if name == "bundled":
            _loaded[name] = load_bundled()
        else:
            base = data_dir()
            path = Path(name) if Path(name).is_dir() else (base / name if base else None)
            if path is None or not (path / "id2info.json").exists():
                raise FileNotFoundError(
                    f"no dataset {name!r}: expected {name}/id2info.json under CRS_DATA_DIR ({base})"
                )
            _loaded[name] = load_ievalm(path, name=name)
    return _loaded[name]
