"""`eosctl exporter`: Prometheus metrics of pipelines from their live models, and a continuous audit.

One LiveModel per pipeline, refreshed every --interval by the main thread; an HTTP server thread answers
/metrics from the latest state (a scrape never reads the cluster); an audit thread runs the audit every
--audit-every, on the local engine unless the config's [audit] engine says otherwise. The metrics are
eosctl.metrics (reference: docs/metrics.md).

Runs for weeks: a refresh that fails (the broker is away) sets eosctl_up 0 and keeps serving the last
values, eosctl_section_age_seconds saying how old they are; the next refresh reconnects. SIGTERM and Ctrl-C
stop the server, the audit (its workers killed, its temp files removed) and the clients, then exit
143 / 130 with one line. A bad config, a bad --listen, a port in use or a cluster that does not answer the
first refresh: one line, exit 2.
"""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import click

from eosctl.commands.options import DURATION, OutputFile, config_file

if TYPE_CHECKING:
    from eosctl.metrics import Exposition, Source
    from eosctl.target import Target

DEFAULT_LISTEN = "127.0.0.1:9308"  # kafka_exporter's port: where lag dashboards expect an exporter
OPENMETRICS = "application/openmetrics-text; version=1.0.0"  # eosctl.metrics.OPENMETRICS (imported late)
# The HTTP server's bounds: connections served at once (each a thread), and how long one socket operation
# of a request may wait (reading the request line and headers, writing the body).
MAX_CONNECTIONS = 64
REQUEST_TIMEOUT_S = 10.0


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
@click.option("--max-age", type=DURATION, default="15m", show_default=True,
              help="An open transaction at least this old counts in eosctl_hanging_transactions.")
@click.option("--partition-metrics", type=click.Choice(["on", "off"]), default="on", show_default=True,
              help="off: per-topic and per-group sums instead of one series per partition.")
@click.option("--once", is_flag=True, help="Read once, write --textfile and exit (cron, node_exporter).")
@click.option("--textfile", type=OutputFile(),
              help="With --once: the file to write, atomically (node_exporter's textfile collector); it "
                   "replaces an earlier reading of eosctl's, any other file only with --force.")
@click.option("--force", is_flag=True, help="Replace --textfile even if it is not an earlier reading.")
def exporter(config: str | None, pipelines: tuple[str, ...], bootstrap: str | None, topics: tuple[str, ...],
             group: str | None, listen: str, interval: float, audit_every: float, max_age: float,
             partition_metrics: str, once: bool, textfile: str | None, force: bool = False) -> None:
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
    targets = _targets(config, pipelines, bootstrap, topics, group)
    options = _audit_options(targets) if audit_every > 0 else None
    if once:
        assert textfile is not None
        reads = _reads(config, targets)
        check_textfile(textfile, reads, force)
        with _sources(targets, max_age) as sources:
            _first_refresh(sources)
            if options is not None:
                _audit_all(sources, targets, options)
            from eosctl.metrics import Exposition

            write_textfile(textfile, Exposition(sources, partition_metrics == "on").render()[0], reads, force)
        return
    server = bind(host, port)
    try:
        with _sources(targets, max_age) as sources, _signals() as stop:
            _first_refresh(sources)
            from eosctl.metrics import Exposition

            exposition = Exposition(sources, partition_metrics == "on")
            exposition.parts(OPENMETRICS, gzipped=True)  # what Prometheus asks: its first scrape never waits
            server.exposition = exposition  # type: ignore[attr-defined]
            threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True).start()
            bound = server.server_address
            click.echo(f"eosctl exporter: serving http://{_hostport(bound[0], bound[1])}/metrics for "
                       f"{len(sources)} pipeline(s), refresh every {interval:g}s", err=True)
            with _auditing(sources, targets, options, audit_every, stop, exposition):
                _refresh_loop(sources, exposition, interval, stop)
            server.shutdown()
    finally:
        server.server_close()
    from eosctl.stopsignals import exit_code, say_stopped

    say_stopped(stop.signum)
    raise SystemExit(exit_code(stop.signum))


# ---- set-up -------------------------------------------------------------------------------------------


