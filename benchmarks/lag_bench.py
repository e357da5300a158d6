"""One `eosctl lag` poll for many groups x partitions, against the naive per-partition approach.

    python benchmarks/lag_bench.py [--bootstrap HOST:PORT] [--groups 50] [--partitions 64] [--rounds 3]

Without --bootstrap it starts a throwaway sandbox broker. Setup: one transactional topic (every partition
ends with a commit marker), and groups committing offsets spread over the partitions (some at the marker,
some behind). Then, in the same run:

- eosctl: ``eosctl.inspection.lag.poll`` - ListOffsets batched per leader, all groups' offsets in flight
together,
  one batched scan for records behind, one Fetch for blocked partitions;
- naive: what a per-partition tool does - for every group and partition, committed(), HW and LSO
  watermark queries, one call each (it computes only HW/LSO lag, less than eosctl does).

Prints the sizes used, the median wall time of each and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid

from benchbroker import broker  # benchmarks/ is on the path: run as python benchmarks/NAME.py
from benchdata import create_topics
from confluent_kafka import Consumer, Producer, TopicPartition

from eosctl.cluster.wire import WireClient
from eosctl.config.model import Cluster
from eosctl.inspection.lag import poll


def setup(bootstrap: str, topic: str, partitions: int, groups: int, txns: int) -> list[str]:
    create_topics(bootstrap, {topic: partitions})
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic + ".tx", "linger.ms": 5})
    p.init_transactions()
    for _ in range(txns):
        p.begin_transaction()
        for part in range(partitions):
            for i in range(5):
                p.produce(topic, b"x" * 100, key=str(i).encode(), partition=part)
        p.commit_transaction()
    # Each transaction adds 5 records + 1 marker per partition: HW = txns * 6.
    hw = txns * 6
    names = []
    for g in range(groups):
        name = f"{topic}.g{g:03d}"
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": name, "enable.auto.commit": False})
        offsets = [TopicPartition(topic, part, _committed(hw, g + part))
                   for part in range(partitions)]
        c.commit(offsets=offsets, asynchronous=False)
        c.close()
        names.append(name)
    return names


def _committed(hw: int, k: int) -> int:
    """A third at the trailing marker (caught up), the rest one to four transactions behind."""
    return hw - 1 if k % 3 == 0 else hw - 6 * (1 + k % 4)


def naive(bootstrap: str, topic: str, partitions: int, groups: list[str]) -> int:
    """Per group and partition: committed offset, HW and LSO, one call each."""
    conf = {"bootstrap.servers": bootstrap, "group.id": "bench.naive"}
    rc = Consumer({**conf, "isolation.level": "read_committed"})
    ru = Consumer({**conf, "isolation.level": "read_uncommitted"})
    total = 0
    try:
        for g in groups:
            c = Consumer({"bootstrap.servers": bootstrap, "group.id": g, "enable.auto.commit": False})
            for part in range(partitions):
                tp = TopicPartition(topic, part)
                committed = c.committed([tp], timeout=10)[0].offset
                _, hw = ru.get_watermark_offsets(tp, timeout=10, cached=False)
                _, lso = rc.get_watermark_offsets(tp, timeout=10, cached=False)
                total += max(0, lso - committed) + (hw - lso) * 0
            c.close()
    finally:
        rc.close()
        ru.close()
    return total


def fast(cluster: Cluster, topic: str, groups: list[str]) -> int:
    with WireClient(cluster) as client:
        snap = poll(client, groups, [topic])
    return sum(p.lag_to_lso or 0 for p in snap.partitions)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap")
    ap.add_argument("--groups", type=int, default=50)
    ap.add_argument("--partitions", type=int, default=64)
    ap.add_argument("--transactions", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--broker", choices=["noida", "kafka"], default="noida",
                    help="without --bootstrap: the broker started for the run")
    args = ap.parse_args()
    with broker(args.broker, args.bootstrap) as b:
        args.bootstrap = b.bootstrap
        print(f"broker: {b.name}")
        cluster = Cluster("bench", args.bootstrap)
        topic = "lagbench." + uuid.uuid4().hex[:8]
        t0 = time.perf_counter()
        groups = setup(args.bootstrap, topic, args.partitions, args.groups, args.transactions)
        print(f"setup: {args.groups} groups x {args.partitions} partitions, {args.transactions} transactions "
              f"per partition ({time.perf_counter() - t0:.1f}s) on {args.bootstrap}")
        times: dict[str, list[float]] = {"eosctl poll": [], "naive per-partition": []}
        results = {}
        for _ in range(args.rounds):
            for what, fn in (("eosctl poll", lambda: fast(cluster, topic, groups)),
                             ("naive per-partition",
                              lambda: naive(args.bootstrap, topic, args.partitions, groups))):
                t = time.perf_counter()
                results[what] = fn()
                times[what].append(time.perf_counter() - t)
        if results["eosctl poll"] != results["naive per-partition"]:
            print(f"WARNING: total lag differs: {results}", file=sys.stderr)
        for what, ts in times.items():
            rounds = ", ".join(f"{t:.3f}" for t in ts)
            print(f"{what:<22} median {statistics.median(ts):7.3f}s  (rounds: {rounds})")
        ratio = statistics.median(times["naive per-partition"]) / statistics.median(times["eosctl poll"])
        print(f"ratio naive / eosctl: {ratio:.1f}x  (total lag to LSO, both: {results['eosctl poll']})")


if __name__ == "__main__":
    main()
