"""The Spark engine: one job over the task function (auditors.task), mapInArrow over a range of task
indexes (the same on local[*], a cluster and Spark Connect), a shuffle of the same job grouping key rows by
key, and the job's progress from Spark's status tracker."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from auditors.grouping import tasks as group_items
from auditors.outcome import Outcome, outcome
from auditors.plan import AuditInput, WorkItem
from auditors.task import _OUT_NAMES, _WRITER_TYPES, OUT_SCHEMA, PHASE_KEYS, PHASE_TASKS, group_task
from eosctl.base.errors import EosctlError
from eosctl.base.gcpause import paused
from eosctl.base.progress import Progress, Step, silent
from eosctl.rules.rule import key_finding

if TYPE_CHECKING:
    pass

def run_spark(spark: Any, inp: AuditInput, items: list[WorkItem], progress: Progress = silent) -> Outcome:
    """The Spark engine: one job. Its first stage runs the tasks, as many as the executors have cores
    (auditors.grouping); with a key column, a shuffle of the same job groups the key rows by key (task
    rows pass through it, each in a group of its own)."""
    from pyspark.sql import functions as F  # lazy: pyspark.sql 58 ms to import


    want_keys = inp.sink.key_column is not None
    tasks = group_items(items, spark_slots(spark))
    progress(Step(PHASE_TASKS, 0, len(tasks)))
    func = group_task(tasks, inp.source, inp.sink, inp.settings, want_keys, inp.group, inp.content_check)
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
    with paused():  # a row and a finding each for 100k findings, no cycles among them (eosctl.base.gcpause)
        rows = table.to_pylist()
        if not want_keys:
            return outcome(rows, [], phases.tasks_seconds, 0.0, len(tasks))
        keys = [f for r in rows if r["is_key"] for f in [key_finding(r["g"], r["at"])]]
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
