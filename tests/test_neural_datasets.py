"""Dataset files of the published checkpoints: fetched from a real HTTP server on 127.0.0.1 (nothing reaches
the internet), resumed, checked, refused; and the message a set without them gives."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from ci_mode import skip_or_fail

from crs_backends import registry
from crs_backends.download import sha256_of
from crs_backends.neural import datasets, fetch, names, sources
from crs_backends.neural.sources import DatasetFilesMissing, SourceError

FETCH_REDIAL = "python -m crs_backends.neural.sources fetch --datasets redial"


def fake_files() -> dict[str, bytes]:
    """Stand-ins for data/redial/* (a tiny KG in the iEvaLM layout, and item metadata)."""
    return {
        "entity2id.json": json.dumps({"Heat (1995)": 0, "crime": 1, "Al Pacino": 2}).encode(),
        "relation2id.json": json.dumps({"genre": 0, "star": 1}).encode(),
        "kg.json": json.dumps({"0": [[0, 1], [1, 2]]}).encode() + b" " * 60_000,  # many read chunks
        "item_ids.json": json.dumps([0]).encode(),
        "id2info.json": json.dumps(
            {"111": {"name": "Heat (1995)", "genre": ["crime"], "star": ["Al Pacino"]}}
        ).encode(),
    }


def sums(files: dict[str, bytes]) -> dict[str, str]:
    return {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}


class FileServer:
    """Serves ``files`` ({url path: bytes}) with Range support; paths in ``drop_first`` stop half-way the
    first time they are asked for and close the connection."""

    def __init__(self, files: dict[str, bytes], *, drop_first: tuple[str, ...] = ()):
        self.files, self.drop_first = dict(files), set(drop_first)
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                outer.requests.append({"path": self.path, "range": self.headers.get("Range")})
                body = outer.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                start, wanted = 0, self.headers.get("Range")
                if wanted:
                    start = int(wanted.split("=")[1].split("-")[0])
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                else:
                    self.send_response(200)
                chunk = body[start:]
                self.send_header("Content-Length", str(len(chunk)))
                self.send_header("ETag", '"v1"')
                self.end_headers()
                if self.path in outer.drop_first:
                    outer.drop_first.discard(self.path)
                    self.wfile.write(chunk[: len(chunk) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(chunk)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def data_paths(files: dict[str, bytes], dataset: str = "redial", prefix: str = "/data") -> dict[str, bytes]:
    return {f"{prefix}/{dataset}/{name}": data for name, data in files.items()}


def checkpoint_set(systems=("kbrd", "barcor", "unicrs"), dataset: str = "redial") -> dict[str, bytes]:
    """The published layout without a KG of its own (as the CRS Arena archive ships it)."""
    out = {}
    for system in systems:
        for part in ("rec", "conv"):
            out[f"{system}_{part}_{dataset}/model.pt"] = f"{system}-{part}".encode() * 100
    return out


def write_tree(root: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)


def make_tar(files: dict[str, bytes], prefix: str = "models/") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(prefix + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """An empty cache, no data dir, no configured source, nothing small built, the fake files as the recorded ones."""
    root = tmp_path / "cache"
    monkeypatch.setenv("CRS_ARENA_CACHE", str(root))
    for var in (
        "CRS_MODELS_DIR",
        "CRS_MODELS_URL",
        "CRS_MODELS_SHA256",
        "CRS_MODELS_HUB_REPO",
        "CRS_MODELS_DATASET",
        "CRS_DATA_BASE_URL",
        "CRS_FETCH_AT_START",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CRS_DATA_DIR", str(tmp_path / "no_data"))
    monkeypatch.setattr(names, "SHIPPED_SMALL_ROOT", tmp_path / "no_shipped_set")  # none shipped, none in the cache
    table = {name: (len(data), sha) for (name, data), sha in zip(fake_files().items(), sums(fake_files()).values())}
    monkeypatch.setattr(datasets, "DATASET_FILES", {"redial": table, "opendialkg": dict(table)})
    return root


def leftovers(cache: Path) -> list[str]:
    """Partial or temporary files anywhere under the datasets folder."""
    return sorted(
        str(p.relative_to(cache)) for p in (cache / "datasets").rglob("*") if p.name.endswith((".part", ".part.json"))
    )


def test_fetch_places_verified_files_and_resolution_finds_them(cache):
    files = fake_files()
    with FileServer(data_paths(files)) as server:
        folder = datasets.fetch_dataset("redial", url=server.base + "/data", progress=False)
        assert folder == cache / "datasets" / "redial"
        for name, data in files.items():
            assert (folder / name).read_bytes() == data
        assert not (cache / "datasets" / ".downloads").exists() and not leftovers(cache)
        info = json.loads((folder / datasets.FETCHED_INFO).read_text())
        assert info["base_url"] == server.base + "/data" and info["files"] == sums(files)
        asked = len(server.requests)
        datasets.fetch_dataset("redial", url=server.base + "/data", progress=False)
        assert len(server.requests) == asked  # verified files are not downloaded again
    assert datasets.find_dataset_dir("redial") == folder
    assert datasets.dataset_file("redial", "id2info.json") == folder / "id2info.json"
    # a checkpoint set without a KG of its own now runs with the fetched copy
    write_tree(sources.archive_dir(), checkpoint_set(("kbrd",)))
    found = sources.resolve("kbrd")
    assert found.origin == "archive" and found.kg_dir == folder
    assert f"fetched copy in {folder}, from {server.base}/data" in datasets.describe("redial")


def test_data_dir_comes_before_the_fetched_copy_and_the_set_own_kg_first(cache, tmp_path, monkeypatch):
    write_tree(datasets.datasets_dir() / "redial", fake_files())
    shared = tmp_path / "shared"
    write_tree(shared / "redial", fake_files())
    monkeypatch.setenv("CRS_DATA_DIR", str(shared))
    assert datasets.find_dataset_dir("redial") == shared / "redial"
    assert "CRS_DATA_DIR" in datasets.describe("redial")
    own = tmp_path / "set"
    write_tree(own / "kg_redial", fake_files())
    assert sources.kg_dir_for(own, "redial") == own / "kg_redial"


def test_interrupted_fetch_resumes_from_the_partial_file(cache):
    files = fake_files()
    with FileServer(data_paths(files), drop_first=("/data/redial/kg.json",)) as server:
        with pytest.raises(SourceError) as err:
            datasets.fetch_dataset("redial", url=server.base + "/data", retries=0, progress=False)
        message = str(err.value)
        assert "redial/kg.json" in message and "run the same command again to resume" in message
        assert not (cache / "datasets" / "redial" / "kg.json").exists()  # never half a file in the dataset folder
        assert datasets.find_dataset_dir("redial") is None
        part = cache / "datasets" / ".downloads" / "redial" / "kg.json.part"
        kept = part.stat().st_size
        assert 0 < kept < len(files["kg.json"])
        datasets.fetch_dataset("redial", url=server.base + "/data", retries=0, progress=False)
    assert (cache / "datasets" / "redial" / "kg.json").read_bytes() == files["kg.json"]
    kg_requests = [r for r in server.requests if r["path"] == "/data/redial/kg.json"]
    assert [r["range"] for r in kg_requests] == [None, f"bytes={kept}-"]
    assert not leftovers(cache)


def test_a_dropped_connection_is_resumed_within_one_fetch(cache):
    files = fake_files()
    with FileServer(data_paths(files), drop_first=("/data/redial/kg.json",)) as server:
        folder = datasets.fetch_dataset("redial", url=server.base + "/data", retries=2, progress=False)
    assert (folder / "kg.json").read_bytes() == files["kg.json"]


def test_corrupt_file_is_refused_and_nothing_half_written(cache):
    files = fake_files()
    served = dict(files, **{"kg.json": files["kg.json"].replace(b"[[0, 1]", b"[[9, 9]")})  # same size, other bytes
    with FileServer(data_paths(served)) as server:
        with pytest.raises(SourceError) as err:
            datasets.fetch_dataset("redial", url=server.base + "/data", progress=False)
    message = str(err.value)
    assert "redial/kg.json" in message and "SHA-256" in message and sums(files)["kg.json"] in message
    assert "Traceback" not in message
    folder = cache / "datasets" / "redial"
    assert not (folder / "kg.json").exists() and not leftovers(cache)
    assert datasets.find_dataset_dir("redial") is None  # an incomplete copy is never used


def test_corrupt_download_keeps_a_previous_good_copy(cache):
    files = fake_files()
    with FileServer(data_paths(files)) as server:
        folder = datasets.fetch_dataset("redial", url=server.base + "/data", progress=False)
    (folder / "item_ids.json").write_text("[]")  # damaged on disk: fetched again
    with FileServer(data_paths(dict(files, **{"item_ids.json": b"[1]"}))) as server:
        with pytest.raises(SourceError, match="SHA-256"):
            datasets.fetch_dataset("redial", url=server.base + "/data", progress=False)
    assert (folder / "kg.json").read_bytes() == files["kg.json"]  # the other verified files stay
    assert (folder / "item_ids.json").read_text() == "[]" and not leftovers(cache)


@pytest.mark.parametrize("dataset", ["../redial", "redial/../../x", "..", "/etc", "a\\b", ""])
def test_hostile_dataset_names_are_refused_before_any_request(cache, tmp_path, dataset):
    with FileServer(data_paths(fake_files())) as server:
        with pytest.raises(SourceError, match="refusing"):
            datasets.fetch_dataset(dataset, url=server.base + "/data", progress=False)
        assert server.requests == []
    assert not (cache / "datasets").exists() and not (tmp_path / "x").exists()


@pytest.mark.parametrize("name", ["../kg.json", "../../evil.json", "sub/kg.json", ".hidden", "kg.json/.."])
def test_hostile_file_names_are_refused_before_any_request(cache, tmp_path, name):
    with FileServer(data_paths(fake_files())) as server:
        with pytest.raises(SourceError, match="refusing the file name"):
            datasets.fetch_dataset("redial", url=server.base + "/data", files={name: None}, progress=False)
        assert server.requests == []
    assert not (cache / "datasets" / "kg.json").exists() and not (cache / "evil.json").exists()
    assert not list((cache / "datasets" / "redial").glob("*"))


def test_hostile_dataset_name_never_becomes_a_path_outside(cache, tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    write_tree(tmp_path / "outside", fake_files())
    shared.mkdir()
    monkeypatch.setenv("CRS_DATA_DIR", str(shared))
    assert datasets.find_dataset_dir("../outside") is None
    assert fetch.main(["fetch", "--datasets", "../outside"]) == 1


def test_unknown_dataset_is_named(cache):
    with pytest.raises(SourceError, match="no recorded dataset files for 'inspired'; known: redial, opendialkg"):
        datasets.fetch_dataset("inspired", progress=False)


def test_checkpoints_without_dataset_files_name_the_fetch_command(cache, monkeypatch):
    write_tree(sources.archive_dir(), checkpoint_set())
    with pytest.raises(DatasetFilesMissing) as err:
        sources.resolve("unicrs")
    message = str(err.value)
    assert err.value.dataset == "redial"
    assert message.startswith("UniCRS has published checkpoints for redial (archive: ")
    assert f"`{FETCH_REDIAL}`" in message and "CRS_DATA_DIR" in message
    assert "Error" not in message and "Traceback" not in message
    # not replaced by the small local version behind the user's back, even when one is built or buildable
    built = []
    with pytest.raises(DatasetFilesMissing):
        sources.resolve("kbrd", build=lambda progress: built.append(1))
    assert built == []
    # status says it, per system and per dataset
    assert fetch.main(["status"]) == 0


def test_status_lines_per_dataset(cache, capsys):
    write_tree(sources.archive_dir(), checkpoint_set(("kbrd",)))
    assert fetch.main(["status"]) == 0
    out = capsys.readouterr().out
    assert "KBRD has published checkpoints for redial" in out and FETCH_REDIAL in out
    assert f"dataset files of redial: missing (run `{FETCH_REDIAL}`)" in out
    assert "dataset files of opendialkg: missing" in out


def test_registry_shows_the_command_and_builds_nothing(cache, monkeypatch):
    write_tree(sources.archive_dir(), checkpoint_set(("barcor",)))
    monkeypatch.setenv("CRS_NEURAL_BUILD", "auto")
    monkeypatch.setattr(registry, "_small_builder_present", lambda: True)
    monkeypatch.setattr(registry, "_build_and_resolve", lambda system_id: pytest.fail("built a small version"))
    info = registry.system_info("barcor")
    assert FETCH_REDIAL in info.variant and "not available" in info.variant
    with pytest.raises(registry.SystemUnavailable) as err:
        registry.get_system("barcor")
    assert FETCH_REDIAL in str(err.value)


def test_cli_fetch_brings_the_set_and_its_dataset_files(cache, capsys):
    archive = make_tar(checkpoint_set(("kbrd", "unicrs")))
    with FileServer({"/models.tar.gz": archive, **data_paths(fake_files())}) as server:
        assert fetch.main(["fetch", "--url", server.base + "/models.tar.gz", "--data-url", server.base + "/data"]) == 0
    out = capsys.readouterr().out
    assert "checkpoints ready in" in out and "KBRD: redial" in out
    assert f"dataset files of redial ready in {cache / 'datasets' / 'redial'}" in out
    assert "opendialkg" not in out  # only the datasets the set holds
    assert sources.resolve("unicrs").kg_dir == cache / "datasets" / "redial"
    assert fetch.main(["status"]) == 0
    assert "dataset files of redial: fetched copy in" in capsys.readouterr().out


def test_cli_datasets_alone_fetches_only_the_dataset_files(cache, capsys, monkeypatch):
    with FileServer(data_paths(fake_files()) | data_paths(fake_files(), "opendialkg")) as server:
        monkeypatch.setenv("CRS_DATA_BASE_URL", server.base + "/data/")
        assert fetch.main(["fetch", "--datasets", "redial,opendialkg"]) == 0
    assert {r["path"].split("/")[2] for r in server.requests} == {"redial", "opendialkg"}  # no archive asked for
    assert datasets.find_dataset_dir("opendialkg") == cache / "datasets" / "opendialkg"
    assert not sources.archive_dir().exists()


def test_cli_fetch_skips_datasets_found_elsewhere(cache, tmp_path, monkeypatch, capsys):
    write_tree(tmp_path / "shared" / "redial", fake_files())
    monkeypatch.setenv("CRS_DATA_DIR", str(tmp_path / "shared"))
    with FileServer({"/models.tar.gz": make_tar(checkpoint_set(("kbrd",)))}) as server:
        assert fetch.main(["fetch", "--url", server.base + "/models.tar.gz"]) == 0
        assert [r["path"] for r in server.requests] == ["/models.tar.gz"]
    assert sources.resolve("kbrd").kg_dir == tmp_path / "shared" / "redial"


def test_fetch_at_start_on_a_space(cache, monkeypatch):
    archive = make_tar(checkpoint_set())
    with FileServer({"/models.tar.gz": archive, **data_paths(fake_files())}) as server:
        monkeypatch.setenv("CRS_MODELS_URL", server.base + "/models.tar.gz")
        monkeypatch.setenv("CRS_DATA_BASE_URL", server.base + "/data")
        assert fetch.fetch_at_start() == []  # not asked for: nothing
        assert server.requests == []
        monkeypatch.setenv("CRS_FETCH_AT_START", "1")
        done = fetch.fetch_at_start()
        assert len(done) == 2 and "checkpoints fetched" in done[0] and "dataset files of redial" in done[1]
        for system in names.SYSTEMS:
            found = sources.resolve(system)
            assert found.origin == "archive" and found.kg_dir == cache / "datasets" / "redial"
        asked = len(server.requests)
        assert fetch.fetch_at_start() == []  # a restart with everything there downloads nothing
        assert len(server.requests) == asked
    monkeypatch.setenv("CRS_DATA_BASE_URL", "http://127.0.0.1:9/data")  # nothing listens there
    (cache / "datasets" / "redial" / "kg.json").unlink()
    done = fetch.fetch_at_start()
    assert done and done[-1].startswith("fetch at start failed: dataset file redial/")


def test_recorded_sums_match_the_public_files(shared_data):
    """The sums pinned in datasets.py are those of the public files (copies in ../shared/data)."""
    checked = 0
    for dataset, table in datasets.DATASET_FILES.items():
        for name, (size, sha) in table.items():
            path = shared_data / dataset / name
            if not path.exists():
                continue
            assert path.stat().st_size == size and sha256_of(path) == sha, f"{dataset}/{name}"
            checked += 1
    if not checked:
        skip_or_fail("no copy of the iEvaLM dataset files in CRS_DATA_DIR")


def test_the_default_source_is_the_pinned_public_commit(monkeypatch):
    monkeypatch.delenv("CRS_DATA_BASE_URL", raising=False)
    assert datasets.base_url() == (
        "https://raw.githubusercontent.com/RUCAIBox/iEvaLM-CRS/162e2f442fb0799550af587dce0285a2d5ca897f/data"
    )
    for table in datasets.DATASET_FILES.values():  # every published set finds its KG and item names
        assert set(datasets.REQUIRED_FILES) <= set(table)
