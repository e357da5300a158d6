"""`eosctl ledger` (the sink next to Kafka, per source partition) and `eosctl snapshot` (an incident file).

`ledger --format json` shape (stable):

    {
      "pipeline": str|null, "sink": str, "group": str|null,
      "scanned": bool,                 # holes checked against the log model (false with --no-scan)
      "flagged_partitions": int,
      "partitions": [{
        "topic": str, "partition": int,
        "rows": int, "distinct_offsets": int, "min_offset": int|null, "max_offset": int|null,
        "duplicate_rows": int, "duplicate_offsets": int,
        "stored_offset": int|null,     # next offset in the sink's offsets table
        "committed_offset": int|null,  # the group's committed offset in Kafka
        "log_start_offset": int|null, "high_watermark": int|null, "last_stable_offset": int|null,
        "checked_to": int|null,        # exclusive end of the checked span (stored, else committed offset)
        "missing_offsets": int|null,   # committed data offsets below checked_to absent from the sink
        "flags": [{"kind": "offset_mismatch"|"gap"|"duplicate"|"phantom_aborted"|"phantom_marker"|
                           "phantom_uncommitted"|"phantom_beyond_hw"|"span_missing"|"unexpected_topic",
                   "first_offset": int|null, "last_offset": int|null, "count": int, "message": str}]
      }]
    }

Exit codes: 0 no flags, 1 flags found, 2 usage/config/connection/sink error.

`snapshot --out FILE` writes one DuckDB file; its tables are documented in eosctl.snapshot. With
`--format json` it prints {"out": path, "captured_at": iso8601, "sections": {name: "ok" | error},
"hanging": eosctl.txns.HangingReport.to_dict() | null, "audit_verdict": "pass" | "fail" | null}.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from eosctl.commands.options import DURATION, sink_of, sink_options, target_options


def _target_options(f: Any) -> Any:
    f = click.option("--scan/--no-scan", default=True, show_default=True,
                     help="Check the sink's offsets against a scan of the log (markers and aborted "
                          "offsets are not holes).")(f)
    return target_options(sink_options(f))


@click.command("ledger")
@_target_options
def ledger(config: str | None, pipeline: str | None, bootstrap: str | None, topics: tuple[str, ...],
           group: str | None, sink_duckdb: str | None, sink_parquet: str | None, sink_table: str | None,
           scan: bool, fmt: str) -> None:
    """Per source partition: what the sink holds next to what Kafka says; exit 1 on any flag.

    \b
    From the sink (opened read-only; a live writer is never blocked): rows, distinct offsets,
    min/max offset, duplicate rows, and the offsets it stored with its rows. From Kafka: the group's
    committed offset, log start, LSO and HW. Flags: stored != committed (only when committed data lies
    between them), duplicates, missing committed records, rows at aborted/marker/open offsets.
    """
    from eosctl import ledger as ledger_mod
    from eosctl.render import console
    from eosctl.target import resolve

    target = resolve(config, pipeline, bootstrap, topics, group)
    sink, where = sink_of(target, sink_duckdb, sink_parquet, sink_table)
    with _scan_progress() as progress:
        result = ledger_mod.collect(target.cluster, sink, target.topics, target.group,
                                    pipeline=target.pipeline.name if target.pipeline else None, where=where,
                                    scan=scan, progress=progress)
    if fmt == "json":
        from eosctl.render import emit_json

        emit_json(result.to_dict())
    else:
        render_ledger(console(), result)
    if result.flags:
        sys.exit(1)


def render_ledger(out: Any, result: Any) -> None:
    from eosctl.render import table

    out.print(f"sink {result.sink}   group {result.group or '-'}   "
              f"{'checked against the log' if result.scanned else 'not checked against the log (--no-scan)'}")
    out.print(table("Ledger", ["topic", "partition", "rows", "distinct", "min", "max", "dup rows", "stored",
                               "committed", "log start", "lso", "hw", "missing", "flags"],
                    [(p.topic, p.partition, p.rows, p.distinct_offsets, p.min_offset, p.max_offset,
                      p.duplicate_rows, p.stored_offset, p.committed_offset, p.log_start_offset,
                      p.last_stable_offset, p.high_watermark, p.missing_offsets, len(p.flags) or "")
                     for p in result.partitions]))
    flagged = result.flags
    if not flagged:
        out.print("[green]no flags[/]: the sink agrees with Kafka")
        return
    out.print(table(f"Flags ({len(flagged)})", ["topic", "partition", "kind", "offsets", "count", "what"],
                    [(p.topic, p.partition, f.kind, _span(f.first_offset, f.last_offset), f.count, f.message)
                     for p, f in flagged]))


def _span(first: int | None, last: int | None) -> str:
    return "-" if first is None else str(first) if first == last else f"{first}..{last}"


class _scan_progress:
    """A transient progress bar on stderr while partitions are scanned; silent off a terminal."""

    def __enter__(self) -> Any:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        from eosctl.render import console

        err = console(stderr=True)
        self.bar = Progress(TextColumn("scanning the log"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("offsets"), console=err, transient=True, disable=not err.is_terminal)
        self.bar.__enter__()
        self.task = self.bar.add_task("scan", total=None)
        return lambda step: self.bar.update(self.task, completed=step.done, total=step.total)

    def __exit__(self, *exc: object) -> None:
        self.bar.__exit__(*exc)


@click.command("snapshot")
@_target_options
@click.option("--out", "-o", "out_path", required=True, type=click.Path(dir_okay=False),
              help="DuckDB file to write (must not exist unless --force).")
@click.option("--force", is_flag=True, help="Overwrite FILE if it exists.")
@click.option("--max-age", type=DURATION, default="15m", show_default=True,
              help="Open longer than this counts as hanging (as `txns hanging`); younger open "
                   "transactions are recorded with their ages anyway.")
@click.option("--with-audit", is_flag=True,
              help="Also audit the sink and store the report (local engine unless the config's [audit] "
                   "engine says spark).")
@click.option("--audit-report", type=click.Path(exists=True, dir_okay=False),
              help="Store this report of `eosctl audit --format json --out FILE` instead of running one.")
def snapshot(config: str | None, pipeline: str | None, bootstrap: str | None, topics: tuple[str, ...],
             group: str | None, sink_duckdb: str | None, sink_parquet: str | None, sink_table: str | None,
             scan: bool, out_path: str, force: bool, max_age: float, with_audit: bool,
             audit_report: str | None, fmt: str) -> None:
    """Capture everything about a pipeline into one DuckDB file, for incident reports.

    \b
    Transactions, producers, lag, hanging transactions, per-partition log summaries (ranges,
    transactions, producers), the sink ledger and optionally an audit report, each with the capture
    time. Hanging: every open transaction holding an LSO (or orphaned by its coordinator) is stored
    with its age, and those older than --max-age form the report, so a reader can still judge one
    that was young at capture time. Open it offline: `eosctl tui --snapshot FILE`, or any DuckDB
    client (tables documented in eosctl/snapshot.py). Reads only; writes nothing to Kafka.
    """
    from pathlib import Path

    from eosctl import snapshot as snap
    from eosctl.errors import EosctlError
    from eosctl.render import console
    from eosctl.target import resolve

    if Path(out_path).exists() and not force:
        raise EosctlError(f"{out_path} already exists; choose another --out or pass --force")
    snap.check_writable(out_path)  # before the capture, which can take minutes
    if with_audit and audit_report:
        raise click.UsageError("pass either --with-audit or --audit-report, not both")
    stored = _read_audit_report(audit_report) if audit_report else None  # a bad file fails before capture
    target = resolve(config, pipeline, bootstrap, topics, group)
    sink = where = None
    if (target.pipeline and target.pipeline.sink) or sink_duckdb or sink_parquet:
        sink, where = sink_of(target, sink_duckdb, sink_parquet, sink_table)
    with _scan_progress() as progress:
        captured = snap.capture(target, sink=sink, where=where or "sink", scan=scan, progress=progress,
                                max_age_s=max_age)
    if stored is not None:
        captured.audit, captured.audit_origin = stored, audit_report
        captured.sections["audit"] = "ok"
    elif with_audit:
        _capture_audit(captured, target, sink)
    snap.write_snapshot(captured, out_path)
    if fmt == "json":
        from eosctl.render import emit_json

        emit_json({"out": out_path, "captured_at": captured.captured_at.isoformat(),
                   "sections": captured.sections,
                   "hanging": captured.hanging.to_dict() if captured.hanging is not None else None,
                   "audit_verdict": captured.audit.verdict if captured.audit is not None else None})
        return
    out = console()
    when = captured.captured_at.isoformat(timespec="seconds")
    out.print(f"snapshot written to {out_path} (captured {when})")
    for name, status in captured.sections.items():
        text = '[green]ok[/]' if status == 'ok' else '[yellow]' + status + '[/]'
        if name == "hanging" and captured.hanging is not None:
            text += f" ({_hanging_summary(captured)})"
        elif name == "audit" and captured.audit is not None:
            text += f" ({captured.audit.verdict}, {len(captured.audit.findings)} findings)"
        out.print(f"  {name:<13} {text}")


def _hanging_summary(captured: Any) -> str:
    from eosctl.commands.options import age_text

    rep = captured.hanging
    younger = len(captured.hanging_candidates) - len(rep.hanging)
    return (f"{len(rep.hanging)} hanging (open longer than {age_text(rep.max_age_s)}), "
            f"{younger} younger open transaction{'s' if younger != 1 else ''} recorded")


def _read_audit_report(path: str) -> Any:
    import json

    from eosctl.errors import EosctlError
    from eosctl.findings import AuditReport

    try:
        with open(path, encoding="utf-8") as f:
            return AuditReport.from_dict(json.load(f))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise EosctlError(f"{path} is not an `eosctl audit --format json` report ({type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else ''}); write one with "
                          "`eosctl audit --format json --out FILE`") from None


def _capture_audit(captured: Any, target: Any, sink: Any) -> None:
    """Run the audit (auditors is imported here only: the snapshot module never imports it), on the
    local engine unless the config's [audit] engine says otherwise.

    Like every other section, a failure is recorded in the snapshot instead of losing the capture.
    """
    from contextlib import nullcontext

    from eosctl.errors import EosctlError

    if sink is None or not target.topics:
        captured.sections["audit"] = "not captured: no sink and source topics to audit"
        return
    from auditors import EngineOptions, audit
    from eosctl.render import console

    err = console(stderr=True)
    try:
        options = EngineOptions.resolve(target.config, "local")
        with err.status(f"auditing the sink ({options.where()})") if err.is_terminal else nullcontext():
            captured.audit = audit(target, sink, options=options)
        captured.audit_origin = "run"
        captured.sections["audit"] = "ok"
    except EosctlError as e:
        captured.sections["audit"] = f"not captured: {e}"


COMMANDS = [ledger, snapshot]
