"""Readers that turn conversation logs on disk into :class:`Conversation` records.

Formats (``read_logs`` detects which one a path holds):

* ``jsonl`` — ours: one ``Conversation.to_dict()`` per line.
* ``ievalm`` — the iEvaLM free-form chat logs (``save_<n>/chat/<model>/<dataset>/<dialog>_<turn>.json``,
  one dialogue per file): the dataset record (``dialog_id``, ``turn_id``, ``context``, ``rec``) plus
  ``simulator_dialog.context`` = the original context followed by the simulated turns, where system
  turns carry ``rec_items`` (knowledge-graph entity ids of the top-50 list), and ``persuasiveness_score``.
  A path may be one file or a folder searched recursively for ``*.json``.
* ``crsarena_dial`` — CRSArena-Dial (``crs_arena_dial_{open,closed}.json``): a JSON list of
  ``{"conversation ID", "agent": {"id"}, "user": {"id"}, "conversation": [{"participant": USER|AGENT,
  "utterance", "utterance ID"}], "metadata"}``.
* ``crsarena_eval`` — CRSArena-Eval (``crs_arena_eval*.json``): a JSON list of ``{"conv_id", "dialogue":
  [{"turn_ind", "role": USER|ASST, "utterance", "turn_level_aggregated"?}], "dial_level_aggregated"}``;
  its human labels come back beside the conversations.

Every imported conversation has ``source="import"``. Malformed input raises :class:`LogFormatError`
naming the file, the record and what was expected; well-formed records that cannot become a
conversation (no utterances) are not dropped silently but listed in :attr:`ReadResult.skipped`.

Limits (:data:`LIMITS`; a file over one is refused with a message naming the limit, the place and the
value, and nothing from it is used): a file of at most 20 MB, a JSONL line of at most 1 MB, at most 200
turns per conversation (history and judged turns together), at most 10,000 characters per turn and at most
2,000 conversations per file. The largest real logs here are far below them: CRSArena-Dial 551 KB per
file, 36 turns, 1,398 characters per turn; iEvaLM dataset records 5.7 KB per line, 35 context turns.
JSON nested too deeply to read, text that is not UTF-8, lone surrogates (``"\ud800"`` escapes) and
control characters are handled here too: the first two are refused with a message, the last two are
cleaned (U+FFFD, removed), as storage would.

Recommended items: CRS Arena and iEvaLM print the recommender's list into the system text as
``I would recommend the following items: 1: Title (Year) 2: …``; for the CRS Arena formats that block
is parsed into the turn's ``items``. Titles are mapped to catalog items when a catalog is given;
a title without a catalog item keeps the id ``title:<title as written>``.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from catalog.catalog import Catalog
from storage.jsonutil import JsonLineError, iter_json_lines, write_json_lines
from storage.records import Conversation, ItemRef, Turn
from storage.text import clean_text, clean_value

FORMATS = ("jsonl", "ievalm", "crsarena_dial", "crsarena_eval")


@dataclass(frozen=True)
class Limits:
    """What one uploaded or imported log may hold (see the module docstring for the real maxima)."""

    file_bytes: int = 20_000_000
    line_bytes: int = 1_000_000
    turns: int = 200
    turn_chars: int = 10_000
    conversations: int = 2_000


LIMITS = Limits()

_LIST_HEADER = re.compile(r"I would recommend the following items\s*:?", re.IGNORECASE)
_LIST_ENTRY = re.compile(r"(?<!\S)(\d{1,3})(?::|\s{2,}|[.)](?=\s))\s*(?=\S)")
_YEAR = re.compile(r"\((?:1[89]|20)\d{2}\)")
_UUID_TAIL = re.compile(r"_[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


class LogFormatError(ValueError):
    """Input that does not follow the format it claims (or was detected) to have."""

    def __init__(self, path: str | os.PathLike, where: str, expected: str):
        self.path = str(path)
        self.where = where
        self.expected = expected
        super().__init__(f"{path}: {where}: expected {expected}")


@dataclass(frozen=True)
class Skipped:
    """A record that was read but not turned into a conversation, and why."""

    where: str
    reason: str


@dataclass
class EvalLabels:
    """Human labels of one CRSArena-Eval dialogue.

    ``dialogue``: the ``dial_level_aggregated`` aspects. ``turns``: the ``turn_level_aggregated``
    aspects keyed by the index of the system turn in ``Conversation.turns``. A label given as null
    stays None (no label), never 0.
    """

    dialogue: dict[str, float | None]
    turns: dict[int, dict[str, float | None]] = field(default_factory=dict)


@dataclass
class ReadResult:
    """What a reader produced: the conversations, the records it skipped and, for CRSArena-Eval, labels."""

    format: str
    conversations: list[Conversation] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    labels: dict[str, EvalLabels] = field(default_factory=dict)  # crsarena_eval only, by conversation id


# -- dispatcher ------------------------------------------------------------


def read_logs(path: str | os.PathLike, format: str = "auto", catalog: Catalog | None = None) -> ReadResult:
    """Read conversations from ``path`` in ``format`` (one of :data:`FORMATS`, or ``auto`` to detect it)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such file or folder: {path}")
    if format not in ("auto", *FORMATS):
        raise ValueError(f"unknown log format {format!r}; expected one of {FORMATS} or 'auto'")
    if path.is_file():
        _check_size(path)
    if format == "auto":
        format = detect_format(path)
    if format == "jsonl":
        result = read_jsonl(path)
    elif format == "ievalm":
        result = read_ievalm(path, catalog)
    elif format == "crsarena_dial":
        result = read_crsarena_dial(path, catalog)
    else:
        result = read_crsarena_eval(path, catalog)
    return checked(result, path)


