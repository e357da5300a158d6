"""The one way an audit runs: read the sink and Kafka metadata, start an engine, run the job, report.

Every caller (`eosctl audit`, `snapshot --with-audit`, the TUI, the exporter, the demo, the benchmarks)
comes through `run` (or `auditors.audit`, which builds its input from a target), so the engine choice (one
policy: ``pick``, from the plan's own offsets when nobody chose), the timings, the driver's passes
(auditors.passes) and the clean-up of everything the audit started live in one place.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from typing import Any

from auditors import deadletters, guard, keydups, passes
from auditors import spark as sparks
from auditors.outcome import Outcome
from auditors.plan import AuditInput, WorkItem, prepare
from auditors.spark import describe, require_reachable_sink, runs_here
from auditors.spark_job import run_spark
from auditors.window import in_window, with_windows
from eosctl.base.errors import EosctlError
from eosctl.base.gcpause import paused
from eosctl.base.progress import Progress, Step, silent
from eosctl.base.safetext import term
from eosctl.cluster import sharedwire
from eosctl.config.model import Config, Spark
from eosctl.config.route import parse_route
from eosctl.config.values import memory_problem, spark_master_problem
from eosctl.report import onerow
from eosctl.report.findings import AuditReport
from eosctl.rules.causes import explain_finding
from eosctl.rules.precedence import content_first
from eosctl.sink import Limits, SinkReader, frozen, open_reader, shown

ENGINES = ("spark", "local")
AUTO = "auto"  # no engine chosen: ``pick`` decides from the plan's offsets
PHASE_PREPARE = "reading the sink and Kafka metadata"

# Up to this many offsets (log start to HW over every audited partition) the local engine is picked when
# neither a flag nor the config's [audit] engine says which: a JVM's start costs more than such an audit
# (285 rows: Spark 37.6 s, local 1.2 s).
LOCAL_UP_TO = 5_000_000


def pick(items: list[WorkItem]) -> tuple[str, str]:
    """The engine for an audit nobody chose one for, and why (the line `eosctl audit` says on stderr): by
    the offsets of the plan's partitions, read once by the plan (never on a read that failed: a 4 s blip
    once turned a 3 s local audit into a 34 s Spark one)."""
    return pick_by_offsets(sum(i.placement.high_watermark - i.placement.log_start
                               for i in items if i.placement is not None))


def pick_by_offsets(total: int) -> tuple[str, str]:
    """`pick` for ``total`` offsets: also a state sink's audit (auditors.state), from its own log scan."""
    chosen = "local" if total <= LOCAL_UP_TO else "spark"
    why = "<=" if chosen == "local" else ">"
    return chosen, (f"{total:,} offsets {why} {LOCAL_UP_TO:,}; --engine "
                    f"{'spark' if chosen == 'local' else 'local'} for the other, or set [audit] engine")


@dataclass(frozen=True)
class EngineOptions:
    engine: str = "spark"  # "spark" | "local" | "auto" (pick: by the plan's offsets)
    master: str | None = None  # Spark master; None: local[*]
    remote: str | None = None  # Spark Connect server (instead of master)
    driver_memory: str = "2g"
    shuffle_partitions: int = 4
    # The local engine's processes, started whatever the audit's size (0: none, the tasks run in this
    # process); None: one per core when the audit has work for more than one (auditors.local.pool_size).
    workers: int | None = None
    # Compare each sink row's key with its record's (content_mismatch), where the sink names a key column:
    # on unless turned off (--no-content-check, [audit] content_check = false): at 10M offsets it costs at
    # most 1.5x the keyed audit without it (docs/benchmarks.md, benchmarks/keyed_bench.py).
    content_check: bool = True
    # Told the engine "auto" picked and why (engine, reason), before it starts; None: nobody is told.
    on_pick: Callable[[str, str], None] | None = field(default=None, compare=False)

    @classmethod
    def resolve(cls, config: Config | None, default_engine: str = AUTO, *, engine: str | None = None,
                master: str | None = None, remote: str | None = None,
                driver_memory: str | None = None) -> EngineOptions:
        """Flags first, then the config ([audit] engine, [spark] ...), then ``default_engine`` (every
        command's: "auto", picked from the plan's offsets; Spark's options name Spark).

        A --master flag overrides a configured remote server and vice versa."""
        if master and remote:
            raise EosctlError("pass either --master or --remote, not both")
        for flag, value, check in (("--master", master, spark_master_problem),
                                   ("--driver-memory", driver_memory, memory_problem)):
            problem = check(value) if value else None
            if problem:
                raise EosctlError(f"{flag} {term(value or '')!r}: {problem}")
        conf = config.spark if config is not None else Spark()
        names_spark = bool(master or remote or driver_memory)  # the flags, before the config's are taken
        if not master and not remote:
            remote = conf.remote
            master = conf.master if not remote else None
        chosen = engine or (config.audit_engine if config is not None else None) or default_engine
        if chosen == AUTO and names_spark:
            chosen = "spark"  # a flag naming Spark's options names Spark
        if chosen not in (*ENGINES, AUTO):
            raise EosctlError(f"unknown audit engine {chosen!r}; use one of {', '.join(ENGINES)}")
        return cls(chosen, master, remote, driver_memory or conf.driver_memory, conf.shuffle_partitions,
                   content_check=config.audit_content_check if config is not None else True)

    def where(self) -> str:
        if self.engine == AUTO:
            return "the engine its size picks"
        if self.engine == "local":
            return "local processes"
        return f"Spark, remote {self.remote}" if self.remote else f"Spark, {self.master or 'local[*]'}"


