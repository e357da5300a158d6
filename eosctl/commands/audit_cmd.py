"""`eosctl audit`: did every committed source record land in the sink exactly once, and nothing else?

JSON shape (`--format json`, exactly one object on stdout; names are stable, CI parses them):

    {
      "verdict": "pass" | "fail",
      "fail_on": [kind, ...],
      "summary": {"partitions", "expected_records", "sink_rows", "unverifiable_rows",
                  "findings": {kind: int for every kind}, "failing_findings"},
      "partitions": [{"topic", "partition", "log_start_offset", "last_stable_offset", "high_watermark",
                      "expected_records", "sink_rows", "unverifiable_below", "exists",
                      "log_segments" (optional, for the HTML gap map: [{"kind": ABORTED|MARKER|OPEN|HOLE,
                      "first", "last", "count"}], at most 100 per kind, neighbours coalesced)}],
      "findings": [{"kind", "topic", "partition", "first_offset", "last_offset", "count",
                    "key" and "offsets" (key_duplicate only), "detail" (when there is one)}],
      "sink": str, "group": str | null,
      "engine": {"spark_version", "master", "shuffle_partitions", "tasks", "partitions_seconds", ...},
      "elapsed_seconds": float
    }

kind is one of gap, duplicate, phantom_aborted, phantom_marker, phantom_uncommitted, phantom_beyond_hw,
key_duplicate, offset_mismatch, invalid_row; last_offset is inclusive. invalid_row (sink rows no Kafka
record can match) has first_offset and last_offset null, topic and partition null where they are the
invalid value, count = rows, detail = the column and the problem. Exit 0: no failing findings, 1: failing
findings, 2: usage, config, connection or sink error.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace

import click

from eosctl.commands.options import OutputFile, check_one_sink, sink_of, sink_options, target_options
from eosctl.findings import DESCRIPTIONS, KINDS, parse_kinds

FORMATS = ("table", "json", "junit", "html")


def _fail_on(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[str, ...]:
    try:
        return parse_kinds(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


@click.command("audit")
@target_options(formats=FORMATS, format_help="Rich tables, stable JSON or JUnit XML for CI, or one "
                                             "self-contained HTML sign-off document (with --out).")
@sink_options
@click.option("--topic-column", help="Column with the source topic [default: src_topic].")
@click.option("--partition-column", help="Column with the source partition [default: src_partition].")
@click.option("--offset-column", help="Column with the source offset [default: src_offset].")
@click.option("--key-column", help="Business-key column: enables key_duplicate.")
@click.option("--offsets-table",
              help="Table of offsets stored with the rows (topic, partition, next_offset); with --group, "
                   "compared with the group's committed offsets.")
@click.option("--out", "out", type=OutputFile(special_ok=True), help="Write the report here.")
@click.option("--fail-on", callback=_fail_on, metavar="KIND,...",
              help="Finding kinds that fail the audit (exit 1) [default: all].")
@click.option("--master",
              help="Spark master: local[N], spark://HOST:PORT, yarn, k8s://... [default: local[*]].")
@click.option("--remote", help="Spark Connect server, sc://HOST:PORT (instead of --master).")
@click.option("--driver-memory", help="Spark driver heap [default: the config's, or 2g].")
def audit(config: str | None = None, pipeline: str | None = None, bootstrap: str | None = None,
          topics: tuple[str, ...] = (), group: str | None = None, sink_duckdb: str | None = None,
          sink_parquet: str | None = None, sink_table: str | None = None, topic_column: str | None = None,
          partition_column: str | None = None, offset_column: str | None = None,
          key_column: str | None = None, offsets_table: str | None = None, fmt: str = "table",
          out: str | None = None,
          fail_on: tuple[str, ...] = KINDS, master: str | None = None, remote: str | None = None,
          driver_memory: str | None = None) -> None:
    """Reconcile Kafka source offsets with the sink's rows (Spark, one task per partition)."""
    from auditors.spark import require_reachable_sink
    from eosctl.target import resolve

    fail_on = tuple(fail_on) if fail_on else KINDS  # ctx.invoke (eosctl demo) skips option callbacks
    if master and remote:
        raise click.UsageError("pass either --master or --remote, not both")
    check_one_sink(sink_duckdb, sink_parquet)
    _check_out(out)
    target = resolve(config, pipeline, bootstrap, topics, group, need_topics=True)
    sink, _ = sink_of(target, sink_duckdb, sink_parquet, sink_table)
    overrides = {k: v for k, v in (("topic_column", topic_column), ("partition_column", partition_column),
                                   ("offset_column", offset_column), ("key_column", key_column),
                                   ("offsets_table", offsets_table)) if v}
    sink = replace(sink, **overrides)
    spark_conf = target.config.spark if target.config else None
    master, remote = (master or (spark_conf.master if spark_conf and not remote else None),
                      remote or (spark_conf.remote if spark_conf and not master else None))
    require_reachable_sink(sink, master, remote)
    _run(target, sink, fmt, out, fail_on, master, remote,
         driver_memory or (spark_conf.driver_memory if spark_conf else "2g"),
         spark_conf.shuffle_partitions if spark_conf else 4)


