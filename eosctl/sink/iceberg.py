"""An Apache Iceberg table, read at one snapshot.

``iceberg = "CATALOG.NAMESPACE.TABLE"``: the catalog is pyiceberg's (its own configuration, ~/.pyiceberg.yaml
or PYICEBERG_CATALOG__NAME__* variables), or given by the sink's ``catalog_uri`` (e.g. a SQL catalog on a
SQLite file, sqlite:///path/catalog.db) and ``warehouse``. pyiceberg plans the snapshot's scan (its
manifests list the live data files; delete files are applied), DuckDB runs the shared SQL of
eosctl.sink.relation over the result. A command pins the snapshot once (``pinned``); every reader of the
command opens that snapshot, so appends and compactions during the audit change nothing. An
``offsets_table`` is a second table of the same catalog (NAMESPACE.TABLE), pinned the same way.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from eosctl.base.errors import SinkError, first_line
from eosctl.cluster.model import TP
from eosctl.config.model import Sink
from eosctl.sink.base import OFFSETS_COLUMNS, read_columns
from eosctl.sink.relation import (
    DuckDBReader,
    check_columns,
)
from eosctl.sink.tablepin import Format, open_pinned, pinned_sink, split_at

if TYPE_CHECKING:
    from pyiceberg.table import Table

NO_SNAPSHOT = "empty"  # a table nothing was ever committed to


def _name(sink: Sink, where: str) -> tuple[str, str]:
    """(catalog, NAMESPACE.TABLE) of the sink's ``iceberg``, or one SinkError line."""
    assert sink.iceberg is not None
    catalog, _, table = sink.iceberg.partition(".")
    if not catalog or "." not in table:
        raise SinkError(f"[{where}].iceberg {sink.iceberg!r} is not CATALOG.NAMESPACE.TABLE")
    return catalog, table


def _catalog_and_name(sink: Sink, where: str) -> tuple[Any, str, str]:
    from pyiceberg.catalog import load_catalog  # lazy: see docs/imports.md

    catalog, table = _name(sink, where)
    props = {k: v for k, v in (("uri", sink.catalog_uri), ("warehouse", sink.warehouse)) if v}
    try:
        return load_catalog(catalog, **props), catalog, table
    except Exception as e:
        raise SinkError(f"cannot load Iceberg catalog {catalog!r}: {first_line(e)}; set "
                        f"[{where}].catalog_uri (and warehouse) or configure the catalog for "
                        f"pyiceberg") from None


