"""Where the checkpoints of KBRD, BARCOR and UniCRS come from, and fetching them on request.

A checkpoint set for ``(system, dataset)`` is looked for, in this order:

1. ``CRS_MODELS_DIR``: a local directory in the published layout
   (``<dir>/<system>_{rec,conv}_<dataset>/``, see :mod:`crs_backends.neural.checkpoints`);
2. the public CRS Arena archive (``CRS_MODELS_URL``, default :data:`DEFAULT_URL`), once fetched
   into ``<cache>/models/crs_arena/`` by ``python -m crs_backends.neural.sources fetch``;
3. a Hugging Face Hub repository (``CRS_MODELS_HUB_REPO``), once fetched with ``fetch --hub REPO`` into
   ``<cache>/models/hub/`` (or already in the huggingface_hub cache);
4. the small local versions the project trains on its bundled catalog
   (:mod:`crs_backends.neural.small`, in ``<cache>/models/small-v<N>/``), built on request.

``<cache>`` is ``CRS_ARENA_CACHE`` (default ``~/.cache/crs-arena``). Nothing is downloaded while
resolving: downloads happen only through :func:`fetch_archive` / :func:`fetch_hub` (the ``fetch``
command, :func:`main`). The archive is downloaded and extracted by :mod:`crs_backends.download`:
a progress bar, a partial ``.part`` file resumed with an HTTP Range request (restarted cleanly when
the server ignores Range or the file changed), the size checked and, when ``CRS_MODELS_SHA256`` (or
``--sha256``) is given, the SHA-256; the archive is extracted safely (no absolute paths, no ``..``, no
links, no devices) into a temporary folder and moved into the cache in one rename, so a corrupt archive
leaves nothing half-extracted.

The published checkpoints need the iEvaLM knowledge graph of their dataset:
``<set>/kg_<dataset>/`` if the set carries one, else ``CRS_DATA_DIR/<dataset>/``
(:func:`catalog.catalog.data_dir`), else the copy ``fetch`` downloads into ``<cache>/datasets/<dataset>/``
(:mod:`crs_backends.neural.datasets`). A set found without them raises :class:`DatasetFilesMissing`,
whose message names ``fetch --datasets <dataset>``. The small versions carry theirs in ``<root>/kg_<dataset>/``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from crs_backends.download import DownloadError, download, extract_tar, sha256_of
from crs_backends.neural.checkpoints import part_dir, read_manifest
from crs_backends.neural.kg_reader import KG_FILES

log = logging.getLogger(__name__)

DEFAULT_URL = "https://gustav1.ux.uis.no/crs_arena/models.tar.gz"
DEFAULT_DATASET = "redial"
SYSTEMS = ("kbrd", "barcor", "unicrs")
LABELS = {"kbrd": "KBRD", "barcor": "BARCOR", "unicrs": "UniCRS"}
PARTS = ("rec", "conv")
ORIGINS = ("local dir", "archive", "hub", "small local")
FETCH_COMMAND = "python -m crs_backends.neural.sources fetch"
SMALL_COMMAND = "python -m crs_backends.neural.small ensure"
FETCHED_INFO = ".fetched.json"  # written beside a fetched set: where it came from
_PART_DIR = re.compile(r"^(kbrd|barcor|unicrs)_(rec|conv)_([A-Za-z0-9][\w.-]*)$")

Progress = Callable[[str, int, int], None]  # (phase, done, total), as engine.ProgressFn


class SourceError(RuntimeError):
    """No usable checkpoint, or a download / archive that failed; the message says what to do."""


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
    def variant(self) -> str:
        """What runs, for people: the text shown beside the system's name."""
        if self.small:
            return f"small local version (trained here for the bundled catalog, {self.version})"
        where = {"local dir": "local directory", "archive": "CRS Arena archive", "hub": "Hugging Face Hub"}[self.origin]
        details = [self.dataset, where]
        if self.version and self.version != where:
            details.append(self.version)
        manifest = read_manifest_quietly(self.root)
        if manifest.get("size"):  # written by our trainer; the published sets carry no manifest
            return f"locally trained checkpoint ({manifest['size']} size, {', '.join(details)})"
        return f"published checkpoint ({', '.join(details)})"


