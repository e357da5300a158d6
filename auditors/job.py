"""The audit job: one task per Kafka partition, one grouping by business key.

Everything except key duplicates is local to one (topic, partition), so that is the unit of
parallelism: each task scans its partition's log (raw Fetch, batch headers only), reads its slice of the
sink as offset islands, reconciles the two by range arithmetic (eosctl.reconcile) and yields findings as
Arrow. Key duplicates are the one cross-partition question: the same task also reads the keys of its
partition's committed rows and yields them; the driver groups them by key.

Two engines run the very same task function (`partition_task`) and key rule (`_key_findings`): Spark
(mapInArrow over a range of work-item indexes, the same on local[*], a cluster and Spark Connect; the
grouping by key is a shuffle of the same job) and `auditors.local` (a process pool on this machine).
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from eosctl.config import Cluster, Sink
from eosctl.errors import BrokerError, EosctlError, SinkError
from eosctl.findings import KINDS, Cause, Finding, LogSegment, PartitionSummary
from eosctl.model import TP, PartitionLog
from eosctl.progress import Progress, Step, silent

if TYPE_CHECKING:
    from eosctl.sink import SinkReader

# Task output: one row per summary, finding, error, or (with a key column) committed row with a key.
OUT_SCHEMA = (
    "rec string, topic string, partition int, kind string, first_offset long, last_offset long, count long, "
    "log_start_offset long, last_stable_offset long, high_watermark long, expected_records long, "
    "sink_rows long, unverifiable long, present boolean, detail string, "
    # Time the task spent scanning the log and reading + reconciling the sink (summary rows only).
    "scan_seconds double, reconcile_seconds double, "
    "key string, "  # key rows (rec = "key"): a committed row's business key, its offset in first_offset
    # key rows: who wrote the offset (eosctl.causes.Writer); marker_offset null when non-transactional
    "producer_id long, producer_epoch int, marker_offset long, "
    "cause string"  # finding rows: the finding's cause, as its JSON object (eosctl.findings.Cause)
)
_WRITER_TYPES = (("producer_id", "int64"), ("producer_epoch", "int32"), ("marker_offset", "int64"))
_OUT_NAMES = [part.strip().split(" ")[0] for part in OUT_SCHEMA.split(",")]


# ---- what the tasks read -------------------------------------------------------------------------


class Source(Protocol):
    """Where a task gets its partition's log model from. Must pickle: it is shipped to executors."""

    def partitions(self, topics: Iterable[str]) -> dict[str, list[int]]: ...

    def load(self, topic: str, partition: int) -> PartitionLog: ...


@dataclass(frozen=True)
class KafkaSource:
    """Scan the log on the executor with eosctl.logscan (raw Fetch; contiguous batches not decompressed)."""

    cluster: Cluster

    def partitions(self, topics: Iterable[str]) -> dict[str, list[int]]:
        from eosctl.wire import WireClient

        with WireClient(self.cluster) as client:
            return {t: sorted(leaders) for t, leaders in client.metadata(list(topics)).items()}

    def existing_topics(self) -> dict[str, list[int]]:
        from eosctl.wire import WireClient

        with WireClient(self.cluster) as client:
            return {t: sorted(leaders) for t, leaders in client.metadata().items()}

    def load(self, topic: str, partition: int) -> PartitionLog:
        from eosctl.logscan import scan_partition
        from eosctl.wire import WireClient

        with WireClient(self.cluster) as client:
            return scan_partition(client, topic, partition)


@dataclass(frozen=True)
class ModelSource:
    """Log models given up front (tests, benchmarks, replays of a saved scan): {(topic, partition): log}."""

    logs: dict[TP, PartitionLog]

    def partitions(self, topics: Iterable[str]) -> dict[str, list[int]]:
        wanted = set(topics)
        out: dict[str, list[int]] = {}
        for topic, partition in sorted(self.logs):
            if topic in wanted:
                out.setdefault(topic, []).append(partition)
        missing = wanted - set(out)
        if missing:
            raise BrokerError(f"topic {sorted(missing)[0]!r} is not in the source model")
        return out

    def existing_topics(self) -> dict[str, list[int]]:
        return self.partitions({t for t, _ in self.logs})

    def load(self, topic: str, partition: int) -> PartitionLog:
        return self.logs[(topic, partition)]


