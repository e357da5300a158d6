"""Range reconciliation of one partition: every edge case, no Spark, no broker."""

from __future__ import annotations

import pytest

from eosctl.cluster.model import Kind, OffsetRange, PartitionLog
from eosctl.rules.reconcile import (
    islands_from_counts,
    offset_mismatch,
    reconcile_partition,
    reconcile_unknown,
)


def plog(*ranges: tuple[int, int, str], start: int = 0, lso: int | None = None, hw: int | None = None,
         topic: str = "orders", partition: int = 0) -> PartitionLog:
    rs = [OffsetRange(a, b, Kind[k]) for a, b, k in ranges]
    hw = hw if hw is not None else (rs[-1].last + 1 if rs else start)
    lso = hw if lso is None else lso
    return PartitionLog(topic, partition, start, hw, lso, start, hw, rs)


def audit(log: PartitionLog, *islands: tuple[int, int, int]):
    summary, findings = reconcile_partition(log, list(islands))
    return summary, [(f.kind, f.first_offset, f.last_offset, f.count) for f in findings]


# data 0-9, commit marker 10, data 11-20, commit marker 21 (hw 22)
TWO_TXNS = plog((0, 9, "DATA"), (10, 10, "MARKER"), (11, 20, "DATA"), (21, 21, "MARKER"))


def test_exact_sink_passes():
    summary, findings = audit(TWO_TXNS, (0, 9, 1), (11, 20, 1))
    assert findings == []
    assert (summary.expected_records, summary.sink_rows, summary.high_watermark) == (20, 20, 22)


def test_empty_partition_and_empty_sink():
    summary, findings = audit(plog())
    assert findings == [] and summary.expected_records == 0 and summary.sink_rows == 0


def test_rows_for_an_empty_partition_are_beyond_hw():
    _, findings = audit(plog(), (0, 2, 1))
    assert findings == [("phantom_beyond_hw", 0, 2, 3)]


def test_all_aborted_partition_expects_nothing():
    log = plog((0, 9, "ABORTED"), (10, 10, "MARKER"))
    summary, findings = audit(log)
    assert findings == [] and summary.expected_records == 0
    _, findings = audit(log, (0, 9, 1))
    assert findings == [("phantom_aborted", 0, 9, 10)]


def test_open_transaction_at_the_end():
    log = plog((0, 9, "DATA"), (10, 10, "MARKER"), (11, 20, "OPEN"), lso=11, hw=21)
    summary, findings = audit(log, (0, 9, 1))
    assert findings == [] and summary.expected_records == 10 and summary.last_stable_offset == 11
    _, findings = audit(log, (0, 9, 1), (11, 15, 1))
    assert findings == [("phantom_uncommitted", 11, 15, 5)]


def test_committed_data_after_the_lso_is_neither_expected_nor_phantom():
    # Another producer committed 16-18 while the transaction at 11 stays open.
    log = plog((0, 9, "DATA"), (10, 10, "MARKER"), (11, 15, "OPEN"), (16, 18, "DATA"), (19, 19, "MARKER"),
               lso=11, hw=20)
    summary, findings = audit(log, (0, 9, 1))
    assert findings == [] and summary.expected_records == 10
    _, findings = audit(log, (0, 9, 1), (16, 16, 2), (17, 18, 1))
    assert findings == [("duplicate", 16, 16, 1)]


def test_gap_at_offset_zero():
    _, findings = audit(TWO_TXNS, (1, 9, 1), (11, 20, 1))
    assert findings == [("gap", 0, 0, 1)]


def test_single_offset_gaps():
    _, findings = audit(TWO_TXNS, (0, 2, 1), (4, 6, 1), (8, 9, 1), (11, 20, 1))
    assert findings == [("gap", 3, 3, 1), ("gap", 7, 7, 1)]


def test_gap_at_the_end():
    _, findings = audit(TWO_TXNS, (0, 9, 1), (11, 19, 1))
    assert findings == [("gap", 20, 20, 1)]


def test_adjacent_ranges_make_one_gap():
    log = plog((0, 4, "DATA"), (5, 9, "DATA"))
    _, findings = audit(log, (0, 2, 1), (7, 9, 1))
    assert findings == [("gap", 3, 6, 4)]


