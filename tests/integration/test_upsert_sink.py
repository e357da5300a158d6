"""State sinks (issue 51): upsert tables keyed by the record's key, in DuckDB, PostgreSQL and Delta, audited
against the latest committed record per key on the session's broker (Apache Kafka 4.4).

The source: one partition written by one transactional producer (transactions v2: one marker offset each):

  txn A, committed: k1 {"v":1} @0, k2 {"v":1} @1, k3 {"v":1} @2, k4 {"v":1} @3, k5 {"v":1} @4; marker @5
  txn B, aborted:   k2 {"v":99} @6; marker @7
  txn C, committed: k1 {"v":2} @8, k4 tombstone @9, k5 {"v":2} @10; marker @11
  txn D, open:      k3 {"v":7} @12 (held open for the module; the LSO stays 12)

The planted table: k1 holds {"v":1} (stale: offset 0, one committed update behind offset 8), k2 {"v":99}
(the aborted value of offset 6), k3 {"v":7} (the open transaction's value of offset 12), k4 {"v":1} (present
after its tombstone at 9), k5 absent (missing: offset 10), k9 {"v":5} (no record has k9).
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import duckdb
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.helpers import eosctl
from tests.support.markers import markers_written

pytestmark = pytest.mark.integration

RECORDS = [  # (transaction, key, value or None: a tombstone)
    ("A", "k1", {"v": 1}), ("A", "k2", {"v": 1}), ("A", "k3", {"v": 1}), ("A", "k4", {"v": 1}),
    ("A", "k5", {"v": 1}), ("B", "k2", {"v": 99}), ("C", "k1", {"v": 2}), ("C", "k4", None),
    ("C", "k5", {"v": 2}), ("D", "k3", {"v": 7}),
]
OFFSETS = [0, 1, 2, 3, 4, 6, 8, 9, 10, 12]
# The planted table: key -> value (k5 has no row).
TABLE = {"k1": {"v": 1}, "k2": {"v": 99}, "k3": {"v": 7}, "k4": {"v": 1}, "k9": {"v": 5}}

EXPECTED = [  # (kind, partition, first_offset, last_offset, count, key, offsets, cause rule)
    ("unknown_key", None, None, None, 1, "k9", None, "no_record"),
    ("stale_value", 0, 0, 8, 1, "k1", [0, 8], "older_committed_value"),
    ("aborted_value", 0, 6, 6, 1, "k2", [6, 1], "read_uncommitted"),
    ("resurrected_key", 0, 9, 9, 1, "k4", [3, 9], "delete_not_applied"),
    ("missing_key", 0, 10, 10, 1, "k5", [10], "never_written"),
    ("uncommitted_value", 0, 12, 12, 1, "k3", [12, 2], "read_uncommitted"),
]


@pytest.fixture(scope="module")
def source(bootstrap: str) -> Any:
    """The topic, its records at OFFSETS, and transaction D left open until the module ends."""
    topic = "upsert" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-writer",
                         "transaction.timeout.ms": 600_000})
    producer.init_transactions(30)
    got: list[int] = []
    for txn in "ABCD":
        producer.begin_transaction()
        for t, key, value in RECORDS:
            if t == txn:
                producer.produce(topic, key=key.encode(),
                                 value=None if value is None else json.dumps(value).encode(), partition=0,
                                 on_delivery=lambda err, msg: got.append(-1 if err else msg.offset()))
        producer.flush(30)
        if txn == "B":
            producer.abort_transaction(30)
        elif txn != "D":
            producer.commit_transaction(30)
    assert got == OFFSETS
    yield topic
    producer.abort_transaction(30)


def config(tmp_path: Path, bootstrap: str, topic: str, sink: str, group: str | None = None) -> Path:
    path = tmp_path / "eosctl.toml"
    path.write_text(f'[clusters.c]\nbootstrap_servers = "{bootstrap}"\n\n[pipelines.p]\n'
                    f'source_topics = ["{topic}"]\n' + (f'group = "{group}"\n' if group else "")
                    + f"\n[pipelines.p.sink]\nmode = \"upsert\"\n{sink}")
    return path


@pytest.fixture(params=["local", "spark"])
def engine(request) -> str:
    """The engine a test's audits run on: both give the same findings (Spark: the suite's session, which
    the audit borrows)."""
    if request.param == "spark":
        request.getfixturevalue("spark")
    return request.param


def audit(path: Path, *extra: str, env: dict[str, str] | None = None, engine: str = "local"
          ) -> tuple[int, dict]:
    r = eosctl("audit", "-c", str(path), "--engine", engine, "--format", "json", *extra, env=env)
    assert r.exit_code in (0, 1), r.output
    report = json.loads(r.stdout)
    assert report["engine"]["name"] == engine
    return r.exit_code, report


def found(report: dict) -> list[tuple]:
    return [(f["kind"], f["partition"], f["first_offset"], f["last_offset"], f["count"], f.get("key"),
             f.get("offsets"), f["cause"]["rule"]) for f in report["findings"]]


def duckdb_table(path: Path, table: dict[str, Any]) -> Path:
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE state (id VARCHAR PRIMARY KEY, v INTEGER)")
    con.executemany("INSERT INTO state VALUES (?, ?)", [(k, v["v"]) for k, v in table.items()])
    con.close()
    return path


def test_upsert_table_in_duckdb_gives_exactly_the_planted_findings(source, bootstrap, tmp_path, engine):
    db = duckdb_table(tmp_path / "state.duckdb", TABLE)
    path = config(tmp_path, bootstrap, source, f'duckdb = "{db}"\ntable = "state"\nkey_column = "id"\n'
                                               '[pipelines.p.sink.value_fields]\nv = "value.v"\n')
    code, report = audit(path, engine=engine)
    assert code == 1
    assert found(report) == EXPECTED
    by_kind = {f["kind"]: f for f in report["findings"]}
    assert by_kind["stale_value"]["detail"] == ("sink holds 1; expected 2 (offset 8); it is the value of "
                                                "offset 0")
    assert by_kind["aborted_value"]["cause"]["transactions"][0]["outcome"] == "aborted"
    assert by_kind["aborted_value"]["cause"]["transactions"][0]["marker_offset"] == 7
    assert report["summary"]["findings"]["stale_value"] == 1
    assert [r["rule"] for r in report["root_causes"]] == ["sink_reads_aborted", "lost_update",
                                                          "delete_not_applied", "state_not_written",
                                                          "unknown_keys"]
    assert report["partitions"][0]["last_stable_offset"] == 12
    # The same findings rendered: every format once, and Spark's in one.
    for fmt in ("table", "junit", "html") if engine == "local" else ("junit",):
        out = eosctl("audit", "-c", str(path), "--engine", engine, "--format", fmt,
                     "--out", str(tmp_path / f"report.{fmt}"))
        assert out.exit_code == 1, out.output
        text = (tmp_path / f"report.{fmt}").read_text()
        assert all(kind in text for kind, *_ in EXPECTED), fmt
        assert "lost_update" in text if fmt != "junit" else 'failures="6"' in text
    junit = (tmp_path / "report.junit").read_text()
    assert 'message="stale_value at offsets 0..8 (1): lost update: an older committed value over a newer ' \
           'one"' in junit
    assert "key k1; offsets 0, 8; sink holds 1; expected 2 (offset 8); it is the value of offset 0" in junit

    # The table as the topic says: clean (k3's committed value is offset 2's, k4 gone, k5 at offset 10).
    clean = duckdb_table(tmp_path / "clean.duckdb", {"k1": {"v": 2}, "k2": {"v": 1}, "k3": {"v": 1},
                                                     "k5": {"v": 2}})
    path = config(tmp_path, bootstrap, source, f'duckdb = "{clean}"\ntable = "state"\nkey_column = "id"\n'
                                               '[pipelines.p.sink.value_fields]\nv = "value.v"\n')
    code, report = audit(path, engine=engine)
    assert (code, report["findings"], report["verdict"]) == (0, [], "pass")

    # Keys only (no value columns): only what keys show: the resurrected, missing and unknown keys, and
    # k2/k3, whose committed records make them expected.
    path = config(tmp_path, bootstrap, source, f'duckdb = "{db}"\ntable = "state"\nkey_column = "id"\n')
    code, report = audit(path, engine=engine)
    assert [(f["kind"], f.get("key")) for f in report["findings"]] == [
        ("unknown_key", "k9"), ("resurrected_key", "k4"), ("missing_key", "k5")]

    # Keys and a version column (each row's source offset): the planted rows' offsets say it all again.
    con = duckdb.connect(str(db))
    con.execute("ALTER TABLE state ADD COLUMN src_offset BIGINT")
    con.executemany("UPDATE state SET src_offset = ? WHERE id = ?",
                    [(0, "k1"), (6, "k2"), (12, "k3"), (3, "k4"), (None, "k9")])
    con.close()
    path = config(tmp_path, bootstrap, source, f'duckdb = "{db}"\ntable = "state"\nkey_column = "id"\n'
                                               'version_column = "src_offset"\n')
    code, report = audit(path, engine=engine)
    assert [(f["kind"], f.get("key"), f.get("offsets")) for f in report["findings"]] == [
        ("unknown_key", "k9", None), ("stale_value", "k1", [0, 8]), ("aborted_value", "k2", [6, 1]),
        ("resurrected_key", "k4", [3, 9]), ("missing_key", "k5", [10]), ("uncommitted_value", "k3", [12, 2])]


def test_a_state_sink_runs_on_the_engine_named(source, bootstrap, tmp_path, spark):
    # --engine spark judges the keys on Spark (auditors.state_spark) and says so; unnamed, the size picks.
    db = duckdb_table(tmp_path / "state.duckdb", TABLE)
    path = config(tmp_path, bootstrap, source, f'duckdb = "{db}"\ntable = "state"\nkey_column = "id"\n')
    r = eosctl("audit", "-c", str(path), "--engine", "spark", "--format", "json")
    assert r.exit_code == 1, r.output
    report = json.loads(r.stdout)
    assert (report["engine"]["name"], report["engine"]["master"], report["engine"]["tasks"]) == (
        "spark", "local[2]", 1)
    assert r.stderr.strip().splitlines()[-1] == "engine: spark (--engine)"
    r = eosctl("audit", "-c", str(path), "--format", "json")
    assert r.exit_code == 1, r.output
    assert json.loads(r.stdout)["engine"]["name"] == "local"
    assert any(line.startswith("engine: local (13 offsets <= 5,000,000; ")
               for line in r.stderr.splitlines()), r.stderr


def test_the_sink_groups_committed_offsets_bound_what_it_should_hold(source, bootstrap, tmp_path, engine):
    """Committed at 8: offsets 8-10 are in flight (lag): k1 may hold offset 0's value, k4 its row; k5 must
    still exist since offset 4."""
    group = source + "-sink"
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(source, 0, 8)], asynchronous=False)
    c.close()
    db = duckdb_table(tmp_path / "state.duckdb", TABLE)
    sink = (f'duckdb = "{db}"\ntable = "state"\nkey_column = "id"\n'
            '[pipelines.p.sink.value_fields]\nv = "value.v"\n')
    path = config(tmp_path, bootstrap, source, sink, group=group)
    code, report = audit(path, engine=engine)
    assert code == 1
    assert found(report) == [
        ("unknown_key", None, None, None, 1, "k9", None, "no_record"),
        ("missing_key", 0, 4, 4, 1, "k5", [4], "never_written"),
        ("aborted_value", 0, 6, 6, 1, "k2", [6, 1], "read_uncommitted"),
        ("uncommitted_value", 0, 12, 12, 1, "k3", [12, 2], "read_uncommitted"),
    ]


def test_upsert_table_in_delta_keyed_by_key_fields_with_a_value_hash(source, bootstrap, tmp_path, engine):
    import hashlib

    import pyarrow as pa
    from deltalake import write_deltalake

    ids, hashes = zip(*((k, hashlib.md5(json.dumps(v).encode()).hexdigest()) for k, v in TABLE.items()),
                      strict=True)
    table = tmp_path / "state_delta"
    write_deltalake(str(table), pa.table({"order_id": list(ids), "value_md5": list(hashes)}))
    path = config(tmp_path, bootstrap, source, f'delta = "{table}"\nvalue_hash_column = "value_md5"\n'
                                               '[pipelines.p.sink.key_fields]\norder_id = "key"\n')
    code, report = audit(path, engine=engine)
    assert code == 1
    assert found(report) == EXPECTED
    assert report["sink_read_point"]["kind"] == "delta"


def test_upsert_table_in_iceberg_at_its_snapshot(source, bootstrap, tmp_path, engine):
    # Written by pyiceberg through a SQL catalog on SQLite: the planted table, then its repair (an upsert
    # by key and a delete, each a snapshot of its own) after the first audit's snapshot.
    import pyarrow as pa
    from pyiceberg.catalog import load_catalog

    uri, warehouse = f"sqlite:///{tmp_path / 'catalog.db'}", f"file://{tmp_path / 'warehouse'}"
    catalog = load_catalog("local", uri=uri, warehouse=warehouse)
    catalog.create_namespace("shop")
    schema = pa.schema([pa.field("id", pa.string(), nullable=False), pa.field("v", pa.int64())])
    table = catalog.create_table("shop.state", schema=schema)
    table.append(pa.table({"id": list(TABLE), "v": [v["v"] for v in TABLE.values()]}, schema=schema))
    planted = str(table.current_snapshot().snapshot_id)
    path = config(tmp_path, bootstrap, source, f'iceberg = "local.shop.state"\ncatalog_uri = "{uri}"\n'
                                               f'warehouse = "{warehouse}"\nkey_column = "id"\n'
                                               '[pipelines.p.sink.value_fields]\nv = "value.v"\n')
    code, report = audit(path, engine=engine)
    assert code == 1
    assert found(report) == EXPECTED
    assert report["sink_read_point"] == {"kind": "iceberg", "source": "local.shop.state",
                                         "snapshot_id": planted}

    # The repair: k1 to offset 8's value, k2 and k3 to their committed values, k5 written, k4 and k9
    # deleted: the latest snapshot is the log's state.
    fix = pa.table({"id": ["k1", "k2", "k3", "k5"], "v": [2, 1, 1, 2]}, schema=schema)
    table.upsert(fix, join_cols=["id"])
    table.delete("id == 'k4' or id == 'k9'")
    code, report = audit(path, engine=engine)
    assert (code, report["findings"]) == (0, [])
    assert report["sink_read_point"]["snapshot_id"] == str(table.current_snapshot().snapshot_id)


# An aggregate table (mode = "aggregate") over a second topic: sum and count of value.n per key.
#   txn A, committed: a 5 @0, a 7 @1, b 2 @2, a 11 @3; marker @4
#   txn B, aborted:   a 40 @5; marker @6
#   txn C, committed: a 13 @7, c 3 @8, c 4 @9, b 6 @10; marker @11
AMOUNTS = [("A", "a", 5), ("A", "a", 7), ("A", "b", 2), ("A", "a", 11), ("B", "a", 40), ("C", "a", 13),
           ("C", "c", 3), ("C", "c", 4), ("C", "b", 6)]


@pytest.fixture(scope="module")
def amounts(bootstrap: str) -> str:
    topic = "folds" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-writer"})
    producer.init_transactions(30)
    got: list[int] = []
    for txn in "ABC":
        producer.begin_transaction()
        for t, key, n in AMOUNTS:
            if t == txn:
                producer.produce(topic, key=key.encode(), value=json.dumps({"n": n}).encode(), partition=0,
                                 on_delivery=lambda err, msg: got.append(-1 if err else msg.offset()))
        producer.flush(30)
        (producer.abort_transaction if txn == "B" else producer.commit_transaction)(30)
    markers_written(bootstrap, f"{topic}-writer")
    assert got == [0, 1, 2, 3, 5, 7, 8, 9, 10]
    return topic


def fold_table(path: Path, rows: dict[str, int]) -> Path:
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE totals (k VARCHAR PRIMARY KEY, total BIGINT)")
    con.executemany("INSERT INTO totals VALUES (?, ?)", list(rows.items()))
    con.close()
    return path


def test_an_aggregate_table_with_a_double_count_and_a_loss(amounts, bootstrap, tmp_path, engine):
    # a: 36 committed, 54 found: offsets 1 and 3 (7 + 11) counted twice; b: 8 committed, 2 found: offset 10
    # lost; c right; d no record has.
    db = fold_table(tmp_path / "totals.duckdb", {"a": 54, "b": 2, "c": 7, "d": 1})
    sink = (f'duckdb = "{db}"\ntable = "totals"\nmode = "aggregate"\nkey_column = "k"\n'
            'aggregate = {fn = "sum", field = "value.n", column = "total"}\n')
    path = tmp_path / "eosctl.toml"
    path.write_text(f'[clusters.c]\nbootstrap_servers = "{bootstrap}"\n\n[pipelines.p]\n'
                    f'source_topics = ["{amounts}"]\n\n[pipelines.p.sink]\n{sink}')
    code, report = audit(path, engine=engine)
    assert code == 1
    assert [(f["kind"], f["first_offset"], f["last_offset"], f["count"], f.get("key"), f.get("offsets"),
             f["cause"]["rule"], f.get("detail")) for f in report["findings"]] == [
        ("unknown_key", None, None, 1, "d", None, "no_record", "sink holds 1"),
        ("aggregate_mismatch", 1, 3, 2, "a", [1, 3], "counted_twice",
         "expected 36 (sum(value.n) of 4 committed records up to offset 7), found 54: counted offsets 1, 3 "
         "twice"),
        ("aggregate_mismatch", 10, 10, 1, "b", [10], "missing_records",
         "expected 8 (sum(value.n) of 2 committed records up to offset 10), found 2: missing offsets 10"),
    ]
    assert [r["rule"] for r in report["root_causes"]] == ["sink_skipped", "replay", "unknown_keys"]

    # count: a counted with its aborted record (5, not 4)
    db = fold_table(tmp_path / "counts.duckdb", {"a": 5, "b": 2, "c": 2})
    path.write_text(path.read_text().replace(str(tmp_path / "totals.duckdb"), str(db))
                    .replace('fn = "sum", field = "value.n"', 'fn = "count"'))
    code, report = audit(path, engine=engine)
    assert [(f["kind"], f["first_offset"], f.get("key"), f["cause"]["rule"]) for f in report["findings"]] == [
        ("aggregate_mismatch", 5, "a", "counted_aborted")]
    db = fold_table(tmp_path / "clean.duckdb", {"a": 4, "b": 2, "c": 2})
    path.write_text(path.read_text().replace(str(tmp_path / "counts.duckdb"), str(db)))
    assert audit(path, engine=engine)[0] == 0


def test_explain_names_the_state_sinks_findings_at_an_offset(source, bootstrap, tmp_path):
    db = duckdb_table(tmp_path / "state.duckdb", TABLE)
    path = config(tmp_path, bootstrap, source, f'duckdb = "{db}"\ntable = "state"\nkey_column = "id"\n'
                                               '[pipelines.p.sink.value_fields]\nv = "value.v"\n')

    def at(offset: int) -> dict:
        r = eosctl("explain", "-c", str(path), "--partition", "0", "--offset", str(offset),
                   "--format", "json")
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)

    doc = at(0)  # k1's first value, which the row still holds
    assert (doc["sink"], doc["state"]["mode"]) == (None, "upsert")
    assert [(f["kind"], f["key"]) for f in doc["state"]["findings"]] == [("stale_value", "k1")]
    assert "The state sink: stale_value for key k1 (sink holds 1; expected 2 (offset 8)" in doc["summary"]
    assert [(f["kind"], f["key"]) for f in at(6)["state"]["findings"]] == [("aborted_value", "k2")]
    assert at(4)["state"]["findings"] == []  # k5's older value: the finding is at offset 10
    assert "has no finding at this offset" in at(4)["summary"]
    table = eosctl("explain", "-c", str(path), "--partition", "0", "--offset", "0")
    assert table.exit_code == 0 and "stale_value for key k1" in table.stdout.replace("\n", " ")


def write_topic(bootstrap: str, name: str, records: list[tuple[str, bytes | None]],
                aborted: list[tuple[str, bytes]] = ()) -> str:
    """A state topic (a KTable's output) written in one committed transaction, after an aborted one."""
    topic = name + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1,
                                  config={"cleanup.policy": "compact"})])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-app"})
    producer.init_transactions(30)
    for batch, end in ((aborted, producer.abort_transaction), (records, producer.commit_transaction)):
        producer.begin_transaction()
        for key, value in batch:
            producer.produce(topic, key=key.encode(), value=value, partition=0)
        producer.flush(30)
        end(30)
    markers_written(bootstrap, f"{topic}-app")
    return topic