def _guarded(reader):
    """A reader whose unexpected field types (a list where an object belongs, …) raise
    :class:`LogFormatError` instead of a Python error."""

    @functools.wraps(reader)
    def read(path, *args, **kwargs):
        try:
            return reader(path, *args, **kwargs)
        except (TypeError, AttributeError, KeyError, IndexError) as e:
            raise LogFormatError(
                path,
                "a record",
                f"the fields of the {reader.__name__[5:]} format with their types ({type(e).__name__})",
            ) from None
        except RecursionError:
            raise LogFormatError(path, "top level", "JSON nested at most a few hundred levels deep") from None

    return read


def checked(result: ReadResult, path: str | os.PathLike, limits: Limits = LIMITS) -> ReadResult:
    """``result`` with every text cleaned (:func:`storage.text.clean_text`), after checking the
    per-conversation limits; raises :class:`LogFormatError` naming the first conversation over one."""
    if len(result.conversations) > limits.conversations:
        raise LogFormatError(
            path,
            "file",
            f"at most {limits.conversations:,} conversations per file "
            f"(it has {len(result.conversations):,}); split it into smaller files",
        )
    for conversation in result.conversations:
        where = f"conversation {clean_text(str(conversation.id))[:80]!r}"
        turns = conversation.all_turns
        if len(turns) > limits.turns:
            raise LogFormatError(path, where, f"at most {limits.turns} turns per conversation (it has {len(turns):,})")
        for k, turn in enumerate(turns):
            if len(turn.text) > limits.turn_chars:
                raise LogFormatError(
                    path,
                    f"{where}, turn {k + 1}",
                    f"at most {limits.turn_chars:,} characters per turn (it has {len(turn.text):,})",
                )
        _clean_conversation(conversation)
    return result


def _clean_conversation(c: Conversation) -> None:
    c.id = clean_text(str(c.id))
    c.system_id = clean_text(str(c.system_id))
    c.domain = clean_text(str(c.domain))
    c.metadata = clean_value(c.metadata)
    c.targets = [ItemRef(id=clean_text(t.id), title=clean_text(t.title)) for t in c.targets]
    for turn in c.all_turns:
        turn.text = clean_text(turn.text)
        turn.items = [ItemRef(id=clean_text(i.id), title=clean_text(i.title)) for i in turn.items]
        turn.metadata = clean_value(turn.metadata)


def _check_size(path: Path, limits: Limits = LIMITS) -> None:
    size = path.stat().st_size
    if size > limits.file_bytes:
        raise LogFormatError(
            path,
            "file",
            f"at most {limits.file_bytes / 1e6:g} MB per file "
            f"(it has {size / 1e6:.1f} MB); split it into smaller files",
        )


