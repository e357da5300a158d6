"""Read-only SQL over one sink relation: what every SQL-speaking kind answers, and its DuckDB engine.

``SqlReader`` builds the queries (summaries, islands, invalid rows, stored offsets) from the sink's
column names and types; a subclass runs them. ``DuckDBReader`` runs them in DuckDB, over a table of a
DuckDB file or read_parquet(...): the DuckDB and Parquet kinds differ only in how they open the relation
(eosctl.sink.duckdb, eosctl.sink.parquet). PostgreSQL runs the same SQL on its server
(eosctl.sink.postgres).
"""

from __future__ import annotations

import os
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from eosctl.base.errors import SinkError, first_line
from eosctl.cluster.model import TP
from eosctl.config.model import Sink
from eosctl.report.findings import Finding
from eosctl.sink.base import (
    ISLAND_BATCH,
    MAX_OFFSET,
    MAX_PARTITION,
    OFFSETS_COLUMNS,
    Limits,
    OffsetIsland,
    ReadPoint,
    SinkPartition,
    StoredOffset,
    as_given,
)
from eosctl.sink.spark_checkpoint import stored_offsets
from eosctl.sink.sql import IntColumn, ident, int_column, literal, short, topic_column

if TYPE_CHECKING:
    import pyarrow as pa
    from duckdb import DuckDBPyConnection

# Opening a sink must never reach the network (DuckDB auto-installs scanners for foreign file formats).
NO_EXTENSION_DOWNLOADS: dict[str, str | bool | int | float | list[str]] = {
    "autoinstall_known_extensions": False}


