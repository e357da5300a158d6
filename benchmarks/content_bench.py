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
from pathlib import Path

from benchbroker import broker  # benchmarks/ is on the path: run as python benchmarks/NAME.py
from benchdata import VALUE, keyed_flags, parse_size, write_keyed


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
    keyed_flags(ap, records="10M", repeat=2)
    ap.add_argument("--engines", default="local")
    ap.add_argument("--skip-no-key", action="store_true", help="leave out the audit without a key column")
    args = ap.parse_args()
    records = parse_size(args.records)
    with tempfile.TemporaryDirectory(prefix="content-bench-") as tmp, \
            broker("kafka", args.bootstrap) as kafka:
        work, bootstrap = Path(tmp), kafka.bootstrap
        topic, per = write_keyed(bootstrap, kafka.name, "content", records, args.partitions, args.txn)
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
            print(f"{engine}: {offsets:,} offsets, {args.partitions} partitions, broker {kafka.name}: "
                  f"no key column {base:.2f}s, key column without content check {keyed:.2f}s, with it "
                  f"{content:.2f}s: content/keyed {content / keyed:.2f}x, content/no-key "
                  f"{content / base:.2f}x; with a value column {raw:.2f}s ({raw / content:.2f}x the "
                  f"key-only check, {raw / base:.2f}x no-key), with a value md5 column {md5:.2f}s "
                  f"({md5 / content:.2f}x the key-only check, {md5 / base:.2f}x no-key)", flush=True)


if __name__ == "__main__":
    main()
