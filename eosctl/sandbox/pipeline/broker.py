"""Kafka client plumbing shared by the stages: quiet client configs and broker-state queries.

Everything the manifest says about offsets comes from here or from delivery reports, never from reading
the log back: the log is what the audits under test read, so it can't also be the ground truth.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from eosctl.base.errors import BrokerError
from eosctl.cluster import clients
from eosctl.cluster.clients import kafka_admin
from eosctl.config.model import Cluster

if TYPE_CHECKING:
    from kafka.admin import KafkaAdminClient

# Seconds to wait for one broker round trip (metadata, watermarks, commits).
TIMEOUT = 10.0


def key_text(m: Message) -> str:
    """The record's key: the pipeline writes every record with an order id as its key."""
    key = m.key()
    assert isinstance(key, bytes), key
    return key.decode()


def payload(m: Message) -> bytes:
    """The record's value: the pipeline writes no tombstones."""
    value = m.value()
    assert isinstance(value, bytes), value
    return value


def quiet_logger() -> logging.Logger:
    """librdkafka logs fatal errors (e.g. the fenced zombie, which we provoke on purpose) to stderr;
    the stages turn errors into exceptions, so its log lines are only noise on the terminal."""
    return clients.quiet_logger("eosctl.sandbox.pipeline.librdkafka")


def client_conf(cluster: Cluster, **extra: Any) -> dict[str, Any]:
    conf: dict[str, Any] = {**cluster.confluent(), "logger": quiet_logger()}
    conf.update(extra)
    return conf


def kafka_error(exc: BaseException) -> KafkaError | None:
    """The KafkaError behind an exception. confluent-kafka reports a fatal error raised while it runs a
    delivery callback as a SystemError whose cause is the KafkaException, so look one level down too."""
    for e in (exc, exc.__cause__, exc.__context__):
        if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError):
            return e.args[0]
    return None


class Broker:
    """Watermarks and transaction state, asked of the broker while nothing else writes."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self._consumers: dict[str, Consumer] = {}
        self._admin: KafkaAdminClient | None = None
        self._admin_failed = False

    def high_watermark(self, topic: str, partition: int) -> int:
        return self._end(topic, partition, "read_uncommitted")

    def stable_offset(self, topic: str, partition: int) -> int:
        """The LSO: librdkafka's ListOffsets uses the consumer's isolation level."""
        return self._end(topic, partition, "read_committed")

    def _end(self, topic: str, partition: int, isolation: str) -> int:
        # Created on first use, i.e. after the run recreated its topics: librdkafka caches topic metadata,
        # and a consumer that knew the old topic answers "Unknown partition" when the partition count changed.
        if isolation not in self._consumers:
            # Never subscribes, so the group is never joined; librdkafka only insists that one is set.
            self._consumers[isolation] = Consumer(client_conf(self.cluster, **{
                "group.id": "eosctl.sandbox.pipeline.watermarks", "isolation.level": isolation}))
        tp = TopicPartition(topic, partition)
        for attempt in range(5):
            try:
                return self._consumers[isolation].get_watermark_offsets(tp, TIMEOUT, False)[1]
            except KafkaException as e:
                # A topic created a moment ago can still be unknown to this client's metadata.
                if attempt == 4 or e.args[0].code() != KafkaError._UNKNOWN_PARTITION:
                    raise
                time.sleep(0.1 * 2**attempt)
        raise AssertionError("unreachable")

    def wait_high_watermark(self, topic: str, partition: int, at_least: int, timeout: float = TIMEOUT) -> int:
        """Kafka writes transaction markers asynchronously after EndTxn returns; wait until the marker
        after offset ``at_least - 1`` is in the log (noida-db writes it before answering)."""
        deadline = time.monotonic() + timeout
        while True:
            hw = self.high_watermark(topic, partition)
            if hw >= at_least:
                return hw
            if time.monotonic() > deadline:
                raise BrokerError(
                    f"{topic}[{partition}]: the transaction marker did not appear within {timeout:.0f}s "
                    f"(high watermark {hw}, expected at least {at_least})"
                )
            time.sleep(0.02)

    def producer_identity(self, transactional_id: str) -> tuple[int, int]:
        """(producer id, epoch) of a transactional id via DescribeTransactions (KIP-664), which
        confluent-kafka doesn't expose; (-1, -1) where the broker doesn't support it."""
        admin = self._kafka_admin()
        if admin is None:
            return -1, -1
        try:
            desc = admin.describe_transactions([transactional_id])[transactional_id]
        except Exception:  # unsupported API or unknown id: the manifest then says -1
            return -1, -1
        return int(desc.producer_id), int(desc.producer_epoch)

    def transaction_state(self, transactional_id: str) -> str | None:
        admin = self._kafka_admin()
        if admin is None:
            return None
        from kafka import errors as Errors  # lazy: see docs/imports.md

        # A freshly started Apache Kafka answers COORDINATOR_LOAD_IN_PROGRESS (and NOT_COORDINATOR while
        # the coordinator moves) for a while: asked again until TIMEOUT, else an open transaction of an
        # earlier run would be taken for none and its late ABORT would land in the recreated topics.
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                desc = admin.describe_transactions([transactional_id])[transactional_id]
            except (Errors.CoordinatorLoadInProgressError, Errors.NotCoordinatorError,
                    Errors.CoordinatorNotAvailableError):
                if time.monotonic() > deadline:
                    return None
                time.sleep(0.2)
                continue
            except Exception:  # unknown id (never used) or unsupported API
                return None
            return str(getattr(desc.state, "value", desc.state))

    def _kafka_admin(self) -> KafkaAdminClient | None:
        if self._admin is None and not self._admin_failed:
            try:
                self._admin = kafka_admin(self.cluster, timeout=TIMEOUT)
            except Exception:  # the manifest falls back to producer_id -1 rather than failing the run
                self._admin_failed = True
        return self._admin

    def close(self) -> None:
        for consumer in self._consumers.values():
            consumer.close()
        if self._admin is not None:
            self._admin.close()