class SqlReader(ABC):
    """Read-only queries over one sink relation. Use as a context manager, or call close().

    A subclass runs the SQL: _query (all rows), _stream (batches: Arrow, or lists of row tuples),
    close, limit, committed_keys; and may type the columns its own way (_int_column)."""

    _int_column = staticmethod(int_column)
    scans_all_per_partition = False  # DuckDB skips row groups by their statistics

    def __init__(self, relation: str, sink: Sink, source: str, offsets_relation: str | None,
                 read_point: ReadPoint, types: dict[str, str] | None = None,
                 offsets_types: dict[str, str] | None = None):
        self.relation = relation  # SQL for FROM: a quoted table or read_parquet([...])
        self.sink = sink
        self.source = source  # what to name in messages: the file or glob
        self.offsets_relation = offsets_relation
        self.read_point = read_point
        types = {k.lower(): v for k, v in (types or {}).items()}
        self._types = types
        self._t, self._p, self._o = self._columns(types, sink.topic_column, sink.partition_column,
                                                  sink.offset_column)
        self._offsets_types = {k.lower(): v for k, v in (offsets_types or {}).items()}
        # One normalised view of the valid rows: later SQL never repeats the user's column names, and a
        # row no Kafka record can match (invalid_rows) never reaches an island or a summary.
        self._rows = (f"(SELECT {self._t.value} AS t, {self._p.value} AS p, {self._o.value} AS o "
                      f"FROM {relation}) AS r")

    def _columns(self, types: dict[str, str], topic: str, partition: str,
                 offset: str) -> tuple[IntColumn, IntColumn, IntColumn]:
        def type_of(name: str) -> str:
            return types.get(name.lower(), "VARCHAR")

        return (topic_column(ident(topic)),
                self._int_column(ident(partition), type_of(partition), MAX_PARTITION, "2^31-1", "INTEGER"),
                self._int_column(ident(offset), type_of(offset), MAX_OFFSET, "2^63-1", "BIGINT"))

    def __enter__(self) -> SqlReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abstractmethod
    def close(self) -> None:
        ...

    @abstractmethod
    def limit(self, limits: Limits) -> None:
        ...

    @abstractmethod
    def committed_keys(self, topic: str, partition: int,
                       committed: list[tuple[int, int]]) -> Iterator[pa.RecordBatch]:
        ...

    def committed_keys_in(self, committed: Mapping[TP, list[tuple[int, int]]]) -> Iterator[pa.RecordBatch]:
        """Arrow batches (key, topic, partition, offset): committed_keys() of several partitions (an audit
        task's group); here one query per partition, DuckDBReader asks once."""
        import pyarrow as pa  # lazy: see docs/imports.md

        for (topic, partition), ranges in committed.items():
            for b in self.committed_keys(topic, partition, ranges):
                n = b.num_rows
                yield pa.RecordBatch.from_arrays(
                    [b.column(0), pa.repeat(pa.scalar(topic, pa.string()), n),
                     pa.repeat(pa.scalar(partition, pa.int32()), n), b.column(1)],
                    names=["key", "topic", "partition", "offset"])

    def islands_in(self, tps: Sequence[TP]) -> Iterator[OffsetIsland]:
        """islands() of these partitions (an audit task's group) in one query, ordered by topic,
        partition, first."""
        if len(tps) <= 1:  # one partition: its own query sorts by offset alone
            for topic, partition in tps:
                yield from self.islands(topic, partition)
            return
        wanted = ", ".join(f"({literal(t)}, {int(p)})" for t, p in tps)
        counts = (f"SELECT r.t, r.p, r.o, count(*) AS m FROM {self._rows} "
                  f"JOIN (VALUES {wanted}) AS w(t, p) ON r.t = w.t AND r.p = w.p "
                  "WHERE r.o IS NOT NULL GROUP BY r.t, r.p, r.o")
        yield from islands_from(self._stream(islands_sql(counts, "PARTITION BY t, p ORDER BY o")))

    @abstractmethod
    def _query(self, sql: str) -> list[tuple]:
        ...

    @abstractmethod
    def _stream(self, sql: str) -> Iterator[Any]:
        ...

    def row_fields(self, topic: str, partition: int,
                   columns: Sequence[str]) -> list[tuple[int, dict[str, Any]]]:
        """(offset, {column: value}) of every valid row of the partition, the values as the database types
        them (DECIMAL/NUMERIC as Decimal, TIMESTAMP as datetime, BLOB/BYTEA as bytes, STRUCT and JSON as
        dict, LIST/ARRAY as list): the decoded content check (eosctl.rules.fields) compares them with the
        records' fields."""
        extra = "".join(f", {ident(c)} AS c{i}" for i, c in enumerate(columns))
        sql = f"SELECT o{''.join(f', c{i}' for i in range(len(columns)))} FROM " \
              f"({self._rows_sql(topic, partition, False, extra)}) AS r ORDER BY o"
        rows = self._query(sql)
        return [(int(r[0]), dict(zip(columns, r[1:], strict=True))) for r in rows]

    def summaries(self) -> list[SinkPartition]:
        """Per partition the sink names validly; rows with an invalid offset are counted, not summarised."""
        sql = f"""
            WITH c AS (SELECT t, p, o, count(*) AS m FROM {self._rows}
                       WHERE t IS NOT NULL AND p IS NOT NULL GROUP BY t, p, o)
            SELECT t, p, sum(m)::BIGINT, count(o), min(o), max(o),
                   count(*) FILTER (WHERE m > 1 AND o IS NOT NULL),
                   coalesce(sum(m) FILTER (WHERE o IS NULL), 0)::BIGINT
            FROM c GROUP BY t, p ORDER BY t, p"""
        return [SinkPartition(*row) for row in self._query(sql)]

    def partitions(self) -> dict[TP, int]:
        """(topic, partition) -> rows: which partitions the sink names; one cheap aggregation, unlike
        summaries(), which counts every offset (~30x slower on 20M rows)."""
        sql = f"SELECT t, p, count(*) FROM {self._rows} WHERE t IS NOT NULL AND p IS NOT NULL GROUP BY t, p"
        return {(t, p): n for t, p, n in self._query(sql)}

    def invalid_rows(self) -> list[Finding]:
        """invalid_row findings: rows no Kafka record can match, in the sink table and its offsets table.

        One finding per (topic, partition, column, problem); topic and partition are set where they are
        valid, the offsets are None (there is no offset to name) and count is the number of rows.
        """
        cols = self.sink.topic_column, self.sink.partition_column, self.sink.offset_column
        findings = self._invalid(self._maybe_invalid(), (self._t, self._p, self._o), cols, "")
        hop = self.sink.frozen_from or self.sink
        if hop.kafka_topic is not None:
            findings = [_no_lineage(f, hop) for f in findings]
        if self.offsets_relation is not None:
            t, p, o = self._columns(self._offsets_types, *OFFSETS_COLUMNS)
            name = self.sink.offsets_table or "offsets"
            if self.sink.frozen_from is not None:
                name = self.sink.frozen_from.offsets_table or name
            findings += self._invalid(self.offsets_relation, (t, p, o), OFFSETS_COLUMNS,
                                      f"offsets table {name}: ")
        return sorted(findings, key=lambda f: f.sort_key)

    def _maybe_invalid(self) -> str:
        """SQL for FROM: rows of the sink table among which every invalid one is (here all of them)."""
        return self.relation

    def _invalid(self, relation: str, checks: tuple[IntColumn, IntColumn, IntColumn],
                 names: tuple[str, ...], prefix: str) -> list[Finding]:
        t, p, o = checks
        raw = [ident(n) for n in names]
        # Each row counts once, under its first bad column; a bad value is shown (the smallest) so the
        # user can find the rows.
        sql = f"""
            WITH b AS (
                SELECT {t.value} AS t, {p.value} AS p,
                       CASE WHEN {t.problem} IS NOT NULL THEN 0 WHEN {p.problem} IS NOT NULL THEN 1 ELSE 2 END
                           AS c,
                       coalesce({t.problem}, {p.problem}, {o.problem}) AS why,
                       CASE WHEN {t.problem} IS NOT NULL THEN NULL
                            WHEN {p.problem} IS NOT NULL THEN CAST({raw[1]} AS VARCHAR)
                            ELSE CAST({raw[2]} AS VARCHAR) END AS v
                FROM {relation}
                -- the cheap checks first: the CASEs above only for the (few) rows that fail one
                WHERE NOT coalesce({t.valid} AND {p.valid} AND {o.valid}, false))
            SELECT t, p, c, why, count(*), min(v) FROM b WHERE why IS NOT NULL
            GROUP BY t, p, c, why ORDER BY t NULLS FIRST, p NULLS FIRST, c, why"""
        out = []
        for topic, partition, c, why, n, example in self._query(sql):
            shown = ("" if why in ("is NULL", "is empty") or example is None else
                     f" (e.g. {short(example)})" if example.strip() else f" (e.g. {example!r})")
            out.append(Finding("invalid_row", topic, partition, None, None, n,
                               detail=f"{prefix}{names[c]} {why}{shown}"))
        return out

    def _rows_sql(self, topic: str, partition: int, with_key: bool = False, extra: str = "") -> str:
        """SQL for one partition's valid rows: column o, and k (the key as text); ``extra``: more columns
        (", expr AS name")."""
        key = f", CAST({ident(self.sink.key_column)} AS VARCHAR) AS k" if with_key and self.sink.key_column \
            else ""
        key += extra
        # Filters on the raw columns (not the normalised view) so DuckDB can push them into the scan.
        t = ident(self.sink.topic_column)
        return (f"SELECT {self._o.checked or self._o.value} AS o{key} FROM {self.relation} "
                f"WHERE CAST({t} AS VARCHAR) = {literal(topic)} AND {self._p.equals(int(partition))} "
                f"AND {self._o.valid}")

    def islands(self, topic: str | None = None, partition: int | None = None) -> Iterator[OffsetIsland]:
        """Runs of consecutive offsets with equal multiplicity, ordered by topic, partition, first.

        Memory stays bounded by a batch, not by the sink (one partition: by its breaks, about one for each
        gap and each duplicated row).
        """
        if topic is not None and partition is not None:
            # One partition (an audit task): where its offsets break, from one lead() over its rows sorted
            # by offset (3-5x faster than counting each offset and windowing over the counts; 1.6x slower
            # where nearly every row is a duplicate), and its first offset.
            rows = self._rows_sql(topic, partition)
            [(first,)] = self._query(f"SELECT min(o) FROM ({rows}) AS r")
            yield from islands_from_breaks(topic, partition, first, self._stream(breaks_sql(rows)))
            return
        where = ["o IS NOT NULL", "t IS NOT NULL", "p IS NOT NULL"]
        if topic is not None:
            where.append(f"t = {literal(topic)}")
        if partition is not None:
            where.append(f"p = {int(partition)}")
        counts = (f"SELECT t, p, o, count(*) AS m FROM {self._rows} WHERE {' AND '.join(where)} "
                  "GROUP BY t, p, o")
        window = "PARTITION BY t, p ORDER BY o"
        yield from islands_from(self._stream(islands_sql(counts, window)))

    def write_order(self, topic: str, partition: int,
                    ranges: Sequence[tuple[int, int]]) -> dict[int, tuple[Any, Any, Any, Any]]:
        """For each duplicated range (keyed by its first offset), the sink's ``order_column`` values of its
        first writes (each offset's smallest) and of its repeated writes (each offset's largest), each as
        (min, max) over the range's offsets: when a replay wrote them again. {} without an order column."""
        if not self.sink.order_column or not ranges:
            return {}
        order = ident(self.sink.order_column)
        wanted = ", ".join(f"({int(a)}, {int(b)})" for a, b in ranges)
        t = ident(self.sink.topic_column)
        sql = (f"SELECT w.a, min(r.f), max(r.f), min(r.l), max(r.l) FROM ("
               f"SELECT {self._o.value} AS o, min({order}) AS f, max({order}) AS l FROM {self.relation} "
               f"WHERE CAST({t} AS VARCHAR) = {literal(topic)} AND {self._p.equals(int(partition))} "
               f"AND {self._o.valid} GROUP BY 1 HAVING count(*) > 1) AS r "
               f"JOIN (VALUES {wanted}) AS w(a, b) ON r.o BETWEEN w.a AND w.b GROUP BY w.a")
        return {int(row[0]): tuple(_plain(v) for v in row[1:]) for row in self._query(sql)}

    def write_times(self, topic: str, partition: int, offset: int) -> list[Any]:
        """The ``write_time_column`` values of the offset's rows, earliest first (one per row: a duplicate
        has several). [] without the column."""
        if not self.sink.write_time_column:
            return []
        column = ident(self.sink.write_time_column)
        t = ident(self.sink.topic_column)
        sql = (f"SELECT {column} FROM {self.relation} WHERE CAST({t} AS VARCHAR) = {literal(topic)} "
               f"AND {self._p.equals(int(partition))} AND {self._o.valid} "
               f"AND {self._o.value} = {int(offset)} ORDER BY 1")
        return [row[0] for row in self._query(sql)]

    def stored_offsets(self) -> list[StoredOffset] | None:
        """The sink's own offsets table (topic, partition, next_offset), or None if it has none. Rows
        with an invalid topic, partition or next offset are left out here: invalid_rows() reports them.
        A Spark query's sink stores them in its checkpoint (eosctl.sink.spark_checkpoint)."""
        if self.sink.spark_checkpoint is not None:
            return stored_offsets(self.sink.spark_checkpoint)
        if self.offsets_relation is None:
            return None
        t, p, n = self._columns(self._offsets_types, *OFFSETS_COLUMNS)
        sql = (f"SELECT {t.value}, {p.value}, {n.value} FROM {self.offsets_relation} "
               f"WHERE {t.valid} AND {p.valid} AND {n.valid} ORDER BY 1, 2")
        return [StoredOffset(*row) for row in self._query(sql)]

    def _query_error(self, e: Exception) -> SinkError:
        return SinkError(f"query on sink {self.source} failed: {as_given(self.sink, first_line(e))}")


