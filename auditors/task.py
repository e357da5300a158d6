"""The task both engines run: a group of partitions audited with one Kafka connection and one sink reader.

A task scans its partitions' logs together (auditors.sources), reads the group's slice of the sink as offset
islands, runs the audit rule (eosctl.rules.rule) on each partition and yields its summaries and findings as
Arrow rows of ``OUT_SCHEMA``; with a key column, also the keys of its partitions' committed rows, which
the engine groups by key (Spark's shuffle, or DuckDB in the local engine)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from typing import TYPE_CHECKING, Any

from auditors import fieldcheck
from auditors.contentcheck import with_content
from auditors.findingrows import finding_columns
from auditors.keydups import with_writers, writers_table
from auditors.plan import TaskSettings, WorkItem
from auditors.sources import Source
from eosctl.base.errors import BrokerError, EosctlError
from eosctl.base.gcpause import paused
from eosctl.cluster.model import TP, PartitionLog
from eosctl.config.model import Sink, value_mode
from eosctl.report.findings import Finding, PartitionSummary
from eosctl.rules.causes import with_write_order
from eosctl.rules.rule import audit_partition, committed_ranges
from eosctl.sink import Limits, open_reader

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
    # key rows: who wrote the offset (eosctl.rules.causes.Writer); marker_offset null when non-transactional
    "producer_id long, producer_epoch int, marker_offset long, "
    "cause string, "  # finding rows: the finding's cause, as its JSON object (eosctl.report.findings.Cause)
    # finding rows: what the driver reads of every cause without decoding it (eosctl.report.causejson.EAGER)
    "cause_passed_by string, cause_sink_after long, cause_rule string, "
    # summary rows of a windowed audit: the partition's window and what lay outside it or expired
    "window_first long, window_end long, window_floor long, outside_window long, expired long, "
    "dead_lettered long, "  # summary rows of a sink with a DLQ: the records only the DLQ holds
    "filtered long"  # summary rows of a sink with a route: the committed records it leaves out
)
_WRITER_TYPES = (("producer_id", "int64"), ("producer_epoch", "int32"), ("marker_offset", "int64"))
_OUT_NAMES = [part.strip().split(" ")[0] for part in OUT_SCHEMA.split(",")]
# A partition with this many sink rows is read from the sink by a query of its own (_group_islands);
# where such a query passes over the whole sink, only if it holds 1/OWN_QUERY_SHARE of the group's rows.
OWN_QUERY_ROWS = 100_000
OWN_QUERY_SHARE = 4



# The two phases an engine reports progress in.
PHASE_TASKS = "auditing partitions"
PHASE_KEYS = "key duplicates (grouping by key)"


# ---- inside a task -------------------------------------------------------------------------------


def open_task_reader(sink: Sink, settings: TaskSettings, items: Sequence[WorkItem] = ()) -> SinkReader:
    """The task's reader; ``items``: its partitions, the only ones it asks about (none: any)."""
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
                group: str | None, content: bool = False) -> GroupResult:
    """Audit a group of partitions: one scan of their logs (one connection), then each partition
    reconciled as its islands stream out of ``reader``, the task's one sink reader. ``content``: also
    compare each sink row's key with its record's (auditors.contentcheck; the sink names a key column)."""
    t0 = time.perf_counter()
    parts = [(i.tp, i.placement) for i in items if i.in_kafka and i.placement is not None]
    # The decoded content check (issue 50) needs no key column: it compares the rows' typed columns.
    fields = content and fieldcheck.applies(reader, source)
    content = content and reader.sink.key_column is not None
    if content:
        logs = source.scan(parts, keys=value_mode(reader.sink) or True)
    else:
        logs = source.scan(parts)
    for tp, scanned in logs.items():
        if scanned.offsets_disagreement:
            # Never a verdict on offsets the broker itself contradicts: the audit refuses, naming it.
            raise BrokerError(f"cannot audit {tp[0]}-{tp[1]}: {scanned.offsets_disagreement}")
    t1 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    found: list[Finding] = []
    committed: dict[TP, list[dict[str, Any]]] = {}
    done: list[tuple[WorkItem, PartitionSummary, list[Finding]]] = []
    kept: dict[TP, list[tuple[int, int, int]]] = {}  # the content check's partitions' islands
    for item, islands in _group_islands(reader, items):
        log = logs.get(item.tp)
        if (content or fields) and log is not None:
            islands = kept[item.tp] = [(i.first, i.last, i.multiplicity) for i in islands]
        summary, findings = audit_partition(
            item.topic, item.partition, log, islands, expected_upto=item.expected_upto,
            check_offsets=item.check_offsets, stored_offset=item.stored_offset,
            committed_offset=item.committed_offset, group=group, window=item.window,
            dead_lettered=item.dead_lettered, dlq_topic=reader.sink.dlq_topic, routed_out=item.routed_out)
        if log is not None and want_ranges:
            committed[item.tp] = _committed_rows(item, log)
        done.append((item, summary, findings))
    # Once the islands' stream is drained: a DuckDB connection runs one query at a time.
    if content:
        # The keys of the partitions whose islands came in the group's query come in one query too.
        done = with_content(reader, done, logs, kept, group,
                            together={i.tp for i in items if i.sink_rows < OWN_QUERY_ROWS})
    if fields:
        done = fieldcheck.with_fields(reader, done, logs, source, kept, group)
    for item, summary, findings in done:
        rows.append(_summary_row(summary))
        found.extend(_with_write_order(reader, item, findings))
    rows.append({"rec": "task", "scan_seconds": t1 - t0, "reconcile_seconds": time.perf_counter() - t1})
    return GroupResult(rows, {tp: c for tp, c in committed.items() if c}, found)


