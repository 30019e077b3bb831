"""Start the real app (`python app.py`) on a free loopback port, and stop it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class AppServer:
    # the app answers its first page 5-15 s after start on two cores (20-25 s beside the other test process): 180 s
    # bounds a hang, not the work
    def __init__(self, db_path: Path, env: dict[str, str] | None = None, startup_timeout: float = 180.0):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.db_path = db_path
        self.log_path = db_path.parent / "app.log"
        self.env = {
            **{
                k: v
                for k, v in os.environ.items()
                if not k.startswith("CRS_LLM_") and k not in ("OPENAI_API_KEY", "GRADIO_ANALYTICS_ENABLED")
            },
            "CRS_ARENA_DB": str(db_path),
            "GRADIO_SERVER_NAME": "127.0.0.1",
            "GRADIO_SERVER_PORT": str(self.port),
            "HF_HUB_OFFLINE": "1",
            # no neural checkpoints unless a test brings them: the app must not find the developer's
            # models, nor start building the small local versions behind a test's back
            "CRS_NEURAL_BUILD": "never",
            "CRS_ARENA_CACHE": str(db_path.parent / "no_models_cache"),
            "CRS_SMALL_MODELS": str(db_path.parent / "no_shipped_models"),  # tests/test_neural_app.py brings them
            "CRS_MODELS_DIR": "",
            "CRS_MODELS_HUB_REPO": "",
            # background scoring writes evaluations on its own clock; tests that count evaluations stay exact
            # without it, and tests/test_background_scoring_app.py turns it on
            "CRS_ARENA_SCORING": "off",
            **(env or {}),
        }
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> AppServer:
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "app.py"], cwd=ROOT, env=self.env, stdout=self._log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"app exited with {self.proc.returncode}:\n{self.log_path.read_text()}")
            try:
                with urllib.request.urlopen(self.url, timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.3)
        self.__exit__()
        raise RuntimeError(f"app did not answer within {self.startup_timeout} s:\n{self.log_path.read_text()}")

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self._log.close()


def scripted_chatcrs_env(fake, data_dir: Path) -> dict[str, str]:
    """An app whose ChatCRS answers from ``fake`` (tests/fake_openai.py) and that finds no research data: the arena
    then has two quick, ready systems (ChatCRS and the retrieval baseline)."""
    return {
        "CRS_LLM_CRS_MODEL": "gpt-4o-mini",
        "CRS_LLM_CRS_BASE_URL": fake.base_url,
        "CRS_LLM_CRS_API_KEY": "sk-test",
        "CRS_DATA_DIR": str(data_dir),
    }
