"""The audit job: one Spark task per Kafka partition, one shuffle by business key.

Everything except key duplicates is local to one (topic, partition), so that is the unit of
parallelism: each task scans its partition's log (raw Fetch, batch headers only), reads its slice of the
sink as offset islands, reconciles the two by range arithmetic (eosctl.reconcile) and yields findings as
Arrow. Tasks are started with mapInArrow over a range of work-item indexes, which works the same on
local[*], a cluster and Spark Connect. Key duplicates are the one cross-partition question: committed
rows are read per partition again (keys only; each task gets its partition's committed ranges as its
input row) and grouped by key in a single shuffle.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from eosctl.config import Cluster, Sink
from eosctl.errors import BrokerError, EosctlError, SinkError, first_line
from eosctl.findings import KINDS, AuditReport, Finding, LogSegment, PartitionSummary

TP = tuple[str, int]
Progress = Callable[[str, int, int], None]  # (what, done, total)

# Task output: one row per summary, finding, committed range (for the key phase) or error.
OUT_SCHEMA = (
    "rec string, topic string, partition int, kind string, first_offset long, last_offset long, count long, "
    "log_start_offset long, last_stable_offset long, high_watermark long, expected_records long, "
    "sink_rows long, unverifiable long, present boolean, detail string"
)
_OUT_NAMES = [part.strip().split(" ")[0] for part in OUT_SCHEMA.split(",")]
KEY_SCHEMA = "key string, topic string, partition int, offset long, error string"  # error rows: key null


# ---- what the tasks read -------------------------------------------------------------------------


class Source(Protocol):
    """Where a task gets its partition's log model from. Must pickle: it is shipped to executors."""

    def partitions(self, topics: Iterable[str]) -> dict[str, list[int]]: ...

    def load(self, topic: str, partition: int) -> Any: ...  # eosctl.model.PartitionLog


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

    def load(self, topic: str, partition: int) -> Any:
        from eosctl.logscan import scan_partition
        from eosctl.wire import WireClient

        with WireClient(self.cluster) as client:
            return scan_partition(client, topic, partition)


@dataclass(frozen=True)
class ModelSource:
    """Log models given up front (tests, benchmarks, replays of a saved scan): {(topic, partition): log}."""

    logs: dict[TP, Any]

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

    def load(self, topic: str, partition: int) -> Any:
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


# ---- inside a task -------------------------------------------------------------------------------


def _open_sink(sink: Sink, settings: TaskSettings) -> Any:
    from eosctl.sinkdb import open_sink

    reader = open_sink(sink)
    os.makedirs(settings.temp_directory, exist_ok=True)
    conn = reader.conn
    conn.execute(f"SET threads = {int(settings.duckdb_threads)}")
    conn.execute(f"SET memory_limit = '{settings.duckdb_memory}'")
    conn.execute(f"SET temp_directory = '{settings.temp_directory}'")
    conn.execute("SET preserve_insertion_order = false")
    return reader


def _audit_partition(item: WorkItem, source: Source, sink: Sink, settings: TaskSettings,
                     want_ranges: bool, group: str | None) -> list[dict[str, Any]]:
    from eosctl.gapmap import log_segments
    from eosctl.model import Kind
    from eosctl.reconcile import offset_mismatch, reconcile_partition, reconcile_unknown

    log = source.load(item.topic, item.partition) if item.in_kafka else None
    # The islands stream out of DuckDB straight into the sweep: never a list of the partition's offsets.
    with _open_sink(sink, settings) as reader:
        isl = reader.islands(item.topic, item.partition)
        if log is None:
            summary, findings = reconcile_unknown(item.topic, item.partition, isl)
        else:
            summary, findings = reconcile_partition(log, isl)
            summary = replace(summary, log_segments=log_segments(log))  # for the HTML gap map
    if item.check_offsets:
        mismatch = offset_mismatch(item.topic, item.partition, item.stored_offset, item.committed_offset,
                                   log, group)
        findings = [*findings, *([mismatch] if mismatch else [])]
    rows = [_summary_row(summary), *(_finding_row(f) for f in findings)]
    if log is not None and want_ranges:
        lso, start = log.last_stable_offset, log.log_start_offset
        for r in log.ranges:
            first, last = max(r.first, start), min(r.last, lso - 1)
            if Kind(r.kind) == Kind.DATA and first <= last:
                rows.append({"rec": "committed", "topic": item.topic, "partition": item.partition,
                             "first_offset": first, "last_offset": last})
    return rows


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
            "detail": f.detail}


