"""The iEvaLM processed records (``*_data_processed.jsonl``): the one :class:`Record` class, its reader and writer.

One line is one system turn of a dialogue, as iEvaLM writes them in
``<data dir>/{redial,opendialkg}_eval/{train,valid,test}_data_processed.jsonl``: ``context`` (the
utterances before it, user first and alternating; '' where the system spoke first), ``entity`` (the
knowledge-graph entity names linked in that context), ``rec`` (the item names recommended at this turn:
the targets), ``resp`` (the reply), ``dialog_id`` and ``turn_id``. The small local versions' synthetic
training data is written in the same layout (:func:`write_records`).

Readers: the neural systems train and are evaluated on these records (:mod:`crs_backends.neural`,
:mod:`crs_backends.neural.train_command`), the simulator seeds its users with them (:mod:`evaluators.simulator.records`)
and the item-popularity metric counts the items they mention (:mod:`evaluators.metrics`). The module
lives in ``catalog``, the lowest package that knows the iEvaLM dataset layout, so that all of them import
it downward. A line that is not a record is a :class:`RecordError` naming the file and the line, the same
for every reader.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from storage.jsonutil import JsonLineError, iter_json_lines, write_json_lines


class RecordError(ValueError):
    """The records cannot be read (missing file, bad line): the message names the place."""


@dataclass
class ConvInput:
    """``conv_dict`` of the published code, what a model reads: context (user first, alternating; '' if the
    system spoke first) and entities.

    ``served``: the model reads its input as CRS Arena's serving stack handed it over (the ``crs_arena_exact``
    policy, :mod:`crs_backends.neural.policy`): KBRD's and BARCOR's encoder input right-padded to its full length,
    UniCRS's reply input left-padded with GPT-2 positions counted from 0 across the padding."""

    context: list[str]
    entities: list[str] = field(default_factory=list)
    served: bool = False


@dataclass
class Record:
    """One training / evaluation example in the iEvaLM processed layout."""

    context: list[str]
    entity: list[str]
    rec: list[str]  # target item names ("Super Troopers (2001)")
    resp: str
    dialog_id: str = ""
    turn_id: int = 0

    def conv_input(self) -> ConvInput:
        return ConvInput(list(self.context), list(self.entity))


def record_from_json(data: Any) -> Record:
    """The record one line holds. ``context`` is required; ``entity`` and ``rec`` may be absent or null
    (empty); all three must be lists. Raises ``KeyError`` / ``ValueError`` / ``TypeError``."""
    if not isinstance(data, dict):
        raise ValueError("a JSON object is needed")
    lists = {"context": data["context"], "entity": data.get("entity") or [], "rec": data.get("rec") or []}
    for name, value in lists.items():
        if not isinstance(value, list):
            raise ValueError(f"{name} must be a list")
    return Record(
        context=[str(u) for u in lists["context"]],
        entity=[str(e) for e in lists["entity"]],
        rec=[str(r) for r in lists["rec"]],
        resp=str(data.get("resp") or ""),
        dialog_id=str(data.get("dialog_id", "")),
        turn_id=int(data.get("turn_id", 0) or 0),
    )


def iter_records(path: str | os.PathLike) -> Iterator[tuple[int, Record]]:
    """``(line number, record)`` for each record of a ``*_data_processed.jsonl`` file, one line at a time.

    Raises :class:`RecordError` ``<path>:<line>: not an iEvaLM processed record (<what is wrong>)`` at the
    first line that is not one (not JSON, not UTF-8, a missing ``context``, a field of the wrong type)."""
    try:
        for n, data in iter_json_lines(path):
            try:
                record = record_from_json(data)
            except (ValueError, KeyError, TypeError) as e:
                raise RecordError(f"{path}:{n}: not an iEvaLM processed record ({e})") from None
            yield n, record
    except JsonLineError as e:
        raise RecordError(f"{path}:{e.line}: not an iEvaLM processed record ({e.detail})") from None


def read_records(path: str | os.PathLike, *, limit: int | None = None) -> list[Record]:
    """The records of a ``*_data_processed.jsonl`` file (``redial_eval``, ``opendialkg_eval``), the first
    ``limit`` ones when given. Raises :class:`RecordError` (see :func:`iter_records`)."""
    out: list[Record] = []
    if limit is not None and limit <= 0:
        return out
    for _n, record in iter_records(path):
        out.append(record)
        if limit is not None and len(out) >= limit:
            break
    return out


def write_records(path: str | os.PathLike, records: Iterable[Record]) -> Path:
    """Write ``records`` in the processed layout, one per line (the fields in :class:`Record`'s order)."""
    return write_json_lines(path, (asdict(r) for r in records))
