"""The local engine: the Spark job's task function and key rule in a process pool, no JVM.

For the audits that don't need a cluster (the TUI in an incident, a snapshot, a CI gate on a small
pipeline) Spark's fixed cost (JVM start, first job, first Python worker: seconds) dwarfs the work. Here
the same groups of partitions as on Spark (auditors.grouping, one per worker) each run `task.group_task` in
a forked worker, exactly as in a Spark task; with a key column the tasks send back their committed ranges
only, and this process groups the sink's keys where they are, with DuckDB (auditors.keydups: the same rule
as Spark's shuffle, no key row through a pipe or Python).
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from auditors.findingrows import findings_from_arrow
from auditors.grouping import tasks as group_items
from auditors.grouping import work
from auditors.keydups import writers_table
from auditors.outcome import Outcome, outcome
from auditors.plan import AuditInput, TaskSettings, WorkItem
from auditors.sources import Source
from auditors.task import PHASE_KEYS, PHASE_TASKS, audit_group, group_task, open_task_reader
from eosctl.base.errors import EosctlError
from eosctl.base.gcpause import paused
from eosctl.base.progress import Progress, Step, silent
from eosctl.base.stopsignals import STOP_SIGNALS, held
from eosctl.cluster import sharedwire
from eosctl.config.model import Sink
from eosctl.report.findings import Finding
from eosctl.sink.delta import library_needed

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

    from eosctl.sink import SinkReader


# Below this much work (auditors.grouping.work: records plus a fixed cost per partition, summed over the
# audit) the tasks run in this process, one after the other: a second worker would cost more to start
# (fork, its share of the pool's pipes, its results pickled back: ~0.1-0.2 s on 2 busy cores) than it
# saves (the log scan and reconcile run at ~300k-800k records/s, so 50k records are ~0.1 s of work).
POOL_MIN_WORK = 50_000
# The local engine's processes: a number forces a pool of that many (0: none, the tasks run in eosctl's
# own process), whatever the audit's size; unset, one per core when there is work for more than one.
WORKERS_ENV = "EOSCTL_LOCAL_WORKERS"
# How often the main thread looks up from the pool's tasks for a stop signal another thread received.
SIGNAL_LOOK_S = 0.2


def default_workers() -> int:
    return os.cpu_count() or 1


def forced_workers() -> int | None:
    """The worker count $EOSCTL_LOCAL_WORKERS forces (0: in this process), or None when unset."""
    text = os.environ.get(WORKERS_ENV, "").strip()
    if not text:
        return None
    if not text.isdigit():
        raise EosctlError(f"${WORKERS_ENV} {text[:40]!r} is not a number of worker processes; set it to 0 "
                          "(none: the audit runs in eosctl's process), 1 or more, or unset it")
    return int(text)


def pool_size(items: list[WorkItem], asked: int | None = None) -> int:
    """The processes of the pool for these items, 0 for none (the tasks run in this process, one after the
    other). ``asked``: a count the caller fixed (EngineOptions.workers), else $EOSCTL_LOCAL_WORKERS: that
    many whatever the audit's size; otherwise one per core, and none below POOL_MIN_WORK."""
    if asked is None:
        asked = forced_workers()
    if asked is not None:
        return asked
    cores = default_workers()
    return 0 if cores <= 1 or sum(work(i) for i in items) < POOL_MIN_WORK else cores