class DuckDBReader(SqlReader):
    """The SQL run in DuckDB: a DuckDB file's table or Parquet files."""

    def __init__(self, conn: DuckDBPyConnection, relation: str, sink: Sink, source: str,
                 offsets_relation: str | None, read_point: ReadPoint, types: dict[str, str] | None = None,
                 offsets_types: dict[str, str] | None = None):
        super().__init__(relation, sink, source, offsets_relation, read_point, types, offsets_types)
        self.conn = conn

    def close(self) -> None:
        self.conn.close()

    def limit(self, limits: Limits) -> None:
        """Cap DuckDB inside a worker: it is outside Spark's memory accounting."""
        self.conn.execute(f"SET threads = {int(limits.threads)}")
        self.conn.execute(f"SET memory_limit = {literal(limits.memory)}")
        if limits.temp_directory:
            os.makedirs(limits.temp_directory, exist_ok=True)
            self.conn.execute(f"SET temp_directory = {literal(limits.temp_directory)}")
        self.conn.execute("SET preserve_insertion_order = false")

    def committed_keys(self, topic: str, partition: int,
                       committed: list[tuple[int, int]]) -> Iterator[pa.RecordBatch]:
        """Arrow batches (key, offset) of the partition's distinct rows with a key whose offset lies in
        one of the ``committed`` ranges (first, last inclusive, sorted, disjoint)."""
        import pyarrow as pa  # lazy: see docs/imports.md

        ranges = pa.table({"rf": [c[0] for c in committed], "rl": [c[1] for c in committed]},
                          schema=pa.schema([("rf", pa.int64()), ("rl", pa.int64())]))
        self.conn.register("committed_ranges", ranges)
        # ASOF join: each row meets the last range starting at or before its offset; inside it = committed.
        sql = f"""
            SELECT DISTINCT s.k AS key, s.o AS offset FROM ({self._rows_sql(topic, partition, True)}) s
            ASOF JOIN committed_ranges r ON s.o >= r.rf
            WHERE s.o <= r.rl AND s.k IS NOT NULL"""
        try:
            yield from self.conn.sql(sql).to_arrow_reader(ISLAND_BATCH)
        except Exception as e:
            raise SinkError(f"reading keys of {topic}-{partition} from sink {self.source} "
                            f"failed: {as_given(self.sink, first_line(e))}") from None

    def columns(self) -> list[str]:
        """The relation's column names, as the sink spells them (the decoded content check's default
        mapping: columns named like the value's fields)."""
        try:
            return [d[0] for d in self.conn.sql(f"SELECT * FROM {self.relation} LIMIT 0").description]
        except Exception as e:
            raise self._query_error(e) from None

    def row_keys(self, topic: str, partition: int) -> Iterator[pa.RecordBatch]:
        """Arrow batches (offset, key[, value]) of every row of the partition with a key, in no order (the
        content check, eosctl.rules.content): one scan, no join, no DISTINCT. The value column
        (sink.value_column: a blob as its bytes, anything else as text; sink.value_hash_column: its text in
        lower case) is the third column where the sink names one."""
        value = self._value_sql()
        rows = self._rows_sql(topic, partition, True, value)
        sql = f"SELECT o, k{', v' if value else ''} FROM ({rows}) WHERE k IS NOT NULL"
        try:
            yield from self.conn.sql(sql).to_arrow_reader(ISLAND_BATCH)
        except Exception as e:
            raise SinkError(f"reading keys of {topic}-{partition} from sink {self.source} "
                            f"failed: {as_given(self.sink, first_line(e))}") from None

    def row_keys_in(self, tps: Sequence[TP]) -> pa.Table:
        """row_keys of several partitions in one query (small ones: a query each cost more than their
        rows): one Arrow table (i, o, k[, v]) ordered by i, each row's partition as its place in ``tps``."""
        value = self._value_sql()
        parts = " UNION ALL ".join(
            f"SELECT {n} AS i, o, k{', v' if value else ''} FROM ({self._rows_sql(t, p, True, value)})"
            for n, (t, p) in enumerate(tps))
        sql = f"SELECT * FROM ({parts}) WHERE k IS NOT NULL ORDER BY i"
        try:
            return self.conn.sql(sql).to_arrow_table()
        except Exception as e:
            raise SinkError(f"reading keys of {', '.join(f'{t}-{p}' for t, p in tps)} from sink "
                            f"{self.source} failed: {as_given(self.sink, first_line(e))}") from None

    def row_columns(self, topic: str, partition: int, columns: Sequence[str]) -> pa.Table:
        """row_fields as one Arrow table (o, c0, c1, ...: the columns in ``columns``' order, typed as the
        database types them), in no order (a sort of the partition's rows for nothing): the decoded
        content check's fast path compares whole columns (auditors.fieldfast)."""
        extra = "".join(f", {ident(c)} AS c{i}" for i, c in enumerate(columns))
        sql = f"SELECT o{''.join(f', c{i}' for i in range(len(columns)))} FROM " \
              f"({self._rows_sql(topic, partition, False, extra)}) AS r"
        try:
            return self.conn.sql(sql).to_arrow_table()
        except Exception as e:
            raise self._query_error(e) from None

    def committed_keys_in(self, committed: Mapping[TP, list[tuple[int, int]]]) -> Iterator[pa.RecordBatch]:
        """Arrow batches (key, topic, partition, offset) of the distinct rows with a key whose offset lies
        in one of their partition's ``committed`` ranges: one query for all the partitions."""
        import pyarrow as pa  # lazy: see docs/imports.md

        ranges = [(t, p, first, last) for (t, p), rs in committed.items() for first, last in rs]
        types = (pa.string(), pa.int32(), pa.int64(), pa.int64())
        columns = [pa.array([r[i] for r in ranges], ty) for i, ty in enumerate(types)]
        self.conn.register("committed_ranges", pa.table(columns, names=["t", "p", "rf", "rl"]))
        rows = self.key_rows_sql()
        # ASOF join: each row meets its partition's last range starting at or before its offset; inside it
        # = committed. Rows of other partitions meet none.
        sql = f"""
            SELECT DISTINCT s.k AS key, s.t AS topic, s.p AS partition, s.o AS offset FROM ({rows}) s
            ASOF JOIN committed_ranges r ON s.t = r.t AND s.p = r.p AND s.o >= r.rf
            WHERE s.o <= r.rl"""
        try:
            yield from self.conn.sql(sql).to_arrow_reader(ISLAND_BATCH)
        except Exception as e:
            raise SinkError(f"reading keys from sink {self.source} failed: "
                            f"{as_given(self.sink, first_line(e))}") from None

    def _value_sql(self) -> str:
        """", expr AS v": the value column as row_keys reads it (a blob as its bytes, anything else as text;
        the value hash column as lower-case text), or "" where the sink names none."""
        if self.sink.value_column:
            col = ident(self.sink.value_column)
            blob = self._types.get(self.sink.value_column.lower(), "VARCHAR").upper() == "BLOB"
            return f", {col} AS v" if blob else f", CAST({col} AS VARCHAR) AS v"
        if self.sink.value_hash_column:
            return f", lower(CAST({ident(self.sink.value_hash_column)} AS VARCHAR)) AS v"
        return ""

    def key_rows_sql(self, values: bool = False) -> str:
        """SQL for (t, p, o, k) of every row with a key and a valid offset, the key as text, in no order and
        with every repeat: what the key rule groups in DuckDB where the rows are (auditors.keydups), and what
        the incremental audit's key index keeps of each new row (auditors.incremental). ``values``: and v,
        the value as row_keys reads it, where the sink names a value column (the incremental content
        check)."""
        key = ident(self.sink.key_column or "")
        value = self._value_sql() if values else ""
        return (f"SELECT {self._t.value} AS t, {self._p.value} AS p, {self._o.value} AS o, "
                f"CAST({key} AS VARCHAR) AS k{value} FROM {self.relation} "
                f"WHERE {self._o.valid} AND {key} IS NOT NULL")

    def _query(self, sql: str) -> list[tuple]:
        try:
            return self.conn.execute(sql).fetchall()
        except Exception as e:
            raise self._query_error(e) from None

    def _stream(self, sql: str) -> Iterator[Any]:
        try:
            yield from self.conn.sql(sql).to_arrow_reader(ISLAND_BATCH)
        except Exception as e:  # errors surface while streaming too (e.g. a Parquet file gone)
            raise self._query_error(e) from None


