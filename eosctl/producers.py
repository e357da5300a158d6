"""Which producers write to a topic: DescribeProducers, or the log when the broker won't say.

DescribeProducers (KIP-664) returns the broker's producer state table per partition; kafka-python sends
one request per leader for all of that leader's partitions. Some brokers offer the API but return no
producers at all (noida-db), so when the whole answer is empty or the API is missing, the producers are
read from a log scan of the last ``scan_last`` offsets of each partition instead (eosctl.logscan,
ProducerState). The report says which source it used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka.admin import KafkaAdminClient

from eosctl.errors import EosctlError
from eosctl.logscan import scan_partitions
from eosctl.model import TP, PartitionLog
from eosctl.txns import ActiveProducer, Described, describe_producers
from eosctl.wire import WireClient

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

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch, "last_sequence": self.last_sequence,
                "last_timestamp_ms": self.last_timestamp_ms,
                "current_txn_start_offset": self.current_txn_start_offset,
                "coordinator_epoch": self.coordinator_epoch, "epochs": list(self.epochs),
                "earlier_epochs": self.earlier_epochs, "fencing_events": self.fencing_events,
                "zombie_writes": self.zombie_writes}


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


def from_log(log: PartitionLog) -> list[ProducerRow]:
    """Rows from a scanned PartitionLog's ProducerState table."""
    rows = []
    for pid, s in sorted(log.producers.items()):
        rows.append(ProducerRow(log.topic, log.partition, pid, s.current_epoch, s.last_sequence,
                                s.last_timestamp if s.last_timestamp >= 0 else None, s.open_txn_first_offset,
                                None, tuple(s.epochs), s.fencing_events,
                                s.zombie_total, s.earlier_epochs))
    return rows


@dataclass
class Found:
    """Producers of some partitions, and where they were read from (see ``find``)."""

    rows: list[ProducerRow]
    source: str  # DESCRIBE_PRODUCERS | LOG_SCAN
    note: str
    scanned: dict[TP, tuple[int, int]] = field(default_factory=dict)  # [from, to) per partition, LOG_SCAN


def find(client: WireClient, admin: KafkaAdminClient, tps: Sequence[TP], scan_last: int = DEFAULT_SCAN_LAST,
         logs: Mapping[TP, PartitionLog] | None = None, described: Described | None = None) -> Found:
    """Producers of the partitions: DescribeProducers (one call per leader), else the log.

    ``logs`` are scans the caller already has (PartitionLog per partition); only partitions missing from
    them are scanned, over their last ``scan_last`` offsets. ``described``: describe_producers' answer
    when the caller already has it.
    """
    tps = list(tps)
    answer, status = described or describe_producers(admin, tps)
    rows = [from_describe(tp, p) for tp in tps for p in answer.get(tp, [])]
    if rows:
        return Found(sorted(rows, key=lambda r: (r.topic, r.partition, r.producer_id)), DESCRIBE_PRODUCERS,
                     "from the brokers' producer state (DescribeProducers)")
    why = ("the broker does not support DescribeProducers" if status == "unsupported"
           else f"DescribeProducers failed ({status})" if status != "ok"
           else "DescribeProducers returned no producers")
    scans = dict(logs or {})
    todo = [tp for tp in tps if tp not in scans]
    if todo:
        offsets = client.offsets(todo)
        starts = {tp: max(offsets[tp].log_start, offsets[tp].high_watermark - scan_last) for tp in todo}
        scans.update(scan_partitions(client, todo, start=starts))
    rows = [r for tp in tps for r in from_log(scans[tp])]
    scanned = {tp: (scans[tp].scanned_from, scans[tp].scanned_to) for tp in tps}
    cut = [b - a for tp, (a, b) in scanned.items() if a > scans[tp].log_start_offset]
    span = f"last {max(cut)} offsets" if cut else "whole log"
    note = f"{why}; read from the log ({span} of each partition)"
    return Found(rows, LOG_SCAN, note, scanned)


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
