"""Render an AuditReport: a rich table for people, one JSON object or JUnit XML for CI."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from eosctl.findings import DESCRIPTIONS, KINDS, PASS, AuditReport, Finding
from eosctl.model import TP

FORMATS = ("table", "json", "junit")


def render(report: AuditReport, fmt: str) -> Any:
    """str for json/junit, a rich renderable for table."""
    if fmt == "json":
        return report.to_json()
    if fmt == "junit":
        return junit(report)
    if fmt == "table":
        return table(report)
    raise ValueError(f"unknown format {fmt!r}")


def _where(f: Finding) -> str:
    if f.first_offset is None:  # invalid_row: the rows have no usable offset
        return "-"
    if f.first_offset == f.last_offset:
        return str(f.first_offset)
    return f"{f.first_offset}..{f.last_offset}"


def _extra(f: Finding) -> str:
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

    from eosctl.render import table as rich_table

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
                  _where(f), f.count, _extra(f)) for f in report.findings]
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


def junit(report: AuditReport) -> str:
    """One testsuite; one testcase per partition; each failing finding is a <failure>."""
    suite = ET.Element("testsuite", name="eosctl audit")
    failures = 0
    by_tp: dict[TP, list[Finding]] = {}
    for f in report.findings:
        by_tp.setdefault((f.topic, f.partition), []).append(f)
    cases = [(p.topic, p.partition) for p in report.partitions]
    cases += [tp for tp in sorted(by_tp, key=lambda tp: (tp[0] or "", -1 if tp[1] is None else tp[1]))
              if tp not in set(cases)]
    for topic, partition in cases:
        case = ET.SubElement(suite, "testcase", classname=topic if topic is not None else "(no topic)",
                             name="(no partition)" if partition is None else f"partition {partition}")
        ignored = []
        for f in by_tp.get((topic, partition), []):
            if f.kind not in report.fail_on:
                ignored.append(f)
                continue
            failures += 1
            message = (f"{f.kind}: {f.detail} ({f.count} row{'s' if f.count != 1 else ''})"
                       if f.first_offset is None else f"{f.kind} at offsets {_where(f)} ({f.count})")
            el = ET.SubElement(case, "failure", type=f.kind, message=message)
            el.text = f"{DESCRIPTIONS[f.kind]}. {_extra(f)}".strip()
        if ignored:
            out = ET.SubElement(case, "system-out")
            out.text = "\n".join(f"{f.kind} at offsets {_where(f)} ({f.count}) (not in --fail-on)"
                                 for f in ignored)
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    if report.elapsed_seconds is not None:
        suite.set("time", f"{report.elapsed_seconds:.3f}")
    ET.indent(suite)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"


__all__ = ["FORMATS", "KINDS", "render", "table", "junit"]
