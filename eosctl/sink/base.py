"""What every sink reader returns, whatever the kind of sink: the model and the reader's protocol.

A reader answers in offset *islands* (runs of consecutive offsets that occur the same number of times) and
per-partition summaries, so callers reconcile with range arithmetic instead of per-offset lists; and it
names its *read point*, the one consistent state of the sink it read (a frozen copy, a snapshot, a table
version), so a report can say what was audited.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qsl, urlencode, urlsplit

from eosctl.base.files import glob_paths
from eosctl.cluster.model import TP
from eosctl.config.model import Sink
from eosctl.report.findings import Finding
from eosctl.report.readpoint import ReadPoint

if TYPE_CHECKING:
    import pyarrow as pa

KINDS = ("duckdb", "parquet", "postgres", "delta", "iceberg", "kafka_topic")
# Kafka's limits (org.apache.kafka.common.record: offsets are int64, partitions int32): a sink value
# outside them, or not an integer, can't name a Kafka record.
MAX_OFFSET = (1 << 63) - 1
MAX_PARTITION = (1 << 31) - 1
OFFSETS_COLUMNS = ("topic", "partition", "next_offset")
ISLAND_BATCH = 65_536


@dataclass(frozen=True)
class SinkPartition:
    """The sink's row counts for one partition (the audit's per-partition verdict is
    eosctl.report.findings.PartitionSummary)."""

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
class Limits:
    """What one reader may use where it runs inside a worker (outside Spark's memory accounting)."""

    threads: int = 1
    memory: str = "1GB"
    temp_directory: str | None = None


class SinkReader(Protocol):
    """Read-only queries over one sink at one read point. Use as a context manager, or call close()."""

    source: str  # the sink as the user named it, for messages
    sink: Sink  # its config, with the column names as the sink spells them
    read_point: ReadPoint
    # A query of one partition passes over every row of the sink (a PostgreSQL table with no index to
    # find a partition's rows by): a task then reads its partitions together (auditors.task).
    scans_all_per_partition: bool

    def summaries(self) -> list[SinkPartition]: ...

    def partitions(self) -> dict[TP, int]: ...

    def islands(self, topic: str | None = None, partition: int | None = None) -> Iterator[OffsetIsland]: ...

    def invalid_rows(self) -> list[Finding]: ...

    def committed_keys(self, topic: str, partition: int,
                       committed: list[tuple[int, int]]) -> Iterator[pa.RecordBatch]: ...

    # For these partitions at once (an audit task's group): one query instead of one per partition.
    def islands_in(self, tps: Sequence[TP]) -> Iterator[OffsetIsland]: ...

    def committed_keys_in(self,
                          committed: Mapping[TP, list[tuple[int, int]]]) -> Iterator[pa.RecordBatch]: ...

    def stored_offsets(self) -> list[StoredOffset] | None: ...

    def write_order(self, topic: str, partition: int,
                    ranges: Sequence[tuple[int, int]]) -> dict[int, tuple[Any, Any, Any, Any]]: ...

    def write_times(self, topic: str, partition: int, offset: int) -> list[Any]: ...

    def limit(self, limits: Limits) -> None: ...

    def close(self) -> None: ...

    def __enter__(self) -> SinkReader: ...

    def __exit__(self, *exc: object) -> None: ...


def read_columns(sink: Sink) -> tuple[str, ...]:
    """The columns of the sink's rows table that readers use."""
    wanted = (sink.topic_column, sink.partition_column, sink.offset_column, sink.key_column,
              sink.value_column, sink.value_hash_column, sink.order_column, sink.write_time_column)
    return tuple(dict.fromkeys(c for c in wanted if c is not None))


def kind_of(sink: Sink) -> str | None:
    """Which kind of sink the config names (None: none)."""
    return next((k for k in KINDS if getattr(sink, k) is not None), None)


def local_files(sink: Sink | None) -> list[str]:
    """The files on this machine a command reads for this sink (a DuckDB file and its WAL, every Parquet
    file a glob matches, a Delta table's files): what an output must never replace (eosctl.base.files)."""
    if sink is None:
        return []

    found: list[str] = []
    if sink.duckdb:
        found += [sink.duckdb, sink.duckdb + ".wal"]
    if sink.parquet and "://" not in sink.parquet:
        found += glob_paths(os.path.expanduser(sink.parquet))
    if sink.delta and "://" not in sink.delta and os.path.isdir(sink.delta):
        for folder, _, names in os.walk(sink.delta):
            found += [os.path.join(folder, n) for n in names]
    return found


def shown(sink: Sink) -> str:
    """The sink as the user named it: the original of a frozen copy."""
    given = sink.frozen_from or sink
    kind = kind_of(given)
    if kind == "postgres":
        return redact_uri(given.postgres or "")
    return getattr(given, kind) if kind else ""


def as_given(sink: Sink, text: str) -> str:
    """``text`` (an error from reading a frozen sink) naming the user's files, not the frozen copy's: the
    copy keeps the layout below the given path's fixed part, so the two differ only in that root."""
    given = sink.frozen_from
    if given is None:
        return text
    for key in ("duckdb", "parquet", "offsets_table"):
        copy, original = getattr(sink, key), getattr(given, key)
        if not copy or not original or copy == original:
            continue
        common = len(os.path.commonprefix([copy[::-1], original[::-1]]))
        text = text.replace(copy[:len(copy) - common], original[:len(original) - common])
    return text


def redact_uri(uri: str) -> str:
    """A connection URI without its password (in the authority or as a query parameter)."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return uri.split("://", 1)[0] + "://..." if "://" in uri else "(not a URI)"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        netloc = userinfo.split(":", 1)[0] + "@" + host
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k.lower() != "password"], safe="/")
    return f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")
