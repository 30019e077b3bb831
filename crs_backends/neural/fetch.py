"""Fetching what the systems run from, and the command line over it: the published checkpoint sets (the CRS Arena
archive, a Hugging Face Hub repository), the dataset files they need, fetching both at start on a Space, and
building the small local versions.

Above :mod:`crs_backends.neural.sources` (which only resolves what is there) and
:mod:`crs_backends.neural.datasets` (where dataset files are and how one is fetched); the command stays
``python -m crs_backends.neural.sources fetch|status|build-small``, which runs :func:`main`.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
import urllib.request
from pathlib import Path

import click

from crs_backends.download import DownloadError, download, extract_tar, sha256_of
from crs_backends.neural import datasets as dataset_files
from crs_backends.neural.datasets import REQUIRED_FILES, check_name, fetch_dataset, find_dataset_dir
from crs_backends.neural.kg_reader import KG_FILES
from crs_backends.neural.names import LABELS, SYSTEMS, SourceError, models_dir
from crs_backends.neural.sources import (
    DEFAULT_URL,
    FETCHED_INFO,
    archive_dir,
    datasets_in,
    find_set_root,
    hub_dir,
    hub_repo,
    models_sha256,
    models_url,
    published_dataset,
    published_source,
    resolve,
    sets_lacking_dataset_files,
    small_source,
)

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------
# checkpoint sets (the generic downloading and extraction live in crs_backends.download)


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
# the dataset files a set needs, and both at start


def datasets_of_set(root: Path) -> list[str]:
    """The datasets ``root`` holds checkpoints for (any of the three systems, both parts)."""
    found: list[str] = []
    for system in SYSTEMS:
        found += [d for d in datasets_in(root, system) if d not in found]
    return found


def needed_datasets(root: Path) -> list[str]:
    """The datasets of the set at ``root`` whose files are found nowhere yet (the set's own KG counts)."""
    return [d for d in datasets_of_set(root) if find_dataset_dir(d, KG_FILES, root) is None]


def fetch_at_start() -> list[str]:
    """With ``CRS_FETCH_AT_START=1``: fetch what the configured published set lacks, before the app serves.

    The checkpoints (``CRS_MODELS_HUB_REPO`` when set, else the archive at ``CRS_MODELS_URL``) only
    when no published set of ``CRS_MODELS_DATASET`` is there yet, then the dataset files of that
    dataset when they are found nowhere. Returns what it did, one line each; a failure is logged and
    reported in the lines, never raised (the app starts anyway, the systems then say what is missing).
    """
    if (os.environ.get("CRS_FETCH_AT_START") or "").strip().lower() not in ("1", "true", "yes", "on"):
        return []
    dataset = published_dataset()
    done: list[str] = []

    def report(line: str, level: int = logging.WARNING) -> None:
        done.append(line)
        log.log(level, "CRS_FETCH_AT_START: %s", line)

    try:
        check_name(dataset)
        if not any(published_source(s, dataset)[0] or _set_without_files(s, dataset) for s in SYSTEMS):
            repo = hub_repo()
            root = fetch_hub(repo) if repo else fetch_archive(progress=False)
            report(f"checkpoints fetched into {root}")
        if find_dataset_dir(dataset, REQUIRED_FILES) is None:
            report(f"dataset files of {dataset} fetched into {fetch_dataset(dataset, progress=False)}")
    except SourceError as e:
        report(f"fetch at start failed: {e}", logging.ERROR)
    except Exception as e:  # whatever else (a missing huggingface_hub, a full disk): the app still starts
        log.exception("CRS_FETCH_AT_START failed")
        done.append(f"fetch at start failed: {type(e).__name__}: {e}")
    return done


def _set_without_files(system: str, dataset: str) -> bool:
    return bool(sets_lacking_dataset_files(system, dataset))


# ---------------------------------------------------------------------------------------------
# command line


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
@click.option("--hub", "hub", default=None, help="a Hugging Face Hub repository (owner/name) instead of the archive")
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
                wanted = needed_datasets(root)
        for d in wanted:
            folder = fetch_dataset(d, url=data_url)
            click.echo(f"dataset files of {d} ready in {folder}")
    except SourceError as e:
        raise click.ClickException(str(e)) from None


@cli.command("build-small", help="Build (train) the small local versions of the three systems if they are absent.")
def build_small_command() -> None:
    try:
        from crs_backends.neural.small import SmallBuildError, ensure_small_models
    except ImportError as e:
        raise click.ClickException(
            f"the small local versions cannot be built here ({e}); install requirements.txt"
        ) from None
    try:
        ensure_small_models()  # the builder draws its own progress bars
    except SmallBuildError as e:
        raise click.ClickException(str(e)) from None
    for system in SYSTEMS:
        found = small_source(system)
        click.echo(f"{LABELS[system]}: {found.variant + ' in ' + str(found.root) if found else 'not built'}")


@cli.command(help="Show which checkpoint set each system runs from, and where each dataset's files come from.")
def status() -> None:
    for system in SYSTEMS:
        try:
            found = resolve(system)
            click.echo(f"{LABELS[system]}: {found.variant} — {found.root} (KG {found.kg_dir})")
        except SourceError as e:
            click.echo(str(e))
    for dataset in dataset_files.DATASET_FILES:
        click.echo(dataset_files.describe(dataset))


def main(argv: list[str] | None = None) -> int:
    """``python -m crs_backends.neural.sources …`` (also ``crs-arena checkpoints …``); returns the exit code."""
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
