"""Producer epochs in the log: the fencing rule under transactions v1 and v2 (KIP-890), the bounded epoch
history, the marker's own epoch, and sequence gaps the cleaner explains (built batches, no broker).

Transactions v2: EndTxn bumps the epoch and the coordinator writes the markers at the new one
(TransactionMetadata.prepareAbortOrCommit, TransactionMarkerChannelManager.addTxnMarkersToSend); the
producer continues at it. Its fencing abort bumps twice (prepareFenceProducerEpoch, then the abort).
"""

from __future__ import annotations

import struct

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.util import calc_crc32c

from eosctl.cluster.batches import decode_batch
from eosctl.cluster.model import MAX_EPOCHS, MAX_EVENTS, EpochBump, ProducerState, ZombieWrite
from eosctl.cluster.wire import Offsets
from eosctl.txn.fencing import bump_verdict, fencing_bumps, fencing_events, timeouts
from tests.unit.cluster.test_model import batch, marker, scan
from tui.views.producers import jump_offset

PID = 7


def txn(offset: int, epoch: int, records: int = 1, seq: int = 0) -> bytes:
    return batch(list(range(records)), offset, pid=PID, epoch=epoch, seq=seq, txn=True)


def producer(data: bytes, end: int | None = None, **kw) -> ProducerState:
    hw = end if end is not None else _end(data)
    log, _ = scan(data, Offsets(0, hw, hw), **kw)
    return log.producers[PID]


def _end(data: bytes) -> int:
    from eosctl.cluster.batches import decode

    return decode(data).batches[-1].last_offset + 1


def verdicts(p: ProducerState) -> list[tuple[int, bool, str]]:
    return [(b.offset, *bump_verdict(p, b)) for b in p.epoch_bumps]


# --- transactions v2 ----------------------------------------------------------------------------------

def test_three_v2_aborts_are_no_fencing():
    # The case: each abort's marker one epoch up, the producer carrying on at that epoch: its own
    # aborts, counted (and listed as such while there is room); the last one, with nothing after it, can't
    # be read.
    data = (txn(0, 0) + marker(1, PID, 1, commit=False) + txn(2, 1) + marker(3, PID, 2, commit=False)
            + txn(4, 2) + marker(5, PID, 3, commit=False))
    p = producer(data)
    assert [(b.offset, b.old_epoch, b.new_epoch, b.marker, b.continued) for b in p.epoch_bumps] == [
        (1, 0, 1, "ABORT", True), (3, 1, 2, "ABORT", True), (5, 2, 3, "ABORT", False)]
    assert (p.own_aborts, p.commit_bumps, p.routine_epochs, p.routine_offset) == (2, 0, (0, 2), 1)
    assert p.protocol == "unknown" and fencing_events(p) == 0 and fencing_bumps(p) == []
    assert verdicts(p)[0] == (1, False, "transactions v2: the id's own ABORT moved the epoch on (it wrote on "
                                        "at that epoch)")
    assert verdicts(p)[2] == (5, False, "bump on an ABORT marker: fencing under transactions v1, ordinary "
                                        "under v2; no marker in the scan shows which")


def test_v2_commits_and_aborts_and_skipped_transactions_are_no_fencing():
    # COMMIT at epoch+1 proves v2; epoch 2..4 went to transactions that skipped this partition.
    data = (txn(0, 0) + marker(1, PID, 1, commit=True) + txn(2, 1) + marker(3, PID, 2, commit=False)
            + txn(4, 5) + marker(5, PID, 6, commit=True))
    p = producer(data)
    assert p.protocol == "v2" and (p.v1_markers, p.v2_markers) == (0, 2)
    assert fencing_events(p) == 0 and (p.commit_bumps, p.bumps_total) == (2, 3)
    # The ABORT then data three epochs up: one event, which this partition alone can't read.
    (abort,) = p.epoch_bumps
    assert (abort.offset, abort.txn_first, abort.txn_last, abort.next_offset, abort.next_epoch) == (
        3, 2, 2, 4, 5)
    fencing, why = bump_verdict(p, abort)
    assert not fencing and why.startswith("TAKEOVER?: a new instance took the id over and the coordinator "
                                          "aborted the old one's transaction at offsets 2..2; the new "
                                          "instance wrote at epoch 5 from offset 4; or (transactions v2)")
    assert jump_offset(p, None) is None  # the TUI has nothing to jump to


