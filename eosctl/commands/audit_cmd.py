"""`eosctl audit`: did every committed source record land in the sink exactly once, and nothing else?

JSON shape (`--format json`, stable; CI parses it): docs/json.md.

Exit 0: no failing findings, 1: failing findings, 2: usage, config, connection or sink error, 130: Ctrl-C,
143: SIGTERM (both after stopping everything the audit started).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import IO, Any, cast

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as Bar
from rich.text import Text

from eosctl.base import quickexit
from eosctl.base.errors import EosctlError
from eosctl.base.exits import Exit
from eosctl.base.files import check_output, shown, writing_output
from eosctl.base.gcpause import settled
from eosctl.base.progress import Progress, Step, silent
from eosctl.base.safetext import term
from eosctl.commands.options import (
    DURATION,
    OutputFile,
    check_one_sink,
    sink_of,
    sink_options,
    target_options,
)
from eosctl.config.model import value_columns_problem, value_columns_unread
from eosctl.config.policy import Level, parse_level
from eosctl.config.redaction import Redacting
from eosctl.output import FORMATS
from eosctl.output.terminal import console
from eosctl.report.findings import DESCRIPTIONS, KINDS, parse_kinds
from eosctl.report.window import Bound, WindowSpec, parse_bound


def _bound(ctx: click.Context, param: click.Parameter, value: str | None) -> Bound | None:
    if value is None:
        return None
    try:
        return parse_bound(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


def _levels(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[Level, ...]:
    out = []
    for value in values:
        kind, sep, spec = value.partition("=")
        if not sep or kind.strip() not in KINDS:
            raise click.BadParameter(f"{value!r}: expected KIND=warn, KIND=fail or KIND=warn:N,fail:M with "
                                     f"KIND a finding kind (kinds: {', '.join(KINDS)})")
        try:
            out.append(parse_level(kind.strip(), spec.strip(), repr(value)))
        except ValueError as e:
            raise click.BadParameter(str(e)) from None
    return tuple(out)


def _fail_on(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[str, ...]:
    try:
        return parse_kinds(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


@click.command("audit")
# The audit's deadline covers its whole run (workers and Spark tasks read within it): minutes, not the
# inspection commands' 30 s; a larger audit passes more.
@target_options(formats=FORMATS, timeout="10m",
                format_help="Rich tables, stable JSON or JUnit XML for CI, or one self-contained HTML "
                            "sign-off document (with --out).")
@sink_options
@click.option("--topic-column", help="Column with the source topic [default: src_topic].")
@click.option("--partition-column", help="Column with the source partition [default: src_partition].")
@click.option("--offset-column", help="Column with the source offset [default: src_offset].")
@click.option("--key-column", help="Business-key column: enables key_duplicate.")
@click.option("--value-column", help="Column holding each record's value: the content check compares it too.")
@click.option("--value-hash-column",
              help="Column holding the lowercase hex MD5 of each record's value bytes (SQL md5(value)): the "
                   "content check compares it too.")
@click.option("--offsets-table",
              help="Table of offsets stored with the rows (topic, partition, next_offset); with --group, "
                   "compared with the group's committed offsets.")
@click.option("--out", "out", type=OutputFile(special_ok=True),
              help="Write the report here (must not exist unless --force; never a file the audit reads).")
@click.option("--force", is_flag=True, help="Replace --out if it exists.")
@click.option("--fail-on", callback=_fail_on, metavar="KIND,...",
              help="Finding kinds that fail the audit (exit 1) [default: all].")
@click.option("--since", callback=_bound, metavar="TIME|OFFSETS",
              help="Judge only records from here on: an ISO 8601 time (2026-11-30, 2026-11-30T06:00:00Z; "
                   "UTC unless it says otherwise), mapped to each partition's first offset at or after it "
                   "(ListOffsets by timestamp), or offsets per partition (orders:0=1200,orders:1=900).")
@click.option("--until", callback=_bound, metavar="TIME|OFFSETS",
              help="Judge only records before this (exclusive): a time or offsets, as --since.")
@click.option("--waivers", "waivers", type=click.Path(dir_okay=False), metavar="FILE",
              help="A waiver file ([[waivers]]: topic, partition, kind, offset range, reason, reference, "
                   "expires): the findings it covers are reported as waived and fail no more, until the "
                   "waiver expires [default: the config's [audit] waivers].")
@click.option("--level", "levels", multiple=True, callback=_levels, metavar="KIND=LEVEL",
              help="A kind's level: KIND=warn (reported, never fails), KIND=fail, or KIND=warn:N,fail:M "
                   "(counts of its records or rows not waived); repeatable, over the config's "
                   "[audit.levels].")
@click.option("--store-failures", "store_failures", type=click.Path(), metavar="DIR",
              help="Write the sink rows and the Kafka records behind each finding to DIR as Parquet "
                   "(findings.parquet, sink_rows.parquet, kafka_records.parquet), for a repair job; DIR "
                   "must not exist.")
@click.option("--engine", type=click.Choice(["spark", "local"]),
              help="spark: a Spark job (local[*], a cluster or Spark Connect); local: the same tasks in "
                   "processes on this machine, no JVM [default: the config's [audit] engine, else local "
                   "up to 5,000,000 offsets, spark above].")
@click.option("--master",
              help="Spark master: local[N], spark://HOST:PORT, yarn, k8s://... [default: local[*]].")
@click.option("--remote", help="Spark Connect server, sc://HOST:PORT (instead of --master).")
@click.option("--driver-memory", help="Spark driver heap [default: the config's, or 2g].")
@click.option("--content-check/--no-content-check", "content_check", default=None,
              help="With a key column: compare each sink row's key with the key of the Kafka record at its "
                   "offset (content_mismatch: rows that belong to other records, shifted offsets, offsets "
                   "re-used after an unclean election). It decodes every record: at most 1.5x the keyed "
                   "audit without it at 10M offsets [default: the config's [audit] content_check, or on].")
@click.option("--incremental", "incremental", type=OutputFile(), metavar="STATE",
              help="Audit only what is new since the verdict kept in STATE (a DuckDB file this option "
                   "writes; the first run is a full audit): new offsets, the DuckDB sink's new rows, their "
                   "keys against the key index in STATE, the content check of the new rows and records; "
                   "the same findings as a full audit. It cannot see "
                   "a sink row rewritten in place (an UPDATE keeps its row id and the row count): "
                   "--full-every reads everything again. For cron; docs/audit.md#incremental-audits.")
@click.option("--full-every", type=DURATION, default="1d", show_default=True,
              help="With --incremental: a full audit (and a new STATE) when the last one is this old "
                   "(900, 90s, 15m, 2h, 1d; 0: only the first).")
def audit(**given: Any) -> None:
    """Reconcile Kafka source offsets with the sink's rows (one task per partition)."""
    # Ctrl-C and SIGTERM unwind through the audit's guard (eosctl.cli.unwind_on_signals).
    started = time.monotonic()
    # Everything the audit opens (sink copies, DuckDB connections, the pool, Spark, --out and its state
    # files) is closed by its own with/finally blocks: no interpreter teardown after it.
    quickexit.allow()
    args = Args(**given)
    _check_options(args)
    _run(_check(args, _resolve(args)), started)


