"""The key-duplicate rule where the rows are (auditors.keydups): exact findings from DuckDB, the same from a
DuckDB file sink (the rule on the reader's own connection) and from PostgreSQL (keys streamed as Arrow)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import psycopg
import pyarrow as pa

from auditors.keydups import duplicate_keys, in_sink, with_writers, writers_table
from eosctl.config.model import Sink
from eosctl.sink import Limits, open_reader

# (key, topic, partition, offset): sink rows with a key, repeats and all.
ROWS = [
    ("a", "orders", 0, 1), ("a", "orders", 1, 7),  # one key in two partitions: a duplicate
    ("b", "orders", 0, 2), ("b", "orders", 0, 2),  # a row stored twice: one place, no key duplicate
    ("c", "orders", 0, 3), ("c", "orders", 0, 30),  # 30 is no committed offset: one committed place
    ("d", "orders", 0, 4), ("d", "orders", 0, 5), ("d", "orders", 0, 5),  # two places, one stored twice
    ("e", "orders", 0, 12), ("e", "orders", 0, 15),  # two committed places of two writers
    (None, "orders", 0, 6), (None, "orders", 0, 8),  # no key: never a duplicate
]
# Committed ranges by writer: (topic, partition, first, last, producer_id, producer_epoch, marker_offset).
WRITERS = [("orders", 0, 0, 9, 7, 0, 10), ("orders", 0, 11, 13, 7, 0, 14), ("orders", 0, 15, 15, 8, 2, None),
           ("orders", 1, 0, 9, 9, 1, 10)]
EXPECTED = [
    # key, topic, partition, first, last, count, offsets, detail, cause rule
    ("a", "orders", 0, 1, 7, 2, (1, 7), "in orders[0]@1, orders[1]@7", "producer_sessions"),
    ("d", "orders", 0, 4, 5, 2, (4, 5), None, "same_transaction"),
    ("e", "orders", 0, 12, 15, 2, (12, 15), None, "producer_sessions"),
]


def writers() -> pa.Table:
    return writers_table(dict(zip(("topic", "partition", "first_offset", "last_offset", "producer_id",
                                   "producer_epoch", "marker_offset"), w, strict=True)) for w in WRITERS)


def shown(findings) -> list[tuple]:
    return sorted((f.key, f.topic, f.partition, f.first_offset, f.last_offset, f.count, f.offsets, f.detail,
                   f.cause.rule) for f in findings)


def test_a_key_at_two_committed_places_is_one_finding_with_its_writers():
    with duckdb.connect() as con:
        con.execute('CREATE TABLE places (key VARCHAR, topic VARCHAR, "partition" INTEGER, "offset" BIGINT)')
        con.executemany("INSERT INTO places VALUES (?, ?, ?, ?)", ROWS)
        con.register("writers", writers())
        found = duplicate_keys(con, "places", "writers")
    assert shown(found) == EXPECTED
    e = next(f for f in found if f.key == "e")
    assert [(t.producer_id, t.producer_epoch, t.marker_offset) for t in e.cause.transactions] == [
        (7, 0, 14), (8, 2, None)]


def _sink_rows(con_execute) -> None:
    con_execute("CREATE TABLE orders_sink (src_topic TEXT, src_partition INTEGER, src_offset BIGINT, "
                "order_id TEXT)")


def test_the_same_findings_from_a_duckdb_file_and_from_postgresql(tmp_path: Path, pg_db: str):
    path = tmp_path / "sink.duckdb"
    with duckdb.connect(str(path)) as con:
        _sink_rows(con.execute)
        con.executemany("INSERT INTO orders_sink VALUES (?, ?, ?, ?)", [(t, p, o, k) for k, t, p, o in ROWS])
    with psycopg.connect(pg_db, autocommit=True) as con:
        _sink_rows(con.execute)
        with con.cursor() as cur:
            cur.executemany("INSERT INTO orders_sink VALUES (%s, %s, %s, %s)",
                            [(t, p, o, k) for k, t, p, o in ROWS])
    limits = Limits(1, "256MB", str(tmp_path / "spill"))
    for sink in (Sink(duckdb=str(path), table="orders_sink", key_column="order_id"),
                 Sink(postgres=pg_db, table="orders_sink", key_column="order_id")):
        with open_reader(sink) as reader:
            assert shown(in_sink(reader, writers(), limits)) == EXPECTED, sink


def test_a_tasks_key_rows_carry_the_writer_of_their_range():
    keys = pa.record_batch([pa.array(["a", "e", "e", "x"]), pa.array(["orders"] * 4),
                            pa.array([1, 0, 0, 0], pa.int32()), pa.array([7, 12, 15, 10], pa.int64())],
                           names=["key", "topic", "partition", "offset"])
    rows = pa.Table.from_batches(list(with_writers([keys], writers()))).to_pylist()
    # 10 is a marker, in no committed range: no writer, no row.
    assert sorted(tuple(r.values()) for r in rows) == [
        ("a", "orders", 1, 7, 9, 1, 10), ("e", "orders", 0, 12, 7, 0, 14), ("e", "orders", 0, 15, 8, 2, None)]
