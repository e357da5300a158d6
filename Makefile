# Two entry points (see README): `make demo` and `make test`. Everything is installed into .venv
# from the project's own files, so a fresh machine with Python 3.11 and Java 17 needs nothing else.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup demo test lint bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

demo: setup
	$(BIN)/eosctl demo

lint: setup
	$(BIN)/ruff check eosctl auditors tui tests benchmarks

test: lint
	$(BIN)/python -m pytest -q

# Each benchmark prints its ratio against a baseline measured in the same run (see benchmarks/*.py).
bench: setup
	$(BIN)/python benchmarks/lag_bench.py
	$(BIN)/python benchmarks/logscan_bench.py
	$(BIN)/python benchmarks/audit_bench.py
	$(BIN)/python benchmarks/small_audit_bench.py
	$(BIN)/python benchmarks/tui_refresh_bench.py

clean:
	-$(BIN)/eosctl sandbox down
	rm -rf .eosctl
