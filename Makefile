# Each target sets itself up from nothing: the virtual environment is created
# (or reused from the cache, see scripts/setup_venv.sh) before it runs.
SHELL := /bin/bash
PY := .venv/bin/python
export TOKENIZERS_PARALLELISM ?= false

.PHONY: run test test-fast test-fresh-clone lint bench setup browser clean

setup:
	@bash scripts/setup_venv.sh

browser:
	@bash scripts/ensure_chromium.sh

# the small local versions of KBRD/BARCOR/UniCRS are shipped (assets/models/small-v<N>): nothing is trained here
run: setup
	$(PY) app.py

# lint comes first: a lint or type error fails `make test` (and so CI) before pytest starts. Two processes, a test
# file each at a time (--dist loadfile: a module's app server or model is built once, in one process); the 30
# slowest tests are listed at the end (docs/operations.md, tests, says where the time goes)
PYTEST_ARGS ?= -n 2 --dist loadfile --durations=30
test: setup browser lint
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(PY) -m pytest -q $(PYTEST_ARGS)

# the edit-test loop: no app, no browser, no model (the `slow` marker, tests/conftest.py), no lint
test-fast: setup
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(PY) -m pytest -q -n 2 -m "not slow"

# the whole suite as a fresh clone runs it (no research data beside it, not CI): what needs the data skips, nothing
# fails (docs/configuration.md, CRS_DATA_DIR=none; tests/test_fresh_clone.py makes the same run on the data readers)
test-fresh-clone: setup
	CRS_DATA_DIR=none CI= HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(PY) -m pytest -q $(PYTEST_ARGS)

# settings in pyproject.toml; `.venv/bin/ruff format .` fixes what the format check reports
lint: setup
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	$(PY) -m mypy

bench: setup
	@echo "bench: runs every bench/*.py one after another; this takes a long time (one script: $(PY) bench/<name>.py)"
	@for f in bench/*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

clean:
	rm -rf .venv .pytest_cache .mypy_cache .ruff_cache data/test_*.db