def _check_out(out: str | None) -> None:
    """Before minutes of Spark work, not after: the report's directory must exist and be writable."""
    from eosctl.errors import EosctlError

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
    "Reconcile Kafka source offsets with the sink's rows (Spark, one task per partition).",
    "",
    "Per (topic, partition), expected = committed data records between the log start offset and the LSO."
    " Markers, aborted records, open transactions and compaction holes are not expected; rows below the"
    " log start offset can't be verified and are counted, never reported as gaps. Findings:",
    "",
    "\b",
    *(f"  {k:<20} {v}" for k, v in DESCRIPTIONS.items()),
    "",
    "Exit status: 0 no failing findings, 1 failing findings, 2 usage, config, connection or sink error.",
])


def _run(target, sink, fmt: str, out: str | None, fail_on: tuple[str, ...], master: str | None,
         remote: str | None, driver_memory: str, shuffle_partitions: int) -> None:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    from auditors import job, report
    from auditors import spark as sparks
    from eosctl.render import console

    inp = job.AuditInput(source=job.KafkaSource(target.cluster), sink=sink, topics=target.topics,
                         cluster=target.cluster, group=target.group, fail_on=fail_on)
    err = console(stderr=True)
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True, disable=not err.is_terminal) as bar:
        task = bar.add_task("reading the sink and Kafka metadata", total=None)
        items = job.prepare(inp)  # sink and broker errors surface here, before Spark's start-up
        where = f"remote {remote}" if remote else (master or "local[*]")
        bar.update(task, description=f"starting Spark ({where})")
        spark = sparks.session(master=master, remote=remote, driver_memory=driver_memory,
                               shuffle_partitions=shuffle_partitions)

        def say(what: str, done: int, total: int) -> None:
            bar.update(task, description=what, completed=done, total=total)

        result = job.run_audit(spark, inp, items, progress=say)
    if not err.is_terminal:
        err.print(f"audited {len(items)} partitions in {result.elapsed_seconds:.1f}s", highlight=False)
    _emit(_html(result, target) if fmt == "html" else report.render(result, fmt), fmt, out)
    # For a command that invoked this one (eosctl demo checks the findings against its manifest).
    click.get_current_context().meta["eosctl.audit_report"] = result
    sys.exit(1 if result.verdict == "fail" else 0)


def _html(result, target) -> str:
    from datetime import UTC, datetime

    from eosctl.report_html import AuditContext, render_html

    return render_html(result, AuditContext(
        bootstrap=target.cluster.bootstrap_servers,
        pipeline=target.pipeline.name if target.pipeline else None, topics=tuple(target.topics),
        audited_at=datetime.now(UTC), origin="eosctl audit"))


def _emit(rendered, fmt: str, out: str | None) -> None:
    from eosctl.errors import EosctlError
    from eosctl.render import console

    if out:
        try:
            with open(out, "w", encoding="utf-8") as f:
                if isinstance(rendered, str):
                    f.write(rendered if rendered.endswith("\n") else rendered + "\n")
                else:
                    from rich.console import Console

                    # A file, not stdout: fixed width, no colour codes.
                    Console(file=f, width=120, highlight=False, color_system=None).print(rendered)
        except OSError as e:
            raise EosctlError(f"cannot write the report to {out}: {e.strerror or e}") from None
        return
    if isinstance(rendered, str):
        click.echo(rendered.rstrip("\n"))
    else:
        console().print(rendered)
