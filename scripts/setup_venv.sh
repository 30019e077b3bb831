#!/usr/bin/env bash
# Create (or reuse) the project's virtual environment.
#
# The environment lives outside the clone, in a cache folder keyed by a hash of
# requirements.txt and this script, and .venv is a symlink to it: a fresh clone
# on the same machine (CI) reuses it instead of rebuilding llama.cpp. The
# portable llama-cpp-python wheel is cached on its own, so a change to the
# requirements does not pay for the 4-minute C++ build again.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3.11}"
CACHE="${CRS_ARENA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/crs-arena}"
LLAMA_VERSION="0.3.36"
key="$(cat requirements.txt scripts/setup_venv.sh | sha256sum | cut -c1-16)"
venv="$CACHE/venv-$key"
wheels="$CACHE/wheels"

if [ -e .venv ] && [ ! -L .venv ]; then
    echo "setup: .venv exists and is not the cached environment's link; remove it and run again" >&2
    exit 1
fi

use() {  # link the finished environment; its .complete's time says when a clone last used it (see pruning)
    touch "$venv/.complete" 2>/dev/null || true
    ln -sfn "$venv" .venv
}

if [ -f "$venv/.complete" ] && [ -x "$venv/bin/python" ]; then
    use
    exit 0
fi

# One build at a time per cache (`make run` and `make test` started together on a fresh machine): the second
# waits for the first and then uses what it built.
mkdir -p "$CACHE" "$wheels"
exec 9>"$CACHE/setup.lock"
if ! flock -n 9; then
    echo "setup: another setup is building the environment; waiting for it"
    flock 9
fi
if [ -f "$venv/.complete" ] && [ -x "$venv/bin/python" ]; then
    use
    exit 0
fi

echo "setup: building the virtual environment in $venv (first run only, ~6 minutes)"
logfile="$CACHE/setup-$key.log"
: > "$logfile"
trap 'echo "setup: FAILED; the last lines of $logfile:"; tail -n 40 "$logfile"' ERR
rm -rf "$venv"
"$PYTHON" -m venv "$venv"
pip() { "$venv/bin/python" -m pip --disable-pip-version-check "$@" >>"$logfile" 2>&1; }
pip install -q -U pip

# 1. torch first, so nothing pulls a CUDA build. TORCH_INDEX_URL lets a machine
#    without a local CPU wheel name the CPU index explicitly.
if [ -n "${TORCH_INDEX_URL:-}" ]; then
    pip install -q torch==2.13.0 --index-url "$TORCH_INDEX_URL"
else
    pip install -q torch==2.13.0
fi

# 2. llama-cpp-python: portable x86-64 build (no -march=native, no llava), cached.
if ! ls "$wheels"/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; then
    echo "setup: compiling llama-cpp-python $LLAMA_VERSION (portable, ~4 minutes)"
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" \
        pip wheel -q --no-cache-dir --no-deps "llama-cpp-python==$LLAMA_VERSION" -w "$wheels"
fi

# 3. everything else, with the cached wheel available. The requirements' index options (the CPU torch index a
#    Space reads) are left out: torch is installed already, and a machine may reach only PyPI.
grep -v -E '^\s*--(extra-)?index-url' requirements.txt > "$venv/requirements-pypi.txt"
pip install -q --find-links "$wheels" -r "$venv/requirements-pypi.txt"
use
# Keep the two newest environments, and any other that a clone set up within two days: a clone of an older
# commit may still be running from it. (Under the lock, so no build is half done.)
ls -dt "$CACHE"/venv-* 2>/dev/null | tail -n +3 | while IFS= read -r old; do
    if [ -z "$(find "$old/.complete" -maxdepth 0 -mmin -2880 2>/dev/null)" ]; then
        rm -rf "$old"
    fi
done
echo "setup: done"
