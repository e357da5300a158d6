"""Lag arithmetic on hand-built logs, and the --watch status rules (no broker)."""

from __future__ import annotations

from eosctl.cluster.model import Batch, Kind, OffsetRange, PartitionLog
from eosctl.cluster.wire import Offsets
from eosctl.inspection.lag import (
    LagSnapshot,
    PartitionLag,
    Watch,
    build_rows,
    evaluate,
    oldest_unconsumed_ms,
    records_behind,
    scan_windows,
)
from eosctl.txn.opentxn import COORDINATOR_CLOCK, OpenTxn

T = "orders"


def _batch(first: int, last: int, ts: int, *, control: bool = False, pid: int = 7) -> Batch:
    return Batch(base_offset=first, last_offset=last, record_count=last - first + 1, producer_id=pid,
                 producer_epoch=0, base_sequence=0, last_sequence=last - first, is_transactional=True,
                 is_control=control, marker="COMMIT" if control else None, first_timestamp=ts,
                 max_timestamp=ts, compression="none", size_bytes=100)


def _log(ranges: list[tuple[int, int, Kind]], hw: int, lso: int | None = None, start: int = 0,
         batches: list[Batch] | None = None) -> PartitionLog:
    return PartitionLog(T, 0, 0, hw, hw if lso is None else lso, start, lso if lso is not None else hw,
                        ranges=[OffsetRange(a, b, k, 7, 0) for a, b, k in ranges], batches=batches)


# A transactional partition: two committed transactions of 4 records, each followed by its marker,
# then an aborted transaction and its marker, then one more committed transaction.
#   0-3 DATA, 4 MARKER, 5-8 DATA, 9 MARKER, 10-12 ABORTED, 13 MARKER, 14-15 DATA, 16 MARKER; HW 17
TXN_LOG = [(0, 3, Kind.DATA), (4, 4, Kind.MARKER), (5, 8, Kind.DATA), (9, 9, Kind.MARKER),
           (10, 12, Kind.ABORTED), (13, 13, Kind.MARKER), (14, 15, Kind.DATA), (16, 16, Kind.MARKER)]


def test_trailing_commit_marker_counts_zero_records_behind():
    log = _log(TXN_LOG, hw=17)
    assert records_behind(log, committed=16, log_start=0, lso=17) == (0, True)
    assert records_behind(log, committed=17, log_start=0, lso=17) == (0, True)


def test_records_behind_skips_markers_and_aborted_records():
    log = _log(TXN_LOG, hw=17)
    # From 5: 5-8 and 14-15 are data; 9, 13, 16 markers and 10-12 aborted are not.
    assert records_behind(log, committed=5, log_start=0, lso=17) == (6, True)
    assert records_behind(log, committed=0, log_start=0, lso=17) == (10, True)
    assert records_behind(log, committed=10, log_start=0, lso=17) == (2, True)


def test_records_behind_stops_at_the_lso_of_an_open_transaction():
    # 14-15 belong to a transaction still open: LSO is 14, so nothing past it is "behind".
    ranges = TXN_LOG[:6] + [(14, 15, Kind.OPEN)]
    log = _log(ranges, hw=16, lso=14)
    assert records_behind(log, committed=5, log_start=0, lso=14) == (4, True)
    assert records_behind(log, committed=9, log_start=0, lso=14) == (0, True)


def test_records_behind_beyond_the_scan_is_an_upper_bound():
    # Only [5, 10) was scanned (scan limit): 5-8 data, 9 marker; 10..16 unscanned count as data.
    log = PartitionLog(T, 0, 0, 17, 17, 5, 10,
                       ranges=[OffsetRange(5, 8, Kind.DATA), OffsetRange(9, 9, Kind.MARKER)])
    assert records_behind(log, committed=5, log_start=0, lso=17) == (4 + 7, False)


def test_records_below_the_log_start_are_gone_not_behind():
    log = _log(TXN_LOG[4:], hw=17, start=10)
    assert records_behind(log, committed=2, log_start=10, lso=17) == (2, True)


