"""Checkpoint sources: a real HTTP server on 127.0.0.1 serves fabricated archives (nothing reaches the internet)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from crs_backends.download import DownloadError, download
from crs_backends.neural import fetch, names, sources
from crs_backends.neural.sources import SourceError

KG = {
    "entity2id.json": {"Heat (1995)": 0, "crime": 1},
    "relation2id.json": {"genre": 0},
    "kg.json": {"0": [[0, 1]]},
    "item_ids.json": [0],
}


def layout_files(
    prefix: str = "models/", systems=("kbrd", "barcor", "unicrs"), dataset="redial", kg: bool = True
) -> dict[str, bytes]:
    """The published layout with stand-in contents (the bytes are never loaded as models here)."""
    files = {}
    for system in systems:
        for part in ("rec", "conv"):
            files[f"{prefix}{system}_{part}_{dataset}/model.pt"] = f"{system}-{part}".encode() * 500
        files[f"{prefix}{system}_conv_{dataset}/config.json"] = b"{}"
    if kg:
        for name, value in KG.items():
            files[f"{prefix}kg_{dataset}/{name}"] = json.dumps(value).encode()
    return files


def make_tar(files: dict[str, bytes], *, extra=None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for info in extra or ():
            tar.addfile(info, io.BytesIO(b"x" * info.size) if info.isfile() else None)
    return buf.getvalue()


class Server:
    """Serves ``body`` at /models.tar.gz. ``drop_first``: the first answer stops half-way and closes the
    connection; ``ranges``: honour Range requests (206) or ignore them (200 with everything)."""

    def __init__(self, body: bytes, *, drop_first: bool = False, ranges: bool = True, etag: str = '"v1"'):
        self.body, self.drop_first, self.ranges, self.etag = body, drop_first, ranges, etag
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                outer.requests.append(
                    {"path": self.path, "range": self.headers.get("Range"), "if_range": self.headers.get("If-Range")}
                )
                if self.path != "/models.tar.gz":
                    self.send_error(404)
                    return
                body, start = outer.body, 0
                wanted = self.headers.get("Range")
                if_range = self.headers.get("If-Range")
                if wanted and outer.ranges and if_range in (None, outer.etag):
                    start = int(wanted.split("=")[1].split("-")[0])
                    if start >= len(body):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(body)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                else:
                    self.send_response(200)
                chunk = body[start:]
                self.send_header("Content-Length", str(len(chunk)))
                self.send_header("ETag", outer.etag)
                self.send_header("Accept-Ranges", "bytes" if outer.ranges else "none")
                self.end_headers()
                if outer.drop_first and len(outer.requests) == 1:
                    self.wfile.write(chunk[: len(chunk) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(chunk)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/models.tar.gz"

    def __enter__(self):
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """An empty cache and no configured source; the small builder reports nothing built."""
    root = tmp_path / "cache"
    monkeypatch.setenv("CRS_ARENA_CACHE", str(root))
    for var in ("CRS_MODELS_DIR", "CRS_MODELS_URL", "CRS_MODELS_SHA256", "CRS_MODELS_HUB_REPO", "CRS_MODELS_DATASET"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CRS_DATA_DIR", str(tmp_path / "no_data"))
    monkeypatch.setattr(names, "SHIPPED_SMALL_ROOT", tmp_path / "no_shipped_set")  # none shipped, none in the cache
    return root


def big_body() -> bytes:
    """An archive of a few hundred KiB, so that half of it is many read chunks."""
    files = layout_files()
    files["models/kbrd_rec_redial/model.pt"] = bytes(range(256)) * 1500
    return make_tar(files)


def test_full_download_extracts_and_resolves(cache):
    body = big_body()
    with Server(body) as server:
        root = fetch.fetch_archive(server.url, sha256=hashlib.sha256(body).hexdigest(), progress=False)
    assert root == cache / "models" / "crs_arena"
    assert (root / "kbrd_rec_redial" / "model.pt").exists() and (root / "unicrs_conv_redial").is_dir()
    info = json.loads((root / sources.FETCHED_INFO).read_text())
    assert info["sha256"] == hashlib.sha256(body).hexdigest() and info["size"] == len(body)
    assert not list((cache / "models" / "downloads").glob("*"))  # the archive is not kept by default
    assert not [p for p in (cache / "models").iterdir() if p.name.startswith(".")]  # no temporary folders left
    found = sources.resolve("kbrd")
    assert found.origin == "archive" and found.dataset == "redial" and found.kg_dir == root / "kg_redial"
    assert not found.small and "published checkpoint" in found.variant and "CRS Arena archive" in found.variant


def test_interrupted_download_resumes_with_range(cache, tmp_path):
    body = big_body()
    dest = tmp_path / "dl" / "models.tar.gz"
    with Server(body, drop_first=True) as server:
        with pytest.raises(DownloadError, match="interrupted.*run the same command again to resume"):
            download(server.url, dest, retries=0, progress=False)
        part = dest.with_name(dest.name + ".part")
        kept = part.stat().st_size
        assert 0 < kept < len(body) and not dest.exists()
        download(server.url, dest, retries=0, progress=False, sha256=hashlib.sha256(body).hexdigest())
    assert dest.read_bytes() == body and not part.exists()
    assert server.requests[1]["range"] == f"bytes={kept}-" and server.requests[1]["if_range"] == '"v1"'


def test_dropped_connection_is_resumed_within_one_call(cache, tmp_path):
    body = big_body()
    dest = tmp_path / "models.tar.gz"
    with Server(body, drop_first=True) as server:
        download(server.url, dest, retries=2, progress=False)
    assert dest.read_bytes() == body
    assert [r["range"] is not None for r in server.requests] == [False, True]


def test_server_without_range_support_restarts_cleanly(cache, tmp_path):
    body = big_body()
    dest = tmp_path / "models.tar.gz"
    with Server(body, drop_first=True, ranges=False) as server:
        with pytest.raises(DownloadError, match="interrupted"):
            download(server.url, dest, retries=0, progress=False)
        download(server.url, dest, retries=0, progress=False)
    assert server.requests[1]["range"] is not None  # we asked to resume, the server sent everything
    assert dest.read_bytes() == body  # not appended to the partial


def test_changed_file_on_the_server_restarts(cache, tmp_path):
    """A partial of an older version: If-Range does not match the new ETag, the server sends the new file whole."""
    old, new = big_body(), make_tar(layout_files(systems=("kbrd",)))
    dest = tmp_path / "models.tar.gz"
    with Server(old, drop_first=True, etag='"old"') as server:
        with pytest.raises(DownloadError):
            download(server.url, dest, retries=0, progress=False)
        server.body, server.etag = new, '"new"'
        download(server.url, dest, retries=0, progress=False)
    assert server.requests[1]["if_range"] == '"old"'
    assert dest.read_bytes() == new


def test_complete_partial_is_accepted_on_416(cache, tmp_path):
    body = make_tar(layout_files(systems=("kbrd",)))
    dest = tmp_path / "models.tar.gz"
    part = dest.with_name(dest.name + ".part")
    with Server(body) as server:
        part.write_bytes(body)
        dest.with_name(dest.name + ".part.json").write_text(json.dumps({"url": server.url, "etag": '"v1"'}))
        download(server.url, dest, progress=False, sha256=hashlib.sha256(body).hexdigest())
    assert dest.read_bytes() == body and server.requests[0]["range"] == f"bytes={len(body)}-"


def test_corrupt_archive_is_named_and_nothing_is_half_extracted(cache):
    body = big_body()
    broken = body[: len(body) // 2]  # a truncated gzip served as if whole
    with Server(broken) as server:
        with pytest.raises(SourceError) as err:
            fetch.fetch_archive(server.url, progress=False)
    message = str(err.value)
    assert str(cache / "models" / "downloads" / "models.tar.gz") in message and "corrupt" in message
    assert not sources.archive_dir().exists()
    assert not [p for p in (cache / "models").iterdir() if p.name.startswith(".")]
    assert not (cache / "models" / "downloads" / "models.tar.gz").exists()  # fetched again next time


def test_corrupt_archive_keeps_a_previous_good_set(cache):
    good = make_tar(layout_files(systems=("kbrd",)))
    with Server(good) as server:
        fetch.fetch_archive(server.url, progress=False)
    with Server(gzip.compress(b"this is not a tar file" * 100)) as server:
        with pytest.raises(SourceError, match="not a readable tar archive"):
            fetch.fetch_archive(server.url, progress=False)
    assert (sources.archive_dir() / "kbrd_rec_redial" / "model.pt").exists()


def test_sha_mismatch_is_an_error(cache):
    body = make_tar(layout_files(systems=("kbrd",)))
    with Server(body) as server:
        with pytest.raises(SourceError, match="SHA-256.*expected 0{64}"):
            fetch.fetch_archive(server.url, sha256="0" * 64, progress=False)
    assert not sources.archive_dir().exists()
    assert not list((cache / "models" / "downloads").glob("*"))  # neither the file nor its .part remain


def test_sha_from_the_environment(cache, monkeypatch):
    body = make_tar(layout_files(systems=("kbrd",)))
    with Server(body) as server:
        monkeypatch.setenv("CRS_MODELS_URL", server.url)
        monkeypatch.setenv("CRS_MODELS_SHA256", "f" * 64)
        with pytest.raises(SourceError, match="SHA-256"):
            fetch.fetch_archive(progress=False)
        monkeypatch.setenv("CRS_MODELS_SHA256", hashlib.sha256(body).hexdigest().upper())
        assert fetch.fetch_archive(progress=False) == sources.archive_dir()


@pytest.mark.parametrize("bad", ["../evil.txt", "/tmp/evil-abs.txt", "models/../../evil.txt"])
def test_path_traversal_member_is_rejected(cache, tmp_path, bad):
    files = layout_files(systems=("kbrd",))
    files[bad] = b"gotcha"
    archive = tmp_path / "evil.tar.gz"
    archive.write_bytes(make_tar(files))
    with pytest.raises(SourceError, match="unsafe path"):
        fetch.extract_archive(archive, sources.archive_dir())
    assert not sources.archive_dir().exists() and not (tmp_path / "evil.txt").exists()
    assert not Path("/tmp/evil-abs.txt").exists()


def test_links_are_rejected(cache, tmp_path):
    link = tarfile.TarInfo("models/kbrd_rec_redial/escape")
    link.type, link.linkname = tarfile.SYMTYPE, "../../../../etc/passwd"
    archive = tmp_path / "links.tar.gz"
    archive.write_bytes(make_tar(layout_files(systems=("kbrd",)), extra=[link]))
    with pytest.raises(SourceError, match="link"):
        fetch.extract_archive(archive, sources.archive_dir())
    assert not sources.archive_dir().exists()


def test_http_error_is_clear(cache, tmp_path):
    with Server(b"") as server:
        with pytest.raises(DownloadError, match="HTTP 404"):
            download(server.url.replace("models.tar.gz", "missing.tar.gz"), tmp_path / "x", progress=False)


def test_resolution_order_and_kg(cache, tmp_path, monkeypatch):
    # the archive in the cache
    archive_set = sources.archive_dir()
    for name, data in layout_files(prefix="").items():
        (archive_set / name).parent.mkdir(parents=True, exist_ok=True)
        (archive_set / name).write_bytes(data)
    assert sources.resolve("barcor").origin == "archive"
    # a local directory wins; without a KG of its own it needs CRS_DATA_DIR/<ds>
    local = tmp_path / "local"
    for name, data in layout_files(prefix="", systems=("barcor",), kg=False).items():
        (local / name).parent.mkdir(parents=True, exist_ok=True)
        (local / name).write_bytes(data)
    monkeypatch.setenv("CRS_MODELS_DIR", str(local))
    found = sources.resolve("barcor")
    assert found.origin == "archive"  # the local dir lacks the KG: skipped
    data = tmp_path / "data"
    for name, value in KG.items():
        (data / "redial").mkdir(parents=True, exist_ok=True)
        (data / "redial" / name).write_text(json.dumps(value))
    monkeypatch.setenv("CRS_DATA_DIR", str(data))
    found = sources.resolve("barcor")
    assert found.origin == "local dir" and found.root == local and found.kg_dir == data / "redial"
    # a system the local dir lacks comes from the archive
    assert sources.resolve("kbrd").origin == "archive"
    # the other dataset is nowhere
    with pytest.raises(SourceError) as err:
        sources.resolve("kbrd", "opendialkg")
    assert "kbrd_rec_opendialkg" in str(err.value)


def test_hub_snapshot_in_the_cache_is_used(cache, monkeypatch):
    monkeypatch.setenv("CRS_MODELS_HUB_REPO", "someone/crs-checkpoints")
    with pytest.raises(SourceError, match="fetch --hub someone/crs-checkpoints"):
        sources.resolve("unicrs")
    fetched = sources.hub_dir("someone/crs-checkpoints")
    for name, data in layout_files(prefix="nested/").items():
        (fetched / name).parent.mkdir(parents=True, exist_ok=True)
        (fetched / name).write_bytes(data)
    found = sources.resolve("unicrs")
    assert found.origin == "hub" and found.root == fetched / "nested" and "Hugging Face Hub" in found.variant


def test_nothing_available_says_which_command_fetches_what(cache):
    with pytest.raises(SourceError) as err:
        sources.resolve("kbrd")
    message = str(err.value)
    assert message.startswith("No checkpoint for KBRD is available.")
    assert "CRS_MODELS_DIR is not set" in message
    assert "python -m crs_backends.neural.sources fetch" in message and sources.DEFAULT_URL in message
    assert "python -m crs_backends.neural.small ensure" in message


def test_small_local_version_is_found_and_built_on_request(cache):
    root = names.small_models_dir()  # where a set built here lands
    built = []

    def ensure_small_models(progress=None):  # the caller's builder (sources only resolves)
        for name, data in layout_files(prefix="", dataset="bundled").items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(data)
        (root / "manifest.json").write_text(json.dumps({"dataset": "bundled", "version": "v1", "complete": True}))
        built.append(progress)

    with pytest.raises(SourceError):
        sources.resolve("unicrs")  # not built, and not asked to build
    assert not built
    found = sources.resolve("unicrs", build=ensure_small_models)
    assert built and found.small and found.origin == "small local" and found.dataset == "bundled"
    assert found.kg_dir == root / "kg_bundled"
    assert found.variant == "small local version (trained here for the bundled catalog, v1)"


def test_cli_fetch_and_status(cache, capsys):
    body = make_tar(layout_files(systems=("kbrd", "barcor")))
    with Server(body) as server:
        assert fetch.main(["fetch", "--url", server.url]) == 0
    out = capsys.readouterr().out
    assert "checkpoints ready in" in out and "KBRD: redial" in out and "UniCRS: none" in out
    assert fetch.main(["status"]) == 0
    out = capsys.readouterr().out
    assert "KBRD: published checkpoint (redial, CRS Arena archive" in out and "No checkpoint for UniCRS" in out
    assert fetch.main(["fetch", "--url", "http://127.0.0.1:9/models.tar.gz"]) == 1  # nothing listens there


def test_small_set_in_the_cache_is_not_taken_for_the_archive(cache, monkeypatch):
    root = names.small_models_dir()  # <cache>/models/small-v<N>/, beside the archive's set
    assert root.parent == names.models_dir()
    for name, data in layout_files(prefix="", dataset="bundled").items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    (root / "manifest.json").write_text(
        json.dumps({"version": "small-v1", "dataset": "bundled", "complete": True, "size": "small"})
    )
    found = sources.resolve("kbrd")
    assert found.origin == "small local" and found.root == root and "v1)" in found.variant
    with Server(make_tar(layout_files(systems=("kbrd",)))) as server:
        fetch.fetch_archive(server.url, progress=False)
    assert sources.resolve("kbrd").origin == "archive"  # published first
    assert sources.resolve("barcor").origin == "small local" and (root / "manifest.json").exists()