@dataclass(frozen=True)
class TaskSettings:
    """DuckDB inside a Python worker is outside Spark's memory accounting: cap it explicitly."""

    duckdb_threads: int = 1
    duckdb_memory: str = "1GB"
    temp_directory: str = field(default_factory=lambda: os.path.join(tempfile.gettempdir(), "eosctl-duckdb"))


@dataclass(frozen=True)
class WorkItem:
    topic: str
    partition: int
    in_kafka: bool  # False: only the sink names it (a phantom partition or topic)
    # offset_mismatch needs the log model, which only the task has: the driver ships both sides here.
    check_offsets: bool = False
    stored_offset: int | None = None  # the sink's offsets table
    committed_offset: int | None = None  # the group's commit in Kafka
    # A Kafka-to-Kafka hop: the stage's committed offset; input beyond it is the stage's lag, not missing.
    expected_upto: int | None = None


# ---- inside a task -------------------------------------------------------------------------------


def _open_sink(sink: Sink, settings: TaskSettings) -> SinkReader:
    from eosctl.sink import Limits, open_reader

    return open_reader(sink, limits=Limits(settings.duckdb_threads, settings.duckdb_memory,
                                           settings.temp_directory))


def _audit_partition(item: WorkItem, source: Source, sink: Sink, settings: TaskSettings,
                     want_ranges: bool, group: str | None) -> list[dict[str, Any]]:
    from eosctl.causes import explain_partition
    from eosctl.gapmap import log_segments
    from eosctl.reconcile import SinkFacts, offset_mismatch, reconcile_partition, reconcile_unknown

    t0 = time.perf_counter()
    log = source.load(item.topic, item.partition) if item.in_kafka else None
    if log is not None and log.offsets_disagreement:
        # Never a verdict on offsets the broker itself contradicts: the audit refuses, naming it.
        raise BrokerError(f"cannot audit {item.topic}-{item.partition}: {log.offsets_disagreement}")
    t1 = time.perf_counter()
    # The islands stream out of DuckDB straight into the sweep: never a list of the partition's offsets.
    facts = SinkFacts()
    with _open_sink(sink, settings) as reader:
        isl = reader.islands(item.topic, item.partition)
        if log is None:
            summary, findings = reconcile_unknown(item.topic, item.partition, isl)
        else:
            from eosctl.ledger import clipped

            side = log if item.expected_upto is None else clipped(log, item.expected_upto)
            summary, findings = reconcile_partition(side, isl, facts)
            summary = replace(summary, log_segments=log_segments(log))  # for the HTML gap map
    if item.check_offsets:
        mismatch = offset_mismatch(item.topic, item.partition, item.stored_offset, item.committed_offset,
                                   log, group)
        findings = [*findings, *([mismatch] if mismatch else [])]
    findings = explain_partition(log, findings, facts, item.stored_offset, item.committed_offset, group)
    rows = [_summary_row(summary), *(_finding_row(f) for f in findings)]
    rows[0].update(scan_seconds=t1 - t0, reconcile_seconds=time.perf_counter() - t1)
    if log is not None and want_ranges:
        rows += _committed_rows(item, log)
    return rows


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


def _finding_row(f: Finding) -> dict[str, Any]:
    return {"rec": "finding", "topic": f.topic, "partition": f.partition, "kind": f.kind,
            "first_offset": f.first_offset, "last_offset": f.last_offset, "count": f.count,
            "detail": f.detail, "cause": None if f.cause is None else json.dumps(f.cause.to_dict())}


