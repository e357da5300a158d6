"""An AuditReport for people: a rich table; ``render`` picks the format (table, JSON or JUnit XML)."""

from __future__ import annotations

from typing import Any

from eosctl.findings import PASS, AuditReport, Finding


def render(report: AuditReport, fmt: str) -> Any:
    """str for json/junit, a rich renderable for table."""
    if fmt == "json":
        return report.to_json()
    if fmt == "junit":
        from eosctl.output.junit import junit

        return junit(report)
    if fmt == "table":
        return table(report)
    raise ValueError(f"unknown format {fmt!r}")


def where(f: Finding) -> str:
    if f.first_offset is None:  # invalid_row: the rows have no usable offset
        return "-"
    if f.first_offset == f.last_offset:
        return str(f.first_offset)
    return f"{f.first_offset}..{f.last_offset}"


def extra(f: Finding) -> str:
    parts = []
    if f.key is not None:
        parts.append(f"key {f.key}")
    if f.offsets is not None:
        parts.append("offsets " + ", ".join(map(str, f.offsets)))
    if f.detail:
        parts.append(f.detail)
    return "; ".join(parts)


def table(report: AuditReport) -> Any:
    from rich.console import Group
    from rich.text import Text

    from eosctl.output.terminal import table as rich_table

    parts: list[Any] = []
    rows = []
    for p in report.partitions:
        status = "not in Kafka" if not p.exists else ""
        rows.append((p.topic, p.partition, p.log_start_offset, p.last_stable_offset, p.high_watermark,
                     p.expected_records, p.sink_rows, p.unverifiable_below or "", status))
    parts.append(rich_table("partitions", ["topic", "partition", "log start", "lso", "hw", "expected",
                                           "sink rows", "unverifiable", "note"], rows))
    if report.findings:
        frows = [(f.kind + ("" if f.kind in report.fail_on else " (ignored)"), f.topic, f.partition,
                  where(f), f.count, extra(f)) for f in report.findings]
        columns = ["kind", "topic", "partition", "offsets", "count", "detail"]
        parts.append(rich_table("findings", columns, frows))
    counts = report.counts()
    summary = ", ".join(f"{n} {k}" for k, n in counts.items() if n) or "no findings"
    colour = "green" if report.verdict == PASS else "red"
    expected = sum(p.expected_records for p in report.partitions)
    rows_total = sum(p.sink_rows for p in report.partitions)
    parts.append(Text.from_markup(
        f"[bold {colour}]{report.verdict.upper()}[/]  {len(report.partitions)} partitions, "
        f"{expected} expected records, {rows_total} sink rows: {summary}"
        + (f"  ({report.elapsed_seconds:.1f}s)" if report.elapsed_seconds is not None else "")))
    if timing := timings(report.engine):
        parts.append(Text(timing, style="dim"))
    return Group(*parts)


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
    where = engine.get("master") if name == "spark" else f"{engine.get('workers')} processes"
    phases, task_time = seconds(_PHASES), seconds(_TASK_TIME)
    if not phases:
        return ""
    return f"{name} {where}: {phases}" + (f" (task time: {task_time})" if task_time else "")
