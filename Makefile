# `make test` and `make run` set everything up themselves on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test lint typecheck format run demo clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,semantic,multilingual]'
	touch $(STAMP)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

test: lint typecheck
	$(BIN)/python -m pytest

# The MCP server over streamable HTTP on loopback, with the default database; it
# prints the client configuration to paste. Stop it with Ctrl-C.
run: install
	$(BIN)/chronomem serve --transport http --host 127.0.0.1 --port 8765

demo: install
	$(BIN)/python -m memory

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .ruff_cache
