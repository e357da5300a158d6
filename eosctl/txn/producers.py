"""Which producers write to a topic: DescribeProducers, or the log when the broker won't say.

DescribeProducers (KIP-664) returns the broker's producer state table per partition; kafka-python sends
one request per leader for all of that leader's partitions. Some brokers offer the API but return no
producers at all (noida-db), so when the whole answer is empty or the API is missing, the producers are
read from a log scan of the last ``scan_last`` offsets of each partition instead (eosctl.cluster.logscan,
ProducerState). The report says which source it used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from eosctl.base.errors import EosctlError
from eosctl.cluster.logscan import scan_partitions
from eosctl.cluster.model import TP, PartitionLog
from eosctl.cluster.wire import WireClient
from eosctl.txn.fencing import fencing_events
from eosctl.txn.producerids import identify, settle
from eosctl.txn.rotation import all_rotations, rotations
from eosctl.txn.transactions import Described, describe_producers

if TYPE_CHECKING:
    from kafka.admin import KafkaAdminClient
    from kafka.admin import ProducerState as ActiveProducer

DEFAULT_SCAN_LAST = 100_000
DESCRIBE_PRODUCERS = "describe-producers"
LOG_SCAN = "log-scan"


@dataclass(frozen=True, slots=True)
class ProducerRow:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp_ms: int | None
    current_txn_start_offset: int | None
    coordinator_epoch: int | None = None  # only DescribeProducers knows it
    # Only the log scan knows these:
    epochs: tuple[int, ...] = ()
    fencing_events: int = 0
    zombie_writes: int = 0
    earlier_epochs: int = 0  # distinct epochs before ``epochs`` (the log keeps the latest 20)
    # The coordinator's name for the id (ListTransactions/DescribeTransactions), for ids it still knows.
    transactional_id: str | None = None
    protocol: str | None = None  # the transaction protocol its markers show (the log's), None: not read
    # False: the log shows the producer but DescribeProducers no longer does (its state expired:
    # producer.id.expiration.ms); None where DescribeProducers wasn't the source.
    in_broker_state: bool | None = None
    # The producer id this one continues: the coordinator moved its transactional id here when its epoch
    # ran out under transactions v2 (eosctl.txn.rotation): one producer session, not a new instance.
    continues_producer_id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch, "last_sequence": self.last_sequence,
                "last_timestamp_ms": self.last_timestamp_ms,
                "current_txn_start_offset": self.current_txn_start_offset,
                "coordinator_epoch": self.coordinator_epoch, "epochs": list(self.epochs),
                "earlier_epochs": self.earlier_epochs, "fencing_events": self.fencing_events,
                "zombie_writes": self.zombie_writes, "transactional_id": self.transactional_id,
                "protocol": self.protocol, "in_broker_state": self.in_broker_state,
                "continues_producer_id": self.continues_producer_id}


def epochs_text(epochs: Sequence[int], earlier: int = 0) -> str:
    """"0,1,2", or "(+40 earlier) 41,42" when the history was cut (transactions v2 bumps per transaction)."""
    text = ",".join(map(str, epochs))
    return f"(+{earlier} earlier) {text}" if earlier else text


@dataclass
class ProducersReport:
    topic: str
    partitions: list[int]
    source: str  # DESCRIBE_PRODUCERS | LOG_SCAN
    note: str
    producers: list[ProducerRow] = field(default_factory=list)
    scanned: dict[int, tuple[int, int]] = field(default_factory=dict)  # partition -> [from, to) for LOG_SCAN

    def to_dict(self) -> dict[str, Any]:
        scanned = sorted(self.scanned.items())
        return {"topic": self.topic, "partitions": self.partitions, "source": self.source, "note": self.note,
                "scanned": [{"partition": p, "from": a, "to": b} for p, (a, b) in scanned],
                "producers": [p.to_dict() for p in self.producers]}


def from_describe(tp: TP, p: ActiveProducer) -> ProducerRow:
    start = p.current_transaction_start_offset
    return ProducerRow(tp[0], tp[1], p.producer_id, p.producer_epoch, p.last_sequence,
                       p.last_timestamp if p.last_timestamp >= 0 else None, start if start >= 0 else None,
                       p.coordinator_epoch)


def from_log(log: PartitionLog, rotated: Mapping[int, int] | None = None) -> list[ProducerRow]:
    """Rows from a scanned PartitionLog's ProducerState table; ``rotated``: the producer-id rotations
    (new id: the id it continues) of all the partitions read, else this log's own."""
    rows = []
    rotated = rotations(log) if rotated is None else rotated
    for pid, s in sorted(log.producers.items()):
        rows.append(ProducerRow(log.topic, log.partition, pid, s.current_epoch, s.last_sequence,
                                s.last_timestamp if s.last_timestamp >= 0 else None, s.open_txn_first_offset,
                                None, tuple(s.epochs), fencing_events(s),
                                s.zombie_total, s.earlier_epochs, s.transactional_id, s.protocol,
                                continues_producer_id=rotated.get(pid)))
    return rows


