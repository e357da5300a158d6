"""The audit report's stable JSON and its renderers (no Spark)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from rich.console import Console

from eosctl.output.audit import render, table
from eosctl.output.junit import junit
from eosctl.report.findings import KINDS, AuditReport, Finding, PartitionSummary, parse_kinds

PARTS = [PartitionSummary("orders", 1, 0, 40, 41, 30, 31),
         PartitionSummary("orders", 0, 5, 20, 22, 12, 11, 2)]
FINDINGS = [
    Finding("duplicate", "orders", 1, 7, 8, 2),
    Finding("gap", "orders", 0, 9, 9, 1),
    Finding("key_duplicate", "orders", 1, 3, 12, 2, key="o-17", offsets=(3, 12)),
]


def test_json_shape_is_stable():
    report = AuditReport.build(PARTS, FINDINGS)
    d = json.loads(report.to_json())
    assert d["verdict"] == "fail"
    assert [(p["topic"], p["partition"]) for p in d["partitions"]] == [("orders", 0), ("orders", 1)]
    assert set(d["partitions"][0]) >= {"topic", "partition", "log_start_offset", "last_stable_offset",
                                       "high_watermark", "expected_records", "sink_rows"}
    assert d["findings"][0] == {"kind": "gap", "topic": "orders", "partition": 0, "first_offset": 9,
                                "last_offset": 9, "count": 1}
    by_kind = {f["kind"]: f for f in d["findings"]}
    assert by_kind["key_duplicate"]["key"] == "o-17" and by_kind["key_duplicate"]["offsets"] == [3, 12]
    assert "key" not in by_kind["duplicate"] and "offsets" not in by_kind["duplicate"]
    assert d["summary"]["findings"]["gap"] == 1 and set(d["summary"]["findings"]) == set(KINDS)
    assert d["summary"]["expected_records"] == 42 and d["summary"]["unverifiable_rows"] == 2


def test_json_round_trip():
    report = AuditReport.build(PARTS, FINDINGS, fail_on=("gap",), sink="s.duckdb (t)", elapsed_seconds=1.5)
    again = AuditReport.from_json(report.to_json())
    assert again.findings == report.findings and again.partitions == report.partitions
    assert again.fail_on == ("gap",) and again.verdict == "fail"


def test_verdict_follows_fail_on():
    assert AuditReport.build(PARTS, FINDINGS, fail_on=("phantom_marker",)).verdict == "pass"
    assert AuditReport.build(PARTS, []).verdict == "pass"


def test_parse_kinds():
    assert parse_kinds(None) == KINDS and parse_kinds("all") == KINDS
    assert parse_kinds("duplicate, gap") == ("gap", "duplicate")
    with pytest.raises(ValueError, match="unknown finding kind 'gaps'"):
        parse_kinds("gaps")


def test_unknown_kind_is_rejected():
    with pytest.raises(ValueError):
        Finding("lost", "t", 0, 0, 0, 1)


def test_table_lists_findings_and_verdict():
    console = Console(width=140, record=True, color_system=None)
    console.print(table(AuditReport.build(PARTS, FINDINGS, fail_on=("gap", "duplicate"))))
    text = console.export_text()
    assert "FAIL  2 partitions, 42 expected records, 42 sink rows" in text
    assert "key_duplicate (ignored)" in text and "key o-17; offsets 3, 12" in text
    assert "7..8" in text


def test_junit_has_a_case_per_failing_finding_each_with_its_one_failure():
    suite = ET.fromstring(junit(AuditReport.build(PARTS, FINDINGS, fail_on=("gap", "duplicate"))))
    assert suite.get("tests") == "2" and suite.get("failures") == "2"
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert [f.get("type") for f in cases["partition 1: duplicate at offsets 7..8"].iter("failure")] == [
        "duplicate"]
    assert "key_duplicate" in cases["partition 1: duplicate at offsets 7..8"].find("system-out").text


def test_render_json_is_one_object():
    assert json.loads(render(AuditReport.build(PARTS, []), "json"))["verdict"] == "pass"
