"""The audit job: tasks over groups of Kafka partitions, one grouping by business key.

Everything except key duplicates is local to one (topic, partition); a task audits a group of partitions
(auditors.grouping: by leader, sized by records) with one Kafka connection and one sink reader: it scans
its partitions' logs together (raw multi-partition Fetch, batch headers only; leaders and offsets come
with the plan, asked once by the driver), reads the group's slice of the sink as offset islands,
reconciles each partition by range arithmetic (eosctl.reconcile) and yields findings as Arrow. Key
duplicates are the one cross-partition question: the same task also reads the keys of its partitions'
committed rows and yields them; the driver groups them by key.

Two engines run the very same task function (`group_task`) and key rule (`_key_findings`): Spark
(mapInArrow over a range of task indexes, the same on local[*], a cluster and Spark Connect; the grouping
by key is a shuffle of the same job) and `auditors.local` (a process pool on this machine).
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from itertools import groupby
from typing import TYPE_CHECKING, Any, Protocol

from eosctl.config import Cluster, Sink
from eosctl.errors import BrokerError, EosctlError, SinkError
from eosctl.findings import KINDS, Finding, LogSegment, PartitionSummary
from eosctl.heap import paused
from eosctl.model import TP, PartitionLog
from eosctl.progress import Progress, Step, silent

if TYPE_CHECKING:
    from eosctl.sink import SinkReader

# Task output: one row per summary, finding, error, task (its timings) or (with a key column) committed
# row with a key.
OUT_SCHEMA = (
    "rec string, topic string, partition int, kind string, first_offset long, last_offset long, count long, "
    "log_start_offset long, last_stable_offset long, high_watermark long, expected_records long, "
    "sink_rows long, unverifiable long, present boolean, detail string, "
    # Time the task spent scanning the log and reading + reconciling the sink (task rows only).
    "scan_seconds double, reconcile_seconds double, "
    "key string, "  # key rows (rec = "key"): a committed row's business key, its offset in first_offset
    # key rows: who wrote the offset (eosctl.causes.Writer); marker_offset null when non-transactional
    "producer_id long, producer_epoch int, marker_offset long, "
    "cause string, "  # finding rows: the finding's cause, as its JSON object (eosctl.findings.Cause)
    # finding rows: what the driver reads of every cause without decoding it (eosctl.causejson.EAGER)
    "cause_passed_by string, cause_sink_after long, cause_rule string"
)
_WRITER_TYPES = (("producer_id", "int64"), ("producer_epoch", "int32"), ("marker_offset", "int64"))
_OUT_NAMES = [part.strip().split(" ")[0] for part in OUT_SCHEMA.split(",")]
# A task scans its partitions in rounds of at most this many records (as the driver's offsets count them)
# and partitions: brokers that ignore fetch size limits (noida-db) answer a multi-partition Fetch with
# everything up to the high watermark, so a round's answer stays bounded by what it asks for.
SCAN_RECORDS = 50_000
SCAN_PARTITIONS = 2_000
# A partition with this many sink rows is read from the sink by a query of its own (_group_islands);
# where such a query passes over the whole sink, only if it holds 1/OWN_QUERY_SHARE of the group's rows.
OWN_QUERY_ROWS = 100_000
OWN_QUERY_SHARE = 4


# ---- what the tasks read -------------------------------------------------------------------------


@dataclass(frozen=True)
class Placement:
    """What the driver learnt of one partition, asked once for all of them and shipped with the plan: its
    leader and its offsets (log start, high watermark, last stable offset)."""

    leader: int
    log_start: int
    high_watermark: int
    last_stable: int
    # eosctl.wire.Offsets' cross-check of ListOffsets with Fetch: what the broker contradicted, if anything
    disagreement: str | None = None
    listed: tuple[int, int, int] | None = None


class Source(Protocol):
    """Where the driver learns the partitions and a task gets their log models. Must pickle: it is shipped
    to executors."""

    def survey(self, topics: Iterable[str]) -> dict[str, dict[int, Placement]]:
        """Every partition of ``topics`` with its leader and offsets (the driver, once)."""
        ...

    def existing_topics(self) -> dict[str, list[int]]: ...

    def scan(self, parts: Sequence[tuple[TP, Placement]]) -> dict[TP, PartitionLog]:
        """The log models of one task's partitions, from the offsets the driver read (one connection)."""
        ...