def _with_write_order(reader: SinkReader, item: WorkItem, findings: list[Finding]) -> list[Finding]:
    """Duplicates with when the sink wrote them first and again (sink.order_column): one query for the
    partition's duplicates, and none where it has no duplicate or the sink no order column."""
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
    return [{"rec": "committed", "topic": item.topic, "partition": item.partition, "first_offset": first,
             "last_offset": last, "producer_id": pid, "producer_epoch": epoch, "marker_offset": marker}
            for first, last, pid, epoch, marker in committed_ranges(log)]


def _summary_row(s: PartitionSummary) -> dict[str, Any]:
    return {"rec": "summary", "topic": s.topic, "partition": s.partition,
            "log_start_offset": s.log_start_offset, "last_stable_offset": s.last_stable_offset,
            "high_watermark": s.high_watermark, "expected_records": s.expected_records,
            "sink_rows": s.sink_rows, "unverifiable": s.unverifiable_below, "present": s.exists,
            # The summary row's otherwise unused detail column carries the gap map's log segments.
            "detail": None if s.log_segments is None else json.dumps([g.to_dict() for g in s.log_segments]),
            **({} if s.window is None else {
                "window_first": s.window.first, "window_end": s.window.end, "window_floor": s.window.floor,
                "outside_window": s.outside_window, "expired": s.expired}),
            "dead_lettered": s.dead_lettered, "filtered": s.filtered}


def _to_batch(rows: list[dict[str, Any]], names: list[str], schema: Any) -> Any:
    import pyarrow as pa  # lazy: see docs/imports.md

    return pa.RecordBatch.from_pylist([{n: r.get(n) for n in names} for r in rows], schema=schema)


def _finding_batch(findings: Sequence[Finding], schema: Any) -> Any:
    """The findings as rows of the task output, built column by column (auditors.findingrows)."""
    import pyarrow as pa  # lazy: see docs/imports.md


    cols = finding_columns(findings)
    n = len(findings)
    return pa.RecordBatch.from_arrays([pa.array(cols[f.name], f.type) if f.name in cols
                                       else pa.nulls(n, f.type) for f in schema], schema=schema)


def _out_arrow_schema() -> Any:
    import pyarrow as pa  # lazy: see docs/imports.md

    types = {"string": pa.string(), "int": pa.int32(), "long": pa.int64(), "boolean": pa.bool_(),
             "double": pa.float64()}
    return pa.schema([(part.split()[0], types[part.split()[1]]) for part in OUT_SCHEMA.split(", ")])


def group_task(tasks: Sequence[Sequence[WorkItem]], source: Source, sink: Sink, settings: TaskSettings,
               want_keys: bool, group: str | None = None, content: bool = False,
               key_rows: bool = True) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The task function of both engines: input batches carry task indexes (spark.range ids), each the
    index of a group of work items in ``tasks``.

    Per group: the summary and finding rows of its partitions and a row with its timings, then (with
    want_keys) the keys of its partitions' committed rows, read in the same task so that key duplicates
    cost no second pass over the partitions (Spark's shuffle groups them); or, with ``key_rows`` False,
    only the committed ranges by writer (rec "committed"): the local engine's driver groups the sink's
    keys itself (auditors.keydups.in_sink)."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        schema = _out_arrow_schema()
        for batch in batches:
            for index in batch.column(0).to_pylist():
                items = tasks[index]
                try:
                    with open_task_reader(sink, settings, items) as reader:
                        with paused():  # findings by the hundred thousand, no cycles among them
                            result = audit_group(items, source, reader, want_keys, group, content)
                            out = [_to_batch(result.rows, _OUT_NAMES, schema)]
                            if result.findings:
                                out.append(_finding_batch(result.findings, schema))
                        yield from out
                        if result.committed and key_rows:
                            yield from _key_rows(reader, result.committed, schema)
                        elif result.committed:
                            ranges = [c for cs in result.committed.values() for c in cs]
                            yield _to_batch(ranges, _OUT_NAMES, schema)
                except EosctlError as e:
                    # One line travels back to the driver, which raises it: no executor traceback for
                    # an unreachable broker or a locked sink.
                    rows = [{"rec": "error", "topic": items[0].topic, "partition": items[0].partition,
                             "kind": type(e).__name__, "detail": str(e)}]
                    yield _to_batch(rows, _OUT_NAMES, schema)

    return run


def _key_rows(reader: SinkReader, committed: dict[TP, list[dict[str, Any]]], schema: Any) -> Iterator[Any]:
    """Key rows in the task's output schema: rec "key", the key, its offset in first_offset, its writer
    (the committed range's it falls in, auditors.keydups.with_writers: no per-row Python)."""
    import pyarrow as pa  # lazy: see docs/imports.md

    spans = {tp: [(c["first_offset"], c["last_offset"]) for c in cs] for tp, cs in committed.items()}
    writers = writers_table(c for cs in committed.values() for c in cs)
    for b in with_writers(reader.committed_keys_in(spans), writers):
        n = b.num_rows
        if not n:
            continue
        cols = {"rec": pa.repeat("key", n), "key": b.column(0), "topic": b.column(1),
                "partition": b.column(2), "first_offset": b.column(3), "producer_id": b.column(4),
                "producer_epoch": b.column(5), "marker_offset": b.column(6)}
        yield pa.RecordBatch.from_arrays([cols[f.name].cast(f.type) if f.name in cols else pa.nulls(n, f.type)
                                          for f in schema], schema=schema)
