"""A DuckDB file, opened strictly read-only.

Every failure a user can run into (missing file, a file locked by a live writer, a storage format the
installed duckdb can't read, a wrong table or column name) becomes one SinkError line saying how to go on.
Snapshots (eosctl.inspection.snapshot) open their own DuckDB files through connect_readonly too.
"""

from __future__ import annotations

import os
import re
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from eosctl.base.errors import SinkError, first_line
from eosctl.base.files import input_problem
from eosctl.config.model import Sink
from eosctl.sink.base import ReadPoint, shown
from eosctl.sink.kafka_topic import read_point
from eosctl.sink.relation import (
    NO_EXTENSION_DOWNLOADS,
    DuckDBReader,
    check_columns,
    check_offsets_columns,
    columns,
)
from eosctl.sink.sql import ident, name_parts

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

# DuckDB's main header (storage/storage_info.hpp): 8-byte checksum, magic "DUCK", uint64 storage version,
# 4 uint64 flags, then the writer's library version string (32 bytes, NUL padded).
_MAGIC_AT, _VERSION_AT, _LIBRARY_AT, _LIBRARY_LEN = 8, 12, 52, 32
# How long eosctl waits for a writer between two of its transactions before it gives up on the read lock.
LOCK_WAIT_S = 10.0


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


def check_duckdb_file(path: str, where: str = "sink", flag: str = "--sink-duckdb",
                      name: str | None = None) -> None:
    """SinkError (one line) unless ``path`` is a regular DuckDB file; checked before anything opens it.
    ``name``: the file to name in messages (the user's, where ``path`` is a frozen copy of it)."""
    name = name or path
    if not os.path.exists(path):
        raise SinkError(f"sink file {name} not found; check [{where}].duckdb or {flag}")
    if os.path.isdir(path):
        raise SinkError(f"sink path {name} is a directory, not a DuckDB file; "
                        f"check [{where}].duckdb or {flag}")
    problem = input_problem(path, None)
    if problem:  # a FIFO would block read_header's open(), a device would pass for "not DuckDB"
        raise SinkError(f"{problem}; check [{where}].duckdb or {flag}")
    if read_header(path) is None:
        # Checked before connecting: DuckDB would try to download a scanner for e.g. SQLite files.
        raise _not_duckdb(name, where)


def connect_readonly(path: str | Path, where: str = "sink", flag: str = "--sink-duckdb",
                     table: str = "TABLE", wait_s: float | None = None,
                     name: str | None = None) -> DuckDBPyConnection:
    """duckdb.connect(path, read_only=True), with every failure turned into one SinkError line.

    A writer holding the file is waited for, up to ``wait_s``: a pipeline that connects, writes a batch
    and closes leaves gaps between its transactions, and one of them is all a reader needs.
    """
    # lazy: `eosctl report FILE.json` imports this module for read_header only; see docs/imports.md
    import duckdb

    path = str(path)
    name = name or path
    check_duckdb_file(path, where, flag, name)
    wait_s = LOCK_WAIT_S if wait_s is None else wait_s
    deadline, pause = time.monotonic() + wait_s, 0.005
    while True:
        try:
            return duckdb.connect(path, read_only=True, config=NO_EXTENSION_DOWNLOADS)
        except duckdb.Error as e:
            locked = _is_lock_error(str(e))
            if not locked or time.monotonic() >= deadline:
                raise _open_error(name, str(e).replace(path, name), table, where,
                                  waited=wait_s if locked else None) from None
        time.sleep(min(pause, max(deadline - time.monotonic(), 0)))
        pause = min(pause * 2, 0.02)


def _is_lock_error(msg: str) -> bool:
    return "Could not set lock" in msg or "Conflicting lock is held" in msg


def locked_error(path: str, holder: str, waited: float | None, table: str | None = None) -> SinkError:
    """A writer kept the file: who (``holder``, e.g. " (python3, PID 12)"), for how long, what to do."""
    waited_text = f" for {waited:g}s" if waited else ""
    export = f" (in the writer: COPY {table} TO 'sink.parquet')" if table else ""
    return SinkError(
        f"{path} stayed locked by a running writer{holder}{waited_text}; DuckDB lets nobody read while a "
        f"writer holds the file, and eosctl reads it between the writer's transactions: have the writer "
        f"close the file between batches, or audit a Parquet export{export} with --sink-parquet"
    )


def _open_error(path: str, msg: str, table: str, where: str, waited: float | None = None) -> SinkError:
    import duckdb  # lazy: see docs/imports.md

    if _is_lock_error(msg):
        lock = re.search(r"Conflicting lock is held in (.*?) \(PID (\d+)\)", msg)
        holder = f" ({Path(lock.group(1)).name}, PID {lock.group(2)})" if lock else ""
        return locked_error(path, holder, waited, table)
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


def open_duckdb(sink: Sink, where: str = "sink") -> DuckDBReader:
    """A reader of the sink's table in its DuckDB file (or the frozen copy the sink names)."""
    assert sink.duckdb is not None
    name = shown(sink)
    conn = connect_readonly(sink.duckdb, where, table=sink.table, name=name)
    try:
        relation, offsets, types, offsets_types = relations_of(conn, sink, where)
    except BaseException:
        conn.close()
        raise
    if sink.frozen_from is not None and sink.frozen_from.kafka_topic is not None:
        point = read_point(sink)  # a hop's output topic, read into this file by the freeze
    else:
        point = ReadPoint("duckdb", name, {"copied_at": sink.at} if sink.at else {})
    return DuckDBReader(conn, relation, sink, name, offsets, point, types, offsets_types)


def relations_of(conn: DuckDBPyConnection, sink: Sink,
                 where: str) -> tuple[str, str | None, dict[str, str], dict[str, str] | None]:
    """(sink table, offsets table or None, their column types) in an open file, checked."""
    name = shown(sink)
    relation, offsets = _relations(conn, sink, where, name)
    types = check_columns(columns(conn, relation), sink, where, f"table {sink.table} in {name}")
    return relation, offsets, types, columns(conn, offsets) if offsets else None


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


def _relations(conn: DuckDBPyConnection, sink: Sink, where: str, name: str) -> tuple[str, str | None]:
    tables = _tables(conn)
    for table, key in ((sink.table, "table"), (sink.offsets_table, "offsets_table")):
        if table is not None and not _find_table(tables, name_parts(table)):
            known = ", ".join(_table_name(s, t) for _, s, t in tables) or "none"
            raise SinkError(f"{name} has no table {table!r} (tables: {known}); check [{where}].{key} "
                            f"(schema.table, and double quotes for a name with dots: \"my.table\")")
    offsets = ident(sink.offsets_table) if sink.offsets_table else None
    if offsets:
        check_offsets_columns(columns(conn, offsets), where, f"table {sink.offsets_table} in {name}")
    return ident(sink.table), offsets


def _table_name(schema: str, table: str) -> str:
    """How to write a table's name on the command line: quoted where DuckDB would split it."""
    parts = [table] if schema == "main" else [schema, table]
    return ".".join(f'"{p}"' if "." in p or '"' in p else p for p in parts)