@dataclass(frozen=True)
class KafkaSource:
    """Scan the log on the executor with eosctl.logscan (raw Fetch; contiguous batches not decompressed)."""

    cluster: Cluster

    def survey(self, topics: Iterable[str]) -> dict[str, dict[int, Placement]]:
        from eosctl.wire import WireClient

        with WireClient(self.cluster) as client:
            leaders = client.metadata(list(topics))
            offsets = client.offsets([(t, p) for t, ps in leaders.items() for p in sorted(ps)])
        return {t: {p: _placement(leaders[t][p], offsets[(t, p)]) for p in sorted(leaders[t])}
                for t in leaders}

    def existing_topics(self) -> dict[str, list[int]]:
        from eosctl.wire import WireClient

        with WireClient(self.cluster) as client:
            return {t: sorted(leaders) for t, leaders in client.metadata().items()}

    def scan(self, parts: Sequence[tuple[TP, Placement]]) -> dict[TP, PartitionLog]:
        from eosctl.logscan import scan_partitions
        from eosctl.wire import Offsets, WireClient

        out: dict[TP, PartitionLog] = {}
        with WireClient(self.cluster) as client:
            client.know_leaders({tp: pl.leader for tp, pl in parts})
            for chunk in _scan_rounds(parts):
                snapshot = {tp: Offsets(pl.log_start, pl.high_watermark, pl.last_stable, pl.disagreement,
                                        pl.listed) for tp, pl in chunk}
                out.update(scan_partitions(client, [tp for tp, _ in chunk], offsets=snapshot))
            # The causes tell a timeout from a take-over by the id's transaction.timeout.ms, and settle
            # transactions-v2 pairs from the task's other partitions of the id.
            from eosctl.producerids import identify, settle

            settle(out.values())
            identify(client, out.values())
        return out


def _placement(leader: int, o: Any) -> Placement:
    """A partition's Placement from its leader and its eosctl.wire.Offsets."""
    return Placement(leader, o.log_start, o.high_watermark, o.last_stable, o.disagreement, o.listed)


def _scan_rounds(parts: Sequence[tuple[TP, Placement]]) -> Iterator[list[tuple[TP, Placement]]]:
    """The parts in runs of at most SCAN_RECORDS records and SCAN_PARTITIONS partitions (a bigger partition
    is a run of its own)."""
    run: list[tuple[TP, Placement]] = []
    records = 0
    for tp, pl in parts:
        size = max(0, pl.high_watermark - pl.log_start)
        if run and (records + size > SCAN_RECORDS or len(run) >= SCAN_PARTITIONS):
            yield run
            run, records = [], 0
        run.append((tp, pl))
        records += size
    if run:
        yield run


@dataclass(frozen=True)
class ModelSource:
    """Log models given up front (tests, benchmarks, replays of a saved scan): {(topic, partition): log}."""

    logs: dict[TP, PartitionLog]

    def survey(self, topics: Iterable[str]) -> dict[str, dict[int, Placement]]:
        wanted = set(topics)
        out: dict[str, dict[int, Placement]] = {}
        for (topic, partition), log in sorted(self.logs.items()):
            if topic in wanted:
                out.setdefault(topic, {})[partition] = Placement(0, log.log_start_offset, log.high_watermark,
                                                                 log.last_stable_offset)
        missing = wanted - set(out)
        if missing:
            raise BrokerError(f"topic {sorted(missing)[0]!r} is not in the source model")
        return out

    def existing_topics(self) -> dict[str, list[int]]:
        return {t: sorted(ps) for t, ps in self.survey({t for t, _ in self.logs}).items()}

    def scan(self, parts: Sequence[tuple[TP, Placement]]) -> dict[TP, PartitionLog]:
        return {tp: self.logs[tp] for tp, _ in parts}


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

    @property
    def tp(self) -> TP:
        return self.topic, self.partition


