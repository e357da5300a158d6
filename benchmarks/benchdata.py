"""Data helpers the benchmarks share: sizes on the command line, topic creation, and keyed records written
in committed transactions (the layout content_bench, keyed_bench and incremental_bench audit)."""

from __future__ import annotations

import argparse
import time
import uuid

VALUE = b"x" * 40  # each keyed record's value (40 bytes, as in the runs of docs/benchmarks.md)


def parse_size(text: str) -> int:
    """A count as written on the command line: "20000", "20K", "10.01M", "1G"."""
    text = text.strip().upper()
    scale = {"K": 10**3, "M": 10**6, "G": 10**9}.get(text[-1:], 1)
    return int(float(text.rstrip("KMG")) * scale)


def create_topics(bootstrap: str, topics: dict[str, int], timeout: float = 120.0) -> None:
    """Create each topic with its number of partitions (replication factor 1); wait for every one."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, n, 1) for t, n in topics.items()],
                                  operation_timeout=timeout)
    for f in futures.values():
        f.result(timeout)


def produce_keyed(bootstrap: str, topic: str, records: int, partitions: int, txn: int, first: int = 0,
                  create: bool = True) -> int:
    """Records [first, first + records) of the partitions' shares (first and records divisible by
    ``partitions``), in transactions of ``txn`` records, txn/partitions per partition: partition p's i-th
    record has key f"{p}-{i}" and value VALUE, at offset i + i // per (a COMMIT marker
    after each transaction). Returns per."""
    from confluent_kafka import Producer

    if create:
        create_topics(bootstrap, {topic: partitions})
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}.bench", "linger.ms": 20,
                  "batch.size": 1 << 20, "queue.buffering.max.messages": 2_000_000,
                  "compression.type": "none"})
    p.init_transactions(60)
    per = txn // partitions
    lo, hi = first // partitions, (first + records) // partitions
    for start in range(lo, hi, per):
        p.begin_transaction()
        for part in range(partitions):
            for i in range(start, min(hi, start + per)):
                while True:
                    try:
                        p.produce(topic, key=f"{part}-{i}".encode(), value=VALUE, partition=part)
                        break
                    except BufferError:  # the local queue is full: let librdkafka send some first
                        p.poll(0.05)
        p.commit_transaction(120)
    return per


def keyed_flags(ap: argparse.ArgumentParser, records: str, repeat: int) -> None:
    """The flags of the benchmarks that audit keyed records: how many, laid out how, measured how often,
    on which broker (--bootstrap: that cluster; without it a private Apache Kafka, benchbroker)."""
    ap.add_argument("--records", default=records, help="how many keyed records (20K, 10M, ...)")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--txn", type=int, default=8000, help="records per transaction, over all partitions")
    ap.add_argument("--repeat", type=int, default=repeat, help="runs of each measurement; the best is kept")
    ap.add_argument("--bootstrap", help="a cluster to write to instead of a private Apache Kafka")


def write_keyed(bootstrap: str, broker_name: str, prefix: str, records: int, partitions: int,
                txn: int) -> tuple[str, int]:
    """A new topic named ``prefix`` + a random suffix holding produce_keyed's records; says how long it took.
    Returns (topic, records per partition per transaction)."""
    topic = prefix + uuid.uuid4().hex[:6]
    t0 = time.monotonic()
    per = produce_keyed(bootstrap, topic, records, partitions, txn)
    print(f"wrote {records:,} records in {time.monotonic() - t0:.1f}s to {broker_name}", flush=True)
    return topic, per
