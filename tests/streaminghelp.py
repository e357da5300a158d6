"""A transactional input topic for the framework tests (Spark Structured Streaming, Kafka Connect), and the
test's own raw reads of it: which offsets hold committed, aborted and still-open records.

Committed and aborted transactions alternate (from two producers: aborting from a producer of its own keeps
a resuming read_committed fetch clear of stale aborted lists, see tests/integration/test_quix_stage.py), and
the last transaction stays open until close() aborts it, so the partitions end in records no read_committed
reader may see.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 2
DOCS = Path(__file__).resolve().parents[1] / "docs" / "audit.md"
SCHEMA = {"type": "struct", "name": "order", "optional": False,
          "fields": [{"field": "id", "type": "string", "optional": False},
                     {"field": "n", "type": "int32", "optional": False}]}


class TxnTopic:
    def __init__(self, bootstrap: str, prefix: str, transactions: int = 12, per_txn: int = 20,
                 connect_json: bool = False) -> None:
        self.bootstrap = bootstrap
        self.name = f"{prefix}{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(self.name, PARTITIONS, 1)])[self.name].result(30)
        # (partition, offset) -> key, from delivery reports
        self.committed: dict[tuple[int, int], str] = {}
        self.aborted: dict[tuple[int, int], str] = {}
        self.open: dict[tuple[int, int], str] = {}
        self.txn_of: dict[tuple[int, int], str] = {}  # offset -> transactional id of its writer
        self._producers = {kind: Producer({"bootstrap.servers": bootstrap,
                                           "transactional.id": f"{self.name}.{kind}",
                                           "transaction.timeout.ms": 600_000, "linger.ms": 5})
                           for kind in ("source", "aborter", "opener")}
        for p in self._producers.values():
            p.init_transactions(30)
        for t in range(transactions):
            kind = "aborter" if t % 3 == 1 else "source"
            self._txn(kind, t, per_txn, connect_json, "abort" if kind == "aborter" else "commit")
        self._txn("opener", transactions, per_txn // 2, connect_json, "leave open")

    def _txn(self, kind: str, t: int, n: int, connect_json: bool, end: str) -> None:
        producer = self._producers[kind]
        delivered: dict[tuple[int, int], str] = {}

        def report(err, msg) -> None:
            assert err is None, err
            delivered[(msg.partition(), msg.offset())] = msg.key().decode()

        producer.begin_transaction()
        for i in range(n):
            key = f"k{t}-{i}"
            # Kafka Connect's JsonConverter (schemas.enable): the schema beside each value
            value = json.dumps({"schema": SCHEMA, "payload": {"id": key, "n": i}}) if connect_json \
                else f"v{t}-{i}"
            producer.produce(self.name, key=key.encode(), value=value.encode(), partition=i % PARTITIONS,
                             on_delivery=report)
        assert producer.flush(30) == 0
        into = {"commit": self.committed, "abort": self.aborted, "leave open": self.open}[end]
        if end == "commit":
            producer.commit_transaction(30)
        elif end == "abort":
            producer.abort_transaction(30)
        into.update(delivered)
        self.txn_of.update(dict.fromkeys(delivered, f"{self.name}.{kind}"))

    def close(self) -> None:
        """Abort the open transaction (a hanging one would outlive the test on the session's broker), and
        let the producers go (alive, they would retry the broker after the session stops it)."""
        opener = self._producers.pop("opener", None)
        if opener is not None:
            opener.abort_transaction(30)
        self._producers.clear()

    def read(self, isolation: str) -> set[tuple[int, int]]:
        """The test's own read of the topic: (partition, offset) of every record a consumer with this
        isolation level is served, up to the end offsets it may read."""
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"raw-{uuid.uuid4().hex[:6]}",
                             "isolation.level": isolation, "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "enable.partition.eof": True})
        seen: set[tuple[int, int]] = set()
        try:
            consumer.assign([TopicPartition(self.name, p, 0) for p in range(PARTITIONS)])
            at_end: set[int] = set()
            while len(at_end) < PARTITIONS:
                msg = consumer.poll(10)
                assert msg is not None, f"no end of {self.name} within 10 s"
                if msg.error():
                    assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                    at_end.add(msg.partition())
                    continue
                seen.add((msg.partition(), msg.offset()))
        finally:
            consumer.close()
        return seen


def documented_config(section: str) -> str:
    """The TOML block of docs/audit.md's section ``section`` (the config a user copies)."""
    text = DOCS.read_text().split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return text.split("```toml\n", 1)[1].split("```", 1)[0]