# ---- inside a task -------------------------------------------------------------------------------


def _open_sink(sink: Sink, settings: TaskSettings, items: Sequence[WorkItem] = ()) -> SinkReader:
    """The task's reader; ``items``: its partitions, the only ones it asks about (none: any)."""
    from eosctl.sink import Limits, open_reader

    return open_reader(sink, limits=Limits(settings.duckdb_threads, settings.duckdb_memory,
                                           settings.temp_directory), partitions=[i.tp for i in items] or None)


@dataclass
class GroupResult:
    """What a task found for its group: output rows (summaries, its timings), its findings and, per
    partition with committed data, its committed ranges by writer (first_offset, last_offset, producer_id,
    producer_epoch, marker_offset), whose keys the key rule reads."""

    rows: list[dict[str, Any]]
    committed: dict[TP, list[dict[str, Any]]]
    findings: list[Finding] = field(default_factory=list)


def audit_group(items: Sequence[WorkItem], source: Source, reader: SinkReader, want_ranges: bool,
                group: str | None) -> GroupResult:
    """Audit a group of partitions: one scan of their logs (one connection), then each partition
    reconciled as its islands stream out of ``reader``, the task's one sink reader."""
    from eosctl.causes import explain_partition
    from eosctl.gapmap import log_segments
    from eosctl.ledger import clipped
    from eosctl.reconcile import SinkFacts, offset_mismatch, reconcile_partition, reconcile_unknown

    t0 = time.perf_counter()
    logs = source.scan([(i.tp, i.placement) for i in items if i.in_kafka and i.placement is not None])
    for tp, log in logs.items():
        if log.offsets_disagreement:
            # Never a verdict on offsets the broker itself contradicts: the audit refuses, naming it.
            raise BrokerError(f"cannot audit {tp[0]}-{tp[1]}: {log.offsets_disagreement}")
    t1 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    found: list[Finding] = []
    committed: dict[TP, list[dict[str, Any]]] = {}
    done: list[tuple[WorkItem, PartitionSummary, list[Finding]]] = []
    for item, islands in _group_islands(reader, items):
        log = logs.get(item.tp)
        facts = SinkFacts()
        if log is None:
            summary, findings = reconcile_unknown(item.topic, item.partition, islands)
        else:
            side = log if item.expected_upto is None else clipped(log, item.expected_upto)
            summary, findings = reconcile_partition(side, islands, facts)
            summary = replace(summary, log_segments=log_segments(log))  # for the HTML gap map
            if want_ranges:
                committed[item.tp] = _committed_rows(item, log)
        if item.check_offsets:
            mismatch = offset_mismatch(item.topic, item.partition, item.stored_offset, item.committed_offset,
                                       log, group)
            findings = [*findings, *([mismatch] if mismatch else [])]
        findings = explain_partition(log, findings, facts, item.stored_offset, item.committed_offset, group)
        done.append((item, summary, findings))
    # Once the islands' stream is drained: a DuckDB connection runs one query at a time.
    for item, summary, findings in done:
        rows.append(_summary_row(summary))
        found.extend(_with_write_order(reader, item, findings))
    rows.append({"rec": "task", "scan_seconds": t1 - t0, "reconcile_seconds": time.perf_counter() - t1})
    return GroupResult(rows, {tp: c for tp, c in committed.items() if c}, found)


def _with_write_order(reader: SinkReader, item: WorkItem, findings: list[Finding]) -> list[Finding]:
    """Duplicates with when the sink wrote them first and again (sink.order_column): one query for the
    partition's duplicates, and none where it has no duplicate or the sink no order column."""
    from eosctl.causes import with_write_order

    column = reader.sink.order_column
    ranges = [(f.first_offset, f.last_offset) for f in findings if f.kind == "duplicate"
              and f.first_offset is not None and f.last_offset is not None]
    if not column or not ranges:
        return findings
    order = reader.write_order(item.topic, item.partition, ranges)
    return [with_write_order(f, column, order[f.first_offset]) if f.kind == "duplicate"
            and f.first_offset in order else f for f in findings]