def _only(sink: Sink, schema: dict[str, str], partitions: Sequence[TP] | None) -> Any:
    """A pyiceberg filter keeping ``partitions``' rows, or None (all rows)."""
    if not partitions:
        return None
    types = {k.lower(): v for k, v in schema.items()}
    if types.get(sink.topic_column.lower()) != "string" or \
            types.get(sink.partition_column.lower()) not in ("int", "long"):
        return None
    from pyiceberg.expressions import And, EqualTo, In, Or  # lazy: see docs/imports.md

    by_topic: dict[str, set[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, set()).add(int(partition))
    # pyiceberg's predicates take (term, literal) positionally, in their own __init__; mypy reads the
    # pydantic fields as the constructor instead (dataclass_transform) and so rejects the call it documents.
    terms = [And(EqualTo(sink.topic_column, t),  # type: ignore[call-arg, arg-type]
                 In(sink.partition_column, ps))  # type: ignore[call-arg, arg-type]
             for t, ps in by_topic.items()]
    return terms[0] if len(terms) == 1 else Or(*terms)


def _table(catalog: Any, name: str, where: str, key: str) -> Table:
    try:
        return catalog.load_table(name)
    except Exception as e:
        raise SinkError(f"Iceberg catalog has no table {name!r} ({first_line(e)}); check [{where}].{key}") \
            from None


# Tables loaded in this process, by catalog and name. A command's readers (its pool's forked workers and
# Spark's reused Python workers too) read at the snapshot the command pinned, which a table loaded at or
# after the pin lists: loading it again costs ~0.4 s in a fresh process (the catalog's engine, the metadata).
_loaded: dict[tuple[str | None, str | None, str, str], Table] = {}


def _table_at(sink: Sink, name: str, snapshot: str | None, where: str, key: str) -> Table:
    """The table ``name`` of the sink's catalog, as loaded before if that lists ``snapshot`` (None: load
    it now: the current snapshot is wanted)."""
    assert sink.iceberg is not None
    cache = (sink.catalog_uri, sink.warehouse, sink.iceberg.partition(".")[0], name)
    table = _loaded.get(cache)
    if table is not None and snapshot is not None and (
            snapshot == NO_SNAPSHOT or table.snapshot_by_id(int(snapshot)) is not None):
        return table
    table = _loaded[cache] = _table(_catalog_and_name(sink, where)[0], name, where, key)
    return table


def _snapshot(table: Table) -> str:
    current = table.current_snapshot()
    return NO_SNAPSHOT if current is None else str(current.snapshot_id)


ICEBERG = Format("iceberg", "Iceberg table", "snapshot", ("snapshot_id", "offsets_snapshot_id"))


@contextmanager
def pinned(sink: Sink, where: str = "sink") -> Iterator[Sink]:
    """The sink at the tables' current snapshots, for the block; with the snapshots' data files where
    those are all there is to them (plain_files)."""
    _, name = _name(sink, where)
    rows = _table_at(sink, name, None, where, "iceberg")
    pins = (_snapshot(rows), plain_files(rows, read_columns(sink)))
    offsets = None
    if sink.offsets_table:
        table = _table_at(sink, sink.offsets_table, None, where, "offsets_table")
        offsets = (_snapshot(table), plain_files(table, OFFSETS_COLUMNS))
    yield pinned_sink(sink, pins, offsets)


def plain_files(table: Table, columns: Sequence[str]) -> tuple[str, ...] | None:
    """The current snapshot's data files where their rows are exactly its rows as ``columns`` name them:
    local Parquet, no delete files, one schema ever (no column renamed or added since a file was
    written) and none of the columns an identity partition's (a file may leave those to the manifest).
    DuckDB then scans them itself and a reader needs no pyiceberg; None where pyiceberg must apply what
    the metadata says."""
    try:
        if table.current_snapshot() is None or len(table.metadata.schemas) != 1:
            return None
        schema = table.schema()
        identity = {schema.find_field(f.source_id).name.lower() for spec in table.specs().values()
                    for f in spec.fields if str(f.transform) == "identity"}
        if identity & {c.lower() for c in columns}:
            return None
        tasks = list(table.scan().plan_files())
        files = tuple(t.file.file_path.removeprefix("file://") for t in tasks)
        plain = all(not t.delete_files and str(t.file.file_format).upper().endswith("PARQUET") for t in tasks)
    except Exception:  # what pyiceberg can't plan here, its own scan reports
        return None
    return files if files and plain and not any("://" in f for f in files) else None


def _arrow(table: Table, snapshot: str | None, name: str, fields: tuple[str, ...] = ("*",),
           row_filter: Any = None) -> Any:
    """The rows of ``snapshot`` (None: the current one), deletes applied: only ``fields``, only the rows
    ``row_filter`` keeps (pyiceberg prunes the files and row groups that can't hold them)."""
    try:
        if snapshot == NO_SNAPSHOT or (snapshot is None and table.current_snapshot() is None):
            # lazy: see docs/imports.md
            import pyarrow as pa
            from pyiceberg.io.pyarrow import schema_to_pyarrow

            empty = pa.Table.from_pylist([], schema=schema_to_pyarrow(table.schema()))
            return empty if fields == ("*",) else empty.select(
                [c for c in empty.column_names if c.lower() in {f.lower() for f in fields}])
        kw: dict[str, Any] = {"selected_fields": fields, "case_sensitive": False}
        if row_filter is not None:
            kw["row_filter"] = row_filter
        if snapshot is not None:
            kw["snapshot_id"] = int(snapshot)
        return table.scan(**kw).to_arrow()
    except Exception as e:
        at = "" if snapshot is None else f" at snapshot {snapshot}"
        raise SinkError(f"cannot read Iceberg table {name}{at}: {first_line(e)}") from None


def open_iceberg(sink: Sink, where: str = "sink", partitions: Sequence[TP] | None = None) -> DuckDBReader:
    """The table at its pinned snapshot: its pinned files where it has them (no catalog or table loaded),
    else its columns the sink names as pyiceberg reads them; ``partitions``: only those partitions' rows
    (an audit task's), where the topic and partition columns can be filtered as text and integers
    (otherwise every row: the reader's own queries still select the task's)."""
    assert sink.iceberg is not None
    name = (sink.frozen_from or sink).iceberg or ""
    _, table_name = _name(sink, where)
    rows_at, offsets_at = split_at(sink)

    def load_rows(conn: Any) -> str:
        rows = _table_at(sink, table_name, rows_at, where, "iceberg")
        at = rows_at or _snapshot(rows)
        schema = {f.name: str(f.field_type) for f in rows.schema().fields}
        check_columns(schema, sink, where, f"Iceberg table {name}")
        conn.register("iceberg_rows", _arrow(rows, rows_at, name, read_columns(sink),
                                             _only(sink, schema, partitions)))
        return at

    def load_offsets(conn: Any) -> str:
        offsets_table = sink.offsets_table or ""
        table = _table_at(sink, offsets_table, offsets_at, where, "offsets_table")
        conn.register("iceberg_offsets", _arrow(table, offsets_at, offsets_table))
        return offsets_at or _snapshot(table)

    return open_pinned(sink, where, ICEBERG, name, rows_at, offsets_at, load_rows, load_offsets)
