"""Bringing the board back after a restart: the Hub dataset's export read into an empty database before the app serves.

A Space without persistent storage starts on an empty disk after every restart (a push, a sleep, a hardware change),
while :mod:`arena.hub_sync` has been exporting conversations, votes, judgments and people's ratings to
``data/`` of the dataset ``CRS_ARENA_HUB_DATASET``. At start, :func:`restore_from_env` reads them back when the
database holds nothing (no conversation, vote, judgment or rating) and that variable is set:

* **The local file wins.** A database that holds anything (persistent storage kept it) is never touched.
* **All or nothing.** Every file is downloaded and checked before anything is written: the manifest's rows and
  sha256 (an export torn between two commits, or cut short, does not match them), each line's fields, every vote's,
  judgment's and rating's conversation present. Any fault refuses the whole export with one log line; the app
  starts with an empty board and the Settings tab says why. Publishing stays off then
  (:attr:`RestoreReport.sync_allowed`): its first commit would replace the dataset's votes with an empty board.
* **The storage layer's writes, in one transaction**; ids keep duplicates out (a conversation, battle, vote or
  judgment already stored is left as it is), so running a restore twice adds nothing.
* **Older exports are brought forward.** The manifest names the schema version the export was written at; the row
  migrations it never met run over the restored rows (:func:`storage.migrations.replay_after`). An export from
  before manifests existed is read the same way, with every such migration run (they are harmless when not needed).

What the export never held stays lost: voters' ids, battles' sessions, who gave which rating. A conversation's
ratings come back as their mean once per rater (``restored-1``, ``restored-2``, …), so the next export writes the
same file again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from huggingface_hub import hf_hub_download
from huggingface_hub.errors import RemoteEntryNotFoundError, RepositoryNotFoundError
from sqlite_utils import Database

from arena.hub_sync import DATASET_VAR, EXPORT_FORMAT, MANIFEST, PATH_IN_REPO, TOKEN_VAR
from storage.battle_tags import BattleTag, save_battle_tags, tag_from_export
from storage.battle_votes import insert_voted_battles
from storage.conversations import insert_new_conversations
from storage.db import open_db, schema_version, write_transaction
from storage.evaluations import (
    finish_evaluation,
    mark_interrupted,
    save_debate_message,
    save_factor_score,
    start_evaluation,
)
from storage.export import EXPORTS
from storage.human_labels import APP_SCALE, CRSARENA_EVAL_SCALES, ITEMS, Rating, save_ratings
from storage.migrations import replay_after
from storage.records import Battle, Conversation, DebateMessage, Evaluation, FactorScore, Vote

log = logging.getLogger(__name__)

FILES = tuple(f"{name}.jsonl" for name in EXPORTS)
RESTORED_RATER = "restored-"  # + the rater's number within the conversation
_UNFINISHED = ("running", "interrupted")  # judgments the old app had not finished: no overall, no finish time
_FINISHED_FIELDS = ("status", "overall", "rounds_used", "consensus", "error", "metrics", "usage")


class ExportRefused(ValueError):
    """The export cannot be restored whole (a file missing, torn, malformed, or from a newer app); one line says
    why."""


@dataclass
class Export:
    """A whole export, read and checked: what :func:`restore_export` writes."""

    schema_version: int | None  # None: written before manifests existed
    conversations: list[Conversation] = field(default_factory=list)
    votes: list[tuple[Battle, Vote]] = field(default_factory=list)
    judgments: list[Evaluation] = field(default_factory=list)
    ratings: list[dict] = field(default_factory=list)  # human_labels.jsonl's records, checked
    tags: list[BattleTag] = field(default_factory=list)  # the votes' tags (kinds of request, revealed names)


@dataclass
class RestoreReport:
    """What the start did about the dataset: ``state`` is ``off`` (no dataset named), ``kept`` (the database held
    data: nothing restored), ``empty`` (the dataset holds no export yet), ``restored``, ``refused`` (the export is
    not whole) or ``unreachable`` (the dataset could not be read)."""

    state: str
    dataset: str = ""
    counts: dict[str, int] = field(default_factory=dict)
    detail: str = ""
    seconds: float = 0.0

    @property
    def sync_allowed(self) -> bool:
        """Whether publishing may start: not after a refused or unread export, whose votes the first commit of an
        empty board would replace."""
        return self.state not in ("refused", "unreachable")

    def sentence(self) -> str:
        """One Markdown sentence for the Settings tab (no secret in it: the detail was redacted)."""
        where = f"`{self.dataset}`"
        if self.state == "off":
            return (
                f"No board is restored at start: `{DATASET_VAR}` is not set (docs/space.md says how a Space keeps its "
                "board)."
            )
        if self.state == "kept":
            return f"The database held data at start, so nothing was restored from {where}: the local file wins."
        if self.state == "empty":
            return f"{where} holds no export yet: the board started empty ({self.detail})."
        if self.state == "restored":
            c = self.counts
            return (
                f"The board was restored from {where} at start in {self.seconds:.1f} s: "
                f"{c.get('conversations', 0)} conversations, {c.get('votes', 0)} votes, "
                f"{c.get('judgments', 0)} judgments, {c.get('human_labels', 0)} rated conversations."
            )
        what = "was refused" if self.state == "refused" else "could not be read"
        return (
            f"⚠️ The export in {where} {what} at start ({self.detail}). The app started with an empty board, and "
            "publishing to the dataset is paused so that its votes are not replaced by an empty board: fix or "
            "replace the export, then restart the Space."
        )


# ---------------------------------------------------------------------------
# Reading and checking an export
# ---------------------------------------------------------------------------


def read_export(folder: str | os.PathLike) -> Export:
    """Read and check the export in ``folder`` (``manifest.json`` and the four JSONL files, as
    :func:`arena.hub_sync.write_export` writes them). Raises :class:`ExportRefused` naming the first fault."""
    folder = Path(folder)
    manifest = _manifest(folder)
    texts: dict[str, str] = {}
    for name in FILES:
        path = folder / name
        if not path.is_file():
            raise ExportRefused(f"{name} is missing (a partial export)")
        raw = path.read_bytes()
        if manifest is not None:
            expected = manifest["files"][name]
            if hashlib.sha256(raw).hexdigest() != expected["sha256"]:
                raise ExportRefused(f"{name} does not match the manifest (a torn or partial export)")
        try:
            texts[name] = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ExportRefused(f"{name} is not UTF-8 text") from None
    export = Export(schema_version=None if manifest is None else manifest["schema_version"])
    conversation_ids: set[str] = set()
    for where, row in _rows("conversations.jsonl", texts["conversations.jsonl"], manifest):
        conversation = _checked(where, row, _conversation)
        conversation_ids.add(conversation.id)
        export.conversations.append(conversation)
    for where, row in _rows("votes.jsonl", texts["votes.jsonl"], manifest):
        export.votes.append(_checked(where, row, lambda r: _vote(r, conversation_ids)))
        tag = tag_from_export(row)  # none or malformed: the board's refresh reads the battle again
        if tag is not None:
            export.tags.append(tag)
    for where, row in _rows("judgments.jsonl", texts["judgments.jsonl"], manifest):
        export.judgments.append(_checked(where, row, lambda r: _judgment(r, conversation_ids)))
    for where, row in _rows("human_labels.jsonl", texts["human_labels.jsonl"], manifest):
        export.ratings.append(_checked(where, row, lambda r: _rating(r, conversation_ids)))
    return export


def _manifest(folder: Path) -> dict | None:
    path = folder / MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ExportRefused(f"{MANIFEST} is not JSON") from None
    if not isinstance(manifest, dict) or manifest.get("format") != EXPORT_FORMAT:
        raise ExportRefused(f"{MANIFEST} is not of format {EXPORT_FORMAT} (written by another version of the app?)")
    version = manifest.get("schema_version")
    files = manifest.get("files")
    if not isinstance(version, int) or not isinstance(files, dict):
        raise ExportRefused(f"{MANIFEST} lacks the schema version or the files")
    for name in FILES:
        entry = files.get(name)
        if not (
            isinstance(entry, dict) and isinstance(entry.get("rows"), int) and isinstance(entry.get("sha256"), str)
        ):
            raise ExportRefused(f"{MANIFEST} does not describe {name}")
    return manifest


def _rows(name: str, text: str, manifest: dict | None):
    """``(where, row)`` for each line of ``text``; the line count must be the manifest's."""
    lines = text.splitlines()
    if manifest is not None and len(lines) != manifest["files"][name]["rows"]:
        raise ExportRefused(f"{name} has {len(lines)} rows, the manifest says {manifest['files'][name]['rows']}")
    for number, line in enumerate(lines, start=1):
        try:
            row = json.loads(line)
        except ValueError:
            raise ExportRefused(f"{name} line {number} is not JSON") from None
        if not isinstance(row, dict):
            raise ExportRefused(f"{name} line {number} is not a JSON object")
        yield _Where(name, number), row


