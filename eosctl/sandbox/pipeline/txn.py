"""A transactional producer that records where its records and markers landed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer, TopicPartition

from eosctl.base.errors import BrokerError
from eosctl.cluster.consumed import placed
from eosctl.cluster.model import TP
from eosctl.config.model import Cluster
from eosctl.sandbox.pipeline.broker import TIMEOUT, Broker, client_conf, kafka_error, key_text
from eosctl.sandbox.pipeline.truth import ABORTED, COMMITTED, OPEN, GroundTruth, Marker, Record

# What Consumer.consumer_group_metadata() returns: an opaque object, untyped in confluent-kafka.
GroupMetadata = Any

# Kafka's default transaction.max.timeout.ms: the longest a transaction may stay open on a real broker.
MAX_TRANSACTION_TIMEOUT_MS = 900_000


# Where each output record names its input: eosctl's default lineage headers (`lineage = "headers"`).
SOURCE_HEADERS = ("eos.source.topic", "eos.source.partition", "eos.source.offset")


def lineage_headers(topic: str, partition: int, offset: int) -> list[tuple[str, bytes]]:
    return list(zip(SOURCE_HEADERS, (topic.encode(), str(partition).encode(), str(offset).encode()),
                    strict=True))


class Fenced(Exception):
    """A newer producer with the same transactional.id took over; this one may never write again."""

    def __init__(self, error_name: str, message: str):
        super().__init__(message)
        self.error_name = error_name


class TransactionalWriter:
    """One producer session (transactional.id + epoch). Use: begin, produce..., flush, commit or abort."""

    def __init__(self, cluster: Cluster, transactional_id: str, broker: Broker, truth: GroundTruth,
                 transaction_timeout_ms: int | None = None):
        extra: dict[str, Any] = {"transactional.id": transactional_id, "enable.idempotence": True,
                                 "acks": "all", "linger.ms": 2}
        if transaction_timeout_ms is not None:
            extra["transaction.timeout.ms"] = transaction_timeout_ms
        self.transactional_id = transactional_id
        self.broker, self.truth = broker, truth
        self.producer = Producer(client_conf(cluster, **extra))
        # Registers the id with the coordinator: fences any older session and aborts its open transaction.
        self.producer.init_transactions(TIMEOUT)
        self.producer_id, self.epoch = broker.producer_identity(transactional_id)
        self._pending: list[Record] = []  # records of the open transaction, in delivery order
        self._errors: list[str] = []

    def begin(self) -> None:
        self._pending, self._errors = [], []
        self.producer.begin_transaction()

    def produce(self, topic: str, key: str, value: bytes, partition: int | None = None,
                source: tuple[str, int, int] | None = None) -> None:
        """``source``: the input record this one is derived from; it travels in lineage headers."""
        def delivered(err: KafkaError | None, msg: Message) -> None:
            self._delivered(err, msg, source)

        kwargs: dict[str, Any] = {"key": key.encode(), "value": value, "on_delivery": delivered}
        if partition is not None:
            kwargs["partition"] = partition
        if source is not None:
            kwargs["headers"] = lineage_headers(*source)
        self.producer.produce(topic, **kwargs)

    def _delivered(self, err: KafkaError | None, msg: Message, source: tuple[str, int, int] | None) -> None:
        if err is not None:
            self._errors.append(str(err))
            return
        self._pending.append(Record(*placed(msg), key_text(msg), OPEN,
                                    self.producer_id, self.transactional_id, source))

    def flush(self) -> list[Record]:
        """Wait for every record of the transaction to be in the log (still uncommitted)."""
        try:
            left = self.producer.flush(TIMEOUT)
        except Exception as e:
            raise self._translate(e) from e
        if left or self._errors:
            raise BrokerError(f"{self.transactional_id}: {left} records undelivered after {TIMEOUT:.0f}s "
                              f"({'; '.join(self._errors[:3]) or 'timeout'})")
        return list(self._pending)

    def commit(self, offsets: Sequence[TopicPartition] = (),
               group_metadata: GroupMetadata = None) -> list[Record]:
        """Commit the records and, in the same transaction, the consumer offsets that produced them."""
        self.flush()
        try:
            if offsets:
                self.producer.send_offsets_to_transaction(list(offsets), group_metadata, TIMEOUT)
            self.producer.commit_transaction(TIMEOUT)
        except Exception as e:
            raise self._translate(e) from e
        return self._settle(COMMITTED, "COMMIT")

    def abort(self) -> list[Record]:
        self.flush()
        self.producer.abort_transaction(TIMEOUT)
        return self._settle(ABORTED, "ABORT")

    def fenced_by_successor(self) -> None:
        """A successor's init_transactions aborted our open transaction: the coordinator wrote the markers."""
        self._settle(ABORTED, "ABORT")

    def leave_open(self) -> list[Record]:
        """Walk away from the open transaction without commit or abort (a crashed producer)."""
        self.flush()
        return self.abandon()

    def abandon(self) -> list[Record]:
        """Record what was delivered so far as open (no marker will follow) and forget it."""
        records, self._pending = self._pending, []
        self.truth.add(records)
        return records

    def _settle(self, status: str, marker: str) -> list[Record]:
        last: dict[TP, int] = {}
        for r in self._pending:
            r.status = status
            last[r.topic, r.partition] = max(r.offset, last.get((r.topic, r.partition), -1))
        self.truth.add(self._pending)
        # Each partition the transaction wrote to gets one marker; with no concurrent writer it is the
        # first offset after the transaction's last record there.
        for (topic, partition), offset in sorted(last.items()):
            hw = self.broker.wait_high_watermark(topic, partition, offset + 2)
            self.truth.markers.append(Marker(topic, partition, hw - 1, marker, self.producer_id))
        records, self._pending = self._pending, []
        return records

    def _translate(self, e: Exception) -> Exception:
        err = kafka_error(e) or self._fatal_error()
        if err is not None and err.code() in _FENCED_CODES:
            return Fenced(err.name(), err.str())
        return e

    def _fatal_error(self) -> KafkaError | None:
        """confluent-kafka 2.16 now and then loses the fatal error raised while it runs a delivery
        callback (flush() fails with a SystemError and no cause; seen in the zombie fault); the producer
        still knows it and any transactional call reports it. The run fails on a non-fatal error anyway,
        so aborting a transaction that wasn't fatally broken costs nothing."""
        try:
            self.producer.abort_transaction(1)
        except KafkaException as e:
            err = e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None
            return err if err is not None and err.fatal() else None
        except Exception:  # e.g. the same SystemError again: nothing more to learn
            return None
        return None


def _fenced_codes() -> frozenset[int]:
    names = ("_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")
    return frozenset(getattr(KafkaError, n) for n in names if hasattr(KafkaError, n))


_FENCED_CODES = _fenced_codes()
