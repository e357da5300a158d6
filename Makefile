# Two entry points (see README): `make demo` and `make test`. Everything is installed into .venv
# from the project's own files, so a fresh machine with Python 3.11 and Java 17 needs nothing else
# (`make test` also apt-installs the Debian servers its tests start, when missing and root: chromium for the
# HTML report, postgresql for the PostgreSQL sink, prometheus and promtool for the exporter).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
CHROMIUM ?= /usr/bin/chromium

.PHONY: setup demo test lint bench clean system-deps

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

test: lint system-deps
	$(BIN)/python -m pytest -q

# Debian packages the tests start for real: chromium (the HTML report), postgresql (initdb/postgres for the
# PostgreSQL sink), prometheus (server and promtool for the exporter). Installed only when missing and we are
# root (a fresh CI machine or container); otherwise the tests that need one say how to install it.
SYSTEM_DEPS := chromium:$(CHROMIUM) postgresql:/usr/lib/postgresql prometheus:/usr/bin/promtool
system-deps:
	@missing=""; for dep in $(SYSTEM_DEPS); do pkg=$${dep%%:*}; path=$${dep#*:}; \
		[ -e "$$path" ] || missing="$$missing $$pkg"; done; \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing$$missing (apt-get) for the tests"; \
		apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

# Each benchmark prints its ratio against a baseline measured in the same run (see benchmarks/*.py).
bench: setup
	$(BIN)/python benchmarks/lag_bench.py
	$(BIN)/python benchmarks/logscan_bench.py
	$(BIN)/python benchmarks/audit_bench.py
	$(BIN)/python benchmarks/small_audit_bench.py
	$(BIN)/python benchmarks/epoch_history_bench.py
	$(BIN)/python benchmarks/tui_refresh_bench.py
	$(BIN)/python benchmarks/exporter_bench.py
	$(BIN)/python benchmarks/sandbox_refresh_bench.py

clean:
	-$(BIN)/eosctl sandbox down
	rm -rf .eosctl