def _to_batch(rows: list[dict[str, Any]], names: list[str], schema: Any) -> Any:
    import pyarrow as pa

    return pa.RecordBatch.from_pylist([{n: r.get(n) for n in names} for r in rows], schema=schema)


def _out_arrow_schema() -> Any:
    import pyarrow as pa

    types = {"string": pa.string(), "int": pa.int32(), "long": pa.int64(), "boolean": pa.bool_(),
             "double": pa.float64()}
    return pa.schema([(part.split()[0], types[part.split()[1]]) for part in OUT_SCHEMA.split(", ")])


def partition_task(items: list[WorkItem], source: Source, sink: Sink, settings: TaskSettings,
                   want_keys: bool, group: str | None = None) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The task function of both engines: input batches carry work-item indexes (spark.range ids).

    Per item: the summary and finding rows, then (with want_keys) the keys of the partition's committed
    rows, read in the same task so that key duplicates cost no second pass over the partitions."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        schema = _out_arrow_schema()
        for batch in batches:
            for index in batch.column(0).to_pylist():
                item = items[index]
                try:
                    rows = _audit_partition(item, source, sink, settings, want_keys, group)
                    yield _to_batch([r for r in rows if r["rec"] != "committed"], _OUT_NAMES, schema)
                    committed = [r for r in rows if r["rec"] == "committed"]
                    if committed:
                        yield from _key_rows(item, committed, sink, settings, schema)
                except EosctlError as e:
                    # One line travels back to the driver, which raises it: no executor traceback for
                    # an unreachable broker or a locked sink.
                    rows = [{"rec": "error", "topic": item.topic, "partition": item.partition,
                             "kind": type(e).__name__, "detail": str(e)}]
                    yield _to_batch(rows, _OUT_NAMES, schema)

    return run


def _key_rows(item: WorkItem, committed: list[dict[str, Any]], sink: Sink, settings: TaskSettings,
              schema: Any) -> Iterator[Any]:
    """Key rows in the task's output schema: rec "key", the key, its offset in first_offset, its writer."""
    import numpy as np
    import pyarrow as pa

    # The sink answers (key, offset) for offsets inside the committed ranges; each row's writer is the
    # range's it falls in (sorted, disjoint): found by binary search, not by the sink.
    starts = np.array([c["first_offset"] for c in committed], dtype=np.int64)
    writers = {name: pa.array([c[name] for c in committed], getattr(pa, t)()) for name, t in _WRITER_TYPES}
    spans = [(c["first_offset"], c["last_offset"]) for c in committed]
    for b in _committed_keys(item.topic, item.partition, spans, sink, settings):
        at = pa.array(np.searchsorted(starts, b.column(1).to_numpy(), side="right") - 1)
        found = [b.column(0), b.column(1), *(writers[n].take(at) for n, _ in _WRITER_TYPES)]
        b = pa.RecordBatch.from_arrays(found, names=["key", "offset", *(n for n, _ in _WRITER_TYPES)])
        n = b.num_rows
        cols = {"rec": pa.array(["key"] * n, pa.string()), "topic": pa.array([item.topic] * n, pa.string()),
                "partition": pa.array([item.partition] * n, pa.int32()),
                "first_offset": b.column(1).cast(pa.int64()), "key": b.column(0).cast(pa.string()),
                **{name: b.column(name) for name, _ in _WRITER_TYPES}}
        yield pa.RecordBatch.from_arrays([cols[f.name] if f.name in cols else pa.nulls(n, f.type)
                                          for f in schema], schema=schema)


def _committed_keys(topic: str, partition: int, committed: list[tuple[int, int]], sink: Sink,
                    settings: TaskSettings) -> Iterator[Any]:
    """Arrow batches (key, offset) of the partition's distinct committed rows with a key."""
    with _open_sink(sink, settings) as reader:
        yield from reader.committed_keys(topic, partition, committed)


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