def topic_config(tmp_path: Path, bootstrap: str, source: str, sink: str) -> Path:
    path = tmp_path / "eosctl.toml"
    path.write_text(f'[clusters.c]\nbootstrap_servers = "{bootstrap}"\n\n[pipelines.p]\n'
                    f'source_topics = ["{source}"]\n\n[pipelines.p.sink]\n{sink}')
    return path


def test_a_compacted_topic_as_an_upsert_sink(source, bootstrap, tmp_path, engine):
    """A KTable's output topic: its latest committed record per key is the row. k1's latest is the stale
    value, k4 was never tombstoned, k5's tombstone came after its value (missing), k9 no input has; the
    aborted transaction's k3 value is never read."""
    j = lambda v: json.dumps(v).encode()  # noqa: E731
    out = write_topic(bootstrap, "ktable", [("k1", j({"v": 2})), ("k1", j({"v": 1})), ("k2", j({"v": 1})),
                                            ("k3", j({"v": 1})), ("k4", j({"v": 1})), ("k5", j({"v": 2})),
                                            ("k5", None), ("k9", j({"v": 5}))],
                      aborted=[("k3", j({"v": 7}))])
    path = topic_config(tmp_path, bootstrap, source, f'kafka_topic = "{out}"\nmode = "upsert"\n'
                                                     'key_column = "key"\nvalue_column = "value"\n')
    code, report = audit(path, engine=engine)
    assert code == 1
    assert [(f["kind"], f["first_offset"], f["last_offset"], f.get("key")) for f in report["findings"]] == [
        ("unknown_key", None, None, "k9"), ("stale_value", 0, 8, "k1"), ("resurrected_key", 9, 9, "k4"),
        ("missing_key", 10, 10, "k5")]
    assert report["sink_read_point"]["kind"] == "kafka_topic"


