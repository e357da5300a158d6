"""What Kafka holds for one partition: the shared model used by the CLI, the TUI and the auditors.

Everything here is plain data (no I/O) so it can be JSON-encoded for ``--format json``, snapshots and
shipping to Spark tasks. Offsets follow Kafka's convention: ``first``/``last`` are inclusive, while the
high watermark, LSO and ``scanned_to`` are exclusive ("next offset").
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

NO_PRODUCER = -1
TP = tuple[str, int]  # (topic, partition)


class Kind(StrEnum):
    DATA = "DATA"  # what a read_committed consumer delivers: committed or non-transactional records
    MARKER = "MARKER"  # transaction control batches (COMMIT / ABORT)
    ABORTED = "ABORTED"  # data of an aborted transaction
    OPEN = "OPEN"  # data of a transaction without a marker yet (at or after the LSO)
    HOLE = "HOLE"  # offsets that no longer exist (compaction)


EXCLUDED_KINDS = frozenset({Kind.MARKER, Kind.ABORTED, Kind.OPEN, Kind.HOLE})


@dataclass(frozen=True, slots=True)
class Batch:
    base_offset: int
    last_offset: int
    record_count: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    is_transactional: bool
    is_control: bool
    marker: str | None  # "COMMIT" / "ABORT" for control batches
    first_timestamp: int
    max_timestamp: int
    compression: str
    size_bytes: int
    # None when every offset base..last is present; otherwise the offsets compaction left behind.
    offsets: tuple[int, ...] | None = None
    # Set by the cleaner (KIP-534, attribute bit 0x40): the batch's base timestamp field then holds this
    # horizon, so ``first_timestamp`` is read from the first record instead.
    delete_horizon_ms: int | None = None
    # The topic stamps LogAppendTime (attribute bit 0x08): the timestamps are the broker's append time
    # (every record's is ``max_timestamp``); otherwise CreateTime, set by the producer's clock.
    log_append_time: bool = False
    # The partition leader epoch the batch was written under (the header's partitionLeaderEpoch): a newer
    # epoch at an offset a consumer already read means the log was rewritten there (an unclean election).
    leader_epoch: int = -1

    @property
    def contiguous(self) -> bool:
        return self.offsets is None

    def present_offsets(self) -> Iterable[int]:
        return range(self.base_offset, self.last_offset + 1) if self.offsets is None else self.offsets

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["offsets"] = None if self.offsets is None else list(self.offsets)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Batch:
        offsets = d.get("offsets")
        return cls(**{**d, "offsets": None if offsets is None else tuple(offsets)})


@dataclass(frozen=True, slots=True)
class OffsetRange:
    first: int
    last: int  # inclusive
    kind: Kind
    producer_id: int = NO_PRODUCER
    producer_epoch: int = -1

    @property
    def count(self) -> int:
        return self.last - self.first + 1

    def to_dict(self) -> dict[str, Any]:
        return {"first": self.first, "last": self.last, "kind": self.kind.value,
                "producer_id": self.producer_id, "producer_epoch": self.producer_epoch}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OffsetRange:
        return cls(d["first"], d["last"], Kind(d["kind"]), d.get("producer_id", NO_PRODUCER),
                   d.get("producer_epoch", -1))


def _mergeable(a: OffsetRange, b: OffsetRange, by_producer: bool = False) -> bool:
    if a.kind != b.kind or a.last + 1 != b.first:
        return False
    if by_producer:
        return (a.producer_id, a.producer_epoch) == (b.producer_id, b.producer_epoch)
    # Committed data from several producers reads the same to a consumer, so DATA (and HOLE, which has
    # no producer) stays compact; everything else keeps one producer per range so auditors can blame it.
    return a.kind in (Kind.DATA, Kind.HOLE) or (a.producer_id, a.producer_epoch) == (b.producer_id,
                                                                                      b.producer_epoch)


def merge_ranges(ranges: Iterable[OffsetRange], by_producer: bool = False) -> list[OffsetRange]:
    """Sort and merge adjacent ranges; input ranges must not overlap. ``by_producer``: only ranges of one
    producer id and epoch merge, whatever their kind (PartitionLog.writes)."""
    out: list[OffsetRange] = []
    for r in sorted(ranges, key=lambda r: r.first):
        if out and _mergeable(out[-1], r, by_producer):
            prev = out[-1]
            same = (prev.producer_id, prev.producer_epoch) == (r.producer_id, r.producer_epoch)
            out[-1] = OffsetRange(prev.first, r.last, r.kind,
                                  prev.producer_id if same else NO_PRODUCER,
                                  prev.producer_epoch if same else -1)
        else:
            out.append(r)
    return out


@dataclass(frozen=True, slots=True)
class Transaction:
    producer_id: int
    producer_epoch: int
    # Offsets of the transaction's data inside the scanned range. A transaction whose data all lies
    # before the scan start has data_records == 0 and first == last == marker_offset.
    first_offset: int
    last_offset: int
    outcome: str  # "COMMIT" | "ABORT" | "OPEN"
    marker_offset: int | None
    data_records: int
    # The marker batch's own epoch: the data's under transactions v1, one above under v2 (KIP-890), and
    # the new epoch for the coordinator's fencing abort. None while OPEN.
    marker_epoch: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Transaction:
        return cls(**d)


@dataclass(frozen=True, slots=True)
class EpochBump:
    """The producer id appeared at a higher epoch than any seen before in this partition.

    What that means depends on the transaction protocol (see ``eosctl.txn.fencing.bump_verdict``): under
    transactions v1 only InitProducerId (a new instance) and the coordinator's fencing abort raise the
    epoch; under transactions v2 (KIP-890) every COMMIT or ABORT does.
    """

    offset: int
    old_epoch: int
    new_epoch: int
    on_marker: bool
    marker: str | None = None  # COMMIT/ABORT when the bump arrived on a control batch
    transactional: bool = True  # False: an idempotent producer's own bump (KIP-360), never fencing
    after_abort: bool = False  # data right after this id's bump on an ABORT marker: the same take-over
    # An ABORT two or more epochs above the data it closes: only the coordinator's fencing abort does that
    # (prepareFenceProducerEpoch, then the transactions-v2 bump of prepareAbortOrCommit, with the cluster's
    # transaction version: TransactionCoordinator.handleInitProducerId / abortTimedOutTransactions).
    fence_abort: bool = False
    # For a bump on an ABORT marker: the transaction it closed in this partition (None: its data lies
    # before the scan, or it had none here), the time of its first record and of the marker (the
    # coordinator's clock), to tell the coordinator's timeout abort (TransactionCoordinator.
    # abortTimedOutTransactions) from the rest.
    txn_first: int | None = None
    txn_last: int | None = None
    txn_first_ts: int | None = None
    marker_ts: int | None = None
    # The id's next data after this ABORT, where it came at a higher epoch: a new instance (InitProducerId)
    # told with the ABORT as one event (Kafka: the coordinator's ABORT at E+1, the new instance at E+2).
    next_offset: int | None = None
    next_epoch: int | None = None
    continued: bool = False  # the id's next data came at this ABORT's epoch: its own v2 abort


@dataclass(frozen=True, slots=True)
class ZombieWrite:
    """A batch written at an epoch lower than one already seen for its producer id."""

    offset: int
    epoch: int
    current_epoch: int


@dataclass(frozen=True, slots=True)
class SequenceAnomaly:
    offset: int
    epoch: int
    expected: int
    got: int
    kind: str  # "gap" | "duplicate"


# Per-producer event lists are capped so one misbehaving producer cannot blow up a scan's memory;
# the *_total counters keep the true numbers.
MAX_EVENTS = 200
# Distinct epochs kept per producer id (the latest ones). Transactions v2 moves to a new epoch with every
# transaction, so the history must be bounded; ``earlier_epochs`` counts what was dropped.
MAX_EPOCHS = 20

V1, V2, MIXED, UNKNOWN = "v1", "v2", "mixed", "unknown"


@dataclass(slots=True)
class ProducerState:
    producer_id: int
    epochs: list[int] = field(default_factory=list)  # sorted, distinct, the latest MAX_EPOCHS
    earlier_epochs: int = 0  # distinct epochs dropped from the front of ``epochs``
    last_epoch: int = -1
    last_sequence: int = -1
    last_offset: int = -1
    last_timestamp: int = -1
    batches: int = 0
    records: int = 0
    open_txn_first_offset: int | None = None
    epoch_bumps: list[EpochBump] = field(default_factory=list)  # at most MAX_EVENTS, see bumps_total
    zombie_writes: list[ZombieWrite] = field(default_factory=list)
    sequence_anomalies: list[SequenceAnomaly] = field(default_factory=list)
    zombie_total: int = 0
    anomaly_total: int = 0
    bumps_total: int = 0
    # Which transaction protocol the markers show. A marker at the epoch of the data it closes is
    # transactions v1; a COMMIT above it is v2, where EndTxn bumps the epoch and the markers carry the new
    # one (KIP-890; TransactionMetadata.prepareAbortOrCommit, TransactionMarkerChannelManager). An ABORT
    # above its data's epoch proves neither: v1's fencing abort and every v2 abort look alike.
    v1_markers: int = 0
    v2_markers: int = 0
    # Take-overs as transactions v1 reads the bumps: each bump on an ABORT marker or on transactional data,
    # the data bump right after such an ABORT counting with it. Only trusted when ``protocol`` is v1.
    v1_takeovers: int = 0
    fence_aborts: int = 0  # ABORT markers with ``EpochBump.fence_abort``: fencing in every protocol
    # Routine transactions-v2 bumps, counted: COMMIT markers one epoch above their data (never listed in
    # ``epoch_bumps``), and ABORT markers the id went on writing at (its own abort; listed with
    # ``continued`` while there is room, since noida-db's fencing looks the same). ``routine_epochs``:
    # the epochs they moved across (first old, last new); ``routine_offset`` the first one's offset.
    commit_bumps: int = 0
    own_aborts: int = 0
    routine_epochs: tuple[int, int] | None = None
    routine_offset: int = -1
    # Who the id is, from the coordinator (ListTransactions + DescribeTransactions, KIP-664), for ids it
    # still knows: eosctl.txn.producerids.identify fills them in after a scan.
    transactional_id: str | None = None
    txn_timeout_ms: int | None = None
    # ABORT epochs (``EpochBump.new_epoch``) that this partition alone can't read, settled from the id's
    # other partitions (eosctl.txn.producerids.settle): a take-over, or the id's own abort.
    takeovers_settled: list[int] = field(default_factory=list)
    own_aborts_settled: list[int] = field(default_factory=list)

    @property
    def current_epoch(self) -> int:
        return self.epochs[-1] if self.epochs else -1

    @property
    def protocol(self) -> str:
        """v1 / v2 from this producer's markers; mixed or unknown when they show both or neither."""
        if self.v1_markers and self.v2_markers:
            return MIXED
        return V1 if self.v1_markers else V2 if self.v2_markers else UNKNOWN

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProducerState:
        d = dict(d)
        d["epoch_bumps"] = [EpochBump(**e) for e in d.get("epoch_bumps", [])]
        if d.get("routine_epochs") is not None:
            d["routine_epochs"] = tuple(d["routine_epochs"])
        d["zombie_writes"] = [ZombieWrite(**e) for e in d.get("zombie_writes", [])]
        d["sequence_anomalies"] = [SequenceAnomaly(**e) for e in d.get("sequence_anomalies", [])]
        return cls(**d)