def _to_batch(rows: list[dict[str, Any]], names: list[str], schema: Any) -> Any:
    import pyarrow as pa

    return pa.RecordBatch.from_pylist([{n: r.get(n) for n in names} for r in rows], schema=schema)


def _out_arrow_schema() -> Any:
    import pyarrow as pa

    types = {"string": pa.string(), "int": pa.int32(), "long": pa.int64(), "boolean": pa.bool_()}
    return pa.schema([(part.split()[0], types[part.split()[1]]) for part in OUT_SCHEMA.split(", ")])


def partition_task(items: list[WorkItem], source: Source, sink: Sink, settings: TaskSettings,
                   want_ranges: bool, group: str | None = None) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The mapInArrow function: input batches carry work-item indexes (spark.range ids)."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        schema = _out_arrow_schema()
        for batch in batches:
            for index in batch.column(0).to_pylist():
                item = items[index]
                try:
                    rows = _audit_partition(item, source, sink, settings, want_ranges, group)
                except EosctlError as e:
                    # One line travels back to the driver, which raises it: no executor traceback for
                    # an unreachable broker or a locked sink.
                    rows = [{"rec": "error", "topic": item.topic, "partition": item.partition,
                             "kind": type(e).__name__, "detail": str(e)}]
                yield _to_batch(rows, _OUT_NAMES, schema)

    return run


def key_task(sink: Sink, settings: TaskSettings) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """mapInArrow function for the key phase: (key, topic, partition, offset) of committed rows.

    Input rows are the work: (topic, partition, rf, rl), the partition's committed ranges as two lists,
    so each task receives only its own ranges, not every partition's in its closure.
    """

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        schema = pa.schema([("key", pa.string()), ("topic", pa.string()), ("partition", pa.int32()),
                            ("offset", pa.int64()), ("error", pa.string())])
        for batch in batches:
            for i in range(batch.num_rows):
                topic, partition = batch.column(0)[i].as_py(), batch.column(1)[i].as_py()
                ranges = pa.table({"rf": batch.column(2)[i].values, "rl": batch.column(3)[i].values})
                try:
                    yield from _committed_keys(topic, partition, ranges, sink, settings, schema)
                except EosctlError as e:
                    yield pa.RecordBatch.from_pylist([{"topic": topic, "partition": partition,
                                                       "error": str(e)}], schema=schema)

    return run


