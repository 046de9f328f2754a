# harness: every target creates and uses the project venv itself, or, with PYTHON_ENV=system, an
# interpreter that is already set up (vLLM's docker image, a CI agent): nothing is installed then.
SHELL := /bin/bash
comma := ,
PYTHON ?= python3
PYTHON_ENV ?= venv
VENV := .venv
CONSTRAINTS ?= constraints.txt
EXTRAS ?= engine,eval,dev,triton
WITH ?=
PYTEST_WORKERS ?= auto
REPORTS := reports
BENCH ?= $(sort $(wildcard scripts/bench_*.py))
REQUIRE_GPU ?=
COMPAT_VLLM ?= 0.9.0 0.34.0

ifeq ($(PYTHON_ENV),venv)
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(subst $(comma),-,$(EXTRAS))-$(notdir $(CONSTRAINTS))$(if $(WITH),-with)
else ifeq ($(PYTHON_ENV),system)
PY := $(PYTHON)
STAMP :=
else
$(error PYTHON_ENV=$(PYTHON_ENV): use venv (build .venv here, the default) or system ($(PYTHON) as it is))
endif
HARNESS := $(PY) -m harness.cli
# REQUIRE_GPU goes to the gate as it is: 1/true/yes/on (any case) turn it on, 0/false/no/off or
# nothing leave it off, any other word is a usage error (ci/pytest_gpu_gate.py switch()). One
# shell word whatever it holds: each ' in it is written '\'' (a quote ended the word, and
# REQUIRE_GPU="1' || true '" turned a failed gate into exit 0).
GPU_GATE_ARGS := '--require-gpu=$(subst ','\'',$(REQUIRE_GPU))'

.DEFAULT_GOAL := help
.PHONY: help install run test test-integration test-adapter test-gpu test-compat overrides lint typecheck golden-update bench primer primer-update fidelity repro-gpu clean

help: ## Show this help
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}'

$(VENV)/.installed-%: pyproject.toml $(CONSTRAINTS)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@$(PY) ci/install_guard.py '$(EXTRAS)' -c $(CONSTRAINTS) -e '.[$(EXTRAS)]' $(WITH)
	@# This checkout was the distribution "harness" before: drop that editable install first (its
	@# pytest plugins would register twice; uninstalled afterwards, it takes the shared
	@# bin/harness script with it).
	@if $(PY) -m pip show harness 2>/dev/null | grep -qx "Editable project location: $(CURDIR)"; then \
		$(PY) -m pip uninstall -q -y harness; fi
	@rm -rf harness.egg-info
	$(PY) -m pip install -q -c $(CONSTRAINTS) -e '.[$(EXTRAS)]' $(WITH)
	@touch $@

install: $(STAMP) ## Install the project with EXTRAS (engine,eval,dev,triton) pinned by CONSTRAINTS (constraints.txt) into .venv; PYTHON_ENV=system: nothing

run: $(STAMP) ## Run the main job on built-in defaults (harness hunt; reports in reports/)
	$(HARNESS) hunt

test: $(STAMP) ## The fast, hermetic tier: CPU suites in parallel, no network, no nested make/pip
	$(PY) -m pytest -n $(PYTEST_WORKERS) -m "not gpu and not integration" suites

test-integration: $(STAMP) ## The slow tier: resolution, pre-commit, lm-eval CLI runs, full-scale runs
	$(PY) -m pytest -n $(PYTEST_WORKERS) -m "integration and not gpu and not vllm_trees" suites

test-adapter: $(STAMP) ## The engine adapter on vLLM 0.9.0's and 0.34.0's own builders (pip-fetches both wheels once into ~/.cache/harness)
	$(PY) -m pytest -n $(PYTEST_WORKERS) -m "vllm_trees" suites/adapter

test-gpu: $(STAMP) ## GPU tests: reports/junit-gpu.xml, reports/memory-gpu.json; "0 GPU tests ran" without CUDA; REQUIRE_GPU=1 (true, yes, on) fails then
	@mkdir -p $(REPORTS)
	@$(PY) -m pytest -p ci.pytest_gpu_gate -p no:xdist -q -m gpu suites $(GPU_GATE_ARGS) \
		--junitxml=$(REPORTS)/junit-gpu.xml --gpu-report=$(REPORTS)/memory-gpu.json

test-compat: ## CPU suites on each vLLM release's pins (COMPAT_VLLM: 0.9.0 0.34.0; ci/constraints-vllm-V.txt, PyPI's CUDA torch run on CPU) in .venv-compat-V
	@set -e; for version in $(COMPAT_VLLM); do \
		venv=.venv-compat-$$version; constraints=ci/constraints-vllm-$$version.txt; \
		test -f $$constraints || { echo "test-compat: no $$constraints (COMPAT_VLLM=$(COMPAT_VLLM))" >&2; exit 2; }; \
		test -x $$venv/bin/python || $(PYTHON) -m venv $$venv; \
		echo "== test-compat: vLLM $$version's pins ($$constraints) in $$venv"; \
		$$venv/bin/python -m pip install -q -c $$constraints -e '.[engine,eval,dev]'; \
		$$venv/bin/python -c 'import torch; print("test-compat: torch", torch.__version__)'; \
		$$venv/bin/python -m pytest -n $(PYTEST_WORKERS) -m "not gpu" suites; \
	done

overrides: $(STAMP) ## The override checker on harness/ (SINCE=REF: only the findings HEAD adds since REF)
	$(HARNESS) overrides $(if $(SINCE),--since $(SINCE)) harness

lint: $(STAMP) ## Lint with ruff
	$(PY) -m ruff check harness suites scripts ci
	$(PY) -m ruff format --check harness suites scripts ci

typecheck: $(STAMP) ## Type-check harness/ and ci/ with mypy --strict and pyright
	$(PY) -m mypy --strict harness ci
	$(PY) -m pyright harness ci

VLLM_FIDELITY_VERSIONS ?= 0.9.0 0.34.0

fidelity: $(STAMP) ## Differential tests of the reference against vLLM 0.9.0's and 0.34.0's own source (pip-fetches each once into ~/.cache/harness; not in make test)
	@status=0; for version in $(VLLM_FIDELITY_VERSIONS); do \
		$(HARNESS) fidelity --vllm-version $$version || status=1; done; exit $$status
	$(PY) -m pytest -p no:xdist -q -m "integration and not gpu" suites/fidelity

VLLM_PYTHON ?= python3
repro-gpu: ## Real vLLM on a GPU: gsm8k with FlashInfer + the num_blocks scaling check (VLLM_PYTHON=interpreter with vllm, lm-eval, nvidia-ml-py)
	PYTHON="$(VLLM_PYTHON)" bash scripts/repro_flashinfer_oom.sh --check-scaling --out reports/repro

golden-update: $(STAMP) ## Regenerate golden files on purpose (never in CI)
	$(PY) -m pytest -p no:xdist suites --update-golden

primer: $(STAMP) ## Run the override checker on pinned large projects; diff against golden/primer (needs the package index)
	$(PY) scripts/primer_overrides.py $(PRIMER_ARGS)

primer-update: $(STAMP) ## Rewrite golden/primer on purpose (never in CI)
	$(PY) scripts/primer_overrides.py --update $(PRIMER_ARGS)

bench: $(STAMP) ## Run the benchmarks in scripts/ (BENCH=scripts/bench_x.py for one); they print ratios
	@set -e; for script in $(BENCH); do echo "== $$script"; $(PY) $$script; done

clean: ## Remove the venv, caches and reports
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache $(REPORTS)
