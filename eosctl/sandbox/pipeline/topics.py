"""Names derived from the run prefix, and a clean slate of topics and groups for each run."""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from eosctl.base.errors import BrokerError
from eosctl.cluster.clients import confluent_admin
from eosctl.config.model import Cluster
from eosctl.sandbox.pipeline.broker import TIMEOUT, Broker, client_conf


@dataclass(frozen=True)
class Names:
    prefix: str

    @property
    def source_topic(self) -> str:
        return f"{self.prefix}.orders"

    @property
    def output_topic(self) -> str:
        return f"{self.prefix}.enriched"

    @property
    def processor_group(self) -> str:
        return f"{self.prefix}.processor"

    @property
    def sink_group(self) -> str:
        return f"{self.prefix}.sink"

    @property
    def source_txid(self) -> str:
        return f"{self.prefix}.source"

    @property
    def processor_txid(self) -> str:
        return f"{self.prefix}.processor"

    @property
    def hanging_txid(self) -> str:
        return f"{self.prefix}.hanging"

    @property
    def stage_pipeline(self) -> str:
        """The config's pipeline for the process stage as a hop (orders -> enriched)."""
        return f"{self.prefix}.process"

    @property
    def whole_pipeline(self) -> str:
        """The config's pipeline that audits both hops in order."""
        return f"{self.prefix}.pipeline"

    @property
    def topics(self) -> tuple[str, str]:
        return self.source_topic, self.output_topic

    @property
    def transactional_ids(self) -> tuple[str, str, str]:
        return self.source_txid, self.processor_txid, self.hanging_txid


def reset(cluster: Cluster, names: Names, partitions: int, broker: Broker, timeout: float = 30.0) -> None:
    """Delete what an earlier run with this prefix left (open transactions, topics, groups), then create
    the topics and wait until every partition has a leader."""
    # Topic deletion and creation can take a broker several seconds: a longer socket timeout than the
    # inspection commands use, so the operation timeout (TIMEOUT) expires first and says what failed.
    admin = confluent_admin(cluster, timeout=3 * TIMEOUT)
    _abort_open_transactions(cluster, names, broker)
    existing = set(admin.list_topics(timeout=TIMEOUT).topics)
    stale = [t for t in names.topics if t in existing]
    if stale:
        _wait_all(admin.delete_topics(stale, operation_timeout=TIMEOUT),
                  ignore=(KafkaError.UNKNOWN_TOPIC_OR_PART,))
        _wait_until(lambda: not set(stale) & set(admin.list_topics(timeout=TIMEOUT).topics), timeout,
                    f"topics {', '.join(stale)} still exist after deletion")
    # Committed offsets of the old groups would point into the recreated topics and skip records.
    groups = [names.processor_group, names.sink_group]
    _wait_all(admin.delete_consumer_groups(groups, request_timeout=TIMEOUT),
              ignore=(KafkaError.GROUP_ID_NOT_FOUND, KafkaError.NOT_COORDINATOR))
    deadline = time.monotonic() + timeout
    while True:
        # Real Kafka deletes asynchronously: creation fails with TOPIC_ALREADY_EXISTS for a while.
        futures = admin.create_topics([NewTopic(t, partitions, 1) for t in names.topics],
                                      operation_timeout=TIMEOUT)
        try:
            _wait_all(futures, ignore=())
            break
        except BrokerError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    _wait_until(lambda: _ready(admin, names.topics, partitions), timeout,
                f"topics {', '.join(names.topics)} have no leaders yet")


def _abort_open_transactions(cluster: Cluster, names: Names, broker: Broker) -> None:
    """An open transaction of an earlier run (the `hanging` fault leaves one on purpose) would otherwise
    be aborted later, by the next init_transactions, with its markers landing in the recreated topics."""
    for txid in names.transactional_ids:
        state = broker.transaction_state(txid)
        if state is None or state in ("Empty", "CompleteCommit", "CompleteAbort", "Dead"):
            continue
        producer = Producer(client_conf(cluster, **{"transactional.id": txid}))
        producer.init_transactions(TIMEOUT)  # bumps the epoch and aborts the open transaction
        producer.flush(TIMEOUT)


def _ready(admin: AdminClient, topics: tuple[str, ...], partitions: int) -> bool:
    md = admin.list_topics(timeout=TIMEOUT).topics
    for t in topics:
        tm = md.get(t)
        if tm is None or tm.error is not None or len(tm.partitions) != partitions:
            return False
        if any(p.leader < 0 for p in tm.partitions.values()):
            return False
    return True


def _wait_all(futures: dict, ignore: tuple[int, ...]) -> None:
    for name, future in futures.items():
        try:
            future.result()
        except KafkaException as e:
            err = e.args[0]
            if err.code() not in ignore:
                raise BrokerError(f"{name}: {err.str()}") from None


def _wait_until(ready, timeout: float, message: str) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise BrokerError(f"{message} after {timeout:.0f}s")
        time.sleep(0.05)
