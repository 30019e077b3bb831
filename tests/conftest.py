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

# CRS_TEST_BLAS_THREADS=1 (or 2, …): numpy's BLAS limited to that many threads in the test process (threadpoolctl),
# which reorders sums the way another CPU does: the suite must pass either way (the machine's OPENBLAS_* stay as set)
_BLAS_THREADS = os.environ.get("CRS_TEST_BLAS_THREADS", "").strip()
_blas_limit = None
if _BLAS_THREADS:
    from threadpoolctl import threadpool_limits

    _blas_limit = threadpool_limits(limits=int(_BLAS_THREADS), user_api="blas")


def pytest_report_header(config) -> str:
    from threadpoolctl import threadpool_info

    blas = [f"{i['internal_api']} {i['num_threads']} thread(s)" for i in threadpool_info() if i["user_api"] == "blas"]
    return (
        "BLAS: "
        + (", ".join(blas) or "none loaded")
        + (f" (CRS_TEST_BLAS_THREADS={_BLAS_THREADS})" if _BLAS_THREADS else "")
    )


# The slow tier: modules that start the app or a browser, load a model (the embedded LLM, MiniLM, torch training) or
# run command lines in fresh interpreters. `make test` runs everything; `make test-fast` (pytest -m "not slow") the
# rest, for the edit-test loop. A new module that does any of these belongs here (its reason beside it).
SLOW_MODULES = {
    "test_app": "the app",
    "test_arena_app": "the app",
    "test_background_scoring_app": "the app",
    "test_bad_input": "the app",
    "test_browser": "the app and a browser",
    "test_browser_flow": "the app and a browser",
    "test_chatcrs": "the embedded model",
    "test_chatcrs_embedded": "the embedded model",
    "test_chatcrs_reading": "the embedded model",
    "test_command_lines": "command lines in fresh interpreters",
    "test_concurrent_loads": "fresh interpreters loading the neural systems",
    "test_conformance": "workers in fresh interpreters",
    "test_crash_and_space": "the app, killed and restarted",
    "test_debate": "the embedded model",
    "test_download": "command lines in fresh interpreters",
    "test_factor_judge": "the embedded model",
    "test_fresh_clone": "a pytest run in a fresh interpreter, as a fresh clone runs it",
    "test_hub_restore": "the app restarted over a restored database",
    "test_human_ratings": "calibration refits and the research data",
    "test_judge_app": "the app",
    "test_llm_embedded": "the embedded model",
    "test_barcor_small": "MiniLM and torch training",
    "test_neural_app": "the app with the small neural systems",
    "test_neural_barcor": "torch training",
    "test_neural_kbrd": "torch training",
    "test_neural_policy": "the small neural systems",
    "test_neural_served_inputs": "torch models",
    "test_neural_system": "the small neural systems",
    "test_neural_train_cli": "torch training",
    "test_neural_training": "torch training",
    "test_neural_unicrs": "torch training",
    "test_pipeline": "the embedded model",
    "test_preferences": "the embedded model",
    "test_proxy_minilm": "MiniLM",
    "test_remote_crs_app": "the app",
    "test_reporting": "the embedded model",
    "test_role_precedence": "the embedded model",
    "test_setup_venv": "the setup script",
    "test_simulator_app": "the app",
    "test_space_publish": "uploads to a local Hub in fresh interpreters",
    "test_simulator_embedded": "the embedded model",
    "test_systems_file": "command lines in fresh interpreters",
    "test_unicrs_smollm": "torch training on the frozen SmolLM2",
    "test_uploads_and_limits": "the research data, imported and scored",
    "test_worker": "workers and the app",
    "test_worker_asgi": "workers in fresh interpreters",
}


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        if item.path.stem in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


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
