"""The Spark engine: one job over the task function (auditors.task), mapInArrow over a range of task
indexes (the same on local[*], a cluster and Spark Connect), a shuffle of the same job that keeps only the
key rows of duplicate keys, and the job's progress from Spark's status tracker.

The key-duplicate rule in Spark SQL: a window over each key (one hash shuffle by key, one sort) compares
the key's smallest and largest place (topic, partition, offset): they differ exactly when the key has two
distinct places, so only duplicates' rows leave the shuffle, and the driver groups those few into findings.
It used to be groupBy + collect_set of every key's places: a list built per key for 100M keys, sorted on
the map side and again on the reduce side, to throw away all but the duplicates. A GROUP BY key HAVING
... joined back to the rows would read the task output twice, i.e. run the tasks (Kafka and the sink) twice:
the window reads it once, and the task rows ride the same shuffle, each in a window of its own.

Where Spark reads the sink itself (a Parquet sink, a Delta table's pinned files: auditors.spark_sink), the
tasks read no key at all: they send back their committed ranges, and the key rule runs over Spark's own
scan of the sink (auditors.spark_keys)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from auditors.grouping import tasks as group_items
from auditors.keydups import writers_table
from auditors.outcome import Outcome, outcome
from auditors.plan import AuditInput, WorkItem
from auditors.spark_keys import spark_duplicate_keys
from auditors.spark_sink import key_frame, spark_slots
from auditors.task import _OUT_NAMES, _WRITER_TYPES, OUT_SCHEMA, PHASE_KEYS, PHASE_TASKS, group_task
from eosctl.base.errors import EosctlError
from eosctl.base.gcpause import paused
from eosctl.base.progress import Progress, Step, silent
from eosctl.report.findings import Finding
from eosctl.rules.rule import key_finding

if TYPE_CHECKING:
    pass

def run_spark(spark: Any, inp: AuditInput, items: list[WorkItem], progress: Progress = silent) -> Outcome:
    """The Spark engine: one job. Its first stage runs the tasks, as many as the executors have cores
    (auditors.grouping); with a key column, a shuffle of the same job keeps the key rows of duplicate keys
    only (task rows pass through it, each in a window of its own)."""
    from pyspark.sql import functions as F  # lazy: see docs/imports.md


    want_keys = inp.sink.key_column is not None
    # A sink Spark reads itself: the tasks send back committed ranges only, and the key rule runs as
    # Spark SQL over Spark's own scan of the sink (auditors.spark_keys), its rows never in Python.
    keys = key_frame(spark, inp.sink) if want_keys else None
    tasks = group_items(items, spark_slots(spark))
    progress(Step(PHASE_TASKS, 0, len(tasks)))
    func = group_task(tasks, inp.source, inp.sink, inp.settings, want_keys, inp.group, inp.content_check,
                      key_rows=keys is None)
    frame = spark.range(0, len(tasks), 1, max(len(tasks), 1)).mapInArrow(func, OUT_SCHEMA)
    if keys is not None:
        return replace(_with_spark_keys(spark, frame, keys, len(tasks), progress), keys_read_by="spark")
    if want_keys:
        from pyspark.sql import Window  # lazy: as above; see docs/imports.md

        is_key = F.col("rec") == "key"
        group = F.when(is_key, F.col("key")).otherwise(F.monotonically_increasing_id().cast("string"))
        # Keyed by whether the row is a key's too: a key that reads like a task row's id is still a key.
        by_key = Window.partitionBy(F.col("g"), F.col("row").isNull())
        place = F.struct("topic", "partition", "first_offset")
        # Through the shuffle a key row carries its place and writer only; a task row (summary, finding,
        # task, error: a few per partition) all of its columns, packed in one (null for key rows).
        narrow = frame.select(group.alias("g"), F.when(~is_key, F.struct(*_OUT_NAMES)).alias("row"),
                              "topic", "partition", "first_offset", *(name for name, _ in _WRITER_TYPES))
        # min <> max of a key's places: true exactly when it has two distinct places, however often the
        # sink repeats one (no count of rows, no set of places per key). A task row's window is its own.
        frame = (narrow.select("*", (F.min(place).over(by_key) != F.max(place).over(by_key)).alias("dup"))
                 .where(F.col("row").isNotNull() | F.col("dup")).drop("dup"))
    with _TaskProgress(spark, len(tasks), want_keys, progress) as phases:
        table = _collect(frame)
    with paused():  # a row and a finding each for 100k findings, no cycles among them (eosctl.base.gcpause)
        rows = table.to_pylist()
        if not want_keys:
            return outcome(rows, [], phases.tasks_seconds, 0.0, len(tasks))
        keys = _key_findings(r for r in rows if r["row"] is None)
        return replace(outcome((r["row"] for r in rows if r["row"] is not None), keys, phases.tasks_seconds,
                               phases.keys_seconds, len(tasks)), keys_read_by="tasks")


def _with_spark_keys(spark: Any, frame: Any, keys: Any, tasks: int, progress: Progress) -> Outcome:
    """The tasks' job (summaries, findings, committed ranges), then the key rule's over ``keys``."""
    with _TaskProgress(spark, tasks, False, progress) as phases:
        table = _collect(frame)
    with paused():  # as in run_spark
        rows = table.to_pylist()
    committed = [r for r in rows if r["rec"] == "committed"]
    t = time.monotonic()
    progress(Step(PHASE_KEYS, 0, None))
    found = spark_duplicate_keys(spark, keys, writers_table(committed), _collect) if committed else []
    progress(Step(PHASE_KEYS, tasks, tasks))
    return outcome(rows, found, phases.tasks_seconds, time.monotonic() - t, tasks)


def _key_findings(rows: Iterable[dict[str, Any]]) -> list[Finding]:
    """A finding per duplicate key from its key rows (only duplicates' rows reach the driver): each
    distinct place once, with its writer."""
    places: dict[str, dict[tuple[str, int, int], dict[str, Any]]] = {}
    for r in rows:
        at = (r["topic"], r["partition"], r["first_offset"])
        places.setdefault(r["g"], {})[at] = {
            "topic": at[0], "partition": at[1], "offset": at[2],
            **{name: r[name] for name, _ in _WRITER_TYPES}}
    return [key_finding(key, list(at.values())) for key, at in places.items()]


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