def islands_sql(counts: str, window: str) -> str:
    """Island ends from ``counts`` (t, p, o, m: each offset's multiplicity), ordered by t, p, o.

    One sort and two lead()s: an island ends where the next offset isn't o+1 or has another multiplicity,
    and that next row (no, nm) is where the following island starts; the window's first row starts the
    first island (f). Only those rows leave the database and islands_from pairs them in order. About 2x
    faster than grouping by offset - row_number(), and 1.5x faster on PostgreSQL than also lag()ging for
    the starts. Offsets are >= 0 here, so `no - 1` can't overflow where `o + 1` would at 2^63-1.
    """
    return f"""
        WITH c AS ({counts}),
             w AS (SELECT t, p, o, m, row_number() OVER s = 1 AS f, lead(o) OVER s AS no,
                          lead(m) OVER s AS nm FROM c WINDOW s AS ({window})),
             b AS (SELECT t, p, o, m, f, (no IS NULL OR no - 1 <> o OR nm <> m) AS e, no FROM w)
        SELECT t, p, o, m, f, e, no FROM b WHERE f OR e ORDER BY t, p, o"""


def islands_from(batches: Any) -> Iterator[OffsetIsland]:
    """Pair the rows of islands_sql (Arrow batches, or lists of row tuples) into islands."""
    start = None
    for batch in batches:
        rows = zip(*(batch.column(i).to_pylist() for i in range(7)), strict=True) \
            if hasattr(batch, "column") else batch
        for t, p, o, m, f, e, no in rows:
            if f:
                start = o
            if e:
                assert start is not None  # islands_sql flags a partition's first row as a run's first
                yield OffsetIsland(t, p, start, o, m)
                start = no


