# harness: every target creates and uses the project venv itself.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_WORKERS ?= auto

.DEFAULT_GOAL := help
.PHONY: help install run test test-gpu lint typecheck golden-update bench primer primer-update clean

help: ## Show this help
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[engine,eval,dev]'
	@touch $(STAMP)

install: $(STAMP) ## Create .venv and install the project with the engine, eval and dev extras (quick when up to date)

run: $(STAMP) ## Run the main job on built-in defaults
	$(BIN)/harness demo

test: $(STAMP) ## Run the CPU test suites in parallel (pytest -n auto)
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) -m "not gpu" suites

test-gpu: $(STAMP) ## Run the gpu-marked tests (skip with a reason when no CUDA)
	$(BIN)/python -m pytest -m gpu -p no:xdist suites

lint: $(STAMP) ## Lint with ruff
	$(BIN)/ruff check harness suites scripts
	$(BIN)/ruff format --check harness suites scripts

typecheck: $(STAMP) ## Type-check harness/ with mypy --strict and pyright
	$(BIN)/mypy --strict harness
	$(BIN)/pyright harness

golden-update: $(STAMP) ## Regenerate golden files on purpose (never in CI)
	$(BIN)/python -m pytest -p no:xdist suites --update-golden

primer: $(STAMP) ## Run the override checker on pinned large projects; diff against golden/primer (needs the package index)
	$(BIN)/python scripts/primer_overrides.py $(PRIMER_ARGS)

primer-update: $(STAMP) ## Rewrite golden/primer on purpose (never in CI)
	$(BIN)/python scripts/primer_overrides.py --update $(PRIMER_ARGS)

clean: ## Remove the venv and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
