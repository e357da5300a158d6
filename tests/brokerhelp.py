"""Helpers for tests that set up state on a live broker (imported by test modules)."""

from __future__ import annotations

import uuid


def committed_group(bootstrap: str, prefix: str = "out", records: int = 5) -> tuple[str, str]:
    """(topic, group): a new 1-partition topic with ``records`` records and a group that committed all of
    them, so its lag status is OK."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = f"{prefix}-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a destroyed client fails its futures
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(records):
        producer.produce(topic, key=str(i), value=b"v")
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, records)], asynchronous=False)
    finally:
        consumer.close()
    return topic, group
