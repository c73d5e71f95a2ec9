# The two commands of the README:
#   make run   - set up .venv and run the main job on its embedded default
#   make test  - set up .venv with everything the tests need and run the whole suite
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --disable-pip-version-check
PIP_INSTALL := $(PIP) install -q -c constraints.txt
LEANLOOP_FIXTURES ?= $(abspath $(CURDIR)/../shared/fixtures)
RUN_DIR ?= build/run
export LEANLOOP_FIXTURES

# Tests and benchmarks run on one thread per process (two cores, shared).
THREADS := OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false

.PHONY: help run test lint format postgres bench clean

help:
	@echo "make run    - install and run the main job (import, export, statistics)"
	@echo "make test   - install everything the tests need, lint, run the test suite"
	@echo "make bench  - run the benchmarks under bench/"

$(BIN)/python:
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "leanloop needs Python >= 3.11"'
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(VENV)/.run-deps: pyproject.toml constraints.txt | $(BIN)/python
	$(PIP_INSTALL) -e .
	@touch $@

$(VENV)/.test-deps: pyproject.toml constraints.txt | $(BIN)/python
	$(PIP_INSTALL) -e '.[postgres,dev]'
	@touch $@ $(VENV)/.run-deps

run: $(VENV)/.run-deps
	$(BIN)/leanloop run --db $(RUN_DIR)/leanloop.db --out $(RUN_DIR)/export

postgres:
	@scripts/ensure-postgres.sh

lint: $(VENV)/.test-deps
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(VENV)/.test-deps
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

test: $(VENV)/.test-deps postgres lint
	$(THREADS) $(BIN)/python -m pytest

bench: $(VENV)/.test-deps
	$(THREADS) $(BIN)/python bench/export.py

clean:
	rm -rf build .pytest_cache .ruff_cache
