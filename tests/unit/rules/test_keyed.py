"""What the state rules share (eosctl.rules.keyed): rows and records by key, and the read point's split."""

from __future__ import annotations

from eosctl.rules.keyed import histories, rows_by_key, settled_and_in_flight
from eosctl.rules.upsert import StateRecord, StateRow

T = "orders"


def rec(offset: int, key: str, status: str = "committed", partition: int = 0, ts: int = -1) -> StateRecord:
    return StateRecord(T, partition, offset, (key,), (str(offset),), False, str(offset), status, timestamp=ts)


def test_rows_by_key_keeps_a_key_held_twice_in_the_order_read():
    rows = [StateRow(("a",), ("1",), "1"), StateRow(("b",), ("2",), "2"), StateRow(("a",), ("3",), "3")]
    assert {k: [r.shown for r in rs] for k, rs in rows_by_key(rows).items()} == {("a",): ["1", "3"],
                                                                                ("b",): ["2"]}


def test_histories_by_offset_in_one_partition_and_by_timestamp_across_partitions():
    one = histories([rec(7, "a", ts=1), rec(3, "a", ts=9), rec(5, "b")])
    assert [r.offset for r in one[("a",)]] == [3, 7]
    both = histories([rec(3, "a", partition=0, ts=20), rec(9, "a", partition=1, ts=10)])
    assert [(r.partition, r.offset) for r in both[("a",)]] == [(1, 9), (0, 3)]


def test_the_read_point_splits_committed_records_and_leaves_out_the_others():
    h = [rec(0, "a"), rec(1, "a", "aborted"), rec(2, "a"), rec(3, "a", "open"), rec(4, "a"),
         rec(0, "a", partition=1)]
    settled, flight = settled_and_in_flight(h, {(T, 0): 3})  # partition 1 has no read point: nothing settled
    assert [(r.partition, r.offset) for r in settled] == [(0, 0), (0, 2)]
    assert [(r.partition, r.offset) for r in flight] == [(0, 4), (1, 0)]