def _committed_keys(topic: str, partition: int, committed: Any, sink: Sink, settings: TaskSettings,
                    schema: Any) -> Iterator[Any]:
    import pyarrow as pa

    with _open_sink(sink, settings) as reader:
        reader.conn.register("committed_ranges", committed)
        # ASOF join: each row meets the last range starting at or before its offset; inside it = committed.
        rows = reader.rows_sql(topic, partition, with_key=True)
        sql = f"""
            SELECT DISTINCT s.k AS key, s.o AS offset FROM ({rows}) s
            ASOF JOIN committed_ranges r ON s.o >= r.rf
            WHERE s.o <= r.rl AND s.k IS NOT NULL"""
        try:
            arrow = reader.conn.sql(sql).to_arrow_reader(65_536)
            for b in arrow:
                n = b.num_rows
                yield pa.RecordBatch.from_arrays(
                    [b.column(0).cast(pa.string()), pa.array([topic] * n, pa.string()),
                     pa.array([partition] * n, pa.int32()), b.column(1).cast(pa.int64()),
                     pa.nulls(n, pa.string())], schema=schema)
        except Exception as e:
            raise SinkError(f"reading keys of {topic}-{partition} from sink {reader.source} "
                            f"failed: {first_line(e)}") from None


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
    cheap to read here); the task, which has the log model, judges them.
    """
    from eosctl.sinkdb import frozen, open_sink

    # A frozen copy: the pipeline's writer is kept out only while it is copied, not while it is scanned.
    with frozen(inp.sink) as fixed, open_sink(fixed) as reader:
        in_sink = reader.partitions()
        stored = reader.stored_offsets() if inp.group and inp.cluster is not None else None
    items = plan(inp.source, inp.topics, in_sink)
    if stored is None:  # no group to compare with, or the sink stores no offsets
        return items
    from eosctl.offsets import committed_offsets

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


def run_audit(spark: Any, inp: AuditInput, items: list[WorkItem] | None = None,
              progress: Progress | None = None) -> AuditReport:
    """Run the whole audit and return the report (the verdict follows ``inp.fail_on``).

    Every task reads one frozen copy of the sink, taken before any task scans Kafka (eosctl.sinkdb.frozen):
    a live writer is kept out only while it is copied, and rows it writes meanwhile are neither read nor
    phantoms."""
    from auditors.spark import describe, runs_here
    from eosctl.sinkdb import frozen

    master = describe(spark).get("master")
    with frozen(inp.sink, local=master != "spark-connect" and runs_here(master)) as fixed:
        return _run_frozen(spark, replace(inp, sink=fixed), items, progress)


def _run_frozen(spark: Any, inp: AuditInput, items: list[WorkItem] | None = None,
                progress: Progress | None = None) -> AuditReport:
    from auditors.spark import describe
    from eosctl.sinkdb import invalid_rows, origin

    t0 = time.monotonic()
    say = progress or (lambda what, done, total: None)
    if items is None:
        say("reading the sink and Kafka metadata", 0, 1)
        items = prepare(inp)
    want_keys = inp.sink.key_column is not None

    say("auditing partitions", 0, len(items))
    func = partition_task(items, inp.source, inp.sink, inp.settings, want_keys, inp.group)
    frame = spark.range(0, len(items), 1, max(len(items), 1)).mapInArrow(func, OUT_SCHEMA)
    with _TaskProgress(spark, "auditing partitions", len(items), say):
        rows = _collect(frame)
    _raise_task_errors(r for r in rows if r["rec"] == "error")
    summaries = [_summary_from(r) for r in rows if r["rec"] == "summary"]
    findings = [_finding_from(r) for r in rows if r["rec"] == "finding"]
    findings += invalid_rows(inp.sink)  # rows no partition task can own: one pass on the driver
    timings = {"partitions_seconds": round(time.monotonic() - t0, 3)}

    if want_keys:
        t1 = time.monotonic()
        committed: dict[TP, list[tuple[int, int]]] = {}
        for r in rows:
            if r["rec"] == "committed":
                tp = (r["topic"], r["partition"])
                committed.setdefault(tp, []).append((r["first_offset"], r["last_offset"]))
        say("key duplicates (one shuffle by key)", 0, 1)
        findings += key_duplicates(spark, committed, inp.sink, inp.settings)
        timings["keys_seconds"] = round(time.monotonic() - t1, 3)
    say("done", 1, 1)
    engine = {**describe(spark), **timings, "tasks": len(items)}
    where = origin(inp.sink.duckdb or inp.sink.parquet or "")
    return AuditReport.build(summaries, findings, inp.fail_on, sink=f"{where} ({inp.sink.table})",
                             group=inp.group, engine=engine, elapsed_seconds=time.monotonic() - t0)


def key_duplicates(spark: Any, committed: dict[TP, list[tuple[int, int]]], sink: Sink,
                   settings: TaskSettings) -> list[Finding]:
    """One key written from several distinct committed source records: group by key, one shuffle."""
    from pyspark.sql import functions as F

    work = _key_work(committed)
    if work is None:
        return []
    keyed = spark.createDataFrame(work).mapInArrow(key_task(sink, settings), KEY_SCHEMA)
    at = F.struct(F.col("topic"), F.col("partition"), F.col("offset"))
    # Task errors come back as rows with a null key (real keys are never null), so one aggregation
    # answers both questions and the tasks run once.
    out = (keyed.groupBy("key")
           .agg(F.count_distinct(at).alias("n"), F.sort_array(F.collect_set(at)).alias("at"),
                F.max("error").alias("error"))
           .where(F.col("key").isNull() | (F.col("n") > 1)))
    rows = _collect(out)
    _raise_task_errors({"kind": "SinkError", "detail": r["error"]} for r in rows
                       if r["key"] is None and r["error"] is not None)
    return [f for r in rows if r["key"] is not None for f in _key_findings(r["key"], r["at"])]


def _key_work(committed: dict[TP, list[tuple[int, int]]]) -> Any | None:
    """The key phase's input: one row per partition (topic, partition, rf, rl). Spark spreads the rows
    over min(partitions, default parallelism) tasks: every core busy, each task holding only its rows."""
    import pyarrow as pa

    schema = pa.schema([("topic", pa.string()), ("partition", pa.int32()),
                        ("rf", pa.list_(pa.int64())), ("rl", pa.list_(pa.int64()))])
    batches = [pa.RecordBatch.from_pylist([{"topic": t, "partition": p, "rf": [r[0] for r in ranges],
                                            "rl": [r[1] for r in ranges]}], schema=schema)
               for (t, p), ranges in sorted(committed.items()) if ranges]
    return pa.Table.from_batches(batches, schema) if batches else None


def _key_findings(key: str, at: list[Any]) -> list[Finding]:
    """One finding per key: the topic/partition of its first place, first/last = min/max offset,
    count = distinct committed source records carrying the key, offsets = their offsets."""
    dicts = (x if isinstance(x, dict) else x.asDict() for x in at)
    places = sorted((a["topic"], a["partition"], a["offset"]) for a in dicts)
    offsets = tuple(o for _, _, o in places)
    topic, partition = places[0][0], places[0][1]
    detail = None
    if len({(t, p) for t, p, _ in places}) > 1:
        detail = "in " + ", ".join(f"{t}[{p}]@{o}" for t, p, o in places)
    return [Finding("key_duplicate", topic, partition, min(offsets), max(offsets), len(places), key=key,
                    offsets=offsets, detail=detail)]


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
    return Finding(r["kind"], r["topic"], r["partition"], r["first_offset"], r["last_offset"], r["count"],
                   detail=r["detail"])


class _TaskProgress:
    """Report finished tasks of the running job from Spark's status tracker (absent on Spark Connect)."""

    def __init__(self, spark: Any, what: str, total: int, say: Progress) -> None:
        self.what, self.total, self.say = what, total, say
        try:
            self.tracker = spark.sparkContext.statusTracker()
        except Exception:
            self.tracker = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> _TaskProgress:
        if self.tracker is not None:
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(timeout=1)
        self.say(self.what, self.total, self.total)

    def _poll(self) -> None:
        while not self.stop.wait(0.25):
            try:
                done = 0
                for sid in self.tracker.getActiveStageIds():
                    info = self.tracker.getStageInfo(sid)
                    if info is not None:
                        done += info.numCompletedTasks
                self.say(self.what, min(done, self.total), self.total)
            except Exception:
                return


__all__ = ["AuditInput", "KafkaSource", "ModelSource", "TaskSettings", "WorkItem", "key_duplicates", "plan",
           "prepare", "run_audit", "with_offsets"]