def _group_islands(reader: SinkReader, items: Sequence[WorkItem]) -> Iterator[tuple[WorkItem, Any]]:
    """Each item with its partition's islands: one query for all of the group's partitions, except that a
    partition of OWN_QUERY_ROWS sink rows or more gets a query of its own (sorting by offset alone beats
    a window over many partitions, ~1.6x, and its own query's fixed cost is nothing next to its rows).
    The islands stream out of the sink straight into the sweep: never a list of a partition's offsets.

    Where a query of one partition passes over the whole sink (reader.scans_all_per_partition: PostgreSQL
    without an index), only a partition of a large share of the group's rows gets its own: 10M rows in 4
    partitions, two own queries a task beat one sort of the task's 5M rows (4.5 vs 6.7 s), but 50
    partitions a task would be 100 passes over the table instead of one."""
    total = sum(i.sink_rows for i in items)
    own = {i.tp for i in items if i.sink_rows >= OWN_QUERY_ROWS and (
        not reader.scans_all_per_partition or i.sink_rows * OWN_QUERY_SHARE >= total)}
    for item in items:
        if item.tp in own:
            yield item, reader.islands(item.topic, item.partition)
    todo = {i.tp: i for i in items if i.tp not in own}
    for tp, islands in groupby(reader.islands_in(list(todo)), key=lambda isl: (isl.topic, isl.partition)):
        yield todo.pop(tp), islands
    for item in todo.values():  # no rows in the sink
        yield item, iter(())


def _committed_rows(item: WorkItem, log: PartitionLog) -> list[dict[str, Any]]:
    """The committed offsets [log start, LSO) by writer, for the key query: each key row then carries
    who wrote it, and a key_duplicate's cause can name them."""
    from eosctl.causes import committed_writers

    return [{"rec": "committed", "topic": item.topic, "partition": item.partition, "first_offset": first,
             "last_offset": last, "producer_id": pid, "producer_epoch": epoch, "marker_offset": marker}
            for first, last, pid, epoch, marker in committed_writers(log)]


def _summary_row(s: PartitionSummary) -> dict[str, Any]:
    return {"rec": "summary", "topic": s.topic, "partition": s.partition,
            "log_start_offset": s.log_start_offset, "last_stable_offset": s.last_stable_offset,
            "high_watermark": s.high_watermark, "expected_records": s.expected_records,
            "sink_rows": s.sink_rows, "unverifiable": s.unverifiable_below, "present": s.exists,
            # The summary row's otherwise unused detail column carries the gap map's log segments.
            "detail": None if s.log_segments is None else json.dumps([g.to_dict() for g in s.log_segments])}


def _to_batch(rows: list[dict[str, Any]], names: list[str], schema: Any) -> Any:
    import pyarrow as pa

    return pa.RecordBatch.from_pylist([{n: r.get(n) for n in names} for r in rows], schema=schema)


def _finding_batch(findings: Sequence[Finding], schema: Any) -> Any:
    """The findings as rows of the task output, built column by column (auditors.findingrows)."""
    import pyarrow as pa

    from auditors.findingrows import finding_columns

    cols = finding_columns(findings)
    n = len(findings)
    return pa.RecordBatch.from_arrays([pa.array(cols[f.name], f.type) if f.name in cols
                                       else pa.nulls(n, f.type) for f in schema], schema=schema)


def _out_arrow_schema() -> Any:
    import pyarrow as pa

    types = {"string": pa.string(), "int": pa.int32(), "long": pa.int64(), "boolean": pa.bool_(),
             "double": pa.float64()}
    return pa.schema([(part.split()[0], types[part.split()[1]]) for part in OUT_SCHEMA.split(", ")])


