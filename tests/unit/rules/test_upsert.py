"""The upsert rule (eosctl.rules.upsert): per key, the latest committed record below the read point."""

from __future__ import annotations

from eosctl.rules.upsert import StateRecord, StateRow, judge

T = "orders"


def rec(offset: int, key: str, value: str | None, status: str = "committed", partition: int = 0,
        ts: int = -1) -> StateRecord:
    return StateRecord(T, partition, offset, (key,), None if value is None else (value,), value is None,
                       "null" if value is None else value, status, timestamp=ts, producer_id=5,
                       producer_epoch=0, marker_offset=None if status != "aborted" else offset + 1)


def row(key: str, value: str | None = None, keys_only: bool = False) -> StateRow:
    return StateRow((key,), None if keys_only else (value,), value or "a row")


def found(records, rows, bound: int = 100, bounds=None) -> list[tuple]:
    judged = judge(records, rows, bounds or {(T, 0): bound, (T, 1): bound}, shown_key=lambda k: k[0], topic=T)
    return [(f.kind, f.partition, f.first_offset, f.last_offset, f.count, f.key, f.offsets)
            for f in sorted(judged.findings, key=lambda f: f.sort_key)]


def test_the_latest_committed_value_is_clean_and_an_older_one_is_stale_by_its_updates():
    log = [rec(0, "a", "1"), rec(1, "a", "2"), rec(2, "b", "x"), rec(3, "a", "3"), rec(4, "a", "4")]
    assert found(log, [row("a", "4"), row("b", "x")]) == []
    assert found(log, [row("a", "2"), row("b", "x")]) == [("stale_value", 0, 1, 4, 2, "a", (1, 4))]
    # the same value written again later: the latest record with it explains the row
    log2 = log + [rec(5, "a", "2"), rec(6, "a", "5")]
    assert found(log2, [row("a", "2"), row("b", "x")]) == [("stale_value", 0, 5, 6, 1, "a", (5, 6))]


def test_records_past_the_read_point_are_lag_never_findings():
    log = [rec(0, "a", "1"), rec(5, "a", "2"), rec(6, "b", "y"), rec(7, "c", "z"), rec(8, "c", None)]
    # read point 5: a may hold 1 (settled) or 2 (in flight); b need not exist yet; c's delete is in flight
    assert found(log, [row("a", "1")], bound=5) == []
    assert found(log, [row("a", "2")], bound=5) == []
    assert found(log, [row("a", "1"), row("c", "z")], bound=5) == []
    # d's value is settled, its delete in flight: a sink that applied the delete already is not missing it
    deleted = [rec(2, "d", "d1"), rec(9, "d", None)]
    assert found(deleted, [], bound=5) == []
    assert found(deleted, [], bound=10) == []
    assert found([rec(2, "d", "d1")], [], bound=5) == [("missing_key", 0, 2, 2, 1, "d", (2,))]
    assert found(log, [row("a", "1")], bound=9) == [("stale_value", 0, 0, 5, 1, "a", (0, 5)),
                                                    ("missing_key", 0, 6, 6, 1, "b", (6,))]


def test_aborted_and_open_values_tombstones_missing_and_unknown_keys():
    log = [rec(0, "a", "1"), rec(1, "a", "9", "aborted"), rec(3, "b", "x"), rec(4, "b", None),
           rec(5, "c", "c1"), rec(6, "c", "c2", "open")]
    rows = [row("a", "9"), row("b", "x"), row("c", "c2"), row("z", "q")]
    assert found(log, rows) == [("unknown_key", None, None, None, 1, "z", None),
                                ("aborted_value", 0, 1, 1, 1, "a", (1, 0)),
                                ("resurrected_key", 0, 4, 4, 1, "b", (3, 4)),
                                ("uncommitted_value", 0, 6, 6, 1, "c", (6, 5))]
    # the deleted key absent, c at its committed value, a's row gone: a is missing at its committed offset
    assert found(log, [row("c", "c1")]) == [("missing_key", 0, 0, 0, 1, "a", (0,))]


def test_a_value_no_record_of_the_key_has_is_a_value_mismatch():
    log = [rec(0, "a", "1"), rec(1, "b", "2")]
    assert found(log, [row("a", "2"), row("b", "2")]) == [("value_mismatch", 0, 0, 0, 1, "a", (0,))]


def test_keys_only_sees_presence_not_values():
    log = [rec(0, "a", "1"), rec(1, "a", "2"), rec(2, "b", "x"), rec(3, "b", None),
           rec(4, "c", "9", "aborted")]
    rows = [row("a", keys_only=True), row("b", keys_only=True), row("c", keys_only=True)]
    assert found(log, rows) == [("resurrected_key", 0, 3, 3, 1, "b", (3,)),
                                ("aborted_value", 0, 4, 4, 1, "c", (4,))]


def test_a_key_in_several_partitions_is_ordered_by_timestamp():
    log = [rec(0, "a", "late", partition=0, ts=300), rec(0, "a", "early", partition=1, ts=100)]
    assert found(log, [row("a", "late")]) == []
    assert found(log, [row("a", "early")]) == [("stale_value", 0, 0, 0, 1, "a", (0, 0))]


def test_a_version_column_names_the_record_a_row_holds():
    log = [rec(0, "a", "1"), rec(1, "a", "1"), rec(2, "a", "2"), rec(3, "b", "x"),
           rec(4, "b", "y", "aborted"), rec(5, "c", "z"), rec(6, "c", None)]

    def versioned(key: str, version: int, value: str | None = None) -> StateRow:
        return StateRow((key,), None if value is None else (value,), value or "a row", version)

    # keys only: the version says a holds offset 0, two committed updates behind; b an aborted record's
    assert found(log, [versioned("a", 0), versioned("b", 4), versioned("c", 5)]) == [
        ("stale_value", 0, 0, 2, 2, "a", (0, 2)), ("aborted_value", 0, 4, 4, 1, "b", (4, 3)),
        ("resurrected_key", 0, 6, 6, 1, "c", (5, 6))]
    # a value repeated: the version tells offset 1 from offset 0
    assert found(log, [versioned("a", 1, "1"), versioned("b", 3, "x")]) == [
        ("stale_value", 0, 1, 2, 1, "a", (1, 2))]
    # the row's value is not its version's record's
    assert found(log, [versioned("a", 2, "1"), versioned("b", 3, "x")]) == [
        ("value_mismatch", 0, 2, 2, 1, "a", (2,))]
    assert found(log, [versioned("a", 2), versioned("b", 3)]) == []