def test_a_compacted_topic_as_an_aggregate_sink_count_and_sum(amounts, bootstrap, tmp_path, engine):
    """A Streams count() topic (8-byte longs) that counted c's two records twice, and a sum topic (JSON)
    with a's double count and b's loss."""
    counts = write_topic(bootstrap, "counts", [("a", (4).to_bytes(8, "big")), ("b", (2).to_bytes(8, "big")),
                                               ("c", (4).to_bytes(8, "big"))])
    path = topic_config(tmp_path, bootstrap, amounts, f'kafka_topic = "{counts}"\nmode = "aggregate"\n'
                        'key_column = "key"\naggregate = {fn = "count", column = "value:long"}\n')
    code, report = audit(path, engine=engine)
    assert [(f["kind"], f.get("key"), f.get("offsets"), f.get("detail")) for f in report["findings"]] == [
        ("aggregate_mismatch", "c", [8, 9],
         "expected 2 (count of 2 committed records up to offset 9), found 4: counted offsets 8-9 twice")]
    sums = write_topic(bootstrap, "sums", [("a", b'{"total": 54}'), ("b", b'{"total": 2}'),
                                           ("c", b'{"total": 7}')])
    path = topic_config(tmp_path, bootstrap, amounts, f'kafka_topic = "{sums}"\nmode = "aggregate"\n'
                        'key_column = "key"\n'
                        'aggregate = {fn = "sum", field = "value.n", column = "value.total"}\n')
    code, report = audit(path, engine=engine)
    assert [(f["kind"], f.get("key"), f.get("offsets"), f["cause"]["rule"]) for f in report["findings"]] == [
        ("aggregate_mismatch", "a", [1, 3], "counted_twice"),
        ("aggregate_mismatch", "b", [10], "missing_records")]


