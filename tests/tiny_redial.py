"""A tiny research-data folder in ReDial's iEvaLM layout, written by the tests themselves, so that what trains on
ReDial (the small set's builder, ``crs-arena train``) is tested on every machine, a fresh clone with no
``../shared`` beside it included.

:func:`write_tiny_redial` writes ``<root>/redial/`` (the KG files: ``entity2id.json``, ``relation2id.json``,
``kg.json``, ``item_ids.json``) and ``<root>/redial_eval/`` (``valid_data_processed.jsonl``, the records the
trainers read, and ``test_data_processed.jsonl``). The conversations are made up from a dozen real titles, their
genres and people: each asks for a genre or names a film it liked, and the recommender answers with a film of that
genre, so that a model that trains learns something a test can see. No plot or other IMDb-derived text.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

# title | genre | person (its director, or its star)
_TABLE = """
The Shining (1980) | horror | Stanley Kubrick
Alien (1979) | horror | Ridley Scott
Jaws (1975) | horror | Steven Spielberg
Get Out (2017) | horror | Jordan Peele
Up (2009) | comedy | Pete Docter
Superbad (2007) | comedy | Jonah Hill
Groundhog Day (1993) | comedy | Bill Murray
Airplane! (1980) | comedy | Leslie Nielsen
Heat (1995) | drama | Michael Mann
Titanic (1997) | drama | James Cameron
Forrest Gump (1994) | drama | Tom Hanks
The Godfather (1972) | drama | Francis Ford Coppola
"""
FILMS = {t: (g, p) for t, g, p in (tuple(c.strip() for c in line.split("|")) for line in _TABLE.strip().splitlines())}
GENRES = ("horror", "comedy", "drama")
RELATIONS = {"genre": 0, "star": 1, "director": 2, "writer": 3}


def write_tiny_redial(root: Path, conversations: int = 60, seed: int = 0) -> Path:
    """Write the tiny ReDial folder under ``root`` (created); returns ``root`` (what ``CRS_DATA_DIR`` names)."""
    root = Path(root)
    kg_dir, eval_dir = root / "redial", root / "redial_eval"
    kg_dir.mkdir(parents=True, exist_ok=True)
    eval_dir.mkdir(parents=True, exist_ok=True)
    titles = list(FILMS)
    names = titles + list(GENRES) + sorted({person for _g, person in FILMS.values()})
    entity2id = {name: i for i, name in enumerate(names)}
    kg = {
        str(entity2id[t]): [[RELATIONS["genre"], entity2id[g]], [RELATIONS["director"], entity2id[p]]]
        for t, (g, p) in FILMS.items()
    }
    files = {
        "entity2id.json": entity2id,
        "relation2id.json": RELATIONS,
        "kg.json": kg,
        "item_ids.json": [entity2id[t] for t in titles],
    }
    for name, value in files.items():
        (kg_dir / name).write_text(json.dumps(value), encoding="utf-8")
    rng = random.Random(seed)
    valid = [r for n in range(conversations) for r in _conversation(rng, 1000 + n)]
    test = [r for n in range(max(4, conversations // 6)) for r in _conversation(rng, 20000 + n)]
    for name, records in (("valid_data_processed.jsonl", valid), ("test_data_processed.jsonl", test)):
        with open(eval_dir / name, "w", encoding="utf-8") as f:
            for record in records:
                f.write(json.dumps(record) + "\n")
    return root


def _conversation(rng: random.Random, dialog_id: int) -> list[dict]:
    """Two recommender turns: a genre asked for (or a film liked), a film of that genre; then another of it."""
    genre = rng.choice(GENRES)
    of_genre = [t for t, (g, _p) in FILMS.items() if g == genre]
    liked, first, second = rng.sample(of_genre, 3)
    if rng.random() < 0.5:
        opening, entities = f"Hi! I'd like a {genre} movie tonight.", [genre]
    else:
        opening, entities = f"Hello, I loved {liked}. Anything like it?", [liked, genre]
    reply1 = f"You should watch {first}"
    context = [opening]
    records = [_record(dialog_id, 1, context, entities, first, reply1)]
    context = [*context, reply1, "Seen it already. Another one?"]
    records.append(_record(dialog_id, 3, context, [*entities, first], second, f"Then try {second}, a great {genre}."))
    return records


def _record(dialog_id: int, turn: int, context: list[str], entities: list[str], rec: str, resp: str) -> dict:
    return {
        "dialog_id": str(dialog_id),
        "turn_id": turn,
        "context": list(context),
        "entity": list(entities),
        "rec": [rec],
        "resp": resp,
        "template": [*context, resp.replace(rec, "<mask>")],
    }
