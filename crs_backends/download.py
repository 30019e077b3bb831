"""Downloading a file safely: resumable HTTP download with size and SHA-256 checks, and safe tar extraction.

Nothing here knows what is downloaded; :mod:`crs_backends.neural.sources` (checkpoint archives) and
:mod:`crs_backends.neural.datasets` (the iEvaLM dataset files) use it.

:func:`download` writes through ``<dest>.part`` and shows a progress bar. A dropped connection resumes the
partial file with an HTTP Range request; a server that ignores Range, or whose file changed (``If-Range``
with the saved ETag / Last-Modified, kept in ``<dest>.part.json``), makes it restart cleanly from zero.
The finished file's size is checked against the server's and, when given, its SHA-256; only then is it
renamed to ``dest``. :func:`extract_tar` checks every member of a tar archive before writing anything (no
absolute paths, no ``..``, no links, no devices), extracts into a temporary folder and moves the result
into place in one rename, so a corrupt archive leaves nothing half-extracted. Failures raise
:class:`DownloadError`, whose message says what happened and what to do.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import logging
import os
import re
import shutil
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable
from pathlib import Path

from storage.jsonutil import read_json_object

log = logging.getLogger(__name__)

USER_AGENT = "crs-arena/1 (+checkpoint fetch)"


class DownloadError(RuntimeError):
    """A download or an archive that failed; the message names the URL or file and what to do."""


# ---------------------------------------------------------------------------------------------
# downloading


def _progress_bar(total: int | None, initial: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(
        total=total,
        initial=initial,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        desc=desc,
        disable=not enabled,
        leave=True,
    )


def sha256_of(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def download(
    url: str,
    dest: str | os.PathLike,
    *,
    sha256: str | None = None,
    retries: int = 3,
    timeout: float = 60.0,
    progress: bool = True,
    chunk: int = 1 << 16,
) -> Path:
    """Download ``url`` to ``dest`` through ``dest.part``, resuming a partial file with HTTP Range.

    A dropped connection is resumed up to ``retries`` times (then :class:`DownloadError`, keeping the
    ``.part`` file so the next call resumes). A server that ignores Range, or whose file changed
    (``If-Range`` with the saved ETag / Last-Modified), makes the download restart from zero. The
    finished file's size is checked against the server's, and its SHA-256 against ``sha256`` when given;
    a mismatch deletes the download (a resumed file is retried once from scratch first).
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    meta_path = dest.with_name(dest.name + ".part.json")
    expected_sha = sha256.lower() if sha256 else None
    attempts, restarted_for_sha = 0, False
    while True:
        meta = read_json_object(meta_path) if part.exists() else {}
        if meta.get("url") not in (None, url):  # a partial of another URL: start again
            _remove(part, meta_path)
            meta = {}
        have = part.stat().st_size if part.exists() else 0
        try:
            total, resumed = _download_once(
                url, part, meta_path, have, meta, timeout=timeout, progress=progress, chunk=chunk
            )
        except _Interrupted as e:
            attempts += 1
            if attempts > retries:
                raise DownloadError(
                    f"download of {url} interrupted ({e}); {part.stat().st_size if part.exists() else 0:,} "
                    f"bytes kept in {part}: run the same command again to resume"
                ) from None
            log.warning("download interrupted (%s); resuming (%d/%d)", e, attempts, retries)
            time.sleep(min(0.2 * attempts, 2.0))
            continue
        size = part.stat().st_size
        if total is not None and size != total:
            _remove(part, meta_path)
            raise DownloadError(
                f"download of {url} has {size:,} bytes, the server announced {total:,}; {part} deleted, run again"
            )
        if expected_sha:
            actual = sha256_of(part)
            if actual != expected_sha:
                _remove(part, meta_path)
                if resumed and not restarted_for_sha:  # the kept partial may have been the bad part
                    restarted_for_sha = True
                    log.warning("SHA-256 mismatch after a resumed download; downloading %s again from zero", url)
                    continue
                raise DownloadError(
                    f"SHA-256 of the download of {url} is {actual}, expected {expected_sha}; "
                    f"the file ({part}) was deleted"
                )
        os.replace(part, dest)
        _remove(meta_path)
        return dest


class _Interrupted(Exception):
    pass


def _remove(*paths: Path) -> None:
    for p in paths:
        try:
            p.unlink()
        except FileNotFoundError:
            pass


