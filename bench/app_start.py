"""Seconds from `python app.py` to the first HTTP 200, and to a first chat turn.

Runs the app three times with a fresh database each time and reports the median.

    python bench/app_start.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from app_server import free_port


def one_start(tmp: Path, i: int) -> tuple[float, float]:
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CRS_LLM_")},
        "CRS_ARENA_DB": str(tmp / f"bench{i}.db"),
        "GRADIO_SERVER_PORT": str(port),
        "GRADIO_SERVER_NAME": "127.0.0.1",
        "HF_HUB_OFFLINE": "1",
        "GRADIO_ANALYTICS_ENABLED": "False",
    }
    url = f"http://127.0.0.1:{port}/"
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "app.py"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        ready = None
        while time.perf_counter() - start < 120:
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        ready = time.perf_counter() - start
                        break
            except OSError:
                time.sleep(0.1)
        if ready is None:
            raise RuntimeError("app did not start within 120 s")
        from gradio_client import Client

        t = time.perf_counter()
        Client(url, verbose=False).predict("A funny movie for tonight?", "chatcrs", api_name="/chat")
        turn = time.perf_counter() - t
        return ready, turn
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        results = [one_start(Path(d), i) for i in range(3)]
    ready = [r for r, _ in results]
    turns = [t for _, t in results]
    print(f"ready s: {[round(x, 2) for x in ready]}; first chat turn s: {[round(x, 2) for x in turns]}")
    print(f"BENCH app_ready_s {statistics.median(ready):.1f} s target <= 15")
    print(f"BENCH first_chat_turn_s {statistics.median(turns):.1f} s target <= 10")


if __name__ == "__main__":
    main()
