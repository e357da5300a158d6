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


def commit_offset(bootstrap: str, group: str, topic: str, offset: int, partition: int = 0) -> None:
    """Commit ``group``'s offset on the partition, as a sink consumer would (no records read)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, partition, offset)], asynchronous=False)
    finally:
        c.close()


def epoch_timeline(text: str, wrapped: bool = False) -> list[tuple[str, str, str]]:
    """Rows of `eosctl log`'s "Epoch timeline and anomalies" table as (offset, pid, event); a wrapped
    row's further lines (empty offset) only with ``wrapped``."""
    rows, inside = [], False
    for line in text.splitlines():
        if "Epoch timeline" in line:
            inside = True
        elif inside and line.count("│") == 4:
            cells = tuple(c.strip() for c in line.split("│")[1:4])
            if cells[0] != "offset" and (wrapped or cells[0] != ""):
                rows.append(cells)
    return rows
