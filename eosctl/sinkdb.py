"""The one way eosctl opens a sink: a DuckDB file strictly read-only, or Parquet files through DuckDB.

Every failure a user can run into (missing file, a file locked by a live writer, a storage format the
installed duckdb can't read, a wrong table or column name) becomes one SinkError line saying how to go on.
The queries return per-partition summaries and offset *islands* (runs of consecutive offsets that occur
the same number of times), so callers reconcile with range arithmetic instead of per-offset lists.
"""

from __future__ import annotations

import errno
import glob as globmod
import os
import re
import shutil
import struct
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from eosctl.config import Sink
from eosctl.errors import SinkError, first_line
from eosctl.files import glob_problem, input_problem
from eosctl.findings import Finding
from eosctl.model import TP

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

# DuckDB's main header (storage/storage_info.hpp): 8-byte checksum, magic "DUCK", uint64 storage version,
# 4 uint64 flags, then the writer's library version string (32 bytes, NUL padded).
_MAGIC_AT, _VERSION_AT, _LIBRARY_AT, _LIBRARY_LEN = 8, 12, 52, 32
OFFSETS_COLUMNS = ("topic", "partition", "next_offset")
ISLAND_BATCH = 65_536
# Opening a sink must never reach the network (DuckDB auto-installs scanners for foreign file formats).
_NO_EXTENSION_DOWNLOADS = {"autoinstall_known_extensions": False}
# How long eosctl waits for a writer between two of its transactions before it gives up on the read lock.
LOCK_WAIT_S = 10.0
# Kafka's limits (org.apache.kafka.common.record: offsets are int64, partitions int32): a sink value
# outside them, or not an integer, can't name a Kafka record.
MAX_OFFSET = (1 << 63) - 1
MAX_PARTITION = (1 << 31) - 1
_SIGNED_INTS = {"TINYINT": 7, "SMALLINT": 15, "INTEGER": 31, "BIGINT": 63, "HUGEINT": 127}
_UNSIGNED_INTS = {"UTINYINT": 8, "USMALLINT": 16, "UINTEGER": 32, "UBIGINT": 64, "UHUGEINT": 128}
_INEXACT = ("FLOAT", "DOUBLE", "DECIMAL", "REAL")


@dataclass(frozen=True)
class SinkPartition:
    """The sink's row counts for one partition (the audit's per-partition verdict is
    eosctl.findings.PartitionSummary)."""

    topic: str
    partition: int
    rows: int
    distinct_offsets: int
    min_offset: int | None
    max_offset: int | None
    duplicate_offsets: int  # offsets stored more than once
    invalid_offset_rows: int  # rows whose offset is NULL, negative, too large or not an integer

    @property
    def duplicate_rows(self) -> int:
        """Rows beyond the first per offset (what a dedup would delete)."""
        return self.rows - self.invalid_offset_rows - self.distinct_offsets


@dataclass(frozen=True)
class OffsetIsland:
    """Offsets first..last (inclusive) are all present, each exactly `multiplicity` times."""

    topic: str
    partition: int
    first: int
    last: int
    multiplicity: int

    @property
    def count(self) -> int:
        return self.last - self.first + 1


@dataclass(frozen=True)
class StoredOffset:
    """The next source offset the sink recorded, atomically with its rows."""

    topic: str
    partition: int
    next_offset: int


@dataclass(frozen=True)
class DuckDBHeader:
    storage_version: int
    library: str  # the writer's DuckDB version, e.g. "v2.0.0"; "" where old files don't record it


def read_header(path: str | Path) -> DuckDBHeader | None:
    """The storage version and writer version from a DuckDB file's first block; None if not DuckDB."""
    try:
        with open(path, "rb") as f:
            head = f.read(_LIBRARY_AT + _LIBRARY_LEN)
    except OSError:
        return None
    if len(head) < _VERSION_AT + 8 or head[_MAGIC_AT:_MAGIC_AT + 4] != b"DUCK":
        return None
    (version,) = struct.unpack_from("<Q", head, _VERSION_AT)
    library = head[_LIBRARY_AT:_LIBRARY_AT + _LIBRARY_LEN].split(b"\0", 1)[0].decode("ascii", "replace")
    return DuckDBHeader(version, library)


def check_duckdb_file(path: str, where: str = "sink", flag: str = "--sink-duckdb") -> None:
    """SinkError (one line) unless ``path`` is a regular DuckDB file; checked before anything opens it."""
    shown = origin(path)  # messages name the user's file, not a frozen copy of it
    if not os.path.exists(path):
        raise SinkError(f"sink file {shown} not found; check [{where}].duckdb or {flag}")
    if os.path.isdir(path):
        raise SinkError(f"sink path {shown} is a directory, not a DuckDB file; "
                        f"check [{where}].duckdb or {flag}")
    problem = input_problem(path, None)
    if problem:  # a FIFO would block read_header's open(), a device would pass for "not DuckDB"
        raise SinkError(f"{problem}; check [{where}].duckdb or {flag}")
    if read_header(path) is None:
        # Checked before connecting: DuckDB would try to download a scanner for e.g. SQLite files.
        raise _not_duckdb(shown, where)


