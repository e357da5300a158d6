"""The HTML report in a real browser: headless Chromium renders it to a PNG and dumps its DOM.

`make test` installs Debian's chromium first when it is missing and we are root (see the Makefile); these
tests skip only where that was impossible.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

from eosctl.output.gapmap import FINDING_COLOURS, LOG_LAYERS
from eosctl.output.html import AuditContext, render_html
from eosctl.report.findings import STATE_KINDS, AuditReport
from tests.support import browser
from tests.support.samplereports import demo_report, many_partitions_report

CONTEXT = AuditContext(bootstrap="127.0.0.1:39092", pipeline="demo", topics=("demo.enriched",),
                       audited_at=datetime(2026, 11, 23, 15, 0, tzinfo=UTC), origin="eosctl audit")


def rgb(hex_colour: str) -> tuple[int, int, int]:
    return int(hex_colour[1:3], 16), int(hex_colour[3:5], 16), int(hex_colour[5:7], 16)


def shoot(tmp_path, report: AuditReport, height: int) -> tuple[dict[tuple[int, int, int], int], str]:
    page = tmp_path / "report.html"
    page.write_text(render_html(report, CONTEXT), encoding="utf-8")
    png = tmp_path / "report.png"
    browser.screenshot(page, png, 1280, height)
    return browser.colours(png.read_bytes(), step=2), browser.dump_dom(page)


def test_demo_report_renders_with_its_colours_and_verdict(tmp_path):
    report = demo_report(invalid_rows=True, key_kinds=True)
    kinds = {f.kind for f in report.findings}
    # Every finding's colour but a replica's out_of_order (its own drawing is tested with the replica) and
    # a dead-letter queue's and a route's kinds (the demo pipeline has neither; drawn as every range kind is),
    # and a state sink's (the demo's sink keeps offsets; tests/integration/test_upsert_sink.py renders them).
    assert set(FINDING_COLOURS) - kinds == {"out_of_order", "sink_and_dlq", "dlq_duplicate", "dlq_aborted",
                                            "misrouted", *STATE_KINDS}
    seen, dom = shoot(tmp_path, report, 1500)
    # Not blank: the page's own colours are on screen, each over a real area, not a stray pixel.
    wanted = {"verdict red": rgb("#c5221f"), "committed green": rgb(LOG_LAYERS["COMMITTED"][0]),
              "marker": rgb(LOG_LAYERS["MARKER"][0]), "aborted grey": rgb(LOG_LAYERS["ABORTED"][0]),
              **{k: rgb(c) for k, c in FINDING_COLOURS.items() if k in kinds}}
    missing = {name: c for name, c in wanted.items() if seen.get(c, 0) < 4}
    assert not missing, f"colours not on the screenshot: {missing}"
    assert len([c for c, n in seen.items() if n >= 20]) >= 12
    # The DOM after rendering: the verdict first, with its counts, and the report for machines.
    assert re.search(r'<section class="verdict fail" id="verdict">\s*<div class="word">FAIL</div>', dom)
    assert "17 failing findings in 3 of 3 partitions" in dom
    body = re.search(r'<script type="application/json" id="eosctl-report">(.*?)</script>', dom, re.S).group(1)
    assert json.loads(body) == json.loads(report.to_json())


def test_a_passing_audit_renders_green(tmp_path):
    base = demo_report()
    seen, dom = shoot(tmp_path, AuditReport.build(base.partitions, []), 900)
    assert seen.get(rgb("#1e8e3e"), 0) >= 20 and seen.get(rgb("#c5221f"), 0) == 0
    assert re.search(r'<div class="word">PASS</div>', dom)
    assert "every committed record is in the sink exactly once" in dom


def test_two_hundred_partitions_render(tmp_path):
    seen, dom = shoot(tmp_path, many_partitions_report(), 1700)
    assert seen.get(rgb(FINDING_COLOURS["gap"]), 0) >= 20
    assert seen.get(rgb(FINDING_COLOURS["phantom_beyond_hw"]), 0) >= 4
    assert "6 failing findings in 5 of 200 partitions" in dom
    assert dom.count('class="row compact"') == 195


def test_a_long_cause_is_shown_whole_in_the_browser_and_on_paper(tmp_path):
    # Issue 32, item 5: the findings table cut causes in the middle (the producer id went) and kept the
    # whole only in a tooltip, lost on print.
    from dataclasses import replace

    from tests.unit.rules.test_causes import report as explained

    report = explained()
    f = next(f for f in report.findings if f.cause is not None)
    long = f.cause.summary + " " + "the sink wrote it again after a restart of its writer; " * 4 + \
        "producer id 424242 epoch 7 wrote the first copy"
    findings = [replace(x, cause=replace(x.cause, summary=long)) if x is f else x for x in report.findings]
    report = AuditReport.build(report.partitions, findings, fail_on=report.fail_on)
    _, dom = shoot(tmp_path, report, 1500)
    assert "producer id 424242 epoch 7 wrote the first copy" in dom
    assert "characters)" not in dom.split('id="findings"', 1)[-1].split("</section>", 1)[0]
