"""A Delta Lake table, read at one table version.

The version's own file list (the `deltalake` library replays the log: files a compaction or an overwrite
removed are not in it, deleted rows are gone) is scanned by DuckDB as an Arrow dataset, with the shared
SQL of eosctl.sink.relation. A command pins the version once (``pinned``); every reader of the command,
Spark's tasks included, opens that version, so appends and compactions during the audit change nothing.
An ``offsets_table`` is a second Delta table (topic, partition, next_offset), pinned the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from eosctl.config import Sink
from eosctl.errors import SinkError, first_line
from eosctl.sink.base import ReadPoint, shown
from eosctl.sink.relation import (
    NO_EXTENSION_DOWNLOADS,
    DuckDBReader,
    check_columns,
    check_offsets_columns,
    columns,
)

if TYPE_CHECKING:
    from deltalake import DeltaTable


def _table(uri: str, version: int | None, where: str, key: str) -> DeltaTable:
    from deltalake import DeltaTable

    try:
        if not DeltaTable.is_deltatable(uri):
            raise SinkError(f"{uri} is not a Delta table (no _delta_log with a commit); "
                            f"check [{where}].{key}")
        return DeltaTable(uri) if version is None else DeltaTable(uri, version=version)
    except SinkError:
        raise
    except Exception as e:
        raise SinkError(f"cannot open Delta table {uri}"
                        f"{'' if version is None else f' at version {version}'}: {first_line(e)}") from None


def _versions(sink: Sink) -> tuple[int | None, int | None]:
    """(rows table, offsets table) versions a frozen sink pins ("V" or "V,W"); None: the latest."""
    if not sink.at:
        return None, None
    rows, _, offsets = sink.at.partition(",")
    return int(rows), int(offsets) if offsets else None


@contextmanager
def pinned(sink: Sink, where: str = "sink") -> Iterator[Sink]:
    """The sink at the tables' current versions, for the block."""
    assert sink.delta is not None
    at = str(_table(sink.delta, None, where, "delta").version())
    if sink.offsets_table:
        at += f",{_table(sink.offsets_table, None, where, 'offsets_table').version()}"
    yield replace(sink, frozen_from=sink, at=at)


def _dataset(table: DeltaTable, uri: str) -> Any:
    try:
        return table.to_pyarrow_dataset()
    except Exception as e:  # e.g. a reader feature this deltalake can't apply to a plain file scan
        raise SinkError(f"cannot read Delta table {uri} at version {table.version()}: "
                        f"{first_line(e)}") from None


def open_delta(sink: Sink, where: str = "sink") -> DuckDBReader:
    """A reader of the Delta table at its pinned version (or the latest)."""
    import duckdb

    assert sink.delta is not None
    name = shown(sink)
    version, offsets_version = _versions(sink)
    rows = _table(sink.delta, version, where, "delta")
    at: dict[str, Any] = {"version": rows.version()}
    conn = duckdb.connect(config=NO_EXTENSION_DOWNLOADS)
    try:
        conn.register("delta_rows", _dataset(rows, name))
        types = check_columns(columns(conn, "delta_rows"), sink, where, f"Delta table {name}")
        offsets = offsets_types = None
        if sink.offsets_table:
            table = _table(sink.offsets_table, offsets_version, where, "offsets_table")
            conn.register("delta_offsets", _dataset(table, sink.offsets_table))
            offsets = "delta_offsets"
            offsets_types = check_offsets_columns(columns(conn, offsets), where,
                                                  f"Delta table {sink.offsets_table}")
            at["offsets_version"] = table.version()
    except BaseException:
        conn.close()
        raise
    return DuckDBReader(conn, "delta_rows", sink, name, offsets, ReadPoint("delta", name, at), types,
                        offsets_types)
