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
	$(BIN)/ruff check src tests benchmarks examples

.PHONY: typecheck
typecheck: $(STAMP) ## mypy strict on src, tests, benchmarks and examples
	$(BIN)/mypy

.PHONY: bench
bench: $(STAMP) ## Run every benchmark (prints tables, writes benchmarks/results/*.json)
	$(BIN)/python -m benchmarks

.PHONY: all
all: lint typecheck test ## Lint, type check and test

.PHONY: help
help:
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'
