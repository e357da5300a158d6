"""The window an audit judges: --since/--until as given, each partition's offsets judged in the sweep, the
sink's retention floor, and the pass over the final findings (auditors.window)."""

from __future__ import annotations

import json

import pytest

from auditors.plan import WorkItem
from auditors.sources import Placement
from auditors.window import in_window, with_windows
from eosctl.base.errors import EosctlError
from eosctl.cluster.model import Kind, OffsetRange, PartitionLog
from eosctl.output.audit import render
from eosctl.report.findings import AuditReport, Finding
from eosctl.report.window import Bound, PartitionWindow, WindowSpec, iso_ms, parse_bound, parse_ms
from eosctl.rules.reconcile import reconcile_partition


def plog(*ranges: tuple[int, int, str], hw: int | None = None) -> PartitionLog:
    rs = [OffsetRange(a, b, Kind[k]) for a, b, k in ranges]
    hw = hw if hw is not None else rs[-1].last + 1
    return PartitionLog("orders", 0, 0, hw, hw, 0, hw, rs)


def audit(log: PartitionLog, window: PartitionWindow | None, *islands: tuple[int, int, int]):
    summary, findings = reconcile_partition(log, list(islands), window=window)
    return summary, [(f.kind, f.first_offset, f.last_offset, f.count) for f in findings]


LOG = plog((0, 99, "DATA"))


def test_a_time_and_offsets_per_partition_parse() -> None:
    assert parse_bound("2026-11-30").timestamp_ms == parse_ms("2026-11-30T00:00:00Z") == 1_795_996_800_000
    assert parse_bound("2026-11-30T01:00:00+01:00").timestamp_ms == 1_795_996_800_000
    assert iso_ms(1_795_996_800_123) == "2026-11-30T00:00:00.123Z"
    b = parse_bound("orders:1=900, orders:0=1200")
    assert b.offsets == ((("orders", 0), 1200), (("orders", 1), 900)) and b.offset_of(("orders", 1)) == 900
    for bad, said in (("yesterday", "neither a time"), ("orders=5", "not TOPIC:PARTITION=OFFSET"),
                      ("orders:x=5", "not TOPIC:PARTITION=OFFSET"), ("orders:0=5,orders:0=6", "named twice")):
        with pytest.raises(ValueError, match=said):
            parse_bound(bad)


def test_only_the_window_is_judged() -> None:
    # missing 10-19 (before the window) and 60-69 (in it); rows beyond the window held twice
    islands = [(0, 9, 1), (20, 59, 1), (70, 79, 1), (80, 89, 2), (90, 99, 1)]
    summary, findings = audit(LOG, PartitionWindow(50, 80), *islands)
    assert findings == [("gap", 60, 69, 10)]
    assert (summary.expected_records, summary.outside_window, summary.sink_rows) == (30, 40 + 30, 90)
    # the whole log: both gaps and the duplicate
    _, whole = audit(LOG, None, *islands)
    assert whole == [("gap", 10, 19, 10), ("gap", 60, 69, 10), ("duplicate", 80, 89, 10)]


def test_a_gap_across_the_window_border_is_cut_at_it() -> None:
    _, findings = audit(LOG, PartitionWindow(15, None), (0, 9, 1), (30, 99, 1))
    assert findings == [("gap", 15, 29, 15)]
    _, findings = audit(LOG, PartitionWindow(None, 20), (0, 9, 1), (30, 99, 1))
    assert findings == [("gap", 10, 19, 10)]


def test_phantoms_and_rows_beyond_the_hw_outside_the_window_are_not_findings() -> None:
    log = plog((0, 9, "ABORTED"), (10, 10, "MARKER"), (11, 30, "DATA"))
    summary, findings = audit(log, PartitionWindow(11, 31), (0, 9, 1), (11, 30, 1), (40, 41, 1))
    assert findings == [] and summary.outside_window == 12
    # no end: the window runs on past the high watermark, whose rows are judged
    _, findings = audit(log, PartitionWindow(11, None), (0, 9, 1), (11, 30, 1), (40, 41, 1))
    assert findings == [("phantom_beyond_hw", 40, 41, 2)]


def test_below_the_retention_floor_missing_records_are_expired_not_gaps() -> None:
    summary, findings = audit(LOG, PartitionWindow(None, None, 40), (30, 34, 2), (35, 89, 1))
    # 0-29 gone by retention; 30-34 held twice is a duplicate all the same; 90-99 missing is a gap
    assert findings == [("duplicate", 30, 34, 5), ("gap", 90, 99, 10)]
    assert (summary.expired, summary.expected_records) == (30, 60)


