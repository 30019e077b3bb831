"""Dataset records that seed simulated users, and their targets mapped to the systems' catalog.

The records are the iEvaLM evaluation files (``<data dir>/redial_eval/test_data_processed.jsonl``,
``opendialkg_eval/...``, or any folder in that layout): ``dialog_id``, ``turn_id``, ``context``
(utterances, user first, alternating), ``rec`` (the ground-truth item names). A record seeds one
case: the context becomes the conversation's history and ``rec`` the user's targets.

Targets are matched to the catalog the systems recommend from (title matcher, fuzzy score ≥ 90, and
the year must agree within one when both sides have one). A target the catalog lacks is dropped and
counted; a record left with no target is skipped and counted. :func:`select_cases` says exactly what
it skipped and why, so a report can state it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from catalog.catalog import Catalog, data_dir
from catalog.ievalm_records import Record, RecordError, iter_records
from catalog.items import Item
from storage.records import Turn

SPLITS = ("test", "valid", "train")


@dataclass(frozen=True)
class DatasetRecord:
    """A record of a named dataset (:class:`~catalog.ievalm_records.Record`, the one record class) with the
    id the simulator gives it: ``"<dataset>:<dialog_id>:<turn_id>"`` (the line number stands in for a
    missing ``dialog_id``)."""

    id: str
    record: Record
    dataset: str = ""

    @property
    def context(self) -> tuple[str, ...]:
        return tuple(self.record.context)

    @property
    def targets(self) -> tuple[str, ...]:
        """The item names as written in the data ("Super Troopers (2001)"), blank ones left out."""
        return tuple(t for t in self.record.rec if t.strip())


@dataclass(frozen=True)
class Case:
    """What one simulated user is seeded with: earlier context and catalog target items."""

    id: str
    targets: tuple[Item, ...]
    context: tuple[str, ...] = ()
    unmatched_targets: tuple[str, ...] = ()  # target names the catalog lacks (dropped)
    dataset: str = ""

    @classmethod
    def from_item(cls, item: Item) -> Case:
        """A user who wants ``item`` and has said nothing yet."""
        return cls(id=f"item:{item.id}", targets=(item,))

    def history_and_opening(self) -> tuple[list[Turn], Turn | None]:
        """The context as history turns, and the last user utterance, which opens the interaction.

        The context alternates user / system starting with the user. When it ends with a user
        utterance (every ReDial record does), that utterance is the request the system answers first,
        so it becomes the first turn of the judged interaction; otherwise the simulated user opens.
        """
        turns = [
            Turn(role="user" if i % 2 == 0 else "system", text=text, metadata={"source": "dataset"})
            for i, text in enumerate(self.context)
            if text.strip()
        ]
        if turns and turns[-1].role == "user":
            return turns[:-1], turns[-1]
        return turns, None


@dataclass
class Selection:
    """Which records became cases, and why the others did not."""

    source: str
    catalog: str
    requested: int
    scanned: int = 0
    chosen: list[str] = field(default_factory=list)
    no_targets: int = 0  # records with an empty rec list
    unmatched_records: int = 0  # records none of whose targets is in the catalog
    unmatched_targets: int = 0  # single targets dropped (catalog lacks them) from chosen records
    empty_context: int = 0  # chosen records with no context (the simulated user opens)
    available: int = 0  # usable records in the whole file

    def notes(self) -> list[str]:
        """Plain sentences for the report."""
        lines = [
            f"Records from {self.source}; targets mapped to the catalog '{self.catalog}' (fuzzy title "
            f"match ≥ 90, same year)."
        ]
        lines.append(
            f"{self.available} of {self.scanned} records have at least one target in that catalog; "
            f"{len(self.chosen)} were chosen (seeded order) of {self.requested} requested."
        )
        if self.requested > len(self.chosen):
            lines.append(f"Only {len(self.chosen)} usable records exist: fewer dialogues than requested.")
        if self.no_targets:
            lines.append(f"{self.no_targets} record(s) had no targets and were skipped.")
        if self.unmatched_records:
            lines.append(
                f"{self.unmatched_records} record(s) were skipped because none of their targets is in "
                f"the catalog '{self.catalog}'."
            )
        if self.unmatched_targets:
            lines.append(
                f"{self.unmatched_targets} target(s) of chosen records are not in the catalog and were "
                "dropped (the record kept its other targets)."
            )
        if self.empty_context:
            lines.append(f"{self.empty_context} chosen record(s) had an empty context: the simulated user opens.")
        return lines

    def to_dict(self) -> dict:
        return {
            k: getattr(self, k)
            for k in (
                "source",
                "catalog",
                "requested",
                "scanned",
                "chosen",
                "no_targets",
                "unmatched_records",
                "unmatched_targets",
                "empty_context",
                "available",
            )
        } | {"notes": self.notes()}


def records_path(dataset: str | Path, split: str = "test") -> Path:
    """The evaluation file for ``dataset``: a name (``redial`` → ``<data dir>/redial_eval/``), a folder in
    the iEvaLM layout, or a ``.jsonl`` file."""
    path = Path(dataset)
    if path.suffix == ".jsonl":
        candidates = [path]
    elif path.is_dir():
        candidates = [path / f"{split}_data_processed.jsonl"]
    else:
        base = data_dir()
        if base is None:
            raise RecordError(f"no data directory: set CRS_DATA_DIR to find the {dataset!r} records")
        name = str(dataset)
        candidates = [
            base / f"{name}_eval" / f"{split}_data_processed.jsonl",
            base / name / f"{split}_data_processed.jsonl",
        ]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise RecordError(
        f"no records for {str(dataset)!r} (split {split}): looked for " + ", ".join(str(c) for c in candidates)
    )


def read_records(path: str | Path, *, dataset: str | None = None) -> list[DatasetRecord]:
    """Every record of an iEvaLM evaluation file, read by :func:`catalog.ievalm_records.iter_records`
    (a line that is not a record is a :class:`RecordError` naming the line). ``dataset``: the name in
    the ids (default: the folder's name without ``_eval``)."""
    path = Path(path)
    name = dataset or path.parent.name.removesuffix("_eval")
    return [
        DatasetRecord(id=f"{name}:{record.dialog_id or n}:{record.turn_id}", record=record, dataset=name)
        for n, record in iter_records(path)
    ]


def to_case(record: DatasetRecord, catalog: Catalog) -> tuple[Case | None, int]:
    """The case for ``record`` (None when no target is in the catalog) and the number of dropped targets."""
    matched: dict[str, Item] = {}
    unmatched = []
    for name in record.targets:
        item = catalog.match_name(name)
        if item is None:
            unmatched.append(name)
        else:
            matched.setdefault(item.id, item)
    if not matched:
        return None, len(unmatched)
    return Case(
        id=record.id,
        targets=tuple(matched.values()),
        context=record.context,
        unmatched_targets=tuple(unmatched),
        dataset=record.dataset,
    ), len(unmatched)


def select_cases(
    records: list[DatasetRecord], catalog: Catalog, n: int, *, seed: int = 0, source: str = ""
) -> tuple[list[Case], Selection]:
    """Up to ``n`` usable records in a seeded order (the first n of a larger n are the same records)."""
    if n < 1:
        raise ValueError("the number of records must be at least 1")
    selection = Selection(source=source, catalog=catalog.name, requested=n, scanned=len(records))
    order = list(range(len(records)))
    random.Random(seed).shuffle(order)
    cases: list[Case] = []
    for index in order:
        record = records[index]
        if not record.targets:
            selection.no_targets += 1
            continue
        case, dropped = to_case(record, catalog)
        if case is None:
            selection.unmatched_records += 1
            continue
        selection.available += 1
        if len(cases) < n:
            cases.append(case)
            selection.chosen.append(case.id)
            selection.unmatched_targets += dropped
            selection.empty_context += int(not any(c.strip() for c in record.context))
    return cases, selection