def test_adjacent_islands_with_different_multiplicity():
    log = plog((0, 9, "DATA"))
    _, findings = audit(log, (0, 4, 1), (5, 6, 3), (7, 9, 1))
    assert findings == [("duplicate", 5, 6, 4)]


def test_markers_and_aborted_inside_a_gap_do_not_split_it():
    log = plog((0, 9, "DATA"), (10, 10, "MARKER"), (11, 14, "ABORTED"), (15, 15, "MARKER"), (16, 20, "DATA"))
    _, findings = audit(log, (0, 7, 1), (19, 20, 1))
    assert findings == [("gap", 8, 18, 5)]


def test_present_committed_offset_splits_a_gap():
    _, findings = audit(TWO_TXNS, (0, 4, 1), (6, 6, 1), (9, 9, 1), (11, 20, 1))
    assert findings == [("gap", 5, 5, 1), ("gap", 7, 8, 2)]


def test_duplicates_span_markers_and_count_extra_rows():
    _, findings = audit(TWO_TXNS, (0, 7, 1), (8, 9, 2), (11, 12, 3), (13, 20, 1))
    assert findings == [("duplicate", 8, 12, 6)]


def test_whole_partition_missing_from_the_sink():
    summary, findings = audit(TWO_TXNS)
    assert findings == [("gap", 0, 20, 20)]
    assert summary.sink_rows == 0 and summary.expected_records == 20


def test_phantom_marker():
    _, findings = audit(TWO_TXNS, (0, 10, 1), (11, 20, 1))
    assert findings == [("phantom_marker", 10, 10, 1)]


def test_phantom_aborted_counts_rows_and_splits_on_absent_offsets():
    log = plog((0, 4, "DATA"), (5, 14, "ABORTED"), (15, 15, "MARKER"), (16, 19, "DATA"))
    _, findings = audit(log, (0, 7, 1), (8, 8, 2), (10, 14, 1), (16, 19, 1))
    assert findings == [("phantom_aborted", 5, 8, 5), ("phantom_aborted", 10, 14, 5)]


def test_markers_do_not_split_phantom_aborted_runs():
    log = plog((0, 4, "ABORTED"), (5, 5, "MARKER"), (6, 8, "ABORTED"), (9, 9, "MARKER"), (10, 12, "DATA"))
    _, findings = audit(log, (0, 4, 1), (6, 8, 1), (10, 12, 1))
    assert findings == [("phantom_aborted", 0, 8, 8)]
    _, findings = audit(log, (0, 8, 1), (10, 12, 1))
    assert findings == [("phantom_aborted", 0, 8, 8), ("phantom_marker", 5, 5, 1)]


def test_phantoms_of_different_kinds_are_separate():
    log = plog((0, 4, "ABORTED"), (5, 5, "MARKER"), (6, 9, "OPEN"), lso=6, hw=10)
    _, findings = audit(log, (0, 9, 1))
    assert findings == [("phantom_aborted", 0, 4, 5), ("phantom_marker", 5, 5, 1),
                        ("phantom_uncommitted", 6, 9, 4)]


def test_rows_beyond_the_high_watermark_are_one_finding():
    _, findings = audit(TWO_TXNS, (0, 9, 1), (11, 20, 1), (22, 23, 1), (30, 30, 2))
    assert findings == [("phantom_beyond_hw", 22, 30, 4)]


def test_offsets_below_log_start_are_unverifiable_not_gaps():
    log = plog((100, 149, "DATA"), (150, 150, "MARKER"), start=100)
    summary, findings = audit(log, (40, 149, 1))
    assert findings == []
    assert (summary.unverifiable_below, summary.expected_records, summary.sink_rows) == (60, 50, 110)


def test_compacted_holes_are_neither_expected_nor_phantom():
    log = plog((0, 4, "DATA"), (5, 7, "HOLE"), (8, 9, "DATA"))
    summary, findings = audit(log, (0, 4, 1), (8, 9, 1))
    assert findings == [] and summary.expected_records == 7
    summary, findings = audit(log, (0, 9, 1))
    assert findings == [] and summary.unverifiable_below == 3


