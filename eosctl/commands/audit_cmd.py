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
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as Bar
from rich.text import Text

from eosctl.base.errors import EosctlError
from eosctl.base.files import check_output, shown, writing_output
from eosctl.base.progress import Progress, Step, silent
from eosctl.base.safetext import term
from eosctl.commands.options import (
    DURATION,
    TIMEOUT_MS,
    OutputFile,
    check_one_sink,
    sink_of,
    sink_options,
    target_options,
)
from eosctl.config.model import value_columns_problem, value_columns_unread
from eosctl.config.policy import Level, Waiver, parse_level
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
                   "processes on this machine, no JVM [default: the config's [audit] engine, or spark].")
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
def audit(config: str | None = None, pipeline: str | None = None, bootstrap: str | None = None,
          topics: tuple[str, ...] = (), group: str | None = None, sink_duckdb: str | None = None,
          sink_parquet: str | None = None, sink_table: str | None = None, topic_column: str | None = None,
          partition_column: str | None = None, offset_column: str | None = None,
          key_column: str | None = None, value_column: str | None = None,
          value_hash_column: str | None = None, offsets_table: str | None = None, fmt: str = "table",
          out: str | None = None, force: bool = False, fail_on: tuple[str, ...] = KINDS,
          engine: str | None = None, master: str | None = None, remote: str | None = None,
          driver_memory: str | None = None, content_check: bool | None = None,
          incremental: str | None = None, full_every: float = 86_400.0, since: Bound | None = None,
          until: Bound | None = None, waivers: str | None = None, levels: tuple[Level, ...] = (),
          store_failures: str | None = None) -> None:
    """Reconcile Kafka source offsets with the sink's rows (one task per partition)."""
    # Ctrl-C and SIGTERM unwind through the audit's guard (eosctl.cli.unwind_on_signals).
    started = time.monotonic()
    # lazy: auditors 96 ms, eosctl.config.target 17 ms at start-up
    from auditors import EngineOptions
    from eosctl.config.target import resolve

    if master and remote:
        raise click.UsageError("pass either --master or --remote, not both")
    check_one_sink(sink_duckdb, sink_parquet)
    if engine == "local" and (master or remote or driver_memory):
        raise click.UsageError("--master, --remote and --driver-memory are for --engine spark")
    _check_out(out)
    check_output(out, (config,), force)  # before the config is even read: `--out c.toml` must not be
    target = resolve(config, pipeline, bootstrap, topics, group, need_topics=not _has_hops(config, pipeline))
    overrides = {k: v for k, v in (("topic_column", topic_column), ("partition_column", partition_column),
                                   ("offset_column", offset_column), ("key_column", key_column),
                                   ("value_column", value_column), ("value_hash_column", value_hash_column),
                                   ("offsets_table", offsets_table)) if v}
    hops = target.pipeline.hops if target.pipeline else ()
    if hops and (topics or group or sink_duckdb or sink_parquet or sink_table or overrides):
        raise click.UsageError(f"pipeline {pipeline} is audited hop by hop ({', '.join(hops)}): --topic, "
                               f"--group and the sink options name one hop; pass -p HOP for one of them")
    runs = [resolve(config, hop, bootstrap, need_topics=True) for hop in hops] if hops else [target]
    policy = _policy(target.config, waivers, levels)
    several = target.pipeline.sinks if target.pipeline and len(target.pipeline.sinks) > 1 else ()
    if several and (sink_duckdb or sink_parquet or sink_table or overrides or incremental or store_failures):
        raise click.UsageError(f"pipeline {pipeline} has several sinks "
                               f"({', '.join(s.label for s in several)}): the sink and column options, "
                               "--incremental and --store-failures name one sink")
    if store_failures and hops:
        raise click.UsageError("--store-failures writes one sink's rows: pass -p HOP for one of the hops")
    if store_failures and os.path.lexists(store_failures):
        raise click.UsageError(f"--store-failures {store_failures} exists; name a new directory")
    if store_failures and not os.path.isdir(os.path.dirname(os.path.abspath(store_failures))):
        raise click.UsageError(f"--store-failures {store_failures}: its parent directory does not exist")
    window = WindowSpec(since, until) if since or until else None
    if window and (hops or incremental):
        raise click.UsageError("--since and --until judge one pipeline's window: pass -p HOP for a hop, and "
                               "no --incremental (it judges what is new)" if hops else
                               "--since and --until are for a full audit: drop --incremental (it judges "
                               "what is new since its state)")
    if incremental and hops:
        raise click.UsageError(f"--incremental audits one pipeline's sink; pipeline {pipeline} is audited "
                               "hop by hop: pass -p HOP, one state file per hop")
    if incremental and (engine or master or remote or driver_memory):
        raise click.UsageError("--incremental runs in this process (it reads only what is new): drop "
                               "--engine, --master, --remote and --driver-memory")
    if store_failures:
        from eosctl.inspection.failures import storable  # lazy: eosctl.inspection.failures 330 ms

        problem = storable(sink_of(target, sink_duckdb, sink_parquet, sink_table)[0])
        if problem:
            raise click.UsageError(problem)
    if incremental:
        sink, _ = sink_of(target, sink_duckdb, sink_parquet, sink_table)
        sink = replace(sink, **overrides)
        if sink.mode != "offsets" and content_check:
            raise click.UsageError(f"--content-check compares rows at offsets with their records; this sink "
                                   f"keeps state per key (mode = {sink.mode!r}): drop --content-check")
        if content_check and not sink.key_column:
            raise click.UsageError("--content-check compares each row's key with its record's: name the key "
                                   "column (--key-column, or key_column in the config's sink)")
        _check_value_columns(sink, bool(overrides.get("value_column") or overrides.get("value_hash_column")))
        content = content_check if content_check is not None else \
            target.config.audit_content_check if target.config else True
        if sink.route is not None:
            raise click.UsageError("--incremental does not judge a route: the sink has a route "
                                   "(sink.route); run a full audit")
        if sink.dlq_topic is not None:
            raise click.UsageError("--incremental does not read a dead-letter queue: the sink has a "
                                   "dlq_topic; run a full audit")
        if sink.retention is not None:
            raise click.UsageError("--incremental does not judge a window: the sink has a retention "
                                   "(sink.retention); run a full audit")
        reads = (*_reads(config, [sink]), *policy.reads())
        written = Written(out, reads, force)
        written.check()
        if out and os.path.abspath(out) == os.path.abspath(incremental):
            raise click.UsageError("--out and --incremental name the same file: the report and the state "
                                   "are two files")
        _run([(pipeline or "", target, sink)], fmt, written, fail_on, None, started, policy=policy,
             store=store_failures,
             upstream=_upstream(config, target, bootstrap),
             incremental=(incremental, full_every, (*reads, *([out] if out else [])), content))
        return
    chosen = engine or (target.config.audit_engine if target.config else None)
    # The engine and why, always on stderr (never a choice made on a read that failed: see _engine_by_size).
    # A choice the user made is said once the audit ran (an error before stays the one line it is).
    said = None
    if engine:
        said = f"engine: {chosen} (--engine)"
    elif chosen:
        said = f"engine: {chosen} ([audit] engine in {config})"
    elif master or remote or driver_memory:
        chosen = "spark"  # Spark's options name Spark
        said = "engine: spark (--master, --remote or --driver-memory name Spark)"
    if said is not None:
        click.get_current_context().call_on_close(lambda: _say_if_audited(said))

    def engine_options() -> EngineOptions:
        """Once every check of the options, config and sink passed (each is one line before Kafka is
        asked anything); the size check reads Kafka."""
        options = EngineOptions.resolve(target.config, "spark", engine=chosen or _engine_by_size(runs),
                                        master=master, remote=remote, driver_memory=driver_memory)
        return replace(options, content_check=content_check) if content_check is not None else options

    if several:
        for s in several:
            _check_value_columns(s, False)
        written = Written(out, (*_reads(config, list(several)), *policy.reads()), force)
        written.check()
        _run([(pipeline or "", target, several[0])], fmt, written, fail_on, engine_options(), started,
             window=window, policy=policy, sinks=several)
        return
    if hops:
        audited = [(hop, t, sink_of(t, None, None, None)[0]) for hop, t in zip(hops, runs, strict=True)]
        for _, _, s in audited:
            _check_value_columns(s, False)
        if content_check and not any(s.key_column for _, _, s in audited):
            raise click.UsageError("--content-check compares each row's key with its record's: name the key "
                                   "column in a hop's sink (key_column)")
        written = Written(out, (*_reads(config, [s for _, _, s in audited]), *policy.reads()), force)
        written.check()
        _run(audited, fmt, written, fail_on, engine_options(), started, policy=policy, store=store_failures)
        return
    sink, _ = sink_of(target, sink_duckdb, sink_parquet, sink_table)
    if content_check and not replace(sink, **overrides).key_column:
        raise click.UsageError("--content-check compares each row's key with its record's: name the key "
                               "column (--key-column, or key_column in the config's sink)")
    _check_value_columns(replace(sink, **overrides), bool(overrides.get("value_column")
                                                           or overrides.get("value_hash_column")))
    upstream = _upstream(config, target, bootstrap)
    written = Written(out, (*_reads(config, [sink, upstream[0] if upstream else None]), *policy.reads()),
                      force)
    written.check()
    _run([(pipeline or "", target, replace(sink, **overrides))], fmt, written, fail_on, engine_options(),
         started, upstream=upstream, window=window, policy=policy, store=store_failures)


