# Two entry points (see README): `make demo` and `make test`. Everything is installed into .venv
# from the project's own files, so a fresh machine with Python 3.11 and Java 17 needs nothing else
# (`make test` also apt-installs the Debian servers its tests start, when missing and root: chromium for the
# HTML report, postgresql for the PostgreSQL sink, prometheus and promtool for the exporter).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# A venv of its own for the Quix Streams stage the tests run (tests/quix): quixstreams pins a confluent-kafka
# older than the project's, so it can't share .venv.
QUIX_VENV  ?= .venv-quix
QUIX_STAMP := $(QUIX_VENV)/.installed
CHROMIUM ?= /usr/bin/chromium

.PHONY: setup demo test test-deps check lint bench bench-long clean system-deps quix-venv jars toxiproxy

# The content check's native record walk (eosctl/cluster/recordwalk.c, plain C, no Python headers); without a
# C compiler eosctl does the same in numpy, ~10x slower (docs/benchmarks.md).
NATIVE := eosctl/cluster/_recordwalk.so

setup: $(STAMP) $(NATIVE)

$(NATIVE): eosctl/cluster/recordwalk.c
	$(CC) -O2 -shared -fPIC -o $@ $< || echo "no C compiler: the content check decodes records with numpy"

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

quix-venv: $(QUIX_STAMP)

$(QUIX_STAMP): tests/quix/requirements.txt
	$(PYTHON) -m venv $(QUIX_VENV)
	$(QUIX_VENV)/bin/python -m pip install -q -r tests/quix/requirements.txt
	touch $(QUIX_STAMP)

demo: setup
	$(BIN)/eosctl demo

lint: setup
	$(BIN)/ruff check eosctl auditors tui tests benchmarks
	$(BIN)/mypy

# Three xdist workers (the suite waits on brokers and children more than it computes: on two cores three workers
# kept them 64% busy, 1,199 s of CPU in a 940 s `.ci/run`). TEST_WORKERS=4 took a quiet machine's `.ci/run` to
# 759-839 s, but loaded it to 11-12 and met a test race in each of three runs (tests/README.md, ci24-ci28):
# three stays the default until four has run green as often. Each shared server's tests are one group on one
# worker (tests/support/workers.py). TEST_WORKERS=0 runs one process.
TEST_WORKERS ?= 3
test:
	@$(MAKE) --no-print-directory -j4 test-deps
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder

# What the suite needs, made side by side on a fresh machine (pip, apt, Maven and the Go build of Toxiproxy wait
# on the network or on one core each): minutes off a fresh clone's `make test`.
test-deps: lint system-deps $(QUIX_STAMP) jars toxiproxy

# The quick way in (under 5 minutes on 2 cores): lint, the unit tests and the scripted-broker tests (tests/kafka
# against tests/kafkasim), no JVM. Tests that ask for a JVM fixture are marked `jvm` at collection and left
# out; EOSCTL_TEST_NO_JVM=1 fails any test that starts one anyway (tests/support/nojvm.py).
check: lint
	EOSCTL_TEST_NO_JVM=1 $(BIN)/python -m pytest -q -m "not jvm" tests/unit tests/kafka

# Apache Kafka (the suite's reference broker, 4.x and 3.9) from Maven Central, by the project's pom
# (eosctl/sandbox/jvm/kafka.pom.xml) into ~/.cache/eosctl/jars: once per machine, reused afterwards; likewise
# Flink and its Kafka connector (flink.pom.xml), Kafka Connect with Debezium's JDBC sink (connect.pom.xml),
# MirrorMaker 2 (mirror.pom.xml),
# Spark's Kafka source (spark-kafka.pom.xml), Delta Lake for Spark (spark-delta.pom.xml) and PostgreSQL's JDBC
# driver for Spark's JDBC source (spark-jdbc.pom.xml), for the tests that run them.
KAFKA_VERSIONS ?= 4.4.0 3.9.1
jars: setup system-deps
	@for v in $(KAFKA_VERSIONS); do $(BIN)/python -c "from eosctl.sandbox import maven; maven.jars('kafka', '$$v')" \
		|| exit 1; done
	@for p in flink connect mirror spark-kafka spark-delta spark-jdbc; do \
		$(BIN)/python -c "from eosctl.sandbox import maven; maven.jars('$$p')" || exit 1; done

# Toxiproxy (Shopify's TCP fault proxy, a Go binary driven over HTTP) for the network fault tests
# (tests/integration/test_network_faults.py): built once per machine with `go install` from the Go module
# proxy, at a pinned version, into ~/.cache/eosctl/bin; skipped when that binary is there.
TOXIPROXY_VERSION ?= v2.12.0
TOXIPROXY := $(HOME)/.cache/eosctl/bin/toxiproxy-server-$(TOXIPROXY_VERSION)
GO ?= $(shell command -v go || echo /usr/local/go/bin/go)
toxiproxy: $(TOXIPROXY)

$(TOXIPROXY):
	@mkdir -p $(dir $@)
	@tmp=$$(mktemp -d) && GOBIN=$$tmp $(GO) install github.com/Shopify/toxiproxy/v2/cmd/server@$(TOXIPROXY_VERSION) \
		&& mv $$tmp/server $@ && rmdir $$tmp

# Debian packages the tests start for real: chromium (the HTML report), postgresql (initdb/postgres for the
# PostgreSQL sink), prometheus (server and promtool for the exporter). Installed only when missing and we are
# root (a fresh CI machine or container); otherwise the tests that need one say how to install it.
SYSTEM_DEPS := chromium:$(CHROMIUM) postgresql:/usr/lib/postgresql prometheus:/usr/bin/promtool \
	maven:/usr/bin/mvn openjdk-17-jdk-headless:/usr/lib/jvm/java-17-openjdk-amd64/bin/java
system-deps:
	@missing=""; for dep in $(SYSTEM_DEPS); do pkg=$${dep%%:*}; path=$${dep#*:}; \
		[ -e "$$path" ] || missing="$$missing $$pkg"; done; \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing$$missing (apt-get) for the tests"; \
		apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

# Each benchmark prints its ratio against a baseline measured in the same run (see benchmarks/*.py).
# Every script in benchmarks/ but the ones that take hours (docs/benchmarks.md names both lists; a test
# checks that they agree): a new benchmark is in `make bench` by being there.
BENCH_LONG := scale_bench.py
BENCHES := $(filter-out $(addprefix benchmarks/,$(BENCH_LONG)),$(sort $(wildcard benchmarks/*_bench.py)))
# The import-cost table in docs/imports.md is measured first: it takes a few minutes and needs no broker.
bench: setup
	@set -e; echo "== benchmarks/import_costs.py"; $(BIN)/python benchmarks/import_costs.py
	@set -e; for b in $(BENCHES); do echo "== $$b"; $(BIN)/python $$b; done

bench-long: setup
	@set -e; for b in $(addprefix benchmarks/,$(BENCH_LONG)); do echo "== $$b"; $(BIN)/python $$b; done

clean:
	-$(BIN)/eosctl sandbox down
	rm -rf .eosctl
