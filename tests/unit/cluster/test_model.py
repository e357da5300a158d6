"""The PartitionLog model and the offset classification, fed recorded or built batches (no broker)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from eosctl.cluster.batches import decode
from eosctl.cluster.logscan import scan_partition, scan_partitions
from eosctl.cluster.model import (
    Batch,
    EpochBump,
    Kind,
    OffsetRange,
    PartitionLog,
    SequenceAnomaly,
    Transaction,
    ZombieWrite,
    merge_ranges,
)
from eosctl.cluster.wire import FetchResult, Offsets
from eosctl.txn.fencing import fencing_bumps, fencing_events

DATA = Path(__file__).parents[1] / "data"
D, M, A, OPEN, H = Kind.DATA, Kind.MARKER, Kind.ABORTED, Kind.OPEN, Kind.HOLE


class FakeWire:
    """Serves one log's bytes like a Kafka leader: from the batch holding the offset, cut at max_bytes."""

    def __init__(self, logs: dict[tuple[str, int], tuple[bytes, Offsets]],
                 moved_log_start: int | None = None, starve: tuple[str, int] | None = None):
        self.logs = logs
        self.fetches: list[dict] = []
        self.moved_log_start = moved_log_start
        self.starve = starve  # left empty in multi-partition responses, as when max_bytes runs out

    def fetch_raw(self, topic, partition, offset, max_bytes, isolation=0):
        return self.fetch_many({(topic, partition): offset}, max_bytes, isolation)[(topic, partition)]

    def offsets(self, tps):
        return {tp: self.logs[tp][1] for tp in tps}

    def forget_leaders(self):
        pass

    def fetch_many(self, positions, max_bytes, isolation=0):
        self.fetches.append(dict(positions))
        out = {}
        for tp, pos in positions.items():
            data, o = self.logs[tp]
            error, start = 0, 0
            if self.moved_log_start is not None and pos < self.moved_log_start:
                error, self.moved_log_start = 1, None  # retention ran once, between ListOffsets and Fetch
                records = b""
                o = Offsets(5, o.high_watermark, o.last_stable)
            else:
                for b in decode(data).batches:
                    if b.last_offset >= pos:
                        break
                    start += b.size_bytes
                records = data[start:start + max_bytes]
                if tp == self.starve and len(positions) > 1:
                    records = b""
            out[tp] = FetchResult(tp[0], tp[1], pos, error, o.high_watermark, o.last_stable, o.log_start,
                                  (), records)
        return out


def batch(deltas: list[int], base: int, pid: int = -1, epoch: int = -1, seq: int = -1, txn: bool = False,
          last_delta: int | None = None) -> bytes:
    b = DefaultRecordBatchBuilder(2, 0, txn, pid, epoch, seq, 1 << 20)
    for d in deltas:
        b.append(d, timestamp=1000 + d, key=None, value=b"v", headers=[])
    raw = bytearray(b.build())
    struct.pack_into(">q", raw, 0, base)
    if last_delta is not None:
        struct.pack_into(">i", raw, 23, last_delta)
    return bytes(raw)


def marker(offset: int, pid: int, epoch: int, commit: bool) -> bytes:
    b = DefaultRecordBatchBuilder(2, 0, True, pid, epoch, -1, 1 << 20)
    b.append(0, timestamp=2000, key=struct.pack(">hh", 0, 1 if commit else 0), value=b"\0\0\0\0\0\0",
             headers=[])
    raw = bytearray(b.build())
    struct.pack_into(">q", raw, 0, offset)
    raw[22] |= 0x30  # attributes (low byte): transactional + control (only brokers write these)
    return bytes(raw)


def shape(log: PartitionLog) -> list[tuple[int, int, Kind]]:
    return [(r.first, r.last, r.kind) for r in log.ranges]


def scan(data: bytes, offsets: Offsets, **kw) -> tuple[PartitionLog, FakeWire]:
    wire = FakeWire({("t", 0): (data, offsets)})
    return scan_partition(wire, "t", 0, **kw), wire


