"""One simulated partition: its batches, log start, high watermark and LSO, and the test's builder API.

Offsets, the LSO and the aborted-transaction index follow Apache Kafka's log layer
(storage/.../UnifiedLog.java, ProducerStateManager.java, LogSegment.read): the LSO is the first offset of
the earliest transaction without a marker (the HW when there is none); an aborted transaction is indexed
as (producer id, first offset, marker offset).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from tests.kafkasim.records import NO_PRODUCER, SimBatch, build_batch


@dataclass
class ProducerRow:
    """A DescribeProducers row (ProducerStateManager's entry for one producer id)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int = 0
    current_txn_start_offset: int = -1


@dataclass
class SimPartition:
    topic: str
    partition: int
    leader: int = 0
    batches: list[SimBatch] = field(default_factory=list)
    log_start: int = 0
    next_offset: int = 0  # log end offset: the next offset appended goes here
    leader_epoch: int = 0
    # Explicit DescribeProducers rows; None: derived from the batches like the broker's producer state.
    producer_rows: list[ProducerRow] | None = None
    # message.timestamp.type=LogAppendTime: each appended batch is stamped with the broker's clock (the
    # ``append_time`` given to the builder, default now) instead of keeping the producer's timestamps.
    log_append_time: bool = False
    _sequences: dict[int, int] = field(default_factory=dict)

    # --- builder ----------------------------------------------------------------------------------

    def data(self, records: int = 1, *, producer_id: int = NO_PRODUCER, epoch: int = -1,
             sequence: int | None = None, **kw: object) -> SimBatch:
        """A non-transactional batch (idempotent when ``producer_id`` is given)."""
        return self._append(records, producer_id, epoch, sequence, transactional=False, **kw)

    def txn(self, producer_id: int, epoch: int = 0, records: int = 1, *, sequence: int | None = None,
            **kw: object) -> SimBatch:
        """A transactional data batch; its outcome is decided by this producer's next marker."""
        return self._append(records, producer_id, epoch, sequence, transactional=True, **kw)

    def commit(self, producer_id: int, epoch: int = 0, **kw: object) -> SimBatch:
        return self.marker("COMMIT", producer_id, epoch, **kw)

    def abort(self, producer_id: int, epoch: int = 0, **kw: object) -> SimBatch:
        return self.marker("ABORT", producer_id, epoch, **kw)

    def marker(self, kind: str, producer_id: int, epoch: int, coordinator_epoch: int = 0,
               timestamp: int = 1_700_000_000_000) -> SimBatch:
        """A control batch with one EndTransactionMarker record (what WriteTxnMarkers appends)."""
        batch = build_batch(self.next_offset, [self.next_offset], producer_id=producer_id,
                            producer_epoch=epoch, transactional=True, control=kind,
                            coordinator_epoch=coordinator_epoch, timestamp=timestamp,
                            log_append_time=self._append_time(None))
        return self._add(batch)

    def skip(self, offsets: int) -> None:
        """Compaction removed whole batches here: the next batch starts ``offsets`` later."""
        self.next_offset += offsets

    def compacted(self, present: list[int], last_offset: int, *, delete_horizon: bool = False,
                  timestamp: int = 1_700_000_000_000, producer_id: int = NO_PRODUCER, epoch: int = -1,
                  sequence: int = -1, record_timestamp: int | None = None) -> SimBatch:
        """A batch the cleaner rewrote: only ``present`` offsets survive, lastOffsetDelta still reaches
        ``last_offset`` (LogCleaner keeps the original batch's last offset); with ``delete_horizon`` the
        batch carries KIP-534's flag and ``timestamp`` is the delete horizon, not a record time (the records
        then keep ``record_timestamp`` + i, stored as deltas from the horizon)."""
        batch = build_batch(self.next_offset, present, last_offset=last_offset, producer_id=producer_id,
                            producer_epoch=epoch, base_sequence=sequence, delete_horizon=delete_horizon,
                            timestamp=timestamp, record_timestamp=record_timestamp)
        return self._add(batch)

    def compact(self, remove: set[int]) -> None:
        """The cleaner ran below the scanned point: records at ``remove`` are gone. Each batch keeps its
        last offset (LogCleaner keeps the original batch's last offset) unless all its records went, and
        the last batch stays whole ("retain the last batch"); markers are never removed here."""
        kept = []
        for i, b in enumerate(self.batches):
            present = [o for o in b.offsets if o not in remove]
            if b.control or i == len(self.batches) - 1 or present == list(b.offsets):
                kept.append(b)
            elif present:
                kept.append(build_batch(b.base_offset, present, last_offset=b.last_offset,
                                        producer_id=b.producer_id, producer_epoch=b.producer_epoch,
                                        base_sequence=b.base_sequence, transactional=b.transactional,
                                        timestamp=b.first_timestamp))
        self.batches = kept

    def delete_before(self, offset: int) -> None:
        """Retention / DeleteRecords moved the log start (UnifiedLog.maybeIncrementLogStartOffset)."""
        self.log_start = max(self.log_start, offset)
        self.batches = [b for b in self.batches if b.last_offset >= self.log_start]

    def _append(self, records: int, producer_id: int, epoch: int, sequence: int | None, *,
                transactional: bool, timestamp: int = 1_700_000_000_000, value_size: int = 8,
                append_time: int | None = None) -> SimBatch:
        if sequence is None and producer_id != NO_PRODUCER:
            sequence = self._sequences.get(producer_id, 0)
        seq = -1 if sequence is None else sequence
        if producer_id != NO_PRODUCER:
            self._sequences[producer_id] = seq + records
        first = self.next_offset
        batch = build_batch(first, list(range(first, first + records)), producer_id=producer_id,
                            producer_epoch=epoch, base_sequence=seq, transactional=transactional,
                            timestamp=timestamp, value_size=value_size,
                            log_append_time=self._append_time(append_time))
        return self._add(batch)

    def _append_time(self, given: int | None) -> int | None:
        if not self.log_append_time:
            return None
        return int(time.time() * 1000) if given is None else given

    def _add(self, batch: SimBatch) -> SimBatch:
        self.batches.append(batch)
        self.next_offset = batch.last_offset + 1
        return batch

    # --- what the broker reports ------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self.next_offset  # one replica: everything appended is replicated

    def open_transactions(self) -> dict[int, int]:
        """producer id -> first offset of its transaction without a marker yet."""
        open_: dict[int, int] = {}
        for b in self.batches:
            if b.control:
                open_.pop(b.producer_id, None)
            elif b.transactional:
                open_.setdefault(b.producer_id, b.base_offset)
        return open_

    @property
    def last_stable(self) -> int:
        return min(self.open_transactions().values(), default=self.high_watermark)

    def aborted_index(self) -> list[tuple[int, int, int]]:
        """(producer id, first offset, marker offset) of every aborted transaction (the .txnindex)."""
        out, first = [], {}
        for b in self.batches:
            if b.control:
                start = first.pop(b.producer_id, None)
                if b.control == "ABORT" and start is not None:
                    out.append((b.producer_id, start, b.base_offset))
            elif b.transactional:
                first.setdefault(b.producer_id, b.base_offset)
        return out

    def producers(self) -> list[ProducerRow]:
        if self.producer_rows is not None:
            return self.producer_rows
        rows: dict[int, ProducerRow] = {}
        open_ = self.open_transactions()
        for b in self.batches:
            if b.producer_id == NO_PRODUCER:
                continue
            row = rows.setdefault(b.producer_id, ProducerRow(b.producer_id, b.producer_epoch, -1, -1))
            row.producer_epoch = b.producer_epoch
            row.last_timestamp = b.max_timestamp  # ProducerStateEntry: the last batch's max timestamp
            if not b.control and b.base_sequence >= 0:
                row.last_sequence = b.base_sequence + b.last_offset - b.base_offset
        for pid, row in rows.items():
            row.current_txn_start_offset = open_.get(pid, -1)
        return list(rows.values())
