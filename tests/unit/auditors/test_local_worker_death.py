"""A local-engine worker killed mid-audit: the same one line whichever part of the pool notices first.

When a worker dies, CPython's ProcessPoolExecutor fails the futures first (the audit's thread wakes up and
writes its line), then its manager thread terminates the other workers and joins them all. Both threads
may call waitpid on the dead worker; the one that loses finds no child. Under load the audit read the
codes while the manager thread had reaped the dead worker but not stored its code: the line lost its
"(killed by SIGKILL)" (issue 42). Each order is forced here on a real pool of forked workers.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import process as cf_process
from multiprocessing import popen_fork

import pytest

from auditors import local

LINE = ("a worker of the local engine died during the audit (killed by SIGKILL); no verdict. If it ran out "
        "of memory, run with fewer partitions per worker or `--engine spark`, then audit again")


def _block(seconds: float) -> None:
    time.sleep(seconds)  # a task still running when its worker is killed


def _pool_with_a_killed_worker() -> tuple[ProcessPoolExecutor, int, list]:
    pool = ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("fork"),
                               initializer=local._worker_init)
    futures = [pool.submit(_block, 30) for _ in range(2)]  # the first submit forks both workers
    victim = next(iter(pool._processes))
    os.kill(victim, signal.SIGKILL)
    return pool, victim, futures


def _broken(futures: list) -> None:
    """Wait (10 s at most) until the pool failed the tasks, as the audit's thread sees it."""
    for f in futures:
        assert isinstance(f.exception(timeout=10), cf_process.BrokenProcessPool), "the pool never broke"


def _release_after(event: threading.Event, seconds: float) -> threading.Timer:
    timer = threading.Timer(seconds, event.set)
    timer.start()
    return timer


def test_the_audit_reads_the_codes_before_the_pool_reaps(monkeypatch):
    """The audit's thread first: the manager thread is held before it joins the workers."""
    go = threading.Event()
    join = cf_process._ExecutorManagerThread.join_executor_internals

    def held(self):
        go.wait(10)  # released by the test; never more than 10 s
        join(self)

    monkeypatch.setattr(cf_process._ExecutorManagerThread, "join_executor_internals", held)
    pool, _victim, futures = _pool_with_a_killed_worker()
    try:
        _broken(futures)
        assert local._died(pool) == LINE
    finally:
        go.set()
        pool.shutdown(wait=True, cancel_futures=True)


def test_the_pool_reaps_every_worker_before_the_audit_reads():
    """The manager thread first: it has terminated and joined every worker when the audit reads."""
    pool, _victim, futures = _pool_with_a_killed_worker()
    try:
        _broken(futures)
        manager = pool._executor_manager_thread
        if manager is not None:
            manager.join(10)
            assert not manager.is_alive(), "the pool's manager thread still running after 10 s"
        assert local._died(pool) == LINE
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def test_the_pool_reaped_the_dead_worker_but_has_not_stored_its_code(monkeypatch):
    """The race seen under load: the manager thread's waitpid has returned the dead worker's status, and
    the audit reads before the manager thread stores it (its own waitpid finds no child)."""
    reaped, release = threading.Event(), threading.Event()
    waitpid = os.waitpid
    victims: list[int] = []

    def slow_store(pid: int, options: int):
        out = waitpid(pid, options)
        if victims and out[0] == victims[0] and isinstance(threading.current_thread(),
                                                           cf_process._ExecutorManagerThread):
            reaped.set()
            release.wait(10)  # released by the test; never more than 10 s
        return out

    monkeypatch.setattr(popen_fork.os, "waitpid", slow_store)
    pool = ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("fork"),
                               initializer=local._worker_init)
    futures = [pool.submit(_block, 30) for _ in range(2)]
    victims.append(next(iter(pool._processes)))
    os.kill(victims[0], signal.SIGKILL)
    timer = None
    try:
        _broken(futures)
        assert reaped.wait(10), "the pool's manager thread never reaped the killed worker"
        # The manager thread stores the code only after this: the audit's line must wait for it.
        timer = _release_after(release, 0.3)
        assert local._died(pool) == LINE
    finally:
        release.set()
        if timer is not None:
            timer.cancel()
        pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize("code, how", [(-signal.SIGSEGV, " (killed by SIGSEGV)"), (3, " (exit code 3)")])
def test_the_line_names_the_first_death_not_the_pools_sigterms(code, how):
    """The pool SIGTERMs the survivors: the odd one out is the worker that died first."""

    class Worker:
        def __init__(self, exitcode: int) -> None:
            self.exitcode = exitcode

    class Pool:
        _processes = {1: Worker(-signal.SIGTERM), 2: Worker(code), 3: Worker(-signal.SIGTERM)}

    line = local._died(Pool(), timeout=0.1)
    assert line.startswith(f"a worker of the local engine died during the audit{how};")
