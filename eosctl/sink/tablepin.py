"""The skeleton Delta and Iceberg sinks share: pin the rows table and the offsets table once per command
(``sink.at`` = "ROWS" or "ROWS,OFFSETS"), then open each at its pin, from the pin's plain files when it has
them (no table library loaded) or through the table itself. The table-format-specific parts (what a pin
is, how a table is read) are passed in by eosctl/sink/delta.py and eosctl/sink/iceberg.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from eosctl.config.model import Sink
from eosctl.sink.base import ReadPoint
from eosctl.sink.relation import (
    NO_EXTENSION_DOWNLOADS,
    DuckDBReader,
    check_columns,
    check_offsets_columns,
    columns,
    register_files,
)


def split_at(sink: Sink) -> tuple[str | None, str | None]:
    """(rows table pin, offsets table pin) of a frozen sink ("P" or "P,Q"); None: the latest."""
    if not sink.at:
        return None, None
    rows, _, offsets = sink.at.partition(",")
    return rows, offsets or None


def pinned_sink(sink: Sink, rows: tuple[str, tuple[str, ...] | None],
                offsets: tuple[str, tuple[str, ...] | None] | None) -> Sink:
    """The sink pinned: (pin, its plain files or None) of the rows table and, if any, of the offsets table."""
    at, files = rows
    offsets_files = None
    if offsets is not None:
        at += f",{offsets[0]}"
        offsets_files = offsets[1]
    return replace(sink, frozen_from=sink, at=at, files=files, offsets_files=offsets_files)


@dataclass(frozen=True)
class Format:
    kind: str  # "delta", "iceberg": the ReadPoint's kind and the DuckDB relations' prefix
    what: str  # "Delta table": how messages name it
    pin_word: str  # "version", "snapshot"
    at_keys: tuple[str, str]  # the ReadPoint's keys of the rows pin and the offsets pin


def open_pinned(sink: Sink, where: str, fmt: Format, name: str, rows_at: Any, offsets_at: Any,
                load_rows: Callable[[Any], Any], load_offsets: Callable[[Any], Any]) -> DuckDBReader:
    """A reader of both tables at their pins: ``load_rows(conn)`` / ``load_offsets(conn)`` register the
    table (as KIND_rows / KIND_offsets) when it has no pinned files, and return the pin they read."""
    import duckdb  # lazy: see docs/imports.md

    rows_rel, offsets_rel = f"{fmt.kind}_rows", f"{fmt.kind}_offsets"
    conn = duckdb.connect(config=NO_EXTENSION_DOWNLOADS)
    try:
        at: dict[str, Any] = {}
        if sink.files and rows_at is not None:
            register_files(conn, rows_rel, sink.files, f"{fmt.what} {name} at {fmt.pin_word} {rows_at}")
            at[fmt.at_keys[0]] = rows_at
        else:
            at[fmt.at_keys[0]] = load_rows(conn)
        types = check_columns(columns(conn, rows_rel), sink, where, f"{fmt.what} {name}")
        offsets = offsets_types = None
        if sink.offsets_table:
            if sink.offsets_files and offsets_at is not None:
                register_files(conn, offsets_rel, sink.offsets_files,
                               f"{fmt.what} {sink.offsets_table} at {fmt.pin_word} {offsets_at}")
                at[fmt.at_keys[1]] = offsets_at
            else:
                at[fmt.at_keys[1]] = load_offsets(conn)
            offsets = offsets_rel
            offsets_types = check_offsets_columns(columns(conn, offsets), where,
                                                  f"{fmt.what} {sink.offsets_table}")
    except BaseException:
        conn.close()
        raise
    return DuckDBReader(conn, rows_rel, sink, name, offsets, ReadPoint(fmt.kind, name, at), types,
                        offsets_types)
