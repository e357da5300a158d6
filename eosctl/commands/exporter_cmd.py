"""`eosctl exporter`: Prometheus metrics of pipelines from their live models, and a continuous audit.

The command parses its options, wires the audit engine in and says how it ended; the server, the refresh
and audit loops and the textfile writer are eosctl/exporter/. The metrics are eosctl.exporter.metrics
(reference: docs/metrics.md).

SIGTERM and Ctrl-C stop the server, the audit (its workers killed, its temp files removed) and the clients,
then exit 143 / 130 with one line. A bad config, a bad --listen, a port in use or a cluster that does not
answer the first refresh: one line, exit 2.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from eosctl.base.errors import EosctlError
from eosctl.base.files import temp_dir
from eosctl.base.stopsignals import exit_code, say_stopped, stop_event
from eosctl.commands.options import DURATION, OutputFile, config_file, timeout_option

if TYPE_CHECKING:
    from eosctl.config.target import Target

DEFAULT_LISTEN = "127.0.0.1:9308"  # kafka_exporter's port: where lag dashboards expect an exporter


@click.command("exporter")
@click.option("--config", "-c", envvar="EOSCTL_CONFIG", type=config_file(),
              help="eosctl config file (env EOSCTL_CONFIG).")
@click.option("--pipeline", "-p", "pipelines", multiple=True,
              help="Pipeline in the config (repeatable; default: every pipeline of the config).")
@click.option("--bootstrap", help="HOST:PORT of the cluster (overrides the config).")
@click.option("--topic", "-t", "topics", multiple=True, help="Topic (with --bootstrap and no pipeline).")
@click.option("--group", "-g", help="Consumer group (with --bootstrap and no pipeline).")
@click.option("--listen", default=DEFAULT_LISTEN, show_default=True, metavar="HOST:PORT",
              help="Where /metrics is served (port 0: any free port, printed at start).")
@click.option("--interval", type=DURATION, default="15s", show_default=True,
              help="How often the models are refreshed (a scrape serves the latest refresh).")
@click.option("--audit-every", type=DURATION, default="10m", show_default=True,
              help="Run the audit of each pipeline with a sink this often (0: never).")
@click.option("--audit-state", type=click.Path(file_okay=False), metavar="DIR",
              help="Where the continuous audit keeps one state file per pipeline (PIPELINE.audit-state), so "
                   "each audit reads only what is new since the last (as `audit --incremental`; a DuckDB "
                   "sink) and a restart goes on from there [default: a temporary directory, removed at "
                   "exit].")
@click.option("--full-every", type=DURATION, default="1d", show_default=True,
              help="A full audit of each pipeline this often (an incremental one can't see a sink row "
                   "deleted or rewritten in place).")
@click.option("--max-age", type=DURATION, default="15m", show_default=True,
              help="An open transaction at least this old counts in eosctl_hanging_transactions.")
@click.option("--partition-metrics", type=click.Choice(["on", "off"]), default="on", show_default=True,
              help="off: per-topic and per-group sums instead of one series per partition.")
@timeout_option(watcher=True)
@click.option("--once", is_flag=True, help="Read once, write --textfile and exit (cron, node_exporter).")
@click.option("--textfile", type=OutputFile(),
              help="With --once: the file to write, atomically (node_exporter's textfile collector); it "
                   "replaces an earlier reading of eosctl's, any other file only with --force.")
@click.option("--force", is_flag=True, help="Replace --textfile even if it is not an earlier reading.")
def exporter(config: str | None, pipelines: tuple[str, ...], bootstrap: str | None, topics: tuple[str, ...],
             group: str | None, listen: str, interval: float, audit_every: float, max_age: float,
             partition_metrics: str, once: bool, textfile: str | None, force: bool = False,
             audit_state: str | None = None, full_every: float = 86_400.0) -> None:
    """Serve Prometheus metrics: transaction-aware lag, open and hanging transactions, fencing, audits.

    \b
    eosctl_consumer_lag_records   data records a read_committed consumer has left (reaches 0)
    eosctl_consumer_lag_offsets   HW - committed, what HW-based exporters report (1 behind a marker)
    eosctl_hanging_transactions   open transactions older than --max-age
    eosctl_audit_findings         the last audit's findings by kind (--audit-every)
    \b
    Every metric is described in docs/metrics.md; sample_configs/eosctl.rules.yml has alert rules.
    A scrape serves the state of the last refresh and never reads the cluster itself.
    """
    if once != (textfile is not None):
        raise click.UsageError("--once and --textfile go together: --once --textfile FILE")
    if interval <= 0:
        raise click.BadParameter("must be more than 0 (examples: 15s, 1m)", param_hint="'--interval'")
    host, port = parse_listen(listen)
    from eosctl.exporter import textfile as textfiles  # lazy: see docs/imports.md

    targets = _targets(config, pipelines, bootstrap, topics, group)
    options = _audit_options(targets) if audit_every > 0 else None
    if audit_state is not None and os.path.exists(audit_state) and not os.path.isdir(audit_state):
        raise click.BadParameter(f"{audit_state!r} is not a directory", param_hint="'--audit-state'")
    with _state_dir(audit_state, options is not None) as states:
        _audit = _Auditor(states, full_every, textfiles.reads(config, targets))
        _serve(targets, options, _audit, once, textfile, config, force, max_age, partition_metrics, host,
               port, interval, audit_every)


def _serve(targets: list[Target], options: Any, _audit: Any, once: bool, textfile: str | None,
           config: str | None, force: bool, max_age: float, partition_metrics: str, host: str, port: int,
           interval: float, audit_every: float) -> None:
    """Read once into --textfile, or serve /metrics until stopped."""
    # lazy: see docs/imports.md
    from eosctl.exporter import http, loops
    from eosctl.exporter import textfile as textfiles
    from eosctl.exporter.metrics import OPENMETRICS, Exposition

    if once:
        assert textfile is not None
        reads = textfiles.reads(config, targets)
        textfiles.check_textfile(textfile, reads, force)
        with loops.live_sources(targets, max_age) as sources:
            loops.first_refresh(sources)
            if options is not None:
                loops.audit_all(_audit, sources, targets, options)
            textfiles.write_textfile(textfile, Exposition(sources, partition_metrics == "on").render()[0],
                                     reads, force)
        return

    server = http.bind(host, port)
    try:
        with loops.live_sources(targets, max_age) as sources, stop_event() as stop:
            # /metrics answers from the start: eosctl_up 0 with the reason until the first refresh ends (it
            # may wait --timeout for a cluster that does not answer: a black hole).
            for s in sources:
                s.interval_s = interval
                s.starting("the first refresh has not finished yet")
            exposition = Exposition(sources, partition_metrics == "on")
            server.exposition = exposition  # type: ignore[attr-defined]
            threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True).start()
            bound = server.server_address
            where = f"http://{http.hostport(str(bound[0]), int(bound[1]))}/metrics"
            click.echo(f"eosctl exporter: listening on {where} (eosctl_up 0 until the first refresh ends)",
                       err=True)
            loops.first_refresh(sources, outage_ok=True)
            exposition.parts(OPENMETRICS, gzipped=True)  # what Prometheus asks: its next scrape is warm
            click.echo(f"eosctl exporter: serving {where} for {len(sources)} pipeline(s), refresh every "
                       f"{interval:g}s", err=True)
            with loops.auditing(_audit, _stop_audits, sources, targets, options, audit_every, stop,
                                exposition):
                loops.refresh_loop(sources, exposition, interval, stop)
            server.shutdown()
    finally:
        server.server_close()
    assert stop.signum is not None
    say_stopped(stop.signum)
    raise SystemExit(exit_code(stop.signum))


def parse_listen(listen: str) -> tuple[str, int]:
    """--listen HOST:PORT ([::1]:PORT for IPv6) as (host, port)."""
    host, sep, port = listen.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not (port.isascii() and port.isdigit()) or int(port) > 65535:
        raise click.BadParameter(f"{listen!r} is not HOST:PORT (e.g. {DEFAULT_LISTEN}, 0.0.0.0:9308, "
                                 "[::1]:9308)", param_hint="'--listen'")
    return host, int(port)


def _targets(config: str | None, pipelines: tuple[str, ...], bootstrap: str | None, topics: tuple[str, ...],
             group: str | None) -> list[Target]:
    # lazy: see docs/imports.md
    from eosctl.config.file import load_config
    from eosctl.config.target import resolve

    read = load_config(config) if config else None  # once: every pipeline resolved from this reading
    names = list(dict.fromkeys(pipelines))
    if not names and read is not None and not bootstrap:
        names = sorted(read.pipelines)
    if not names:
        return [resolve(read, None, bootstrap, topics, group)]
    return [resolve(read, name, bootstrap, topics, group) for name in names]


@contextmanager
def _state_dir(given: str | None, auditing: bool) -> Iterator[str | None]:
    """The continuous audit's state directory: --audit-state (made if need be), else a temporary one for
    the exporter's life."""
    if not auditing:
        yield None
        return
    if given is not None:
        yield given  # made by the first audit (a run that fails before it leaves nothing behind)
        return
    with temp_dir("eosctl-audit-state-") as path:
        yield path


