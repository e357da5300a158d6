"""The key-duplicate rule over a sink Spark reads itself (auditors.spark_sink, auditors.spark_keys): the
same findings as the local engine's rule over the same Parquet file, the rows no Kafka record can match
left out, and the sinks Spark doesn't read left to the tasks."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from auditors.keydups import duplicate_keys, writers_table
from auditors.spark_job import _collect
from auditors.spark_keys import spark_duplicate_keys
from auditors.spark_sink import key_frame
from eosctl.config.model import Sink

# (topic, partition, offset, key): k1 at two committed places of partition 0, k2 across partitions,
# k3 twice at one place (not a duplicate), k4 once committed and once outside every committed range,
# and rows no record can match (empty topic, negative offset, no key) carrying k5 beside a valid one.
ROWS = [("t", 0, 0, "k1"), ("t", 0, 1, "k1"), ("t", 0, 2, "k2"), ("t", 1, 5, "k2"), ("t", 0, 3, "k3"),
        ("t", 0, 3, "k3"), ("t", 1, 6, "k4"), ("t", 1, 40, "k4"), ("", 0, 4, "k5"), ("t", 0, -1, "k5"),
        ("t", 0, 4, "k5"), ("t", 0, 7, None)]
# Partition 0's committed offsets 0..9 (transactional), partition 1's 5..9 (not): offset 40 is not one.
WRITERS = [{"topic": "t", "partition": 0, "first_offset": 0, "last_offset": 9, "producer_id": 7,
            "producer_epoch": 0, "marker_offset": 10},
           {"topic": "t", "partition": 1, "first_offset": 5, "last_offset": 9, "producer_id": -1,
            "producer_epoch": -1, "marker_offset": None}]


def sink_file(tmp_path: Path, float_keys: bool = False) -> Path:
    path = tmp_path / "rows" / "part-0.parquet"
    path.parent.mkdir()
    t, p, o, k = zip(*ROWS, strict=True)
    keys = pa.array([None if x is None else float(len(x)) for x in k], pa.float64()) if float_keys \
        else pa.array(k, pa.string())
    pq.write_table(pa.table({"src_topic": pa.array(t), "src_partition": pa.array(p, pa.int32()),
                             "src_offset": pa.array(o, pa.int64()), "order_id": keys}), path)
    return path


def shown(findings: list) -> list[tuple]:
    return sorted((f.key, f.topic, f.partition, f.offsets, f.detail, f.cause.to_dict() if f.cause else None)
                  for f in findings)


def test_spark_finds_the_local_engines_key_duplicates_in_a_parquet_sink(spark, tmp_path):
    path = sink_file(tmp_path)
    keys = key_frame(spark, Sink(parquet=str(tmp_path / "rows" / "*.parquet"), key_column="order_id"))
    assert keys is not None
    found = spark_duplicate_keys(spark, keys, writers_table(WRITERS), _collect)
    with duckdb.connect() as con:
        con.register("w", writers_table(WRITERS))
        local = duplicate_keys(con, f"""(SELECT order_id AS key, CASE WHEN src_topic <> '' THEN src_topic
            END AS topic, src_partition AS "partition", src_offset AS "offset"
            FROM read_parquet('{path}') WHERE src_offset >= 0)""", "w")
    assert sorted((f.key, f.partition, f.offsets, f.detail) for f in found) == [
        ("k1", 0, (0, 1), None), ("k2", 0, (2, 5), "in t[0]@2, t[1]@5")]
    assert shown(found) == shown(local)


def test_no_committed_range_no_finding(spark, tmp_path):
    sink_file(tmp_path)
    keys = key_frame(spark, Sink(parquet=str(tmp_path / "rows" / "*.parquet"), key_column="order_id"))
    assert spark_duplicate_keys(spark, keys, writers_table([]), _collect) == []


def test_sinks_spark_does_not_read_as_duckdb_does_stay_with_the_tasks(spark, tmp_path):
    sink_file(tmp_path, float_keys=True)  # a float key: Spark and DuckDB write 1.0 differently
    parquet = str(tmp_path / "rows" / "*.parquet")
    assert key_frame(spark, Sink(parquet=parquet, key_column="order_id")) is None
    assert key_frame(spark, Sink(parquet=parquet)) is None  # no key column: no key rule
    assert key_frame(spark, Sink(duckdb=str(tmp_path / "s.duckdb"), key_column="order_id")) is None
    assert key_frame(spark, Sink(parquet=parquet, key_column="no_such_column")) is None