@dataclass(frozen=True)
class Args:
    """`eosctl audit`'s options as click parsed them."""

    config: str | None = None
    pipeline: str | None = None
    bootstrap: str | None = None
    topics: tuple[str, ...] = ()
    group: str | None = None
    sink_duckdb: str | None = None
    sink_parquet: str | None = None
    sink_table: str | None = None
    topic_column: str | None = None
    partition_column: str | None = None
    offset_column: str | None = None
    key_column: str | None = None
    value_column: str | None = None
    value_hash_column: str | None = None
    offsets_table: str | None = None
    fmt: str = "table"
    out: str | None = None
    force: bool = False
    fail_on: tuple[str, ...] = KINDS
    engine: str | None = None
    master: str | None = None
    remote: str | None = None
    driver_memory: str | None = None
    content_check: bool | None = None
    incremental: str | None = None
    full_every: float = 86_400.0
    since: Bound | None = None
    until: Bound | None = None
    waivers: str | None = None
    levels: tuple[Level, ...] = ()
    store_failures: str | None = None

    @property
    def overrides(self) -> dict[str, str]:
        """The sink's columns and offsets table the command line names (over the config's)."""
        named = (("topic_column", self.topic_column), ("partition_column", self.partition_column),
                 ("offset_column", self.offset_column), ("key_column", self.key_column),
                 ("value_column", self.value_column), ("value_hash_column", self.value_hash_column),
                 ("offsets_table", self.offsets_table))
        return {k: v for k, v in named if v}

    @property
    def names_a_sink(self) -> bool:
        """A sink option or a column option: they name one sink."""
        return bool(self.sink_duckdb or self.sink_parquet or self.sink_table or self.overrides)

    @property
    def names_spark(self) -> bool:
        return bool(self.master or self.remote or self.driver_memory)

    @property
    def window(self) -> WindowSpec | None:
        return WindowSpec(self.since, self.until) if self.since or self.until else None