def read_manifest_quietly(root: Path) -> dict:
    try:
        return read_manifest(root)
    except Exception:  # a broken manifest must not hide the checkpoints; loading reports real problems
        return {}


# ---------------------------------------------------------------------------------------------
# configuration


def cache_dir() -> Path:
    return Path(os.environ.get("CRS_ARENA_CACHE") or Path.home() / ".cache" / "crs-arena").expanduser()


def models_dir() -> Path:
    """``<cache>/models``: the fetched sets (and, in ``small-v<N>/``, the small local versions)."""
    return cache_dir() / "models"


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
    """Whether ``root`` holds both parts of ``system`` for ``dataset`` (non-empty directories); a small set's
    ``<system>_textrec_<ds>/`` (its text recommender, :mod:`crs_backends.neural.text_rec`) stands for the rec part."""

    def there(part: str) -> bool:
        d = part_dir(root, system, part, dataset)
        return d.is_dir() and any(d.iterdir())

    return all(there(part) or (part == "rec" and there("textrec")) for part in PARTS)


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
        count = sum(1 for c in children if _PART_DIR.match(c.name))
        if count > best_count:
            best, best_count = folder, count
        if depth < max_depth:
            frontier += [(c, depth + 1) for c in children if not _PART_DIR.match(c.name)]
    return best


def datasets_in(root: Path, system: str) -> list[str]:
    found = []
    for d in sorted(root.glob(f"{system}_conv_*")):  # every set has a conv part (a small one may rank by text)
        m = _PART_DIR.match(d.name)
        if m and m.group(1) == system and has_parts(root, system, m.group(3)):
            found.append(m.group(3))
    return found


def kg_dir_for(root: Path, dataset: str) -> Path | None:
    """The KG of ``dataset``: ``<root>/kg_<dataset>/`` if the set carries one, else ``CRS_DATA_DIR/<dataset>/``,
    else the fetched copy ``<cache>/datasets/<dataset>/``
    (see :func:`crs_backends.neural.datasets.find_dataset_dir`)."""
    from crs_backends.neural.datasets import find_dataset_dir

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
    info = _read_json(root / FETCHED_INFO)
    if info.get("sha256"):
        return f"sha256 {str(info['sha256'])[:12]}"
    return {"archive": "CRS Arena archive", "hub": info.get("repo", "Hub"), "local dir": root.name}.get(origin, "")


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


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
    _check_system(system)
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


def _small_module():
    try:
        from crs_backends.neural import small
    except ImportError as e:  # the builder's third-party packages are optional; a broken module of ours is not
        from crs_backends.plugins import missing_package

        if missing_package(e) is None:
            raise
        log.debug("small versions unavailable: %s", e)
        return None
    return small


def small_builder_available() -> bool:
    """Whether the small local versions can be built here (the builder module is installed)."""
    return _small_module() is not None


def small_source(system: str) -> CheckpointSource | None:
    """The built small local version of ``system``, or None when it is not built."""
    _check_system(system)
    small = _small_module()
    if small is None:
        return None
    try:
        root = small.small_models_root()
    except Exception as e:
        log.warning("cannot locate the small local versions: %s", e)
        return None
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


def build_small(progress: Progress | None = None) -> None:
    """Build the small local versions (the builder's ``ensure_small_models``)."""
    small = _small_module()
    if small is None or not hasattr(small, "ensure_small_models"):
        raise SourceError("the small local versions cannot be built: crs_backends.neural.small is not installed")
    small.ensure_small_models(progress=progress)


def resolve(
    system: str,
    dataset: str | None = None,
    *,
    build: bool = False,
    progress: Progress | None = None,
    allow_small: bool = True,
) -> CheckpointSource:
    """The checkpoint set ``system`` runs from: published first, else the small local version.

    ``build``: build the small local versions when nothing else is there. Raises :class:`SourceError`
    listing what was looked for and the commands that fetch or build each source.
    """
    found, reasons, lacking = _published_search(system, dataset)
    if found is not None:
        return found
    if lacking:  # the checkpoints are there: say which command completes them rather than run something else
        from crs_backends.neural.datasets import missing_message

        dataset = dataset or published_dataset()
        raise DatasetFilesMissing(missing_message(LABELS[system], dataset, lacking), dataset)
    if allow_small:
        small = small_source(system)
        if small is None and build:
            build_small(progress)
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