def breaks_sql(rows: str) -> str:
    """Where a partition's offsets (``rows``: column o, duplicates included) stop running o, o+1, ...: each
    row whose next offset isn't o+1, with that next one (NULL after the last). One lead() over the rows in
    an index's order, no grouping: half the cost of islands_sql on PostgreSQL; islands_from_breaks reads
    it. Rows of one duplicated offset keep their order by ``no`` (o itself, then the next offset, then
    NULL), as they stand in the partition: ordering by o alone could put the last one first."""
    return (f"SELECT o, no FROM (SELECT o, lead(o) OVER (ORDER BY o) AS no FROM ({rows}) AS r) AS w "
            f"WHERE no IS NULL OR no - 1 <> o ORDER BY o, no NULLS LAST")


def islands_from_breaks(topic: str, partition: int, first: int | None, batches: Iterable[Any]) \
        -> Iterator[OffsetIsland]:
    """Islands from breaks_sql's rows (Arrow batches, or lists of row tuples) and the partition's first
    offset, with numpy: a sink of many duplicates has a break at nearly every row.

    The offsets are chains [start, end] of consecutive offsets, once each: the first starts at ``first``,
    each break ends one at o and the next starts at no. Chains follow each other in order (the next starts
    at or after the last one's end), so a chain's inner offsets are its own (multiplicity 1) and only its
    ends can be shared, with neighbours that end or start on the same offset: a duplicate.
    """
    import numpy as np  # lazy: see docs/imports.md

    if first is None:
        return
    ends, nexts = [], []
    for batch in batches:
        if hasattr(batch, "column"):
            ends.append(batch.column(0).to_numpy(zero_copy_only=False))
            nexts.append(batch.column(1).fill_null(-1).to_numpy(zero_copy_only=False))
        elif batch:
            o, no = zip(*batch, strict=True)
            ends.append(np.array(o, dtype=np.int64))
            nexts.append(np.array([-1 if n is None else n for n in no], dtype=np.int64))
    if ends:
        yield from _islands_of_breaks(topic, partition, first, np.concatenate(ends), np.concatenate(nexts))


