"""Scan a partition remotely and classify every offset the way a read_committed consumer sees it.

The authoritative path is Kafka's own: a read_uncommitted fetch returns every batch including aborted
ones and the COMMIT/ABORT markers, and a producer's transactional data takes the outcome of that
producer's next marker. (noida-db drops aborted batches from read_committed fetches, real Kafka does
not, so read_committed fetches are never used to classify.)

Memory stays bounded by one fetch response plus the compact result: ranges are merged as they are
produced, and only transactions still waiting for their marker keep per-batch spans.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import kafka.errors as Errors

from eosctl.batches import iter_batches
from eosctl.errors import BrokerError
from eosctl.model import (
    MAX_EVENTS,
    NO_PRODUCER,
    Batch,
    EpochBump,
    Kind,
    OffsetRange,
    PartitionLog,
    ProducerState,
    SequenceAnomaly,
    Transaction,
    ZombieWrite,
    merge_ranges,
)
from eosctl.progress import Progress, Step
from eosctl.wire import DEFAULT_MAX_BYTES, TP, Offsets, WireClient

Bound = int | Mapping[TP, int] | None
# Largest per-partition fetch size we grow to when a single batch does not fit in max_bytes.
MAX_FETCH_BYTES = 64 << 20
_RETRIABLE = {
    Errors.NotLeaderForPartitionError.errno, Errors.LeaderNotAvailableError.errno,
    Errors.UnknownTopicOrPartitionError.errno, Errors.FencedLeaderEpochError.errno,
    Errors.UnknownLeaderEpochError.errno, Errors.KafkaStorageError.errno,
}
_OUT_OF_RANGE = Errors.OffsetOutOfRangeError.errno
INT32_MAX = 2**31 - 1


@dataclass
class _OpenTxn:
    epoch: int
    first: int
    last: int
    records: int = 0
    # Offset runs (first, last, epoch) waiting for the marker that decides DATA or ABORTED.
    spans: list[list[int]] = field(default_factory=list)


class _Classifier:
    """Streaming state of one partition scan: feed batches in log order, then finish()."""

    def __init__(self, topic: str, partition: int, start: int, end: int, offsets: Offsets,
                 keep_batches: bool) -> None:
        self.topic, self.partition = topic, partition
        self.start, self.end, self.offsets = start, end, offsets
        self.next = start  # first offset not yet classified
        self.position = start  # next offset to fetch; runs past ``end`` while looking for markers
        self.pieces: list[OffsetRange] = []
        self._compact_at = 1024
        self.open: dict[int, _OpenTxn] = {}
        self.transactions: list[Transaction] = []
        self.producers: dict[int, ProducerState] = {}
        # Per producer and epoch, the last sequence seen: sequences restart at each epoch.
        self.sequences: dict[tuple[int, int], int] = {}
        self.batches: list[Batch] | None = [] if keep_batches else None
        self.broker_aborted: set[tuple[int, int]] = set()
        self.warnings: list[str] = []

    @property
    def done(self) -> bool:
        return self.next >= self.end

    @property
    def settled(self) -> bool:
        """Past the range, and every transaction begun in it has its marker. The LSO can't settle one
        early: it is the first offset of the *earliest* open transaction, and a later transaction of
        another producer may well be committed; only reaching the high watermark makes it OPEN."""
        return self.done and not self.open

    # --- feeding ----------------------------------------------------------------------------------

    def add(self, batch: Batch) -> None:
        self.position = max(self.position, batch.last_offset + 1)
        if batch.last_offset < self.next:
            return  # a fetch from inside a batch returns the whole batch again
        if batch.base_offset >= self.end:
            if self.next < self.end:  # batches up to end were removed by compaction
                self._piece(self.next, self.end - 1, Kind.HOLE)
                self.next = self.end
            self._seek_marker(batch)
            return
        if self.batches is not None:
            self.batches.append(batch)
        present = [o for o in batch.present_offsets() if self.next <= o < self.end]
        upto = min(batch.last_offset + 1, self.end)
        holes_from = self.next
        for run_first, run_last in _runs(present):
            if run_first > holes_from:
                self._piece(holes_from, run_first - 1, Kind.HOLE)
            self._classify(batch, run_first, run_last)
            holes_from = run_last + 1
        if upto > holes_from:
            self._piece(holes_from, upto - 1, Kind.HOLE)
        self.next = max(self.next, upto)
        if batch.producer_id != NO_PRODUCER:
            self._track_producer(batch)
        if batch.is_control and batch.base_offset >= self.start and batch.marker in ("COMMIT", "ABORT"):
            self._close_txn(batch)

    def _classify(self, batch: Batch, first: int, last: int) -> None:
        pid, epoch = batch.producer_id, batch.producer_epoch
        if batch.is_control:
            self._piece(first, last, Kind.MARKER, pid, epoch)
        elif not batch.is_transactional:
            self._piece(first, last, Kind.DATA, pid, epoch)
        else:
            txn = self.open.get(pid)
            if txn is None:
                txn = self.open[pid] = _OpenTxn(epoch, first, last)
            elif epoch != txn.epoch and txn.spans and txn.spans[-1][2] != epoch:
                # Kafka ends a fenced transaction with an ABORT marker; without one, the next marker
                # of this producer id decides both epochs' data, exactly as a consumer would.
                self.warnings.append(f"producer {pid} wrote at epoch {epoch} (offset {first}) while its "
                                     f"epoch-{txn.spans[-1][2]} transaction from offset {txn.first} "
                                     "had no marker")
            txn.last = last
            txn.records += last - first + 1
            if txn.spans and txn.spans[-1][1] + 1 == first and txn.spans[-1][2] == epoch:
                txn.spans[-1][1] = last
            else:
                txn.spans.append([first, last, epoch])

    def _close_txn(self, marker: Batch) -> None:
        pid = marker.producer_id
        txn = self.open.pop(pid, None)
        outcome = marker.marker or "ABORT"
        kind = Kind.DATA if outcome == "COMMIT" else Kind.ABORTED
        if txn is None:
            self.transactions.append(Transaction(pid, marker.producer_epoch, marker.base_offset,
                                                 marker.base_offset, outcome, marker.base_offset, 0))
            return
        for first, last, epoch in txn.spans:
            self._piece(first, last, kind, pid, epoch)
        self.transactions.append(Transaction(pid, txn.epoch, txn.first, txn.last, outcome,
                                             marker.base_offset, txn.records))
        state = self.producers.get(pid)
        if state is not None:
            state.open_txn_first_offset = None

    def _seek_marker(self, batch: Batch) -> None:
        """Past ``end``: only the markers of transactions that started inside the range matter."""
        if batch.is_control and batch.marker in ("COMMIT", "ABORT") and batch.producer_id in self.open:
            self._close_txn(batch)

    def _piece(self, first: int, last: int, kind: Kind, pid: int = NO_PRODUCER, epoch: int = -1) -> None:
        self.pieces.append(OffsetRange(first, last, kind, pid, epoch))
        if len(self.pieces) >= self._compact_at:
            self.pieces = merge_ranges(self.pieces)
            self._compact_at = max(1024, 2 * len(self.pieces))

    # --- producers --------------------------------------------------------------------------------

    def _track_producer(self, b: Batch) -> None:
        pid, epoch = b.producer_id, b.producer_epoch
        p = self.producers.get(pid)
        if p is None:
            p = self.producers[pid] = ProducerState(pid)
        current = p.current_epoch
        if epoch not in p.epochs:
            p.epochs.append(epoch)
            p.epochs.sort()
        if current != -1 and epoch > current:
            p.epoch_bumps.append(EpochBump(b.base_offset, current, epoch, b.is_control, b.marker))
        elif current != -1 and epoch < current:
            p.zombie_total += 1
            if len(p.zombie_writes) < MAX_EVENTS:
                p.zombie_writes.append(ZombieWrite(b.base_offset, epoch, current))
        p.last_epoch = epoch
        p.batches += 1
        p.last_offset = b.last_offset
        p.last_timestamp = max(p.last_timestamp, b.max_timestamp)
        if b.is_control:
            return
        p.records += b.record_count
        if b.is_transactional and p.open_txn_first_offset is None:
            p.open_txn_first_offset = max(b.base_offset, self.start)
        if b.base_sequence < 0:
            return
        previous = self.sequences.get((pid, epoch))
        if previous is not None:
            expected = 0 if previous == INT32_MAX else previous + 1
            if b.base_sequence != expected:
                kind = "duplicate" if _seq_before(b.base_sequence, expected) else "gap"
                p.anomaly_total += 1
                if len(p.sequence_anomalies) < MAX_EVENTS:
                    p.sequence_anomalies.append(SequenceAnomaly(b.base_offset, epoch, expected,
                                                                b.base_sequence, kind))
        self.sequences[(pid, epoch)] = b.last_sequence
        p.last_sequence = b.last_sequence

    # --- result -----------------------------------------------------------------------------------

    def skip_to(self, offset: int, why: str) -> None:
        """Offsets vanished under the scan (retention moved the log start): they are holes now."""
        upto = min(offset, self.end)
        if upto > self.next:
            self._piece(self.next, upto - 1, Kind.HOLE)
            self.warnings.append(f"offsets {self.next}..{upto - 1} disappeared during the scan ({why})")
            self.next = upto
        self.position = max(self.position, offset)

    def finish(self) -> PartitionLog:
        if self.next < self.end:  # the log ended early: compaction removed the tail batches
            self._piece(self.next, self.end - 1, Kind.HOLE)
        for pid, txn in self.open.items():
            for first, last, epoch in txn.spans:
                self._piece(first, last, Kind.OPEN, pid, epoch)
            self.transactions.append(Transaction(pid, txn.epoch, txn.first, txn.last, "OPEN", None,
                                                 txn.records))
            if pid in self.producers:
                self.producers[pid].open_txn_first_offset = txn.first
        self.transactions.sort(key=lambda t: (t.first_offset, t.producer_id))
        log = PartitionLog(
            topic=self.topic, partition=self.partition, log_start_offset=self.offsets.log_start,
            high_watermark=self.offsets.high_watermark, last_stable_offset=self.offsets.last_stable,
            scanned_from=self.start, scanned_to=self.end, ranges=merge_ranges(self.pieces),
            transactions=self.transactions, producers=self.producers, batches=self.batches,
            warnings=self.warnings,
        )
        self._cross_check(log)
        return log

    def _cross_check(self, log: PartitionLog) -> None:
        hw, lso = log.high_watermark, log.last_stable_offset
        if log.scanned_to == hw and self.start <= lso:
            open_firsts = [t.first_offset for t in log.transactions if t.outcome == "OPEN"]
            expected = min(open_firsts, default=hw)
            if expected != lso:
                log.warnings.append(
                    f"broker LSO is {lso} but the log says {expected} (first offset of an open transaction, "
                    "or the high watermark); a transaction may have ended while the scan ran")
        aborted = {(t.producer_id, t.first_offset) for t in log.transactions if t.outcome == "ABORT"}
        for pid, first in sorted(self.broker_aborted):
            if self.start <= first < self.end and (pid, first) not in aborted:
                log.warnings.append(f"broker lists an aborted transaction of producer {pid} at {first}, "
                                    "but the markers in the log do not abort one there")


def _runs(offsets: list[int]) -> Iterable[tuple[int, int]]:
    """Consecutive runs of sorted offsets as (first, last) pairs."""
    if not offsets:
        return
    first = prev = offsets[0]
    for o in offsets[1:]:
        if o != prev + 1:
            yield first, prev
            first = o
        prev = o
    yield first, prev


def _seq_before(a: int, b: int) -> bool:
    """Is sequence a before b, allowing for the wrap at INT32_MAX?"""
    return 0 < (b - a) % (INT32_MAX + 1) < (INT32_MAX + 1) // 2


def scan_partition(client: WireClient, topic: str, partition: int, start: int | None = None,
                   end: int | None = None, keep_batches: bool = False, progress: Progress | None = None,
                   max_bytes: int = DEFAULT_MAX_BYTES) -> PartitionLog:
    """Classify offsets [max(start, log start), min(end, HW)) of one partition; ``end`` is exclusive."""
    return scan_partitions(client, [(topic, partition)], start, end, keep_batches, progress,
                           max_bytes)[(topic, partition)]


def scan_partitions(client: WireClient, tps: Iterable[TP], start: Bound = None, end: Bound = None,
                    keep_batches: bool = False, progress: Progress | None = None,
                    max_bytes: int = DEFAULT_MAX_BYTES) -> dict[TP, PartitionLog]:
    """Scan many partitions together: each round is one Fetch per leader covering all of them.

    ``start``/``end`` may be one offset for all partitions or a per-partition mapping (lag scans each
    partition's own [committed, LSO) window in the same fetches).
    """
    tps = list(dict.fromkeys(tps))
    snapshot = client.offsets(tps)
    scans: dict[TP, _Classifier] = {}
    for tp in tps:
        o = snapshot[tp]
        first, stop = _bound(start, tp), _bound(end, tp)
        lo = o.log_start if first is None else max(first, o.log_start)
        hi = o.high_watermark if stop is None else min(stop, o.high_watermark)
        scans[tp] = _Classifier(tp[0], tp[1], lo, max(lo, hi), o, keep_batches)
    total = sum(s.end - s.start for s in scans.values())
    sizes = {tp: max_bytes for tp in tps}
    retries = 0
    while True:
        # After the range, keep reading (markers only) until every transaction that started in it is
        # decided, but never past the high watermark of the snapshot.
        active = {tp: s.position for tp, s in scans.items()
                  if not s.settled and s.position < s.offsets.high_watermark}
        if not active:
            break
        results = client.fetch_many(active, max(sizes[tp] for tp in active))
        retry = False
        for tp, r in results.items():
            s = scans[tp]
            if r.error_code in _RETRIABLE:
                retry = True
                continue
            if r.error_code == _OUT_OF_RANGE and r.log_start_offset > s.next:
                s.skip_to(r.log_start_offset, f"log start moved to {r.log_start_offset}")
                continue
            if r.error_code:
                raise BrokerError(f"fetching {tp[0]}-{tp[1]} at offset {s.position} failed: {r.error}")
            if not r.records and len(results) > 1:
                # Kafka may leave partitions empty once the response's max_bytes is used up by others;
                # ask again alone before concluding the log has nothing more below the high watermark.
                r = client.fetch_raw(tp[0], tp[1], s.position, sizes[tp])
            s.broker_aborted.update(r.aborted)
            _feed(s, r.records, sizes, tp)
        if retry:
            retries += 1
            if retries > 5:
                raise BrokerError(f"partitions of {', '.join(sorted({t for t, _ in active}))} keep "
                                  "moving leaders; retry the scan later")
            client.forget_leaders()
            time.sleep(0.2 * retries)
        if progress is not None:
            done = sum(min(s.next, s.end) - s.start for s in scans.values())
            progress(Step("scanning the log", done, total))
    return {tp: s.finish() for tp, s in scans.items()}


def _bound(bound: Bound, tp: TP) -> int | None:
    return bound.get(tp) if isinstance(bound, Mapping) else bound


def _feed(s: _Classifier, records: bytes, sizes: dict[TP, int], tp: TP) -> None:
    decoded = False
    for batch in iter_batches(records):
        decoded = True
        s.add(batch)
        if s.settled or s.position >= s.offsets.high_watermark:
            break  # brokers that ignore max_bytes (noida-db) may send far more than the range needs
    if decoded:
        return
    if records:  # the first batch alone is larger than the fetch size: ask for more next time
        if sizes[tp] >= MAX_FETCH_BYTES:
            raise BrokerError(f"a batch of {tp[0]}-{tp[1]} at offset {s.position} is larger than "
                              f"{MAX_FETCH_BYTES} bytes")
        sizes[tp] *= 2
    else:  # no batches below the high watermark: compaction removed the tail
        s.skip_to(s.offsets.high_watermark, "no batches below the high watermark")