@dataclass(frozen=True)
class Policy:
    """What the audit applies to its final findings (eosctl.report.policy), and the waiver file it read."""

    waivers: tuple[Waiver, ...] = ()
    levels: tuple[Level, ...] = ()
    file: str | None = None

    def reads(self) -> tuple[str, ...]:
        return (self.file,) if self.file else ()


def _policy(config: Any, waivers: str | None, levels: tuple[Level, ...]) -> Policy:
    """--waivers (else the config's [audit] waivers) and the levels: the config's, each kind --level names
    replaced."""
    from eosctl.report.policy import configured  # lazy: eosctl.report.policy 4.1 ms at start-up

    file = waivers or (config.audit_waivers if config is not None else None)
    return Policy(*configured(config, waivers, levels), file)


def _say_if_audited(line: str) -> None:
    """The engine line, at the end of an audit that ran (exit 0 or 1), never after an error's line."""
    exc = sys.exc_info()[1]
    if exc is None or (isinstance(exc, SystemExit) and exc.code in (0, 1, None)):
        click.echo(line, err=True)


# Up to this many offsets (log start to HW over every audited partition) the local engine is picked when
# neither --engine nor the config's [audit] engine says which: a JVM's start costs more than such an audit
# (285 rows: Spark 37.6 s, local 1.2 s).
LOCAL_UP_TO = 5_000_000


