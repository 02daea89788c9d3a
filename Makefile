# The project's tasks; .ci/run uses the same targets. PYTHON: the interpreter with the package
# and its test extras installed (`pip install -e ".[test]"`).
PYTHON ?= python3
SOURCES = cuda_llm_lsp tests benchmarks

.PHONY: help test test-slow test-all test-unit test-lsp lint format imports types gpu ci

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/'

test:  ## README's quick tier: every CPU test but the slow and editor ones, in parallel
	$(PYTHON) -m pytest -ra -n auto -m "not slow and not editor"

test-slow:  ## the slow and editor tiers (nvcc builds, Ray, suites, real Neovim and VS Code)
	$(PYTHON) -m pytest -ra -n 2 -m "slow or editor"

test-all:  ## every CPU test (about 35 minutes of CPU; GPU tests skip with the reason)
	$(PYTHON) -m pytest -ra -n auto

test-unit:  ## the unit tests alone
	$(PYTHON) -m pytest -q tests/unit

test-lsp:  ## the language server over stdio
	$(PYTHON) -m pytest -q tests/lsp

lint: format imports types  ## ruff, formatting, import contracts, mypy
	$(PYTHON) -m ruff check $(SOURCES)

format:  ## the formatter decides layout: fails on a file it would change
	$(PYTHON) -m ruff format --check $(SOURCES)

imports:  ## the layers of docs/design.md and the front ends' contract (pyproject.toml)
	lint-imports

types:  ## mypy on the package
	$(PYTHON) -m mypy cuda_llm_lsp

gpu:  ## every GPU test, on a machine with a GPU (benchmarks/gpu_all.sh)
	bash benchmarks/gpu_all.sh tests

ci:  ## CI on a fresh clone: installs, then test, lint and the extension (.ci/run)
	bash .ci/run