def group_task(tasks: Sequence[Sequence[WorkItem]], source: Source, sink: Sink, settings: TaskSettings,
               want_keys: bool, group: str | None = None) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The task function of both engines: input batches carry task indexes (spark.range ids), each the
    index of a group of work items in ``tasks``.

    Per group: the summary and finding rows of its partitions and a row with its timings, then (with
    want_keys) the keys of its partitions' committed rows, read in the same task so that key duplicates
    cost no second pass over the partitions."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        schema = _out_arrow_schema()
        for batch in batches:
            for index in batch.column(0).to_pylist():
                items = tasks[index]
                try:
                    with _open_sink(sink, settings, items) as reader:
                        with paused():  # findings by the hundred thousand, no cycles among them
                            result = audit_group(items, source, reader, want_keys, group)
                            out = [_to_batch(result.rows, _OUT_NAMES, schema)]
                            if result.findings:
                                out.append(_finding_batch(result.findings, schema))
                        yield from out
                        if result.committed:
                            yield from _key_rows(reader, result.committed, schema)
                except EosctlError as e:
                    # One line travels back to the driver, which raises it: no executor traceback for
                    # an unreachable broker or a locked sink.
                    rows = [{"rec": "error", "topic": items[0].topic, "partition": items[0].partition,
                             "kind": type(e).__name__, "detail": str(e)}]
                    yield _to_batch(rows, _OUT_NAMES, schema)

    return run


def _key_rows(reader: SinkReader, committed: dict[TP, list[dict[str, Any]]], schema: Any) -> Iterator[Any]:
    """Key rows in the task's output schema: rec "key", the key, its offset in first_offset, its writer."""
    import numpy as np
    import pyarrow as pa

    # The sink answers (key, topic, partition, offset) for offsets inside the committed ranges; each
    # row's writer is the range's it falls in (sorted, disjoint per partition): found by binary search.
    starts = {tp: np.array([c["first_offset"] for c in cs], dtype=np.int64) for tp, cs in committed.items()}
    writers = {tp: {name: pa.array([c[name] for c in cs], getattr(pa, t)()) for name, t in _WRITER_TYPES}
               for tp, cs in committed.items()}
    spans = {tp: [(c["first_offset"], c["last_offset"]) for c in cs] for tp, cs in committed.items()}
    for b in reader.committed_keys_in(spans):
        for tp, part in _by_partition(b):
            at = pa.array(np.searchsorted(starts[tp], part.column(3).to_numpy(), side="right") - 1)
            n = part.num_rows
            cols = {"rec": pa.array(["key"] * n, pa.string()), "topic": pa.array([tp[0]] * n, pa.string()),
                    "partition": pa.array([tp[1]] * n, pa.int32()),
                    "first_offset": part.column(3).cast(pa.int64()), "key": part.column(0).cast(pa.string()),
                    **{name: writers[tp][name].take(at) for name, _ in _WRITER_TYPES}}
            yield pa.RecordBatch.from_arrays([cols[f.name] if f.name in cols else pa.nulls(n, f.type)
                                              for f in schema], schema=schema)


def _by_partition(batch: Any) -> Iterator[tuple[TP, Any]]:
    """The rows of a (key, topic, partition, offset) batch per partition."""
    import pyarrow as pa

    at: dict[TP, list[int]] = {}
    for i, tp in enumerate(zip(batch.column(1).to_pylist(), batch.column(2).to_pylist(), strict=True)):
        at.setdefault(tp, []).append(i)
    for tp, rows in at.items():
        yield tp, batch.take(pa.array(rows, pa.int64()))


# ---- the driver ----------------------------------------------------------------------------------


@dataclass
class AuditInput:
    source: Source
    sink: Sink
    topics: tuple[str, ...]
    cluster: Cluster | None = None  # for the group's committed offsets (offset_mismatch)
    group: str | None = None
    fail_on: tuple[str, ...] = KINDS
    settings: TaskSettings = field(default_factory=TaskSettings)


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