def plan(source: Source, topics: Iterable[str], in_sink: Iterable[TP]) -> list[WorkItem]:
    """Every partition of the audited topics, plus sink partitions Kafka doesn't have.

    Sink rows for another topic that exists in Kafka are not audited (the sink may consume several
    topics and the user narrowed it with --topic); for a topic Kafka doesn't have, they are phantoms.
    """
    topics = tuple(dict.fromkeys(topics))
    audited = source.partitions(topics)
    items = [WorkItem(t, p, True) for t in topics for p in audited[t]]
    known = {(i.topic, i.partition) for i in items}
    others = {tp for tp in in_sink if tp not in known}
    existing = source.existing_topics() if any(t not in audited for t, _ in others) else {}
    for t, p in sorted(others):
        if t in audited or t not in existing:
            items.append(WorkItem(t, p, False))
    return items


def prepare(inp: AuditInput) -> list[WorkItem]:
    """Open and validate the sink, read Kafka metadata, list the work: fails fast, before Spark starts.

    With a group, each item also carries the sink's stored offset and the group's committed one (both
    cheap to read here); the task, which has the log model, judges them. ``inp.sink`` is the one the
    command froze (eosctl.sink.frozen, in auditors.engine.run): the tasks read the same read point.
    """
    from eosctl.sink import open_reader

    with open_reader(inp.sink) as reader:
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


def outcome(rows: Iterable[dict[str, Any]], key_findings: list[Finding], partitions_seconds: float,
            keys_seconds: float) -> Outcome:
    """Task output rows (no key rows) and the key rule's findings, from either engine."""
    rows = list(rows)
    _raise_task_errors(r for r in rows if r["rec"] == "error")
    summaries = [r for r in rows if r["rec"] == "summary"]
    findings = [_finding_from(r) for r in rows if r["rec"] == "finding"]
    # Summed over tasks: with several tasks at once they can exceed the phase's wall time.
    timings = {"partitions_seconds": round(partitions_seconds, 3), "keys_seconds": round(keys_seconds, 3),
               "scan_seconds": round(sum(r["scan_seconds"] or 0.0 for r in summaries), 3),
               "reconcile_seconds": round(sum(r["reconcile_seconds"] or 0.0 for r in summaries), 3)}
    return Outcome([_summary_from(r) for r in summaries], findings + key_findings, timings)


def run_spark(spark: Any, inp: AuditInput, items: list[WorkItem], progress: Progress = silent) -> Outcome:
    """The Spark engine: one job. Its first stage runs the tasks; with a key column, a shuffle of the
    same job groups the key rows by key (task rows pass through it, each in a group of its own)."""
    from pyspark.sql import functions as F

    want_keys = inp.sink.key_column is not None
    progress(Step(PHASE_TASKS, 0, len(items)))
    func = partition_task(items, inp.source, inp.sink, inp.settings, want_keys, inp.group)
    frame = spark.range(0, len(items), 1, max(len(items), 1)).mapInArrow(func, OUT_SCHEMA)
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
    with _TaskProgress(spark, len(items), want_keys, progress) as phases:
        rows = _collect(frame)
    if not want_keys:
        return outcome(rows, [], phases.tasks_seconds, 0.0)
    keys = [f for r in rows if r["is_key"] for f in _key_findings(r["g"], r["at"])]
    return outcome((r["row"] for r in rows if not r["is_key"]), keys, phases.tasks_seconds,
                   phases.keys_seconds)


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


def _collect(frame: Any) -> list[dict[str, Any]]:
    try:
        return frame.toArrow().to_pylist()
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


def _finding_from(r: dict[str, Any]) -> Finding:
    cause = r.get("cause")
    return Finding(r["kind"], r["topic"], r["partition"], r["first_offset"], r["last_offset"], r["count"],
                   detail=r["detail"],
                   cause=None if cause is None else Cause.from_dict(r["kind"], json.loads(cause)))


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


__all__ = ["AuditInput", "KafkaSource", "ModelSource", "Outcome", "TaskSettings", "WorkItem", "key_findings",
           "partition_task", "plan", "prepare", "run_spark", "with_offsets"]