def run_local(inp: AuditInput, items: list[WorkItem], workers: int | None = None,
              progress: Progress = silent, beside: Callable[[], None] | None = None,
              key_rule: Callable[[Any], list[Finding]] | None = None,
              reader: SinkReader | None = None) -> tuple[Outcome, float]:
    """The outcome and the pool's start-up time (forking the workers; 0 without a pool). ``workers``: the
    pool's processes, 0 for none (the tasks run here), None: pool_size's choice. ``beside``: the
    driver's own work, done once the workers are forked (never before: a forked worker would inherit it half
    done). ``key_rule``: with a key column, the key_duplicate findings of the sink at the tasks' committed
    ranges (an Arrow table, auditors.keydups.writers_table), e.g. auditors.keydups.in_sink on the driver's
    reader. ``reader``: the driver's reader of the sink, which tasks run in this process use."""
    want_keys = inp.sink.key_column is not None
    workers = pool_size(items) if workers is None else workers
    here = workers == 0
    tasks = group_items(items, 1 if here else workers)
    progress(Step(PHASE_TASKS, 0, len(tasks)))
    t0 = time.monotonic()
    rows: list[dict[str, Any]] = []
    findings: list[Any] = []  # the finding rows, made Findings column by column (auditors.findingrows)
    tasks_found: list[Finding] = []
    startup = 0.0
    if tasks and here:
        tasks_found = _run_here(tasks, inp, want_keys, progress, beside, rows, reader)
    elif tasks:
        # lazy: multiprocessing and concurrent.futures.process, for the pool only; see docs/imports.md
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        _preload()
        sharedwire.release()  # the driver's Kafka connections are not the forked workers' to hold
        n = max(1, min(workers, len(tasks)))
        pool = ProcessPoolExecutor(max_workers=n, mp_context=_context(inp.sink), initializer=_worker_init)
        try:
            startup = _run_pool(pool, tasks, inp, want_keys, progress, beside, (rows, findings), t0)
        except BrokenProcessPool:
            raise EosctlError(_died(pool)) from None
        finally:
            gc.unfreeze()  # the workers are forked (all of them at the first submit)
            # On an error or a signal: don't wait for running tasks; the caller's guard kills the workers.
            pool.shutdown(wait=False, cancel_futures=True)
    if findings:
        import pyarrow as pa  # lazy: see docs/imports.md

        tasks_found = findings_from_arrow(pa.Table.from_batches(findings))
    t1 = time.monotonic()
    found: list[Finding] = []
    if want_keys:
        progress(Step(PHASE_KEYS, 0, None))
        committed = [r for r in rows if r["rec"] == "committed"]
        if committed:
            if key_rule is None:
                raise ValueError("run_local needs a key_rule for a sink with a key column")
            found = key_rule(writers_table(committed))
    # The tasks' wall time after the pool started: start-up is its own phase (elapsed covers both).
    return outcome(rows, found, t1 - t0 - startup, time.monotonic() - t1 if want_keys else 0.0,
                   len(tasks), tasks_found), startup


def _run_here(tasks: list, inp: AuditInput, want_keys: bool, progress: Progress,
              beside: Callable[[], None] | None, rows: list[dict[str, Any]],
              reader: SinkReader | None) -> list[Finding]:
    """Every task in this process, one after the other, on the driver's reader when it has one (no second
    connection to the sink): the task's findings and rows as they are, no Arrow batches in between (those
    only carry them across a process boundary, and building them from Python values imports pandas, a
    quarter of a second: pyarrow's conversion asks whether each value is a pandas object)."""
    if beside is not None:
        beside()
    found: list[Finding] = []
    for done, items in enumerate(tasks, 1):
        with (nullcontext(reader) if reader is not None else open_task_reader(inp.sink, inp.settings, items)
              ) as task_reader, paused():
            result = audit_group(items, inp.source, task_reader, want_keys, inp.group, inp.content_check)
        rows.extend(result.rows)
        rows.extend(c for cs in result.committed.values() for c in cs)
        found.extend(result.findings)
        progress(Step(PHASE_TASKS, done, len(tasks)))
    return found