def prepare(inp: AuditInput, reader: SinkReader | None = None) -> list[WorkItem]:
    """Open and validate the sink, read Kafka metadata and every partition's offsets (once, for all tasks),
    list the work: fails fast, before Spark starts.

    With a group, each item also carries the sink's stored offset and the group's committed one (both
    cheap to read here); the task, which has the log model, judges them. ``inp.sink`` is the one the
    command froze (eosctl.sink.frozen, in auditors.engine.run): the tasks read the same read point.
    ``reader``: the driver's reader of it, if it has one open (a lakehouse table is loaded once).
    """
    from contextlib import nullcontext

    from eosctl.sink import open_reader

    with open_reader(inp.sink) if reader is None else nullcontext(reader) as reader:
        in_sink = reader.partitions()
        stored = reader.stored_offsets() if inp.group and inp.cluster is not None else None
    items = plan(inp.source, inp.topics, in_sink)
    from eosctl.offsets import committed_offsets
    from eosctl.sink.kafka_topic import committed_before

    done = committed_before(inp.sink)
    if done is not None:
        # A stage promised (committed) to have processed its input up to here; beyond is its lag. Read
        # by the freeze before the output, so an output committed meanwhile is never a false gap.
        return [replace(i, expected_upto=done.get((i.topic, i.partition), 0)) if i.topic in inp.topics else i
                for i in items]
    if stored is None:  # no group to compare with, or the sink stores no offsets
        return items

    return with_offsets(items, {(s.topic, s.partition): s.next_offset for s in stored},
                        committed_offsets(inp.cluster, inp.group), set(inp.topics))


def with_offsets(items: list[WorkItem], stored: dict[TP, int], committed: dict[TP, int],
                 topics: set[str]) -> list[WorkItem]:
    """Ship each partition of the audited topics its two offsets; a partition only the offsets name
    becomes an item too (Kafka doesn't have it, the sink has no rows for it), so its mismatch is still
    reported. Phantom topics (only the sink names them) aren't compared: the group never consumed them."""
    out = [replace(i, check_offsets=True, stored_offset=stored.get((i.topic, i.partition)),
                   committed_offset=committed.get((i.topic, i.partition))) if i.topic in topics else i
           for i in items]
    known = {(i.topic, i.partition) for i in items}
    for t, p in sorted((set(stored) | set(committed)) - known):
        if t in topics:
            out.append(WorkItem(t, p, False, True, stored.get((t, p)), committed.get((t, p))))
    return out


@dataclass
class Outcome:
    """What an engine found; the entry point (auditors.engine) turns it into the report."""

    summaries: list[PartitionSummary]
    findings: list[Finding]
    timings: dict[str, float]  # partitions_seconds, keys_seconds, scan_seconds, reconcile_seconds
    tasks: int = 0  # the tasks the engine ran (groups of partitions)


def outcome(rows: Iterable[dict[str, Any]], key_findings: list[Finding], partitions_seconds: float,
            keys_seconds: float, tasks: int = 0, found: Sequence[Finding] = ()) -> Outcome:
    """Task output rows (no key rows) and the key rule's findings, from either engine; ``found``: the
    tasks' findings where the engine made them from the rows already (auditors.findingrows)."""
    from auditors.findingrows import findings_from_rows

    rows = list(rows)
    _raise_task_errors(r for r in rows if r["rec"] == "error")
    summaries = [r for r in rows if r["rec"] == "summary"]
    findings = [*found, *findings_from_rows(r for r in rows if r["rec"] == "finding")]
    spent = [r for r in rows if r["rec"] == "task"]
    # Summed over tasks: with several tasks at once they can exceed the phase's wall time.
    timings = {"partitions_seconds": round(partitions_seconds, 3), "keys_seconds": round(keys_seconds, 3),
               "scan_seconds": round(sum(r["scan_seconds"] or 0.0 for r in spent), 3),
               "reconcile_seconds": round(sum(r["reconcile_seconds"] or 0.0 for r in spent), 3)}
    return Outcome([_summary_from(r) for r in summaries], findings + key_findings, timings, tasks)