# --- resolve: the config read once, the pipeline, its hops or sinks -------------------------------------

@dataclass(frozen=True)
class Resolved:
    """What the command points at: the target, and each hop's (name, target) where it is audited hop by
    hop; ``several``: a pipeline's sinks where it has more than one."""

    target: Any
    hops: tuple[tuple[str, Any], ...] = ()
    several: tuple[Any, ...] = ()


def _resolve(args: Args) -> Resolved:
    """The config read once (every hop and stage resolved from that reading), after the checks that need
    no config (`--out c.toml` must not be read first)."""
    from eosctl.config.file import load_config  # lazy: see docs/imports.md
    from eosctl.config.target import resolve  # lazy: see docs/imports.md

    cfg = load_config(args.config) if args.config else None
    pipe = cfg.pipelines.get(args.pipeline) if cfg is not None and args.pipeline else None
    target = resolve(cfg, args.pipeline, args.bootstrap, args.topics, args.group,
                     need_topics=not (pipe and pipe.hops))
    hops = target.pipeline.hops if target.pipeline else ()
    if hops and (args.topics or args.group or args.names_a_sink):
        raise click.UsageError(f"pipeline {args.pipeline} is audited hop by hop ({', '.join(hops)}): "
                               "--topic, --group and the sink options name one hop; pass -p HOP for one of "
                               "them")
    runs = tuple((hop, resolve(cfg, hop, args.bootstrap, need_topics=True)) for hop in hops)
    several = target.pipeline.sinks if target.pipeline and len(target.pipeline.sinks) > 1 else ()
    return Resolved(target, runs, several)


# --- check: every option, the config and the sink, each one line before Kafka is asked anything ---------

@dataclass(frozen=True)
class Incremental:
    """`--incremental`: the state file, --full-every, the files it must never replace, the content check."""

    state: str
    full_every: float
    reads: tuple[str, ...]
    content: bool


@dataclass(frozen=True)
class Run:
    """What `eosctl audit` runs once every check passed: each hop (name, target, sink) in order (one: a lone
    sink), or one target's ``sinks``; how it is judged, where the report goes."""

    hops: list[tuple[str, Any, Any]]
    fmt: str
    written: Written
    fail_on: tuple[str, ...]
    options: Any = None  # auditors.EngineOptions; None for --incremental
    judging: Any = None  # auditors.Judging
    sinks: tuple[Any, ...] = ()
    incremental: Incremental | None = None
    window: WindowSpec | None = None
    store: str | None = None


