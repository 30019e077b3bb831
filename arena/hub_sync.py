"""Optional publishing of the collected data to a Hugging Face dataset, as JSONL.

A Space's disk is lost on restart unless it has persistent storage, and even
then others cannot read the SQLite file. When both ``HF_TOKEN`` and
``CRS_ARENA_HUB_DATASET`` (``owner/name``) are set, :func:`start_from_env`
starts a :class:`huggingface_hub.CommitScheduler` that, every
``CRS_ARENA_HUB_EVERY`` minutes (default 10), exports the database to
``conversations.jsonl``, ``votes.jsonl``, ``judgments.jsonl`` and
``human_labels.jsonl`` (people's ratings, CRSArena-Eval's layout) in a local
folder, with ``manifest.json`` (the schema version they were written at, and each
file's rows and sha256, so a reader can tell a whole export from a torn or partial
one), and commits the files that changed to ``data/`` in that (private) dataset.
``arena/hub_restore.py`` reads them back into an empty database at start.

The live ``.db`` file is never uploaded: a copy taken while the app writes
could be torn. The export is read through ``storage.export`` and written under
``scheduler.lock``; a file is rewritten only when its content changed, so an
idle app makes no commits. Without the two variables nothing starts and one log
line says so; if the dataset cannot be reached at start, the app runs without
publishing and the log says why.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from huggingface_hub import CommitScheduler

from storage.db import open_db, schema_version
from storage.export import EXPORTS

log = logging.getLogger(__name__)

TOKEN_VAR = "HF_TOKEN"
DATASET_VAR = "CRS_ARENA_HUB_DATASET"
EVERY_VAR = "CRS_ARENA_HUB_EVERY"
DEFAULT_EVERY_MINUTES = 10.0
PATH_IN_REPO = "data"
MANIFEST = "manifest.json"
EXPORT_FORMAT = 1  # the manifest's layout; a reader refuses a format it does not know


def write_export(db_path: str | os.PathLike, folder: str | os.PathLike) -> dict[str, int]:
    """Write ``<name>.jsonl`` for each export in ``storage.export.EXPORTS`` into ``folder``.

    A file whose content would not change is left alone (its modification time
    too, so the scheduler does not commit it again). Returns the rows per file.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    db = open_db(db_path)
    counts = {}
    files = {}
    try:
        for name, rows in EXPORTS.items():
            lines = [json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n" for row in rows(db)]
            text = "".join(lines)
            _write_if_changed(folder / f"{name}.jsonl", text)
            counts[name] = len(lines)
            files[f"{name}.jsonl"] = {"rows": len(lines), "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}
        version = schema_version(db)
    finally:
        db.close()
    # written last and holding nothing that changes by itself (no time): an idle app still makes no commits
    manifest = {"format": EXPORT_FORMAT, "schema_version": version, "files": files}
    _write_if_changed(folder / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return counts


def _write_if_changed(path: Path, text: str) -> None:
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return
    partial = path.with_suffix(".tmp")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)


class ExportScheduler(CommitScheduler):
    """A scheduler that exports the database into its folder right before each commit."""

    def __init__(self, *, db_path: str | os.PathLike, **kwargs):
        self.db_path = db_path  # set first: the parent starts the first push at once
        super().__init__(**kwargs)

    def push_to_hub(self):
        with self.lock:
            write_export(self.db_path, self.folder_path)
        return super().push_to_hub()


def hub_dataset(env: Mapping[str, str] | None = None) -> str | None:
    """The dataset to publish to, or None when publishing is not configured (a log line says why)."""
    env = os.environ if env is None else env
    dataset = (env.get(DATASET_VAR) or "").strip()
    has_token = bool(env.get(TOKEN_VAR))
    if dataset and has_token:
        return dataset
    if dataset or has_token:
        given, missing = (DATASET_VAR, TOKEN_VAR) if dataset else (TOKEN_VAR, DATASET_VAR)
        log.warning("Hub sync is off: %s is set but %s is not", given, missing)
    else:
        log.info("Hub sync is off (set %s and %s to publish the data as JSONL)", TOKEN_VAR, DATASET_VAR)
    return None


def start_from_env(db_path: str | os.PathLike, env: Mapping[str, str] | None = None) -> ExportScheduler | None:
    """Start publishing ``db_path`` if the environment asks for it; returns the scheduler or None."""
    env = os.environ if env is None else env
    dataset = hub_dataset(env)
    if dataset is None:
        return None
    every = float(env.get(EVERY_VAR) or DEFAULT_EVERY_MINUTES)
    folder = Path(db_path).resolve().parent / "hub_export"
    try:
        scheduler = ExportScheduler(
            db_path=db_path,
            repo_id=dataset,
            repo_type="dataset",
            folder_path=folder,
            path_in_repo=PATH_IN_REPO,
            every=every,
            private=True,
            token=env[TOKEN_VAR],
            allow_patterns=["*.jsonl", MANIFEST],
        )
    except Exception as e:  # no network, a bad token or no permission must not stop the app
        log.error("Hub sync could not start (%s: %s); the app runs without it", type(e).__name__, e)
        return None
    log.info("Hub sync is on: exporting to the dataset %s every %g minutes", dataset, every)
    return scheduler
