"""`eosctl tui`: the Textual dashboard, live or on a snapshot file. Textual is imported only when it runs.

This is the one place that hands the TUI an audit runner and what stops an audit's pool or JVM: the TUI
depends on the eosctl core only and never imports the auditors package itself. How the app runs and how
the process ends is the app's (tui.app.EosApp.serve, tui.ending).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from eosctl.base.errors import EosctlError
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
        from tui.sources import SnapshotSource  # lazy: see docs/imports.md

        source: Any = SnapshotSource(snapshot, max_age_s=max_age, raw=raw)
        source.fetch()  # a broken file is one line and exit 2, before the screen switches
    else:
        source = live_source(config, pipeline, bootstrap, topics, group, max_age, raw)
    from tui.app import EosApp  # lazy: see docs/imports.md
    from tui.ending import Ending  # lazy: tui.app imports it too; see docs/imports.md

    status = EosApp(source, refresh_seconds=refresh, ending=Ending(stop_work=_stop_audits)).serve()
    if status:
        raise SystemExit(status)


def live_source(config: str | None, pipeline: str | None, bootstrap: str | None, topics: tuple[str, ...] = (),
                group: str | None = None, max_age: float | None = None, raw: bool = False) -> Any:
    """The TUI's live source for these options, with the audit runner its Audit tab runs (`a`)."""
    # lazy: see docs/imports.md
    from eosctl.config.target import resolve
    from tui.sources import LiveSource

    target = resolve(config, pipeline, bootstrap, topics, group, need_topics=True)
    return LiveSource(target, max_age_s=max_age, raw=raw,
                      run_audit=lambda target, progress: run_audit(target, progress, bootstrap))


def _stop_audits() -> None:
    """What the TUI's audits started (a pool, a JVM), stopped: the app's Ending calls it on the way out."""
    guard = sys.modules.get("auditors.guard")  # imported when an audit ran
    if guard is not None:
        guard.stop_all()


def run_audit(target: Any, progress: Any, bootstrap: str | None = None) -> Any:
    """The audit of the target's pipeline, as `eosctl audit -c FILE -p NAME` runs it: the engine its
    config's [audit] engine names, else the one the audit's size picks (auditors.engine.pick); progress:
    eosctl.base.progress.Progress. A pipeline of hops (the reference pipeline's default) is audited hop by
    hop, and one of several sinks sink by sink in one report, each hop on ``bootstrap`` if the TUI was
    given one; the auditors finish the report as they finish `eosctl audit`'s (auditors.passes: the
    upstream stage, the config's waivers and levels)."""
    from auditors import EngineOptions, audit_pipeline  # lazy: see docs/imports.md

    return audit_pipeline(target, options=EngineOptions.resolve(target.config), progress=progress,
                          bootstrap=bootstrap)
