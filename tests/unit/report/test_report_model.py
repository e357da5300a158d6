"""The report model (eosctl.report.findings.AuditReport) read back from its JSON: the sink's read point is
parsed once into a ReadPoint and every renderer describes that one; root causes are grouped once and every
format lists those."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from eosctl.output import audit as audit_out
from eosctl.output import explain as explain_out
from eosctl.output.html import render_html
from eosctl.report import rootcauses
from eosctl.report.file import read_report
from eosctl.report.findings import AuditReport, Finding
from eosctl.report.readpoint import ReadPoint
from tui.views.audit import finding_rows, headline

READ_AT = "a copy taken at 2026-11-24T10:00:00.000Z"


def sample(tmp_path: Path) -> tuple[Path, AuditReport]:
    found = [Finding("gap", "orders", 0, 5, 7, 3), Finding("duplicate", "orders", 1, 2, 2, 1),
             Finding("gap", "orders", 1, 9, 9, 1)]
    report = AuditReport.build([], found, ("gap",),
                               sink="/s/sink.duckdb (orders_sink)",
                               sink_read_point=ReadPoint("duckdb", "/s/sink.duckdb",
                                                         {"copied_at": "2026-11-24T10:00:00.000Z"}))
    path = tmp_path / "report.json"
    path.write_text(report.to_json())
    return path, report


def plain(renderable: object) -> str:
    console = Console(width=200, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def test_a_report_read_back_holds_its_read_point_typed_and_writes_the_same_json(tmp_path):
    path, written = sample(tmp_path)
    report = read_report(str(path))
    assert report.sink_read_point == ReadPoint("duckdb", "/s/sink.duckdb",
                                               {"copied_at": "2026-11-24T10:00:00.000Z"})
    assert report.to_json() == path.read_text() == written.to_json()


def test_every_renderer_describes_the_one_read_point(tmp_path):
    report = read_report(str(sample(tmp_path)[0]))
    assert f"sink /s/sink.duckdb (orders_sink) read at {READ_AT}" in plain(audit_out.table(report))
    assert READ_AT in render_html(report)
    assert f"sink /s/sink.duckdb (orders_sink) · read at {READ_AT}" in headline(report).plain


def test_root_causes_are_grouped_once_however_many_formats_list_them(tmp_path, monkeypatch):
    report = read_report(str(sample(tmp_path)[0]))
    calls = []  # every grouping asks each finding's rule, wherever it is done
    real = rootcauses.root_rule
    monkeypatch.setattr(rootcauses, "root_rule", lambda f: calls.append(f) or real(f))
    doc = json.loads(report.to_json())
    table = plain(audit_out.table(report))
    html = render_html(report)
    explained = explain_out.report_document(report, "report.json")
    plain(explain_out.report_table(report, "report.json"))
    finding_rows(report)
    assert calls == report.findings  # one grouping
    assert [r["rule"] for r in doc["root_causes"]] == ["replay", "unexplained"]  # gaps without a cause
    assert [[f["index"] for f in r["findings"]] for r in explained["root_causes"]] == [[1], [0, 2]]
    assert "unexplained" in table and 'data-rule="replay"' in html


@pytest.mark.parametrize(("point", "message"), [
    ("x", "sink_read_point: expected an object or null, got the string 'x'"),
    ({"kind": 5, "source": "s"}, "sink_read_point.kind: expected a string, got int 5"),
])
def test_a_read_point_that_is_not_one_names_the_field(tmp_path, point, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"verdict": "pass", "partitions": [], "findings": [],
                                "sink_read_point": point}))
    with pytest.raises(ValueError, match=message):
        read_report(str(path))