def _run_pool(pool: ProcessPoolExecutor, tasks: list, inp: AuditInput, want_keys: bool, progress: Progress,
              beside: Callable[[], None] | None, into: tuple[list, list], t0: float) -> float:
    """Run every task on the pool, sorting each result into (rows, findings); the pool's start-up
    time. A worker that dies raises BrokenProcessPool here, from a submit or a result."""
    # lazy: with the pool only (see run_local); see docs/imports.md
    from concurrent.futures import FIRST_COMPLETED, wait

    rows, findings = into
    # The workers are forked by these submits. A Ctrl-C or SIGHUP to the process group between a fork and
    # the worker's _worker_init would hit the worker with Python's own handlers (a KeyboardInterrupt
    # traceback per worker): the stop signals are held until the workers ignore them, and reach this
    # process right after, where they unwind the audit.
    with held():
        pending: set[Future[list[Any]]] = {
            pool.submit(_run_task, task, inp.source, inp.sink, inp.settings, want_keys, inp.group,
                        inp.content_check)
            for task in tasks}
    startup = time.monotonic() - t0  # the first submit forks the workers
    if beside is not None:
        beside()
    done = 0
    while pending:
        # A timed wait: the kernel may hand a stop signal to any thread (the pool's own), and Python runs its
        # handler only once the main thread is back in the interpreter; an untimed wait on a task that a
        # broker holds would keep the audit from unwinding until that task ends.
        finished, pending = wait(pending, timeout=SIGNAL_LOOK_S, return_when=FIRST_COMPLETED)
        if not finished:
            continue
        for fut in finished:
            for batch in fut.result():
                _sort_batch(batch, rows, findings)
            done += 1
        progress(Step(PHASE_TASKS, done, len(tasks)))
    return startup


def _died(pool: ProcessPoolExecutor, timeout: float = 5.0) -> str:
    """The one line for a worker that died mid-task (the OOM killer's SIGKILL, a crash in a library): which
    signal, when the pool still knows, and what to do. The caller's guard then kills the other workers."""
    codes = [c for c in _exit_codes(pool, timeout) if c]
    # The pool SIGTERMs the other workers once one died: the odd one out is the one that died first.
    codes.sort(key=lambda c: c == -signal.SIGTERM)
    how = ""
    if codes:
        code = codes[0]
        try:
            how = f" (killed by {signal.Signals(-code).name})" if code < 0 else f" (exit code {code})"
        except ValueError:
            how = f" (exit code {code})"
    return (f"a worker of the local engine died during the audit{how}; no verdict. If it ran out of memory, "
            "run with fewer partitions per worker or `--engine spark`, then audit again")


def _exit_codes(pool: ProcessPoolExecutor, timeout: float) -> list[int | None]:
    """Every worker's exit code, once the pool has reaped them all (None: still unknown at the deadline).

    The futures fail (BrokenProcessPool) before the pool's manager thread has terminated and joined the
    workers. A worker's status is read by whichever thread calls waitpid first: when the manager thread
    reaps a worker and this thread polls it before the manager stored the code, this thread's waitpid finds
    no child and the code reads None for a moment (the signal was missing from the line, once, under
    load). So the codes are read only when each is known, whichever thread reaped it, up to ``timeout``:
    the manager thread terminates the other workers right after failing the futures."""
    workers = list((getattr(pool, "_processes", None) or {}).values())
    deadline = time.monotonic() + timeout
    for worker in workers:
        while worker.exitcode is None and time.monotonic() < deadline:
            worker.join(0.05)  # reaps it here, or finds it reaped by the manager thread
            if worker.exitcode is None:
                time.sleep(0.01)  # reaped there, its code not stored yet: the manager thread's next step
    return [worker.exitcode for worker in workers]


def _sort_batch(batch: Any, rows: list[dict[str, Any]], findings: list[Any]) -> None:
    """A task's output batch to finding rows or other rows (as dicts: summaries, timings, committed
    ranges). A task yields findings in batches of their own: those are passed on whole, not filtered
    (100k findings' text copied again)."""
    import pyarrow.compute as pc  # lazy: see docs/imports.md

    is_finding = pc.equal(batch.column("rec"), "finding")
    if pc.all(is_finding).as_py():
        findings.append(batch)
    else:
        findings.append(batch.filter(is_finding))
        rows.extend(batch.filter(pc.invert(is_finding)).to_pylist())


