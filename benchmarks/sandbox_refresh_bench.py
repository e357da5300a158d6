"""The live model's steady refresh on a compiled broker (noida-db or Apache Kafka) with 10k partitions.

    python benchmarks/sandbox_refresh_bench.py [--partitions 10000] [--records-per-partition 10]
                                               [--traffic 5000] [--refreshes 5] [--broker noida|kafka]

scale_bench.py measures the sizes (100M records) on the scripted broker, which is Python: answering one
Fetch of 10k partitions costs it ~0.5 s, so its steady refreshes are mostly the broker's time. Here the
same refresh runs against a broker that answers like a real one (real I/O over loopback, a topic of
``--partitions`` partitions, a group committed at the high watermark), with ``--traffic`` records/s of new
idempotent-producer records between refreshes. The baseline, in the same run: a plain read_committed reader
of just the new records (raw Fetches, no classification), what a steady refresh must read at least.
Printed: the median steady refresh, its ratio to the baseline, the client CPU of a refresh, each step.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchbroker import broker  # noqa: E402  benchmarks/ is on the path: run as python benchmarks/NAME.py
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from eosctl.cluster.wire import WireClient  # noqa: E402
from eosctl.config.model import Cluster, Pipeline  # noqa: E402
from eosctl.config.target import Target  # noqa: E402
from eosctl.inspection.live import LiveModel  # noqa: E402

TOPIC, GROUP = "bench.sandbox", "bench.sandbox.sink"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--records-per-partition", type=int, default=10)
    ap.add_argument("--traffic", type=int, default=5000, help="new records per second of interval")
    ap.add_argument("--refreshes", type=int, default=5)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--broker", choices=["noida", "sandbox", "kafka"], default="noida",
                    help="the broker started for the run (sandbox = noida)")
    args = ap.parse_args()
    with broker(args.broker) as b:
        print(f"broker: {b.name}", flush=True)
        run(b.bootstrap, args)


def run(bootstrap: str, args: argparse.Namespace) -> None:
    P = args.partitions
    admin = AdminClient({"bootstrap.servers": bootstrap})
    create_topic(admin, P)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True})
    deadline = time.monotonic() + 120  # the producer's metadata must know every partition before it writes
    while len(producer.list_topics(TOPIC, timeout=30).topics[TOPIC].partitions) < P:
        if time.monotonic() > deadline:
            raise SystemExit(f"the broker still does not list {P} partitions of {TOPIC}")
        time.sleep(1)
    t = time.monotonic()
    for i in range(P * args.records_per_partition):
        producer.produce(TOPIC, value=b"x" * 20, partition=i % P)
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush(300)
    print(f"{P} partitions x {args.records_per_partition} records written in "
          f"{time.monotonic() - t:.0f}s", flush=True)
    commit_at_end(bootstrap, P)
    target = Target(Cluster("c", bootstrap), Pipeline("bench", "c", (TOPIC,), GROUP), None, (TOPIC,), GROUP)
    with LiveModel(target, timeout_ms=60_000, long_lived=True) as model, \
            WireClient(bootstrap, timeout_ms=60_000) as plain:
        t = time.monotonic()
        model.refresh()
        print(f"first refresh {time.monotonic() - t:.2f}s: " + steps(model), flush=True)
        plain.metadata([TOPIC])
        walls, cpus, bases, n = [], [], [], 0
        for _ in range(args.refreshes):
            before = ends(plain, P)
            batch = int(args.traffic * args.interval)
            t = time.monotonic()
            for _ in range(batch):
                producer.produce(TOPIC, value=b"y" * 20, partition=n % P)
                n += 7
            producer.flush(60)
            time.sleep(max(0.0, args.interval - (time.monotonic() - t)))
            after = ends(plain, P)
            bases.append(new_records(plain, before, after))
            t, cpu = time.monotonic(), time.process_time()
            model.refresh()
            walls.append(time.monotonic() - t)
            cpus.append(time.process_time() - cpu)
        wall, base = statistics.median(walls), statistics.median(bases)
        print(f"{P} partitions, {args.traffic} records/s | steady refresh {wall:.3f}s "
              f"({wall / base:.2f}x reading just the new records {base:.3f}s) | client CPU "
              f"{statistics.median(cpus):.3f}s | last: {steps(model)} | load average "
              f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)


def create_topic(admin: AdminClient, partitions: int) -> None:
    """Apache Kafka's controller refuses one operation of more than 10,000 records (a topic of 10k
    partitions is 10,001): there the topic is made with 5,000 partitions and grown 5,000 at a time."""
    from confluent_kafka.admin import NewPartitions

    try:
        admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(120)
        return
    except KafkaException as e:
        if e.args[0].code() != KafkaError.POLICY_VIOLATION:
            raise
    admin.create_topics([NewTopic(TOPIC, min(partitions, 5000), 1)])[TOPIC].result(120)
    for n in range(10_000, partitions + 5000, 5000):
        admin.create_partitions([NewPartitions(TOPIC, min(n, partitions))])[TOPIC].result(120)


def steps(model: LiveModel) -> str:
    return ", ".join(f"{k} {v:.3f}s" for k, v in model.timings.items())


def ends(client: WireClient, partitions: int) -> dict:
    return {tp: o.high_watermark for tp, o in client.offsets([(TOPIC, p) for p in range(partitions)]).items()}


def new_records(client: WireClient, before: dict, after: dict) -> float:
    """Raw read_committed Fetches of the partitions that grew, from where they were to their new end."""
    from eosctl.cluster.wire import READ_COMMITTED

    t = time.monotonic()
    pos = {tp: o for tp, o in before.items() if o < after[tp]}
    while pos and time.monotonic() - t < 60:
        results = client.fetch_many(pos, 1 << 20, READ_COMMITTED)
        for tp, r in results.items():
            pos[tp] = after[tp] if r.records else pos[tp]
        pos = {tp: o for tp, o in pos.items() if o < after[tp]}
    return time.monotonic() - t


def commit_at_end(bootstrap: str, partitions: int) -> None:
    """The group committed at every partition's end: its lag is 0 until the traffic starts."""
    with WireClient(bootstrap, timeout_ms=60_000) as client:
        hws = ends(client, partitions)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in hws.items()], asynchronous=False)
    finally:
        consumer.close()


if __name__ == "__main__":
    main()
