"""A state sink's rows (``mode = "upsert"`` or ``"aggregate"``): its key and value columns, no offsets.

Read from the sink the command froze (eosctl.sink.freeze: a DuckDB file's copy, a PostgreSQL snapshot, a
Delta version, an Iceberg snapshot), with the read point the report names. DuckDB, Parquet, PostgreSQL,
Delta and Iceberg; one line naming the sink and its config key where a column or the table is missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eosctl.base.errors import SinkError, first_line
from eosctl.config.model import Sink
from eosctl.report.readpoint import ReadPoint
from eosctl.sink.base import shown
from eosctl.sink.sql import ident

KINDS = ("duckdb", "parquet", "postgres", "delta", "iceberg", "kafka_topic")


def unsupported(sink: Sink) -> str | None:
    """Why a state sink of this kind cannot be read, in one sentence; None if it can."""
    if any(getattr(sink, k) is not None for k in KINDS):
        return None
    return (f"mode = {sink.mode!r} reads DuckDB, Parquet, PostgreSQL, Delta, Iceberg and kafka_topic sinks, "
            f"not this sink; audit it with mode = \"offsets\"")


def topic_rows(sink: Sink) -> tuple[list[tuple[bytes | None, bytes]], ReadPoint]:
    """A compacted topic (a KTable's output or changelog) as a state sink: per record key, its latest
    committed record's (key, value) below the end offsets read first, as a compacted topic or a KTable
    holds it; a tombstone deletes the key."""
    from eosctl.sink.kafka_topic import end_offsets, now, records  # lazy: see docs/imports.md

    if sink.kafka_cluster is None or sink.kafka_topic is None:
        raise SinkError("a kafka_topic state sink needs its cluster; check [pipelines.NAME.sink].cluster")
    ends = end_offsets(sink.kafka_cluster, sink.kafka_topic)
    at = now()
    latest: dict[bytes | None, tuple[bytes | None, bytes | None]] = {}
    what = f"the state topic {sink.kafka_topic}"
    for m in records(sink.kafka_cluster, ends, read_committed=True, what=what):
        latest[m.key()] = (m.key(), m.value())
    rows = [(k, v) for k, v in latest.values() if v is not None]
    point = ReadPoint("kafka_topic", sink.kafka_topic, {
        "end_offsets": [{"partition": p, "offset": o} for (_, p), o in sorted(ends.items())], "read_at": at})
    return rows, point


def read_rows(sink: Sink, columns: Sequence[tuple[str, str]],
              where: str = "sink", arrow: bool = False) -> tuple[Any, ReadPoint]:
    """Every row's ``columns`` ((column, config key) each, in order) and the read point; ``arrow``: as an
    Arrow table where DuckDB reads the sink (DuckDB, Parquet, Delta), else tuples."""
    name = shown(sink)
    if sink.postgres is not None:
        return _postgres(sink, columns, where, name)
    import duckdb  # lazy: see docs/imports.md

    from eosctl.sink.relation import NO_EXTENSION_DOWNLOADS  # lazy: see docs/imports.md

    if sink.duckdb is not None:
        from eosctl.sink.duckdb import connect_readonly  # lazy: see docs/imports.md

        conn = connect_readonly(sink.duckdb, where, table=sink.table, name=name)
        relation, point = ident(sink.table), ReadPoint("duckdb", name, _copied(sink))
        what = f"table {sink.table} in {name}"
    else:
        conn = duckdb.connect(config=NO_EXTENSION_DOWNLOADS)
        relation = "state_rows"
        if sink.delta is not None:
            point = _register_delta(conn, sink, where, name)
            what = f"Delta table {name}"
        elif sink.iceberg is not None:
            point = _register_iceberg(conn, sink, where)
            what = f"Iceberg table {point.source}"
        else:
            from eosctl.sink.relation import register_files  # lazy: see docs/imports.md

            files = sink.files or (sink.parquet,)
            register_files(conn, relation, [f for f in files if f], f"Parquet {name}")
            point, what = ReadPoint("parquet", name, _copied(sink)), f"Parquet {name}"
    try:
        have = _columns(conn, relation, what, name)
        sql = f"SELECT {', '.join(_pick(have, c, k, what, where) for c, k in columns)} FROM {relation}"
        rows = conn.sql(sql).to_arrow_table() if arrow else conn.execute(sql).fetchall()
    except SinkError:
        raise
    except Exception as e:
        raise SinkError(f"cannot read {what}: {first_line(e)}") from None
    finally:
        conn.close()
    return rows, point


def _copied(sink: Sink) -> dict[str, Any]:
    return {"copied_at": sink.at} if sink.at else {}


def _columns(conn: Any, relation: str, what: str, name: str) -> dict[str, str]:
    try:
        return {r[0].lower(): r[0] for r in conn.execute(f"DESCRIBE SELECT * FROM {relation}").fetchall()}
    except Exception as e:
        raise SinkError(f"cannot read {what}: {first_line(e)}") from None


def _pick(have: dict[str, str], column: str, key: str, what: str, where: str) -> str:
    """The column as the table spells it, quoted; one line naming the config key if the table lacks it."""
    actual = have.get(column.lower())
    if actual is None:
        raise SinkError(f"{what} lacks column {column} ({key}); it has {', '.join(have.values())}; set the "
                        f"column names in [{where}]")
    return '"' + actual.replace('"', '""') + '"'


def _register_delta(conn: Any, sink: Sink, where: str, name: str) -> ReadPoint:
    from eosctl.sink.delta import _table, _versions  # lazy: see docs/imports.md

    version, _ = _versions(sink)
    table = _table(sink.delta or "", version, where, "delta")
    try:
        conn.register("state_rows", table.to_pyarrow_dataset())
    except Exception as e:
        raise SinkError(f"cannot read Delta table {name} at version {table.version()}: "
                        f"{first_line(e)}") from None
    return ReadPoint("delta", name, {"version": table.version()})


def _register_iceberg(conn: Any, sink: Sink, where: str) -> ReadPoint:
    """The table at the snapshot the command pinned (eosctl.sink.freeze), deletes applied by pyiceberg."""
    from eosctl.sink.iceberg import _arrow, _name, _snapshot, _table_at  # lazy: see docs/imports.md
    from eosctl.sink.tablepin import split_at  # lazy: see docs/imports.md

    name = (sink.frozen_from or sink).iceberg or ""
    _, table_name = _name(sink, where)
    at, _ = split_at(sink)
    table = _table_at(sink, table_name, at, where, "iceberg")
    conn.register("state_rows", _arrow(table, at, name))
    return ReadPoint("iceberg", name, {"snapshot_id": at or _snapshot(table)})


def _postgres(sink: Sink, columns: Sequence[tuple[str, str]], where: str, name: str) -> tuple[list[tuple],
                                                                                              ReadPoint]:
    from eosctl.sink.postgres import (  # lazy: it imports psycopg; see docs/imports.md
        _begin,
        _column_types,
        _find_table,
        _join,
        _qualified,
        connect,
        server_version,
    )

    conn = connect(sink.postgres or "", where)
    try:
        _begin(conn)
        snapshot = _join(conn, sink.at, name) if sink.at is not None else None
        schema, table = _find_table(conn, sink.table, where, "table", name)
        what = f"table {sink.table} in {name}"
        have = {c.lower(): c for c in _column_types(conn, schema, table)}
        picked = ", ".join(_pick(have, c, k, what, where) for c, k in columns)
        rows = conn.execute(f"SELECT {picked} FROM {_qualified(schema, table)}").fetchall()
        at = {"server_version": server_version(conn)}
        if snapshot is not None:
            at = {"snapshot": snapshot, **at}
        return rows, ReadPoint("postgres", name, at)
    except SinkError:
        raise
    except Exception as e:
        raise SinkError(f"cannot read table {sink.table} in {name}: {first_line(e)}") from None
    finally:
        conn.close()
