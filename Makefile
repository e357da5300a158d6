# Two entry points (see README): `make demo` and `make test`. Everything is installed into .venv
# from the project's own files, so a fresh machine with Python 3.11 and Java 17 needs nothing else
# (`make test` also apt-installs Debian's chromium, for the HTML report's browser tests, when root).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
CHROMIUM ?= /usr/bin/chromium

.PHONY: setup demo test lint bench clean chromium

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

test: lint chromium
	$(BIN)/python -m pytest -q

# The HTML report's tests render it in headless Chromium (Debian's package). Installed here only when it is
# missing and we are root (a fresh CI machine or container); otherwise those tests say how to install it.
chromium:
	@if [ ! -x $(CHROMIUM) ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing chromium (apt-get) for the HTML report tests"; \
		apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	fi

# Each benchmark prints its ratio against a baseline measured in the same run (see benchmarks/*.py).
bench: setup
	$(BIN)/python benchmarks/lag_bench.py
	$(BIN)/python benchmarks/logscan_bench.py
	$(BIN)/python benchmarks/audit_bench.py
	$(BIN)/python benchmarks/small_audit_bench.py
	$(BIN)/python benchmarks/epoch_history_bench.py
	$(BIN)/python benchmarks/tui_refresh_bench.py

clean:
	-$(BIN)/eosctl sandbox down
	rm -rf .eosctl
