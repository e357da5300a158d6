"""The key-duplicate rule over a PostgreSQL sink Spark reads itself through its JDBC source
(auditors.spark_sink): the same findings as over the same rows in Parquet (test_spark_keys), at the
command's pinned snapshot in every JDBC task, and the sinks JDBC can't reach left to the tasks."""

from __future__ import annotations

from urllib.parse import quote

import psycopg
import pytest

from auditors.keydups import writers_table
from auditors.spark_job import _collect
from auditors.spark_keys import spark_duplicate_keys
from auditors.spark_sink import key_frame
from eosctl.config.model import Sink
from eosctl.sandbox.pgserver import USER
from eosctl.sink.postgres import exported
from tests.unit.auditors.test_spark_keys import ROWS, WRITERS

pytestmark = [pytest.mark.spark, pytest.mark.jvm]


@pytest.fixture
def pg_tcp(postgres, pg_db, unique) -> str:
    """pg_db's schema, over the server's TCP port (JDBC reaches no Unix socket)."""
    return (f"postgresql://{USER}:{quote(postgres.password, safe='')}@127.0.0.1:{postgres.tcp_port}/postgres"
            f"?options=-csearch_path%3D{unique}")


def sink_table(uri: str) -> Sink:
    with psycopg.connect(uri, autocommit=True) as con:
        con.execute("CREATE TABLE orders (src_topic text, src_partition integer, src_offset bigint, "
                    "order_id text)")
        with con.cursor() as cur:
            cur.executemany("INSERT INTO orders VALUES (%s, %s, %s, %s)", ROWS)
    return Sink(postgres=uri, table="orders", key_column="order_id")


def found(spark, sink: Sink) -> list[tuple]:
    keys = key_frame(spark, sink)
    assert keys is not None, "the sink was left to the tasks"
    return sorted((f.key, f.partition, f.offsets, f.detail)
                  for f in spark_duplicate_keys(spark, keys, writers_table(WRITERS), _collect))


def test_spark_reads_a_postgres_sinks_keys_at_the_pinned_snapshot(spark, pg_tcp):
    sink = sink_table(pg_tcp)
    parquet_findings = [("k1", 0, (0, 1), None), ("k2", 0, (2, 5), "in t[0]@2, t[1]@5")]
    with exported(sink) as pinned:
        # Committed after the pin: k3 at a second committed place of partition 0 (a duplicate if seen).
        with psycopg.connect(pg_tcp, autocommit=True) as con:
            con.execute("INSERT INTO orders VALUES ('t', 0, 8, 'k3')")
        assert found(spark, pinned) == parquet_findings
    with exported(sink) as later:
        assert found(spark, later) == [*parquet_findings, ("k3", 0, (3, 8), None)]


def test_postgres_sinks_jdbc_cannot_read_at_one_snapshot_stay_with_the_tasks(spark, postgres, pg_db, pg_tcp):
    sink = sink_table(pg_tcp)
    assert key_frame(spark, sink) is None  # not pinned: no snapshot for every task to join
    with exported(Sink(postgres=pg_db, table="orders", key_column="order_id")) as socket:
        assert key_frame(spark, socket) is None  # a Unix socket
