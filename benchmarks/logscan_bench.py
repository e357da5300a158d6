"""Log scan rate: eosctl.cluster.logscan (record-batch headers only) vs a plain confluent-kafka consumer.

Both read the same partition in the same run: N records written in transactions of T records (so the log
holds N data offsets plus N/T commit markers). Rates are offsets per second of wall time, each the best
of --repeat runs.

    python benchmarks/logscan_bench.py [--bootstrap HOST:PORT] [--records 200000] [--txn 100]

Without --bootstrap it starts a private sandbox broker (noida-db) and stops it at the end.
"""

from __future__ import annotations

import argparse
import time
import uuid

from benchbroker import broker  # benchmarks/ is on the path: run as python benchmarks/NAME.py
from benchdata import create_topics


def produce(bootstrap: str, topic: str, records: int, txn_size: int) -> None:
    from confluent_kafka import Producer

    create_topics(bootstrap, {topic: 1})
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}.bench", "linger.ms": 5,
                  "batch.num.messages": txn_size})
    p.init_transactions()
    value = b"x" * 100
    for start in range(0, records, txn_size):
        p.begin_transaction()
        for i in range(start, min(records, start + txn_size)):
            p.produce(topic, key=str(i).encode(), value=value, partition=0)
        p.commit_transaction()


def scan_eosctl(bootstrap: str, topic: str) -> tuple[int, float, dict]:
    from eosctl.cluster.logscan import scan_partition
    from eosctl.cluster.model import Kind
    from eosctl.cluster.wire import WireClient

    t0 = time.perf_counter()
    with WireClient(bootstrap) as client:
        log = scan_partition(client, topic, 0)
    elapsed = time.perf_counter() - t0
    counts = {k.value: log.count(k) for k in Kind if log.count(k)}
    return log.scanned_to - log.scanned_from, elapsed, counts


def scan_consumer(bootstrap: str, topic: str, isolation: str) -> tuple[int, float]:
    """Read partition 0 from the start up to the high watermark; offsets covered = HW - start.

    The clock stops at the last batch that carried records: librdkafka's consume() holds the final
    partition-EOF event until its timeout, which is not reading time.
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    t0 = time.perf_counter()
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "isolation.level": isolation, "enable.partition.eof": True})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        last_data = t0
        while True:
            msgs = c.consume(10_000, timeout=5)
            if not msgs:
                raise RuntimeError("consumer got nothing for 5 s before reaching the end of the partition")
            if any(m.error() is None for m in msgs):
                last_data = time.perf_counter()
            if any(m.error() is not None and m.error().code() == -191 for m in msgs):  # _PARTITION_EOF
                break
    finally:
        c.close()
    return high - low, last_data - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap")
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--txn", type=int, default=100, help="records per transaction")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--broker", choices=["noida", "kafka"], default="noida",
                    help="without --bootstrap: the broker started for the run")
    args = ap.parse_args()

    with broker(args.broker, args.bootstrap) as b:
        bootstrap = b.bootstrap
        print(f"broker: {b.name}")
        topic = f"bench.{uuid.uuid4().hex[:8]}"
        t0 = time.perf_counter()
        produce(bootstrap, topic, args.records, args.txn)
        print(f"wrote {args.records} records in transactions of {args.txn} to {topic} "
              f"({time.perf_counter() - t0:.1f} s)")
        eos = min((scan_eosctl(bootstrap, topic) for _ in range(args.repeat)), key=lambda r: r[1])
        rc = min((scan_consumer(bootstrap, topic, "read_committed") for _ in range(args.repeat)),
                 key=lambda r: r[1])
        ru = min((scan_consumer(bootstrap, topic, "read_uncommitted") for _ in range(args.repeat)),
                 key=lambda r: r[1])
        print(f"{'eosctl.cluster.logscan':<25} {eos[0]:>9} offsets in {eos[1]:6.3f} s = "
              f"{eos[0] / eos[1]:>12,.0f} offsets/s   {eos[2]}")
        for what, (n, s) in (("consumer read_committed", rc), ("consumer read_uncommitted", ru)):
            print(f"{what:<25} {n:>9} offsets in {s:6.3f} s = {n / s:>12,.0f} offsets/s")
        print(f"ratio logscan / consumer: {(eos[0] / eos[1]) / (rc[0] / rc[1]):.2f}x (read_committed), "
              f"{(eos[0] / eos[1]) / (ru[0] / ru[1]):.2f}x (read_uncommitted)")


if __name__ == "__main__":
    main()
