"""`eosctl report`: the HTML sign-off page from an audit you already have (a snapshot or a JSON report)."""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import UTC, datetime

import click

from eosctl.base.errors import EosctlError
from eosctl.base.files import check_output, shown, writing_output
from eosctl.commands.options import OutputFile, duckdb_file
from eosctl.config.redaction import redact
from eosctl.report.segments import log_segments


@click.command("report")
@click.argument("source", metavar="SNAPSHOT.duckdb|REPORT.json", type=duckdb_file())
@click.option("--out", "out", required=True, type=OutputFile(),
              help="The HTML file to write (one self-contained file: no network, no scripts); must not "
                   "exist unless --force, and is never SOURCE itself.")
@click.option("--force", is_flag=True, help="Replace --out if it exists.")
def report(source: str, out: str, force: bool) -> None:
    """Render an audit as one self-contained HTML file, for sign-off or an incident review.

    \b
    SOURCE is either
      a snapshot with an audit   eosctl snapshot -c eosctl.toml --with-audit --out incident.duckdb
      a JSON audit report        eosctl audit -c eosctl.toml --format json --out audit.json
    \b
    Example:
      eosctl report incident.duckdb --out incident.html
      eosctl report audit.json --out audit.html
    \b
    The page shows the verdict first, what was audited, a gap map per partition (its offsets from log
    start to high watermark: committed records in the sink, gaps, duplicates, phantoms, aborted ranges,
    markers and open transactions, each in its own colour), the partition and findings tables, and the
    JSON report embedded for machines (<script type="application/json" id="eosctl-report">). A live
    audit writes the same page directly: eosctl audit --format html --out FILE.

    The gap map draws aborted ranges, markers and open transactions from the audit's log segments (audits
    by this eosctl record them) or, for a snapshot, from its partition logs; an older JSON report without
    them still shows every finding.
    """
    from eosctl.output.html import render_html  # lazy: see docs/imports.md

    check_output(out, (source,), force)
    audit, context = load_audit(source)
    html = render_html(audit, context)
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        raise EosctlError(f"cannot write {shown(out)}: directory {shown(parent)} does not exist; create it "
                          "or pick another --out")
    try:
        with writing_output(out, (source,), force) as tmp, open(tmp, "w", encoding="utf-8") as f:
            f.write(html)
    except OSError as e:
        raise EosctlError(f"cannot write {shown(out)}: {e.strerror or e}") from None
    click.echo(f"wrote {shown(out)}: {audit.verdict.upper()}, {len(audit.findings)} findings in "
               f"{len(audit.partitions)} partitions", err=True)


def load_audit(source: str):
    """The audit of a snapshot or a JSON report, and where it came from (also `eosctl explain`)."""
    # lazy: see docs/imports.md
    from eosctl.output.html import AuditContext
    from eosctl.report.file import read_report
    from eosctl.sink.duckdb import read_header

    if not os.path.isfile(source):
        raise EosctlError(f"{source}: no such file (pass a snapshot .duckdb or a JSON report from "
                          "`eosctl audit --format json --out FILE`)")
    if read_header(source) is not None:
        return _from_snapshot(source)
    notes: list[str] = []
    try:
        audit = read_report(source, notes)
    except ValueError as e:
        raise EosctlError(f"{shown(source)} is neither an eosctl snapshot nor a JSON audit report ({e}); "
                          "write one with `eosctl audit --format json --out FILE`") from None
    _say(source, notes)
    written = datetime.fromtimestamp(os.path.getmtime(source), UTC)
    return audit, AuditContext(origin=f"{source} (JSON report, file written {written:%Y-%m-%d %H:%M:%S} UTC"
                                      + "".join(f"; {n}" for n in notes) + ")")


def _say(source: str, notes: list[str]) -> None:
    """A report whose own verdict disagrees with its findings: one line each, and the page says it too."""
    for note in notes:
        click.echo(redact(f"eosctl: warning: {shown(source)}: {note}"), err=True)


def _from_snapshot(source: str):
    # lazy: see docs/imports.md
    from eosctl.inspection.snapshot import load_snapshot
    from eosctl.output.html import AuditContext

    notes: list[str] = []
    snap = load_snapshot(source, notes)
    _say(source, notes)
    if snap.audit is None:
        raise EosctlError(f"{source} holds no audit; take a snapshot with one (`eosctl snapshot "
                          "--with-audit` or `--audit-report FILE`) or render a JSON report instead")
    audit = snap.audit
    # Reports from before log segments existed: the snapshot's own partition logs have them.
    parts = [replace(p, log_segments=log_segments(snap.logs[(p.topic, p.partition)]))
             if p.log_segments is None and (p.topic, p.partition) in snap.logs else p
             for p in audit.partitions]
    audit = replace(audit, partitions=parts)
    imported = snap.audit_origin not in (None, "run")
    origin = (f"snapshot {source}" + (f" (audit imported from {snap.audit_origin})" if imported else "")
              + "".join(f"; {n}" for n in notes))
    # An audit run by the capture happened at capture time; an imported report's time isn't recorded.
    when = None if imported else snap.captured_at
    return audit, AuditContext(bootstrap=snap.bootstrap, pipeline=snap.pipeline, topics=tuple(snap.topics),
                               audited_at=when, eosctl_version=snap.eosctl_version, origin=origin)