def run_spark(spark: Any, inp: AuditInput, items: list[WorkItem], progress: Progress = silent) -> Outcome:
    """The Spark engine: one job. Its first stage runs the tasks, as many as the executors have cores
    (auditors.grouping); with a key column, a shuffle of the same job groups the key rows by key (task
    rows pass through it, each in a group of its own)."""
    from pyspark.sql import functions as F

    from auditors.grouping import tasks as group_items

    want_keys = inp.sink.key_column is not None
    tasks = group_items(items, spark_slots(spark))
    progress(Step(PHASE_TASKS, 0, len(tasks)))
    func = group_task(tasks, inp.source, inp.sink, inp.settings, want_keys, inp.group)
    frame = spark.range(0, len(tasks), 1, max(len(tasks), 1)).mapInArrow(func, OUT_SCHEMA)
    if want_keys:
        is_key = F.col("rec") == "key"
        at = F.when(is_key, F.struct(F.col("topic"), F.col("partition"),
                                     F.col("first_offset").alias("offset"),
                                     *(F.col(name) for name, _ in _WRITER_TYPES)))
        group = F.when(is_key, F.col("key")).otherwise(F.monotonically_increasing_id().cast("string"))
        # Key rows are distinct per (key, topic, partition, offset) already (each task selects DISTINCT,
        # and an offset belongs to one task), so the set's size is the number of distinct places.
        frame = (frame.select("*", is_key.alias("is_key"), group.alias("g"), at.alias("at"))
                 .groupBy("is_key", "g")
                 .agg(F.first(F.struct(*_OUT_NAMES)).alias("row"),
                      F.sort_array(F.collect_set("at")).alias("at"))
                 .where(~F.col("is_key") | (F.size("at") > 1)))
    with _TaskProgress(spark, len(tasks), want_keys, progress) as phases:
        table = _collect(frame)
    with paused():  # a row and a finding each for 100k findings, no cycles among them (eosctl.heap)
        rows = table.to_pylist()
        if not want_keys:
            return outcome(rows, [], phases.tasks_seconds, 0.0, len(tasks))
        keys = [f for r in rows if r["is_key"] for f in _key_findings(r["g"], r["at"])]
        return outcome((r["row"] for r in rows if not r["is_key"]), keys, phases.tasks_seconds,
                       phases.keys_seconds, len(tasks))


def spark_slots(spark: Any) -> int:
    """How many tasks the session runs at once: its executors' cores (defaultParallelism, which
    auditors.spark leaves at Spark's default); Spark Connect has no SparkContext: the server's
    spark.default.parallelism, else a small cluster's guess."""
    try:
        return max(1, int(spark.sparkContext.defaultParallelism))
    except Exception:
        try:
            return max(1, int(spark.conf.get("spark.default.parallelism")))
        except Exception:
            return 8


PHASE_TASKS = "auditing partitions"
PHASE_KEYS = "key duplicates (grouping by key)"


def key_findings(keys: Any) -> list[Finding]:
    """The local engine's grouping of key rows (an Arrow table: key, topic, partition, first_offset),
    with DuckDB: the same rule as the Spark shuffle, a key at more than one committed place."""
    import duckdb

    with duckdb.connect() as con:
        con.execute("SET preserve_insertion_order = false")
        con.register("keys", keys)
        groups = con.execute("""
            SELECT key, list(struct_pack("topic" := topic, "partition" := "partition",
                                         "offset" := first_offset, "producer_id" := producer_id,
                                         "producer_epoch" := producer_epoch,
                                         "marker_offset" := marker_offset))
            FROM keys GROUP BY key
            HAVING count(DISTINCT (topic, "partition", first_offset)) > 1""").fetchall()
    return [f for key, at in groups for f in _key_findings(key, at)]


