"""`eosctl audit --incremental` and the exporter's continuous audit on state sinks (issue 51): an upsert and
an aggregate table in DuckDB on the session's broker (Apache Kafka 4.4), the incremental verdict the full
audit's after new records with updates, tombstones, aborted transactions and one left open then committed.

The source: two partitions (key kN in partition N % 2), one transactional producer:

  round 1: txn A commits k0..k7 {"v": 1}; txn B aborts k1 {"v": 99}
  round 2: txn C commits k2 {"v": 2}, k3 tombstone, k4 {"v": 2}, k0 {"v": 3}; txn D aborts k5 {"v": 55};
           txn E opens k6 {"v": 7} (left open: partition 0's LSO stays there)
  round 3: txn E commits; txn F commits k0 {"v": 4}, k7 {"v": 2}
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import duckdb
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.helpers import eosctl
from tests.support.markers import markers_written

pytestmark = pytest.mark.integration


class Source:
    """The topic and its transactional writer (one transaction left open between rounds 2 and 3)."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.topic = "stateinc" + uuid.uuid4().hex[:8]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        new = NewTopic(self.topic, num_partitions=2, replication_factor=1)
        admin.create_topics([new])[self.topic].result(30)
        self.producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{self.topic}-w",
                                  "transaction.timeout.ms": 600_000})
        self.producer.init_transactions(30)
        self.open = False

    def txn(self, records: list[tuple[str, dict | None]], end: str) -> None:
        self.producer.begin_transaction()
        for key, value in records:
            self.producer.produce(self.topic, key=key.encode(), partition=int(key[1:]) % 2,
                                  value=None if value is None else json.dumps(value).encode())
        self.producer.flush(30)
        if end == "commit":
            self.producer.commit_transaction(30)
        elif end == "abort":
            self.producer.abort_transaction(30)
        else:
            self.open = True
            return
        self.settle()

    def commit_open(self) -> None:
        self.producer.commit_transaction(30)
        self.open = False
        self.settle()

    def settle(self) -> None:
        """The audit that follows reads the log with this transaction's markers in it."""
        markers_written(self.bootstrap, f"{self.topic}-w")


@pytest.fixture
def source(bootstrap: str) -> Any:
    s = Source(bootstrap)
    yield s
    if s.open:
        s.producer.abort_transaction(30)


def write_table(path: Path, table: str, column: str, rows: dict[str, int]) -> None:
    """The sink's rows now (the table replaced as a writer's upserts would leave it)."""
    con = duckdb.connect(str(path))
    con.execute(f"CREATE OR REPLACE TABLE {table} (id VARCHAR PRIMARY KEY, {column} BIGINT)")
    con.executemany(f"INSERT INTO {table} VALUES (?, ?)", list(rows.items()))
    con.close()


def config(tmp_path: Path, bootstrap: str, topic: str, name: str, sink: str) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(f'[clusters.c]\nbootstrap_servers = "{bootstrap}"\n\n[pipelines.p]\n'
                    f'source_topics = ["{topic}"]\n\n[pipelines.p.sink]\n{sink}')
    return path


UPSERT = ('mode = "upsert"\ntable = "state"\nkey_column = "id"\n'
          '[pipelines.p.sink.value_fields]\nv = "value.v"\n')
COUNT = 'mode = "aggregate"\ntable = "counts"\nkey_column = "id"\naggregate = {fn = "count", column = "n"}\n'


def audit(path: Path, *extra: str) -> tuple[int, dict]:
    r = eosctl("audit", "-c", str(path), "--format", "json", *extra)
    assert r.exit_code in (0, 1), r.output
    return r.exit_code, json.loads(r.stdout)


def same_verdict(path: Path, state: Path) -> tuple[dict, dict]:
    """The incremental audit and a full one, which must agree on every finding and partition."""
    code_inc, inc = audit(path, "--incremental", str(state))
    code_full, full = audit(path)
    assert code_inc == code_full
    assert inc["findings"] == full["findings"]
    assert inc["partitions"] == full["partitions"]
    assert inc["root_causes"] == full["root_causes"]
    return inc, full


def kinds(report: dict) -> list[tuple]:
    return [(f["kind"], f["partition"], f.get("key"), f.get("offsets")) for f in report["findings"]]


