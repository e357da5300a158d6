"""An AuditReport as JUnit XML, for CI: one testcase per partition, a <failure> per failing finding."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from eosctl.findings import DESCRIPTIONS, AuditReport, Finding
from eosctl.model import TP
from eosctl.output.audit import extra, where


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
                       if f.first_offset is None else f"{f.kind} at offsets {where(f)} ({f.count})")
            el = ET.SubElement(case, "failure", type=f.kind, message=message)
            el.text = f"{DESCRIPTIONS[f.kind]}. {extra(f)}".strip()
        if ignored:
            out = ET.SubElement(case, "system-out")
            out.text = "\n".join(f"{f.kind} at offsets {where(f)} ({f.count}) (not in --fail-on)"
                                 for f in ignored)
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    if report.elapsed_seconds is not None:
        suite.set("time", f"{report.elapsed_seconds:.3f}")
    ET.indent(suite)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
