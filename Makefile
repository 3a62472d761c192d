# `make demo` and `make test` work on a fresh machine: they create .venv and install first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast lint install bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/agentq demo

# The linter and the type checker first (agentq/ only, as pyproject.toml configures them).
lint: $(STAMP)
	$(BIN)/ruff check agentq
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest -q

# What a change is first checked with: no worker processes, servers or browsers.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not worker and not slow"

bench: $(STAMP)
	$(BIN)/python bench/steps.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
