"""The audit's policy over its final findings (eosctl.config.policy): each finding a waiver covers is marked
waived (and fails again once the waiver expired), then each configured kind's level is judged from the
count of its findings not waived, and the verdict follows. A pass over the finished report: however the
rules made and de-duplicated the findings, this never changes them."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from eosctl.config.policy import Level, Waiver
from eosctl.report.findings import FAIL, PASS, AuditReport, Finding, WaiverMatch


def now_ms() -> int:
    """The clock waivers expire by (a test sets its own)."""
    return int(time.time() * 1000)


def apply_policy(report: AuditReport, waivers: Sequence[Waiver] = (), levels: Sequence[Level] = (),
                 at_ms: int | None = None) -> AuditReport:
    """The report with ``waivers`` and ``levels`` applied at ``at_ms`` (default: now). A finding takes the
    first waiver that covers it and is in force; failing that, the first expired one (to say so)."""
    if not waivers and not levels:
        return report
    at = now_ms() if at_ms is None else at_ms
    matched = [0] * len(waivers)
    findings: list[Finding] = []
    for f in report.findings:
        found = [i for i, w in enumerate(waivers)
                 if w.covers(f.kind, f.topic, f.partition, f.first_offset, f.last_offset)]
        live = [i for i in found if not waivers[i].expired(at)]
        pick = live[0] if live else found[0] if found else None
        if pick is not None:
            matched[pick] += 1
            f = replace(f, waiver=WaiverMatch(waivers[pick], waivers[pick].expired(at)))
        findings.append(f)
    judged = {}
    for level in levels:
        total = sum(f.count for f in findings if f.kind == level.kind and not f.waived)
        judged[level.kind] = {"warn": level.warn, "fail": level.fail, "count": total,
                              "level": level.of(total)}
    out = replace(report, findings=findings, levels=judged,
                  waivers=[{**w.to_dict(), "expired": w.expired(at), "matched": n}
                           for w, n in zip(waivers, matched, strict=True)])
    out.verdict = FAIL if out.failing else PASS
    return out
