"""The dataset files the published KBRD / BARCOR / UniCRS checkpoints need, and fetching them on request.

The published checkpoints were trained on iEvaLM's knowledge graph of their dataset, and CRS Arena
names their recommendations from the dataset's item metadata. Both live in the public repository
RUCAIBox/iEvaLM-CRS under ``data/<dataset>/`` (layout read in its ``src/model/{kbrd/kg_kbrd,
barcor/kg_bart,unicrs/kg_unicrs}.py``, which open ``kg.json``, ``entity2id.json``, ``item_ids.json``,
``relation2id.json``; ``id2info.json`` is what CRS Arena's ``crs_arena/utils.py`` reads for item
names). ``data/redial/`` also holds ``entity2type.json`` and ``type2id.json``; ``data/opendialkg/``
does not.

Where a dataset's files are looked for, in order (:func:`find_dataset_dir`):

1. ``<set>/kg_<dataset>/`` when the checkpoint set carries its own (the small local versions, sets
   trained on the bundled catalog): that is the KG those checkpoints were trained on;
2. ``CRS_DATA_DIR/<dataset>/`` (default ``../shared/data`` when present);
3. the fetched copy, ``<cache>/datasets/<dataset>/``, written by
   ``python -m crs_backends.neural.sources fetch`` (or ``fetch --datasets <dataset>``).

Fetching downloads each file from ``CRS_DATA_BASE_URL`` (default: the raw files of RUCAIBox/iEvaLM-CRS
at a pinned commit) through :func:`crs_backends.download.download` (resumable with HTTP Range,
size checked), checks it against the SHA-256 recorded below, and only then moves it into place with one
rename. Partial downloads stay in ``<cache>/datasets/.downloads/<dataset>/`` so the next run resumes
them; the dataset folder only ever holds verified files. Dataset and file names are checked (no
``..``, no separators) before any path or URL is built from them.

Nothing here runs while the app resolves a checkpoint set unless ``CRS_FETCH_AT_START`` asks for it
(:func:`fetch_at_start`, for a Hugging Face Space, which has no shell to run the command in).
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from crs_backends.download import DownloadError, download, sha256_of
from crs_backends.neural.kg_reader import KG_FILES
from crs_backends.neural.names import FETCH_COMMAND, SourceError, cache_dir
from storage.jsonutil import read_json_object

log = logging.getLogger(__name__)

# RUCAIBox/iEvaLM-CRS, HEAD of the public repository when it was read (2023-10-11, "Update README.md").
# Pinned so that the files, and so their SHA-256 below, cannot change under us.
IEVALM_REPO = "RUCAIBox/iEvaLM-CRS"
IEVALM_COMMIT = "162e2f442fb0799550af587dce0285a2d5ca897f"
DEFAULT_BASE_URL = f"https://raw.githubusercontent.com/{IEVALM_REPO}/{IEVALM_COMMIT}/data"

# data/<dataset>/<file> at that commit: (size in bytes, SHA-256). Computed with sha256sum from copies whose
# git blob ids equal the commit's (``git hash-object`` against ``git rev-parse <commit>:data/<dataset>/<file>``).
DATASET_FILES: dict[str, dict[str, tuple[int, str]]] = {
    "redial": {
        "entity2id.json": (638297, "d530bd465e7a0edb19257d444d9665fda8271ec4d5aff235a417cad13848c52f"),
        "relation2id.json": (51, "028b39258502a41d81e7176f7d9f77b1b342c6a9dc42b5cf214309e590522027"),
        "kg.json": (669058, "e3698d042926defb656b25873d4144d255aa914a575fcafa8af14cf434c867ff"),
        "item_ids.json": (43771, "73d1676353fff02ba6cb2cab093b2977579666a152621f1248d07791d7a3b0a6"),
        "id2info.json": (2745351, "7bdfe9a9c7f1b4d59aa9a5aeba0029071fd5a7232b61c8257212a335ffe424f7"),
        "entity2type.json": (716693, "e75311e2e1eb3b3560302268c964cb44aaf1467e6a4d186baf2267ad20ea984b"),
        "type2id.json": (37, "5803838ef2749ca801f00f0a86aa345411f3b4b2321e70fb4c357470a5349f37"),
    },
    "opendialkg": {
        "entity2id.json": (310362, "394e2e101463052c6b41f14d87b1420f936528c6f81ed50c22388c51fcda4e81"),
        "relation2id.json": (78, "0722a517e68359d28182b897282fdefd9ceced47da315ad934f8f298a41a76e1"),
        "kg.json": (519468, "7bb2ab8d4ba6906d2f1a15b26c7a74ddc9d4cc1ddeb02cfa29ec2f5977fecb4d"),
        "item_ids.json": (18682, "c7f7d151066c41a2b70d3df9b414e1d3c67ac48e978e222a90319e1dbfa7e98f"),
        "id2info.json": (1032113, "a8ce8de8c957a1d339c80ff548e13eb32a66ee639243f67bc479ce09ad1c299e"),
    },
}
# what a published set cannot run without: the KG, and the item metadata CRS Arena names items from
REQUIRED_FILES = (*KG_FILES, "id2info.json")
FETCHED_INFO = ".fetched.json"
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


# ---------------------------------------------------------------------------------------------
# names and places


def check_name(name: str, what: str = "dataset") -> str:
    """``name`` if it is a plain file or folder name (letters, digits, ``_.-``; no ``..``, no separator)."""
    if not isinstance(name, str) or not _SAFE_NAME.match(name) or ".." in name:
        raise SourceError(
            f"refusing the {what} name {name!r}: only letters, digits, '_', '.', '-' "
            "(no '..', no '/'); nothing was downloaded"
        )
    return name


def fetch_command(dataset: str) -> str:
    """The exact command that fetches the dataset files of ``dataset``."""
    return f"{FETCH_COMMAND} --datasets {dataset}"


def base_url() -> str:
    return (os.environ.get("CRS_DATA_BASE_URL") or DEFAULT_BASE_URL).strip().rstrip("/")


def datasets_dir() -> Path:
    """``<cache>/datasets``: the fetched dataset files, beside ``<cache>/models``."""
    return cache_dir() / "datasets"


def fetched_dir(dataset: str) -> Path:
    return datasets_dir() / check_name(dataset)


def known_files(dataset: str) -> dict[str, str]:
    """{file name: SHA-256} of the recorded public files of ``dataset``."""
    check_name(dataset)
    if dataset not in DATASET_FILES:
        raise SourceError(f"no recorded dataset files for {dataset!r}; known: {', '.join(DATASET_FILES)}")
    return {name: sha for name, (_size, sha) in DATASET_FILES[dataset].items()}


def _has(folder: Path, files: Iterable[str]) -> bool:
    return all((folder / f).is_file() for f in files)


def candidate_dirs(dataset: str, root: Path | None = None) -> list[tuple[str, Path]]:
    """(where, folder) to look in for ``dataset``'s files, in order (see the module's docstring)."""
    from catalog.catalog import data_dir

    out: list[tuple[str, Path]] = []
    if root is not None:
        out.append(("carried by the checkpoint set", Path(root) / f"kg_{dataset}"))
    if not _SAFE_NAME.match(dataset or "") or ".." in dataset:
        return out  # a hostile name never becomes a path outside the set
    base = data_dir()
    if base is not None:
        out.append(("CRS_DATA_DIR", Path(base) / dataset))
    out.append(("fetched copy", datasets_dir() / dataset))
    return out


def find_dataset_dir(dataset: str, files: Iterable[str] = KG_FILES, root: Path | None = None) -> Path | None:
    """The first folder holding all of ``files`` for ``dataset`` (``root``: the checkpoint set), or None."""
    files = tuple(files)
    for _where, folder in candidate_dirs(dataset, root):
        if _has(folder, files):
            return folder
    return None


def dataset_file(dataset: str, name: str, root: Path | None = None) -> Path | None:
    """One file of ``dataset`` (e.g. ``id2info.json``), from the first place that has it."""
    check_name(name, "file")
    folder = find_dataset_dir(dataset, (name,), root)
    return folder / name if folder is not None else None


def describe(dataset: str, root: Path | None = None) -> str:
    """Where ``dataset``'s files come from, for ``status``: one line."""
    for where, folder in candidate_dirs(dataset, root):
        if _has(folder, KG_FILES):
            extra = "" if _has(folder, ("id2info.json",)) else " (no id2info.json: items are named by entity)"
            if where == "fetched copy":
                info = read_json_object(folder / FETCHED_INFO)
                source = f", from {info['base_url']}" if info.get("base_url") else ""
                return f"dataset files of {dataset}: fetched copy in {folder}{source}{extra}"
            return f"dataset files of {dataset}: {where} ({folder}){extra}"
    return f"dataset files of {dataset}: missing (run `{fetch_command(dataset)}`)"


