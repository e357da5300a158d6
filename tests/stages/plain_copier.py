"""The control for Kafka's TransactionalMessageCopier: the same copy (one input partition to the same output
partition, key and value unchanged) without transactions: consume a batch, produce it, flush, THEN commit
the input offsets. Killed between the flush and the commit, a restart copies the batch again.

    python tests/stages/plain_copier.py BOOTSTRAP INPUT PARTITION OUTPUT GROUP BATCH PAUSE

Prints a JSON status line per batch, as the copier does: {"consumed": N, "remaining": R} (this run's)."""

from __future__ import annotations

import json
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition


def main(bootstrap: str, source: str, partition: int, output: str, group: str, batch: int,
         pause: float) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False, "acks": "all",
                         "linger.ms": 5})
    tp = TopicPartition(source, partition)
    committed = consumer.committed([tp], 10)[0].offset
    end = consumer.get_watermark_offsets(tp, 10)[1]
    position = max(committed, 0)
    consumer.assign([TopicPartition(source, partition, position)])
    consumed = 0
    while position < end:
        msgs = [m for m in consumer.consume(batch, 1.0) if m.error() is None]
        if not msgs:
            continue
        for m in msgs:
            producer.produce(output, key=m.key(), value=m.value(), partition=m.partition())
        assert producer.flush(30) == 0
        position = msgs[-1].offset() + 1
        consumed += len(msgs)
        print(json.dumps({"consumed": consumed, "remaining": end - position}), flush=True)
        time.sleep(pause)  # a slow commit: the window a crash turns into duplicates
        consumer.commit(offsets=[TopicPartition(source, partition, position)], asynchronous=False)
    consumer.close()


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], a[1], int(a[2]), a[3], a[4], int(a[5]), float(a[6]))