def _key_findings(key: str, at: list[Any]) -> list[Finding]:
    """One finding per key: the topic/partition of its first place, first/last = min/max offset,
    count = distinct committed source records carrying the key, offsets = their offsets; its cause from
    the places' writers."""
    from eosctl.causes import Writer, key_cause

    dicts = [x if isinstance(x, dict) else x.asDict() for x in at]
    writers = sorted((Writer(a["topic"], a["partition"], a["offset"], a["producer_id"], a["producer_epoch"],
                             a["marker_offset"]) for a in dicts),
                     key=lambda w: (w.topic, w.partition, w.offset))
    offsets = tuple(w.offset for w in writers)
    topic, partition = writers[0].topic, writers[0].partition
    detail = None
    if len({(w.topic, w.partition) for w in writers}) > 1:
        detail = "in " + ", ".join(f"{w.topic}[{w.partition}]@{w.offset}" for w in writers)
    f = Finding("key_duplicate", topic, partition, min(offsets), max(offsets), len(writers), key=key,
                offsets=offsets, detail=detail)
    return [replace(f, cause=key_cause(f, writers))]


# ---- helpers -------------------------------------------------------------------------------------


def _collect(frame: Any) -> Any:
    """The job's output as an Arrow table (running the job)."""
    try:
        return frame.toArrow()
    except EosctlError:
        raise
    except Exception as e:
        raise EosctlError(f"the Spark job failed: {_spark_error(e)}") from None


def _spark_error(e: BaseException) -> str:
    """The useful line of a Spark/Py4J error: the Python exception raised in the task, if any."""
    text = str(e)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if ln.split(":", 1)[0].endswith(("Error", "Exception")) and "Traceback" not in ln:
            return ln
    return lines[0] if lines else type(e).__name__


def _raise_task_errors(errors: Iterable[dict[str, Any]]) -> None:
    for r in errors:
        cls = {"SinkError": SinkError, "BrokerError": BrokerError}.get(r.get("kind") or "", EosctlError)
        raise cls(r["detail"])


def _summary_from(r: dict[str, Any]) -> PartitionSummary:
    detail = r.get("detail")
    segments = None if detail is None else tuple(LogSegment.from_dict(g) for g in json.loads(detail))
    return PartitionSummary(r["topic"], r["partition"], r["log_start_offset"], r["last_stable_offset"],
                            r["high_watermark"], r["expected_records"], r["sink_rows"], r["unverifiable"],
                            r["present"], segments)


class _TaskProgress:
    """Report finished tasks of the running job from Spark's status tracker (absent on Spark Connect),
    and time its two phases: the tasks' stage, then (with keys) the shuffle stage that groups keys."""

    def __init__(self, spark: Any, total: int, want_keys: bool, say: Progress) -> None:
        self.total, self.want_keys, self.say = total, want_keys, say
        try:
            self.tracker = spark.sparkContext.statusTracker()
        except Exception:
            self.tracker = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.t0 = time.monotonic()
        self.keys_from: float | None = None  # when the tasks' stage ended, if seen
        self.tasks_seconds = self.keys_seconds = 0.0

    def __enter__(self) -> _TaskProgress:
        if self.tracker is not None:
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(timeout=1)
        end = time.monotonic()
        split = self.keys_from or end
        self.tasks_seconds, self.keys_seconds = split - self.t0, end - split
        if exc[0] is None:
            self.say(Step(PHASE_KEYS if self.want_keys else PHASE_TASKS, self.total, self.total))

    def _poll(self) -> None:
        first: int | None = None  # the tasks' stage: the job's first
        while not self.stop.wait(0.25):
            try:
                active = sorted(self.tracker.getActiveStageIds())
                if first is None and active:
                    first = active[0]
                if first is not None and self.want_keys and self.keys_from is None and \
                        all(sid > first for sid in active) and active:
                    self.keys_from = time.monotonic()
                    self.say(Step(PHASE_KEYS, 0, None))
                if self.keys_from is None and first is not None:
                    info = self.tracker.getStageInfo(first)
                    if info is not None:
                        self.say(Step(PHASE_TASKS, min(info.numCompletedTasks, self.total), self.total))
            except Exception:
                return


__all__ = ["AuditInput", "KafkaSource", "ModelSource", "Outcome", "Placement", "TaskSettings", "WorkItem",
           "audit_group", "group_task", "key_findings", "plan", "prepare", "run_spark", "with_offsets"]