def test_incremental_upsert_and_aggregate_audits_agree_with_full_ones(source, bootstrap, tmp_path):
    db = tmp_path / "sink.duckdb"
    upsert = config(tmp_path, bootstrap, source.topic, "upsert", f'duckdb = "{db}"\n{UPSERT}')
    counts = config(tmp_path, bootstrap, source.topic, "count", f'duckdb = "{db}"\n{COUNT}')
    ustate, cstate = tmp_path / "upsert.state", tmp_path / "count.state"

    source.txn([(f"k{i}", {"v": 1}) for i in range(8)], "commit")
    source.txn([("k1", {"v": 99})], "abort")
    write_table(db, "state", "v", {f"k{i}": 1 for i in range(8)})
    write_table(db, "counts", "n", {f"k{i}": 1 for i in range(8)})
    for path, state in ((upsert, ustate), (counts, cstate)):
        inc, full = same_verdict(path, state)
        assert (inc["verdict"], inc["engine"]["incremental"]["full"]) == ("pass", True)
        assert inc["engine"]["incremental"]["reason"] == "no state yet"

    # Round 2: updates, a tombstone, an aborted transaction, an open one.
    source.txn([("k2", {"v": 2}), ("k3", None), ("k4", {"v": 2}), ("k0", {"v": 3})], "commit")
    source.txn([("k5", {"v": 55})], "abort")
    source.txn([("k6", {"v": 7})], "open")
    # k0, k2 updated; k3 kept after its tombstone; k4 stale; k5 the aborted value; k6 the open one; k7 lost;
    # k99 no record has.
    write_table(db, "state", "v", {"k0": 3, "k1": 1, "k2": 2, "k3": 1, "k4": 1, "k5": 55, "k6": 7, "k99": 5})
    # k3 lost its one committed record, k5 counted with its aborted one, k7 its one record twice.
    write_table(db, "counts", "n", {"k0": 2, "k1": 1, "k2": 2, "k3": 0, "k4": 2, "k5": 2, "k6": 1, "k7": 2})
    inc, full = same_verdict(upsert, ustate)
    assert not inc["engine"]["incremental"]["full"]
    # partition 0: offsets 5-9 (3 records, a marker, the open one), partition 1: 7-10 (2 records, 2 markers)
    assert inc["engine"]["incremental"]["new_offsets"] == 9
    assert kinds(inc) == [
        ("unknown_key", None, "k99", None),
        ("stale_value", 0, "k4", [2, 6]),
        ("uncommitted_value", 0, "k6", [9, 3]),
        ("missing_key", 1, "k7", [3]),
        ("resurrected_key", 1, "k3", [1, 7]),
        ("aborted_value", 1, "k5", [9, 2]),
    ]
    inc, full = same_verdict(counts, cstate)
    assert not inc["engine"]["incremental"]["full"]
    assert sorted((f["key"], f["cause"]["rule"]) for f in inc["findings"]) == [
        ("k3", "missing_records"), ("k5", "counted_aborted"), ("k7", "counted_twice")]

    # Round 3: the open transaction commits (k6's row is right now), k0 and k7 updated (k0's row now stale,
    # k7's still missing; k7's count right again, k0's and k6's one short with no one record to blame).
    source.commit_open()
    source.txn([("k0", {"v": 4}), ("k7", {"v": 2})], "commit")
    inc, full = same_verdict(upsert, ustate)
    assert (inc["engine"]["incremental"]["full"], inc["engine"]["incremental"]["new_offsets"]) == (False, 5)
    assert kinds(inc) == [
        ("unknown_key", None, "k99", None),
        ("stale_value", 0, "k4", [2, 6]),
        ("stale_value", 0, "k0", [7, 11]),
        ("resurrected_key", 1, "k3", [1, 7]),
        ("aborted_value", 1, "k5", [9, 2]),
        ("missing_key", 1, "k7", [11]),
    ]
    inc, full = same_verdict(counts, cstate)
    assert sorted((f["key"], f["cause"]["rule"]) for f in inc["findings"]) == [
        ("k0", "unexplained_difference"), ("k3", "missing_records"), ("k5", "counted_aborted"),
        ("k6", "unexplained_difference")]

    # A state of another mode or config is refused in one line, exit 2.
    refusals = [
        (counts, ustate, "was written for a sink of mode = 'upsert', this sink is mode = 'aggregate'"),
        (config(tmp_path, bootstrap, source.topic, "renamed",
                f'duckdb = "{db}"\n{UPSERT.replace("value.v", "value.w")}'), ustate,
         "was written for another config of this sink (value_fields was [['v', 'value.v']], now "
         "[['v', 'value.w']])"),
        (config(tmp_path, bootstrap, source.topic, "offsets",
                f'duckdb = "{db}"\ntable = "state"\nkey_column = "id"\n'), ustate,
         "was written for a sink of mode = 'upsert', this sink is mode = 'offsets'"),
    ]
    for path, state, said in refusals:
        r = eosctl("audit", "-c", str(path), "--incremental", str(state))
        assert r.exit_code == 2, r.output
        assert len(r.stderr.strip().splitlines()) == 1 and said in r.stderr, r.stderr


def test_the_exporters_continuous_audit_of_an_upsert_sink(source, bootstrap, tmp_path):
    from prometheus_client.parser import text_string_to_metric_families

    db, states = tmp_path / "sink.duckdb", tmp_path / "states"
    path = config(tmp_path, bootstrap, source.topic, "upsert", f'duckdb = "{db}"\n{UPSERT}')
    source.txn([(f"k{i}", {"v": 1}) for i in range(4)], "commit")
    write_table(db, "state", "v", {f"k{i}": 1 for i in range(4)})

    def scrape() -> dict[tuple, float]:
        out = tmp_path / "eosctl.prom"
        r = eosctl("exporter", "--config", str(path), "--once", "--textfile", str(out), "--audit-state",
                   str(states))
        assert r.exit_code == 0, r.stderr
        families = text_string_to_metric_families(out.read_text())
        return {(s.name.removeprefix("eosctl_audit_"), s.labels.get("kind")): s.value for f in families
                for s in f.samples if s.name.startswith("eosctl_audit")}

    first = scrape()
    assert (first[("incremental", None)], first[("passed", None)], first[("read_offsets", None)]) == (0, 1, 6)
    assert sorted(p.name for p in states.iterdir()) == ["p.audit-state"]
    source.txn([("k1", {"v": 2}), ("k2", None)], "commit")  # the table left as it was: k1 stale, k2 kept
    second = scrape()
    assert (second[("incremental", None)], second[("passed", None)],
            second[("read_offsets", None)]) == (1, 0, 4)
    assert (second[("findings", "stale_value")], second[("findings", "resurrected_key")]) == (1, 1)
    assert second[("errors_total", None)] == 0