def detect_format(path: str | os.PathLike) -> str:
    """The format of ``path``: a folder is iEvaLM, ``*.jsonl`` is ours, a JSON file is told by its keys."""
    path = Path(path)
    if path.is_dir():
        return "ievalm"
    if path.suffix == ".jsonl":
        return "jsonl"
    data = _load_json(path)
    record = data[0] if isinstance(data, list) and data else data
    if isinstance(record, dict):
        if "conversation ID" in record:
            return "crsarena_dial"
        if "conv_id" in record and "dialogue" in record:
            return "crsarena_eval"
        if "simulator_dialog" in record:
            return "ievalm"
    raise LogFormatError(
        path,
        "top level",
        "a CRSArena-Dial list ('conversation ID'), a CRSArena-Eval list ('conv_id', 'dialogue'), "
        "an iEvaLM chat log ('simulator_dialog') or our JSONL (*.jsonl)",
    )


# -- our JSONL ---------------------------------------------------------------


def read_jsonl(path: str | os.PathLike) -> ReadResult:
    """One ``Conversation.to_dict()`` per line; blank lines are allowed. ``source`` becomes ``import``."""
    path = Path(path)
    result = ReadResult("jsonl")
    _check_size(path)
    for n, data in _json_lines(path):
        if not isinstance(data, dict):
            raise LogFormatError(path, f"line {n}", "a JSON object (a conversation)")
        try:
            conversation = Conversation.from_dict({**data, "source": "import"})
            _check_types(conversation)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise LogFormatError(
                path, f"line {n}", f"a conversation with system_id and turns of role/text ({_describe(e)})"
            ) from None
        if not conversation.turns:
            result.skipped.append(Skipped(f"line {n}", "the conversation has no turns"))
            continue
        result.conversations.append(conversation)
    return result


def _json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """The values of our JSONL file's lines; a line that cannot be read is a :class:`LogFormatError`."""
    try:
        yield from iter_json_lines(path, max_line_bytes=LIMITS.line_bytes)
    except JsonLineError as e:
        if e.error is None:
            expected = f"lines of at most {LIMITS.line_bytes / 1e6:g} MB (this one is longer)"
        elif isinstance(e.error, UnicodeDecodeError):
            expected = f"UTF-8 text (byte {e.error.start + 1} of the line is not)"
        elif isinstance(e.error, json.JSONDecodeError):
            expected = f"one JSON object per line ({e.error.msg})"
        else:
            expected = "JSON nested at most a few hundred levels deep"
        raise LogFormatError(path, f"line {e.line}", expected) from None


def _check_types(c: Conversation) -> None:
    """Fields that storage writes as text must be text (an id may be a number)."""
    if not isinstance(c.id, (str, int)) or isinstance(c.id, bool):
        raise ValueError("id must be a string")
    c.id = str(c.id)
    for name in ("system_id", "domain", "status", "created_at"):
        if not isinstance(getattr(c, name), str):
            raise ValueError(f"{name} must be a string")
    if not c.system_id.strip():
        raise ValueError("system_id must not be empty")
    for turn in c.all_turns:
        if not isinstance(turn.text, str):
            raise ValueError("every turn's text must be a string")


def write_jsonl(conversations: Iterable[Conversation], path: str | os.PathLike) -> Path:
    """Write conversations in our JSONL format (the inverse of :func:`read_jsonl`)."""
    return write_json_lines(path, (conversation.to_dict() for conversation in conversations))


# -- iEvaLM chat logs --------------------------------------------------------