# --- recorded logs -----------------------------------------------------------------------------------

def test_recorded_transactional_log():
    log, wire = scan((DATA / "txn_mixed.bin").read_bytes(), Offsets(0, 11, 9))
    pid = log.transactions[0].producer_id
    assert shape(log) == [(0, 2, D), (3, 3, M), (4, 5, A), (6, 6, M), (7, 8, D), (9, 10, OPEN)]
    assert [(r.producer_id, r.producer_epoch) for r in log.ranges] == [
        (pid, 0), (pid, 0), (pid, 0), (pid, 0), (-1, -1), (pid, 1)]
    assert log.transactions == [
        Transaction(pid, 0, 0, 2, "COMMIT", 3, 3, 0),
        Transaction(pid, 0, 4, 5, "ABORT", 6, 2, 0),
        Transaction(pid, 1, 9, 10, "OPEN", None, 2),
    ]
    p = log.producers[pid]
    assert p.epochs == [0, 1] and p.epoch_bumps == [EpochBump(9, 0, 1, False)]
    assert p.open_txn_first_offset == 9 and p.last_sequence == 1 and p.records == 7 and p.batches == 5
    assert p.sequence_anomalies == [] and p.zombie_writes == []
    assert list(log.producers) == [pid]  # the plain producer has no id
    assert log.committed_records == 5 and log.count(A) == 2 and log.count(OPEN) == 2
    assert [r.first for r in log.excluded_ranges()] == [3, 4, 6, 9]
    assert log.aborted_ranges() == [OffsetRange(4, 5, A, pid, 0)]
    assert [log.kind_at(o) for o in (-1, 0, 3, 5, 8, 10, 11)] == [None, D, M, A, D, OPEN, None]
    assert log.warnings == [] and log.batches is None
    assert (log.scanned_from, log.scanned_to) == (0, 11)
    assert len(wire.fetches) == 1


def test_small_fetches_give_the_same_answer_and_report_progress():
    data = (DATA / "txn_mixed.bin").read_bytes()
    whole, _ = scan(data, Offsets(0, 11, 9))
    seen: list[tuple[int, int]] = []
    # 60 bytes is smaller than every batch: the scan must grow the fetch size, not loop forever.
    log, wire = scan(data, Offsets(0, 11, 9), max_bytes=60, keep_batches=True,
                     progress=lambda step: seen.append((step.done, step.total)))
    assert log.ranges == whole.ranges and log.transactions == whole.transactions
    assert len(wire.fetches) > 5
    assert [b.base_offset for b in log.batches] == [0, 3, 4, 6, 7, 8, 9]
    assert seen[-1] == (11, 11) and all(a[0] <= b[0] for a, b in zip(seen, seen[1:], strict=False))


def test_window_finds_markers_beyond_its_end():
    log, _ = scan((DATA / "txn_mixed.bin").read_bytes(), Offsets(0, 11, 9), start=1, end=5)
    assert shape(log) == [(1, 2, D), (3, 3, M), (4, 4, A)]
    assert [(t.first_offset, t.last_offset, t.outcome, t.marker_offset, t.data_records)
            for t in log.transactions] == [(1, 2, "COMMIT", 3, 2), (4, 4, "ABORT", 6, 1)]
    assert (log.scanned_from, log.scanned_to) == (1, 5)


def test_window_starting_at_a_marker_has_a_dataless_transaction():
    log, _ = scan((DATA / "txn_mixed.bin").read_bytes(), Offsets(0, 11, 9), start=3, end=4)
    assert shape(log) == [(3, 3, M)]
    assert [(t.first_offset, t.data_records, t.marker_offset) for t in log.transactions] == [(3, 0, 3)]