def test_v2_takeover_is_settled_by_the_ids_other_partitions():
    from eosctl.cluster.model import PartitionLog
    from eosctl.txn.producerids import settle

    # Kafka 4 with a Java client: data at 1, the coordinator's ABORT at 2, the new instance at 3.
    data = (txn(0, 0) + marker(1, PID, 1, commit=True) + txn(2, 1) + marker(3, PID, 2, commit=False)
            + txn(4, 3) + marker(5, PID, 4, commit=True))
    here, _ = scan(data, Offsets(0, 6, 6))
    # Another partition that holds data at epoch 2: the id aborted by itself, then wrote elsewhere.
    other_data = txn(0, 1) + marker(1, PID, 2, commit=False) + txn(2, 2) + marker(3, PID, 3, commit=True)
    other, _ = scan(other_data, Offsets(0, 4, 4))
    other = PartitionLog.from_dict({**other.to_dict(), "partition": 1})
    settle([here, other])
    p = here.producers[PID]
    assert p.own_aborts_settled == [2] and fencing_events(p) == 0
    assert bump_verdict(p, p.epoch_bumps[0])[1].startswith("transactions v2: the id aborted its transaction "
                                                          "at offsets 2..2 itself")
    # A partition where the same id's markers show transactions v1 settles it as a take-over.
    again, _ = scan(data, Offsets(0, 6, 6))
    v1 = txn(0, 1) + marker(1, PID, 1, commit=True)
    v1_log, _ = scan(v1, Offsets(0, 2, 2))
    v1_log = PartitionLog.from_dict({**v1_log.to_dict(), "partition": 2})
    settle([again, v1_log])
    p = again.producers[PID]
    assert p.takeovers_settled == [2] and fencing_events(p) == 1
    assert bump_verdict(p, p.epoch_bumps[0]) == (
        True, "FENCED: a new instance took the id over and the coordinator aborted the old one's transaction "
              "at offsets 2..2; the new instance wrote at epoch 3 from offset 4")


def test_timed_out_transaction_is_told_by_its_age():
    # The coordinator's ABORT one epoch up, 1000 ms after the first record (the builders' clocks): with the
    # id's timeout at most that, a timeout; above it, not.
    data = txn(0, 0, records=3) + marker(3, PID, 1, commit=False)
    p = producer(data)
    (b,) = p.epoch_bumps
    assert (b.txn_first, b.txn_last, b.txn_first_ts, b.marker_ts) == (0, 2, 1000, 2000)
    p.txn_timeout_ms = 1000
    assert bump_verdict(p, b) == (False, "TIMEOUT: the coordinator aborted the transaction at offsets 0..2 "
                                        "1.0 s after its first record (transaction.timeout.ms 1000)")
    assert timeouts(p) == 1 and fencing_events(p) == 0
    p.txn_timeout_ms = 1001
    assert timeouts(p) == 0 and not bump_verdict(p, b)[1].startswith("TIMEOUT")


def test_v2_zombie_write_is_fencing():
    data = (txn(0, 0, seq=0) + marker(1, PID, 1, commit=True) + txn(2, 1, seq=0)
            + marker(3, PID, 2, commit=True) + txn(4, 0, seq=1))  # a write at epoch 0 after epoch 2
    p = producer(data)
    assert p.protocol == "v2" and p.zombie_writes == [ZombieWrite(4, 0, 2)]
    assert fencing_events(p) == 1 and fencing_bumps(p) == []
    assert jump_offset(p, None) == 4


def test_v2_fencing_abort_two_epochs_up_is_fencing():
    # On a transactions-v2 cluster the coordinator's fencing abort bumps twice: data at 1, ABORT at 3; the
    # new instance then writes at 4.
    data = (txn(0, 0) + marker(1, PID, 1, commit=True) + txn(2, 1) + marker(3, PID, 3, commit=False)
            + txn(4, 4) + marker(5, PID, 5, commit=True))
    p = producer(data)
    assert p.protocol == "v2" and p.fence_aborts == 1 and fencing_events(p) == 1
    assert [(b.offset, b.fence_abort) for b in fencing_bumps(p)] == [(3, True)]
    assert verdicts(p)[0] == (3, True, "FENCED: a new instance took the id over and the coordinator aborted "
                                       "the old one's transaction at offsets 2..2, two epochs up; the new "
                                       "instance wrote at epoch 4 from offset 4")
    assert jump_offset(p, None) == 3


