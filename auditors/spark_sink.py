"""The sink's key rows as a Spark DataFrame, read by Spark's own readers where Spark can read the sink.

The key-duplicate rule used to read every key row in the audit's Python tasks (DuckDB in the task, then
Arrow into the JVM, then the shuffle): at 100M offsets 255 of the keyed audit's 374 s (docs/benchmarks.md).
Here Spark reads the sink's files itself, only the four columns the rule needs (column pruning) and only
the audited partitions' committed offset spans (predicates Spark pushes into the Parquet scan), so the
rows never pass through Python.

What Spark reads, at the same read point as the local engine:
- Parquet: the files the sink names (the frozen sink's links, a Spark file sink's committed files), listed
  here with eosctl's own glob, so Spark reads exactly the files DuckDB would;
- Delta: the pinned version's plain data files where the pin has them (eosctl.sink.delta.plain_files: its
  rows are exactly those files' rows), else the table at that version through delta-spark where the
  session has it on its classpath;
- Iceberg: the pinned snapshot's data files where they are all there is to it (eosctl.sink.iceberg
  .plain_files), as for Delta;
- PostgreSQL over TCP, through Spark's JDBC source where the session has PostgreSQL's driver
  (org.postgresql:postgresql): the local engine's own key-row query (its validity and key text are the
  server's), each JDBC task in a transaction that joins the command's exported snapshot
  (``sessionInitStatement``), its rows split across tasks by partition number, the committed spans pushed
  into the query's WHERE.

Anything else (DuckDB, an Iceberg table with deletes or an evolved schema, a URL, a Unix socket, a key or
offset column whose text or validity Spark would judge differently from DuckDB) answers None: the tasks
read the keys as before.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from functools import reduce
from typing import Any

from eosctl.base.files import glob_paths
from eosctl.cluster.model import TP
from eosctl.config.model import Sink
from eosctl.sink.parquet import is_url
from eosctl.sink.spark_files import is_table_dir, table_files

# Column types whose text (CAST AS STRING) and validity Spark and DuckDB agree on.
_INTS = ("ByteType", "ShortType", "IntegerType", "LongType")
_KEYS = ("StringType", *_INTS)
MAX_PARTITION = (1 << 31) - 1
# Past this many partitions the pushed predicate names the partitions only, not each one's offset span.
SPAN_PREDICATES = 256


def key_frame(spark: Any, sink: Sink) -> Any | None:
    """The sink's key rows as a DataFrame (key string, topic string, partition int, offset long) with a
    valid place; None where Spark can't read the sink as the local engine does. Reads nothing but the
    files' schema: the rows are read when a job runs over ``within(...)``."""
    if sink.key_column is None:
        return None
    if sink.postgres and sink.mode == "offsets":
        return _postgres_keys(spark, sink)
    frame = _raw_frame(spark, sink)
    if frame is None:
        return None
    from pyspark.sql import functions as F  # lazy: see docs/imports.md

    names = {f.name.lower(): f for f in frame.schema.fields}
    cols = [names.get(c.lower()) for c in (sink.topic_column, sink.partition_column, sink.offset_column,
                                            sink.key_column)]
    t, p, o, k = cols
    if t is None or p is None or o is None or k is None:
        return None  # the local engine's reader says which column is missing
    if (type(t.dataType).__name__ != "StringType" or type(p.dataType).__name__ not in _INTS
            or type(o.dataType).__name__ not in _INTS or type(k.dataType).__name__ not in _KEYS):
        return None
    topic, part, off = F.col(f"`{t.name}`"), F.col(f"`{p.name}`"), F.col(f"`{o.name}`")
    # The local engine's validity (eosctl.sink.sql): a topic non-empty, 0 <= partition < 2^31, offset >= 0.
    rows = frame.where(topic.isNotNull() & (topic != "") & part.between(0, MAX_PARTITION) & (off >= 0)
                       & F.col(f"`{k.name}`").isNotNull())
    return rows.select(F.col(f"`{k.name}`").cast("string").alias("key"), topic.alias("topic"),
                       part.cast("int").alias("partition"), off.cast("long").alias("offset"))


def within(frame: Any, committed: Mapping[TP, Sequence[tuple[int, int]]]) -> Any:
    """``frame`` (key_frame's) with only the audited partitions' rows from their first to last committed
    offset: a key with two committed places has both there, so the rule finds what it finds over the
    whole sink. Plain comparisons of the columns, which Spark pushes into the Parquet scan."""
    from pyspark.sql import functions as F  # lazy: see docs/imports.md

    topic, part, off = F.col("topic"), F.col("partition"), F.col("offset")
    if len(committed) > SPAN_PREDICATES:
        wanted = [(topic == t) & (part == p) for t, p in committed]
    else:
        wanted = [(topic == t) & (part == p) & off.between(min(a for a, _ in spans), max(b for _, b in spans))
                  for (t, p), spans in committed.items() if spans]
    return frame.where(reduce(lambda a, b: a | b, wanted) if wanted else F.lit(False))