def _check_options(args: Args) -> None:
    """The checks of the options alone, before the config is even read."""
    if args.master and args.remote:
        raise click.UsageError("pass either --master or --remote, not both")
    check_one_sink(args.sink_duckdb, args.sink_parquet)
    if args.engine == "local" and args.names_spark:
        raise click.UsageError("--master, --remote and --driver-memory are for --engine spark")
    _check_out(args.out)
    check_output(args.out, (args.config,) if args.config else (), args.force)


def _check(args: Args, where: Resolved) -> Run:
    """The checks of the options against the config and the sink, then what runs."""
    target, hops, several = where.target, where.hops, where.several
    judging = _judging(target.config, args.waivers, args.levels)
    _check_shape(args, bool(hops), several)
    if args.store_failures:
        from eosctl.inspection.failures import storable  # lazy: see docs/imports.md

        problem = storable(_one_sink(args, target))
        if problem:
            raise click.UsageError(problem)
    if hops:
        audited = [(hop, t, sink_of(t, None, None, None)[0]) for hop, t in hops]
    else:
        audited = [(args.pipeline or "", target, _one_sink(args, target))] if not several else []
    sinks = [s for _, _, s in audited] or list(several)
    _check_sinks(args, sinks, one=not hops and not several, hops=bool(hops))
    extra = []
    if not hops and not several:
        from auditors.passes import upstream_of  # lazy: see docs/imports.md

        stage = upstream_of(target)
        extra = [stage[0]] if stage else []
    written = Written(args.out, (*_reads(args.config, [*sinks, *extra]), *judging_reads(args, target.config)),
                      args.force)
    written.check()
    run = Run(audited or [(args.pipeline or "", target, several[0])], args.fmt, written, args.fail_on,
              judging=judging, sinks=several, window=args.window, store=args.store_failures)
    if args.incremental:
        return replace(run, incremental=_check_incremental(args, target, sinks[0], written))
    return replace(run, options=_engine_options(args, target, sinks[0] if len(sinks) == 1 else None))


def _check_shape(args: Args, hops: bool, several: tuple[Any, ...]) -> None:
    """The options against the pipeline's shape: hop by hop, several sinks, or one."""
    if several and (args.names_a_sink or args.incremental or args.store_failures):
        raise click.UsageError(f"pipeline {args.pipeline} has several sinks "
                               f"({', '.join(s.label for s in several)}): the sink and column options, "
                               "--incremental and --store-failures name one sink")
    _check_store(args, hops)
    if args.window and (hops or args.incremental):
        raise click.UsageError("--since and --until judge one pipeline's window: pass -p HOP for a hop, and "
                               "no --incremental (it judges what is new)" if hops else
                               "--since and --until are for a full audit: drop --incremental (it judges "
                               "what is new since its state)")
    if args.incremental and hops:
        raise click.UsageError(f"--incremental audits one pipeline's sink; pipeline {args.pipeline} is "
                               "audited hop by hop: pass -p HOP, one state file per hop")
    if args.incremental and (args.engine or args.names_spark):
        raise click.UsageError("--incremental runs in this process (it reads only what is new): drop "
                               "--engine, --master, --remote and --driver-memory")


def _one_sink(args: Args, target: Any) -> Any:
    """The lone sink with the command line's sink and column options."""
    return replace(sink_of(target, args.sink_duckdb, args.sink_parquet, args.sink_table)[0], **args.overrides)


def _check_store(args: Args, hops: bool) -> None:
    store = args.store_failures
    if not store:
        return
    if hops:
        raise click.UsageError("--store-failures writes one sink's rows: pass -p HOP for one of the hops")
    if os.path.lexists(store):
        raise click.UsageError(f"--store-failures {store} exists; name a new directory")
    if not os.path.isdir(os.path.dirname(os.path.abspath(store))):
        raise click.UsageError(f"--store-failures {store}: its parent directory does not exist")