def parse_listen(listen: str) -> tuple[str, int]:
    """--listen HOST:PORT ([::1]:PORT for IPv6) as (host, port)."""
    host, sep, port = listen.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not (port.isascii() and port.isdigit()) or int(port) > 65535:
        raise click.BadParameter(f"{listen!r} is not HOST:PORT (e.g. {DEFAULT_LISTEN}, 0.0.0.0:9308, "
                                 "[::1]:9308)", param_hint="'--listen'")
    return host, int(port)


def bind(host: str, port: int) -> ThreadingHTTPServer:
    """The HTTP server, bound (not serving yet): a port in use is one line before anything else starts."""
    from eosctl.errors import EosctlError

    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except (OSError, UnicodeError) as e:
        raise EosctlError(f"--listen {_hostport(host, port)}: cannot resolve {host!r} ({e}); pass an address "
                          "of this machine, e.g. 127.0.0.1 or 0.0.0.0") from None

    class Server(ThreadingHTTPServer):
        address_family = family
        daemon_threads = True
        request_queue_size = MAX_CONNECTIONS  # the listen backlog

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

        def process_request(self, request: Any, client_address: Any) -> None:
            # At most MAX_CONNECTIONS threads: one more connection is closed at once, unanswered (3,000
            # idle ones each held a thread and wedged the exporter). A scrape retries at its next interval.
            if not self.slots.acquire(blocking=False):
                self.shutdown_request(request)
                return
            try:
                super().process_request(request, client_address)
            except BaseException:
                self.slots.release()
                raise

        def process_request_thread(self, request: Any, client_address: Any) -> None:
            try:
                super().process_request_thread(request, client_address)
            finally:
                self.slots.release()

        def handle_error(self, request: Any, client_address: Any) -> None:
            # A client that went away (a scrape timeout, `curl | head`) or never finished its request is
            # not the exporter's error: nothing to say. Anything else: one line, no traceback.
            import sys

            e = sys.exc_info()[1]
            if isinstance(e, ConnectionError | TimeoutError):
                return
            from eosctl.safetext import term

            click.echo(f"eosctl exporter: a request from {term(str(client_address[0]))} failed: "
                       f"{term(type(e).__name__)}: {term(str(e))[:200]}", err=True)

    try:
        return Server((host, port), _Handler)
    except OSError as e:
        why = "address already in use" if e.errno == 98 else (e.strerror or str(e))
        raise EosctlError(f"--listen {_hostport(host, port)}: {why}; pick another with --listen HOST:PORT") \
            from None


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _targets(config: str | None, pipelines: tuple[str, ...], bootstrap: str | None, topics: tuple[str, ...],
             group: str | None) -> list[Target]:
    from eosctl.config import load_config
    from eosctl.target import resolve

    names = list(dict.fromkeys(pipelines))
    if not names and config and not bootstrap:
        names = sorted(load_config(config).pipelines)
    if not names:
        return [resolve(config, None, bootstrap, topics, group)]
    return [resolve(config, name, bootstrap, topics, group) for name in names]


def _audit_options(targets: list[Target]) -> Any:
    """The engine options of the continuous audit: the config's [audit] engine, else the local engine."""
    from auditors import EngineOptions

    config = next((t.config for t in targets if t.config is not None), None)
    return EngineOptions.resolve(config, "local")


@contextmanager
def _sources(targets: list[Target], max_age: float) -> Iterator[list[Source]]:
    """One live model per target, closed on every way out."""
    from eosctl.live import LiveModel
    from eosctl.metrics import Source

    sources: list[Source] = []
    try:
        for t in targets:
            model = LiveModel(t, max_age_s=max_age, long_lived=True)
            sources.append(Source(t.cluster.name, t.pipeline.name if t.pipeline else "", model))
        yield sources
    finally:
        for s in sources:
            s.model.close()


def _first_refresh(sources: list[Source]) -> None:
    """The first reading of every pipeline; a cluster that does not answer is an error, not an outage (a
    wrong address must not look like a broker that went away)."""
    for s in sources:
        cap = s.model.refresh()
        s.refreshed(cap)
        _log_sections(s, cap)


# (pipeline's source id, section) -> the reason last logged: each section's failure is logged when it starts
# or its reason changes, and its recovery once, not at every refresh.
_FAILING: dict[tuple[int, str], str] = {}