def test_open_transaction_in_a_window_is_open_only_once_the_hw_is_reached():
    log, _ = scan((DATA / "txn_mixed.bin").read_bytes(), Offsets(0, 11, 9), start=9, end=10,
                     max_bytes=80)
    assert shape(log) == [(9, 9, OPEN)] and log.transactions[0].outcome == "OPEN"
    assert log.warnings == []


def test_transaction_after_a_hanging_one_is_committed_even_when_the_window_ends_before_its_marker():
    # pid 1 hangs at offset 0 and pins the LSO there; pid 2 commits offsets 1..2 with its marker at 3.
    data = (batch([0], 0, pid=1, epoch=0, seq=0, txn=True) + batch([0, 1], 1, pid=2, epoch=0, seq=0, txn=True)
            + marker(3, 2, 0, commit=True))
    log, _ = scan(data, Offsets(0, 4, 0), end=3)
    assert shape(log) == [(0, 0, OPEN), (1, 2, D)]
    assert [(t.producer_id, t.outcome, t.marker_offset) for t in log.transactions] == [
        (1, "OPEN", None), (2, "COMMIT", 3)]


def test_per_partition_windows():
    logs = {("a", 0): ((DATA / "txn_mixed.bin").read_bytes(), Offsets(0, 11, 9)),
            ("b", 0): ((DATA / "compressed.bin").read_bytes(), Offsets(0, 30, 30))}
    result = scan_partitions(FakeWire(logs), list(logs), start={("a", 0): 7, ("b", 0): 12},
                             end={("a", 0): 9})
    assert shape(result[("a", 0)]) == [(7, 8, D)]
    assert shape(result[("b", 0)]) == [(12, 29, D)]


def test_partition_left_empty_in_a_shared_fetch_is_asked_again_alone():
    logs = {("a", 0): ((DATA / "txn_mixed.bin").read_bytes(), Offsets(0, 11, 9)),
            ("b", 0): ((DATA / "compressed.bin").read_bytes(), Offsets(0, 30, 30))}
    wire = FakeWire(logs, starve=("b", 0))
    result = scan_partitions(wire, list(logs))
    assert shape(result[("b", 0)]) == [(0, 29, D)] and result[("b", 0)].warnings == []
    assert {("b", 0): 0} in wire.fetches


def test_recorded_fencing_writes_abort_at_the_new_epoch():
    log, _ = scan((DATA / "fenced_open.bin").read_bytes(), Offsets(0, 4, 3))
    pid = log.transactions[0].producer_id
    assert shape(log) == [(0, 1, A), (2, 2, M), (3, 3, OPEN)]
    assert [(t.producer_epoch, t.outcome, t.marker_offset, t.marker_epoch) for t in log.transactions] == [
        (0, "ABORT", 2, 1), (1, "OPEN", None, None)]
    p = log.producers[pid]
    assert [(b.offset, b.old_epoch, b.new_epoch, b.marker, b.txn_first, b.txn_last, b.continued)
            for b in p.epoch_bumps] == [(2, 0, 1, "ABORT", 0, 1, True)]
    # Alone, an ABORT one epoch above its data, the id writing on at it, is noida-db's fencing abort (v1)
    # or the id's own v2 abort: not counted.
    assert p.protocol == "unknown" and fencing_events(p) == 0 and fencing_bumps(p) == []
    assert log.warnings == []


def test_lso_disagreement_is_a_warning():
    log, _ = scan((DATA / "txn_mixed.bin").read_bytes(), Offsets(0, 11, 11))
    assert len(log.warnings) == 1 and "LSO is 11" in log.warnings[0] and "says 9" in log.warnings[0]


def test_empty_partition():
    log, wire = scan(b"", Offsets(0, 0, 0))
    assert log.ranges == [] and log.transactions == [] and log.committed_records == 0
    assert wire.fetches == [] and (log.scanned_from, log.scanned_to) == (0, 0)
    assert log.kind_at(0) is None


