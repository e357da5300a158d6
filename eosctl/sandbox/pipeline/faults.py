"""The fault modes: each plants one kind of defect whose extent the pipeline knows exactly.

duplicate-replay  the sink commits a run of rows, "crashes" before storing their offsets, replays them
skip              the sink stores offsets past a run, "crashes" before writing its rows: a gap
aborted-leak      the sink reads read_uncommitted: every aborted output record becomes a row
zombie            a second processor producer with the same transactional.id fences the first, which
                  then tries to write again
hanging           at the end a producer leaves a transaction open on the output topic: the LSO sticks
upstream-retry    a non-idempotent producer writes one order twice (an upstream retry): one business key
                  at two committed offsets
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from confluent_kafka import KafkaError, Message, Producer, TopicPartition

from eosctl.base.errors import BrokerError, EosctlError
from eosctl.cluster.consumed import placed
from eosctl.config.model import Cluster
from eosctl.sandbox.pipeline.broker import TIMEOUT, Broker, client_conf, key_text
from eosctl.sandbox.pipeline.modes import FAULTS
from eosctl.sandbox.pipeline.truth import COMMITTED, GroundTruth, Record
from eosctl.sandbox.pipeline.txn import MAX_TRANSACTION_TIMEOUT_MS, Fenced, GroupMetadata, TransactionalWriter

TARGET_SIZE = 3  # records per duplicate-replay / skip run
HANGING_RECORDS = 3


def validate(faults: Sequence[str]) -> tuple[str, ...]:
    unknown = [f for f in faults if f not in FAULTS]
    if unknown:
        raise EosctlError(f"unknown fault {unknown[0]!r}; valid faults: {', '.join(FAULTS)}")
    return tuple(f for f in FAULTS if f in faults)  # canonical order, no repeats


@dataclass(frozen=True)
class SinkTarget:
    """A run of committed output records the sink mishandles on purpose."""

    fault: str  # "duplicate-replay" | "skip"
    topic: str
    partition: int
    first_offset: int
    last_offset: int

    def covers(self, msg: Message) -> bool:
        _, partition, offset = placed(msg)
        return partition == self.partition and self.first_offset <= offset <= self.last_offset


def choose_sink_targets(truth: GroundTruth, topic: str, faults: Sequence[str], partitions: int,
                        avoid_keys: set[str]) -> list[SinkTarget]:
    """Runs inside one committed transaction (no marker, aborted record or other transaction inside),
    in different partitions where possible, away from records other faults plant, so that each
    defect's extent is unambiguous."""
    targets: list[SinkTarget] = []
    used: set[tuple[int, int]] = set()  # (partition, first offset) of the transaction slices taken
    for i, fault in enumerate(f for f in ("duplicate-replay", "skip") if f in faults):
        run = _pick_run(truth, topic, [(i + j) % partitions for j in range(partitions)], used, avoid_keys)
        if run is None:
            raise EosctlError(f"fault {fault}: no committed transaction left to plant it in; "
                              "use more --records")
        used.add((run[0].partition, run[0].offset))
        targets.append(SinkTarget(fault, topic, run[0].partition, run[0].offset, run[-1].offset))
    return targets


def _pick_run(truth: GroundTruth, topic: str, partitions: list[int], used: set[tuple[int, int]],
              avoid_keys: set[str]) -> list[Record] | None:
    # Prefer a run of several records; tiny runs (--records 10) settle for one.
    for min_size in (2, 1):
        for partition in partitions:
            slices = _committed_slices(truth, topic, partition)
            # The first transaction last: a defect mid-partition is the more telling case.
            for sl in slices[1:] + slices[:1]:
                planted = any(r.key in avoid_keys for r in sl)
                if len(sl) >= min_size and (partition, sl[0].offset) not in used and not planted:
                    return sl[:TARGET_SIZE]
    return None


