"""A dead-letter queue topic as the audit reads it: each record's source coordinates, from the headers Kafka
Connect (KIP-298, `errors.deadletterqueue.context.headers.enable=true`) or Kafka Streams (KIP-1034, 4.2+)
write, and its exception class.

Connect's DeadLetterQueueReporter writes `__connect.errors.topic`, `.partition`, `.offset` (the numbers as
decimal text, UTF-8) and `__connect.errors.exception.class.name`; Streams' ExceptionHandlerUtils writes
`__streams.errors.topic`, `.partition`, `.offset` and `__streams.errors.exception` the same way. The topic is
read read_committed up to the end offsets taken first: a Streams DLQ is written in the task's transaction
(only committed dead letters count), Connect's DLQ producer is not transactional (all of its records are
committed ones)."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from eosctl.base.errors import BrokerError
from eosctl.cluster.consumed import headers, placed
from eosctl.config.model import Cluster

TP = tuple[str, int]
CONVENTIONS = {
    "connect": ("__connect.errors.topic", "__connect.errors.partition", "__connect.errors.offset",
                "__connect.errors.exception.class.name"),
    "streams": ("__streams.errors.topic", "__streams.errors.partition", "__streams.errors.offset",
                "__streams.errors.exception"),
}
READ_SECONDS = 60.0


@dataclass
class DeadLetters:
    """What the DLQ holds: per source partition, {source offset: dead letters of it}; the exception classes
    counted; records whose headers name no source record (no convention's three headers, or unreadable)."""

    topic: str
    by_partition: dict[TP, Counter[int]] = field(default_factory=dict)
    exceptions: Counter[str] = field(default_factory=Counter)
    records: int = 0
    unreadable: int = 0
    conventions: Counter[str] = field(default_factory=Counter)

    def add(self, headers: list[tuple[str, bytes | None]]) -> None:
        self.records += 1
        named = {k: v for k, v in headers if v is not None}
        for convention, (t, p, o, exc) in CONVENTIONS.items():
            if t in named and p in named and o in named:
                try:
                    tp = (named[t].decode("utf-8"), int(named[p].decode("ascii")))
                    offset = int(named[o].decode("ascii"))
                except (UnicodeDecodeError, ValueError):
                    break
                self.by_partition.setdefault(tp, Counter())[offset] += 1
                self.exceptions[named[exc].decode("utf-8", "replace") if exc in named else "(none)"] += 1
                self.conventions[convention] += 1
                return
        self.unreadable += 1


def read_dead_letters(cluster: Cluster, topic: str, timeout: float = READ_SECONDS) -> DeadLetters:
    """Every committed record of the DLQ topic up to its end offsets now."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition  # lazy: see docs/imports.md

    out = DeadLetters(topic)
    consumer = Consumer({**cluster.confluent(), "group.id": "eosctl-dlq-reader", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "enable.partition.eof": True})
    try:
        meta = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
        if meta is None or meta.error is not None or not meta.partitions:
            raise BrokerError(f"dlq_topic {topic!r} does not exist on {cluster.bootstrap_servers}; name the "
                              "pipeline's dead-letter topic (errors.deadletterqueue.topic.name)")
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
                for p in meta.partitions}
        todo = {p for p, (lo, hi) in ends.items() if hi > lo}
        consumer.assign([TopicPartition(topic, p, ends[p][0]) for p in sorted(todo)])
        deadline = time.monotonic() + timeout
        while todo:
            if time.monotonic() > deadline:
                raise BrokerError(f"reading the dlq_topic {topic!r} took over {timeout:.0f} s; "
                                  "pass a longer --timeout")
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    todo.discard(msg.partition())
                    continue
                raise BrokerError(f"reading the dlq_topic {topic!r}: {error.str()}")
            _, partition, offset = placed(msg)
            if offset < ends[partition][1]:
                out.add(headers(msg))
            if offset >= ends[partition][1] - 1:
                todo.discard(partition)
    finally:
        consumer.close()
    return out