def _log_sections(s: Source, cap: Any) -> None:
    """A section that could not be read (eosctl_refresh_errors_total{section} rising) says why in the log."""
    from eosctl.safetext import term

    name = term(s.pipeline or s.cluster)
    errors = cap.errors()
    for section in cap.sections:
        key = (id(s), section)
        why = errors.get(section)
        if why is not None and _FAILING.get(key) != why:
            _FAILING[key] = why
            _log(f"eosctl exporter: {name}: section {section} not read (eosctl_refresh_errors_total): "
                 f"{term(why)}")
        elif why is None and _FAILING.pop(key, None) is not None:
            _log(f"eosctl exporter: {name}: section {section} read again")


# ---- running ------------------------------------------------------------------------------------------


def _refresh_loop(sources: list[Source], exposition: Exposition, interval: float,
                  stop: threading.Event) -> None:
    from eosctl.errors import EosctlError, first_line
    from eosctl.safetext import term

    down: dict[int, str] = {}
    while not stop.is_set():
        started = time.monotonic()
        for i, s in enumerate(sources):
            try:
                cap = s.model.refresh()
            except EosctlError as e:
                s.refreshed(None)
                if i not in down:
                    down[i] = first_line(e)
                    _log(f"eosctl exporter: {term(s.pipeline or s.cluster)}: refresh failed, serving "
                         f"the last values (eosctl_up 0): {term(down[i])}")
                continue
            s.refreshed(cap)
            _log_sections(s, cap)
            if down.pop(i, None) is not None:
                click.echo(f"eosctl exporter: {term(s.pipeline or s.cluster)}: the cluster answers again",
                           err=True)
        exposition.warm()
        stop.wait(max(0.0, interval - (time.monotonic() - started)))


def _log(message: str) -> None:
    """One line of the exporter's log on stderr: no value substituted from the config's ${NAME}s."""
    from eosctl.config import redact

    click.echo(redact(message), err=True)


def _audit_all(sources: list[Source], targets: list[Target], options: Any,
               stop: threading.Event | None = None, failing: dict[int, str] | None = None) -> None:
    """One audit per pipeline with a sink; a failed one counts in eosctl_audit_errors_total.

    ``failing``: source index -> the reason its audits fail, kept across runs so that an outage is logged
    when it starts, when its reason changes and when it ends, not at every --audit-every."""
    failing = {} if failing is None else failing
    import auditors
    from eosctl.errors import EosctlError, first_line
    from eosctl.safetext import term

    for i, (s, t) in enumerate(zip(sources, targets, strict=True)):
        sink = t.pipeline.sink if t.pipeline else None
        if sink is None or (stop is not None and stop.is_set()):
            continue
        started = time.monotonic()
        try:
            report = auditors.audit(t, sink, options=options, started=started)
        except Exception as e:  # noqa: BLE001 - an audit that fails must not end the exporter
            if stop is not None and stop.is_set():
                return  # stopped under it (its workers killed): not a failure
            why = first_line(e)
            if not isinstance(e, EosctlError | OSError):  # a crash, not a sink or broker problem: name it
                why = f"{type(e).__name__}: {why}"
            s.audited(None, time.monotonic() - started, why)
            if failing.get(i) != why:
                failing[i] = why
                _log(f"eosctl exporter: {term(s.pipeline)}: audit failed: {term(why)} (said once until it "
                     "changes; eosctl_audit_errors_total counts each)")
            continue
        s.audited(report, time.monotonic() - started)
        if failing.pop(i, None) is not None:
            _log(f"eosctl exporter: {term(s.pipeline)}: the audit runs again")