def run(inp: AuditInput, options: EngineOptions, progress: Progress = silent,
        started: float | None = None) -> AuditReport:
    """The audit's report. ``started`` (time.monotonic()) is when the command started: the report's
    elapsed_seconds counts from there, Spark's start-up included. Whatever the audit started on this
    machine (JVM, Python workers, the local pool, temp files) is gone when this returns or raises."""
    t_start = started if started is not None else time.monotonic()
    # Findings by the hundred thousand on their way to the report, no cycles among them (eosctl.base.gcpause):
    # the local engine's whole run (its forked workers inherit the pause); a Spark job's only from its
    # collected rows on (auditors.spark_job.run_spark, and the report below), not while the cluster works.
    # "auto" pauses from its pick of the local engine on.
    # The driver's Kafka phases (survey, committed offsets, the tasks it runs itself) on one client.
    with ExitStack() as pause, sharedwire.sharing():
        if options.engine == "local":
            pause.enter_context(paused())
        return _audit(inp, options, progress, t_start, pause)


def _audit(inp: AuditInput, options: EngineOptions, progress: Progress, t_start: float,
           pause: ExitStack) -> AuditReport:
    if options.engine == "spark":
        require_reachable_sink(inp.sink, options.master, options.remote)
    progress(Step(PHASE_PREPARE))
    # The sink is read first, from one frozen copy taken before any task scans Kafka: a live writer is kept
    # out only while it is copied, and rows it writes meanwhile are neither read nor phantoms. "auto" freezes
    # for where Spark would run (the local engine reads such a copy too).
    here = options.engine == "local" or runs_here(options.master, options.remote)
    with frozen(inp.sink, local=here) as fixed:
        inp = replace(inp, sink=fixed)
        # The driver's one reader of the sink: the plan's partitions, then (while the tasks run: the driver
        # only waits for them) the rows no partition task can own.
        with open_reader(inp.sink) as reader:
            t = time.monotonic()
            items = prepare(inp, reader)  # sink and broker errors surface here, before any engine starts
            if inp.window is not None:  # each partition's window in offsets, for its task
                items = with_windows(items, inp.window, inp.source)
            dead = None
            if fixed.dlq_topic and inp.cluster is not None:  # read after the sink, like every Kafka read
                from eosctl.cluster.deadletter import read_dead_letters  # lazy: see docs/imports.md

                dead = read_dead_letters(inp.cluster, fixed.dlq_topic)
                items = deadletters.with_dead_letters(items, dead)
            if fixed.route and inp.cluster is not None:  # the records the route leaves out, per partition
                items = with_routes(items, parse_route(fixed.route), inp.cluster)
            timings: dict[str, float] = {"prepare_seconds": round(time.monotonic() - t, 3)}
            if options.engine == AUTO:
                options = _picked(options, items, inp.sink)
                if options.engine == "local":
                    here = True
                    pause.enter_context(paused())
            driver = Beside(lambda: ([explain_finding(f) for f in reader.invalid_rows()], reader.read_point))
            result, startup, info = _run_engine(inp, items, options, here, progress, driver, reader)
            invalid, point = driver.result()
        with paused():  # while the hop rows exist
            findings = passes.finish_frozen(fixed, result.findings, invalid)
    progress(Step("done", 1, 1))
    engine = engine_facts(info, result.tasks, timings["prepare_seconds"], startup, result.timings,
                          result.keys_read_by)
    findings = content_first(findings)  # a row the content check names is no place of its key
    onerow.record(result.summaries, findings + invalid)  # the test suite's check: one finding per row
    with paused():
        if inp.window is not None:
            findings = in_window(findings, items)
        dlq = None if dead is None else deadletters.summary(
            dead, items, sum(s.dead_lettered or 0 for s in result.summaries))
        return AuditReport.build(result.summaries, findings + invalid, inp.fail_on,
                                 sink=f"{shown(inp.sink)} ({inp.sink.table})",
                                 sink_read_point=point, group=inp.group, engine=engine,
                                 elapsed_seconds=time.monotonic() - t_start, window=inp.window, dlq=dlq)


def _picked(options: EngineOptions, items: list[WorkItem], sink: Any) -> EngineOptions:
    """``options`` with the engine ``pick`` chose from the plan's items, told to ``on_pick``."""
    chosen, why = pick(items)
    if chosen == "spark":
        require_reachable_sink(sink, options.master, options.remote)
    if options.on_pick is not None:
        options.on_pick(chosen, why)
    return replace(options, engine=chosen)