def _run_task(items: tuple[WorkItem, ...], source: Source, sink: Sink, settings: TaskSettings,
              want_keys: bool, group: str | None, content: bool = False) -> list[Any]:
    import pyarrow as pa  # lazy: see docs/imports.md

    run = group_task([items], source, sink, settings, want_keys, group, content, key_rows=False)
    return list(run(iter([pa.record_batch([pa.array([0], pa.int64())], names=["id"])])))


def _preload() -> None:
    """Import what a task imports before forking: each worker would otherwise pay it (half a second on a
    busy laptop, most of a small audit)."""
    # pyarrow too: importing it in a worker forked from a parent with threads running (Spark's gateway,
    # librdkafka) crashed workers with SIGSEGV inside pyarrow's import.
    # lazy: see docs/imports.md
    import duckdb  # noqa: F401
    import pyarrow

    # pyarrow imports pandas at its first conversion of Python objects (a quarter to half a second):
    # once here, not in every worker.
    pyarrow.array(["x"])

    # What a task imports lazily, once here rather than in each forked worker (python -X importtime of a
    # pooled audit listed these twice: the driver's and each worker's).
    # lazy: see docs/imports.md
    import eosctl.cluster.logscan
    import eosctl.cluster.recordkeys
    import eosctl.cluster.wire
    import eosctl.rules.content
    import eosctl.txn.producerids
    import eosctl.txn.transactions  # noqa: F401

    # A forked worker must never finalize this process's objects: garbage it inherits (e.g. a closed
    # PostgreSQL connection's C objects) crashed workers in their first garbage collection. Frozen
    # objects are out of every collection until gc.unfreeze(), here once the workers are forked. No
    # gc.collect() first: garbage frozen with the rest is never collected in a worker either, and here
    # after the unfreeze; a collection walked every object of the capture before it (0.2-0.4 s at 100k
    # findings).
    gc.freeze()


def _worker_init() -> None:
    # Ctrl-C reaches the whole foreground process group: the parent handles it (and kills the pool);
    # workers that raised KeyboardInterrupt too would each print a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # A closed terminal's SIGHUP reaches the workers too: the parent handles it (kills the pool, removes
    # its temp dirs). A worker dying of it on its own broke the pool's queues under the parent.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):  # held by the parent while it forked this worker (_run_pool)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, set(STOP_SIGNALS))


def prepare_context(sink: Sink) -> None:
    """Spawned workers (a Delta sink, see _context) need multiprocessing's resource tracker, a process of
    its own that lives as long as this one (it exits when this process does). Started here, before the
    audit's guard takes stock of this process's children: stopped by the guard with the workers, it left
    the pool's semaphores unregistered and printed a traceback for each."""
    if _spawns(sink):
        from multiprocessing import resource_tracker  # lazy: for spawned workers; see docs/imports.md

        resource_tracker.ensure_running()


def _context(sink: Sink | None = None) -> Any:
    # fork: the workers start in milliseconds with eosctl, DuckDB and Arrow already imported (the audit
    # of a small pipeline must take about a second). macOS can't fork safely after Objective-C runtime
    # use; there (and where fork doesn't exist) workers are spawned. So they are for a Delta sink its
    # workers open with deltalake (not its pinned files): the library's runtime (tokio), started here by
    # the freeze, refuses to run in a forked child.
    import multiprocessing  # lazy: for the pool only (a small audit has none); see docs/imports.md

    return multiprocessing.get_context("spawn" if _spawns(sink) else "fork")


def _spawns(sink: Sink | None = None) -> bool:
    """Whether the pool's workers are spawned (see _context), answered without importing multiprocessing:
    it offers "fork" exactly where os.fork exists (multiprocessing.context, _concrete_contexts)."""
    return (sink is not None and library_needed(sink)) or sys.platform == "darwin" or not hasattr(os, "fork")
