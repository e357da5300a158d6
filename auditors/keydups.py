"""The key-duplicate rule where the rows are: DuckDB groups the sink's keys, only duplicates come out.

A key is a duplicate when the sink holds it at more than one committed place (topic, partition, offset):
one business record written under two source offsets. The rule used to ship every key row of every task
to the driver and split them per partition row by row in Python (5.7x an offsets-only audit at 2M
offsets, 22x at 10M). Here it is two steps of one query:

1. candidates: the keys whose rows name more than one place at all. ``min <> max`` of a place's parts
   holds exactly when a key has two distinct places, and committed places are a subset of all places,
   so no duplicate is missed. This is the only pass over every key: it costs what DuckDB's own GROUP BY
   of the keys costs (benchmarks/keyed_bench.py measures both in one run).
2. the candidates' distinct places, each matched to the committed range (and its writer) it falls in
   (ASOF join: the ranges are sorted and disjoint per partition); a key at more than one committed place
   is a finding (eosctl.rules.rule.key_finding). A clean sink has no candidate: this step reads nothing.

``duplicate_keys`` is the rule over any DuckDB relation of places; the local engine runs it in the driver
over the sink itself (``in_sink``: the sink's own SQL for a DuckDB-read sink, its committed keys streamed
as Arrow for PostgreSQL). The Spark engine's tasks attach writers to their key rows (``with_writers``, no
per-row Python) and a window per key in Spark's shuffle keeps the duplicates' rows (auditors.spark_job).

An incremental audit feeds ``duplicate_keys`` the union of its stored key index (key, topic, partition,
offset of the rows already audited) and the new rows as ``places``, and the committed ranges of both as
``writers``: the findings are those of a full audit over the same rows.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from auditors.guard import interruptible
from eosctl.base.arrowbuffers import array
from eosctl.base.errors import SinkError, first_line
from eosctl.cluster.model import TP
from eosctl.report.findings import Finding
from eosctl.rules.rule import key_finding
from eosctl.sink.base import Limits, as_given
from eosctl.sink.relation import DuckDBReader
from eosctl.sink.sql import literal

if TYPE_CHECKING:
    import pyarrow as pa

    from eosctl.sink import SinkReader

# The writers relation: a partition's committed offsets first..last (inclusive), by who wrote them
# (eosctl.rules.causes.Writer; marker_offset NULL where the writer was not transactional).
WRITER_COLUMNS = ("topic", "partition", "first_offset", "last_offset", "producer_id", "producer_epoch",
                  "marker_offset")


def writers_table(committed: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Committed ranges by writer (dicts with WRITER_COLUMNS: the tasks' "committed" rows) as an Arrow
    table of the writers relation."""
    import pyarrow as pa  # lazy: see docs/imports.md

    types = (pa.string(), pa.int32(), pa.int64(), pa.int64(), pa.int64(), pa.int32(), pa.int64())
    rows = list(committed)
    # Built from the buffers (eosctl.base.arrowbuffers): pa.array of Python values imports pandas.
    return pa.table([array([r[c] for r in rows], t) for c, t in zip(WRITER_COLUMNS, types, strict=True)],
                    names=list(WRITER_COLUMNS))


def duplicate_keys(con: Any, places: str, writers: str) -> list[Finding]:
    """The key_duplicate findings of ``places`` (SQL a FROM takes: key, topic, partition, offset of sink rows
    with a key, any order, repeats and uncommitted offsets included) against ``writers`` (SQL a FROM takes:
    WRITER_COLUMNS), on the DuckDB connection ``con``."""
    groups = con.execute(f"""
        WITH rows AS (
            SELECT CAST(key AS VARCHAR) AS key, topic, "partition", "offset" FROM {places}
            WHERE key IS NOT NULL AND topic IS NOT NULL AND "partition" IS NOT NULL AND "offset" IS NOT NULL),
        candidates AS (
            SELECT key FROM rows GROUP BY key
            HAVING min("offset") <> max("offset") OR min("partition") <> max("partition")
                OR min(topic) <> max(topic)),
        distinct_places AS (SELECT DISTINCT key, topic, "partition", "offset" FROM rows
               WHERE key IN (SELECT key FROM candidates)),
        placed AS (
            SELECT a.key, a.topic, a."partition", a."offset", w.producer_id, w.producer_epoch, w.marker_offset
            FROM distinct_places a ASOF JOIN {writers} w
              ON a.topic = w.topic AND a."partition" = w."partition" AND a."offset" >= w.first_offset
            WHERE a."offset" <= w.last_offset)
        SELECT key, list(struct_pack("topic" := topic, "partition" := "partition", "offset" := "offset",
                                     "producer_id" := producer_id, "producer_epoch" := producer_epoch,
                                     "marker_offset" := marker_offset))
        FROM placed GROUP BY key HAVING count(*) > 1""").fetchall()
    return [key_finding(key, at) for key, at in groups]


