"""Reading a pipeline's sink: one reader interface (eosctl.sink.base), one module per kind of sink.

``open_reader(sink)`` picks the module by the sink's kind; ``frozen(sink)`` pins one read point for a
command (read the sink first, then Kafka). Kind-specific SQL lives only in this package.
"""

from __future__ import annotations

from collections.abc import Sequence

from eosctl.base.errors import SinkError
from eosctl.cluster.model import TP
from eosctl.config.model import Sink
from eosctl.report.findings import Finding
from eosctl.sink.base import (
    KINDS,
    Limits,
    OffsetIsland,
    ReadPoint,
    SinkPartition,
    SinkReader,
    StoredOffset,
    kind_of,
    shown,
)
from eosctl.sink.delta import open_delta
from eosctl.sink.duckdb import open_duckdb
from eosctl.sink.freeze import frozen
from eosctl.sink.iceberg import open_iceberg
from eosctl.sink.parquet import open_parquet
from eosctl.sink.postgres import open_postgres


def open_reader(sink: Sink, where: str = "sink", limits: Limits | None = None,
                partitions: Sequence[TP] | None = None) -> SinkReader:
    """Open the pipeline's sink read-only and check its table and columns exist.

    ``where`` names the config section in messages (e.g. "pipelines.orders.sink"); ``limits`` caps what
    the reader may use (a worker of the audit); ``partitions``: the only ones the caller will ask about (an
    audit task's), for kinds that must load rows before querying them (Iceberg); other kinds push each
    query's partition down as it is asked.
    """
    kind = kind_of(sink)
    if sink.mode != "offsets":  # a state sink (eosctl.sink.state): no rows at offsets to read
        raise SinkError(f"[{where}] keeps state per key (mode = {sink.mode!r}), not rows at offsets: `eosctl "
                        f"audit` and `eosctl explain --offset` read it, this command does not")
    reader: SinkReader
    if kind == "duckdb":
        reader = open_duckdb(sink, where)
    elif kind == "parquet":
        reader = open_parquet(sink, where)
    elif kind == "iceberg":
        reader = open_iceberg(sink, where, partitions)
    elif kind == "delta":
        reader = open_delta(sink, where)
    elif kind == "postgres":
        reader = open_postgres(sink, where)
    else:
        raise SinkError(f"[{where}] has no sink; set one of {', '.join(KINDS)}, or pass --sink-duckdb or "
                        f"--sink-parquet")
    if limits is not None:
        try:
            reader.limit(limits)
        except BaseException:
            reader.close()
            raise
    return reader


def invalid_rows(sink: Sink) -> list[Finding]:
    """The sink's invalid_row findings (SinkReader.invalid_rows), for a caller that has no reader open."""
    with open_reader(sink) as reader:
        return reader.invalid_rows()


__all__ = ["KINDS", "Limits", "OffsetIsland", "ReadPoint", "SinkPartition", "SinkReader", "StoredOffset",
           "frozen", "invalid_rows", "kind_of", "open_reader", "shown"]