def read_ievalm(path: str | os.PathLike, catalog: Catalog | None, *, system_id: str | None = None) -> ReadResult:
    """iEvaLM free-form chat logs: one file, or a folder of them (searched recursively).

    The original dataset context becomes ``history``; the simulated turns become ``turns``; the
    ground-truth names in ``rec`` become ``targets``. System turns' ``rec_items`` are knowledge-graph
    entity ids, so ``catalog`` must be the dataset's catalog loaded with
    :func:`catalog.load_ievalm` (its items carry ``extra["entity_id"]``). The system id is
    ``system_id`` or, from the iEvaLM save layout ``…/chat/<model>/<dataset>/file.json``, ``<model>``
    (``unknown`` outside that layout).
    """
    path = Path(path)
    if catalog is None or not any(i.extra.get("entity_id") is not None for i in catalog.items):
        raise ValueError(
            "iEvaLM logs name items by knowledge-graph entity id: pass the dataset's catalog "
            "(catalog.load_ievalm(<data>/redial or <data>/opendialkg))"
        )
    by_entity = {i.extra["entity_id"]: i for i in catalog.items if i.extra.get("entity_id") is not None}
    by_entity_name = {i.extra.get("entity_name"): i for i in catalog.items if i.extra.get("entity_name")}
    files = sorted(path.rglob("*.json")) if path.is_dir() else [path]
    if not files:
        raise LogFormatError(path, "folder", "iEvaLM chat logs (*.json)")
    result = ReadResult("ievalm")
    for file in files:
        data = _load_json(file)
        if not isinstance(data, dict) or not isinstance(data.get("simulator_dialog"), dict):
            raise LogFormatError(file, "top level", "an iEvaLM chat log object with 'simulator_dialog'")
        context = data["simulator_dialog"].get("context")
        original = data.get("context")
        if not isinstance(context, list) or not isinstance(original, list):
            raise LogFormatError(file, "top level", "'context' and 'simulator_dialog.context' lists")
        n_history = sum(1 for text in original if text)  # iEvaLM drops empty utterances when replaying
        if n_history > len(context):
            raise LogFormatError(file, "simulator_dialog.context", f"at least the {n_history} dataset utterances")
        turns = [_ievalm_turn(file, i, entry, by_entity) for i, entry in enumerate(context)]
        if len(turns) == n_history:
            result.skipped.append(Skipped(str(file), "no simulated turns after the dataset context"))
            continue
        model, dataset = _ievalm_layout(file)
        metadata: dict[str, Any] = {"format": "ievalm", "file": str(file), "dataset": dataset}
        if "persuasiveness_score" in data:
            raw = str(data["persuasiveness_score"]).strip()
            metadata["persuasiveness_raw"] = raw
            metadata["persuasiveness"] = float(raw) if raw in ("0", "1", "2") else None
        result.conversations.append(
            Conversation(
                system_id=system_id or model,
                id=":".join(p for p in ("ievalm", model, dataset, file.stem) if p),
                domain=catalog.domain,
                source="import",
                history=turns[:n_history],
                turns=turns[n_history:],
                targets=[_ref_for_name(str(name), catalog, by_entity_name) for name in data.get("rec") or []],
                metadata=metadata,
            )
        )
    return result


def _ievalm_turn(file: Path, index: int, entry: Any, by_entity: dict) -> Turn:
    where = f"simulator_dialog.context[{index}]"
    if not isinstance(entry, dict) or entry.get("role") not in ("user", "assistant"):
        raise LogFormatError(file, where, "an object with role 'user' or 'assistant' and 'content'")
    if not isinstance(entry.get("content"), str):
        raise LogFormatError(file, where, "'content' text")
    if entry["role"] == "user":
        return Turn("user", entry["content"])
    rec_items = entry.get("rec_items") or []
    if not isinstance(rec_items, list):
        raise LogFormatError(file, where, "'rec_items' as a list of entity ids")
    items = []
    for entity_id in rec_items:
        item = by_entity.get(entity_id)
        items.append(item.ref() if item else ItemRef(id=f"entity:{entity_id}", title=""))
    metadata = {"rec_success": entry["rec_success"]} if "rec_success" in entry else {}
    return Turn("system", entry["content"], items=items, metadata=metadata)


def _ievalm_layout(file: Path) -> tuple[str, str | None]:
    """(model, dataset) from the save layout ``…/{chat,ask}/<model>/<dataset>/<file>.json``."""
    parts = file.resolve().parts
    if len(parts) >= 4 and parts[-4] in ("chat", "ask"):
        return parts[-3], parts[-2]
    return "unknown", None


def _ref_for_name(name: str, catalog: Catalog, by_entity_name: dict) -> ItemRef:
    item = by_entity_name.get(name) or catalog.match(name)
    return item.ref() if item else ItemRef(id=f"title:{name}", title=name)


# -- CRSArena-Dial ---------------------------------------------------------