def _engine_by_size(runs: list) -> str:
    """The engine for an audit nobody chose one for, said on stderr with the reason."""
    from eosctl.cluster.wire import WireClient  # lazy: eosctl.cluster.wire 165 ms at start-up

    total = 0
    # Its reads are retried within the command's deadline like every other; one that still fails ends the
    # audit with its line: the engine is never chosen on a read that failed (a 4 s blip once turned a 3 s
    # local audit into a 34 s Spark one).
    for t in runs:
        with WireClient(t.cluster, timeout_ms=TIMEOUT_MS) as client:
            known = client.metadata(list(t.topics))
            tps = [(topic, p) for topic, parts in known.items() for p in parts]
            total += sum(o.high_watermark - o.log_start for o in client.offsets(tps).values())
    chosen = "local" if total <= LOCAL_UP_TO else "spark"
    why = "<=" if chosen == "local" else ">"
    click.echo(f"engine: {chosen} ({total:,} offsets {why} {LOCAL_UP_TO:,}; --engine "
               f"{'spark' if chosen == 'local' else 'local'} for the other, or set [audit] engine)", err=True)
    return chosen


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
    from eosctl.sink.base import local_files  # lazy: eosctl.sink.base 60 ms at start-up

    return (*([config] if config else []), *(f for s in sinks for f in local_files(s)))


def _upstream(config: str | None, target, bootstrap: str | None):
    """(the stage's sink, the cluster of its output, that of its input) when the config names the Kafka stage
    that writes the audited topic (eosctl.rules.upstream): key duplicates are followed back through it."""
    # lazy: eosctl.config.target 17 ms, eosctl.rules.upstream 191 ms at start-up
    from eosctl.config.target import resolve
    from eosctl.rules.upstream import upstream_stage

    if target.config is None or target.pipeline is None:
        return None
    name = upstream_stage(target.config, target.topics, target.pipeline.name)
    if name is None:
        return None
    stage = resolve(config, name, bootstrap)
    sink = stage.pipeline.sink
    return sink, sink.kafka_cluster or stage.cluster, stage.cluster