def test_gap_and_duplicate_and_phantom_together():
    _, findings = audit(TWO_TXNS, (0, 3, 1), (5, 5, 2), (6, 10, 1), (12, 20, 1), (25, 25, 1))
    assert findings == [("gap", 4, 4, 1), ("duplicate", 5, 5, 1), ("phantom_marker", 10, 10, 1),
                        ("gap", 11, 11, 1), ("phantom_beyond_hw", 25, 25, 1)]


def test_unknown_partition_rows_are_phantom_beyond_hw():
    summary, findings = reconcile_unknown("nope", 3, [(0, 4, 1), (10, 10, 2)])
    assert [(f.kind, f.topic, f.partition, f.first_offset, f.last_offset, f.count) for f in findings] == [
        ("phantom_beyond_hw", "nope", 3, 0, 10, 7)]
    assert summary.exists is False and summary.sink_rows == 7


def test_ten_million_offsets_are_not_materialised():
    import tracemalloc

    log = plog((0, 9_999_999, "DATA"))
    tracemalloc.start()
    try:
        _, findings = audit(log, (0, 4_999_999, 1), (5_000_001, 9_999_999, 1))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert findings == [("gap", 5_000_000, 5_000_000, 1)]
    # A list or set of 10M offsets would take hundreds of MB; the range sweep needs a few KB.
    assert peak < 2_000_000


def test_stored_offset_before_the_trailing_marker_agrees_with_the_group():
    # data 0-9, COMMIT marker 10: the sink stored "last row + 1" = 10, the group committed past the marker.
    log = plog((0, 9, "DATA"), (10, 10, "MARKER"), (11, 11, "DATA"))
    assert offset_mismatch("orders", 0, 10, 11, log) is None
    assert offset_mismatch("orders", 0, 11, 10, log) is None


def test_committed_data_between_stored_and_committed_is_a_mismatch():
    log = plog((0, 10, "DATA"), (11, 11, "MARKER"))
    f = offset_mismatch("orders", 0, 10, 11, log, group="sink")
    assert (f.kind, f.first_offset, f.last_offset, f.count) == ("offset_mismatch", 10, 10, 1)
    assert f.detail == "sink stored next offset 10, group sink committed 11"


def test_offset_mismatch_counts_only_data_and_handles_a_missing_side():
    log = plog((0, 9, "DATA"), (10, 12, "ABORTED"), (13, 13, "MARKER"), (14, 19, "DATA"))
    f = offset_mismatch("orders", 0, 8, 17, log)
    assert (f.first_offset, f.last_offset, f.count) == (8, 16, 2 + 3)
    f = offset_mismatch("orders", 0, None, 17, log)  # the group never committed: nothing consumed
    assert (f.first_offset, f.last_offset, f.count) == (0, 16, 10 + 3)
    assert offset_mismatch("orders", 0, None, None, log) is None
    f = offset_mismatch("orders", 0, 12, 15, None)  # no scan: every offset between counts
    assert (f.first_offset, f.last_offset, f.count) == (12, 14, 3)


def test_islands_from_counts():
    pairs = [(0, 1), (1, 1), (2, 2), (3, 2), (5, 1), (6, 0)]
    assert list(islands_from_counts(pairs)) == [(0, 1, 1), (2, 3, 2), (5, 5, 1)]


def test_unsorted_islands_are_rejected():
    with pytest.raises(ValueError, match="sorted"):
        reconcile_partition(TWO_TXNS, [(5, 9, 1), (0, 3, 1)])


def test_sink_islands_are_accepted():
    from eosctl.sink import OffsetIsland

    _, findings = reconcile_partition(TWO_TXNS, [OffsetIsland("orders", 0, 0, 9, 1),
                                                 OffsetIsland("orders", 0, 11, 19, 1)])
    assert [(f.kind, f.first_offset) for f in findings] == [("gap", 20)]


def test_a_row_at_the_largest_int64_offset_is_beyond_the_hw():
    log = PartitionLog("orders", 0, 0, 3, 3, 0, 3, [OffsetRange(0, 2, Kind.DATA)])
    big = (1 << 63) - 1
    summary, findings = reconcile_partition(log, [(0, 2, 1), (1 << 62, (1 << 62) + 1, 1), (big, big, 1)])
    assert [(f.kind, f.first_offset, f.last_offset, f.count) for f in findings] == [
        ("phantom_beyond_hw", 1 << 62, big, 3)]
    assert summary.sink_rows == 6
