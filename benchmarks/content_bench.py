"""The content check's cost: an audit with it vs the same audit offsets-only, on the same topic and sink in
the same run (real I/O: the records come from a broker, the sink from a DuckDB file).

N records with keys are written in transactions over P partitions of a private Apache Kafka (one KRaft node,
eosctl.sandbox.apache_kafka; or --bootstrap); the sink holds every committed record once with its key, its
value and the md5 hex of its value (the value column and the value hash column the check can compare).
Each audit is run --repeat times per engine, best time kept; the ratio is content / offsets-only.

    python benchmarks/content_bench.py [--records 10M] [--partitions 8] [--txn 8000] [--engines local,spark]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path

VALUE = b"x" * 40  # each record's value (40 bytes, as in the runs of docs/benchmarks.md)


def parse_size(text: str) -> int:
    scale = {"K": 10**3, "M": 10**6}.get(text[-1:].upper(), 1)
    return int(float(text.rstrip("KMkm")) * scale)


def produce(bootstrap: str, topic: str, records: int, partitions: int, txn: int) -> int:
    """Transactions of ``txn`` records, txn/partitions per partition each: partition p's i-th record has key
    f"{p}-{i}" and, with the COMMIT marker after each transaction's records, offset i + i // per."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}.bench", "linger.ms": 20,
                  "batch.size": 1 << 20, "queue.buffering.max.messages": 2_000_000,
                  "compression.type": "none"})
    p.init_transactions(60)
    per = txn // partitions
    value = VALUE
    per_partition = records // partitions
    for start in range(0, per_partition, per):
        p.begin_transaction()
        for part in range(partitions):
            for i in range(start, min(per_partition, start + per)):
                while True:
                    try:
                        p.produce(topic, key=f"{part}-{i}".encode(), value=value, partition=part)
                        break
                    except BufferError:
                        p.poll(0.05)
        p.commit_transaction(120)
    return per


def build_sink(path: Path, topic: str, records: int, partitions: int, per: int) -> None:
    import duckdb

    n = records // partitions
    value = "'" + VALUE.decode() + "'"
    con = duckdb.connect(str(path))
    con.execute(f"""
        CREATE TABLE sink AS
        SELECT '{topic}' AS src_topic, p::INTEGER AS src_partition, (i + i // {per})::BIGINT AS src_offset,
               p || '-' || i AS order_id, {value} AS payload, md5({value}) AS payload_md5
        FROM range({partitions}) t(p), range({n}) r(i)""")
    con.close()


def run(bootstrap: str, topic: str, sink: Path, engine: str, content: bool, key: bool = True,
        value: str | None = None):
    from auditors import engine as engines
    from auditors.engine import EngineOptions
    from auditors.plan import AuditInput
    from auditors.sources import KafkaSource
    from eosctl.config.model import Cluster, Sink

    cluster = Cluster(name="bench", bootstrap_servers=bootstrap)
    values = {"raw": {"value_column": "payload"}, "md5": {"value_hash_column": "payload_md5"}}
    sink_of = Sink(duckdb=str(sink), table="sink", key_column="order_id" if key else None,
                   **values.get(value or "", {}))
    inp = AuditInput(source=KafkaSource(cluster), sink=sink_of,
                     topics=(topic,), cluster=cluster, content_check=content)
    t0 = time.monotonic()
    report = engines.run(inp, EngineOptions(engine=engine, content_check=content), started=t0)
    return time.monotonic() - t0, report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", default="10M")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--txn", type=int, default=8000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--engines", default="local")
    ap.add_argument("--bootstrap")
    ap.add_argument("--skip-no-key", action="store_true", help="leave out the audit without a key column")
    args = ap.parse_args()
    records = parse_size(args.records)
    with tempfile.TemporaryDirectory(prefix="content-bench-") as tmp:
        work = Path(tmp)
        cluster = None
        bootstrap = args.bootstrap
        if bootstrap is None:
            from eosctl.sandbox import apache_kafka

            cluster = apache_kafka.start(work / "kafka", nodes=1, heap="768m", die_with_parent=True)
            bootstrap = cluster.bootstrap
        try:
            broker = "Apache Kafka 4.4 (one KRaft node, private)" if cluster else bootstrap
            topic = "content" + uuid.uuid4().hex[:6]
            t0 = time.monotonic()
            per = produce(bootstrap, topic, records, args.partitions, args.txn)
            print(f"wrote {records:,} records in {time.monotonic() - t0:.1f}s to {broker}", flush=True)
            sink = work / "sink.duckdb"
            build_sink(sink, topic, records, args.partitions, per)
            # (name, key column, content check): the audit without a key column reads no key at all; with
            # one, the key-duplicate rule reads the sink's keys whether or not the content check runs.
            variants = [("offsets only, no key column", False, False, None),
                        ("key column, --no-content-check", True, False, None),
                        ("key column, content check", True, True, None),
                        ("key + value column, content check", True, True, "raw"),
                        ("key + value md5 column, content check", True, True, "md5")]
            for engine in args.engines.split(","):
                best: dict[str, float] = {}
                for _ in range(args.repeat):
                    for name, key, content, value in variants:
                        if args.skip_no_key and not key:
                            best[name] = float("nan")
                            continue
                        seconds, report = run(bootstrap, topic, sink, engine, content, key, value)
                        assert not report.findings, [f.to_dict() for f in report.findings[:3]]
                        best[name] = min(best.get(name, seconds), seconds)
                        print(f"  {engine} {name}: {seconds:.2f}s", flush=True)
                offsets = sum(p.high_watermark - p.log_start_offset for p in report.partitions)
                base, keyed, content, raw, md5 = (best[v[0]] for v in variants)
                print(f"{engine}: {offsets:,} offsets, {args.partitions} partitions, broker {broker}: "
                      f"no key column {base:.2f}s, key column without content check {keyed:.2f}s, with it "
                      f"{content:.2f}s: content/keyed {content / keyed:.2f}x, content/no-key "
                      f"{content / base:.2f}x; with a value column {raw:.2f}s ({raw / content:.2f}x the "
                      f"key-only check, {raw / base:.2f}x no-key), with a value md5 column {md5:.2f}s "
                      f"({md5 / content:.2f}x the key-only check, {md5 / base:.2f}x no-key)", flush=True)
        finally:
            if cluster is not None:
                from eosctl.sandbox import apache_kafka

                apache_kafka.stop(cluster)


if __name__ == "__main__":
    main()
