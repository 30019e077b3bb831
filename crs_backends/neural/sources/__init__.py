"""Where the checkpoints of KBRD, BARCOR and UniCRS come from: this module only resolves what is on disk.

A checkpoint set for ``(system, dataset)`` is looked for, in this order:

1. ``CRS_MODELS_DIR``: a local directory in the published layout
   (``<dir>/<system>_{rec,conv}_<dataset>/``, see :mod:`crs_backends.neural.checkpoints`);
2. the public CRS Arena archive (``CRS_MODELS_URL``, default :data:`DEFAULT_URL`), once fetched
   into ``<cache>/models/crs_arena/`` by ``python -m crs_backends.neural.sources fetch``;
3. a Hugging Face Hub repository (``CRS_MODELS_HUB_REPO``), once fetched with ``fetch --hub REPO`` into
   ``<cache>/models/hub/`` (or already in the huggingface_hub cache);
4. the small local versions the project trains on its bundled catalog (shipped in ``assets/models/small-v<N>/``
   or built into ``<cache>/models/small-v<N>/`` by :mod:`crs_backends.neural.small`; a caller that may build
   passes the builder to :func:`resolve`).

``<cache>`` is ``CRS_ARENA_CACHE`` (default ``~/.cache/crs-arena``). Nothing is downloaded while resolving:
downloads happen only in :mod:`crs_backends.neural.fetch` (``fetch_archive``, ``fetch_hub``, the ``fetch`` command).
``python -m crs_backends.neural.sources`` runs that command line from this package's ``__main__`` module, which
nothing imports: the command line sits above this package, never inside it. The archive is downloaded and extracted
by :mod:`crs_backends.download`: a progress bar, a partial ``.part`` file resumed with an HTTP Range request
(restarted cleanly when the server ignores Range or the file changed), the size checked and, when
``CRS_MODELS_SHA256`` (or ``--sha256``) is given, the SHA-256; the archive is extracted safely (no absolute paths,
no ``..``, no links, no devices) into a temporary folder and moved into the cache in one rename, so a corrupt
archive leaves nothing half-extracted.

The published checkpoints need the iEvaLM knowledge graph of their dataset:
``<set>/kg_<dataset>/`` if the set carries one, else ``CRS_DATA_DIR/<dataset>/``
(:func:`catalog.catalog.data_dir`), else the copy ``fetch`` downloads into ``<cache>/datasets/<dataset>/``
(:mod:`crs_backends.neural.datasets`). A set found without them raises :class:`DatasetFilesMissing`,
whose message names ``fetch --datasets <dataset>``. The small versions carry theirs in ``<root>/kg_<dataset>/``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from crs_backends.neural.checkpoints import part_dir
from crs_backends.neural.datasets import find_dataset_dir, missing_message
from crs_backends.neural.kg_reader import KG_FILES
from crs_backends.neural.names import (
    FETCH_COMMAND,
    LABELS,
    PART_DIR,
    PARTS,
    SMALL_COMMAND,
    SMALL_IDS,
    SMALL_LABELS,
    SourceError,
    check_system,
    models_dir,
    read_manifest_quietly,
    small_models_root,
)
from storage.jsonutil import read_json_object

log = logging.getLogger(__name__)

DEFAULT_URL = "https://gustav1.ux.uis.no/crs_arena/models.tar.gz"
DEFAULT_DATASET = "redial"
ORIGINS = ("local dir", "archive", "hub", "small local")
FETCHED_INFO = ".fetched.json"  # written beside a fetched set: where it came from

Progress = Callable[[str, int, int], None]  # (phase, done, total), as engine.ProgressFn


class DatasetFilesMissing(SourceError):
    """Published checkpoints were found, but not the dataset files (KG, item metadata) they need.

    Not a reason to fall back to the small local versions silently: the message names the fetch command."""

    def __init__(self, message: str, dataset: str = ""):
        super().__init__(message)
        self.dataset = dataset


@dataclass(frozen=True)
class CheckpointSource:
    """A resolved checkpoint set for one system: where it is and what it is."""

    system: str
    root: Path  # holds <system>_{rec,conv}_<dataset>/
    dataset: str
    kg_dir: Path  # the iEvaLM KG the checkpoints were trained on
    origin: str  # one of ORIGINS
    version: str  # e.g. "v1", "CRS Arena archive", a manifest's version

    @property
    def small(self) -> bool:
        return self.origin == "small local"

    @property
    def system_id(self) -> str:
        """The id what runs answers and is rated under: the system's (``kbrd``), or its small version's own
        (``kbrd_small``), never the published model's."""
        return SMALL_IDS[self.system] if self.small else self.system

    @property
    def label(self) -> str:
        """The name people see: ``KBRD``, or ``KBRD (small)`` for a small local version."""
        return SMALL_LABELS[self.system] if self.small else LABELS[self.system]

    @property
    def variant(self) -> str:
        """What runs, for people: the text shown beside the system's name."""
        if self.small:
            trained = "on ReDial" if self.dataset == "redial" else f"for the {self.dataset} catalog"
            return f"small local version (trained here {trained}, {self.version})"
        where = {"local dir": "local directory", "archive": "CRS Arena archive", "hub": "Hugging Face Hub"}[self.origin]
        details = [self.dataset, where]
        if self.version and self.version != where:
            details.append(self.version)
        manifest = read_manifest_quietly(self.root)
        if manifest.get("size"):  # written by our trainer; the published sets carry no manifest
            return f"locally trained checkpoint ({manifest['size']} size, {', '.join(details)})"
        return f"published checkpoint ({', '.join(details)})"


