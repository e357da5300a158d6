"""Parquet files matching a glob (local, or a URL DuckDB has the extension for), or a directory's table as
Spark reads it (eosctl.sink.spark_files), read through DuckDB."""

from __future__ import annotations

import re

from eosctl.base.errors import SinkError
from eosctl.base.files import glob_paths, glob_problem, input_problem
from eosctl.config.model import Sink
from eosctl.sink.base import ReadPoint, as_given, shown
from eosctl.sink.relation import (
    NO_EXTENSION_DOWNLOADS,
    DuckDBReader,
    check_columns,
    check_offsets_columns,
    columns,
)
from eosctl.sink.spark_files import is_table_dir, table_files
from eosctl.sink.sql import literal


def is_url(pattern: str) -> bool:
    return bool(re.match(r"^[a-z0-9]+://", pattern))


def open_parquet(sink: Sink, where: str = "sink") -> DuckDBReader:
    """A reader of the Parquet files the sink's glob matches (or the frozen file list the sink names)."""
    import duckdb  # lazy: see docs/imports.md

    assert sink.parquet is not None
    name = shown(sink)
    given = sink.frozen_from or sink
    conn = duckdb.connect(config=NO_EXTENSION_DOWNLOADS)
    try:
        relation = _relation(sink.parquet, where, "parquet", name)
        offsets = (_relation(sink.offsets_table, where, "offsets_table", given.offsets_table or "")
                   if sink.offsets_table else None)
        types = check_columns(columns(conn, relation), sink, where, f"Parquet files {name}")
        offsets_types = None
        if offsets:
            offsets_types = check_offsets_columns(columns(conn, offsets), where,
                                                  f"Parquet files {given.offsets_table or ''}")
    except SinkError as e:
        conn.close()
        raise SinkError(as_given(sink, str(e))) from None
    except BaseException:
        conn.close()
        raise
    at = {"files_listed_at": sink.at} if sink.at else {}
    return DuckDBReader(conn, relation, sink, name, offsets, ReadPoint("parquet", name, at), types,
                          offsets_types)


def _relation(pattern: str, where: str, key: str, name: str) -> str:
    if is_table_dir(pattern):
        files = table_files(pattern)
        if not files:
            raise SinkError(f"{name} holds no committed Parquet files yet (a Spark file sink commits a "
                            f"batch's files in its _spark_metadata log); check [{where}].{key} or "
                            "--sink-parquet")
        for f in files:
            problem = input_problem(f, None)
            if problem:
                raise SinkError(f"{problem} (a file of the table in {name}); check [{where}].{key}")
        return f"read_parquet([{', '.join(literal(f) for f in files)}])"
    # Check the glob ourselves: DuckDB's "No files found" message carries a multi-line SQL excerpt.
    if not is_url(pattern) and not glob_paths(pattern):
        raise SinkError(f"no Parquet files match {name}; check [{where}].{key} or --sink-parquet")
    problem = glob_problem(pattern)
    if problem:
        raise SinkError(f"{problem}; check [{where}].{key} or --sink-parquet")
    return f"read_parquet({literal(pattern)})"
