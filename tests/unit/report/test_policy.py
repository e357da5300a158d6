"""The policy pass over the final findings (eosctl.report.policy): waived findings stay in every report
and fail again after their expiry; levels per kind from counts decide the verdict."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from rich.console import Console

from eosctl.config.policy import Level, Waiver
from eosctl.output.audit import render
from eosctl.output.html import AuditContext, render_html
from eosctl.report.findings import AuditReport, Finding, PartitionSummary
from eosctl.report.policy import apply_policy

EXPIRY = 1_798_761_600_000  # 2027-01-01T00:00Z: a waiver "expires = 2026-12-31" stops waiving here
WAIVER = Waiver("orders", "gap", "replayed by hand", 0, 10, 19, "INC-1", "2026-12-31", EXPIRY)


def report(*findings: Finding, fail_on: tuple[str, ...] | None = None) -> AuditReport:
    parts = [PartitionSummary("orders", 0, 0, 100, 100, 100, 95)]
    if fail_on is None:
        return AuditReport.build(parts, findings)
    return AuditReport.build(parts, findings, fail_on)


def text(r: AuditReport) -> str:
    console = Console(width=220, record=True)
    console.print(render(r, "table"))
    return console.export_text()


def test_a_waived_finding_passes_until_its_expiry_and_every_report_says_so() -> None:
    base = report(Finding("gap", "orders", 0, 12, 13, 2))
    assert base.verdict == "fail"
    waived = apply_policy(base, [WAIVER], at_ms=EXPIRY - 1)
    assert (waived.verdict, waived.failing, waived.findings[0].waived) == ("pass", [], True)
    doc = json.loads(render(waived, "json"))
    assert doc["summary"]["waived_findings"] == 1 and doc["summary"]["failing_findings"] == 0
    assert doc["findings"][0]["waiver"] == {**WAIVER.to_dict(), "expired": False}
    assert doc["waivers"] == [{**WAIVER.to_dict(), "expired": False, "matched": 1}]
    assert AuditReport.from_json(render(waived, "json")).findings[0].waived  # a report file keeps it
    suite = ET.fromstring(render(waived, "junit"))
    skipped = suite.findall(".//testcase/skipped")
    assert suite.get("failures") == "0" and len(skipped) == 1
    assert skipped[0].get("message") == ("gap at offsets 12..13 (2) waived: replayed by hand (INC-1), "
                                         "until 2026-12-31")
    assert "gap (waived)" in text(waived) and "waived: replayed by hand (INC-1)" in text(waived)
    html = render_html(waived, AuditContext())
    assert '<span class="muted">(waived)</span>' in html and "no failing findings (1 waived)" in html

    expired = apply_policy(base, [WAIVER], at_ms=EXPIRY)
    assert expired.verdict == "fail" and len(expired.failing) == 1 and not expired.findings[0].waived
    failure = ET.fromstring(render(expired, "junit")).find(".//testcase/failure")
    assert failure is not None
    assert "(waiver expired 2026-12-31: replayed by hand (INC-1))" in failure.get("message", "")
    assert "gap (waiver expired)" in text(expired)
    assert json.loads(render(expired, "json"))["findings"][0]["waiver"]["expired"] is True


def test_a_waiver_covers_only_findings_wholly_inside_it() -> None:
    r = apply_policy(report(Finding("gap", "orders", 0, 12, 13, 2), Finding("gap", "orders", 0, 18, 25, 8),
                            Finding("gap", "orders", 1, 12, 13, 2),
                            Finding("duplicate", "orders", 0, 12, 12, 1)),
                     [WAIVER, Waiver("orders", "phantom_marker", "never matched")], at_ms=0)
    assert [f.waived for f in r.findings] == [True, False, False, False]
    assert [w["matched"] for w in r.waivers] == [1, 0] and r.verdict == "fail"
    assert "1 waiver(s) matched no finding: phantom_marker orders" in text(r)


def test_levels_warn_or_fail_from_counts_of_findings_not_waived() -> None:
    found = (Finding("gap", "orders", 0, 12, 13, 2), Finding("gap", "orders", 0, 50, 52, 3),
             Finding("duplicate", "orders", 0, 60, 60, 1))
    r = apply_policy(report(*found), [], [Level("gap", 1, 10), Level("duplicate", 1, None)], at_ms=0)
    assert r.verdict == "pass" and r.levels["gap"] == {"warn": 1, "fail": 10, "count": 5, "level": "warn"}
    assert len(r.warnings) == 3 and json.loads(render(r, "json"))["summary"]["warning_findings"] == 3
    assert "level gap: 5 (warn from 1, fail from 10): WARN" in text(r) and "gap (warn)" in text(r)
    assert apply_policy(report(*found), [], [Level("gap", 1, 5)], at_ms=0).verdict == "fail"
    # the waived gap no longer counts towards the level
    r = apply_policy(report(*found), [WAIVER], [Level("gap", 1, 3), Level("duplicate", 1, None)], at_ms=0)
    assert (r.levels["gap"]["count"], r.verdict) == (3, "fail")
    # --fail-on stays: a kind not in it never fails, whatever its level
    r = apply_policy(report(*found, fail_on=("duplicate",)), [], [Level("gap", None, 1)], at_ms=0)
    assert r.verdict == "fail" and [f.kind for f in r.failing] == ["duplicate"]


def test_no_policy_leaves_the_report_as_it_is() -> None:
    base = report(Finding("gap", "orders", 0, 12, 13, 2))
    assert apply_policy(base) is base


def test_a_waiver_judges_each_sinks_verdict_again() -> None:
    """A pipeline of several sinks (merge_sinks): sinks[] follows the waivers, as the pipeline's verdict."""
    from eosctl.report.findings import merge_sinks

    def sink(label: str, *findings: Finding) -> AuditReport:
        return AuditReport.build([PartitionSummary("orders", 0, 0, 100, 100, 100, 95)], list(findings),
                                 sink=f"{label}.duckdb")

    merged = merge_sinks([("a", sink("a", Finding("gap", "orders", 0, 12, 13, 2))),
                          ("b", sink("b", Finding("gap", "orders", 0, 50, 50, 1)))], ("orders",))
    judged = apply_policy(merged, [WAIVER], at_ms=EXPIRY - 1)
    assert [(s.name, s.verdict, s.findings, s.failing_findings) for s in judged.sinks] == [
        ("a", "pass", 1, 0), ("b", "fail", 1, 1)]
    assert judged.verdict == "fail"
    assert [s.verdict for s in merged.sinks] == ["fail", "fail"]  # the report judged is never changed
