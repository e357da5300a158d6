"""The ledger's flags from sink islands against the log model, and the snapshot file round trip."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest

from eosctl.base.errors import EosctlError
from eosctl.cluster.model import Kind, OffsetRange, PartitionLog, ProducerState, Transaction
from eosctl.cluster.wire import Offsets
from eosctl.inspection.capture import Capture, hanging_at
from eosctl.inspection.ledger import Ledger, LedgerFlag, partition_ledger
from eosctl.inspection.snapshot import load_snapshot, write_snapshot
from eosctl.sink import OffsetIsland, SinkPartition


def txn_log() -> PartitionLog:
    """0..4 committed, 5 COMMIT marker, 6..8 aborted, 9 ABORT marker, 10..14 committed, 15 marker."""
    ranges = [OffsetRange(0, 4, Kind.DATA, 7, 0), OffsetRange(5, 5, Kind.MARKER, 7, 0),
              OffsetRange(6, 8, Kind.ABORTED, 7, 0), OffsetRange(9, 9, Kind.MARKER, 7, 0),
              OffsetRange(10, 14, Kind.DATA, 7, 0), OffsetRange(15, 15, Kind.MARKER, 7, 0)]
    return PartitionLog("orders", 0, 0, 16, 16, 0, 16, ranges,
                        [Transaction(7, 0, 0, 4, "COMMIT", 5, 5), Transaction(7, 0, 6, 8, "ABORT", 9, 3),
                         Transaction(7, 0, 10, 14, "COMMIT", 15, 5)],
                        {7: ProducerState(7, epochs=[0], last_epoch=0, batches=6, records=13)})


def islands(*runs: tuple[int, int, int]) -> list[OffsetIsland]:
    return [OffsetIsland("orders", 0, a, b, m) for a, b, m in runs]


def summary(rows: int, distinct: int, lo: int, hi: int, dups: int = 0) -> SinkPartition:
    return SinkPartition("orders", 0, rows, distinct, lo, hi, dups, 0)


OFFSETS = Offsets(0, 16, 16)


def test_clean_sink_has_no_flags_although_markers_and_aborts_leave_holes():
    p = partition_ledger("orders", 0, summary(10, 10, 0, 14), islands((0, 4, 1), (10, 14, 1)),
                         stored=15, committed=16, offsets=OFFSETS, log=txn_log())
    # stored 15 vs committed 16 differ only by the trailing marker: not a disagreement
    assert p.flags == []
    assert (p.missing_offsets, p.checked_to) == (0, 15)


def test_gap_duplicates_and_phantoms_are_flagged_exactly():
    p = partition_ledger("orders", 0, summary(11, 9, 0, 14, dups=1),
                         islands((0, 1, 1), (3, 4, 1), (7, 7, 1), (10, 11, 1), (12, 13, 2), (14, 14, 1)),
                         stored=15, committed=15, offsets=OFFSETS, log=txn_log())
    assert [(f.kind, f.first_offset, f.last_offset, f.count) for f in p.flags] == [
        ("gap", 2, 2, 1), ("duplicate", 12, 13, 2), ("phantom_aborted", 7, 7, 1)]
    assert p.flags[0].message == "1 committed record missing from the sink at offsets 2"
    assert p.missing_offsets == 1


def test_offset_mismatch_only_when_committed_data_lies_between():
    p = partition_ledger("orders", 0, summary(10, 10, 0, 14), islands((0, 4, 1), (10, 14, 1)),
                         stored=15, committed=12, offsets=OFFSETS, log=txn_log())
    assert p.flags == [LedgerFlag("offset_mismatch", 12, 14, 3,
                                  "sink stored next offset 15, group committed 12: the sink is ahead of "
                                  "Kafka by 3 records")]


def test_a_missing_side_is_an_offset_mismatch_as_in_the_audit():
    # stored 10, the group never committed: a consumer restarting from the group would re-read 0..9
    p = partition_ledger("orders", 0, summary(10, 10, 0, 14), islands((0, 4, 1), (10, 14, 1)),
                         stored=10, committed=None, offsets=OFFSETS, log=txn_log())
    assert [(f.kind, f.first_offset, f.last_offset, f.count) for f in p.flags] == [
        ("offset_mismatch", 0, 9, 5)]
    assert p.flags[0].message == ("sink stored next offset 10, group committed none: the sink is ahead of "
                                  "Kafka by 5 records")
    p = partition_ledger("orders", 0, None, [], stored=None, committed=10, offsets=OFFSETS, log=txn_log())
    assert [(f.kind, f.first_offset, f.last_offset, f.count) for f in p.flags[:1]] == [
        ("offset_mismatch", 0, 9, 5)]


def test_without_a_scan_the_span_is_reported_not_judged():
    p = partition_ledger("orders", 0, summary(11, 10, 0, 14, dups=1), islands((0, 4, 2), (10, 14, 1)),
                         stored=15, committed=None, offsets=OFFSETS, log=None, compare_offsets=False)
    assert [(f.kind, f.count) for f in p.flags] == [("duplicate", 5), ("span_missing", 5)]
    assert p.flags[1].message.startswith("offset span 0..14 has 5 missing offsets")


def test_records_beyond_the_stored_offset_are_pending_not_missing():
    p = partition_ledger("orders", 0, summary(3, 3, 0, 2), islands((0, 2, 1)), stored=3, committed=3,
                         offsets=OFFSETS, log=txn_log())
    assert p.flags == [] and p.missing_offsets == 0


def test_snapshot_round_trip(tmp_path: Path):
    log = txn_log()
    led = Ledger("orders", "/x/sink.duckdb (orders_sink)", "orders.sink", True, [
        partition_ledger("orders", 0, summary(10, 10, 0, 14), islands((0, 1, 1), (3, 4, 1), (10, 14, 1)),
                         stored=15, committed=16, offsets=OFFSETS, log=log)])
    snap = Capture(datetime(2026, 11, 22, 10, 0, tzinfo=UTC), "127.0.0.1:9092", "orders", "orders.sink",
                    ["orders"], logs={("orders", 0): log}, ledger=led,
                    sections={"logs": "ok", "transactions": "not captured: no API", "ledger": "ok"})
    out = tmp_path / "incident.duckdb"
    write_snapshot(snap, out)
    back = load_snapshot(out)
    assert back.captured_at == snap.captured_at
    assert (back.bootstrap, back.pipeline, back.group, back.topics) == ("127.0.0.1:9092", "orders",
                                                                        "orders.sink", ["orders"])
    assert back.logs == {("orders", 0): log}
    assert back.ledger.to_dict() == led.to_dict()
    assert back.sections == snap.sections
    # and the tables are plain SQL for anyone with DuckDB
    con = duckdb.connect(str(out), read_only=True)
    counts = con.execute("SELECT aborted_records, marker_records, data_records FROM partition_logs")
    assert counts.fetchall() == [(3, 3, 10)]
    assert con.execute("SELECT kind, first_offset, count FROM ledger_flags").fetchall() == [("gap", 2, 1)]
    con.close()


def test_load_snapshot_refuses_other_duckdb_files(tmp_path: Path):
    path = tmp_path / "other.duckdb"
    duckdb.connect(str(path)).close()
    with pytest.raises(EosctlError, match="not an eosctl snapshot"):
        load_snapshot(path)


def hanging_snapshot(max_age_s: float) -> Capture:
    """An LSO rule match 1200 s old on orders[0] and a 30 s old one on orders[1], both at any age."""
    from eosctl.inspection.capture import over_max_age
    from eosctl.txn.transactions import Hanging, HangingReport

    old = Hanging("orders", 0, 1002, 0, 146, 1200.0, ("lso",), 146, 149, "orders.hanging", "Ongoing")
    young = Hanging("orders", 1, 1003, 2, 40, 30.0, ("lso",), 40, 41, None, None)
    every = HangingReport(0.0, 3, [old, young], 0, "ok")
    return Capture(datetime(2026, 11, 22, 10, 0, tzinfo=UTC), "127.0.0.1:9092", "orders", "orders.sink",
                    ["orders"], hanging=over_max_age(every, max_age_s), hanging_candidates=[old, young],
                    hanging_checked_ms=1_795_000_000_000, sections={"hanging": "ok"})


def test_snapshot_keeps_the_hanging_report_and_its_younger_candidates(tmp_path: Path):

    snap = hanging_snapshot(900.0)
    assert [h.partition for h in snap.hanging.hanging] == [0]
    out = tmp_path / "incident.duckdb"
    write_snapshot(snap, out)
    back = load_snapshot(out)
    assert back.hanging == snap.hanging  # the same HangingReport `txns hanging --max-age 15m` returns
    assert back.hanging.to_dict()["hanging"] == [{
        "topic": "orders", "partition": 0, "producer_id": 1002, "producer_epoch": 0, "first_offset": 146,
        "age_s": 1200.0, "rules": ["lso"], "lso": 146, "hw": 149, "blocked": 3,
        "transactional_id": "orders.hanging", "coordinator_state": "Ongoing",
        "age_source": "producer-timestamp", "groups": [], "two_phase": False, "counted": False}]
    assert back.hanging_candidates == snap.hanging_candidates
    assert back.hanging_checked_ms == 1_795_000_000_000
    # the reader may apply a stricter rule than the capture did
    assert [(h.partition, h.first_offset) for h in hanging_at(back, 10).hanging] == [(0, 146), (1, 40)]
    assert hanging_at(back, 3600).hanging == []
    con = duckdb.connect(str(out), read_only=True)
    assert con.execute("SELECT max_age_s, partitions_checked, describe_producers FROM hanging_check"
                       ).fetchall() == [(900.0, 3, "ok")]
    assert con.execute("SELECT partition, first_offset, producer_id, blocked, over_max_age "
                       "FROM hanging_candidates ORDER BY partition").fetchall() == [
        (0, 146, 1002, 3, True), (1, 40, 1003, 1, False)]
    assert con.execute("SELECT partition, first_offset, rules FROM hanging").fetchall() == [(0, 146, ["lso"])]
    assert con.execute("SELECT name, rows FROM sections").fetchall() == [("hanging", 2)]
    con.close()


def test_snapshot_without_a_hanging_check_loads_as_not_checked(tmp_path: Path):
    from tui.sources import from_snapshot

    snap = hanging_snapshot(900.0)
    snap.hanging, snap.hanging_candidates = None, []
    snap.sections = {"hanging": "not captured: no topics to check"}
    write_snapshot(snap, tmp_path / "s.duckdb")
    back = load_snapshot(tmp_path / "s.duckdb")
    assert back.hanging is None and back.hanging_candidates == []
    dash = from_snapshot(back)
    assert not dash.hanging_checked and dash.errors == {"hanging": "no topics to check"}


def test_tui_shows_the_captured_report_or_reapplies_another_max_age(tmp_path: Path):
    from tui.sources import from_snapshot

    write_snapshot(hanging_snapshot(900.0), tmp_path / "s.duckdb")
    back = load_snapshot(tmp_path / "s.duckdb")
    assert [(h.topic, h.partition) for h in from_snapshot(back).hanging] == [("orders", 0)]
    assert [(h.topic, h.partition) for h in from_snapshot(back, max_age_s=0).hanging] == [
        ("orders", 0), ("orders", 1)]
    assert from_snapshot(back, max_age_s=0).hanging_checked


def test_snapshot_stores_an_audit_report(tmp_path: Path):
    from eosctl.report.findings import AuditReport, Finding, PartitionSummary

    report = AuditReport.build([PartitionSummary("orders", 0, 0, 146, 149, 120, 123)],
                               [Finding("duplicate", "orders", 0, 22, 24, 3)], sink="/x/sink.duckdb (s)",
                               group="orders.sink", elapsed_seconds=12.5)
    snap = hanging_snapshot(900.0)
    snap.audit, snap.audit_origin = report, "audit.json"
    snap.sections["audit"] = "ok"
    write_snapshot(snap, tmp_path / "s.duckdb")
    back = load_snapshot(tmp_path / "s.duckdb")
    assert back.audit == report and back.audit_origin == "audit.json"
    con = duckdb.connect(str(tmp_path / "s.duckdb"), read_only=True)
    assert con.execute("SELECT verdict, findings, failing_findings, origin FROM audit").fetchall() == [
        ("fail", 1, 1, "audit.json")]
    assert con.execute("SELECT kind, partition, first_offset, last_offset, count FROM audit_findings"
                       ).fetchall() == [("duplicate", 0, 22, 24, 3)]
    con.close()


def test_snapshot_into_a_missing_directory_fails_before_the_capture(tmp_path: Path, monkeypatch):
    from click.testing import CliRunner

    from eosctl.cli import main
    from eosctl.inspection import capture

    def no_capture(*a, **kw):
        raise AssertionError("captured although the file cannot be written")

    monkeypatch.setattr(capture, "capture", no_capture)
    out = tmp_path / "missing" / "s.duckdb"
    result = CliRunner().invoke(main, ["snapshot", "-o", str(out), "--bootstrap", "127.0.0.1:1", "-t", "t"])
    assert result.exit_code == 2
    assert result.stderr == (f"eosctl: error: cannot write {out}: directory {out.parent} does not exist; "
                             "create it or choose another --out\n")
    (tmp_path / "afile").write_text("x")
    with pytest.raises(EosctlError, match=r"afile is not a directory; choose another --out$"):
        write_snapshot(Capture(datetime.now(UTC), "b:1", None, None, []), tmp_path / "afile" / "s.duckdb")


def test_a_failed_write_is_one_line_and_leaves_no_file(tmp_path: Path, monkeypatch):
    from eosctl.inspection import snapshot

    def disk_full(snap, tmp):
        tmp.write_bytes(b"half")
        raise duckdb.IOException("IO Error: could not write file: No space left on device\nmore detail")

    monkeypatch.setattr(snapshot, "_write", disk_full)
    out = tmp_path / "s.duckdb"
    with pytest.raises(EosctlError) as e:
        write_snapshot(Capture(datetime.now(UTC), "b:1", None, None, []), out)
    assert str(e.value) == (f"cannot write snapshot {out}: IO Error: could not write file: No space left on "
                            "device")
    assert list(tmp_path.iterdir()) == []


def test_tui_on_a_file_that_is_not_a_snapshot_says_how_to_make_one(tmp_path: Path):
    from click.testing import CliRunner

    from eosctl.cli import main

    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\n")
    result = CliRunner().invoke(main, ["tui", "--snapshot", str(passwd)])
    assert result.exit_code == 2
    assert result.stderr == (f"eosctl: error: {passwd} is not an eosctl snapshot file (not a DuckDB "
                             "database); write one with `eosctl snapshot --out FILE`\n")


def test_a_scan_older_than_the_sink_judges_only_what_it_saw():
    """The snapshot and the TUI scan first; the sink, read later, holds rows of a transaction that was
    open at the scan and has committed since, and rows past the scan's HW. None of them is a phantom;
    a row at or beyond the HW Kafka reports after the sink was read still is."""
    ranges = [OffsetRange(0, 4, Kind.DATA, 7, 0), OffsetRange(5, 5, Kind.MARKER, 7, 0),
              OffsetRange(6, 10, Kind.OPEN, 8, 0)]
    scan = PartitionLog("orders", 0, 0, 11, 6, 0, 11, ranges)  # HW 11, LSO 6 (the open txn)
    fresh = Offsets(0, 20, 20)  # read after the sink: the txn committed, more records came
    rows = islands((0, 4, 1), (6, 10, 1), (12, 15, 1), (25, 25, 1))
    p = partition_ledger("orders", 0, summary(15, 15, 0, 25), rows, stored=None, committed=None,
                         offsets=fresh, log=scan, compare_offsets=False)
    assert [(f.kind, f.first_offset, f.last_offset, f.count) for f in p.flags] == [
        ("phantom_beyond_hw", 25, 25, 1)]
    # the same scan without newer offsets (nothing moved): the rows of the open txn are phantoms
    p = partition_ledger("orders", 0, summary(10, 10, 0, 10), islands((0, 4, 1), (6, 10, 1)), stored=None,
                         committed=None, offsets=Offsets(0, 11, 6), log=scan, compare_offsets=False)
    assert [(f.kind, f.first_offset, f.last_offset) for f in p.flags] == [("phantom_uncommitted", 6, 10)]


def test_snapshot_keeps_a_lag_row_pending_in_a_transaction(tmp_path: Path):
    from eosctl.inspection.lag import LagSnapshot, PartitionLag
    from eosctl.txn.pendingoffsets import Holder, PendingCommit

    held = PendingCommit("orders.sink", frozenset({("orders", 0), ("orders", 1)}), 17, (
        Holder(4001, 3, 220, "stage-1", "Ongoing", 1_764_000_000_000, True),))
    rows = [PartitionLag("orders.sink", "orders", 0, 5, 0, 9, 9, 4, True, pending=held),
            PartitionLag("orders.sink", "orders", 2, 3, 0, 3, 3, 0, True)]
    snap = Capture(datetime(2026, 11, 22, 10, 0, tzinfo=UTC), "127.0.0.1:9092", "orders", "orders.sink",
                   ["orders"], lag=LagSnapshot(1_764_000_060_000, rows, {"orders.sink": "STABLE"}),
                   sections={"lag": "ok"})
    out = tmp_path / "incident.duckdb"
    write_snapshot(snap, out)
    back = load_snapshot(out).lag
    assert back.partitions == rows
    assert back.partitions[0].pending.describe(1_764_000_060_000) == \
        "pending in transaction stage-1 (pid 4001), open 1m00s"


def test_snapshot_keeps_a_ledger_s_pending_offset_commit(tmp_path: Path):
    log = txn_log()
    led = Ledger("orders", "/x/sink.duckdb (orders_sink)", "orders.sink", True, [
        partition_ledger("orders", 0, summary(10, 10, 0, 14), islands((0, 4, 1), (10, 14, 1)),
                         stored=15, committed=16, offsets=OFFSETS, log=log)],
        pending_commit={"offsets_topic": "__consumer_offsets", "offsets_partition": 7, "problem": None,
                        "transactions": [{"transactional_id": "stage-1", "producer_id": 4001}]})
    led.partitions[0].commit_pending = True
    snap = Capture(datetime(2026, 11, 22, 10, 0, tzinfo=UTC), "127.0.0.1:9092", "orders", "orders.sink",
                   ["orders"], logs={("orders", 0): log}, ledger=led, sections={"logs": "ok", "ledger": "ok"})
    out = tmp_path / "incident.duckdb"
    write_snapshot(snap, out)
    back = load_snapshot(out).ledger
    assert back.to_dict() == led.to_dict()
    assert back.partitions[0].commit_pending is True
    assert back.pending_commit["transactions"][0]["transactional_id"] == "stage-1"