@contextmanager
def _auditing(sources: list[Source], targets: list[Target], options: Any, every: float,
              stop: threading.Event, exposition: Exposition) -> Iterator[None]:
    """The audit thread, from now until the block ends; then stopped, its processes killed if need be."""
    if options is None or not any(t.pipeline and t.pipeline.sink for t in targets):
        yield
        return
    from auditors import guard

    def loop() -> None:
        failing: dict[int, str] = {}
        while not stop.is_set():
            _audit_all(sources, targets, options, stop, failing)
            exposition.warm()
            stop.wait(every)

    thread = threading.Thread(target=loop, name="audit", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        guard.stop_all()  # a running audit's workers killed: its pool breaks, the audit unwinds, cleans up
        thread.join(30)


class _Stop(threading.Event):
    """Set by SIGINT or SIGTERM; ``signum`` says which."""

    signum: int | None = None


@contextmanager
def _signals() -> Iterator[_Stop]:
    """SIGINT and SIGTERM set the event (the loops end, everything is closed in order); the handlers
    before are restored on the way out."""
    stop = _Stop()

    def on_signal(signum: int, frame: object) -> None:
        stop.signum = signum
        stop.set()

    from eosctl.stopsignals import STOP_SIGNALS

    before = {s: signal.signal(s, on_signal) for s in STOP_SIGNALS}
    try:
        yield stop
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


class _Handler(BaseHTTPRequestHandler):
    server_version = "eosctl-exporter"
    # Per socket operation: a client idle or sending its request slowly is dropped after this long instead
    # of holding its thread for ever (Prometheus' default scrape timeout is 10 s).
    timeout = REQUEST_TIMEOUT_S

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self._answer(body=True)

    def do_HEAD(self) -> None:  # noqa: N802 (http.server's name)
        self._answer(body=False)

    def _answer(self, body: bool) -> None:
        from eosctl.metrics import accepts_gzip

        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            exposition: Exposition | None = getattr(self.server, "exposition", None)
            if exposition is None:
                return self._send(503, [b"not ready\n"], "text/plain; charset=utf-8", body=body)
            gzipped = accepts_gzip(self.headers.get("Accept-Encoding"))
            parts, content_type = exposition.parts(self.headers.get("Accept"), gzipped)
            return self._send(200, parts, content_type, "gzip" if gzipped else None, body=body)
        if path == "/":
            return self._send(200, [b"eosctl exporter: metrics at /metrics\n"], "text/plain; charset=utf-8",
                              body=body)
        self._send(404, [b"not found: metrics are at /metrics\n"], "text/plain; charset=utf-8", body=body)

    def _send(self, code: int, parts: list[bytes], content_type: str, encoding: str | None = None,
              body: bool = True) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        if encoding:
            self.send_header("Content-Encoding", encoding)
        self.send_header("Vary", "Accept, Accept-Encoding")
        self.send_header("Content-Length", str(sum(len(p) for p in parts)))
        self.end_headers()
        if not body:  # HEAD: the headers a GET would get, no body
            return
        for part in parts:  # not joined: no copy of a 10 MB body per scrape
            self.wfile.write(part)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's signature)
        pass  # one line per scrape would flood the log of a process that runs for weeks


def _reads(config: str | None, targets: list[Target]) -> tuple[str, ...]:
    """Every local file the exporter reads: the config and each pipeline's sink."""
    from eosctl.sink.base import local_files

    sinks = [t.pipeline.sink for t in targets if t.pipeline is not None]
    return (*([config] if config else []), *(f for s in sinks for f in local_files(s)))


def earlier_reading(path: str) -> bool:
    """Whether ``path`` holds an exposition eosctl wrote (its first line a HELP or TYPE of an eosctl_
    metric): the reading a cron job replaces every run, which needs no --force."""
    try:
        with open(path, "rb") as f:
            first = f.readline(200)
    except OSError:
        return False
    return first.startswith((b"# HELP eosctl_", b"# TYPE eosctl_"))


def check_textfile(path: str, reads: tuple[str, ...], force: bool) -> None:
    from eosctl.files import check_output

    check_output(path, reads, force, "--textfile", earlier_reading)


def write_textfile(path: str, body: bytes, reads: tuple[str, ...] = (), force: bool = False) -> None:
    """Write ``body`` beside ``path`` and rename it there: node_exporter never reads half a file. A full
    disk is one line (the temporary file is removed, the earlier reading stays)."""
    from eosctl.errors import EosctlError
    from eosctl.files import shown, writing_output

    try:
        with writing_output(path, reads, force, "--textfile", ours=earlier_reading) as tmp, \
                open(tmp, "wb") as f:
            f.write(body)
    except OSError as e:
        raise EosctlError(f"cannot write --textfile {shown(path)}: {e.strerror or e}; the earlier reading "
                          "is kept") from None


COMMANDS = [exporter]