def _merged(tp: TP, p: ActiveProducer, log: PartitionLog | None, rotated: Mapping[int, int]) -> ProducerRow:
    """DescribeProducers' row with what the log adds: epochs, fencing, zombie writes, the protocol."""
    row = from_describe(tp, p)
    s = log.producers.get(p.producer_id) if log is not None else None
    if s is None:
        return replace(row, in_broker_state=True)
    return replace(row, epochs=tuple(s.epochs), fencing_events=fencing_events(s),
                   zombie_writes=s.zombie_total, earlier_epochs=s.earlier_epochs,
                   transactional_id=s.transactional_id, protocol=s.protocol, in_broker_state=True,
                   continues_producer_id=rotated.get(p.producer_id))


@dataclass
class Found:
    """Producers of some partitions, and where they were read from (see ``find``)."""

    rows: list[ProducerRow]
    source: str  # DESCRIBE_PRODUCERS | LOG_SCAN
    note: str
    scanned: dict[TP, tuple[int, int]] = field(default_factory=dict)  # [from, to) per partition


def find(client: WireClient, admin: KafkaAdminClient, tps: Sequence[TP], scan_last: int = DEFAULT_SCAN_LAST,
         logs: Mapping[TP, PartitionLog] | None = None, described: Described | None = None) -> Found:
    """Producers of the partitions: DescribeProducers (one call per leader) with what the log adds.

    The log (the last ``scan_last`` offsets of each partition, or ``logs`` the caller already has) gives
    each producer's epochs, fencing and zombie writes, and the producers the broker no longer reports
    (their state expired: ``in_broker_state`` False); where DescribeProducers returns nobody or is missing
    (noida-db), the log alone. The ids' transactional ids come from the coordinators (KIP-664), and the
    id's other partitions settle what one partition's epochs can't (eosctl.txn.producerids).
    """
    tps = list(tps)
    answer, status = described or describe_producers(admin, tps)
    scans = dict(logs or {})
    todo = [tp for tp in tps if tp not in scans]
    if todo:
        offsets = client.offsets(todo)
        starts = {tp: max(offsets[tp].log_start, offsets[tp].high_watermark - scan_last) for tp in todo}
        scans.update(scan_partitions(client, todo, start=starts, offsets=offsets))
    mine = [scans[tp] for tp in tps]
    settle(mine)
    identify(client, mine)
    # A rotation seen in one partition holds for the id's others (a transactional id rotates once).
    rotated = all_rotations(mine)
    scanned = {tp: (scans[tp].scanned_from, scans[tp].scanned_to) for tp in tps}
    cut = [b - a for tp, (a, b) in scanned.items() if a > scans[tp].log_start_offset]
    span = f"last {max(cut)} offsets" if cut else "whole log"
    rows = [_merged(tp, p, scans.get(tp), rotated) for tp in tps for p in answer.get(tp, [])]
    if rows:
        listed = {(r.topic, r.partition, r.producer_id) for r in rows}
        gone = [replace(r, in_broker_state=False) for tp in tps for r in from_log(scans[tp], rotated)
                if (r.topic, r.partition, r.producer_id) not in listed]
        note = ("from the brokers' producer state (DescribeProducers), epochs and fencing from the log "
                f"({span} of each partition)")
        if gone:
            note += f"; {len(gone)} seen only in the log (the broker's producer state expired)"
        return Found(named(sorted(rows + gone, key=lambda r: (r.topic, r.partition, r.producer_id)), rotated),
                     DESCRIBE_PRODUCERS, note, scanned)
    why = ("the broker does not support DescribeProducers" if status == "unsupported"
           else f"DescribeProducers failed ({status})" if status != "ok"
           else "DescribeProducers returned no producers")
    rows = [r for tp in tps for r in from_log(scans[tp], rotated)]
    note = f"{why}; read from the log ({span} of each partition)"
    return Found(named(rows, rotated), LOG_SCAN, note, scanned)


def named(rows: list[ProducerRow], rotated: Mapping[int, int]) -> list[ProducerRow]:
    """The rows of a rotated-away producer id named by the transactional id of the id it moved to: the
    coordinator knows only the current one (DescribeTransactions), and it is one producer's session."""
    names = {old: r.transactional_id for r in rows
             if r.transactional_id and (old := r.continues_producer_id) is not None}
    return [replace(r, transactional_id=names[r.producer_id]) if r.transactional_id is None
            and r.producer_id in names else r for r in rows]


def describe(client: WireClient, admin: KafkaAdminClient, topic: str, partitions: Sequence[int] | None = None,
             scan_last: int = DEFAULT_SCAN_LAST) -> ProducersReport:
    """Producers of every partition of ``topic`` (or of ``partitions``), in one DescribeProducers call."""
    known = client.partitions(topic)
    parts = sorted(set(partitions)) if partitions else known
    for p in parts:
        if p not in known:
            raise EosctlError(f"topic {topic!r} has no partition {p} (it has {len(known)})")
    found = find(client, admin, [(topic, p) for p in parts], scan_last)
    return ProducersReport(topic, parts, found.source, found.note, found.rows,
                           {tp[1]: span for tp, span in found.scanned.items()})