def _check_sinks(args: Args, sinks: list[Any], one: bool, hops: bool) -> None:
    """Each sink's value columns (eosctl.config.model), and a key column for --content-check (in one of a
    pipeline's ``hops`` at least). ``one``: a lone sink, which the column options name."""
    from_options = one and bool(args.value_column or args.value_hash_column)
    if one and args.incremental and sinks[0].mode != "offsets" and args.content_check:
        raise click.UsageError(f"--content-check compares rows at offsets with their records; this sink "
                               f"keeps state per key (mode = {sinks[0].mode!r}): drop --content-check")
    if not one:
        for s in sinks:
            _check_value_columns(s, False)
    if args.content_check and (one or hops) and not any(s.key_column for s in sinks):
        raise click.UsageError("--content-check compares each row's key with its record's: name the key "
                               + ("column (--key-column, or key_column in the config's sink)" if one else
                                  "column in a hop's sink (key_column)"))
    if one:
        _check_value_columns(sinks[0], from_options)


def _check_incremental(args: Args, target: Any, sink: Any, written: Written) -> Incremental:
    assert args.incremental is not None
    if sink.route is not None:
        raise click.UsageError("--incremental does not judge a route: the sink has a route "
                               "(sink.route); run a full audit")
    if sink.dlq_topic is not None:
        raise click.UsageError("--incremental does not read a dead-letter queue: the sink has a "
                               "dlq_topic; run a full audit")
    if sink.retention is not None:
        raise click.UsageError("--incremental does not judge a window: the sink has a retention "
                               "(sink.retention); run a full audit")
    if args.out and os.path.abspath(args.out) == os.path.abspath(args.incremental):
        raise click.UsageError("--out and --incremental name the same file: the report and the state "
                               "are two files")
    content = args.content_check if args.content_check is not None else \
        target.config.audit_content_check if target.config else True
    return Incremental(args.incremental, args.full_every, (*written.reads, *([args.out] if args.out else [])),
                       content)


def _engine_options(args: Args, target: Any, sink: Any) -> Any:
    """The engine: --engine, else the config's [audit] engine, else Spark's options name Spark, else "auto"
    (auditors.engine.pick, from the plan's offsets). Said on stderr with why: a choice the user made once
    the audit ran (an error before stays the one line it is), auto's when it is made."""
    from auditors import AUTO, EngineOptions  # lazy: see docs/imports.md

    chosen = args.engine or (target.config.audit_engine if target.config else None)
    said = None
    if args.engine:
        said = f"engine: {chosen} (--engine)"
    elif chosen:
        said = f"engine: {chosen} ([audit] engine in {args.config})"
    elif args.names_spark:
        chosen = "spark"
        said = "engine: spark (--master, --remote or --driver-memory name Spark)"
    if said is not None:
        line = said
        click.get_current_context().call_on_close(lambda: _say_if_audited(line))
    options = EngineOptions.resolve(target.config, chosen or AUTO, engine=chosen, master=args.master,
                                    remote=args.remote, driver_memory=args.driver_memory)
    options = replace(options, on_pick=lambda engine, why: click.echo(f"engine: {engine} ({why})", err=True))
    return replace(options, content_check=args.content_check) if args.content_check is not None else options


def _judging(config: Any, waivers: str | None, levels: tuple[Level, ...]) -> Any:
    """--waivers (else the config's [audit] waivers) and the levels: the config's, each kind --level names
    replaced."""
    # The audit's first import of the auditors (and their libraries: numpy, pyarrow): thousands of classes
    # and functions that live as long as the process, no cycles worth a collection among them; the
    # collector walked them some 40 times, then every later collection of the oldest generation would
    # (eosctl.base.gcpause.settled). Only the command line's first import: frozen, what else is alive then
    # is left out of collections too.
    with settled() if "auditors" not in sys.modules else nullcontext():
        from auditors import Judging  # lazy: see docs/imports.md
        from eosctl.report.policy import configured  # lazy: see docs/imports.md

    return Judging(*configured(config, waivers, levels))