def test_oldest_unconsumed_record_is_the_first_data_batch_after_the_commit():
    batches = [_batch(0, 3, 1000), _batch(4, 4, 1001, control=True), _batch(5, 8, 2000),
               _batch(9, 9, 2001, control=True), _batch(10, 12, 3000), _batch(13, 13, 3001, control=True),
               _batch(14, 15, 4000), _batch(16, 16, 4001, control=True)]
    log = _log(TXN_LOG, hw=17, batches=batches)
    assert oldest_unconsumed_ms(log, committed=4, lso=17) == 2000
    # The aborted batch 10-12 is skipped: a consumer never receives it.
    assert oldest_unconsumed_ms(log, committed=9, lso=17) == 4000
    assert oldest_unconsumed_ms(log, committed=16, lso=17) is None


def test_one_scan_window_per_partition_serves_every_group():
    offsets = {(T, 0): Offsets(0, 17, 17), (T, 1): Offsets(0, 5, 5)}
    committed = {(T, 0): [16, 5, None, 17], (T, 1): [5]}
    assert scan_windows(committed, offsets, scan_limit=1000) == {(T, 0): (5, 17)}
    assert scan_windows(committed, offsets, scan_limit=4) == {(T, 0): (5, 9)}


def test_rows_per_group_with_hw_lag_for_comparison():
    offsets = {(T, 0): Offsets(0, 17, 17)}
    rows = build_rows({"a": {(T, 0): 16}, "b": {(T, 0): 5}, "c": {(T, 0): None}, "d": {(T, 0): 40}},
                      offsets, {(T, 0): _log(TXN_LOG, hw=17, start=5)}, {})
    a, b, c, d = rows
    assert (a.lag_to_lso, a.hw_lag, a.records_behind, a.blocked) == (1, 1, 0, 0)
    assert (b.lag_to_lso, b.records_behind, b.records_behind_exact) == (12, 6, True)
    assert (c.committed, c.lag_to_lso, c.records_behind) == (None, None, None)
    assert d.error == ("committed offset 40 is beyond the high watermark 17: the log was truncated below "
                       "what the group consumed (an unclean leader election, or a recreated topic); its "
                       "consumer will reset by auto.offset.reset, skipping or re-reading records")


# --- watch ----------------------------------------------------------------------------------------------

TXN = OpenTxn(producer_id=7, producer_epoch=0, first_offset=120, started_ms=0, age_source=COORDINATOR_CLOCK)


def _lag(committed: int | None, behind: int | None, lso: int = 200, hw: int = 200, txn: OpenTxn | None = None,
         error: str | None = None, group: str = "g", partition: int = 0) -> PartitionLag:
    return PartitionLag(group, T, partition, committed, 0, lso, hw, behind, True, None, txn, error)


def _window(*lags: PartitionLag) -> list[tuple[int, PartitionLag]]:
    """One poll a second, the first 90 s after TXN started."""
    return [(90_000 + i * 1000, lag) for i, lag in enumerate(lags)]


def test_caught_up_is_ok():
    assert evaluate(_window(_lag(190, 3), _lag(200, 0)), group_active=True).status == "OK"


def test_blocked_by_an_open_transaction_is_a_stall_that_names_it():
    w = _window(*[_lag(120, 0, lso=120, hw=150, txn=TXN) for _ in range(4)])
    s = evaluate(w, group_active=True)
    assert str(s) == "STALL: blocked by open transaction pid 7 at offset 120 for 93s"