def islands_from_offsets(topic: str, partition: int, chunks: Iterable[Any]) -> Iterator[OffsetIsland]:
    """Islands from a partition's offsets themselves, in order, duplicates included (numpy int64 arrays,
    each following the one before): where they break is found here, as breaks_sql finds it on a server."""
    import numpy as np  # lazy: see docs/imports.md

    first = last = None
    ends, nexts = [], []
    for chunk in chunks:
        if not len(chunk):
            continue
        run = chunk if last is None else np.concatenate(([last], chunk))
        at = np.flatnonzero(run[1:] - run[:-1] != 1)  # offsets are >= 0: no difference wraps
        ends.append(run[at])
        nexts.append(run[at + 1])
        first = int(chunk[0]) if first is None else first
        last = chunk[-1]
    if first is None:
        return
    ends.append(np.array([last], dtype=np.int64))
    nexts.append(np.array([-1], dtype=np.int64))
    yield from _islands_of_breaks(topic, partition, first, np.concatenate(ends), np.concatenate(nexts))


def _islands_of_breaks(topic: str, partition: int, first: int, ends: Any, nexts: Any) \
        -> Iterator[OffsetIsland]:
    """islands_from_breaks's islands, from the breaks as two arrays (-1: no next offset)."""
    import numpy as np  # lazy: see docs/imports.md

    e = ends.astype(np.int64)
    s = np.concatenate(([first], nexts[:-1])).astype(np.int64)
    # Chain ends, in order: each start, and each end beyond its start; equal neighbours are one offset.
    points = np.empty(2 * len(s), dtype=np.int64)
    points[0::2], points[1::2] = s, e
    keep = np.ones(2 * len(s), dtype=bool)
    keep[1::2] = e > s
    points = points[keep]
    values, counts = np.unique(points, return_counts=True)  # points never decrease: runs of equals
    inner = e - s > 1  # (not e > s + 1: an offset may be 2^63-1, and s + 1 would wrap)
    a = np.concatenate((values, s[inner] + 1))
    b = np.concatenate((values, e[inner] - 1))
    m = np.concatenate((counts, np.ones(int(inner.sum()), dtype=np.int64)))
    order = np.argsort(a, kind="stable")
    a, b, m = a[order], b[order], m[order]
    # Atoms that continue the one before (next offset, same multiplicity) join its island.
    joins = np.zeros(len(a), dtype=bool)
    joins[1:] = (a[1:] - 1 == b[:-1]) & (m[1:] == m[:-1])
    heads = np.flatnonzero(~joins)
    tails = np.append(heads[1:] - 1, len(a) - 1)
    for f, last, mult in zip(a[heads].tolist(), b[tails].tolist(), m[heads].tolist(), strict=True):
        yield OffsetIsland(topic, partition, f, last, mult)