def judging_reads(args: Args, config: Any) -> tuple[str, ...]:
    """The waiver file the audit reads (never replaced by --out)."""
    file = args.waivers or (config.audit_waivers if config is not None else None)
    return (file,) if file else ()


def _say_if_audited(line: str) -> None:
    """The engine line, at the end of an audit that ran (exit 0 or 1), never after an error's line."""
    exc = sys.exc_info()[1]
    if exc is None or (isinstance(exc, SystemExit) and exc.code in (Exit.OK, Exit.FOUND, None)):
        click.echo(line, err=True)


@dataclass(frozen=True)
class Written:
    """Where the report goes and what it must never replace (eosctl.base.files.output_refusal)."""

    out: str | None
    reads: tuple[str, ...]
    force: bool

    def check(self) -> None:
        check_output(self.out, self.reads, self.force)


def _reads(config: str | None, sinks: list) -> tuple[str, ...]:
    """Every local file the audit reads: its config and each sink's files."""
    from eosctl.sink.base import local_files  # lazy: see docs/imports.md

    return (*([config] if config else []), *(f for s in sinks for f in local_files(s)))


def _check_out(out: str | None) -> None:
    """Before minutes of Spark work, not after: the report's directory must exist and be writable."""
    if not out:
        return
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        raise EosctlError(f"cannot write the report to {out}: directory {parent} does not exist; create it "
                          "or pick another --out")
    if not os.access(parent, os.W_OK):
        raise EosctlError(f"cannot write the report to {out}: directory {parent} is not writable; pick "
                          "another --out")


audit.help = "\n".join([
    "Reconcile Kafka source offsets with the sink's rows (one task per partition, on Spark or local "
    "processes).",
    "",
    "Per (topic, partition), expected = committed data records between the log start offset and the LSO."
    " Markers, aborted records, open transactions and compaction holes are not expected; rows below the"
    " log start offset can't be verified and are counted, never reported as gaps. Findings:",
    "",
    "\b",
    *(f"  {k:<20} {v}" for k, v in DESCRIPTIONS.items()),
    "",
    "Exit status: 0 no failing findings, 1 failing findings, 2 usage, config, connection or sink error,"
    " 130 Ctrl-C, 143 SIGTERM (after stopping everything the audit started).",
])


def _run(run: Run, started: float) -> None:
    """Audit each hop (name, target, sink) in order (one hop's report as it is, several merged into one),
    or the sinks of one target, or what is new since --incremental's state; the auditors finish the
    report (auditors.passes) as they do for every caller. Exits with the verdict."""
    import auditors  # lazy: see docs/imports.md
    from eosctl.output.audit import render  # lazy: see docs/imports.md

    err = console(stderr=True)
    _, target, sink = run.hops[0]
    with _progress_display(err) as show:
        if run.incremental is not None:
            inc = run.incremental
            result = auditors.audit_incremental(target, sink, inc.state, full_every=inc.full_every,
                                                fail_on=run.fail_on, progress=show, started=started,
                                                reads=inc.reads, content=inc.content, judging=run.judging)
        elif run.sinks:
            result = auditors.audit_sinks(target, run.sinks, options=run.options, progress=show,
                                          fail_on=run.fail_on, started=started, window=run.window,
                                          judging=run.judging)
        else:
            result = auditors.audit_hops(run.hops, options=run.options, progress=show, fail_on=run.fail_on,
                                         started=started, window=run.window, judging=run.judging)
    last = run.hops[-1][1]
    if not err.is_terminal:
        err.print(f"audited {len(result.partitions)} partitions in {result.elapsed_seconds:.1f}s",
                  highlight=False)
    _emit(_html(result, last) if run.fmt == "html" else render(result, run.fmt), run.fmt, run.written)
    if run.store is not None:
        from eosctl.inspection.failures import store_failures  # lazy: see docs/imports.md

        counts = store_failures(result, run.hops[-1][2], last.cluster, run.store)
        click.echo(f"stored the rows of {counts['findings']} findings in "
                   f"{shown(os.path.abspath(run.store))}: {counts['kafka_records']} Kafka records, "
                   f"{counts['sink_rows']} sink rows", err=True)
    out = run.written.out
    if out:
        from eosctl.output.audit import summary  # lazy: see docs/imports.md

        # The report went to a file: the verdict and where it is, for the person at the terminal.
        click.echo(f"{result.verdict.upper()}: {summary(result)}; {run.fmt} report written to "
                   f"{shown(os.path.abspath(out))}")
    sys.exit(Exit.of_verdict(result.verdict))