def test_v2_abort_two_epochs_above_an_earlier_transaction_is_not_fencing():
    # The ABORT closes no transaction seen here (its data lies before the window): the gap proves nothing.
    data = txn(0, 0) + marker(1, PID, 1, commit=True) + txn(2, 1) + marker(3, PID, 2, commit=True)
    later = marker(4, PID, 4, commit=False)
    p = producer(data + later)
    assert [b.fence_abort for b in p.epoch_bumps] == [False] and fencing_events(p) == 0


# --- transactions v1 (and noida-db) -------------------------------------------------------------------

def test_kafka_v1_fencing_abort_then_new_instance_is_one_event():
    # A committed transaction at epoch 0 proves v1; the zombie's open transaction gets the coordinator's
    # ABORT at epoch 1, the new instance writes at epoch 2 (InitProducerId retried after the fence): one
    # event, one bump.
    data = (txn(0, 0) + marker(1, PID, 0, commit=True) + txn(2, 0, seq=1) + marker(3, PID, 1, commit=False)
            + txn(4, 2) + marker(5, PID, 2, commit=True))
    p = producer(data)
    assert p.protocol == "v1" and fencing_events(p) == 1
    assert p.epoch_bumps == [EpochBump(3, 0, 1, True, "ABORT", txn_first=2, txn_last=2, txn_first_ts=1000,
                                       marker_ts=2000, next_offset=4, next_epoch=2)]
    assert verdicts(p) == [(3, True, "FENCED: a new instance took the id over and the coordinator aborted "
                                     "the old one's transaction at offsets 2..2; the new instance wrote at "
                                     "epoch 2 from offset 4")]
    assert jump_offset(p, None) == 3


def test_noida_fencing_abort_at_the_new_epoch_is_one_event():
    # noida-db writes the ABORT and hands out the same new epoch: the next COMMIT at its data's epoch
    # proves v1.
    data = (txn(0, 0) + marker(1, PID, 1, commit=False) + txn(2, 1) + marker(3, PID, 1, commit=True))
    p = producer(data)
    assert p.protocol == "v1" and fencing_events(p) == 1
    assert verdicts(p) == [(1, True, "FENCED: a new instance took the id over and the coordinator aborted "
                                     "the old one's transaction at offsets 0..0")]


def test_v1_new_instances_without_open_transactions_count_each():
    data = (txn(0, 0) + marker(1, PID, 0, commit=True) + txn(2, 1) + marker(3, PID, 1, commit=False)
            + txn(4, 2) + marker(5, PID, 2, commit=True))
    p = producer(data)
    assert p.protocol == "v1" and fencing_events(p) == 2
    assert [b.offset for b in fencing_bumps(p)] == [2, 4]


def test_idempotent_producer_epoch_bump_is_never_fencing():
    data = (batch([0], 0, pid=PID, epoch=0, seq=0) + batch([0], 1, pid=PID, epoch=1, seq=0))
    p = producer(data)
    assert p.epoch_bumps == [EpochBump(1, 0, 1, False, transactional=False)]
    assert verdicts(p) == [(1, False, "idempotent producer bumped its own epoch (KIP-360)")]
    assert fencing_events(p) == 0


def test_both_protocols_prove_nothing():
    data = (txn(0, 0) + marker(1, PID, 0, commit=True) + txn(2, 1) + marker(3, PID, 2, commit=True))
    p = producer(data)
    assert p.protocol == "mixed" and fencing_events(p) == 0


# --- bounded history ------------------------------------------------------------------------------------