def register_files(conn: DuckDBPyConnection, name: str, files: Sequence[str], what: str) -> None:
    """``name`` in ``conn``: the rows of these Parquet files, ``what`` (a lakehouse table's version) in a
    SinkError if they can't be read (a file gone since the pin). Their columns only: a directory named like
    col=value (a partitioned table's) adds none."""
    try:
        conn.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet([{', '.join(map(literal, files))}], "
                     f"hive_partitioning = false)")
    except Exception as e:
        raise SinkError(f"cannot read {what}: {error_text(e)}") from None


def columns(conn: DuckDBPyConnection, relation: str) -> dict[str, str]:
    """Column name -> DuckDB type, in the relation's order."""
    try:
        return {r[0]: r[1] for r in conn.execute(f"DESCRIBE SELECT * FROM {relation}").fetchall()}
    except Exception as e:
        raise SinkError(f"cannot read the columns of {relation}: {error_text(e)}") from None


def check_columns(have: dict[str, str], sink: Sink, where: str, what: str) -> dict[str, str]:
    """``have`` (name -> type) unless it lacks a column the sink's config names."""
    lowered = {c.lower() for c in have}
    missing = [
        f"{name} ({key})"
        for key, name in (("topic_column", sink.topic_column), ("partition_column", sink.partition_column),
                          ("offset_column", sink.offset_column), ("key_column", sink.key_column),
                          ("value_column", sink.value_column), ("value_hash_column", sink.value_hash_column),
                          ("order_column", sink.order_column), ("write_time_column", sink.write_time_column))
        if name is not None and name.lower() not in lowered
    ]
    if missing:
        raise SinkError(
            f"{what} lacks column{'s' if len(missing) > 1 else ''} {', '.join(missing)}; it has "
            f"{', '.join(have)}; set the column names in [{where}]"
        )
    return have


