# harness: every target creates and uses the project venv itself.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_WORKERS ?= auto
REPORTS := reports
BENCH ?= $(sort $(wildcard scripts/bench_*.py))

.DEFAULT_GOAL := help
.PHONY: help install run test test-gpu lint typecheck golden-update bench primer primer-update fidelity repro-gpu clean

help: ## Show this help
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[engine,eval,dev]'
	@touch $(STAMP)

install: $(STAMP) ## Create .venv and install the project with the engine, eval and dev extras (quick when up to date)

run: $(STAMP) ## Run the main job on built-in defaults (harness hunt; reports in reports/)
	$(BIN)/harness hunt

test: $(STAMP) ## Run the CPU test suites in parallel (pytest -n auto), slow ones included
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) -m "not gpu" suites

test-gpu: $(STAMP) ## GPU tests: reports/junit-gpu.xml, reports/memory-gpu.json; without CUDA says "0 GPU tests ran"
	@mkdir -p $(REPORTS)
	@$(BIN)/python -m pytest -p ci.pytest_gpu_gate -p no:xdist -q -m gpu suites \
		--junitxml=$(REPORTS)/junit-gpu.xml --gpu-report=$(REPORTS)/memory-gpu.json

lint: $(STAMP) ## Lint with ruff
	$(BIN)/ruff check harness suites scripts ci
	$(BIN)/ruff format --check harness suites scripts ci

typecheck: $(STAMP) ## Type-check harness/ and ci/ with mypy --strict and pyright
	$(BIN)/mypy --strict harness ci
	$(BIN)/pyright harness ci

VLLM_FIDELITY_VERSION ?= 0.9.0

fidelity: $(STAMP) ## Differential tests of the reference against vLLM's own source (pip-fetches 0.9.0 once into ~/.cache/harness; not in make test)
	$(BIN)/harness fidelity --vllm-version $(VLLM_FIDELITY_VERSION)
	HARNESS_VLLM_SRC="$$($(BIN)/python -m harness.fidelity.source $(VLLM_FIDELITY_VERSION))" \
		$(BIN)/python -m pytest -p no:xdist -q suites/fidelity/test_bites_vllm.py

VLLM_PYTHON ?= python3
repro-gpu: ## Real vLLM on a GPU: gsm8k with FlashInfer + the num_blocks scaling check (VLLM_PYTHON=interpreter with vllm, lm-eval, nvidia-ml-py)
	PYTHON="$(VLLM_PYTHON)" bash scripts/repro_flashinfer_oom.sh --check-scaling --out reports/repro

golden-update: $(STAMP) ## Regenerate golden files on purpose (never in CI)
	$(BIN)/python -m pytest -p no:xdist suites --update-golden

primer: $(STAMP) ## Run the override checker on pinned large projects; diff against golden/primer (needs the package index)
	$(BIN)/python scripts/primer_overrides.py $(PRIMER_ARGS)

primer-update: $(STAMP) ## Rewrite golden/primer on purpose (never in CI)
	$(BIN)/python scripts/primer_overrides.py --update $(PRIMER_ARGS)

bench: $(STAMP) ## Run the benchmarks in scripts/ (BENCH=scripts/bench_x.py for one); they print ratios
	@set -e; for script in $(BENCH); do echo "== $$script"; $(BIN)/python $$script; done

clean: ## Remove the venv, caches and reports
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache $(REPORTS)
