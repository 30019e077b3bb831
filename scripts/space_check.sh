#!/usr/bin/env bash
# Start the app the way a Hugging Face Space does, to prove requirements.txt is all it needs:
# a clean virtual environment from requirements.txt alone (no scripts/setup_venv.sh), SYSTEM=spaces and
# SPACE_ID set, a writable /data-like persistent folder, `python app.py`; then one chat turn through
# gradio_client. Bounded: the app gets 300 s to come up, and is stopped at the end whatever happens.
#
#   bash scripts/space_check.sh
#
# CRS_SPACE_CHECK_WHEELS=DIR lets pip take already-built wheels from DIR (e.g. ~/.cache/crs-arena/wheels, the
# llama-cpp-python wheel setup_venv.sh compiled) instead of compiling them again; everything else still comes
# from requirements.txt. Takes a few minutes (the packages are downloaded and installed from scratch).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3.11}"
PORT="${CRS_SPACE_CHECK_PORT:-7991}"
work="$(mktemp -d)"
pid=""
cleanup() {
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

echo "space check: installing requirements.txt into a clean environment ($work/venv)"
"$PYTHON" -m venv "$work/venv"
extra=()
if [ -n "${CRS_SPACE_CHECK_WHEELS:-}" ]; then extra=(--find-links "$CRS_SPACE_CHECK_WHEELS"); fi
requirements=requirements.txt
if ! "$PYTHON" -c "import socket; socket.getaddrinfo('download.pytorch.org', 443)" 2>/dev/null; then
    # a machine that reaches only PyPI: pip would retry the CPU torch index for every package
    echo "space check: download.pytorch.org cannot be reached here; installing without requirements.txt's index line"
    grep -v -E '^\s*--(extra-)?index-url' requirements.txt > "$work/requirements.txt"
    requirements="$work/requirements.txt"
fi
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check "${extra[@]}" -r "$requirements" \
    > "$work/pip.log" 2>&1 || { echo "space check: FAILED to install requirements.txt"; tail -n 30 "$work/pip.log"; exit 1; }

mkdir -p "$work/data"
echo "space check: starting app.py with SPACE_ID set and $work/data as the persistent disk"
env -u CRS_ARENA_DB SYSTEM=spaces SPACE_ID=local/crs-arena-check CRS_ARENA_PERSISTENT_DIR="$work/data" \
    GRADIO_SERVER_NAME=127.0.0.1 GRADIO_SERVER_PORT="$PORT" CRS_NEURAL_BUILD=never HF_HUB_OFFLINE=1 \
    "$work/venv/bin/python" app.py > "$work/app.log" 2>&1 &
pid=$!

for _ in $(seq 1 150); do
    if ! kill -0 "$pid" 2>/dev/null; then echo "space check: FAILED, the app exited:"; tail -n 30 "$work/app.log"; exit 1; fi
    if "$work/venv/bin/python" -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/', timeout=2)" \
        2>/dev/null; then break; fi
    sleep 2
done

"$work/venv/bin/python" - "$PORT" "$work/data" <<'PY'
import pathlib
import sys

from gradio_client import Client

port, data = sys.argv[1], pathlib.Path(sys.argv[2])
client = Client(f"http://127.0.0.1:{port}", verbose=False)
chat, *_ = client.predict("Hi! Any good crime movies?", "retrieval", api_name="/chat")
assert chat and chat[-1]["role"] == "assistant", chat
assert (data / "crs_arena.db").exists(), "the database is not on the persistent disk"
print("space check: OK, a chat turn was answered and stored on the persistent disk")
PY