def _plain(value: Any) -> Any:
    """A sink value as JSON carries it: numbers as they are, times in ISO 8601, anything else as text."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def check_offsets_columns(have: dict[str, str], where: str, what: str) -> dict[str, str]:
    missing = [c for c in OFFSETS_COLUMNS if c not in {h.lower() for h in have}]
    if missing:
        raise SinkError(
            f"{what} lacks column{'s' if len(missing) > 1 else ''} {', '.join(missing)}; it has "
            f"{', '.join(have)}; an offsets table needs {', '.join(OFFSETS_COLUMNS)} "
            f"([{where}].offsets_table)"
        )
    return have


def error_text(e: BaseException) -> str:
    """A DuckDB error in one line. Its extension errors break the line inside a quote ("extension
    'httpfs:\\nFailed to download..."): keep the cause and the hint, drop the troubleshooting URL."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    if not lines:
        return type(e).__name__
    ext = re.search(r'extension "?\'?(\w+)', str(e), re.IGNORECASE)
    if ext and ("install" in lines[0].lower() or "extension" in lines[0].lower()):
        name = ext.group(1)
        return (f"reading it needs DuckDB's {name} extension, which eosctl never downloads by itself: "
                f"install it once (python -c \"import duckdb; duckdb.install_extension('{name}')\") "
                f"or audit a local copy of the files")
    return lines[0]


def _no_lineage(f: Finding, hop: Sink) -> Finding:
    """A Kafka topic hop's row with no input named (eosctl.sink.kafka_topic writes NULL lineage): said as
    what happened to the output record, not as a NULL column of a table the user never made."""
    if f.kind != "invalid_row" or not (f.detail or "").endswith(" is NULL"):
        return f
    if hop.lineage == "key":
        why = "its key is the key of no committed or aborted input below the stage's committed offsets"
    elif hop.lineage == "headers":
        why = f"it lacks the lineage headers {', '.join(hop.lineage_headers)} (or they are not valid)"
    else:
        path = hop.lineage.removeprefix("value:")
        why = (f"its value has no readable lineage at {path} (a JSON object with topic, partition and "
               "offset)")
    return replace(f, detail=f"output records of {hop.kafka_topic} that name no input: {why}")
