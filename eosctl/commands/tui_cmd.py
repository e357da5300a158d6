"""`eosctl tui`: the Textual dashboard, live or on a snapshot file. Textual is imported only when it runs.

This is the one place that hands the TUI an audit runner: the TUI depends on the eosctl core only and
never imports the auditors package itself.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from eosctl.base.errors import EosctlError
from eosctl.base.stopsignals import handling
from eosctl.commands.options import DURATION, Seconds, config_file, duckdb_file


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
def tui(
    config: str | None,
    pipeline: str | None,
    bootstrap: str | None,
    topics: tuple[str, ...],
    group: str | None,
    refresh: float,
    max_age: float | None,
    snapshot: str | None,
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

        source: Any = SnapshotSource(snapshot, max_age_s=max_age)
        source.fetch()  # a broken file is one line and exit 2, before the screen switches
    else:
        # lazy: eosctl.config.target 12 ms, tui.sources 208 ms at start-up
        from eosctl.config.target import resolve
        from tui.sources import LiveSource

        target = resolve(config, pipeline, bootstrap, topics, group, need_topics=True)
        source = LiveSource(target, max_age_s=max_age, run_audit=run_audit)
    from tui.app import EosApp  # lazy: tui.app 462 ms at start-up

    class Tui(EosApp):
        CSS_PATH = Path(sys.modules[EosApp.__module__].__file__).with_name(EosApp.CSS_PATH)  # not ours

        def on_unmount(self) -> None:
            # An audit the user started runs in a thread worker, which neither `q` nor a signal stops,
            # and the app's loop waits for that thread before it returns: stop what the audit started
            # (its pool or JVM) first, so that the worker fails at once.
            _stop_audits()

    app = Tui(source, refresh_seconds=refresh)
    try:
        with _signals_quit(app):
            app.run()
    finally:
        _stop_audits()
        if hasattr(source, "close"):  # the live source's admin clients, kept across refreshes
            source.close()
    if app.return_code:
        raise SystemExit(app.return_code)


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
            handler = before[signum]
            if callable(handler):
                handler(signum, frame)
            raise KeyboardInterrupt() from None
        if not got:
            got.append(signum)
            loop.call_soon_threadsafe(app.exit)


    with handling(on_signal) as before:
        yield
    if got:
        signal.raise_signal(got[0])


def run_audit(target: Any, progress: Any) -> Any:
    """The audit of the target's pipeline (local engine unless the config's [audit] engine says spark);
    progress: eosctl.base.progress.Progress."""
    from auditors import EngineOptions, audit  # lazy: auditors 66 ms at start-up

    options = EngineOptions.resolve(target.config, "local")
    return audit(target, target.pipeline.sink, options=options, progress=progress)