# A windowed aggregate (tumbling windows of 1 minute by record timestamp): sum of value.n per key and window,
# from T0, the start of the hour before the run (recent: the broker's time retention keeps it).
#   a: 5 @0 (T0), 7 @1 (T0 + 10 s)  | 11 @2 (T0 + 70 s), 13 @3 (T0 + 80 s)
#   b: 2 @4 (T0 + 20 s)             | 6 @5 (T0 + 90 s), 4 @6 (T0 + 100 s)
T0 = (int(time.time()) // 3600 - 1) * 3_600_000
TIMED = [("a", 5, 0), ("a", 7, 10), ("a", 11, 70), ("a", 13, 80), ("b", 2, 20), ("b", 6, 90), ("b", 4, 100)]


@pytest.fixture(scope="module")
def timed(bootstrap: str) -> str:
    topic = "windows" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-writer"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for key, n, second in TIMED:
        producer.produce(topic, key=key.encode(), value=json.dumps({"n": n}).encode(), partition=0,
                         timestamp=T0 + second * 1000)
    producer.flush(30)
    producer.commit_transaction(30)
    markers_written(bootstrap, f"{topic}-writer")
    return topic


def test_a_windowed_aggregate_names_the_double_count_and_the_loss_in_their_window(timed, bootstrap, tmp_path,
                                                                                   engine):
    # a's second window counted offset 3 twice (37, not 24); b's second window lost offset 5 (4, not 10);
    # both first windows right.
    from datetime import UTC, datetime

    from eosctl.rules.timewindows import shown_window

    def at(second: int) -> datetime:
        return datetime.fromtimestamp(T0 / 1000 + second, UTC).replace(tzinfo=None)

    db = tmp_path / "windows.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE totals (k VARCHAR, window_start TIMESTAMP, total BIGINT)")
    con.executemany("INSERT INTO totals VALUES (?, ?, ?)",
                    [("a", at(0), 12), ("a", at(60), 37), ("b", at(0), 2), ("b", at(60), 4)])
    con.close()
    path = topic_config(tmp_path, bootstrap, timed, f'duckdb = "{db}"\ntable = "totals"\nmode = "aggregate"\n'
                        'key_column = "k"\naggregate = {fn = "sum", field = "value.n", column = "total", '
                        'window_column = "window_start", window = "1m"}\n')
    code, report = audit(path, engine=engine)
    assert code == 1
    second = shown_window(T0 + 60_000, 60_000)
    hour = datetime.fromtimestamp(T0 / 1000, UTC).strftime("%Y-%m-%dT%H")
    assert second == f"[{hour}:01:00Z, {hour}:02:00Z)"
    assert [(f["kind"], f["first_offset"], f["last_offset"], f.get("key"), f.get("offsets"),
             f["cause"]["rule"], f.get("detail")) for f in report["findings"]] == [
        ("aggregate_mismatch", 3, 3, f"a in window {second}", [3],
         "counted_twice", "expected 24 (sum(value.n) of 2 committed records up to offset 3), found 37: "
                          "counted offsets 3 twice"),
        ("aggregate_mismatch", 5, 5, f"b in window {second}", [5],
         "missing_records", "expected 10 (sum(value.n) of 2 committed records up to offset 6), found 4: "
                            "missing offsets 5"),
    ]
    # The same table judged without its windows: one fold per key, which no row holds alone.
    unwindowed = path.read_text().replace(', window_column = "window_start", window = "1m"', "")
    path.write_text(unwindowed)
    code, report = audit(path, engine=engine)
    assert code == 1 and {f["kind"] for f in report["findings"]} == {"aggregate_mismatch"}