def _download_once(
    url: str, part: Path, meta_path: Path, have: int, meta: dict, *, timeout: float, progress: bool, chunk: int
) -> tuple[int | None, bool]:
    """One HTTP request; returns (expected total size or None, whether it resumed). Raises _Interrupted."""
    headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
    if have:
        headers["Range"] = f"bytes={have}-"
        validator = meta.get("etag") or meta.get("last_modified")
        if validator:
            headers["If-Range"] = validator
    request = urllib.request.Request(url, headers=headers)
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as e:
        if e.code == 416 and have:  # nothing left to send: complete already, or a stale partial
            total = _range_total(e.headers.get("Content-Range"))
            e.close()
            if total == have:
                return total, True
            _remove(part, meta_path)
            raise _Interrupted("the server refused the resume range; starting again") from None
        if e.code == 429 or e.code >= 500:  # busy or failing server: worth another try
            raise _Interrupted(f"HTTP {e.code} {e.reason}") from None
        raise DownloadError(f"cannot download {url}: HTTP {e.code} {e.reason}") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as e:  # refused, reset, timed out
        raise _Interrupted(f"{type(e).__name__}: {getattr(e, 'reason', e)}") from None
    with response:
        length = response.headers.get("Content-Length")
        length = int(length) if length and length.isdigit() else None
        resumed = False
        if have and response.status == 206:
            content_range = response.headers.get("Content-Range")
            if _range_start(content_range) != have:  # not the range asked for: start again
                _remove(part, meta_path)
                raise _Interrupted(f"the server answered range {content_range!r} to a resume at byte {have}")
            mode, resumed = "ab", True
            total = _range_total(content_range) or (have + length if length is not None else None)
        else:
            if have:
                log.warning("the server ignored the Range request (or the file changed); restarting %s from zero", url)
            mode, have = "wb", 0
            total = length
        meta = {
            "url": url,
            "etag": response.headers.get("ETag"),
            "last_modified": response.headers.get("Last-Modified"),
            "total": total,
        }
        meta_path.write_text(json.dumps(meta), encoding="utf-8")
        with open(part, mode) as out, _progress_bar(total, have, part.name.removesuffix(".part"), progress) as bar:
            try:
                while True:
                    block = response.read(chunk)
                    if not block:
                        break
                    out.write(block)
                    bar.update(len(block))
            except (OSError, http.client.HTTPException) as e:  # dropped connection, timeout, IncompleteRead
                raise _Interrupted(f"{type(e).__name__}: {e}") from None
    if total is not None and part.stat().st_size < total:
        raise _Interrupted(f"connection closed after {part.stat().st_size:,} of {total:,} bytes")
    return total, resumed


def _range_start(value: str | None) -> int | None:
    m = re.match(r"bytes\s+(\d+)-\d+/(\d+|\*)", value or "")
    return int(m.group(1)) if m else None


def _range_total(value: str | None) -> int | None:
    m = re.match(r"bytes\s+(?:\d+-\d+|\*)/(\d+)", value or "")
    return int(m.group(1)) if m else None


# ---------------------------------------------------------------------------------------------
# extraction


def check_member(member: tarfile.TarInfo, archive: Path) -> None:
    """Refuse a member that is absolute, climbs out with ``..``, is a link or is not a plain file or folder."""
    name = member.name
    parts = Path(name).parts
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name) or ".." in parts:
        raise DownloadError(
            f"{archive}: unsafe path in the archive: {name!r} (absolute or with '..'); nothing extracted"
        )
    if member.issym() or member.islnk():
        raise DownloadError(
            f"{archive}: the archive holds a link ({name!r} -> {member.linkname!r}); refusing it, nothing extracted"
        )
    if not (member.isfile() or member.isdir()):
        raise DownloadError(f"{archive}: the archive holds a special file ({name!r}); refusing it, nothing extracted")


def extract_tar(
    archive: str | os.PathLike,
    dest: str | os.PathLike,
    *,
    root_of: Callable[[Path], Path | None] = lambda tree: tree,
    contents: str = "files",
) -> Path:
    """Extract a (gzipped) tar safely into a fresh temporary folder beside ``dest`` and move the folder
    ``root_of(extracted tree)`` to ``dest`` in one rename (an existing ``dest`` is replaced only after success).

    Every member is checked before anything is written (:func:`check_member`: no absolute paths, no ``..``,
    no links, no devices); a corrupt or truncated archive raises :class:`DownloadError` naming the file and
    leaves ``dest`` untouched and no temporary folder behind. ``root_of`` returning None (the archive does not
    hold what is wanted) raises ``DownloadError("<archive> holds no <contents>")``.
    """
    archive, dest = Path(archive), Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.extract-", dir=dest.parent))
    try:
        try:
            with tarfile.open(archive, "r:*") as tar:
                members = tar.getmembers()  # reads the whole index: a truncated file fails here
                if not members:
                    raise DownloadError(f"{archive} is an empty archive")
                for m in members:
                    check_member(m, archive)
                tar.extractall(tmp, members=members, filter="data")
        except (tarfile.TarError, EOFError, zlib.error, OSError) as e:
            raise DownloadError(
                f"{archive} is not a readable tar archive (corrupt or incomplete download?): "
                f"{type(e).__name__}: {e}. Delete it and fetch again."
            ) from None
        staged = root_of(tmp)
        if staged is None:
            raise DownloadError(f"{archive} holds no {contents}")
        if dest.exists():
            old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
            os.replace(dest, old)
            try:
                os.replace(staged, dest)
            except OSError:
                os.replace(old, dest)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staged, dest)
        return dest
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