# ---------------------------------------------------------------------------------------------
# configuration


def archive_dir() -> Path:
    """Where the checkpoint set of the fetched CRS Arena archive lives."""
    return models_dir() / "crs_arena"


def hub_dir(repo: str) -> Path:
    return models_dir() / "hub" / repo.replace("/", "__")


def models_url() -> str:
    return os.environ.get("CRS_MODELS_URL") or DEFAULT_URL


def models_sha256() -> str | None:
    value = (os.environ.get("CRS_MODELS_SHA256") or "").strip().lower()
    return value or None


def hub_repo() -> str | None:
    return (os.environ.get("CRS_MODELS_HUB_REPO") or "").strip() or None


def published_dataset() -> str:
    return (os.environ.get("CRS_MODELS_DATASET") or DEFAULT_DATASET).strip()


# ---------------------------------------------------------------------------------------------
# resolution


def has_parts(root: Path, system: str, dataset: str) -> bool:
    """Whether ``root`` holds both parts of ``system`` for ``dataset`` (non-empty directories)."""

    def there(part: str) -> bool:
        d = part_dir(root, system, part, dataset)
        return d.is_dir() and any(d.iterdir())

    return all(there(part) for part in PARTS)


def find_set_root(tree: Path, max_depth: int = 3) -> Path | None:
    """The folder under ``tree`` (itself included) that holds the most ``<system>_<part>_<ds>`` dirs."""
    best, best_count = None, 0
    frontier = [(tree, 0)]
    while frontier:
        folder, depth = frontier.pop(0)
        try:
            children = [c for c in folder.iterdir() if c.is_dir() and not c.is_symlink()]
        except OSError:
            continue
        count = sum(1 for c in children if PART_DIR.match(c.name))
        if count > best_count:
            best, best_count = folder, count
        if depth < max_depth:
            frontier += [(c, depth + 1) for c in children if not PART_DIR.match(c.name)]
    return best


def datasets_in(root: Path, system: str) -> list[str]:
    found = []
    for d in sorted(root.glob(f"{system}_conv_*")):  # every set has a conv part (a small one may rank by text)
        m = PART_DIR.match(d.name)
        if m and m.group(1) == system and has_parts(root, system, m.group(3)):
            found.append(m.group(3))
    return found


def kg_dir_for(root: Path, dataset: str) -> Path | None:
    """The KG of ``dataset``: ``<root>/kg_<dataset>/`` if the set carries one, else ``CRS_DATA_DIR/<dataset>/``,
    else the fetched copy ``<cache>/datasets/<dataset>/``
    (see :func:`crs_backends.neural.datasets.find_dataset_dir`)."""
    return find_dataset_dir(dataset, KG_FILES, root)


def _published_candidates(dataset: str) -> list[tuple[str, Path | None, str]]:
    """(origin, root or None, why it is not there) for the configured published sources, in order."""
    out: list[tuple[str, Path | None, str]] = []
    local = os.environ.get("CRS_MODELS_DIR")
    if local:
        root = Path(local).expanduser()
        out.append(
            (
                "local dir",
                root if root.is_dir() else None,
                f"CRS_MODELS_DIR={root} is not a directory" if not root.is_dir() else "",
            )
        )
    else:
        out.append(("local dir", None, "CRS_MODELS_DIR is not set"))
    fetched = archive_dir()
    out.append(
        (
            "archive",
            fetched if fetched.is_dir() else None,
            f"the CRS Arena archive is not fetched into {fetched} (run `{FETCH_COMMAND}`)",
        )
    )
    repo = hub_repo()
    if repo:
        fetched_hub = hub_dir(repo)
        hub_root = fetched_hub if fetched_hub.is_dir() else _hub_cached_snapshot(repo)
        out.append(("hub", hub_root, f"the Hub repository {repo} is not fetched (run `{FETCH_COMMAND} --hub {repo}`)"))
    return out


def _hub_cached_snapshot(repo: str) -> Path | None:
    """A snapshot of ``repo`` already in the huggingface_hub cache (no network)."""
    try:
        from huggingface_hub import snapshot_download

        path = Path(snapshot_download(repo_id=repo, local_files_only=True))
    except Exception:
        return None
    return find_set_root(path)


