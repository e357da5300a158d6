"""`eosctl snapshot`: capture everything about a pipeline into one DuckDB file, for incident reports.

JSON shapes (`--format json`, stable): docs/json.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING

import click

from eosctl.base.errors import EosctlError
from eosctl.base.files import check_output, glob_paths, shown
from eosctl.commands.ledger_cmd import ledger_options
from eosctl.commands.options import DURATION, OutputFile, check_one_sink, report_file, sink_of
from eosctl.config.redaction import redact
from eosctl.output.emit import emit
from eosctl.output.snapshot import render_snapshot
from eosctl.output.terminal import console, scan_progress

if TYPE_CHECKING:  # the command imports the core lazily, for a fast `eosctl --help`
    from eosctl.config.model import Sink
    from eosctl.config.target import Target
    from eosctl.inspection.capture import Capture
    from eosctl.report.findings import AuditReport


@click.command("snapshot")
@ledger_options
@click.option("--out", "-o", "out_path", required=True, type=OutputFile(),
              help="DuckDB file to write (must not exist unless --force).")
@click.option("--force", is_flag=True, help="Overwrite FILE if it exists.")
@click.option("--max-age", type=DURATION, default="15m", show_default=True,
              help="Open longer than this counts as hanging (as `txns hanging`); younger open "
                   "transactions are recorded with their ages anyway.")
@click.option("--with-audit", is_flag=True,
              help="Also audit the sink and store the report, as `eosctl audit` does (the config's "
                   "[audit] engine, else local for small audits).")
@click.option("--audit-report", type=report_file(),
              help="Store this report of `eosctl audit --format json --out FILE` instead of running one.")
@click.option("--records", "records", type=click.IntRange(min=0), default=0, show_default=True, metavar="N",
              help="Also store the data records among each partition's last N offsets (keys and values: "
                   "the payloads), decoded through the cluster's schema_registry_url where framed.")
@click.option("--raw", is_flag=True, help="With --records: store keys and values as bytes, never decoded.")
def snapshot(config: str | None, pipeline: str | None, bootstrap: str | None, topics: tuple[str, ...],
             group: str | None, sink_duckdb: str | None, sink_parquet: str | None, sink_table: str | None,
             scan: bool, out_path: str, force: bool, max_age: float, with_audit: bool,
             audit_report: str | None, records: int, raw: bool, fmt: str) -> None:
    """Capture everything about a pipeline into one DuckDB file, for incident reports.

    \b
    Transactions, producers, lag, hanging transactions, per-partition log summaries (ranges,
    transactions, producers), the sink ledger and optionally an audit report, each with the capture
    time. Hanging: every open transaction holding an LSO (or orphaned by its coordinator) is stored
    with its age, and those older than --max-age form the report, so a reader can still judge one
    that was young at capture time. Open it offline: `eosctl tui --snapshot FILE`, or any DuckDB
    client (tables documented in docs/snapshot.md). Reads only; writes nothing to Kafka.
    """
    # lazy: see docs/imports.md
    from eosctl.config.target import resolve
    from eosctl.inspection import snapshot as snap
    from eosctl.inspection.capture import capture
    from eosctl.sink.base import local_files

    if raw and not records:
        raise click.UsageError("--raw goes with --records N (it says how the records are stored)")
    check_one_sink(sink_duckdb, sink_parquet)
    check_output(out_path, (config, audit_report, sink_duckdb, *_matches(sink_parquet)), force)
    snap.check_writable(out_path)  # before the capture, which can take minutes
    if with_audit and audit_report:
        raise click.UsageError("pass either --with-audit or --audit-report, not both")
    stored = _read_audit_report(audit_report) if audit_report else None  # a bad file fails before capture
    target = resolve(config, pipeline, bootstrap, topics, group)
    sink = where = None
    if (target.pipeline and target.pipeline.sink) or sink_duckdb or sink_parquet:
        sink, where = sink_of(target, sink_duckdb, sink_parquet, sink_table)
    reads = (config, audit_report, *local_files(sink))
    check_output(out_path, reads, force)  # the sink is known now: `--out` naming it is refused here
    with _frozen_for_both(sink, where, target) if with_audit else nullcontext(sink) as fixed:
        # With --with-audit the ledger and the audit read one frozen state of the sink (one copy, one
        # snapshot or version), both before Kafka: they can't disagree on what the sink held.
        with scan_progress() as progress:
            captured = capture(target, sink=fixed, where=where or "sink", scan=scan, progress=progress,
                               max_age_s=max_age)
        if records:
            captured.records = _records(target, captured, records, raw)
        if stored is not None:
            captured.audit, captured.audit_origin = stored, audit_report
            captured.sections["audit"] = "ok"
        elif with_audit:
            _capture_audit(captured, target, fixed, config, bootstrap)
    check_output(out_path, reads, force)  # again: the file may have appeared during the capture
    snap.write_snapshot(captured, out_path)

    emit(fmt, lambda: {"out": out_path, "captured_at": captured.captured_at.isoformat(),
                       "sections": captured.sections,
                       "hanging": captured.hanging.to_dict() if captured.hanging is not None else None,
                       "audit_verdict": captured.audit.verdict if captured.audit is not None else None},
         lambda: render_snapshot(console(), captured, out_path))


def _records(target: Target, captured: Capture, last: int, raw: bool) -> dict:
    """The data records among each captured partition's last ``last`` offsets, decoded unless ``raw``
    (eosctl.inspection.records)."""
    # lazy: only with --records; see docs/imports.md
    from eosctl.cluster.wire import WireClient
    from eosctl.inspection.records import decoder_for, read_documents

    decoder = decoder_for(target.cluster, raw)
    out = {}
    with WireClient(target.cluster) as client:
        for tp, log in sorted(captured.logs.items()):
            first = max(log.log_start_offset, log.high_watermark - last)
            out[tp] = read_documents(client, tp[0], tp[1], first, log.high_watermark, decoder, log.kind_at)
    return out


def _matches(parquet: str | None) -> list[str]:
    return glob_paths(parquet) if parquet and "://" not in parquet else []


def _read_audit_report(path: str) -> AuditReport:
    from eosctl.report.file import read_report  # lazy: see docs/imports.md

    notes: list[str] = []
    try:
        report = read_report(path, notes)
    except ValueError as e:
        raise EosctlError(f"{shown(path)} is not an `eosctl audit --format json` report ({e}); write one "
                          "with `eosctl audit --format json --out FILE`") from None
    for note in notes:  # stored with the recomputed verdict
        click.echo(redact(f"eosctl: warning: {shown(path)}: {note}"), err=True)
    return report


@contextmanager
def _frozen_for_both(sink: Sink | None, where: str | None, target: Target) -> Iterator[Sink | None]:
    """The sink frozen once for the capture and the audit, where the audit's engine reads this machine's
    files (on a remote Spark cluster the audit freezes its own, readable by the executors)."""
    if sink is None:
        yield None
        return
    # lazy: see docs/imports.md
    from auditors import EngineOptions
    from auditors.spark import runs_here
    from eosctl.sink import frozen

    options = EngineOptions.resolve(target.config)
    if options.engine != "local" and not runs_here(options.master, options.remote):
        yield sink
        return
    with frozen(sink, where or "sink") as fixed:
        yield fixed


def _capture_audit(captured: Capture, target: Target, sink: Sink | None, config: str | None = None,
                   bootstrap: str | None = None) -> None:
    """Run the audit (auditors is imported here only: the snapshot module never imports it) as `eosctl
    audit` runs it: the config's [audit] engine, else the one its size picks; a pipeline with hops is
    audited hop by hop (each hop with its own sink); finished by the auditors' passes.

    Like every other section, a failure is recorded in the snapshot instead of losing the capture.
    """
    hops = target.pipeline.hops if target.pipeline else ()
    if hops:
        _capture_hops_audit(captured, target, hops, config, bootstrap)
        return
    if sink is None or not target.topics:
        captured.sections["audit"] = "not captured: no sink and source topics to audit"
        return
    from auditors import EngineOptions, audit  # lazy: see docs/imports.md

    err = console(stderr=True)
    try:
        options = EngineOptions.resolve(target.config)
        with err.status(f"auditing the sink ({options.where()})") if err.is_terminal else nullcontext():
            captured.audit = audit(target, sink, options=options)
        captured.audit_origin = "run"
        captured.sections["audit"] = "ok"
    except EosctlError as e:
        captured.sections["audit"] = f"not captured: {e}"


def _capture_hops_audit(captured: Capture, target: Target, hops: tuple[str, ...], config: str | None,
                        bootstrap: str | None) -> None:
    from auditors import EngineOptions, audit_hops  # lazy: see docs/imports.md
    from eosctl.config.target import resolve  # lazy: see docs/imports.md

    err = console(stderr=True)
    try:
        read = target.config if target.config is not None else config  # the config read once
        runs = [(hop, t, sink_of(t, None, None, None)[0])
                for hop, t in ((h, resolve(read, h, bootstrap, need_topics=True)) for h in hops)]
        options = EngineOptions.resolve(target.config)
        shown = f"auditing {len(hops)} hops ({options.where()})"
        with err.status(shown) if err.is_terminal else nullcontext():
            captured.audit = audit_hops(runs, options=options)
        captured.audit_origin = "run"
        captured.sections["audit"] = "ok"
    except EosctlError as e:
        captured.sections["audit"] = f"not captured: {e}"


COMMANDS = [snapshot]
