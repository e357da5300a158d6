"""The driver's plan of an audit: the partitions to audit (``WorkItem``, with what the driver read once
for them: leaders, offsets, the sink's rows, its stored and the group's committed offsets) and the task
settings. Grouping the items into tasks is auditors.grouping's."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from auditors.sources import Placement, Source
from eosctl.cluster.model import TP
from eosctl.config.model import Cluster, Sink
from eosctl.report.findings import KINDS
from eosctl.report.window import PartitionWindow, WindowSpec
from eosctl.sink import open_reader
from eosctl.sink.kafka_topic import committed_before

if TYPE_CHECKING:
    from eosctl.sink import StoredOffset

@dataclass(frozen=True)
class TaskSettings:
    """DuckDB inside a Python worker is outside Spark's memory accounting: cap it explicitly."""

    duckdb_threads: int = 1
    duckdb_memory: str = "1GB"
    temp_directory: str = field(default_factory=lambda: os.path.join(tempfile.gettempdir(), "eosctl-duckdb"))


@dataclass(frozen=True)
class WorkItem:
    """One partition to audit, with what the driver knows of it. ``placement`` is None for a partition
    only the sink names (a phantom partition or topic: ``in_kafka`` False)."""

    topic: str
    partition: int
    in_kafka: bool  # False: only the sink names it (a phantom partition or topic)
    # offset_mismatch needs the log model, which only the task has: the driver ships both sides here.
    check_offsets: bool = False
    stored_offset: int | None = None  # the sink's offsets table
    committed_offset: int | None = None  # the group's commit in Kafka
    # A Kafka-to-Kafka hop: the stage's committed offset; input beyond it is the stage's lag, not missing.
    expected_upto: int | None = None
    placement: Placement | None = None  # leader and offsets, read once by the driver
    sink_rows: int = 0  # the sink's rows for it (sizes the task)
    window: PartitionWindow | None = None  # the offsets judged (--since/--until, the sink's retention)
    # With a dead-letter queue (sink.dlq_topic): (source offset, dead letters) of this partition.
    dead_lettered: tuple[tuple[int, int], ...] | None = None
    # With a route (sink.route): the ranges of committed records it leaves out (eosctl.cluster.routes).
    routed_out: tuple[tuple[int, int], ...] | None = None

    @property
    def tp(self) -> TP:
        return self.topic, self.partition


@dataclass
class AuditInput:
    source: Source
    sink: Sink
    topics: tuple[str, ...]
    cluster: Cluster | None = None  # for the group's committed offsets (offset_mismatch)
    group: str | None = None
    fail_on: tuple[str, ...] = KINDS
    settings: TaskSettings = field(default_factory=TaskSettings)
    # Compare each sink row's key with the key of the record at its offset (content_mismatch); only where
    # the sink names a key column.
    content_check: bool = False
    # The window judged (eosctl.report.window); the driver maps it to each partition's offsets (prepare).
    window: WindowSpec | None = None


def plan(source: Source, topics: Iterable[str], in_sink: dict[TP, int]) -> list[WorkItem]:
    """Every partition of the audited topics with its leader and offsets (asked once, here), plus sink
    partitions Kafka doesn't have. ``in_sink``: the sink's rows per partition.

    Sink rows for another topic that exists in Kafka are not audited (the sink may consume several
    topics and the user narrowed it with --topic); for a topic Kafka doesn't have, they are phantoms.
    """
    topics = tuple(dict.fromkeys(topics))
    audited = source.survey(topics)
    items = [WorkItem(t, p, True, placement=pl, sink_rows=in_sink.get((t, p), 0))
             for t in topics for p, pl in audited[t].items()]
    known = {(i.topic, i.partition) for i in items}
    others = {tp for tp in in_sink if tp not in known}
    existing = source.existing_topics() if any(t not in audited for t, _ in others) else {}
    for t, p in sorted(others):
        if t in audited or t not in existing:
            items.append(WorkItem(t, p, False, sink_rows=in_sink[(t, p)]))
    return items