class _Where:
    """Which line a row came from, written out only when a fault is reported (a restore reads 300,000 rows)."""

    __slots__ = ("name", "number")

    def __init__(self, name: str, number: int):
        self.name, self.number = name, number

    def __str__(self) -> str:
        return f"{self.name} line {self.number}"


def _checked(where: _Where, row: dict, build: Callable[[dict], Any]) -> Any:
    try:
        return build(row)
    except ExportRefused as e:
        raise ExportRefused(f"{where}: {e}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        detail = f"no {e}" if isinstance(e, KeyError) else str(e)
        raise ExportRefused(f"{where}: {detail}") from None


def _text(row: dict, key: str) -> str:
    value = row[key]
    if not isinstance(value, str) or not value:
        raise ExportRefused(f"{key} is not a non-empty string")
    return value


def _conversation(row: dict) -> Conversation:
    _text(row, "id")
    _text(row, "system_id")
    _text(row, "created_at")
    for key in ("history", "turns"):
        if not isinstance(row.get(key, []), list):
            raise ExportRefused(f"{key} is not a list")
    return Conversation.from_dict(row)


def _known(row: dict, key: str, conversations: set[str], *, optional: bool = False) -> str | None:
    value = row.get(key) if optional else row[key]
    if value is None and optional:
        return None
    if value not in conversations:
        raise ExportRefused(f"{key} {value!r} is not among the exported conversations")
    return value


def _vote(row: dict, conversations: set[str]) -> tuple[Battle, Vote]:
    battle_id = _text(row, "battle_id")
    created_at = _text(row, "created_at")
    battle = Battle(
        system_a=_text(row, "system_a"),
        system_b=_text(row, "system_b"),
        conversation_a=_known(row, "conversation_a", conversations, optional=True),  # type: ignore[arg-type]
        conversation_b=_known(row, "conversation_b", conversations, optional=True),  # type: ignore[arg-type]
        id=battle_id,
        domain=row.get("domain") or "movies",
        created_at=created_at,  # the battle's own start was not exported: its vote's time stands in
    )
    return battle, Vote(
        battle_id=battle_id, choice=row["choice"], feedback=row.get("feedback") or "", created_at=created_at
    )


def _judgment(row: dict, conversations: set[str]) -> Evaluation:
    for key in ("factor_scores", "debate"):
        if not isinstance(row.get(key, []), list):
            raise ExportRefused(f"{key} is not a list")
    return Evaluation(
        id=_text(row, "id"),
        conversation_id=_known(row, "conversation_id", conversations),  # type: ignore[arg-type]
        scorer=_text(row, "scorer"),
        rubric_version=row.get("rubric_version") or "",
        config=dict(row.get("config") or {}),
        status=_text(row, "status"),
        overall=row.get("overall"),
        rounds_used=row.get("rounds_used"),
        consensus=row.get("consensus"),
        error=row.get("error"),
        created_at=_text(row, "created_at"),
        fingerprint=row.get("fingerprint") or "",
        metrics=dict(row.get("metrics") or {}),
        usage=dict(row.get("usage") or {}),
        factor_scores=[
            FactorScore(
                factor=_text(s, "factor"),
                score=s.get("score"),
                judge=_text(s, "judge"),
                rubric_version=s.get("rubric_version") or "",
                distribution=s.get("distribution"),
                rationale=s.get("rationale") or "",
                error=s.get("error"),
                metadata=dict(s.get("metadata") or {}),
            )
            for s in row.get("factor_scores") or []
        ],
        debate=[
            DebateMessage(
                round=int(m["round"]),
                role=_text(m, "role"),
                model=m.get("model") or "",
                statement=m.get("statement") or "",
                score=m.get("score"),
                error=m.get("error"),
                raw=m.get("raw") or "",
            )
            for m in row.get("debate") or []
        ],
    )


def _rating(row: dict, conversations: set[str]) -> dict:
    _known(row, "conversation_id", conversations)
    _text(row, "system")
    _text(row, "origin")
    raters = row["raters"]
    if not isinstance(raters, int) or isinstance(raters, bool) or raters < 1:
        raise ExportRefused("raters is not a positive whole number")
    labels = row["dial_level_aggregated"]
    if not isinstance(labels, dict):
        raise ExportRefused("dial_level_aggregated is not an object")
    for item in ITEMS:
        value = labels.get(item)
        if value is not None and (not isinstance(value, int | float) or isinstance(value, bool)):
            raise ExportRefused(f"dial_level_aggregated.{item} is not a number")
    return row


# ---------------------------------------------------------------------------
# Writing it
# ---------------------------------------------------------------------------


def restore_export(db: Database, export: Export) -> dict[str, int]:
    """Write ``export`` into ``db`` in one transaction (all of it or none); returns what was added per file
    (``human_labels``: rated conversations). Rows whose ids are stored already are left as they are."""
    current = schema_version(db)
    if export.schema_version is not None and export.schema_version > current:
        raise ExportRefused(
            f"the export was written at schema version {export.schema_version}, newer than this app's {current}"
        )
    # a page cache large enough for the new indexes while 100,000s of rows go in (SQLite's default, 2 MB, made the
    # unique index on turns miss its pages), given back afterwards
    previous_cache = db.execute("pragma cache_size").fetchone()[0]
    db.execute(f"pragma cache_size = {RESTORE_CACHE_KIB}")
    # read_export checked every reference between the files (a vote's, a judgment's, a rating's conversation), and a
    # turn comes with its conversation: SQLite's own foreign-key lookups, one per row, would check them again
    db.execute("pragma foreign_keys = off")
    try:
        counts = _write(db, export)
    finally:
        db.execute("pragma foreign_keys = on")
        db.execute(f"pragma cache_size = {int(previous_cache)}")
    return counts


RESTORE_CACHE_KIB = -262144  # negative: KiB (256 MB at most, used only as the restore needs it)


def _write(db: Database, export: Export) -> dict[str, int]:
    with write_transaction(db):
        counts = {
            "conversations": insert_new_conversations(db, export.conversations),
            "votes": insert_voted_battles(db, export.votes),
            "judgments": _restore_judgments(db, export.judgments),
            "human_labels": _restore_ratings(db, export.ratings),
        }
        save_battle_tags(db, export.tags, replace=False)
        replay_after(db, export.schema_version or 0)
        mark_interrupted(db)  # a judgment the old app had running was cut off by the restart
    return counts


def _restore_judgments(db: Database, judgments: list[Evaluation]) -> int:
    stored = {r[0] for r in db.execute("select id from evaluations").fetchall()}
    added = 0
    for e in judgments:  # in the export's order (oldest first): "the latest evaluation" stays the latest
        if e.id in stored:
            continue
        stored.add(e.id)
        start_evaluation(db, e)
        for score in e.factor_scores:
            save_factor_score(db, e.id, score)
        for message in e.debate:
            save_debate_message(db, e.id, message)
        if e.status not in _UNFINISHED:  # the outcome as it was stored, field by field
            finish_evaluation(db, e.id, **{name: getattr(e, name) for name in _FINISHED_FIELDS})
        added += 1
    return added


def _restore_ratings(db: Database, records: list[dict]) -> int:
    added = 0
    for record in records:
        cid, origin = record["conversation_id"], record["origin"]
        if db.execute("select 1 from human_labels where conversation_id = ? and origin = ?", [cid, origin]).fetchone():
            continue
        battle = db.execute(
            "select id, conversation_a from battles where conversation_a = ? or conversation_b = ? limit 1", [cid, cid]
        ).fetchone()
        labels = record["dial_level_aggregated"]
        values = {
            item: None if labels.get(item) is None else labels[item] * APP_SCALE / CRSARENA_EVAL_SCALES[item]
            for item in ITEMS
        }
        save_ratings(
            db,
            [
                Rating(
                    conversation_id=cid,
                    system_id=record["system"],
                    rater=f"{RESTORED_RATER}{k + 1}",
                    origin=origin,
                    values=values,
                    battle_id=battle[0] if battle else "",
                    side=("a" if battle[1] == cid else "b") if battle else "",
                )
                for k in range(record["raters"])
            ],
        )
        added += 1
    return added


def is_empty(db: Database) -> bool:
    """Whether the database holds no conversation, vote, judgment or rating (a fresh disk)."""
    return not any(
        db.execute(f"select 1 from {table} limit 1").fetchone()
        for table in ("conversations", "votes", "evaluations", "human_labels")
    )


def restore_folder(db_path: str | os.PathLike, folder: str | os.PathLike) -> dict[str, int]:
    """Read, check and restore the export in ``folder`` into the database at ``db_path`` (what
    :func:`restore_from_env` does after the download; the bench and ``crs-arena`` tooling call it directly)."""
    db = open_db(db_path)
    try:
        return restore_export(db, read_export(folder))
    finally:
        db.close()


# ---------------------------------------------------------------------------
# Downloading it, and the start
# ---------------------------------------------------------------------------


class _NothingThere(Exception):
    """The dataset, or its export, does not exist yet (a first start)."""


def download_export(dataset: str, folder: Path, *, token: str | None = None, endpoint: str | None = None) -> Path:
    """Download ``data/manifest.json`` and the four files of ``dataset`` into ``folder``; returns the folder that
    holds them (``folder/data``).

    Raises :class:`_NothingThere` when the dataset or its export does not exist, :class:`ExportRefused` when part of
    it is missing. Other failures (the Hub cannot be reached) propagate."""

    def fetch(name: str) -> bool:
        try:
            hf_hub_download(
                repo_id=dataset,
                repo_type="dataset",
                filename=f"{PATH_IN_REPO}/{name}",
                token=token,
                local_dir=folder,
                endpoint=endpoint,
            )
        except RepositoryNotFoundError:
            raise _NothingThere(f"the dataset {dataset} does not exist yet") from None
        except RemoteEntryNotFoundError:
            return False
        return True

    has_manifest = fetch(MANIFEST)
    present = [name for name in FILES if fetch(name)]
    if not has_manifest and not present:
        raise _NothingThere(f"no {PATH_IN_REPO}/ export in it")
    missing = [name for name in FILES if name not in present]
    if missing:
        raise ExportRefused(f"{', '.join(missing)} missing from {PATH_IN_REPO}/ (a partial export)")
    return folder / PATH_IN_REPO


def restore_from_env(db_path: str | os.PathLike, env: Mapping[str, str] | None = None) -> RestoreReport:
    """At start: restore the board from ``CRS_ARENA_HUB_DATASET`` (token ``HF_TOKEN`` when set) into the empty
    database at ``db_path``. Never raises: one log line and the report say what happened."""
    env = os.environ if env is None else env
    dataset = (env.get(DATASET_VAR) or "").strip()
    if not dataset:
        return RestoreReport("off")
    token = env.get(TOKEN_VAR) or None
    db = open_db(db_path)
    try:
        if not is_empty(db):
            log.info("Hub restore: the database holds data, nothing is restored from %s", dataset)
            return RestoreReport("kept", dataset)
        start = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="crs-arena-restore-") as tmp:
            try:
                export = read_export(download_export(dataset, Path(tmp), token=token))
                counts = restore_export(db, export)
            except _NothingThere as e:
                log.info("Hub restore: nothing to restore from %s (%s)", dataset, e)
                return RestoreReport("empty", dataset, detail=str(e))
            except (ExportRefused, sqlite3.IntegrityError) as e:  # nothing was written: the transaction rolled back
                detail = _redact(str(e), token)
                log.error(
                    "Hub restore refused the export in %s: %s; the app starts with an empty board", dataset, detail
                )
                return RestoreReport("refused", dataset, detail=detail)
            except Exception as e:  # no network, a bad token, the Hub down: start anyway, and say so
                detail = _redact(f"{type(e).__name__}: {e}".splitlines()[0], token)
                log.error("Hub restore could not read %s (%s); the app starts with an empty board", dataset, detail)
                return RestoreReport("unreachable", dataset, detail=detail)
        seconds = time.perf_counter() - start
    finally:
        db.close()
    log.warning(
        "Hub restore: %s conversations, %s votes, %s judgments and %s rated conversations restored from %s in %.1f s",
        counts["conversations"],
        counts["votes"],
        counts["judgments"],
        counts["human_labels"],
        dataset,
        seconds,
    )
    return RestoreReport("restored", dataset, counts=counts, seconds=seconds)


def _redact(text: str, token: str | None) -> str:
    return text.replace(token, "***") if token else text