def _has_hops(config: str | None, pipeline: str | None) -> bool:
    """Whether the named pipeline is audited hop by hop (then it needs no topics of its own)."""
    if not (config and pipeline):
        return False
    from eosctl.config.file import load_config  # lazy: eosctl.config.file 14 ms at start-up

    pipe = load_config(config).pipelines.get(pipeline)
    return bool(pipe and pipe.hops)


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


def _run(hops: list[tuple[str, Any, Any]], fmt: str, out: Written, fail_on: tuple[str, ...],
         options, started: float, upstream: tuple | None = None,
         incremental: tuple[str, float, tuple[str, ...], bool] | None = None,
         window: WindowSpec | None = None, policy: Policy | None = None, store: str | None = None,
         sinks: tuple = ()) -> None:
    """Audit each hop (name, target, sink) in order: one hop's report as it is, several merged into one;
    ``upstream``: the stage writing a lone hop's topic, whose lineage key duplicates are followed through;
    ``incremental``: (state file, --full-every, the files it must never replace, the content check) for
    `--incremental`."""
    # lazy: auditors 96 ms, eosctl.output.audit 8.6 ms at start-up
    from auditors import audit_hops
    from eosctl.output.audit import render

    err = console(stderr=True)
    with _progress_display(err) as show:
        if incremental is not None:
            from auditors.incremental import audit_incremental  # lazy: auditors.incremental 10 ms to import

            state, full_every, reads, content = incremental
            _, target, sink = hops[0]
            if sink.mode != "offsets":  # a state sink: its records per key (auditors.stateinc)
                from auditors.stateinc import audit_state_incremental  # lazy: auditors.stateinc 60 ms

                audit_incremental = audit_state_incremental  # noqa: N806 - the same call, for a state sink
            result = audit_incremental(target, sink, state, full_every=full_every, fail_on=fail_on,
                                       progress=show, started=started, reads=reads, content=content)
        elif sinks:
            from auditors import audit_sinks  # lazy: auditors 96 ms at start-up

            result = audit_sinks(hops[0][1], sinks, options=options, progress=show, fail_on=fail_on,
                                 started=started, window=window)
        else:
            result = audit_hops(hops, options=options, progress=show, fail_on=fail_on, started=started,
                                window=window)
        if upstream is not None:
            from eosctl.rules.upstream import (
                follow_upstream,  # lazy: eosctl.rules.upstream 191 ms at start-up
            )

            show(Step("following key duplicates through the stage's lineage", 0, None))
            result = follow_upstream(result, *upstream)
        if policy is not None and (policy.waivers or policy.levels):
            from eosctl.report.policy import apply_policy  # lazy: eosctl.report.policy 4.1 ms at start-up

            result = apply_policy(result, policy.waivers, policy.levels)
    target = hops[-1][1]
    if not err.is_terminal:
        err.print(f"audited {len(result.partitions)} partitions in {result.elapsed_seconds:.1f}s",
                  highlight=False)
    _emit(_html(result, target) if fmt == "html" else render(result, fmt), fmt, out)
    if store is not None:
        from eosctl.inspection.failures import store_failures  # lazy: eosctl.inspection.failures 330 ms

        counts = store_failures(result, hops[-1][2], target.cluster, store)
        click.echo(f"stored the rows of {counts['findings']} findings in {shown(os.path.abspath(store))}: "
                   f"{counts['kafka_records']} Kafka records, {counts['sink_rows']} sink rows", err=True)
    if out.out:
        from eosctl.output.audit import summary  # lazy: eosctl.output.audit 8.6 ms at start-up

        # The report went to a file: the verdict and where it is, for the person at the terminal.
        click.echo(f"{result.verdict.upper()}: {summary(result)}; {fmt} report written to "
                   f"{shown(os.path.abspath(out.out))}")
    sys.exit(1 if result.verdict == "fail" else 0)


def _html(result, target) -> str:
    from eosctl.output.html import AuditContext, render_html  # lazy: eosctl.output.html 76 ms at start-up

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
                    _print_parts(Console(file=f, width=120, highlight=False, color_system=None), rendered)
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