def test_start_below_log_start_and_end_past_hw_are_clamped():
    log, _ = scan((DATA / "compressed.bin").read_bytes(), Offsets(10, 30, 30), start=0, end=1000)
    assert (log.scanned_from, log.scanned_to) == (10, 30) and shape(log) == [(10, 29, D)]
    assert len(log.producers) == 2  # the batch below the log start is never looked at


# --- built logs: compaction, interleaving, producer anomalies -----------------------------------------

def test_compaction_holes_inside_and_between_batches():
    data = (batch([0, 2, 3], 0, last_delta=5)  # offsets 1, 4, 5 compacted away
            + batch([0, 1], 10)  # 6..9 gone with whole batches
            + batch([], 12, pid=4, epoch=0, seq=0, last_delta=2))  # emptied batch kept for producer state
    log, _ = scan(data, Offsets(0, 15, 15))  # the cleaner keeps a round's last batch, even empty
    assert shape(log) == [(0, 0, D), (1, 1, H), (2, 3, D), (4, 9, H), (10, 11, D), (12, 14, H)]
    assert log.committed_records == 5 and log.count(H) == 10


def test_interleaved_transactions_keep_their_producers():
    data = (batch([0, 1], 0, pid=1, epoch=0, seq=0, txn=True)
            + batch([0, 1], 2, pid=2, epoch=3, seq=0, txn=True)
            + batch([0], 4, pid=1, epoch=0, seq=2, txn=True) + marker(5, 2, 3, commit=False)
            + marker(6, 1, 0, commit=True) + batch([0], 7, pid=2, epoch=3, seq=2, txn=True))
    log, _ = scan(data, Offsets(0, 8, 7))
    assert [(r.first, r.last, r.kind, r.producer_id) for r in log.ranges] == [
        (0, 1, D, 1), (2, 3, A, 2), (4, 4, D, 1), (5, 5, M, 2), (6, 6, M, 1), (7, 7, OPEN, 2)]
    txns = [(t.producer_id, t.first_offset, t.last_offset, t.outcome, t.data_records)
            for t in log.transactions]
    assert txns == [(1, 0, 4, "COMMIT", 3), (2, 2, 3, "ABORT", 2), (2, 7, 7, "OPEN", 1)]
    assert log.producers[1].open_txn_first_offset is None and log.producers[2].open_txn_first_offset == 7


def test_committed_data_of_many_producers_merges():
    data = (batch([0], 0, pid=1, epoch=0, seq=0, txn=True) + batch([0], 1, pid=2, epoch=0, seq=0, txn=True)
            + marker(2, 1, 0, True) + marker(3, 2, 0, True) + batch([0, 1], 4))
    log, _ = scan(data, Offsets(0, 6, 6))
    assert [(r.first, r.last, r.kind, r.producer_id) for r in log.ranges] == [
        (0, 1, D, -1), (2, 2, M, 1), (3, 3, M, 2), (4, 5, D, -1)]


def test_sequence_anomalies_and_zombies():
    data = (batch([0, 1], 0, pid=5, epoch=0, seq=0) + batch([0], 2, pid=5, epoch=0, seq=5)  # gap 2..4
            + batch([0], 3, pid=5, epoch=0, seq=3)  # duplicate / out of order
            + batch([0], 4, pid=5, epoch=1, seq=0)  # epoch bump
            + batch([0], 5, pid=5, epoch=0, seq=4))  # zombie at the old epoch
    log, _ = scan(data, Offsets(0, 6, 6))
    p = log.producers[5]
    # The zombie continues epoch 0's sequence (3 -> 4), so it is no sequence anomaly.
    assert p.sequence_anomalies == [SequenceAnomaly(2, 0, 2, 5, "gap"),
                                    SequenceAnomaly(3, 0, 6, 3, "duplicate")]
    assert p.anomaly_total == 2
    assert p.epoch_bumps == [EpochBump(4, 0, 1, False, transactional=False)]
    assert p.zombie_writes == [ZombieWrite(5, 0, 1)] and p.zombie_total == 1
    assert p.epochs == [0, 1] and shape(log) == [(0, 5, D)]