class Times:
    """A source whose time index says: offset = (timestamp - 1000) // 10, none beyond the log."""

    def offsets_for_time(self, tps, ts):
        return {tp: (ts - 1000) // 10 if ts < 2000 else None for tp in tps}


def items() -> list[WorkItem]:
    return [WorkItem("orders", p, True, placement=Placement(0, 0, 100, 100)) for p in (0, 1)]


def test_times_map_to_offsets_and_none_that_new_is_the_high_watermark() -> None:
    spec = WindowSpec(Bound("t", 1500), Bound("t", 5000), "1s", 1.0, now_ms=2_800)
    got = with_windows(items(), spec, Times())
    assert [i.window for i in got] == [PartitionWindow(50, None, 80)] * 2
    # no record at or after --since: the window starts at the high watermark (nothing expected)
    got = with_windows(items(), WindowSpec(Bound("t", 9000)), Times())
    assert [i.window for i in got] == [PartitionWindow(100, None, None)] * 2


def test_offsets_bound_only_the_partitions_they_name() -> None:
    spec = WindowSpec(parse_bound("orders:1=30"))
    got = with_windows(items(), spec, Times())
    assert [i.window for i in got] == [PartitionWindow(None, None, None), PartitionWindow(30, None, None)]
    with pytest.raises(EosctlError, match="orders:7 is not an audited partition"):
        with_windows(items(), WindowSpec(parse_bound("orders:7=3")), Times())
    with pytest.raises(EosctlError, match="the window is empty on orders:0"):
        with_windows(items(), WindowSpec(parse_bound("orders:0=30"), parse_bound("orders:0=10")), Times())


def test_the_final_pass_keeps_what_reaches_into_the_window() -> None:
    windowed = [WorkItem("orders", 0, True, window=PartitionWindow(50, 80))]
    found = [Finding("content_mismatch", "orders", 0, 10, 12, 3),
             Finding("content_mismatch", "orders", 0, 45, 52, 8),
             Finding("key_duplicate", "orders", 0, 10, 90, 2, key="k1", offsets=(10, 90)),
             Finding("key_duplicate", "orders", 0, 10, 60, 2, key="k2", offsets=(10, 60)),
             Finding("gap", "orders", 1, 0, 3, 4),
             Finding("invalid_row", None, None, None, None, 1, detail="NULL topic")]
    kept = in_window(found, windowed)
    assert [(f.kind, f.first_offset, f.key) for f in kept] == [
        ("content_mismatch", 45, None), ("key_duplicate", 10, "k2"), ("gap", 0, None),
        ("invalid_row", None, None)]


def test_every_report_says_the_window_it_judged() -> None:
    log = plog((0, 99, "DATA"))
    summary, findings = reconcile_partition(log, [(0, 59, 1), (70, 99, 1)], window=PartitionWindow(50, 80, 5))
    spec = WindowSpec(parse_bound("2026-11-30T00:00:00Z"), parse_bound("orders:0=80"), "7d", 7 * 86400.0,
                      now_ms=1_795_996_800_000)
    report = AuditReport.build([summary], findings, window=spec)
    doc = json.loads(render(report, "json"))
    assert doc["window"] == {"since": {"given": "2026-11-30T00:00:00Z",
                                       "timestamp": "2026-11-30T00:00:00.000Z"},
                             "until": {"given": "orders:0=80",
                                       "offsets": [{"topic": "orders", "partition": 0, "offset": 80}]},
                             "retention": "7d", "retention_floor_time": "2026-11-23T00:00:00.000Z"}
    assert doc["partitions"][0]["window"] == {"first_offset": 50, "end_offset": 80, "retention_floor": 5,
                                              "outside_window": 70, "expired": 0}
    again = AuditReport.from_json(render(report, "json"))
    assert again.partitions[0].window == PartitionWindow(50, 80, 5) and again.window is not None
    junit = render(report, "junit")
    assert 'name="window" value="since 2026-11-30T00:00:00Z until orders:0=80; sink retention 7d' in junit
    assert 'value="window 50-79, 70 rows outside, retained from 5"' in junit
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(render(report, "table"))
    out = console.export_text()
    assert "window judged: since 2026-11-30T00:00:00Z until orders:0=80; sink retention 7d" in out
    assert "window 50-79, 70 rows outside" in out
    from eosctl.output.html import AuditContext, render_html

    html = render_html(report, AuditContext())
    assert "<dt>window judged</dt><dd>since 2026-11-30T00:00:00Z until orders:0=80; sink retention 7d" in html


def test_the_incremental_audit_refuses_what_it_does_not_judge_and_the_exporter_audits_those_in_full(
        monkeypatch) -> None:
    from types import SimpleNamespace

    import auditors
    from auditors.incremental import audit_incremental
    from eosctl.commands.exporter_cmd import _Auditor
    from eosctl.config.model import Sink

    calls: list = []
    monkeypatch.setattr(auditors, "audit", lambda target, s, **kw: calls.append(s) or "full")
    target = SimpleNamespace(pipeline=None)
    for key, value in (("retention", "7d"), ("dlq_topic", "q"), ("route", "key=a")):
        sink = Sink(duckdb="/x.duckdb", **{key: value})
        with pytest.raises(EosctlError, match=f"does not judge a sink's {key}"):
            audit_incremental(target, sink, "/nonexistent/state")  # type: ignore[arg-type]
        calls.clear()
        assert _Auditor("/states", 86400.0, ())(target, sink) == "full" and calls == [sink]
