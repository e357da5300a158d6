"""`eosctl sandbox pipeline`: run the reference exactly-once pipeline, optionally with planted defects.

A run deletes and recreates its topics and groups. On the sandbox that is the point; on any other
cluster it needs --yes (or a yes at the prompt on a terminal), after eosctl has listed what it will do.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from eosctl.base.errors import EosctlError, first_line
from eosctl.base.files import shown
from eosctl.commands.options import WorkDir
from eosctl.config import sandboxstate
from eosctl.sandbox.pipeline import FAULTS
from eosctl.sandbox.pipeline.manifest import planted_lines

# Kafka's legal topic characters and length (org.apache.kafka.common.internals.Topic: LEGAL_CHARS
# "[a-zA-Z0-9._-]", MAX_NAME_LENGTH 249), less the longest suffix eosctl adds (".enriched"). No leading
# dot: the prefix also names the work directory, and "." or ".." would put it outside $EOSCTL_HOME.
_PREFIX = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")
_PREFIX_MAX = 249 - len(".enriched")


def _check_prefix(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """Checked while parsing, before any directory, topic or group is touched."""
    if not _PREFIX.fullmatch(value) or len(value) > _PREFIX_MAX:
        raise click.BadParameter(
            f"{value[:60]!r} cannot name topics and a directory; use letters, digits, '.', '_' and '-' "
            f"(not first: '.'), at most {_PREFIX_MAX} characters", ctx, param)
    return value


@click.command("pipeline")
@click.option("--bootstrap", default=None, metavar="HOST:PORT",
              help="Kafka bootstrap servers (default: the running sandbox).")
@click.option("--prefix", default="demo", show_default=True, callback=_check_prefix,
              help="Names topics, groups and transactional ids; an earlier run's topics are recreated.")
@click.option("--workdir", type=WorkDir(), default=None,
              help="Where the DuckDB sink, manifest.json and eosctl.toml go (default: $EOSCTL_HOME/PREFIX); "
                   "must be empty or new unless --force.")
@click.option("--force", is_flag=True,
              help="Let the run replace the sink, manifest.json and eosctl.toml in a --workdir that has "
                   "files already.")
@click.option("--fault", "faults", multiple=True, type=click.Choice(FAULTS),
              help="Plant a defect (repeatable): " + ", ".join(FAULTS) + ".")
@click.option("--records", default=300, show_default=True, type=click.IntRange(min=1),
              help="Orders the source writes.")
@click.option("--partitions", default=3, show_default=True, type=click.IntRange(min=1),
              help="Partitions of each topic.")
@click.option("--sink", "sink_kind", type=click.Choice(["duckdb", "postgres", "delta", "iceberg"]),
              default="duckdb",
              show_default=True,
              help="Where the sink stage writes: sink.duckdb in the work directory; the sandbox's PostgreSQL "
                   "(started on a Unix socket in $EOSCTL_HOME when it isn't running), schema PREFIX; a "
                   "Delta table, sink_delta/ in the work directory; or an Iceberg table in a SQL catalog "
                   "on SQLite, sink_iceberg/.")
@click.option("--yes", is_flag=True,
              help="Needed when --bootstrap is not the sandbox: the run deletes and recreates the prefix's "
                   "topics and groups there.")
def pipeline(bootstrap: str | None, prefix: str, workdir: Path | None, faults: tuple[str, ...], records: int,
             partitions: int, sink_kind: str, yes: bool, force: bool = False) -> None:
    """Run source -> read-process-write -> sink (DuckDB or PostgreSQL) once, with the given faults.

    \b
    Writes the sink (sink.duckdb, or schema PREFIX in the sandbox's PostgreSQL), the ground truth of
    what was planted where (manifest.json) and a config for the other eosctl commands (eosctl.toml)
    into the work directory.
    """
    # lazy: see docs/imports.md
    from eosctl.config.model import Cluster
    from eosctl.sandbox import noida
    from eosctl.sandbox.pipeline import run_pipeline

    # soft_wrap: long paths stay on one line (copy-pasteable) whatever the terminal width.
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    out = Console(highlight=False, soft_wrap=True)
    if workdir is not None:
        _check_workdir(workdir, force)  # before any question or change
    if bootstrap is None:
        bootstrap = noida.bootstrap_or_error(None)
        cluster = Cluster(name="sandbox", bootstrap_servers=bootstrap)
    else:
        from eosctl.config.target import check_bootstrap  # lazy: see docs/imports.md

        bootstrap = check_bootstrap(bootstrap)
        cluster = Cluster(name="cluster", bootstrap_servers=bootstrap)
        if not _is_sandbox(bootstrap):
            _confirm_writes(bootstrap, prefix, partitions, records, yes, err)
    # The default work directory is eosctl's own ($EOSCTL_HOME/PREFIX): each run replaces the last.
    workdir = workdir if workdir is not None else noida.state_dir() / prefix
    t0 = time.monotonic()

    def progress(msg: str) -> None:
        err.print(f"[dim]{time.monotonic() - t0:5.1f}s[/] {msg}")

    with _sandbox_postgres(sink_kind == "postgres", progress) as postgres, _no_half_sink(Path(workdir)):
        manifest = run_pipeline(cluster, prefix, workdir, faults=faults, records=records,
                                partitions=partitions, progress=progress, postgres=postgres,
                                delta=sink_kind == "delta", iceberg=sink_kind == "iceberg")
    if _is_sandbox(bootstrap):
        # lazy: see docs/imports.md
        from eosctl.sandbox.pipeline.configfile import FILE, point_at_sandbox

        point_at_sandbox(Path(workdir) / FILE, bootstrap, noida.state_dir())
    sink = manifest["sink"]
    where = next(sink[k] for k in ("duckdb", "postgres", "delta", "iceberg") if sink[k])
    out.print(f"\nsink      {where}  (table {manifest['sink']['table']}, {manifest['sink_rows']} rows)")
    out.print(f"manifest  {Path(workdir).resolve() / 'manifest.json'}")
    out.print(f"config    {Path(workdir).resolve() / 'eosctl.toml'}  (the whole pipeline by default; "
              f"one hop: -p {shlex.quote(prefix + '.process')} or -p {shlex.quote(prefix)})")
    if not faults:
        out.print("\nno faults planted: the sink must match the committed output exactly")
    else:
        out.print(f"\nplanted defects ({', '.join(manifest['faults'])}):")
        for line in planted_lines(manifest):
            out.print(line, highlight=False)
    # Commands that work copied as printed, from any directory (the config names the sandbox's home).
    config = shlex.quote(str(Path(workdir).resolve() / "eosctl.toml"))
    out.print("\nnext, try:")
    for cmd in ("lag", "txns hanging", "audit", "tui"):
        out.print(f"  eosctl {cmd} -c {config}")


def _check_workdir(workdir: Path, force: bool) -> None:
    """A --workdir with files in it is the user's: the run would replace its eosctl.toml, manifest.json and
    sink.duckdb (and every table in it), so it needs --force."""
    try:
        entries = sorted(os.listdir(workdir)) if workdir.is_dir() else []
    except OSError as e:
        raise EosctlError(f"--workdir {shown(str(workdir))}: {e.strerror or e}") from None
    if entries and not force:
        raise EosctlError(f"--workdir {shown(str(workdir))} is not empty ({len(entries)} entries, e.g. "
                          f"{shown(entries[0])}); the run would replace its sink, manifest.json and "
                          "eosctl.toml: pick an empty directory or pass --force")


@contextmanager
def _no_half_sink(workdir: Path) -> Iterator[None]:
    """A run that fails (a full disk, Ctrl-C) leaves no half-written sink.duckdb: run_pipeline removed the
    last one before it started, so whatever is there now is this run's."""
    from eosctl.sandbox.pipeline.run import SINK_FILE  # lazy: see docs/imports.md

    def clean() -> None:
        for name in (SINK_FILE, SINK_FILE + ".wal"):
            try:
                (workdir / name).unlink()
            except OSError:
                pass

    try:
        yield
    except OSError as e:
        clean()
        raise EosctlError(f"the pipeline could not write to {shown(str(e.filename or workdir))}: "
                          f"{e.strerror or e}") from None
    except Exception as e:
        clean()
        if "duckdb" in type(e).__module__ and "IO" in type(e).__name__:
            raise EosctlError(f"the pipeline could not write its sink in {shown(str(workdir))}: "
                              f"{first_line(e)}") from None
        raise
    except BaseException:
        clean()
        raise


@contextmanager
def _sandbox_postgres(wanted: bool, progress: Any) -> Iterator[str | None]:
    """The URI of the sandbox's PostgreSQL, started (in $EOSCTL_HOME) if needed. It keeps running after a
    run, for the other commands, until `sandbox down`; a run that fails stops a server it started and
    removes what it made."""
    if not wanted:
        yield None
        return
    import shutil  # lazy: see docs/imports.md

    from eosctl.sandbox import noida, pgserver  # lazy: see docs/imports.md

    home = noida.state_dir()
    server = pgserver.running(home)
    if server is not None:
        yield server.uri()
        return
    made = [p for p in (home, home / "postgres") if not p.exists()]
    server = pgserver.start(home)
    progress(f"PostgreSQL started on a Unix socket in {server.root} (pid {server.pid})")
    try:
        yield server.uri()
    except BaseException:
        pgserver.stop(server, home)
        for path in made:
            shutil.rmtree(path, ignore_errors=True)
        raise


_LOOPBACK = {"localhost", "127.0.0.1", "::1", "[::1]"}


def _addresses(bootstrap: str) -> set[tuple[str, str]]:
    out = set()
    for entry in bootstrap.split(","):
        host, _, port = entry.strip().rpartition(":")
        out.add(("127.0.0.1" if host.lower() in _LOOPBACK else host.lower(), port))
    return out


def _is_sandbox(bootstrap: str) -> bool:
    """Does --bootstrap name the running sandbox (the one broker this command may reset unasked)?"""
    from eosctl.sandbox import noida  # lazy: see docs/imports.md

    state = sandboxstate.status(noida.state_dir())
    return state is not None and _addresses(bootstrap) == _addresses(state.bootstrap)


def _interactive() -> bool:
    return sys.stdin.isatty()


def _confirm_writes(bootstrap: str, prefix: str, partitions: int, records: int, yes: bool, err: Any) -> None:
    """List what the run changes on a cluster that is not the sandbox; go on only with --yes or a yes."""
    from eosctl.sandbox.pipeline.topics import Names  # lazy: see docs/imports.md

    n = Names(prefix)
    err.print(f"{bootstrap} is not the sandbox; this run changes it:")
    err.print(f"  delete and recreate topics  {', '.join(n.topics)} ({partitions} partitions each)")
    err.print(f"  delete consumer groups      {n.processor_group}, {n.sink_group}")
    err.print(f"  fence transactional ids     {', '.join(n.transactional_ids)} (aborts their open "
              "transactions)")
    err.print(f"  write                       {records} orders to {n.source_topic}, processed into "
              f"{n.output_topic}")
    if yes:
        return
    if _interactive():
        if click.confirm("go ahead?", default=False, err=True):
            return
        raise EosctlError("nothing changed (answered no)")
    raise EosctlError(f"{bootstrap} is not the sandbox and this run deletes and recreates topics and groups "
                      "there; pass --yes to go ahead (nothing changed)")