def missing_message(label: str, dataset: str, found: list[tuple[str, Path]]) -> str:
    """What a person reads when checkpoints were found without their dataset files (no exception text)."""
    where = "; ".join(f"{origin}: {root}" for origin, root in found)
    return (
        f"{label} has published checkpoints for {dataset} ({where}), but not the dataset files they need "
        f"(the iEvaLM knowledge graph and item metadata of {dataset}). Fetch them with "
        f"`{fetch_command(dataset)}`, or set CRS_DATA_DIR to a folder holding {dataset}/ with "
        f"{', '.join(REQUIRED_FILES)}."
    )


# ---------------------------------------------------------------------------------------------
# fetching


def fetch_dataset(
    dataset: str,
    *,
    url: str | None = None,
    files: Mapping[str, str | None] | None = None,
    progress: bool = True,
    retries: int = 3,
) -> Path:
    """Download the files of ``dataset`` into ``<cache>/datasets/<dataset>/``; returns that folder.

    ``url``: the base URL (default ``CRS_DATA_BASE_URL``, else the pinned iEvaLM commit); a file is
    read from ``<url>/<dataset>/<file>``. ``files``: {name: SHA-256 or None} instead of the recorded
    list (a None sum is not checked). A file already in place with the right sum is not downloaded
    again. Raises :class:`SourceError` (a refused name, an interrupted download whose partial file is
    kept for the next run, a SHA-256 mismatch whose download is deleted); a failed file never reaches
    the dataset folder, and the files placed before it stay valid.
    """
    check_name(dataset)
    wanted = dict(files) if files is not None else known_files(dataset)
    for name in wanted:
        check_name(name, "file")
    base = (url or base_url()).rstrip("/")
    target = fetched_dir(dataset)
    staging = datasets_dir() / ".downloads" / dataset
    target.mkdir(parents=True, exist_ok=True)
    for name, sha in wanted.items():
        final = target / name
        if final.is_file() and sha and sha256_of(final) == sha.lower():
            continue  # verified before; not again
        if sha is None:
            log.warning("no SHA-256 for %s/%s: its contents are not checked", dataset, name)
        staged = staging / name
        try:
            download(f"{base}/{dataset}/{name}", staged, sha256=sha, retries=retries, progress=progress)
        except DownloadError as e:
            raise SourceError(f"dataset file {dataset}/{name}: {e}") from None
        os.replace(staged, final)  # verified: into place in one rename
    (target / FETCHED_INFO).write_text(
        json.dumps({"base_url": base, "files": wanted, "fetched": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}),
        encoding="utf-8",
    )
    try:
        staging.rmdir()
        staging.parent.rmdir()
    except OSError:
        pass  # partials of another dataset still there
    return target