def connect_readonly(path: str | Path, where: str = "sink", flag: str = "--sink-duckdb",
                     table: str = "TABLE", wait_s: float | None = None) -> DuckDBPyConnection:
    """duckdb.connect(path, read_only=True), with every failure turned into one SinkError line.

    A writer holding the file is waited for, up to ``wait_s``: a pipeline that connects, writes a batch
    and closes leaves gaps between its transactions, and one of them is all a reader needs.
    """
    # Here, not at the top (0.1 s): `eosctl report FILE.json` imports this module for read_header only.
    import duckdb

    path = str(path)
    shown = origin(path)
    check_duckdb_file(path, where, flag)
    wait_s = LOCK_WAIT_S if wait_s is None else wait_s
    deadline, pause = time.monotonic() + wait_s, 0.005
    while True:
        try:
            return duckdb.connect(path, read_only=True, config=_NO_EXTENSION_DOWNLOADS)
        except duckdb.Error as e:
            locked = _is_lock_error(str(e))
            if not locked or time.monotonic() >= deadline:
                raise _open_error(shown, str(e).replace(path, shown), table, where,
                                  waited=wait_s if locked else None) from None
        time.sleep(min(pause, max(deadline - time.monotonic(), 0)))
        pause = min(pause * 2, 0.02)


def _is_lock_error(msg: str) -> bool:
    return "Could not set lock" in msg or "Conflicting lock is held" in msg


def _open_error(path: str, msg: str, table: str, where: str, waited: float | None = None) -> SinkError:
    import duckdb

    lock = re.search(r"Conflicting lock is held in (.*?) \(PID (\d+)\)", msg)
    if _is_lock_error(msg):
        holder = f" ({Path(lock.group(1)).name}, PID {lock.group(2)})" if lock else ""
        waited_text = f" for {waited:g}s" if waited else ""
        return SinkError(
            f"{path} stayed locked by a running writer{holder}{waited_text}; DuckDB lets nobody read while a "
            f"writer holds the file, and eosctl reads it between the writer's transactions: have the writer "
            f"close the file between batches, or audit a Parquet export (in the writer: COPY {table} TO "
            f"'sink.parquet') with --sink-parquet"
        )
    if "different configuration than existing connections" in msg:
        return SinkError(f"{path} is already open read-write in this process; close that connection first")
    versions = re.search(r"storage version number (\d+), but we can only read storage versions between "
                         r"(\d+) and (\d+)", msg)
    if versions:
        header = read_header(path)
        found, lo, hi = (int(v) for v in versions.groups())
        writer = f"DuckDB {header.library}" if header and header.library else "another DuckDB version"
        installed = f"the installed duckdb {duckdb.__version__}"
        if found > hi:
            return SinkError(
                f"{path} was written by {writer} (storage version {found}), newer than {installed} can read "
                f"(storage versions {lo}-{hi}); upgrade duckdb (pip install -U duckdb), or have the writer "
                f"save with STORAGE_VERSION 'v1.0.0' or export Parquet"
            )
        return SinkError(
            f"{path} was written by {writer} (storage version {found}), older than {installed} can read "
            f"(storage versions {lo}-{hi}); convert it with the DuckDB that wrote it (EXPORT DATABASE) "
            f"or export Parquet"
        )
    if "not a valid DuckDB database file" in msg:
        return _not_duckdb(path, where)
    if "Corrupt database file" in msg or "checksum" in msg:
        return SinkError(f"{path} is corrupt ({first_line(msg)}); restore it or audit a Parquet export")
    return SinkError(f"cannot open {path} read-only: {first_line(msg)}")


def _not_duckdb(path: str, where: str) -> SinkError:
    return SinkError(f"{path} is not a DuckDB database file; check [{where}].duckdb (Parquet sinks go "
                     f"in [{where}].parquet)")


def name_parts(name: str) -> list[str]:
    """Split a (possibly qualified) name the way DuckDB's parser does: dots separate parts, double quotes
    keep one ("my.table" is one table, main.orders is table orders in schema main, "" is a quote)."""
    parts, cur, quoted, i, was_quoted = [], "", False, 0, False
    while i < len(name):
        c = name[i]
        if quoted:
            if c == '"' and name[i + 1:i + 2] == '"':
                cur, i = cur + '"', i + 1
            elif c == '"':
                quoted = False
            else:
                cur += c
        elif c == '"':
            quoted = was_quoted = True
        elif c == ".":
            parts.append(cur if was_quoted else cur.strip())
            cur, was_quoted = "", False
        else:
            cur += c
        i += 1
    if quoted:
        raise SinkError(f"name {name} has an unclosed double quote; quote a name with dots as \"my.table\"")
    parts.append(cur if was_quoted else cur.strip())
    if any(p == "" for p in parts) or len(parts) > 3:
        raise SinkError(f"{name!r} is not a table or column name; use table, schema.table or "
                        f"catalog.schema.table, and double quotes for a name with dots (\"my.table\")")
    return parts