def test_epoch_history_is_bounded_and_keeps_the_telling_bumps():
    n = 3 * MAX_EVENTS
    parts, offset = [], 0
    for e in range(n):  # v1 would never do this; the bounds must hold whatever the log holds
        parts += [txn(offset, e), marker(offset + 1, PID, e + 1, commit=e % 2 == 0)]
        offset += 2
    parts += [txn(offset, n), marker(offset + 1, PID, n + 1, commit=True)]
    parts += [txn(offset + 2, n + 5)]  # a data bump after all the COMMIT and own ABORT bumps
    p = producer(b"".join(parts))
    assert p.epochs == list(range(n - MAX_EPOCHS + 3, n + 2)) + [n + 5]
    assert p.earlier_epochs == n + 3 - MAX_EPOCHS and p.current_epoch == n + 5
    # COMMIT bumps are only counted; own aborts listed until the data bump needs their room
    assert p.bumps_total == n + 2 and (p.commit_bumps, p.own_aborts) == (n // 2 + 1, n // 2)
    assert p.routine_epochs == (0, n + 1) and len(p.epoch_bumps) == MAX_EVENTS
    assert p.epoch_bumps[-1] == EpochBump(offset + 2, n + 1, n + 5, False)  # evicted an own ABORT to fit
    assert all(b.continued for b in p.epoch_bumps[:-1])  # the latest own aborts


def test_sequences_continue_within_the_kept_epochs():
    data = (batch([0, 1], 0, pid=PID, epoch=0, seq=0) + batch([0], 2, pid=PID, epoch=1, seq=0)
            + batch([0], 3, pid=PID, epoch=0, seq=2))  # epoch 0 continues at 2: a zombie, no gap
    p = producer(data)
    assert p.sequence_anomalies == [] and p.zombie_total == 1


# --- the marker's own epoch ------------------------------------------------------------------------------

def test_marker_epoch_is_the_marker_batch_epoch_in_every_window():
    data = txn(0, 0, records=2) + marker(2, PID, 1, commit=False) + txn(3, 1) + marker(4, PID, 1, True)
    for start, end in ((None, None), (0, 2), (2, 3), (1, 5)):
        log, _ = scan(data, Offsets(0, 5, 5), start=start, end=end)
        aborts = [(t.marker_offset, t.marker_epoch) for t in log.transactions if t.outcome == "ABORT"]
        assert aborts == [(2, 1)], (start, end)


# --- compaction -------------------------------------------------------------------------------------------

def test_sequence_gap_from_removed_batches_is_no_anomaly():
    data = (batch([0, 1], 0, pid=PID, epoch=0, seq=0)  # seq 0..1
            + batch([0], 5, pid=PID, epoch=0, seq=5)  # offsets 2..4 (seq 2..4) removed by the cleaner
            + batch([0], 6, pid=PID, epoch=0, seq=9))  # seq 6..8 missing, no offset missing: an anomaly
    log, _ = scan(data, Offsets(0, 7, 7))
    p = log.producers[PID]
    assert [(a.offset, a.expected, a.got, a.kind) for a in p.sequence_anomalies] == [(6, 6, 9, "gap")]
    assert p.anomaly_total == 1


def test_sequence_gap_longer_than_the_removed_offsets_is_an_anomaly():
    data = batch([0], 0, pid=PID, epoch=0, seq=0) + batch([0], 2, pid=PID, epoch=0, seq=4)
    log, _ = scan(data, Offsets(0, 3, 3))
    assert [(a.expected, a.got) for a in log.producers[PID].sequence_anomalies] == [(1, 4)]


def delete_horizon_batch(base: int, record_ts: int, horizon: int) -> bytes:
    """Two records rewritten by the cleaner: base timestamp = horizon, records as deltas from it."""
    b = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    b._first_timestamp, b._max_timestamp = horizon, -1  # MemoryRecordsBuilder: baseTimestamp = horizon
    for d in (0, 1):
        b.append(d, timestamp=record_ts + d, key=b"k", value=None, headers=[])
    raw = bytearray(b.build())
    struct.pack_into(">q", raw, 0, base)
    raw[22] |= 0x40
    struct.pack_into(">I", raw, 17, calc_crc32c(memoryview(raw)[21:]))
    return bytes(raw)


def test_delete_horizon_is_not_a_record_time():
    horizon, record_ts = 1_800_000_000_000, 1_700_000_000_000
    b = decode_batch(delete_horizon_batch(10, record_ts, horizon))
    assert (b.first_timestamp, b.max_timestamp, b.delete_horizon_ms) == (record_ts, record_ts + 1, horizon)
    assert b.offsets is None and (b.base_offset, b.last_offset) == (10, 11)