class SinkCounts(Protocol):
    """What prepare reads of a sink: an open eosctl.sink.SinkReader, or the incremental audit's kept state
    of one (auditors.incremental)."""

    def partitions(self) -> dict[TP, int]: ...

    def stored_offsets(self) -> list[StoredOffset] | None: ...


def prepare(inp: AuditInput, reader: SinkCounts | None = None) -> list[WorkItem]:
    """Open and validate the sink, read Kafka metadata and every partition's offsets (once, for all tasks),
    list the work: fails fast, before Spark starts.

    With a group, each item also carries the sink's stored offset and the group's committed one (both
    cheap to read here); the task, which has the log model, judges them. ``inp.sink`` is the one the
    command froze (eosctl.sink.frozen, in auditors.engine.run): the tasks read the same read point.
    ``reader``: the driver's reader of it, if it has one open (a lakehouse table is loaded once).
    """
    with open_reader(inp.sink) if reader is None else nullcontext(reader) as reader:
        in_sink = reader.partitions()
        # A Spark query keeps no group: its checkpoint's offsets still tell a gap it passed.
        offsets_kept = inp.group or inp.sink.spark_checkpoint
        stored = reader.stored_offsets() if offsets_kept and inp.cluster is not None else None
    items = plan(inp.source, inp.topics, in_sink)
    from eosctl.cluster.offsets import committed_offsets  # lazy: see docs/imports.md

    done = committed_before(inp.sink)
    if done is not None:
        # A stage promised (committed) to have processed its input up to here; beyond is its lag. Read
        # by the freeze before the output, so an output committed meanwhile is never a false gap. Below it,
        # a gap is one the stage committed past: its cause says so (committed_offset).
        return [replace(i, expected_upto=done.get(i.tp, 0), committed_offset=done.get(i.tp))
                if i.topic in inp.topics else i for i in items]
    if stored is None and inp.group and inp.cluster is not None:
        # No offsets table (Kafka Connect's JDBC sink keeps its offsets in the group): nothing to compare
        # (no offset_mismatch), but a gap the group committed past was skipped, not lag.
        committed = committed_offsets(inp.cluster, inp.group)
        return [replace(i, committed_offset=committed.get(i.tp)) if i.topic in inp.topics else i
                for i in items]
    if stored is None:  # no group to compare with
        return items

    # stored is read only with a cluster (above): here there is one
    group_at = committed_offsets(inp.cluster, inp.group) if inp.group and inp.cluster is not None else None
    return with_offsets(items, {(s.topic, s.partition): s.next_offset for s in stored}, group_at,
                        set(inp.topics))


def with_offsets(items: list[WorkItem], stored: dict[TP, int], committed: dict[TP, int] | None,
                 topics: set[str]) -> list[WorkItem]:
    """Ship each partition of the audited topics its two offsets; a partition only the offsets name
    becomes an item too (Kafka doesn't have it, the sink has no rows for it), so its mismatch is still
    reported. Phantom topics (only the sink names them) aren't compared: the group never consumed them.
    ``committed`` None (no group: a Spark query's checkpoint is all it keeps): the stored offsets only
    explain gaps, there is nothing to compare them with."""
    if committed is None:
        return [replace(i, stored_offset=stored.get((i.topic, i.partition))) if i.topic in topics else i
                for i in items]
    out = [replace(i, check_offsets=True, stored_offset=stored.get((i.topic, i.partition)),
                   committed_offset=committed.get((i.topic, i.partition))) if i.topic in topics else i
           for i in items]
    known = {(i.topic, i.partition) for i in items}
    for t, p in sorted((set(stored) | set(committed)) - known):
        if t in topics:
            out.append(WorkItem(t, p, False, True, stored.get((t, p)), committed.get((t, p))))
    return out
