"""`eosctl tui`: the Textual dashboard, live or on a snapshot file. Textual is imported only when it runs.

This is the one place that hands the TUI an audit runner: the TUI depends on the eosctl core only and
never imports the auditors package itself.
"""

from __future__ import annotations

import concurrent.futures
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from eosctl.base.errors import EosctlError
from eosctl.base.stopsignals import exit_code, handling, say_stopped
from eosctl.commands.options import DURATION, Seconds, config_file, duckdb_file, timeout_option


@click.command("tui")
@click.option(
    "-c",
    "--config",
    type=config_file(),
    envvar="EOSCTL_CONFIG",
    help="eosctl config file (env EOSCTL_CONFIG).",
)
@click.option("-p", "--pipeline", help="Pipeline in the config (its cluster, topics, group and sink).")
@click.option("--bootstrap", metavar="HOST:PORT", help="Cluster to watch (overrides the config).")
@timeout_option(watcher=True)
@click.option("-t", "--topic", "topics", multiple=True, help="Source topic (default: the pipeline's).")
@click.option("-g", "--group", help="Consumer group (default: the pipeline's).")
@click.option(
    "--refresh",
    "refresh",
    type=Seconds(min=0.5),
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    help="Auto-refresh period.",
)
@click.option(
    "--max-age",
    type=DURATION,
    default=None,
    help="An open transaction older than this counts as hanging, e.g. 90s, 15m [default: 15m, Kafka's "
    "max timeout; with --snapshot: the snapshot's own --max-age].",
)
@click.option(
    "--snapshot",
    "snapshot",
    type=duckdb_file(),
    help="Open a file written by `eosctl snapshot` instead of a cluster (no cluster needed).",
)
@click.option("--raw", is_flag=True,
              help="The Log view's records (v) as bytes, never decoded through the Schema Registry.")
def tui(
    config: str | None,
    pipeline: str | None,
    bootstrap: str | None,
    topics: tuple[str, ...],
    group: str | None,
    refresh: float,
    max_age: float | None,
    snapshot: str | None,
    raw: bool,
) -> None:
    """Live dashboard: overview, transactions, producers, lag, log, ledger and audit.

    \b
    Keys: 1-7 views, / filter, r refresh, p pause, ? help, ctrl+p command palette, q quit.
    With --snapshot FILE it opens an incident snapshot offline, labelled with its capture time.
    """
    if snapshot:
        if not Path(snapshot).is_file():
            raise EosctlError(
                f"{snapshot}: no such snapshot file (write one with `eosctl snapshot --out FILE`)"
            )
        from tui.sources import SnapshotSource  # lazy: tui.sources 208 ms at start-up

        source: Any = SnapshotSource(snapshot, max_age_s=max_age, raw=raw)
        source.fetch()  # a broken file is one line and exit 2, before the screen switches
    else:
        source = live_source(config, pipeline, bootstrap, topics, group, max_age, raw)
    from tui.app import EosApp  # lazy: tui.app 462 ms at start-up

    class Tui(EosApp):
        CSS_PATH = Path(sys.modules[EosApp.__module__].__file__).with_name(EosApp.CSS_PATH)  # not ours

        def on_load(self) -> None:
            # Textual runs thread workers on the loop's default executor, which asyncio.run() joins when the
            # app ends: a refresh waiting on the network (a black hole, the whole --timeout) kept `q` and a
            # closed terminal waiting for it. Daemon threads are left behind instead.
            import asyncio  # lazy: asyncio 19 ms at start-up

            asyncio.get_running_loop().set_default_executor(DaemonThreads())

        async def action_quit(self) -> None:
            watchdog(0, QUIT_GRACE_S)
            await super().action_quit()

        def on_unmount(self) -> None:
            # An audit the user started runs in a thread worker, which neither `q` nor a signal stops,
            # and the app's loop waits for that thread before it returns: stop what the audit started
            # (its pool or JVM) first, so that the worker fails at once.
            _stop_audits()

    app = Tui(source, refresh_seconds=refresh)
    threading._register_atexit(_no_waiting_at_exit)  # type: ignore[attr-defined]  (see the function)
    try:
        with _signals_quit(app):
            app.run()
    except EosctlError:
        _EXIT[0] = _EXIT[0] or 2
        raise
    finally:
        _stop_audits()
        if hasattr(source, "close"):  # the live source's admin clients, kept across refreshes
            source.close()
    _EXIT[0] = _EXIT[0] or app.return_code or 0
    if app.return_code:
        raise SystemExit(app.return_code)


def live_source(config: str | None, pipeline: str | None, bootstrap: str | None, topics: tuple[str, ...] = (),
                group: str | None = None, max_age: float | None = None, raw: bool = False) -> Any:
    """The TUI's live source for these options, with the audit runner its Audit tab runs (`a`)."""
    # lazy: eosctl.config.target 12 ms, tui.sources 208 ms at start-up
    from eosctl.config.target import resolve
    from tui.sources import LiveSource

    target = resolve(config, pipeline, bootstrap, topics, group, need_topics=True)
    return LiveSource(target, max_age_s=max_age, raw=raw,
                      run_audit=lambda target, progress: run_audit(target, progress, bootstrap))


# The status eosctl exits with once the TUI is done: a signal's (129, 130, 143) or the app's.
_EXIT = [0]
# How long threads the TUI left running get to end at exit.
EXIT_GRACE_S = 1.0
WORKER_THREAD = "eosctl-tui-worker"