def read_crsarena_dial(path: str | os.PathLike, catalog: Catalog | None = None) -> ReadResult:
    """CRSArena-Dial dialogues. System id = the agent id (e.g. ``barcor_redial``); every turn is judged."""
    path = Path(path)
    data = _load_json(path)
    if not isinstance(data, list):
        raise LogFormatError(path, "top level", "a JSON list of CRSArena-Dial dialogues")
    result = ReadResult("crsarena_dial")
    setting = next((s for s in ("open", "closed") if s in path.stem), None)
    for n, record in enumerate(data):
        where = f"record {n}"
        if not isinstance(record, dict):
            raise LogFormatError(path, where, "a dialogue object")
        conv_id = _field(path, where, record, "conversation ID", str)
        agent = _field(path, where, record, "agent", dict)
        system_id = _field(path, f"{where} ({conv_id}) agent", agent, "id", str)
        utterances = _field(path, f"{where} ({conv_id})", record, "conversation", list)
        turns = []
        for k, u in enumerate(utterances):
            uw = f"{where} ({conv_id}) conversation[{k}]"
            if not isinstance(u, dict) or u.get("participant") not in ("USER", "AGENT"):
                raise LogFormatError(path, uw, "an utterance with participant USER or AGENT")
            text = _field(path, uw, u, "utterance", str)
            turns.append(
                _arena_turn(
                    "user" if u["participant"] == "USER" else "system",
                    text,
                    catalog,
                    {"utterance_id": u.get("utterance ID")},
                )
            )
        if not turns:
            result.skipped.append(Skipped(f"{where} ({conv_id})", "the dialogue has no utterances"))
            continue
        extra = record.get("metadata") or {}
        if not isinstance(extra, dict):
            raise LogFormatError(path, f"{where} ({conv_id}) metadata", "an object")
        metadata = {
            "format": "crsarena_dial",
            "file": str(path),
            "dataset": _dataset_of(system_id),
            "user_id": _user_id(record.get("user")),
            **extra,
        }
        if setting:
            metadata["setting"] = setting
        result.conversations.append(
            Conversation(system_id=system_id, id=conv_id, source="import", turns=turns, metadata=metadata)
        )
    return result


def _user_id(user: Any) -> str | None:
    return user.get("id") if isinstance(user, dict) and isinstance(user.get("id"), (str, int)) else None


# -- CRSArena-Eval ---------------------------------------------------------


def read_crsarena_eval(path: str | os.PathLike, catalog: Catalog | None = None) -> ReadResult:
    """CRSArena-Eval dialogues with their human labels (``ReadResult.labels``).

    The system id is the conversation id without its trailing user uuid (``barcor_opendialkg``).
    Turn labels are also kept on each system turn as ``metadata["human_labels"]``.
    """
    path = Path(path)
    data = _load_json(path)
    if not isinstance(data, list):
        raise LogFormatError(path, "top level", "a JSON list of CRSArena-Eval dialogues")
    result = ReadResult("crsarena_eval")
    for n, record in enumerate(data):
        where = f"record {n}"
        if not isinstance(record, dict):
            raise LogFormatError(path, where, "a dialogue object")
        conv_id = _field(path, where, record, "conv_id", str)
        dialogue = _field(path, f"{where} ({conv_id})", record, "dialogue", list)
        dial_labels = _labels(
            path,
            f"{where} ({conv_id}) dial_level_aggregated",
            _field(path, f"{where} ({conv_id})", record, "dial_level_aggregated", dict),
        )
        turns: list[Turn] = []
        turn_labels: dict[int, dict[str, float | None]] = {}
        for k, u in enumerate(dialogue):
            uw = f"{where} ({conv_id}) dialogue[{k}]"
            if not isinstance(u, dict) or u.get("role") not in ("USER", "ASST"):
                raise LogFormatError(path, uw, "a turn with role USER or ASST")
            text = _field(path, uw, u, "utterance", str)
            metadata: dict[str, Any] = {"turn_ind": u.get("turn_ind")}
            if "turn_level_aggregated" in u:
                if u["role"] != "ASST":
                    raise LogFormatError(path, uw, "turn_level_aggregated only on ASST turns")
                metadata["human_labels"] = turn_labels[len(turns)] = _labels(
                    path, f"{uw} turn_level_aggregated", u["turn_level_aggregated"]
                )
            turns.append(_arena_turn("user" if u["role"] == "USER" else "system", text, catalog, metadata))
        if not turns:
            result.skipped.append(Skipped(f"{where} ({conv_id})", "the dialogue has no turns"))
            continue
        system_id = _UUID_TAIL.sub("", conv_id)
        result.conversations.append(
            Conversation(
                system_id=system_id,
                id=conv_id,
                source="import",
                turns=turns,
                metadata={"format": "crsarena_eval", "file": str(path), "dataset": _dataset_of(system_id)},
            )
        )
        result.labels[conv_id] = EvalLabels(dialogue=dial_labels, turns=turn_labels)
    return result


