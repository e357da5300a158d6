"""`eosctl audit --format html` on a real audit of the reference pipeline (the demo's fault mix), rendered
in headless Chromium."""

from __future__ import annotations

import json
import re
import uuid
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

from eosctl.cli import main
from eosctl.commands.demo_cmd import DEMO_FAULTS
from eosctl.sandbox.pipeline import run_pipeline
from tests.support import browser

pytestmark = [pytest.mark.integration, pytest.mark.spark]
SVG = "{http://www.w3.org/2000/svg}"


def test_audit_writes_an_html_report_of_the_demo_faults(cluster, spark, tmp_path):
    prefix = f"h{uuid.uuid4().hex[:8]}"
    manifest = run_pipeline(cluster, prefix, tmp_path, faults=DEMO_FAULTS, records=60)
    out = tmp_path / "report.html"
    # The sink hop (-p PREFIX), whose findings the manifest's expected_findings are; the config's default
    # is the whole pipeline (test_hop_audit.py).
    result = CliRunner().invoke(main, ["audit", "-c", str(tmp_path / "eosctl.toml"), "-p", prefix, "--format",
                                       "html", "--out", str(out)])
    assert result.exit_code == 1, result.stderr  # the planted defects fail the audit
    html = out.read_text(encoding="utf-8")
    report = json.loads(re.search(r'id="eosctl-report">(.*?)</script>', html, re.S).group(1))
    planted = manifest["expected_findings"]
    def where(findings: list[dict]) -> list[tuple]:
        return sorted((f["kind"], f["partition"], f["first_offset"], f["last_offset"]) for f in findings)

    assert where(report["findings"]) == where(planted)

    # One mark per finding, titled with its offsets; the log's own stretches underneath.
    drawn, layers = [], set()
    for svg_text in re.findall(r'<svg class="gap".*?</svg>', html, re.S):
        svg = ET.fromstring(svg_text)
        for e in svg.iter():  # a finding's mark is wrapped in a link to its row
            if e.get("class") == "f":
                drawn.append((e.get("data-kind"), int(e.get("data-first")), int(e.get("data-last"))))
                assert f"{e.get('data-first')}" in e.find(f"{SVG}title").text
            elif e.get("class") == "seg":
                layers.add(e.get("data-layer"))
    assert sorted(drawn) == sorted((k, first, last) for k, _, first, last in where(report["findings"]))
    assert {"ABORTED", "MARKER", "OPEN"} <= layers  # aborted-leak, every commit, and the hanging transaction
    hang = manifest["hanging"][0]
    assert f"LSO {hang['first_offset']:,}" in html
    facts = dict(re.findall(r"<dt>([^<]+)</dt><dd>([^<]*)</dd>", html))
    assert facts["cluster"] == cluster.bootstrap_servers
    assert facts["consumer group"] == manifest["groups"]["sink"]
    assert facts["topics"] == ", ".join(manifest["audited_topics"])

    png = tmp_path / "report.png"
    browser.screenshot(out, png, 1280, 1100)
    seen = browser.colours(png.read_bytes(), step=2)
    assert seen.get((0xC5, 0x22, 0x1F), 0) >= 20  # the FAIL verdict's red
    assert len([c for c, n in seen.items() if n >= 20]) >= 10
    dom = browser.dump_dom(out)
    assert re.search(r'<div class="word">FAIL</div>', dom)
    assert f"{len(report['findings'])} failing findings in" in dom
