"""Several people start chats with different neural systems at the same moment in a fresh app: every load succeeds.

transformers imports its model classes lazily, and that import is not thread-safe: before loads were made one at a
time (``llm_clients.sentence_encoder.MODEL_LOAD_LOCK``), a fresh app that loaded BARCOR and UniCRS in two threads
at once told one person ``BARCOR's model code failed to import (transformers)``. A fresh interpreter is needed (in
this test process transformers is already imported), so the loads run in a subprocess that imports the app's
modules first, as a running app has: there, without the lock, KBRD's load failed in 2 of 2 runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from crs_backends.neural import names

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import json, threading
import ui.blocks  # what a running app has imported before anyone chats (without it the race did not show)
from crs_backends import registry

systems = ("kbrd", "barcor", "unicrs", "retrieval")
start = threading.Barrier(len(systems))
results = {}

def load(system_id):
    start.wait()
    try:
        results[system_id] = "ok: " + registry.get_system(system_id).info.variant
    except Exception as e:
        results[system_id] = f"{type(e).__name__}: {e}"

threads = [threading.Thread(target=load, args=(s,)) for s in systems]
for t in threads:
    t.start()
for t in threads:
    t.join(600)
print(json.dumps(results))
"""


def test_neural_systems_load_concurrently_in_a_fresh_process(tmp_path):
    shipped = names.SHIPPED_SMALL_ROOT
    assert names.small_set_complete(shipped), f"the shipped small set is missing: {shipped}"
    env = {
        **os.environ,
        "CRS_ARENA_CACHE": str(tmp_path / "cache"),
        "CRS_SMALL_MODELS": str(shipped),
        "CRS_NEURAL_BUILD": "never",
        "CRS_MODELS_DIR": "",
        "CRS_MODELS_HUB_REPO": "",
        "PYTHONPATH": str(ROOT),
    }
    # quiet: 18-25 s (three neural systems loaded in a fresh interpreter); the bound below is 10x that or more
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(results) == {"kbrd", "barcor", "unicrs", "retrieval"}
    assert all(value.startswith("ok") for value in results.values()), results