class _Auditor:
    """The continuous audit of one pipeline: incremental where its sink is a DuckDB file (its state in the
    state directory), the full audit of the engines otherwise."""

    def __init__(self, states: str | None, full_every: float, reads: tuple[str, ...]) -> None:
        self.states, self.full_every, self.reads = states, full_every, reads

    def __call__(self, target: Target, sink: Any, **kwargs: Any) -> Any:
        # lazy: see docs/imports.md
        import auditors  # only when an audit runs (--audit-every 0 never loads the engines)

        hops = target.pipeline is not None and target.pipeline.hops
        if self.states is not None and sink.mode != "offsets" and not hops:
            # A state sink of any kind: its kept records per key (auditors.stateinc), its rows read again.
            return auditors.audit_incremental(target, sink, self._state(target), full_every=self.full_every,
                                              started=kwargs.get("started"), reads=self.reads,
                                              option="--audit-state")
        # A sink with a retention, a DLQ or a route is audited in full (the incremental audit judges none).
        if self.states is None or not sink.duckdb or hops or sink.retention or sink.dlq_topic or sink.route:
            return auditors.audit(target, sink, **kwargs)
        content = getattr(kwargs.get("options"), "content_check", True)  # as the full audit's
        return auditors.audit_incremental(target, sink, self._state(target), full_every=self.full_every,
                                          started=kwargs.get("started"), reads=self.reads,
                                          option="--audit-state", content=content)

    def _state(self, target: Target) -> str:
        """The pipeline's state file in the state directory (made if need be)."""
        assert self.states is not None
        try:
            os.makedirs(self.states, exist_ok=True)
        except OSError as e:
            raise EosctlError(f"cannot create --audit-state {self.states}: {e.strerror or e}") from None
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", target.pipeline.name if target.pipeline else "default")
        return os.path.join(self.states, f"{name}.audit-state")


def _stop_audits() -> None:
    from auditors import guard  # lazy: see docs/imports.md

    guard.stop_all()


def _audit_options(targets: list[Target]) -> Any:
    """The engine options of the continuous audit, as `eosctl audit`'s: the config's [audit] engine, else
    the one each audit's size picks."""
    from auditors import EngineOptions  # lazy: see docs/imports.md

    config = next((t.config for t in targets if t.config is not None), None)
    return EngineOptions.resolve(config)


COMMANDS = [exporter]
