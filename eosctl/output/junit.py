"""An AuditReport as JUnit XML, for CI: a testcase per clean partition and one per failing finding (each with
its one <failure>: most CI viewers show only a testcase's first failure)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from eosctl.base import safetext
from eosctl.output.finding import extra, short_cause, standing, waiver_text, where, window_note
from eosctl.report.findings import DESCRIPTIONS, AuditReport, Finding


def junit(report: AuditReport) -> str:
    """One testsuite (a pipeline audited hop by hop: one per hop, in <testsuites>); one testcase per
    partition; each failing finding is a <failure>."""
    if report.sinks:
        root = ET.Element("testsuites", name="eosctl audit")
        for s in report.sinks:
            root.append(_suite(report, f"eosctl audit: sink {s.name}", None, s.name))
        root.set("tests", str(sum(int(s.get("tests", 0)) for s in root)))
        root.set("failures", str(sum(int(s.get("failures", 0)) for s in root)))
    elif not report.hops:
        root = _suite(report, "eosctl audit", None)
    else:
        root = ET.Element("testsuites", name="eosctl audit")
        for hop in report.hops:
            root.append(_suite(report, f"eosctl audit: hop {hop.name}", set(hop.topics)))
        root.set("tests", str(sum(int(s.get("tests", 0)) for s in root)))
        root.set("failures", str(sum(int(s.get("failures", 0)) for s in root)))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _suite(report: AuditReport, name: str, topics: set[str] | None, sink: str | None = None) -> ET.Element:
    """The testsuite of the report's partitions and findings whose topic is in ``topics`` (None: all;
    findings without a topic belong to the last hop, the one whose sink they were read from); with
    ``sink``, those of that sink of several."""
    last = report.hops[-1].topics if report.hops else ()

    def mine(topic: str | None, of: str | None = sink) -> bool:
        if sink is not None and of != sink:
            return False
        return topics is None or topic in topics or (topic is None and set(last) == topics)

    suite = ET.Element("testsuite", name=name)
    if report.window is not None:
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="window", value=safetext.xml(report.window.describe()))
        for p in report.partitions:
            if p.window is not None and mine(p.topic, p.sink):
                ET.SubElement(props, "property", name=safetext.xml(f"window {p.topic}[{p.partition}]"),
                              value=safetext.xml(window_note(p)))
    failures = 0
    by_tp: dict[tuple[str | None, int | None], list[Finding]] = {}
    for f in report.findings:
        if mine(f.topic, f.sink):
            by_tp.setdefault((f.topic, f.partition), []).append(f)
    cases: list[tuple[str | None, int | None]] = [(p.topic, p.partition) for p in report.partitions
                                                  if mine(p.topic, p.sink)]
    cases += [tp for tp in sorted(by_tp, key=lambda tp: (tp[0] or "", -1 if tp[1] is None else tp[1]))
              if tp not in set(cases)]
    tests = 0
    for topic, partition in cases:
        # xml(): a topic, key or detail from the sink may hold characters XML 1.0 forbids (ESC, NUL):
        # written raw, the report would not parse.
        classname = safetext.xml(topic) if topic is not None else "(no topic)"
        name = "(no partition)" if partition is None else f"partition {partition}"
        found = by_tp.get((topic, partition), [])
        failing_now = {id(f) for f in report.failing}
        ignored = [f for f in found if id(f) not in failing_now and not f.waived]
        waived = [f for f in found if f.waived]
        failing = [f for f in found if id(f) in failing_now]
        case: ET.Element | None = None
        for f in failing:
            failures += 1
            message = (f"{f.kind}: {f.detail} ({f.count} row{'s' if f.count != 1 else ''})"
                       if f.first_offset is None else f"{f.kind} at offsets {where(f)} ({f.count})")
            at = f"{f.kind}" if f.first_offset is None else f"{f.kind} at offsets {where(f)}"
            case = ET.SubElement(suite, "testcase", classname=classname, name=safetext.xml(f"{name}: {at}"))
            tests += 1
            if f.cause is not None:
                message += f": {short_cause(f)}"
            if f.waiver is not None:  # expired: it fails again, and says so
                message += f" ({waiver_text(f)})"
            el = ET.SubElement(case, "failure", type=f.kind, message=safetext.xml(message))
            el.text = safetext.xml(f"{DESCRIPTIONS[f.kind]}. {extra(f)}".strip()
                                   + (f"\n{f.cause.summary}" if f.cause is not None else ""))
        for f in waived:
            # A waived finding stays in the report: a skipped case of its own, saying why and until when.
            at = f"{f.kind}" if f.first_offset is None else f"{f.kind} at offsets {where(f)}"
            wcase = ET.SubElement(suite, "testcase", classname=classname, name=safetext.xml(f"{name}: {at}"))
            tests += 1
            ET.SubElement(wcase, "skipped", message=safetext.xml(f"{at} ({f.count}) {waiver_text(f)}"))
        if not failing:
            case = ET.SubElement(suite, "testcase", classname=classname, name=name)
            tests += 1
        if ignored:
            assert case is not None  # a failing finding's case, or the passing one just made
            out = ET.SubElement(case, "system-out")
            out.text = safetext.xml("\n".join(f"{f.kind} at offsets {where(f)} ({f.count}) "
                                               f"({standing(report, f) or 'not failing'})" for f in ignored))
    suite.set("tests", str(tests))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    if report.elapsed_seconds is not None and topics is None:
        suite.set("time", f"{report.elapsed_seconds:.3f}")
    return suite