# -- shared helpers -----------------------------------------------------------


def listed_titles(text: str) -> list[str]:
    """Titles of the numbered list that follows "I would recommend the following items" in ``text``.

    CRS Arena renders the list as ``1: Title (Year)`` or ``1  Title (Year)``, one entry per line or,
    in a few logs, all on one line. Entries must be numbered consecutively (so "2: 2 Guns (2013)" or
    "Journey 2: The Mysterious Island" are not split), an entry ends after its "(Year)" when it has
    one, and the list ends at the first line after the header that does not start with the next number.
    """
    match = _LIST_HEADER.search(text)
    if not match:
        return []
    titles: list[str] = []
    number: int | None = None
    for k, line in enumerate(text[match.end() :].splitlines()):
        if not line.strip():
            if titles:
                break
            continue
        starts: list[re.Match[str]] = []
        for entry in _LIST_ENTRY.finditer(line):
            n = int(entry.group(1))
            opens_line = not starts and not line[: entry.start()].strip()
            if (opens_line or starts) and (number is None or n == number + 1):
                starts.append(entry)
                number = n
        if not starts:
            if k == 0:  # the rest of the header line ("… items for your nephew")
                continue
            break
        for k, entry in enumerate(starts):
            end = starts[k + 1].start() if k + 1 < len(starts) else len(line)
            title = line[entry.end() : end].strip()
            year = _YEAR.search(title)
            title = title[: year.end()] if year else title
            if title:
                titles.append(title)
    return titles


def _arena_turn(role: str, text: str, catalog: Catalog | None, metadata: dict[str, Any]) -> Turn:
    if role == "user":
        return Turn("user", text, metadata=metadata)
    items: list[ItemRef] = []
    for title in listed_titles(text):
        item = catalog.match(title) if catalog is not None else None
        ref = item.ref() if item else ItemRef(id=f"title:{title}", title=title)
        if ref not in items:
            items.append(ref)
    return Turn("system", text, items=items, metadata=metadata)


def _dataset_of(system_id: str) -> str | None:
    return next((d for d in ("redial", "opendialkg") if system_id.endswith(d)), None)


def _labels(path: Path, where: str, raw: Any) -> dict[str, float | None]:
    if not isinstance(raw, dict) or not all(
        v is None or isinstance(v, (int, float)) and not isinstance(v, bool) for v in raw.values()
    ):
        raise LogFormatError(path, where, "an object of numeric labels (or null)")
    return {str(k): None if v is None else float(v) for k, v in raw.items()}


def _field(path: Path, where: str, record: dict, key: str, kind: type) -> Any:
    value = record.get(key)
    if not isinstance(value, kind):
        raise LogFormatError(path, where, f"'{key}' of type {kind.__name__}")
    return value


def _load_json(path: Path) -> Any:
    _check_size(path)
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise LogFormatError(path, f"line {e.lineno} column {e.colno}", f"valid JSON ({e.msg})") from None
    except UnicodeDecodeError as e:
        raise LogFormatError(path, f"byte {e.start + 1}", "UTF-8 text") from None
    except RecursionError:
        raise LogFormatError(path, "top level", "JSON nested at most a few hundred levels deep") from None


def _describe(error: Exception) -> str:
    return f"missing field {error}" if isinstance(error, KeyError) else str(error)


read_jsonl = _guarded(read_jsonl)
read_ievalm = _guarded(read_ievalm)
read_crsarena_dial = _guarded(read_crsarena_dial)
read_crsarena_eval = _guarded(read_crsarena_eval)
