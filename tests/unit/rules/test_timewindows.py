"""Time windows of a windowed aggregate (eosctl.rules.timewindows): Kafka Streams' TimeWindows, by epoch."""

from __future__ import annotations

from datetime import UTC, datetime

from eosctl.rules import aggregate
from eosctl.rules.timewindows import shown_window, window_ms, window_starts
from eosctl.rules.upsert import StateRecord, StateRow


def test_a_tumbling_window_is_the_one_multiple_of_its_size_below_the_timestamp():
    assert window_starts(0, 60_000, 60_000) == [0]
    assert window_starts(119_999, 60_000, 60_000) == [60_000]
    assert window_starts(120_000, 60_000, 60_000) == [120_000]
    assert window_starts(-1, 60_000, 60_000) == []  # no timestamp: in no window


def test_a_hopping_window_holds_a_record_in_each_window_that_covers_it():
    # size 60 s advancing by 20 s: a record at 130 s is in the windows starting at 80, 100 and 120 s
    assert window_starts(130_000, 60_000, 20_000) == [80_000, 100_000, 120_000]
    assert window_starts(10_000, 60_000, 20_000) == [0]  # no window starts before the epoch


def test_a_window_column_is_read_as_its_start_in_ms():
    at = datetime(2026, 12, 2, 4, 0, tzinfo=UTC)
    ms = int(at.timestamp() * 1000)
    for v in (ms, str(ms), at, at.replace(tzinfo=None), "2026-12-02T04:00:00Z", float(ms)):
        assert window_ms(v) == ms, v
    assert [window_ms(v) for v in (None, True, "soon", 1.5)] == [None, None, None, None]
    assert shown_window(ms, 60_000) == "[2026-12-02T04:00:00Z, 2026-12-02T04:01:00Z)"
    assert shown_window(1500, 1000) == "[1970-01-01T00:00:01.500Z, 1970-01-01T00:00:02.500Z)"


def test_a_windowed_fold_is_judged_per_key_and_window():
    # The key's records keyed by (key, window start) as auditors.state keys them: window 0 right (1 + 5),
    # window 60000 counted offset 3 twice (1 + 5 + 5).
    def rec(offset: int, window: int, n: int) -> StateRecord:
        return StateRecord("t", 0, offset, ("a", str(window)), (str(n),), False, str(n), "committed",
                           timestamp=window + offset)

    log = [rec(0, 0, 1), rec(1, 0, 5), rec(2, 60_000, 1), rec(3, 60_000, 5)]
    rows = [StateRow(("a", "0"), ("6",), "6"), StateRow(("a", "60000"), ("11",), "11")]
    judged = aggregate.judge(log, rows, {("t", 0): 10}, "sum", field="value.n",
                             shown_key=lambda k: f"{k[0]} in window {shown_window(int(k[1]), 60_000)}")
    assert [(f.kind, f.key, f.offsets, f.cause.rule) for f in judged.findings] == [
        ("aggregate_mismatch", "a in window [1970-01-01T00:01:00Z, 1970-01-01T00:02:00Z)", (3,),
         "counted_twice")]
