"""The key-duplicate rule as Spark SQL over the sink Spark reads itself (auditors.spark_sink).

The same two steps as the local engine's (auditors.keydups), split where the data is:

1. candidates, in Spark: GROUP BY key over the audited partitions' rows, keeping the keys whose smallest
   and largest offset, partition or topic (by its 64-bit hash: two topics of one sink with the same
   xxhash64 are what would hide a candidate) differ. A hash aggregate, partial on the map side; a clean
   sink has no candidate.
2. the candidates' rows (a second scan of the same four columns, joined with the few candidate keys
   broadcast) reach the driver, where keydups.duplicate_keys places them on the committed ranges by
   writer the tasks reported: the local engine's own SQL, so the findings are the same by construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from auditors.keydups import duplicate_keys
from auditors.spark_sink import within
from eosctl.cluster.model import TP
from eosctl.report.findings import Finding

# Up to this many candidate keys go back to Spark as a literal list, past it as a broadcast table.
INLINE_KEYS = 1_000


def spark_duplicate_keys(spark: Any, keys: Any, writers: Any, collect: Any) -> list[Finding]:
    """The key_duplicate findings of ``keys`` (auditors.spark_sink.key_frame) at the committed ranges
    ``writers`` (an Arrow table of keydups.WRITER_COLUMNS); ``collect``: a DataFrame to an Arrow table
    (running its job, Spark's errors as one line)."""
    import duckdb  # lazy: see docs/imports.md
    from pyspark.sql import functions as F  # lazy: see docs/imports.md

    if not writers.num_rows:
        return []
    spans: dict[TP, list[tuple[int, int]]] = {}
    for t, p, first, last in zip(*(writers.column(c).to_pylist() for c in
                                   ("topic", "partition", "first_offset", "last_offset")), strict=True):
        spans.setdefault((t, p), []).append((first, last))
    rows = within(keys, spans)
    # min <> max of each part of the place, as keydups does; the topic by its 64-bit hash: an aggregate of
    # fixed-width buffers only is a hash aggregate (a struct's or a string's min falls back to a sort
    # aggregate: every row sorted by key).
    topic = F.xxhash64("topic")
    candidates = collect(rows.groupBy("key").agg(
        F.min("offset").alias("o0"), F.max("offset").alias("o1"), F.min("partition").alias("p0"),
        F.max("partition").alias("p1"), F.min(topic).alias("t0"), F.max(topic).alias("t1"))
        .where((F.col("o0") != F.col("o1")) | (F.col("p0") != F.col("p1")) | (F.col("t0") != F.col("t1")))
        .select("key"))
    found: Sequence[str] = candidates.column("key").to_pylist()
    if not found:
        return []
    if len(found) <= INLINE_KEYS:
        chosen = rows.where(F.col("key").isin(list(found)))
    else:
        import pyarrow as pa  # lazy: see docs/imports.md

        wanted = spark.createDataFrame(pa.table({"key": pa.array(found, pa.string())}))
        chosen = rows.join(F.broadcast(wanted), "key")
    places = collect(chosen.distinct())
    with duckdb.connect() as con:
        con.register("key_places", places)
        con.register("key_writers", writers)
        return duplicate_keys(con, "key_places", "key_writers")