def _raw_frame(spark: Any, sink: Sink) -> Any | None:
    """The sink's rows as Spark reads them, or None."""
    if sink.postgres or sink.duckdb or sink.kafka_topic or sink.mode != "offsets":
        return None
    files: list[str] | None = None
    if sink.delta:
        if sink.files:
            files = list(sink.files)
        else:
            return _delta_frame(spark, sink)
    elif sink.iceberg:
        # The pinned snapshot's data files where its rows are exactly theirs (eosctl.sink.iceberg.plain_files:
        # no delete files, one schema ever); else the tasks read it through pyiceberg. No Iceberg runtime
        # for Spark 4.2 is on Maven Central yet (iceberg-spark-runtime-4.1_2.13 1.12.0 is the newest).
        files = list(sink.files) if sink.files else None
    elif sink.parquet:
        files = parquet_files(sink.parquet)
    if not files:
        return None
    try:
        return spark.read.parquet(*files)
    except Exception:  # e.g. files Spark's reader refuses: the tasks read them as before
        return None


def parquet_files(pattern: str) -> list[str] | None:
    """The local files the sink's pattern names, as eosctl.sink.parquet lists them; None for a URL."""
    if is_url(pattern):
        return None
    if is_table_dir(pattern):
        return list(table_files(pattern)) or None
    return [f for f in glob_paths(pattern) if os.path.isfile(f)] or None


def _delta_frame(spark: Any, sink: Sink) -> Any | None:
    """The Delta table at the pinned version through delta-spark, where the session can load it."""
    version = (sink.at or "").partition(",")[0]
    if not version.isdigit() or sink.delta is None or "://" in sink.delta:
        return None
    try:
        reader = spark.read.format("delta").option("versionAsOf", int(version))
        frame = reader.load(sink.delta)
        frame.schema  # noqa: B018 - resolving the schema is where a missing delta-spark shows
        return frame
    except Exception:
        return None


# JDBC connection properties a PostgreSQL URI's parameters map to (pgjdbc's names); a URI with any other
# parameter (a client key pgjdbc reads in another format, a service file) is left to the tasks' libpq.
_JDBC_PARAMS = {"user": "user", "password": "password", "options": "options", "sslmode": "sslmode",
                "sslrootcert": "sslrootcert", "connect_timeout": "connectTimeout",
                "application_name": "ApplicationName"}
# Rows a JDBC task fetches per round trip: pgjdbc otherwise reads a task's whole result into memory.
JDBC_FETCH_SIZE = 10_000
MAX_JDBC_TASKS = 16


def _postgres_keys(spark: Any, sink: Sink) -> Any | None:
    """key_frame of a PostgreSQL sink pinned at a snapshot (eosctl.sink.postgres.exported), through Spark's
    JDBC source; None where it can't read it so (a Unix socket, no driver, no pinned snapshot)."""
    from eosctl.sink.postgres import _SNAPSHOT_ID, conninfo, open_postgres  # lazy: see docs/imports.md

    assert sink.postgres is not None
    if sink.at is None or not _SNAPSHOT_ID.match(sink.at):
        return None  # no snapshot every task can join: the tasks read the keys, each at the sink's pin
    info = conninfo(sink.postgres, "sink")
    host, port = str(info.get("host", "")), str(info.get("port", "5432"))
    extra = set(info) - {"host", "port", "dbname", *_JDBC_PARAMS}
    if not host or host.startswith("/") or "," in host or "," in port or extra:
        return None
    # The local engine's query for the key rows, on the columns it found: the same validity and key text.
    reader = open_postgres(sink)
    try:
        rows_sql = reader.key_rows_sql()
    finally:
        reader.close()
    props = {name: str(info[k]) for k, name in _JDBC_PARAMS.items() if k in info}
    props.update({
        "driver": "org.postgresql.Driver",
        # Each task's connection joins the command's snapshot, as every local reader does.
        "sessionInitStatement": "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; "
                                f"SET TRANSACTION SNAPSHOT '{sink.at}'",
        "fetchsize": str(JDBC_FETCH_SIZE),
    })
    tasks = min(MAX_JDBC_TASKS, spark_slots(spark))
    hosted = f"[{host}]" if ":" in host else host
    url = f"jdbc:postgresql://{hosted}:{port}/{info.get('dbname', '')}"
    try:
        frame = spark.read.jdbc(url, f"({rows_sql}) AS eosctl_keys",
                                predicates=[f"p % {tasks} = {i}" for i in range(tasks)], properties=props)
        frame.schema  # noqa: B018 - resolving the schema is where a missing driver or server shows
    except Exception:
        return None
    from pyspark.sql import functions as F  # lazy: see docs/imports.md

    types = {f.name: type(f.dataType).__name__ for f in frame.schema.fields}

    def as_type(name: str, kind: str, spark_type: str) -> Any:
        # A cast only where the type differs: a filter on a narrowing cast is not pushed into the query.
        col = F.col(name)
        return col if types.get(name) == spark_type else col.cast(kind)

    return frame.select(F.col("k").alias("key"), F.col("t").alias("topic"),
                        as_type("p", "int", "IntegerType").alias("partition"),
                        as_type("o", "long", "LongType").alias("offset"))


def spark_slots(spark: Any) -> int:
    """How many tasks the session runs at once: its executors' cores (defaultParallelism, which
    auditors.spark leaves at Spark's default); Spark Connect has no SparkContext: the server's
    spark.default.parallelism, else a small cluster's guess."""
    try:
        return max(1, int(spark.sparkContext.defaultParallelism))
    except Exception:
        try:
            return max(1, int(spark.conf.get("spark.default.parallelism")))
        except Exception:
            return 8