@dataclass
class PartitionLog:
    topic: str
    partition: int
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int
    scanned_from: int
    scanned_to: int  # exclusive
    ranges: list[OffsetRange] = field(default_factory=list)
    transactions: list[Transaction] = field(default_factory=list)
    producers: dict[int, ProducerState] = field(default_factory=dict)
    batches: list[Batch] | None = None
    # Disagreements between what the log shows and what the broker reports (LSO, aborted list).
    warnings: list[str] = field(default_factory=list)
    # The broker's ListOffsets and Fetch answers disagreed on this partition's offsets
    # (eosctl.cluster.wire.Offsets):
    # the offsets above are the Fetch's, and no verdict may rest on them.
    offsets_disagreement: str | None = None
    # Who wrote the DATA offsets: ``ranges`` merge committed data of several producers (a consumer reads it
    # the same), these keep each producer id and epoch apart, so a finding over data can name its writers.
    # Sorted, disjoint, DATA only; adjacent runs of one producer session merged. Empty when not recorded.
    writes: list[OffsetRange] = field(default_factory=list)
    # The partition leader epochs of the batches read, in log order: (epoch, first offset written under
    # it). An epoch starting below offsets a consumer read under an older one is where the log was
    # truncated (eosctl.rules.content). Empty when not recorded.
    leader_epochs: list[tuple[int, int]] = field(default_factory=list)
    # The records' keys at their offsets (eosctl.cluster.recordkeys.RecordKeys), when the scan was asked to
    # read them (the content check); None otherwise.
    record_keys: Any = field(default=None, repr=False, compare=False)
    # bisect index over ``ranges``, rebuilt when ``ranges`` is replaced (treat the list as immutable)
    _index: tuple[int, int, list[int]] | None = field(default=None, init=False, repr=False, compare=False)
    _writes_index: tuple[int, int, list[int]] | None = field(default=None, init=False, repr=False,
                                                             compare=False)

    @property
    def committed_records(self) -> int:
        return sum(r.count for r in self.ranges if r.kind is Kind.DATA)

    def data_between(self, first: int, end: int) -> int:
        """Committed data offsets in [first, end) (``end`` exclusive); only the scanned part counts, and
        markers, aborted and open offsets never do: what a read_committed consumer would still read."""
        first, end = max(first, self.scanned_from), min(end, self.scanned_to)
        total = 0
        for r in self.ranges:
            if r.kind is Kind.DATA and r.last >= first and r.first < end:
                total += min(r.last + 1, end) - max(r.first, first)
        return total

    def count(self, kind: Kind) -> int:
        return sum(r.count for r in self.ranges if r.kind is kind)

    def excluded_ranges(self) -> list[OffsetRange]:
        """Offsets a read_committed consumer never delivers (markers, aborted, open, holes)."""
        return [r for r in self.ranges if r.kind in EXCLUDED_KINDS]

    def aborted_ranges(self) -> list[OffsetRange]:
        return [r for r in self.ranges if r.kind is Kind.ABORTED]

    def open_ranges(self) -> list[OffsetRange]:
        return [r for r in self.ranges if r.kind is Kind.OPEN]

    def range_at(self, offset: int) -> OffsetRange | None:
        if self._index is None or self._index[:2] != (id(self.ranges), len(self.ranges)):
            self._index = (id(self.ranges), len(self.ranges), [r.first for r in self.ranges])
        i = bisect_right(self._index[2], offset) - 1
        if i >= 0 and self.ranges[i].last >= offset:
            return self.ranges[i]
        return None

    def writes_between(self, first: int, last: int) -> list[OffsetRange]:
        """The ``writes`` overlapping first..last (inclusive), clipped to it."""
        if self._writes_index is None or self._writes_index[:2] != (id(self.writes), len(self.writes)):
            self._writes_index = (id(self.writes), len(self.writes), [w.first for w in self.writes])
        out = []
        for i in range(max(bisect_right(self._writes_index[2], first) - 1, 0), len(self.writes)):
            w = self.writes[i]
            if w.first > last:
                break
            if w.last >= first:
                out.append(OffsetRange(max(w.first, first), min(w.last, last), w.kind, w.producer_id,
                                       w.producer_epoch))
        return out

    def kind_at(self, offset: int) -> Kind | None:
        """Kind of one offset; None outside the scanned range."""
        r = self.range_at(offset)
        return None if r is None else r.kind

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "log_start_offset": self.log_start_offset,
            "high_watermark": self.high_watermark,
            "last_stable_offset": self.last_stable_offset,
            "scanned_from": self.scanned_from,
            "scanned_to": self.scanned_to,
            "committed_records": self.committed_records,
            "ranges": [r.to_dict() for r in self.ranges],
            "transactions": [t.to_dict() for t in self.transactions],
            # JSON object keys are strings; from_dict turns them back into ints.
            "producers": {str(pid): p.to_dict() for pid, p in self.producers.items()},
            "batches": None if self.batches is None else [b.to_dict() for b in self.batches],
            "warnings": list(self.warnings),
            "writes": [w.to_dict() for w in self.writes],
            "leader_epochs": [{"leader_epoch": e, "start_offset": o} for e, o in self.leader_epochs],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PartitionLog:
        batches = d.get("batches")
        return cls(
            topic=d["topic"],
            partition=d["partition"],
            log_start_offset=d["log_start_offset"],
            high_watermark=d["high_watermark"],
            last_stable_offset=d["last_stable_offset"],
            scanned_from=d["scanned_from"],
            scanned_to=d["scanned_to"],
            ranges=[OffsetRange.from_dict(r) for r in d.get("ranges", [])],
            transactions=[Transaction.from_dict(t) for t in d.get("transactions", [])],
            producers={int(pid): ProducerState.from_dict(p) for pid, p in d.get("producers", {}).items()},
            batches=None if batches is None else [Batch.from_dict(b) for b in batches],
            warnings=list(d.get("warnings", [])),
            writes=[OffsetRange.from_dict(w) for w in d.get("writes", [])],
            leader_epochs=[(int(e["leader_epoch"]), int(e["start_offset"]))
                           for e in d.get("leader_epochs", [])],
        )