def _html(result, target) -> str:
    from eosctl.output.html import AuditContext, render_html  # lazy: see docs/imports.md

    return render_html(result, AuditContext(
        bootstrap=target.cluster.bootstrap_servers,
        pipeline=target.pipeline.name if target.pipeline else None, topics=tuple(target.topics),
        audited_at=datetime.now(UTC), origin="eosctl audit"))


@contextmanager
def _progress_display(err) -> Iterator[Progress]:
    """A transient bar on a terminal. Off a terminal, silent, unless EOSCTL_PROGRESS=lines: then one line
    per phase (for CI logs of long audits, and for the signal tests, which act on phases)."""
    if not err.is_terminal:
        if os.environ.get("EOSCTL_PROGRESS") != "lines":
            yield silent
            return
        seen: list[str] = []

        def line(step: Step) -> None:
            if not seen or seen[-1] != step.what:
                seen.append(step.what)
                click.echo(f"eosctl: {term(step.what)}", err=True)

        yield line
        return

    with Bar(SpinnerColumn(), TextColumn("{task.description}", markup=False), BarColumn(),
             MofNCompleteColumn(), TimeElapsedColumn(), console=err, transient=True) as bar:
        task = bar.add_task("", total=None)

        def update(step: Step) -> None:
            bar.update(task, description=term(step.what), completed=step.done, total=step.total)

        yield update


def _emit(rendered, fmt: str, written: Written) -> None:
    out = written.out
    if out:
        try:
            with writing_output(out, written.reads, written.force) as tmp, \
                    open(tmp, "w", encoding="utf-8") as raw:
                f = Redacting(raw)  # a report is an output too: no value from the config's ${NAME}s
                if isinstance(rendered, str):
                    f.write(rendered if rendered.endswith("\n") else rendered + "\n")
                else:
                    # A file, not stdout: fixed width, no colour codes.
                    _print_parts(Console(file=cast(IO[str], f), width=120, highlight=False,
                                         color_system=None), rendered)
        except OSError as e:
            raise EosctlError(f"cannot write the report to {shown(out)}: {e.strerror or e}") from None
        return
    if isinstance(rendered, str):
        click.echo(rendered.rstrip("\n"))
    else:
        _print_parts(console(), rendered)


def _print_parts(out, rendered) -> None:
    """Part by part (a big findings list is many chunks of aligned lines): the console writes as it goes,
    and lines are not re-wrapped."""
    for part in getattr(rendered, "renderables", [rendered]):
        if isinstance(part, Text) and not part.spans and not part.style:
            out.file.write(part.plain + "\n")  # plain lines, already escaped: no layout to do
        else:
            out.print(part, soft_wrap=isinstance(part, Text))


def _check_value_columns(sink: Any, from_options: bool) -> None:
    """One line, exit 2, where the sink's value column can't be compared (eosctl.config.model)."""
    problem = value_columns_problem(sink) if from_options else None
    problem = problem or value_columns_unread(sink)
    if problem and from_options:
        problem = (problem.replace("value_hash_column", "--value-hash-column")
                   .replace("value_column", "--value-column").replace("key_column", "--key-column"))
    if problem:
        raise click.UsageError(problem)