def _check_system(system: str) -> None:
    if system not in SYSTEMS:
        raise ValueError(f"unknown neural system {system!r}; known: {', '.join(SYSTEMS)}")


# ---------------------------------------------------------------------------------------------
# fetching (the generic downloading and extraction live in crs_backends.download)


def extract_archive(archive: str | os.PathLike, dest: str | os.PathLike) -> Path:
    """Extract a (gzipped) tar of a checkpoint set safely (:func:`crs_backends.download.extract_tar`) and move
    the set it holds (:func:`find_set_root`) to ``dest`` in one rename. Raises :class:`SourceError`, leaving
    ``dest`` untouched, for an unsafe, corrupt or truncated archive or one without checkpoint directories."""
    try:
        return extract_tar(
            archive, dest, root_of=find_set_root, contents="checkpoint directories (expected e.g. kbrd_rec_redial/)"
        )
    except DownloadError as e:
        raise SourceError(str(e)) from None


def fetch_archive(
    url: str | None = None,
    *,
    sha256: str | None = None,
    dest: Path | None = None,
    progress: bool = True,
    retries: int = 3,
    keep_archive: bool = False,
) -> Path:
    """Download the checkpoint archive (resumable), verify it, extract it into the cache. Returns the set's root."""
    url = url or models_url()
    sha256 = sha256 or models_sha256()
    dest = dest or archive_dir()
    downloads = models_dir() / "downloads"
    name = Path(urllib.request.url2pathname(url.split("?")[0].rsplit("/", 1)[-1])).name or "models.tar.gz"
    archive = downloads / name
    try:
        if not archive.exists():
            download(url, archive, sha256=sha256, retries=retries, progress=progress)
        elif sha256 and sha256_of(archive) != sha256.lower():
            archive.unlink()
            download(url, archive, sha256=sha256, retries=retries, progress=progress)
    except DownloadError as e:
        raise SourceError(str(e)) from None
    digest = sha256_of(archive)
    try:
        root = extract_archive(archive, dest)
    except SourceError:
        archive.unlink(missing_ok=True)  # the next fetch downloads it again
        raise
    (root / FETCHED_INFO).write_text(
        json.dumps(
            {
                "url": url,
                "sha256": digest,
                "size": archive.stat().st_size,
                "fetched": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
        ),
        encoding="utf-8",
    )
    if not keep_archive:
        archive.unlink(missing_ok=True)
    return root


def fetch_hub(repo: str, *, revision: str | None = None, dest: Path | None = None) -> Path:
    """Download a Hub repository holding a checkpoint set (the published layout, or a tar archive of it)."""
    from huggingface_hub import snapshot_download

    dest = dest or hub_dir(repo)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.download-", dir=dest.parent))
    try:
        try:
            snapshot_download(repo_id=repo, revision=revision, local_dir=str(tmp))
        except Exception as e:
            raise SourceError(f"cannot download the Hub repository {repo}: {type(e).__name__}: {e}") from None
        found = find_set_root(tmp)
        if found is None:
            archives = sorted(tmp.rglob("*.tar.gz")) + sorted(tmp.rglob("*.tar"))
            if not archives:
                raise SourceError(
                    f"the Hub repository {repo} holds no checkpoint directories (e.g. kbrd_rec_redial/) "
                    "and no tar archive of them"
                )
            root = extract_archive(archives[0], dest)
        else:
            if dest.exists():
                shutil.rmtree(dest)
            os.replace(found, dest)
            root = dest
        (root / FETCHED_INFO).write_text(json.dumps({"repo": repo, "revision": revision}), encoding="utf-8")
        return root
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# command line


def main(argv: list[str] | None = None) -> int:
    import click

    @click.group(
        help="Checkpoints of KBRD, BARCOR and UniCRS: fetch the published ones, build the small local "
        "versions, show what each system would run."
    )
    def cli() -> None:
        logging.basicConfig(level=os.environ.get("LOG_LEVEL", "WARNING"))

    @cli.command(
        help=f"Download the CRS Arena checkpoint archive (default {DEFAULT_URL}, or CRS_MODELS_URL) into "
        "the cache, or a Hugging Face Hub repository with --hub, then the dataset files (iEvaLM "
        "knowledge graph, item metadata) its checkpoints need. --datasets alone fetches only those files."
    )
    @click.option("--url", default=None, help="archive URL (default: CRS_MODELS_URL or the CRS Arena archive)")
    @click.option("--sha256", default=None, help="expected SHA-256 of the archive (default: CRS_MODELS_SHA256)")
    @click.option(
        "--hub", "hub", default=None, help="a Hugging Face Hub repository (owner/name) instead of the archive"
    )
    @click.option("--revision", default=None, help="Hub revision (with --hub)")
    @click.option("--keep-archive", is_flag=True, help="keep the downloaded .tar.gz beside the extracted set")
    @click.option(
        "--datasets",
        "dataset_list",
        default=None,
        help="comma-separated datasets whose files to fetch (redial, opendialkg); without --url/--hub, "
        "only these files are fetched, not the checkpoints",
    )
    @click.option(
        "--data-url",
        default=None,
        help="base URL of the dataset files (default: CRS_DATA_BASE_URL or the "
        "pinned RUCAIBox/iEvaLM-CRS commit); a file is <base>/<dataset>/<file>",
    )
    def fetch(url, sha256, hub, revision, keep_archive, dataset_list, data_url) -> None:
        from crs_backends.neural import datasets as dataset_files

        try:
            wanted = [d.strip() for d in (dataset_list or "").split(",") if d.strip()]
            for d in wanted:
                dataset_files.check_name(d)
                dataset_files.known_files(d)  # an unknown dataset fails before any download
            root = None
            if hub:
                root = fetch_hub(hub, revision=revision)
            elif url or not wanted:
                root = fetch_archive(url, sha256=sha256, keep_archive=keep_archive)
            if root is not None:
                click.echo(f"checkpoints ready in {root}")
                for system in SYSTEMS:
                    sets = datasets_in(root, system)
                    click.echo(f"  {LABELS[system]}: {', '.join(sets) if sets else 'none'}")
                if not wanted:  # the datasets the set needs and finds nowhere yet
                    wanted = dataset_files.needed_datasets(root)
            for d in wanted:
                folder = dataset_files.fetch_dataset(d, url=data_url)
                click.echo(f"dataset files of {d} ready in {folder}")
        except SourceError as e:
            raise click.ClickException(str(e)) from None

    @cli.command("build-small", help="Build (train) the small local versions of the three systems if they are absent.")
    def build_small_command() -> None:
        try:
            build_small(None)  # the builder draws its own progress bars
        except SourceError as e:
            raise click.ClickException(str(e)) from None
        for system in SYSTEMS:
            found = small_source(system)
            click.echo(f"{LABELS[system]}: {found.variant + ' in ' + str(found.root) if found else 'not built'}")

    @cli.command(help="Show which checkpoint set each system runs from, and where each dataset's files come from.")
    def status() -> None:
        from crs_backends.neural import datasets as dataset_files

        for system in SYSTEMS:
            try:
                found = resolve(system)
                click.echo(f"{LABELS[system]}: {found.variant} — {found.root} (KG {found.kg_dir})")
            except SourceError as e:
                click.echo(str(e))
        for dataset in dataset_files.DATASET_FILES:
            click.echo(dataset_files.describe(dataset))

    try:
        cli.main(args=argv, prog_name="python -m crs_backends.neural.sources", standalone_mode=False)
    except click.ClickException as e:
        e.show()
        return e.exit_code
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.Abort:
        return 1
    return 0


if __name__ == "__main__":
    # run the imported module's main, not this __main__ copy's: crs_backends.neural.datasets raises the imported
    # module's SourceError, which a second class of the same name here would not catch (a traceback, not a message)
    from crs_backends.neural import sources

    raise SystemExit(sources.main())
