"""The generic download module on its own (the checkpoint and dataset fetches over it are in
test_neural_sources.py and test_neural_datasets.py), and the ``fetch`` command run as ``python -m``."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from crs_backends.download import DownloadError, extract_tar, sha256_of

ROOT = Path(__file__).resolve().parent.parent


def tar_of(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_extract_tar_moves_the_chosen_folder_into_place(tmp_path):
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(tar_of({"pkg/data/one.txt": b"1", "pkg/data/two/three.txt": b"3", "pkg/README": b"r"}))
    dest = tmp_path / "out" / "data"
    assert extract_tar(archive, dest, root_of=lambda tree: tree / "pkg" / "data") == dest
    assert (dest / "one.txt").read_bytes() == b"1" and (dest / "two" / "three.txt").read_bytes() == b"3"
    assert sorted(p.name for p in dest.parent.iterdir()) == ["data"]  # no temporary folder left


def test_extract_tar_replaces_dest_only_after_success(tmp_path):
    dest = tmp_path / "set"
    dest.mkdir()
    (dest / "old.txt").write_text("old")
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(tar_of({"x/new.txt": b"new"}))
    with pytest.raises(DownloadError, match=r"a\.tar\.gz holds no model folders"):
        extract_tar(archive, dest, root_of=lambda tree: None, contents="model folders")
    assert [p.name for p in dest.iterdir()] == ["old.txt"]
    extract_tar(archive, dest)
    assert (dest / "x" / "new.txt").read_bytes() == b"new" and not (dest / "old.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tar.gz", "set"]


def test_extract_tar_refuses_traversal_before_writing_anything(tmp_path):
    archive = tmp_path / "evil.tar.gz"
    archive.write_bytes(tar_of({"ok/file.txt": b"fine", "ok/../../escaped.txt": b"gotcha"}))
    with pytest.raises(DownloadError, match="unsafe path"):
        extract_tar(archive, tmp_path / "dest")
    assert not (tmp_path / "dest").exists() and not (tmp_path / "escaped.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evil.tar.gz"]


def test_sha256_of(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"abc")
    assert sha256_of(path) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_fetch_command_run_as_a_module_prints_a_message_not_a_traceback(tmp_path):
    """``python -m crs_backends.neural.sources``: an error raised in crs_backends.neural.datasets is the same
    SourceError class the command catches, though the command's module also runs as __main__."""
    env = {**os.environ, "CRS_ARENA_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    # quiet: 2 s; the bound below is 10x that or more
    done = subprocess.run(
        [sys.executable, "-m", "crs_backends.neural.sources", "fetch", "--datasets", "../etc"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "refusing the dataset name '../etc'" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "cache").exists()  # nothing was downloaded or created
