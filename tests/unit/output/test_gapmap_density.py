"""The gap map at 250k findings (issue 20, defect 8): a dense stretch is drawn as density, not as
overlapping white-outlined marks, and the SVG stays bounded, each stretch titled with its count."""

from __future__ import annotations

import re

from eosctl.output.gapmap import MAX_MARKS, density_runs
from eosctl.output.html import AuditContext, render_html
from eosctl.report.findings import AuditReport, Finding, PartitionSummary
from tests.support import browser

N = 250_000


def every_other_offset_missing() -> AuditReport:
    part = PartitionSummary("t", 0, 0, N, N, N, N // 2)
    return AuditReport.build([part], [Finding("gap", "t", 0, o, o, 1) for o in range(0, N, 2)])


def first_svg(html: str) -> str:
    return re.search(r'<svg class="gap".*?</svg>', html, re.S).group()


def test_a_dense_stretch_is_one_density_mark_with_its_count() -> None:
    svg = first_svg(render_html(every_other_offset_missing(), AuditContext()))
    assert 'class="f"' not in svg  # no per-finding marks (each with a white outline)
    [mark] = re.findall(r'<rect class="fd"[^>]*>', svg)
    assert 'data-findings="125000"' in mark and 'fill-opacity="0.50"' in mark
    assert ("125,000 gap findings in this stretch (offsets 0..249999): 125,000 offsets, 50% of the "
            "stretch") in svg
    assert "125,000 findings, drawn by density" in svg
    assert len(svg) < 20_000


def test_a_few_findings_keep_one_mark_each() -> None:
    part = PartitionSummary("t", 0, 0, N, N, N, N)
    sparse = [Finding("gap", "t", 0, o, o, 1) for o in range(0, MAX_MARKS * 100, 100)]
    report = AuditReport.build([part], sparse)
    svg = first_svg(render_html(report, AuditContext()))
    assert len(re.findall(r'<rect class="f"', svg)) == MAX_MARKS and 'class="fd"' not in svg


def test_density_runs_keep_stretches_apart_and_count_each_finding_once() -> None:
    findings = [Finding("gap", "t", 0, o, o + 9, 10) for o in range(0, 1000, 20)]  # half of 0..999
    findings += [Finding("duplicate", "t", 0, 90_000, 99_999, 10_000)]  # all of 90k..100k
    runs = density_runs(findings, 0, 100_000, 900)
    gaps = [r for r in runs if r.kind == "gap"]
    [dup] = [r for r in runs if r.kind == "duplicate"]
    assert sum(r.findings for r in gaps) == 50 and sum(r.offsets for r in gaps) == 500
    assert dup.findings == 1 and dup.offsets == 10_000 and dup.first <= 90_000 and dup.last >= 99_999
    assert all(r.x2 <= 900 for r in runs)


def test_the_dense_stretch_is_red_on_screen(tmp_path) -> None:
    page = tmp_path / "dense.html"
    page.write_text(render_html(every_other_offset_missing(), AuditContext()), encoding="utf-8")
    png = tmp_path / "dense.png"
    browser.screenshot(page, png, 1280, 700)
    seen = browser.colours(png.read_bytes(), step=2)
    reddish = sum(n for (r, g, b), n in seen.items() if r > g + 40 and r > b + 40)
    assert reddish > 2000, reddish  # the bar's 900 x 28 px stretch, not blank white
