"""The audit's policy over its final findings (eosctl.config.policy): each finding a waiver covers is marked
waived (and fails again once the waiver expired), then each configured kind's level is judged from the
count of its findings not waived, and the verdict follows. A pass over the finished report: however the
rules made and de-duplicated the findings, this never changes them."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from eosctl.base.errors import EosctlError
from eosctl.config.policy import Level, Waiver, load_waivers
from eosctl.report.findings import FAIL, KINDS, PASS, AuditReport, Finding, WaiverMatch


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
    failing = out.failing
    out.verdict = FAIL if failing else PASS
    # A pipeline of several sinks: each sink's verdict judged again by its own findings (each names its
    # sink), so sinks[] agrees with the pipeline's verdict. A hop's stays as found: an invalid_row names no
    # topic, hence no hop.
    bad = [f.sink for f in failing]
    out.sinks = [replace(s, verdict=FAIL if s.name in bad else PASS, failing_findings=bad.count(s.name))
                 for s in report.sinks]
    return out


def configured(config: Any, waivers: str | None = None,
               levels: Sequence[Level] = ()) -> tuple[tuple[Waiver, ...], tuple[Level, ...]]:
    """The waivers and levels a config sets ([audit] waivers, [audit.levels]): ``waivers`` (a file) in
    place of the config's, and each kind ``levels`` names in place of the config's level of it. One reading
    for `eosctl audit`, the TUI, the exporter and `snapshot --with-audit`, so all of them judge alike."""
    file = waivers or (config.audit_waivers if config is not None else None)
    own = config.audit_levels if config is not None else ()
    unknown = [lv.kind for lv in own if lv.kind not in KINDS]
    if unknown:
        raise EosctlError(f"{config.path}: audit.levels.{unknown[0]} is not a finding kind (kinds: "
                          f"{', '.join(KINDS)})")
    named = {lv.kind for lv in levels}
    return (load_waivers(file, KINDS) if file else (),
            (*(lv for lv in own if lv.kind not in named), *levels))


def apply_configured(report: AuditReport, config: Any, at_ms: int | None = None) -> AuditReport:
    """The report judged by the config's waivers and levels (read now: an edited waiver file counts at the
    next audit), as `eosctl audit -c FILE` judges it."""
    waivers, levels = configured(config)
    return apply_policy(report, waivers, levels, at_ms)