def _version_of(root: Path, origin: str) -> str:
    manifest = read_manifest_quietly(root)
    if manifest.get("version"):
        return str(manifest["version"])
    info = read_json_object(root / FETCHED_INFO)
    if info.get("sha256"):
        return f"sha256 {str(info['sha256'])[:12]}"
    return {"archive": "CRS Arena archive", "hub": info.get("repo", "Hub"), "local dir": root.name}.get(origin, "")


def published_source(system: str, dataset: str | None = None) -> tuple[CheckpointSource | None, list[str]]:
    """The first published (or locally trained, published-layout) set for ``system``; else None and the reasons."""
    found, reasons, _lacking = _published_search(system, dataset)
    return found, reasons


def sets_lacking_dataset_files(system: str, dataset: str | None = None) -> list[tuple[str, Path]]:
    """(origin, set root) of the sets holding ``system``'s checkpoints for ``dataset`` but not its KG."""
    return _published_search(system, dataset)[2]


def _published_search(
    system: str, dataset: str | None
) -> tuple[CheckpointSource | None, list[str], list[tuple[str, Path]]]:
    check_system(system)
    dataset = dataset or published_dataset()
    reasons: list[str] = []
    lacking: list[tuple[str, Path]] = []
    for origin, root, why in _published_candidates(dataset):
        if root is None:
            reasons.append(why)
            continue
        set_root = root if has_parts(root, system, dataset) or origin == "archive" else find_set_root(root)
        if set_root is None or not has_parts(set_root, system, dataset):
            reasons.append(f"{origin} {root} has no {system}_rec_{dataset}/ and {system}_conv_{dataset}/")
            continue
        kg = kg_dir_for(set_root, dataset)
        if kg is None:
            lacking.append((origin, set_root))
            reasons.append(
                f"{origin} {set_root} has {system} checkpoints for {dataset}, but the iEvaLM knowledge graph "
                f"of {dataset} is missing: run `{FETCH_COMMAND} --datasets {dataset}`, or set CRS_DATA_DIR "
                f"to a folder holding {dataset}/entity2id.json, kg.json, relation2id.json, item_ids.json"
            )
            continue
        return CheckpointSource(system, set_root, dataset, kg, origin, _version_of(set_root, origin)), reasons, lacking
    return None, reasons, lacking


def small_source(system: str, root: Path | None = None) -> CheckpointSource | None:
    """The built small local version of ``system`` (in the set at ``root``, default the one that runs), or None
    when it is not built."""
    check_system(system)
    root = small_models_root() if root is None else root
    if root is None or not Path(root).is_dir():
        return None
    root = Path(root)
    manifest = read_manifest_quietly(root)
    datasets = [manifest["dataset"]] if manifest.get("dataset") else []
    datasets += [d for d in datasets_in(root, system) if d not in datasets]
    for dataset in datasets:
        if not has_parts(root, system, dataset):
            continue
        kg = root / f"kg_{dataset}"
        if not all((kg / f).exists() for f in KG_FILES):
            continue
        version = str(manifest.get("version") or "v1").removeprefix("small-")
        return CheckpointSource(system, root, dataset, kg, "small local", version)
    return None


def resolve(
    system: str,
    dataset: str | None = None,
    *,
    build: Callable[[Progress | None], object] | None = None,
    progress: Progress | None = None,
    allow_small: bool = True,
) -> CheckpointSource:
    """The checkpoint set ``system`` runs from: published first, else the small local version.

    ``build``: called with ``progress`` to build the small local versions when nothing else is there (the caller
    brings the builder, :func:`crs_backends.neural.small.ensure_small_models`: this module only resolves). Raises
    :class:`SourceError` listing what was looked for and the commands that fetch or build each source.
    """
    found, reasons, lacking = _published_search(system, dataset)
    if found is not None:
        return found
    if lacking:  # the checkpoints are there: say which command completes them rather than run something else
        dataset = dataset or published_dataset()
        raise DatasetFilesMissing(missing_message(LABELS[system], dataset, lacking), dataset)
    if allow_small:
        small = small_source(system)
        if small is None and build is not None:
            build(progress)
            small = small_source(system)
        if small is not None:
            return small
        reasons.append(f"the small local versions are not built (run `{SMALL_COMMAND}`, or `make run` builds them)")
    raise SourceError(unavailable_message(system, reasons))


def unavailable_message(system: str, reasons: list[str]) -> str:
    label = LABELS.get(system, system)
    lines = [f"No checkpoint for {label} is available."] + [f"- {r}" for r in reasons]
    lines.append(
        f"Fetch the published checkpoints with `{FETCH_COMMAND}` (the CRS Arena archive, {models_url()}), "
        f"or `{FETCH_COMMAND} --hub REPO` (a Hugging Face Hub repository), or point CRS_MODELS_DIR at a "
        f"folder in the published layout; build the small local versions with `{SMALL_COMMAND}`."
    )
    return "\n".join(lines)