def test_log_start_moving_during_the_scan_is_below_the_log_start_not_a_hole():
    data = batch(list(range(10)), 0)
    wire = FakeWire({("t", 0): (data, Offsets(0, 10, 10))}, moved_log_start=5)
    log = scan_partition(wire, "t", 0)
    assert shape(log) == [(5, 9, D)] and (log.log_start_offset, log.scanned_from) == (5, 5)
    assert "log start moved from 0 to 5" in log.warnings[0]


def test_scan_partitions_fetches_all_partitions_together():
    logs = {("a", 0): ((DATA / "txn_mixed.bin").read_bytes(), Offsets(0, 11, 9)),
            ("b", 1): ((DATA / "compressed.bin").read_bytes(), Offsets(0, 30, 30))}
    wire = FakeWire(logs)
    result = scan_partitions(wire, list(logs))
    assert len(wire.fetches) == 1 and set(wire.fetches[0]) == set(logs)
    assert result[("a", 0)].committed_records == 5 and result[("b", 1)].committed_records == 30


# --- the model itself --------------------------------------------------------------------------------

def test_merge_rules():
    rs = [OffsetRange(5, 6, A, 2, 0), OffsetRange(0, 1, D, 1, 0), OffsetRange(2, 4, D, 2, 0),
          OffsetRange(7, 7, A, 3, 0), OffsetRange(8, 9, A, 3, 0), OffsetRange(11, 12, H),
          OffsetRange(13, 13, H)]
    assert merge_ranges(rs) == [OffsetRange(0, 4, D), OffsetRange(5, 6, A, 2, 0), OffsetRange(7, 9, A, 3, 0),
                                OffsetRange(11, 13, H)]
    assert OffsetRange(3, 7, D).count == 5


def test_json_round_trip():
    log, _ = scan((DATA / "fenced_open.bin").read_bytes(), Offsets(0, 4, 3), keep_batches=True)
    log.batches.append(Batch(20, 25, 2, -1, -1, -1, -1, False, False, None, 0, 0, "gzip", 99, (20, 25)))
    text = json.dumps(log.to_dict())
    back = PartitionLog.from_dict(json.loads(text))
    assert back == log
    assert back.batches[-1].offsets == (20, 25) and back.ranges[0].kind is A
    assert json.loads(text)["committed_records"] == 0


def test_kind_at_uses_ranges_after_mutation():
    log = PartitionLog("t", 0, 0, 10, 10, 0, 10, ranges=[OffsetRange(0, 9, D)])
    assert log.kind_at(3) is D
    log.ranges = [OffsetRange(0, 4, D), OffsetRange(5, 9, H)]
    assert log.kind_at(7) is H
    log.ranges = [OffsetRange(0, 9, OPEN)]  # same length as the first list, different object
    assert log.kind_at(7) is OPEN


@pytest.mark.parametrize("kind", list(Kind))
def test_kind_is_a_plain_string(kind):
    assert json.dumps(kind) == f'"{kind.value}"' and Kind(kind.value) is kind


def test_an_uncompacted_batch_straddling_the_scans_ends_is_classified_as_its_offsets_listed() -> None:
    from eosctl.cluster.logclassify import LogScan

    def scan(listed: bool) -> list[OffsetRange]:
        s = LogScan("t", 0, 5, 15, Offsets(0, 20, 20), keep_batches=False)
        for base in (0, 10):  # the first read from inside a batch, the last past the scan's end
            s.add(Batch(base, base + 9, 10, 7, 0, base, base + 9, False, False, None, 0, 0, "none", 100,
                        tuple(range(base, base + 10)) if listed else None))
        return s.finish().ranges

    assert scan(listed=False) == scan(listed=True) == [OffsetRange(5, 14, Kind.DATA, 7, 0)]