def test_a_first_poll_judges_a_transaction_its_coordinator_dates_as_a_later_poll_does():
    # Issue 56: the first screen said OK for a partition a 19-minute-old transaction blocked.
    s = evaluate(_window(_lag(120, 0, lso=120, hw=150, txn=TXN)), group_active=True)
    assert str(s) == "STALL: blocked by open transaction pid 7 at offset 120 for 90s"
    # One that began a moment ago (less than the interval: no earlier poll would have seen it), or one
    # dated only by its producer's record timestamps, is named but not judged.
    young = OpenTxn(7, 0, 120, 89_500, age_source=COORDINATOR_CLOCK)
    s = evaluate(_window(_lag(120, 0, lso=120, hw=150, txn=young)), group_active=True, first_poll_stall_s=1)
    assert (s.status, s.cause) == ("OK", "blocked by open transaction pid 7 at offset 120 for 0s")
    unsure = OpenTxn(7, 0, 120, 0)
    s = evaluate(_window(_lag(120, 0, lso=120, hw=150, txn=unsure)), group_active=True)
    assert s.status == "OK" and s.cause.startswith("blocked by open transaction pid 7")
    # A consumer with records still to read below the LSO is not blocked by it yet.
    assert evaluate(_window(_lag(100, 20, lso=120, hw=150, txn=TXN)), group_active=True).status == "OK"


def test_a_different_transaction_each_poll_is_not_a_stall():
    other = OpenTxn(8, 0, 130, 0)
    w = _window(_lag(120, 0, lso=120, hw=150, txn=TXN), _lag(130, 0, lso=130, hw=160, txn=other))
    assert evaluate(w, group_active=True).status == "OK"


def test_offset_going_back_is_rewind():
    s = evaluate(_window(_lag(150, 50), _lag(100, 100), _lag(110, 90)), group_active=True)
    assert str(s) == "REWIND: committed offset went back from 150 to 110"


def test_no_progress_with_records_to_read():
    w = _window(_lag(100, 100), _lag(100, 100), _lag(100, 100))
    assert str(evaluate(w, group_active=True)) == (
        "STALL: committed offset 100 unchanged for 2s with 100 records behind")
    assert str(evaluate(w, group_active=False)) == (
        "STOP: no active consumer; committed offset 100, 100 records behind for 2s")


def test_moving_but_falling_behind_is_warn():
    w = _window(_lag(100, 10), _lag(105, 15), _lag(110, 20))
    assert str(evaluate(w, group_active=True)) == "WARN: falling behind: 10 -> 20 records behind"
    catching_up = _window(_lag(100, 20), _lag(105, 15), _lag(110, 18))
    assert evaluate(catching_up, group_active=True).status == "OK"


def test_a_failed_poll_is_err():
    w = _window(_lag(100, 0), _lag(100, None, error="committed offset 300 is beyond the high watermark"))
    assert evaluate(w, group_active=True).status == "ERR"


def test_group_status_is_its_worst_partition_and_the_window_slides():
    watch = Watch(window=3)
    for i in range(5):
        snap = LagSnapshot(90_000 + i * 1000, [
            _lag(200, 0, partition=0),
            _lag(120, 0, lso=120, hw=150, txn=TXN, partition=1),
        ], {"g": "STABLE"})
        watch.add(snap)
    assert watch.partition_status("g", T, 0).status == "OK"
    assert str(watch.group_status("g")) == (
        "STALL: orders[1] blocked by open transaction pid 7 at offset 120 for 94s")
    # The open transaction is committed: after a full window without it, the group is OK again.
    for i in range(3):
        lags = [_lag(200, 0, partition=0), _lag(150, 0, 150, 150, partition=1)]
        watch.add(LagSnapshot(95_000 + i * 1000, lags, {"g": "STABLE"}))
    assert watch.group_status("g").status == "OK"


# --- the open transaction at the LSO, whatever the size of its first batch ------------------------------


def _raw_batch(base: int, pid: int, value_bytes: int, records: int = 1) -> bytes:
    import struct

    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(2, 0, True, pid, 0, 0, 1 << 30)
    for d in range(records):
        b.append(d, timestamp=5000 + d, key=None, value=bytes(value_bytes), headers=[])
    raw = bytearray(b.build())
    struct.pack_into(">q", raw, 0, base)
    return bytes(raw)


