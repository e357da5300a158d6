"""How the process that runs the TUI ends: the status it exits with, the grace a shutdown gets before the
process ends anyway, the signals that quit the app as `q` does, and the threads its workers run in.

An ``Ending`` is handed to ``tui.app.EosApp`` by `eosctl tui` (with ``stop_work``: what stops an audit's
pool or JVM, which only the command may import); an app built without one (the tests, a host app) leaves
its process alone.
"""

from __future__ import annotations

import concurrent.futures
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from eosctl.base.stopsignals import exit_code, handling, say_stopped

# How long threads the TUI left running get to end once the interpreter exits.
EXIT_GRACE_S = 1.0
# Once `q` or a signal asked the TUI to end, how long its shutdown may take before the process ends anyway:
# Textual's shutdown itself can block for good writing to a terminal that closed (its writer thread's queue
# full; seen with a SIGHUP during start-up, 3 of 3 tries), and nothing inside the app can unblock it. A
# terminal that is still there gets longer: ending then leaves it as Textual left it (on a machine at a load
# of 30, a normal quit took up to 7 s).
HANGUP_GRACE_S = 3.0
QUIT_GRACE_S = 20.0
WORKER_THREAD = "eosctl-tui-worker"


class Exitable(Protocol):
    def exit(self) -> None: ...


def nothing_to_stop() -> None:
    """The ``stop_work`` of a TUI that starts no audit."""


class Ending:
    """One run's way out (see the module). ``status``: what the process exits with once the app is done (a
    signal's 129, 130 or 143, a config error's 2, else the app's own)."""

    def __init__(self, stop_work: Callable[[], None] = nothing_to_stop) -> None:
        self.stop_work = stop_work
        self.status = 0
        self._deadline_set = False

    def settle(self, status: int) -> None:
        """The status to exit with, unless one was settled before (the first cause wins: a signal's)."""
        self.status = self.status or status

    def within(self, grace_s: float, signum: int = 0) -> None:
        """End the process ``grace_s`` from now if it still runs then: with the signal's line and status
        (``signum`` 0: `q`, the status settled by then). Only the first call counts."""
        if self._deadline_set:
            return
        self._deadline_set = True

        def end() -> None:
            time.sleep(grace_s)
            if signum:
                try:
                    say_stopped(signum)
                except OSError:  # a terminal that closed: nowhere to say it
                    pass
            _flush()
            self.end_now(exit_code(signum) if signum else self.status)

        threading.Thread(target=end, name="eosctl-tui-exit", daemon=True).start()

    def at_exit(self) -> None:
        """Once the interpreter exits (the command's line is out), threads still running get EXIT_GRACE_S,
        then the process ends with ``status``.

        Python joins every non-daemon thread before it exits; one still inside a client library's wait (a
        Kafka bootstrap in a black hole, for the whole --timeout) kept a TUI whose terminal closed running
        with no terminal (parent 1). The workers' own threads are among them (see WorkerThreads). The main
        thread counts as ended when that join begins (threading's shutdown marks it so before joining the
        others), which is what this watcher waits for."""

        def watch() -> None:
            threading.main_thread().join()
            deadline = time.monotonic() + EXIT_GRACE_S
            others = [t for t in threading.enumerate() if not t.daemon and t is not threading.main_thread()]
            for t in others:
                t.join(max(0.0, deadline - time.monotonic()))
            if any(t.is_alive() for t in others):
                _flush()
                self.end_now(self.status)

        threading.Thread(target=watch, name="eosctl-tui-at-exit", daemon=True).start()

    def end_now(self, status: int) -> None:
        end_now(status, self.stop_work)

    @contextmanager
    def signals_quit(self, app: Exitable) -> Iterator[None]:
        """Ctrl-C, SIGTERM and SIGHUP quit the app as `q` does, then count as the signal (one line, 130, 143
        or 129).

        Raised inside Textual's event loop, the KeyboardInterrupt eosctl's other commands unwind with would
        land in whichever callback runs (a traceback, or a hang with the terminal still raw). So the signal
        asks the loop to exit the app; once the terminal is restored, it is raised again for eosctl's own
        handler (eosctl.cli.unwind_on_signals)."""
        import asyncio  # lazy: see docs/imports.md

        got: list[int] = []

        def grace(signum: int) -> float:
            return HANGUP_GRACE_S if signum == signal.SIGHUP else QUIT_GRACE_S

        def on_signal(signum: int, frame: Any) -> None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # before the app's loop runs or after it ended: unwind as any command
                self.settle(exit_code(signum))
                self.within(grace(signum), signum)
                handler = before[signum]
                if callable(handler):
                    handler(signum, frame)
                raise KeyboardInterrupt() from None
            if not got:
                got.append(signum)
                self.status = exit_code(signum)
                self.within(grace(signum), signum)
                loop.call_soon_threadsafe(app.exit)

        with handling(on_signal) as before:
            yield
        if got:
            signal.raise_signal(got[0])


def end_now(status: int, stop_work: Callable[[], None] = nothing_to_stop) -> None:
    """End the process without unwinding the threads still running: what their `finally` blocks would
    remove is removed first (an audit's pool or JVM, its frozen sink copy: a worker thread still waiting on
    its dead pool left the copy behind under load)."""
    try:
        stop_work()
        files = sys.modules.get("eosctl.base.files")  # imported when a temp dir was made
        if files is not None:
            files.remove_open_temp_dirs()
    finally:
        os._exit(status)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


class WorkerThreads(concurrent.futures.ThreadPoolExecutor):  # asyncio takes only a ThreadPoolExecutor
    """The loop's default executor, which Textual runs thread workers on: each job in a thread of its own,
    and never a wait for one when the app ends (asyncio.run() joins the default executor: a refresh waiting
    on the network, a black hole for the whole --timeout, kept `q` and a closed terminal waiting for it).

    The TUI's workers only read (a refresh, a log page, an audit whose pool or JVM ``stop_work`` ends), so
    one still blocked when the app quits is left to Ending.at_exit's grace. They are not daemon threads:
    one the interpreter ends while it is inside a library's C++ (DuckDB) aborts the process
    (std::terminate: SIGABRT instead of the signal's status), so the interpreter waits for them, that long."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as e:  # handed to the worker that awaits it
                future.set_exception(e)

        threading.Thread(target=run, name=WORKER_THREAD).start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass  # never wait (see the class)