def _committed_slices(truth: GroundTruth, topic: str, partition: int) -> list[list[Record]]:
    """Committed records of one partition, split wherever a marker or any other record intervenes."""
    markers = truth.markers_at(topic, partition)
    slices: list[list[Record]] = []
    prev: Record | None = None
    for r in (r for r in truth.of(topic) if r.partition == partition):
        if r.status != COMMITTED:
            prev = None
            continue
        contiguous = prev is not None and r.offset == prev.offset + 1 and prev.offset + 1 not in markers
        if contiguous:
            slices[-1].append(r)
        else:
            slices.append([r])
        prev = r
    return slices


def upstream_retry(cluster: Cluster, topic: str, order: dict, truth: GroundTruth) -> list[Record]:
    """A plain producer (no idempotence, no transaction) sends an order, "misses" the ack and sends it
    again: both copies are committed data at two offsets."""
    producer = Producer(client_conf(cluster, **{"enable.idempotence": False, "acks": "all"}))
    delivered: list[Record] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is None:
            delivered.append(Record(*placed(msg), key_text(msg), COMMITTED))

    value = json.dumps(order, separators=(",", ":")).encode()
    for _ in range(2):
        producer.produce(topic, key=order["order_id"].encode(), value=value, on_delivery=on_delivery)
        producer.flush(TIMEOUT)  # one at a time: the second send is the retry of the first
    if len(delivered) != 2:
        raise BrokerError(f"upstream-retry: only {len(delivered)} of 2 records were delivered to {topic}")
    truth.add(delivered)
    return delivered


def fence(zombie: TransactionalWriter, cluster: Cluster, broker: Broker, truth: GroundTruth,
          retry: Sequence[tuple[str, str, bytes, int]], offsets: Sequence[TopicPartition],
          group_metadata: GroupMetadata) -> tuple[TransactionalWriter, dict, list[dict]]:
    """A successor instance starts with the zombie's transactional.id while the zombie has a transaction
    open (records flushed). init_transactions bumps the epoch and aborts the open transaction; the zombie,
    unaware, then tries to finish its batch: ``retry`` records (topic, key, value, partition) and offsets.
    Returns the successor (which carries on processing), the fencing, and the zombie's writes that got
    through."""
    old_pid, old_epoch = zombie.producer_id, zombie.epoch
    successor = TransactionalWriter(cluster, zombie.transactional_id, broker, truth)
    zombie.fenced_by_successor()  # the coordinator wrote ABORT markers for the zombie's open transaction
    error = None
    try:
        for topic, key, value, partition in retry:
            zombie.produce(topic, key, value, partition=partition)
        through = zombie.commit(offsets, group_metadata)
    except Fenced as e:
        error = e.error_name
        # Whatever got through despite the fence stays in the log with no marker (noida-db and Kafka
        # reject it all, so this is normally empty).
        through = zombie.abandon()
    fencing = {"transactional_id": zombie.transactional_id, "producer_id": successor.producer_id,
               "old_producer_id": old_pid, "old_epoch": old_epoch, "new_epoch": successor.epoch,
               "zombie_error": error}
    writes = [{"topic": r.topic, "partition": r.partition, "offset": r.offset, "key": r.key,
               "status": r.status, "producer_id": r.producer_id} for r in through]
    return successor, fencing, writes


def hanging(cluster: Cluster, txid: str, topic: str, partition: int, broker: Broker,
            truth: GroundTruth) -> dict:
    """Begin a transaction, write a few records to one partition, flush, and walk away. noida-db never
    times transactions out; real Kafka aborts it after transaction.timeout.ms, so ask for the maximum."""
    writer = TransactionalWriter(cluster, txid, broker, truth,
                                 transaction_timeout_ms=MAX_TRANSACTION_TIMEOUT_MS)
    writer.begin()
    for i in range(HANGING_RECORDS):
        order_id = f"h-{i:06d}"
        order = {"order_id": order_id, "customer": "c-hanging", "amount": 1.0, "currency": "EUR", "seq": -1}
        writer.produce(topic, order_id, json.dumps(order).encode(), partition=partition)
    records = writer.leave_open()
    # Dropping the producer does not end the transaction: librdkafka sends no EndTxn on destroy.
    del writer
    return {"topic": topic, "partition": partition, "first_offset": records[0].offset,
            "last_offset": records[-1].offset, "transactional_id": txid,
            "producer_id": records[0].producer_id}
