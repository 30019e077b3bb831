"""Shared fixtures: a fresh database per test, the fake OpenAI server, data paths."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from ci_mode import skip_or_fail
from fake_openai import FakeOpenAI

from catalog.catalog import data_dir
from crs_backends import health
from storage.db import close_thread_connections

# no test may reach a remote model by accident
for _var in [v for v in os.environ if v.startswith("CRS_LLM_") or v == "OPENAI_API_KEY"]:
    del os.environ[_var]


@pytest.fixture(autouse=True)
def db_path(tmp_path, monkeypatch) -> Path:
    """Every test gets its own database file, also for code that reads CRS_ARENA_DB."""
    path = tmp_path / "crs_arena.db"
    monkeypatch.setenv("CRS_ARENA_DB", str(path))
    health.forget()  # which systems failed a moment ago is process state: each test starts with none
    yield path
    close_thread_connections()


@pytest.fixture
def fake_openai():
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = data_dir()
    if path is None or not (path / "redial" / "id2info.json").exists():
        skip_or_fail("public research data not found (set CRS_DATA_DIR or place it at ../shared/data)")
    return path


@pytest.fixture(scope="session")
def embedded_model():
    from llm_clients.embedded import get_embedded_model

    return get_embedded_model()