def ident(name: str) -> str:
    """A DuckDB identifier from a name as a user writes it: schema.table, or "my.table" quoted."""
    return ".".join('"' + part.replace('"', '""') + '"' for part in name_parts(name))


def _literal(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


@dataclass(frozen=True)
class _IntColumn:
    """SQL for one integer column of a sink: its value when Kafka could have produced it, else why not."""

    value: str  # the value as an integer, or NULL if it is no valid Kafka value
    valid: str  # TRUE where `value` is not NULL
    problem: str  # NULL if valid, else e.g. 'is NULL' or 'is negative'
    raw: str = ""  # the column itself
    exact: bool = False  # an integer type: `raw = n` (n valid) holds only for valid values

    def equals(self, n: int) -> str:
        """A filter on one valid value; on the raw column where that is exact, so DuckDB pushes it into
        the scan (statistics, row-group skipping)."""
        return f"{self.raw} = {n}" if self.exact else f"{self.value} = {n}"


def _int_column(col: str, type_: str, limit: int, limit_text: str, sql_type: str) -> _IntColumn:
    """Checks tailored to the column's type, so the usual BIGINT offset costs one comparison per row."""
    t = type_.upper()
    base = t.split("(")[0]
    nullcheck = f"WHEN {col} IS NULL THEN 'is NULL' "
    if base in _SIGNED_INTS or base in _UNSIGNED_INTS:
        bits = _SIGNED_INTS.get(base) or _UNSIGNED_INTS[base]
        v = col if bits < 127 else f"TRY_CAST({col} AS HUGEINT)"  # UHUGEINT may not fit a HUGEINT
        conds = []
        if base in _SIGNED_INTS:
            conds.append((f"{v} < 0", "is negative"))
        if (1 << bits) - 1 > limit:
            conds.append((f"{v} IS NULL OR {v} > {limit}", f"is above {limit_text}"))
    elif base.startswith(_INEXACT):
        v = f"TRY_CAST({col} AS HUGEINT)"
        finite = f"isfinite(CAST({col} AS DOUBLE))"
        conds = [(f"NOT {finite} OR {col} <> trunc({col})", "is not an integer"),
                 (f"{col} < 0", "is negative"), (f"{v} IS NULL OR {v} > {limit}", f"is above {limit_text}")]
    else:
        text = f"trim(CAST({col} AS VARCHAR))"
        v = f"TRY_CAST({text} AS HUGEINT)"
        conds = [(f"NOT regexp_full_match({text}, '[+-]?[0-9]+')", "is not an integer"),
                 (f"coalesce({v} < 0, {text} LIKE '-%')", "is negative"),
                 (f"{v} IS NULL OR {v} > {limit}", f"is above {limit_text}")]
    problem = "CASE " + nullcheck + "".join(f"WHEN {c} THEN '{why}' " for c, why in conds) + "END"
    valid = " AND ".join([f"{col} IS NOT NULL", *(f"NOT ({c})" for c, _ in conds)])
    value = f"CAST({v} AS {sql_type})" if not conds else f"CASE WHEN {valid} THEN CAST({v} AS {sql_type}) END"
    exact = base in _SIGNED_INTS or base in _UNSIGNED_INTS
    return _IntColumn(value, f"({valid})", problem, col, exact)


def _topic_column(col: str) -> _IntColumn:
    # Kafka refuses an empty topic name (org.apache.kafka.common.internals.Topic.validate).
    text = f"CAST({col} AS VARCHAR)"
    return _IntColumn(f"CASE WHEN {text} <> '' THEN {text} END", f"({text} <> '')",
                      f"CASE WHEN {col} IS NULL THEN 'is NULL' WHEN {text} = '' THEN 'is empty' END")


class SinkReader:
    """Read-only queries over one sink relation. Use as a context manager, or call close()."""

    def __init__(self, conn: DuckDBPyConnection, relation: str, sink: Sink, source: str,
                 offsets_relation: str | None, types: dict[str, str] | None = None,
                 offsets_types: dict[str, str] | None = None):
        self.conn = conn
        self.relation = relation  # SQL for FROM: a quoted table or read_parquet([...])
        self.sink = sink
        self.source = source  # what to name in messages: the file or glob
        self.offsets_relation = offsets_relation
        types = {k.lower(): v for k, v in (types or {}).items()}
        self._t, self._p, self._o = self._columns(types, sink.topic_column, sink.partition_column,
                                                  sink.offset_column)
        self._offsets_types = {k.lower(): v for k, v in (offsets_types or {}).items()}
        # One normalised view of the valid rows: later SQL never repeats the user's column names, and a
        # row no Kafka record can match (invalid_rows) never reaches an island or a summary.
        self._rows = (f"(SELECT {self._t.value} AS t, {self._p.value} AS p, {self._o.value} AS o "
                      f"FROM {relation})")

    @staticmethod
    def _columns(types: dict[str, str], topic: str, partition: str,
                 offset: str) -> tuple[_IntColumn, _IntColumn, _IntColumn]:
        def type_of(name: str) -> str:
            return types.get(name.lower(), "VARCHAR")

        return (_topic_column(ident(topic)),
                _int_column(ident(partition), type_of(partition), MAX_PARTITION, "2^31-1", "INTEGER"),
                _int_column(ident(offset), type_of(offset), MAX_OFFSET, "2^63-1", "BIGINT"))

    def __enter__(self) -> SinkReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.conn.close()

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
        findings = self._invalid(self.relation, (self._t, self._p, self._o), cols, "")
        if self.offsets_relation is not None:
            t, p, o = self._columns(self._offsets_types, *OFFSETS_COLUMNS)
            name = self.sink.offsets_table or "offsets"
            findings += self._invalid(self.offsets_relation, (t, p, o), OFFSETS_COLUMNS,
                                      f"offsets table {name}: ")
        return sorted(findings, key=lambda f: f.sort_key)

    def _invalid(self, relation: str, checks: tuple[_IntColumn, _IntColumn, _IntColumn],
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
                FROM {relation})
            SELECT t, p, c, why, count(*), min(v) FROM b WHERE why IS NOT NULL
            GROUP BY t, p, c, why ORDER BY t NULLS FIRST, p NULLS FIRST, c, why"""
        out = []
        for topic, partition, c, why, n, example in self._query(sql):
            shown = "" if why in ("is NULL", "is empty") or example is None else f" (e.g. {_short(example)})"
            out.append(Finding("invalid_row", topic, partition, None, None, n,
                               detail=f"{prefix}{names[c]} {why}{shown}"))
        return out

    def rows_sql(self, topic: str, partition: int, with_key: bool = False) -> str:
        """SQL for one partition's valid rows: column o, and k (the key as text)."""
        key = f", CAST({ident(self.sink.key_column)} AS VARCHAR) AS k" if with_key and self.sink.key_column \
            else ""
        # Filters on the raw columns (not the normalised view) so DuckDB can push them into the scan.
        t = ident(self.sink.topic_column)
        return (f"SELECT {self._o.value} AS o{key} FROM {self.relation} "
                f"WHERE CAST({t} AS VARCHAR) = {_literal(topic)} AND {self._p.equals(int(partition))} "
                f"AND {self._o.valid}")

    def islands(self, topic: str | None = None, partition: int | None = None) -> Iterator[OffsetIsland]:
        """Runs of consecutive offsets with equal multiplicity, ordered by topic, partition, first.

        Streamed in Arrow batches, so memory stays bounded by the batch, not by the sink.
        """
        if topic is not None and partition is not None:
            # One partition (an audit task): group and sort by offset alone, filtered in the scan; windows
            # partitioned by (t, p) cost ~1.6x here.
            counts = (f"SELECT {_literal(topic)} AS t, {int(partition)} AS p, o, count(*) AS m "
                      f"FROM ({self.rows_sql(topic, partition)}) GROUP BY o")
            window = "ORDER BY o"
        else:
            where = ["o IS NOT NULL", "t IS NOT NULL", "p IS NOT NULL"]
            if topic is not None:
                where.append(f"t = {_literal(topic)}")
            if partition is not None:
                where.append(f"p = {int(partition)}")
            counts = (f"SELECT t, p, o, count(*) AS m FROM {self._rows} WHERE {' AND '.join(where)} "
                      "GROUP BY t, p, o")
            window = "PARTITION BY t, p ORDER BY o"
        # One sort: an island starts where the previous offset isn't o-1 or has another multiplicity and
        # ends where the next one breaks the same way; only those border rows leave DuckDB, and starts and
        # ends pair up in order. (About 2x faster than grouping by offset - row_number().) Offsets are
        # >= 0 here, so `no - 1` can't overflow where `o + 1` would at 2^63-1.
        sql = f"""
            WITH c AS ({counts}),
                 w AS (SELECT t, p, o, m, lag(o) OVER s AS po, lag(m) OVER s AS pm,
                              lead(o) OVER s AS no, lead(m) OVER s AS nm FROM c WINDOW s AS ({window})),
                 b AS (SELECT t, p, o, m, (po IS NULL OR po <> o - 1 OR pm <> m) AS s,
                              (no IS NULL OR no - 1 <> o OR nm <> m) AS e FROM w)
            SELECT t, p, o, m, s, e FROM b WHERE s OR e ORDER BY t, p, o"""
        try:
            reader = self.conn.sql(sql).to_arrow_reader(ISLAND_BATCH)
            start = None
            for batch in reader:
                cols = [batch.column(i).to_pylist() for i in range(6)]
                for t, p, o, m, s, e in zip(*cols, strict=True):
                    if s:
                        start = o
                    if e:
                        yield OffsetIsland(t, p, start, o, m)
        except Exception as e:  # errors surface while streaming too (e.g. a Parquet file gone)
            raise self._query_error(e) from None

    def stored_offsets(self) -> list[StoredOffset] | None:
        """The sink's own offsets table (topic, partition, next_offset), or None if it has none. Rows
        with an invalid topic, partition or next offset are left out here: invalid_rows() reports them."""
        if self.offsets_relation is None:
            return None
        t, p, n = self._columns(self._offsets_types, *OFFSETS_COLUMNS)
        sql = (f"SELECT {t.value}, {p.value}, {n.value} FROM {self.offsets_relation} "
               f"WHERE {t.valid} AND {p.valid} AND {n.valid} ORDER BY 1, 2")
        return [StoredOffset(*row) for row in self._query(sql)]

    def _query(self, sql: str) -> list[tuple]:
        try:
            return self.conn.execute(sql).fetchall()
        except Exception as e:
            raise self._query_error(e) from None

    def _query_error(self, e: Exception) -> SinkError:
        return SinkError(f"query on sink {self.source} failed: {first_line(e)}")


def _short(value: str, limit: int = 40) -> str:
    return value if len(value) <= limit else value[:limit - 1] + "…"


def open_sink(
    sink: Sink,
    where: str = "sink",
    duckdb_path: str | None = None,
    parquet: str | None = None,
) -> SinkReader:
    """Open the pipeline's sink read-only and check its table and columns exist.

    `where` names the config section in messages (e.g. "pipelines.orders.sink"); `duckdb_path` and
    `parquet` override the config (the --sink-duckdb / --sink-parquet flags).
    """
    import duckdb

    if duckdb_path or parquet:
        sink = replace(sink, duckdb=duckdb_path, parquet=parquet)
    if sink.duckdb:
        shown = origin(sink.duckdb)
        conn = connect_readonly(sink.duckdb, where, table=sink.table)
        try:
            relation, offsets = _duckdb_relations(conn, sink, where, shown)
            types = _check_columns(conn, relation, sink, where, f"table {sink.table} in {shown}")
            offsets_types = _columns(conn, offsets) if offsets else None
        except BaseException:
            conn.close()
            raise
        return SinkReader(conn, relation, sink, shown, offsets, types, offsets_types)
    if sink.parquet:
        shown = origin(sink.parquet)
        conn = duckdb.connect(config=_NO_EXTENSION_DOWNLOADS)
        try:
            relation = _parquet_relation(sink.parquet, where, "parquet")
            offsets = (_parquet_relation(sink.offsets_table, where, "offsets_table")
                       if sink.offsets_table else None)
            types = _check_columns(conn, relation, sink, where, f"Parquet files {shown}")
            offsets_types = None
            if offsets:
                offsets_types = _check_offsets_columns(conn, offsets, where,
                                                       f"Parquet files {origin(sink.offsets_table or '')}")
        except BaseException:
            conn.close()
            raise
        return SinkReader(conn, relation, sink, shown, offsets, types, offsets_types)
    raise SinkError(f"[{where}] has neither duckdb nor parquet; set one, or pass --sink-duckdb or "
                    f"--sink-parquet")


def invalid_rows(sink: Sink) -> list[Finding]:
    """The sink's invalid_row findings (SinkReader.invalid_rows), for a caller that has no reader open."""
    with open_sink(sink) as reader:
        return reader.invalid_rows()


def _tables(conn: DuckDBPyConnection) -> list[tuple[str, str, str]]:
    """(catalog, schema, table) of every table and view the file holds."""
    return conn.execute(
        "SELECT table_catalog, table_schema, table_name FROM information_schema.tables ORDER BY 2, 3"
    ).fetchall()


def _find_table(tables: list[tuple[str, str, str]], parts: list[str]) -> bool:
    """Does a name resolve as DuckDB would: table (in main), schema.table, catalog.table or
    catalog.schema.table; case-insensitively, as DuckDB resolves unquoted names."""
    want = [p.lower() for p in parts]
    for catalog, schema, table in tables:
        c, s, t = catalog.lower(), schema.lower(), table.lower()
        if want in ([t] if s == "main" else [], [s, t], [c, t] if s == "main" else [], [c, s, t]):
            return True
    return False


def _duckdb_relations(conn: DuckDBPyConnection, sink: Sink, where: str, shown: str) -> tuple[str, str | None]:
    tables = _tables(conn)
    for name, key in ((sink.table, "table"), (sink.offsets_table, "offsets_table")):
        if name is not None and not _find_table(tables, name_parts(name)):
            known = ", ".join(_table_name(s, t) for _, s, t in tables) or "none"
            raise SinkError(f"{shown} has no table {name!r} (tables: {known}); check [{where}].{key} "
                            f"(schema.table, and double quotes for a name with dots: \"my.table\")")
    offsets = ident(sink.offsets_table) if sink.offsets_table else None
    if offsets:
        _check_offsets_columns(conn, offsets, where, f"table {sink.offsets_table} in {shown}")
    return ident(sink.table), offsets


def _table_name(schema: str, table: str) -> str:
    """How to write a table's name on the command line: quoted where DuckDB would split it."""
    parts = [table] if schema == "main" else [schema, table]
    return ".".join(f'"{p}"' if "." in p or '"' in p else p for p in parts)


def _columns(conn: DuckDBPyConnection, relation: str) -> dict[str, str]:
    """Column name -> DuckDB type, in the relation's order."""
    try:
        return {r[0]: r[1] for r in conn.execute(f"DESCRIBE SELECT * FROM {relation}").fetchall()}
    except Exception as e:
        raise SinkError(f"cannot read the columns of {relation}: {_error_text(e)}") from None


def _check_columns(conn: DuckDBPyConnection, relation: str, sink: Sink, where: str,
                   what: str) -> dict[str, str]:
    have = _columns(conn, relation)
    lowered = {c.lower() for c in have}
    missing = [
        f"{name} ({key})"
        for key, name in (("topic_column", sink.topic_column), ("partition_column", sink.partition_column),
                          ("offset_column", sink.offset_column), ("key_column", sink.key_column))
        if name is not None and name.lower() not in lowered
    ]
    if missing:
        raise SinkError(
            f"{what} lacks column{'s' if len(missing) > 1 else ''} {', '.join(missing)}; it has "
            f"{', '.join(have)}; set the column names in [{where}]"
        )
    return have


def _check_offsets_columns(conn: DuckDBPyConnection, relation: str, where: str, what: str) -> dict[str, str]:
    have = _columns(conn, relation)
    missing = [c for c in OFFSETS_COLUMNS if c not in {h.lower() for h in have}]
    if missing:
        raise SinkError(
            f"{what} lacks column{'s' if len(missing) > 1 else ''} {', '.join(missing)}; it has "
            f"{', '.join(have)}; an offsets table needs {', '.join(OFFSETS_COLUMNS)} "
            f"([{where}].offsets_table)"
        )
    return have


def _error_text(e: BaseException) -> str:
    """A DuckDB error in one line. Its extension errors break the line inside a quote ("extension
    'httpfs:\nFailed to download..."): keep the cause and the hint, drop the troubleshooting URL."""
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


def _parquet_relation(pattern: str, where: str, key: str) -> str:
    # Check the glob ourselves: DuckDB's "No files found" message carries a multi-line SQL excerpt.
    if not globmod.glob(pattern, recursive=True) and not re.match(r"^[a-z0-9]+://", pattern):
        raise SinkError(f"no Parquet files match {pattern}; check [{where}].{key} or --sink-parquet")
    problem = glob_problem(pattern)
    if problem:
        raise SinkError(f"{problem}; check [{where}].{key} or --sink-parquet")
    return f"read_parquet({_literal(pattern)})"


# ---- a frozen sink: what the audit and the ledger read while the pipeline keeps writing ------------

# The copy's path -> the sink the user named, for messages and reports in this process.
_ORIGINS: dict[str, str] = {}


def origin(path: str) -> str:
    """The sink path the user named, for a path frozen() made (else the path itself)."""
    return _ORIGINS.get(path, path)


@dataclass
class FreezeStats:
    """How long the last freeze held the sink's read lock (a writer can't connect meanwhile)."""

    lock_held_s: float = 0.0
    lock_wait_s: float = 0.0  # how long eosctl waited for a writer to close the file first
    bytes_copied: int = 0


last_freeze = FreezeStats()


# Freezes in progress in this thread: sink -> its frozen sink. Nested freezes of one sink share one copy;
# other threads (the TUI's ledger and audit workers) take their own, so no copy is deleted under a reader.
_ACTIVE = threading.local()


@contextmanager
def frozen(sink: Sink, where: str = "sink", *, local: bool = True) -> Iterator[Sink]:
    """The sink as it is now, for as long as the block runs: read the sink's side FIRST, then Kafka.

    A DuckDB file is copied (with its WAL) under a read lock taken on the file itself, so a live writer
    is kept out only while the copy runs (see last_freeze), never while Spark tasks, the local engine or
    the ledger read: they all read the copy. A Parquet sink's file list is fixed now (hard links where the
    file system allows, else symbolic links, in the same directory layout so hive partitions still
    parse); files written later are not read. With ``local=False`` (executors on other machines, which
    can't see this machine's temp dir) Parquet sinks are read in place. The copy is deleted on every way
    out of the block. A freeze inside another one of the same sink reuses its copy (an entry point that
    wraps `prepare` and `run_audit` in one freeze copies once).

    Rows written after the freeze are not seen. Every row in the copy was written from a record Kafka
    had committed before the freeze, so the Kafka scan that follows sees it: a live pipeline gives no
    phantom. Records committed between the freeze and the scan are missing from the copy: a tail gap, the
    consumer's lag at that moment.
    """
    active: dict[Sink, Sink] = _ACTIVE.__dict__.setdefault("sinks", {})
    if sink in active or _is_frozen(sink):  # inside a freeze of this sink, or given a frozen one
        yield active.get(sink, sink)
        return
    tmp = tempfile.mkdtemp(prefix="eosctl-frozen-")
    made: list[str] = []
    try:
        out = sink
        if sink.duckdb:
            copy = _copy_duckdb(str(sink.duckdb), where, tmp)
            made.append(copy)
            _ORIGINS[copy] = str(sink.duckdb)
            out = replace(sink, duckdb=copy, parquet=None)
        elif sink.parquet and local and not _is_url(sink.parquet):
            data = _link_files(sink.parquet, os.path.join(tmp, "rows"))
            offsets = sink.offsets_table
            if offsets and not _is_url(offsets):
                offsets = _link_files(offsets, os.path.join(tmp, "offsets"))
            for linked, given in ((data, sink.parquet), (offsets, sink.offsets_table)):
                if linked is not None and linked != given:  # unchanged: nothing matched, open_sink says so
                    made.append(linked)
                    _ORIGINS[linked] = str(given)
            out = replace(sink, parquet=data, offsets_table=offsets)
        active[sink] = out
        try:
            yield out
        finally:
            active.pop(sink, None)
    finally:
        for path in made:
            _ORIGINS.pop(path, None)
        shutil.rmtree(tmp, ignore_errors=True)


def _is_frozen(sink: Sink) -> bool:
    return any(p is not None and p in _ORIGINS for p in (sink.duckdb, sink.parquet))


def _copy_duckdb(path: str, where: str, tmp: str) -> str:
    """Copy the DuckDB file (and a WAL a crashed writer left) while holding a read lock on it.

    The lock is the one DuckDB itself takes (an fcntl read lock on the whole file, see DuckDB's
    LocalFileSystem::OpenFile): a writer can't hold the file meanwhile, so file + WAL are one committed
    state, and the writer is kept out for the copy alone, not for opening a database and querying it
    (which take ~100x longer on a busy machine). The copy is checked and opened like the original.
    """
    check_duckdb_file(path, where)
    dest = os.path.join(tmp, os.path.basename(path))
    copied = 0
    t0 = time.monotonic()
    try:
        with _read_lock(path, where):
            t1 = time.monotonic()
            for src, dst in ((path, dest), (path + ".wal", dest + ".wal")):
                if os.path.exists(src):
                    copied += _copy_file(src, dst)
        last_freeze.lock_held_s = time.monotonic() - t1
        last_freeze.lock_wait_s = t1 - t0
        last_freeze.bytes_copied = copied
    except OSError as e:
        raise SinkError(f"cannot copy {path} to {tmp} for a consistent read: {e.strerror or e}; free space "
                        f"in the temp directory or point TMPDIR elsewhere") from None
    return dest


@contextmanager
def _read_lock(path: str, where: str, wait_s: float | None = None) -> Iterator[None]:
    """A shared fcntl lock on the whole file, retried while a writer holds it (up to LOCK_WAIT_S).

    An open-file-description lock where the OS has one (Linux): closing it never drops a lock a DuckDB
    connection of this same process holds on the file, as closing a classic POSIX-locked descriptor would.
    """
    try:
        import fcntl
    except ImportError:  # no fcntl (Windows): DuckDB's own read-only connection is the lock
        conn = connect_readonly(path, where, wait_s=wait_s)
        try:
            yield
        finally:
            conn.close()
        return
    setlk = getattr(fcntl, "F_OFD_SETLK", fcntl.F_SETLK)
    getlk = getattr(fcntl, "F_OFD_GETLK", fcntl.F_GETLK)
    wait_s = LOCK_WAIT_S if wait_s is None else wait_s
    # struct flock: l_type, l_whence, l_start, l_len (0 = to the end), l_pid
    layout = "hhqqi"
    lock = struct.pack(layout, fcntl.F_RDLCK, os.SEEK_SET, 0, 0, 0)
    fd = os.open(path, os.O_RDONLY)
    try:
        deadline, pause = time.monotonic() + wait_s, 0.001
        while True:
            try:
                fcntl.fcntl(fd, setlk, lock)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() >= deadline:
                    holder = _lock_holder(fd, getlk, layout, fcntl.F_RDLCK)
                    raise _locked_error(path, holder, wait_s) from None
            time.sleep(min(pause, max(deadline - time.monotonic(), 0)))
            pause = min(pause * 2, 0.02)
        yield
    finally:
        os.close(fd)  # releases the lock


def _lock_holder(fd: int, getlk: int, layout: str, kind: int) -> str:
    import fcntl

    try:
        answer = fcntl.fcntl(fd, getlk, struct.pack(layout, kind, os.SEEK_SET, 0, 0, 0))
        pid = struct.unpack(layout, answer)[4]
    except OSError:
        return ""
    if pid <= 0:
        return ""
    try:
        program = Path(os.path.realpath(f"/proc/{pid}/exe")).name
    except OSError:
        program = ""
    return f" ({program}, PID {pid})" if program else f" (PID {pid})"


def _locked_error(path: str, holder: str, waited: float) -> SinkError:
    return SinkError(
        f"{path} stayed locked by a running writer{holder} for {waited:g}s; DuckDB lets nobody read while a "
        f"writer holds the file, and eosctl reads it between the writer's transactions: have the writer "
        f"close the file between batches, or audit a Parquet export with --sink-parquet"
    )


def _copy_file(src: str, dst: str) -> int:
    """Copy in the kernel; copy_file_range shares extents where the file system can (XFS, btrfs on one
    volume), which makes the writer's wait independent of the sink's size. Returns the bytes copied."""
    if not hasattr(os, "copy_file_range"):
        shutil.copyfile(src, dst)
        return os.path.getsize(dst)
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        size, done = os.fstat(fin.fileno()).st_size, 0
        try:
            while done < size:
                n = os.copy_file_range(fin.fileno(), fout.fileno(), size - done)
                if n == 0:
                    break
                done += n
        except OSError:  # e.g. EXDEV on older kernels, or a file system without it: plain copy
            fin.seek(0)
            fout.seek(0)
            fout.truncate()
            shutil.copyfileobj(fin, fout, 1 << 20)
            done = fout.tell()
    return done


def _is_url(pattern: str) -> bool:
    return bool(re.match(r"^[a-z0-9]+://", pattern))


def _link_files(pattern: str, into: str) -> str:
    """Link the files matching `pattern` under `into`, keeping their paths below the pattern's fixed
    prefix; returns the same pattern rooted at `into` (it matches exactly the linked files)."""
    files = sorted(f for f in globmod.glob(pattern, recursive=True) if os.path.isfile(f))
    if not files:
        return pattern  # open_sink says "no Parquet files match" with the user's pattern
    parts = pattern.split(os.sep)
    fixed = 0
    while fixed < len(parts) - 1 and not globmod.has_magic(parts[fixed]):
        fixed += 1
    base = os.sep.join(parts[:fixed]) or (os.sep if pattern.startswith(os.sep) else ".")
    rest = os.sep.join(parts[fixed:])
    for f in files:
        dest = os.path.join(into, os.path.relpath(f, base))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        try:
            os.link(f, dest)  # the file as it is now, even if the writer replaces it
        except OSError:
            os.symlink(os.path.abspath(f), dest)
    return os.path.join(into, rest)


def change_token(sink: Sink) -> tuple | None:
    """Something that changes whenever the sink's content may have (None: can't tell, read it again).

    DuckDB: the file's and its WAL's size and modification time, and the file's headers (a checkpoint
    writes a new database header with a higher iteration); Parquet: every matching file's path, size and
    modification time. Read without any lock: a torn read only makes the sink look changed.
    """
    def stat(path: str) -> tuple[int, int] | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return st.st_size, st.st_mtime_ns

    if sink.duckdb:
        path = str(sink.duckdb)
        try:
            with open(path, "rb") as f:
                headers = f.read(3 * 4096)
        except OSError:
            return None
        return stat(path), stat(path + ".wal"), headers
    if sink.parquet and not _is_url(sink.parquet):
        files = [sink.parquet] + ([sink.offsets_table] if sink.offsets_table else [])
        return tuple((f, stat(f)) for pattern in files if not _is_url(pattern)
                     for f in sorted(globmod.glob(pattern, recursive=True)))
    return None