class KafkaLikeWire:
    """Fetch as Kafka answers it (KIP-74): each partition's bytes are cut at max_bytes, except that the
    first partition of a response always gets its first batch whole. ``cut_all``: even that one is cut
    (a broker that enforces max_bytes strictly)."""

    def __init__(self, logs: dict[tuple[str, int], bytes], cut_all: bool = False):
        self.logs, self.cut_all = logs, cut_all
        self.fetches: list[tuple[list, int]] = []

    def fetch_raw(self, topic, partition, offset, max_bytes, isolation=0):
        return self.fetch_many({(topic, partition): offset}, max_bytes)[(topic, partition)]

    def fetch_many(self, positions, max_bytes, isolation=0):
        from eosctl.cluster.batches import decode
        from eosctl.cluster.wire import FetchResult

        self.fetches.append((list(positions), max_bytes))
        out = {}
        for i, (tp, pos) in enumerate(positions.items()):
            data = self.logs[tp]
            first = decode(data).batches[0].size_bytes
            size = max(max_bytes, first) if i == 0 and not self.cut_all else max_bytes
            out[tp] = FetchResult(tp[0], tp[1], pos, 0, 10, 0, 0, (), data[:size])
        return out


def test_an_oversized_first_batch_of_the_second_partition_is_fetched_again_alone():
    from eosctl.txn.opentxn import OPEN_TXN_FETCH_BYTES, first_batches, open_transactions

    a, b = ("orders", 0), ("orders", 1)
    wire = KafkaLikeWire({a: _raw_batch(0, 41, 100), b: _raw_batch(0, 42, 100_000)})
    assert len(wire.logs[b]) > OPEN_TXN_FETCH_BYTES
    found = first_batches(wire, {a: 0, b: 0})
    assert {tp: batch.producer_id for tp, batch in found.items()} == {a: 41, b: 42}
    assert wire.fetches == [([a, b], OPEN_TXN_FETCH_BYTES), ([b], OPEN_TXN_FETCH_BYTES)]
    txns = open_transactions(wire, [a, b], {a: 0, b: 0})
    assert txns[b] == OpenTxn(42, 0, 0, 5000)


def test_a_broker_that_cuts_every_batch_gets_a_doubled_fetch_size():
    from eosctl.txn.opentxn import OPEN_TXN_FETCH_BYTES, first_batches

    big = ("orders", 0)
    wire = KafkaLikeWire({big: _raw_batch(0, 42, 200_000)}, cut_all=True)
    assert first_batches(wire, {big: 0})[big].producer_id == 42
    assert [size for _, size in wire.fetches] == [OPEN_TXN_FETCH_BYTES, 2 * OPEN_TXN_FETCH_BYTES,
                                                  4 * OPEN_TXN_FETCH_BYTES]


def test_complete_batches_without_data_at_the_offset_are_no_reason_to_fetch_again():
    from eosctl.txn.opentxn import first_batches

    tp = ("orders", 0)
    wire = KafkaLikeWire({tp: _raw_batch(0, 41, 10, records=3)})
    assert first_batches(wire, {tp: 5}) == {}
    assert len(wire.fetches) == 1


def test_a_poll_overdue_shows_the_last_values_marked_stale_with_their_age():
    from rich.console import Console

    from eosctl.output.lag import lag_document, lag_renderable, outage_document, overdue_document

    snap = LagSnapshot(90_000, [_lag(200, 0)], {"g": "STABLE"})
    doc = lag_document(snap)
    assert doc["stale_since"] is None and doc["age_s"] is not None
    stale = overdue_document(doc, reading_s=12.3, now_ms=111_000)
    assert (stale["stale_since"], stale["age_s"], stale["reading_s"]) == (doc["taken_at"], 21.0, 12.3)
    assert stale["groups"] == doc["groups"]  # nothing failed yet: the statuses stay
    console = Console(width=200, record=True)
    console.print(lag_renderable(stale, True, [], []))
    title = console.export_text().splitlines()[0]
    assert "STALE, 21s old (the next poll has been reading for 12s)" in title, title
    down = outage_document(doc, "no answer", now_ms=100_000)
    assert (down["stale_since"], down["age_s"]) == (doc["taken_at"], 10.0)