def in_sink(reader: SinkReader, writers: pa.Table, limits: Limits) -> list[Finding]:
    """The key_duplicate findings of the sink ``reader`` reads, at the committed ranges ``writers`` (an
    Arrow table of WRITER_COLUMNS): the local engine's driver, once its tasks are done (``limits``: what
    the workers had between them)."""
    if not writers.num_rows:
        return []
    if isinstance(reader, DuckDBReader):  # read by DuckDB: the rule runs on the reader's own connection
        reader.limit(limits)
        con = reader.conn
        places = (f'(SELECT k AS key, t AS topic, p AS "partition", o AS "offset" '
                  f"FROM ({reader.key_rows_sql()}))")
        con.register("key_writers", writers)
        try:
            with interruptible(con):
                return duplicate_keys(con, places, "key_writers")
        except Exception as e:
            raise SinkError(f"grouping the keys of sink {reader.source} failed: "
                            f"{as_given(reader.sink, first_line(e))}") from None
        finally:
            con.unregister("key_writers")
    return _streamed(reader, writers, limits)


def _streamed(reader: SinkReader, writers: pa.Table, limits: Limits) -> list[Finding]:
    """A sink DuckDB doesn't read (PostgreSQL): its committed keys, as the reader streams them in Arrow
    batches, into a DuckDB table of this process (the rule reads them twice), then the rule."""
    import duckdb  # lazy: see docs/imports.md

    spans: dict[TP, list[tuple[int, int]]] = {}
    for t, p, first, last in zip(*(writers.column(c).to_pylist() for c in WRITER_COLUMNS[:4]), strict=True):
        spans.setdefault((t, p), []).append((first, last))
    with duckdb.connect() as con, interruptible(con):
        con.execute(f"SET threads = {int(limits.threads)}")
        con.execute(f"SET memory_limit = {literal(limits.memory)}")
        if limits.temp_directory:
            os.makedirs(limits.temp_directory, exist_ok=True)
            con.execute(f"SET temp_directory = {literal(limits.temp_directory)}")
        con.execute("SET preserve_insertion_order = false")
        con.execute('CREATE TEMP TABLE key_places (key VARCHAR, topic VARCHAR, "partition" INTEGER, '
                    '"offset" BIGINT)')
        # A batch at a time (65,536 rows): the reader's errors reach the caller as they are.
        for batch in reader.committed_keys_in(spans):
            con.register("key_batch", batch)
            con.execute("INSERT INTO key_places SELECT * FROM key_batch")
            con.unregister("key_batch")
        con.register("key_writers", writers)
        return duplicate_keys(con, "key_places", "key_writers")


def with_writers(keys: Iterable[pa.RecordBatch], writers: pa.Table) -> Iterator[pa.RecordBatch]:
    """Key rows (batches of key, topic, partition, offset: an audit task's committed keys as its reader
    streams them) with the writer of each row's committed range: key, topic, partition, offset and the
    writer columns, for Spark's shuffle to group; a row in no range is left out. Vectorised: each batch's
    rows sorted by partition, then one binary search per partition of the batch, no per-row Python."""
    import numpy as np  # lazy: see docs/imports.md
    import pyarrow as pa  # lazy: see docs/imports.md
    import pyarrow.compute as pc  # lazy: see docs/imports.md

    topics = pc.unique(writers.column("topic").combine_chunks().cast(pa.string()))

    def codes(t: Any, p: Any) -> np.ndarray:
        # (topic, partition) as one int64: the topic's index among the writers' topics, the partition below
        at = pc.index_in(t, value_set=topics).fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
        return (at << 32) | p.to_numpy(zero_copy_only=False).astype(np.int64)

    w_code = codes(writers.column("topic").combine_chunks(), writers.column("partition").combine_chunks())
    w_first = writers.column("first_offset").to_numpy()
    order = np.lexsort((w_first, w_code))
    w_code, w_first = w_code[order], w_first[order]
    w_last = writers.column("last_offset").to_numpy()[order]
    extra = [writers.column(c).combine_chunks().take(pa.array(order)) for c in WRITER_COLUMNS[4:]]
    for batch in keys:
        if not batch.num_rows:
            continue
        code = codes(batch.column(1), batch.column(2))
        offset = batch.column(3).to_numpy(zero_copy_only=False).astype(np.int64)
        at = np.full(len(code), -1, np.int64)
        for c in np.unique(code):
            lo, hi = np.searchsorted(w_code, c, "left"), np.searchsorted(w_code, c, "right")
            if lo == hi:
                continue
            rows = np.flatnonzero(code == c)
            i = lo + np.searchsorted(w_first[lo:hi], offset[rows], "right") - 1
            inside = (i >= lo) & (offset[rows] <= w_last[i.clip(lo, hi - 1)])
            at[rows[inside]] = i[inside]
        keep = np.flatnonzero(at >= 0)
        if not len(keep):
            continue
        taken = pa.array(at[keep])
        rows_kept = batch.take(pa.array(keep))
        yield pa.RecordBatch.from_arrays([*rows_kept.columns[:4], *(e.take(taken) for e in extra)],
                                         names=["key", "topic", "partition", "offset", *WRITER_COLUMNS[4:]])