# Once `q` or a signal asked the TUI to end, how long its shutdown may take before the process ends anyway:
# Textual's shutdown itself can block for good writing to a terminal that closed (its writer thread's queue
# full; seen with a SIGHUP during start-up, 3 of 3 tries), and nothing inside the app can unblock it. A
# terminal that is still there gets longer: ending then leaves it as Textual left it (on a machine at a load
# of 30, a normal quit took up to 7 s).
HANGUP_GRACE_S = 3.0
QUIT_GRACE_S = 20.0
_watching: list[bool] = []


def watchdog(signum: int, grace_s: float) -> None:
    """End the process ``grace_s`` from now if it is still running then: with the signal's line and status
    (``signum`` 0: `q`, the status the app would have)."""
    if _watching:
        return
    _watching.append(True)

    def end() -> None:
        time.sleep(grace_s)
        if signum:
            try:
                say_stopped(signum)
            except OSError:  # a terminal that closed: nowhere to say it
                pass
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        _end_now(exit_code(signum) if signum else _EXIT[0])

    threading.Thread(target=end, name="eosctl-tui-exit", daemon=True).start()


def _no_waiting_at_exit() -> None:
    """Python joins every non-daemon thread before it exits; a thread still inside a client library's wait
    (a Kafka bootstrap in a black hole, for the whole --timeout) kept a TUI whose terminal closed running
    with no terminal (parent 1). Called by threading's exit hook, before those joins (the line the command
    says is already out): threads still running after EXIT_GRACE_S end with the process. The TUI's own
    workers (daemon threads) get the same grace: one the interpreter ends while it is inside a library's C++
    (DuckDB) aborts the process (std::terminate: SIGABRT instead of the signal's status)."""
    deadline = time.monotonic() + EXIT_GRACE_S
    others = [t for t in threading.enumerate() if t is not threading.main_thread()
              and (not t.daemon or t.name == WORKER_THREAD)]
    for t in others:
        t.join(max(0.0, deadline - time.monotonic()))
    if any(t.is_alive() for t in others):
        sys.stdout.flush()
        sys.stderr.flush()
        _end_now(_EXIT[0])


def _end_now(status: int) -> None:
    """End the process without unwinding the threads still running: what their `finally` blocks would
    remove is removed first (an audit's pool or JVM, its frozen sink copy: a worker thread still waiting on
    its dead pool left the copy behind under load)."""
    try:
        _stop_audits()
        files = sys.modules.get("eosctl.base.files")  # imported when a temp dir was made
        if files is not None:
            files.remove_open_temp_dirs()
    finally:
        os._exit(status)


class DaemonThreads(concurrent.futures.ThreadPoolExecutor):  # asyncio takes only a ThreadPoolExecutor
    """Runs each job in a daemon thread of its own and never waits for one at shutdown: the TUI's workers
    only read (a refresh, a log page, an audit whose pool or JVM _stop_audits ends), so one still blocked
    when the app quits is left to die with the process."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as e:  # handed to the worker that awaits it
                future.set_exception(e)

        threading.Thread(target=run, name=WORKER_THREAD, daemon=True).start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass  # never wait (see the class)


def _stop_audits() -> None:
    guard = sys.modules.get("auditors.guard")  # imported when an audit ran
    if guard is not None:
        guard.stop_all()


@contextmanager
def _signals_quit(app: Any) -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP quit the app as `q` does, then count as the signal (one line, 130, 143 or
    129).

    Raised inside Textual's event loop, the KeyboardInterrupt eosctl's other commands unwind with would
    land in whichever callback runs (a traceback, or a hang with the terminal still raw). So the signal
    asks the loop to exit the app; once the terminal is restored, it is raised again for eosctl's own
    handler (eosctl.cli.unwind_on_signals)."""
    import asyncio  # lazy: asyncio 19 ms at start-up

    got: list[int] = []

    def on_signal(signum: int, frame: Any) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # before the app's loop runs or after it ended: unwind as any command
            _EXIT[0] = _EXIT[0] or exit_code(signum)
            watchdog(signum, HANGUP_GRACE_S if signum == signal.SIGHUP else QUIT_GRACE_S)
            handler = before[signum]
            if callable(handler):
                handler(signum, frame)
            raise KeyboardInterrupt() from None
        if not got:
            got.append(signum)
            _EXIT[0] = exit_code(signum)
            watchdog(signum, HANGUP_GRACE_S if signum == signal.SIGHUP else QUIT_GRACE_S)
            loop.call_soon_threadsafe(app.exit)


    with handling(on_signal) as before:
        yield
    if got:
        signal.raise_signal(got[0])


def run_audit(target: Any, progress: Any, bootstrap: str | None = None) -> Any:
    """The audit of the target's pipeline, as `eosctl audit -c FILE -p NAME` runs it: the engine its
    config's [audit] engine names, else the one the audit's size picks (auditors.engine.pick); progress:
    eosctl.base.progress.Progress. A pipeline of hops (the reference pipeline's default) is audited hop by
    hop, and one of several sinks sink by sink in one report, each hop on ``bootstrap`` if the TUI was
    given one; the auditors finish the report as they finish `eosctl audit`'s (auditors.passes: the
    upstream stage, the config's waivers and levels)."""
    from auditors import EngineOptions, audit_pipeline  # lazy: auditors 66 ms at start-up

    return audit_pipeline(target, options=EngineOptions.resolve(target.config), progress=progress,
                          bootstrap=bootstrap)