def with_routes(items: list[WorkItem], route: Any, cluster: Any) -> list[WorkItem]:
    """Each audited partition with the ranges of committed records ``route`` leaves out, read once here
    (eosctl.cluster.routes: every record from the log start to the LSO, judged in Python)."""
    from eosctl.cluster.routes import routed_out  # lazy: see docs/imports.md

    ends = {i.tp: (i.placement.log_start, i.placement.last_stable) for i in items
            if i.in_kafka and i.placement is not None}
    out, _ = routed_out(cluster, route, ends)
    return [replace(i, routed_out=out[i.tp]) if i.tp in out else i for i in items]


def engine_facts(info: dict[str, Any], tasks: int, prepare_s: float, startup_s: float,
                 timings: dict[str, float], keys_read_by: str | None = None) -> dict[str, Any]:
    """The report's `engine` object: what ran (``info``), its tasks, who read the sink's keys and where
    the time went (docs/json.md documents every key; tests/unit/test_docs.py builds it through here)."""
    read_by = {} if keys_read_by is None else {"keys_read_by": keys_read_by}
    return {**info, "tasks": tasks, **read_by, "prepare_seconds": round(prepare_s, 3),
            "startup_seconds": round(startup_s, 3), **timings}


def local_info(workers: int, tasks: int) -> dict[str, Any]:
    return {"name": "local", "workers": min(workers, tasks)}


def spark_info(spark: Any) -> dict[str, Any]:
    return {"name": "spark", **describe(spark)}


class Beside:
    """The driver's own work, done while an engine's tasks run (once; result() does it if nobody did)."""

    def __init__(self, work: Callable[[], Any]) -> None:
        self.work, self.done, self.value = work, False, None

    def __call__(self) -> None:
        if not self.done:
            self.value, self.done = self.work(), True

    def result(self) -> Any:
        self()
        return self.value


def _run_engine(inp: AuditInput, items: list[WorkItem], options: EngineOptions, here: bool,
                progress: Progress, beside: Beside,
                reader: SinkReader) -> tuple[Outcome, float, dict[str, Any]]:
    """(what the engine found, its start-up seconds, what it was); everything it started is gone after.
    ``here``: the engine's processes run on this machine; ``reader``: the driver's reader of the sink (the
    local engine groups its keys, auditors.keydups)."""
    if options.engine == "local":
        from auditors.local import prepare_context  # lazy: see docs/imports.md

        prepare_context(inp.sink)  # a process that outlives the audit starts before the guard looks
    with guard.Owned() as owned:
        if here:
            # DuckDB's spill files go where the guard cleans up, not to a shared directory.
            inp = replace(inp, settings=replace(inp.settings, temp_directory=owned.path("duckdb")))
        if options.engine == "local":
            # lazy: see docs/imports.md
            from auditors.local import default_workers, pool_size, run_local

            workers = pool_size(items, options.workers)  # 0: no pool, a small audit runs here
            # The key rule runs once the workers are done: their threads and memory are the driver's then.
            threads = workers or default_workers()
            limits = Limits(threads, f"{threads * _memory_gb(inp.settings.duckdb_memory)}GB",
                            inp.settings.temp_directory)
            result, startup = run_local(inp, items, workers, progress, beside,
                                        key_rule=lambda writers: keydups.in_sink(reader, writers, limits),
                                        reader=reader)
            return result, startup, local_info(workers, result.tasks)
        progress(Step(f"starting {options.where()}"))
        t = time.monotonic()
        spark, mine = _start_spark(options, owned.dir)
        startup = time.monotonic() - t
        ok = False
        try:
            result = run_spark(spark, inp, items, progress)
            info = spark_info(spark)
            ok = True
        finally:
            _stop_spark(spark, mine, ok)
        return result, startup, info


def _start_spark(options: EngineOptions, local_dir: str) -> tuple[Any, bool]:
    """The session and whether this call started it (a test suite's or a notebook's is only borrowed)."""
    mine = options.remote is not None or sparks.active_session() is None
    spark = sparks.session(master=options.master, remote=options.remote, driver_memory=options.driver_memory,
                           shuffle_partitions=options.shuffle_partitions, local_dir=local_dir)
    return spark, mine


def _stop_spark(spark: Any, mine: bool, ok: bool) -> None:
    """A borrowed session loses only this audit's jobs; a session this audit started is stopped, and its
    JVM killed by the guard after this (the JVM outlives SparkSession.stop() in PySpark)."""
    if not mine:
        try:
            spark.sparkContext.cancelAllJobs()
        except Exception:
            pass
        return
    if ok:  # a healthy session stops cleanly; after an error or a signal, no more calls into the JVM
        try:
            spark.stop()
        except Exception:
            pass
    if hasattr(spark, "_sc"):  # classic Spark: this process's JVM; Spark Connect's server isn't ours
        sparks.forget(spark)


def _memory_gb(memory: str) -> int:
    """Whole gigabytes of a DuckDB memory setting ("1GB", "512MB": 1), at least 1."""
    text = memory.strip().upper().rstrip("B").rstrip("I")
    scale = {"K": 1 / 2**20, "M": 1 / 2**10, "G": 1, "T": 2**10}.get(text[-1:], None)
    try:
        return max(1, int(float(text[:-1]) * scale)) if scale else 1
    except ValueError:
        return 1
