"""An AuditReport for people: a rich table; ``render`` picks the format (table, JSON or JUnit XML)."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.text import Text

from eosctl.base import safetext
from eosctl.base.safetext import text
from eosctl.output.finding import extra, short_cause, standing, waiver_text, where, window_note
from eosctl.output.terminal import table as rich_table
from eosctl.report.findings import PASS, AuditReport


def render(report: AuditReport, fmt: str) -> Any:
    """str for json/junit, a rich renderable for table."""
    if fmt == "json":
        return report.to_json()
    if fmt == "junit":
        from eosctl.output.junit import junit  # lazy: for --format junit only; see docs/imports.md

        return junit(report)
    if fmt == "table":
        return table(report)
    raise ValueError(f"unknown format {fmt!r}")


def table(report: AuditReport) -> Any:
    parts: list[Any] = []
    if report.hops:
        hrows = [(h.name, ", ".join(h.topics), h.sink or "", h.group or "", h.verdict.upper(), h.findings)
                 for h in report.hops]
        columns = ["hop", "reads", "writes to", "group", "verdict", "findings"]
        parts.append(rich_table("hops, in order", columns, hrows))
    if report.sinks:
        srows = [(s.name, s.sink or "", s.verdict.upper(), s.findings) for s in report.sinks]
        parts.append(rich_table("sinks", ["sink", "where", "verdict", "findings"], srows))
    several = bool(report.sinks)
    rows = []
    for p in report.partitions:
        status = "not in Kafka" if not p.exists else window_note(p)
        if p.filtered is not None:
            status = ", ".join(x for x in (status, f"{p.filtered} filtered by its route") if x)
        rows.append(((p.sink or "",) if several else ()) + (
            p.topic, p.partition, p.log_start_offset, p.last_stable_offset, p.high_watermark,
            p.expected_records, p.sink_rows, p.unverifiable_below or "", status))
    columns = ["topic", "partition", "log start", "lso", "hw", "expected", "sink rows", "unverifiable",
               "note"]
    parts.append(rich_table("partitions", ["sink"] * several + columns, rows))
    if report.findings:
        parts.append(causes_table(report))
        frows = [((f.sink or "",) if several else ()) + (
            f.kind + (f" ({s})" if (s := standing(report, f)) else ""), f.topic, f.partition,
            where(f), f.count, "; ".join(x for x in (extra(f), waiver_text(f)) if x),
            text(short_cause(f))) for f in report.findings]
        columns = ["sink"] * several + ["kind", "topic", "partition", "offsets", "count", "detail", "cause"]
        if len(frows) <= TABLE_ROWS:
            parts.append(rich_table("findings", columns, frows))
        else:
            parts += aligned(f"findings ({len(frows)})", columns, frows)
    colour = "green" if report.verdict == PASS else "red"
    expected = sum(p.expected_records for p in report.partitions)
    rows_total = sum(p.sink_rows for p in report.partitions)
    parts.append(Text.from_markup(
        f"[bold {colour}]{report.verdict.upper()}[/]  {len(report.partitions)} partitions, "
        f"{expected} expected records, {rows_total} sink rows: {summary(report)}"
        + (f"  ({report.elapsed_seconds:.1f}s)" if report.elapsed_seconds is not None else "")))
    for kind, level in report.levels.items():
        parts.append(Text(f"level {kind}: {level['count']} (warn from {level['warn'] or '-'}, fail from "
                          f"{level['fail'] or '-'}): {level['level'].upper()}", style="bold"))
    unmatched = [w for w in report.waivers if not w["matched"]]
    if unmatched:
        parts.append(safetext.text(f"{len(unmatched)} waiver(s) matched no finding: " + "; ".join(
            f"{w['kind']} {w['topic']}" + ("" if w["partition"] is None else f"[{w['partition']}]")
            for w in unmatched), style="dim"))
    if report.window is not None:
        parts.append(safetext.text(f"window judged: {report.window.describe()}", style="bold"))
    if report.sink and report.sink_read_point is not None:
        parts.append(safetext.text(f"sink {report.sink} read at {report.sink_read_point.describe()}",
                                   style="dim"))
    if timing := timings(report.engine):
        parts.append(Text(timing, style="dim"))
    return Group(*parts)


# What a finding's count counts, where it is not the findings themselves
# (eosctl.report.findings.DESCRIPTIONS).
_UNITS = {"duplicate": "extra rows", "key_duplicate": "extra rows", "gap": "offsets",
          "phantom_aborted": "rows", "phantom_marker": "rows", "phantom_uncommitted": "rows",
          "phantom_beyond_hw": "rows", "invalid_row": "rows", "stale_value": "updates behind"}


def summary(report: AuditReport) -> str:
    """Findings per kind, with what they add up to: "1 duplicate (3 extra rows), 2 gap (7 offsets)"; and
    how many were waived or only warn."""
    parts = []
    for kind, n in report.counts().items():
        if not n:
            continue
        total = sum(f.count for f in report.findings if f.kind == kind)
        unit = _UNITS.get(kind)
        parts.append(f"{n} {kind}" + (f" ({total} {unit})" if unit else ""))
    waived = sum(1 for f in report.findings if f.waived)
    warned = len(report.warnings)
    tail = "".join(f"; {n} {what}" for n, what in ((waived, "waived"), (warned, "warn only")) if n)
    return (", ".join(parts) or "no findings") + tail


# Up to this many findings, a rich table; beyond it, aligned lines (a rich table costs ~1 ms a row to lay
# out: 100k findings took minutes and 600 MB), printed in chunks.
TABLE_ROWS = 1000
CHUNK_ROWS = 5000
MAX_CELL = 60  # characters of a cell other than the last; longer ones are cut with …


def aligned(title: str, columns: list[str], rows: list[tuple]) -> list[Any]:
    """The rows as aligned plain lines (every value through safetext: text, never markup), a rich Text
    per chunk of CHUNK_ROWS lines, so the console writes as it goes."""
    def cell(v: object) -> str:
        s = "-" if v is None else safetext.term(str(v))
        return s if len(s) <= MAX_CELL else s[:MAX_CELL - 1] + "…"

    cells = [[cell(v) for v in r] for r in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    numeric = {"partition", "count"}

    def line(values: list[str]) -> str:
        out = [v.rjust(w) if name in numeric else v.ljust(w)
               for name, v, w in zip(columns[:-1], values[:-1], widths[:-1], strict=True)]
        return "  ".join([*out, values[-1]]).rstrip()

    chunks: list[Any] = [Text(title, style="italic"), Text(line(columns), style="bold")]
    for i in range(0, len(cells), CHUNK_ROWS):
        chunks.append(Text("\n".join(line(r) for r in cells[i:i + CHUNK_ROWS]), no_wrap=True))
    return chunks


def causes_table(report: AuditReport) -> Any:
    """What explains the findings, one row per root cause (eosctl.report.rootcauses)."""
    rows = []
    for r in report.root_causes:
        where_ = ", ".join(f"{t}[{p}]" for t, p in r.partitions[:3]) + (
            f" +{len(r.partitions) - 3}" if len(r.partitions) > 3 else "")
        rows.append((r.rule, len(r.findings), text(where_), text(r.summary.split(": ", 1)[-1])))
    return rich_table("root causes", ["root cause", "findings", "partitions", "what explains them"], rows)


# The engine's phases, one after the other, then the tasks' own time (summed over tasks, which overlap).
_PHASES = (("prepare_seconds", "metadata"), ("startup_seconds", "start-up"), ("partitions_seconds", "tasks"),
           ("keys_seconds", "keys"))
_TASK_TIME = (("scan_seconds", "log scans"), ("reconcile_seconds", "sink"))


def timings(engine: dict[str, Any]) -> str:
    """One line: where the time went, e.g. "spark local[*]: metadata 0.1s, start-up 6.2s, tasks 3.0s,
    keys 0.2s (task time: log scans 0.3s, sink 0.5s)"."""
    if not engine:
        return ""

    def seconds(pairs: tuple[tuple[str, str], ...]) -> str:
        return ", ".join(f"{label} {engine[key]:.1f}s" for key, label in pairs
                         if isinstance(engine.get(key), (int, float)))

    name = engine.get("name", "spark")
    if name == "spark":
        where = engine.get("master")
    else:  # no pool (0 workers): a small audit's tasks ran in eosctl's own process (auditors.local)
        where = "in eosctl's process" if engine.get("workers") == 0 else f"{engine.get('workers')} processes"
    phases, task_time = seconds(_PHASES), seconds(_TASK_TIME)
    if not phases:
        return ""
    return f"{name} {where}: {phases}" + (f" (task time: {task_time})" if task_time else "")
