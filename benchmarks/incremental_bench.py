"""The incremental audit's cost after new offsets on top of audited ones, against reading those new records
with a read_committed consumer, in the same run (real I/O: the records come from a broker, the sink from a
DuckDB file).

N records with keys are written in transactions over P partitions of a private Apache Kafka (one KRaft node,
eosctl.sandbox.apache_kafka; or --bootstrap), the sink holds each committed record once with its key; a
first `--incremental` audit (no state yet: a full one) writes the state. Then NEW more records are written
and their rows appended to the sink, and, best of --repeat each:

- baseline: a confluent-kafka consumer (isolation.level read_committed) reads the NEW records, assigned at
  the offsets the first audit ended at, until every partition reached its LSO;
- the incremental audit of them, each time from a copy of the first audit's state (with the key column:
  the key index is looked up for every new key, and the content check, on by default as in a full audit,
  compares the new rows with their records; --no-content-check: without it).

The ratio is incremental / consumer (issue 39's target: at most 3x). A full audit of the same data by the
local engine is timed once for reference, and its findings compared with the incremental audit's.

    python benchmarks/incremental_bench.py [--records 10M] [--new 500K] [--partitions 8] [--txn 8000]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
import uuid
from pathlib import Path

from benchbroker import broker  # benchmarks/ is on the path: run as python benchmarks/NAME.py
from benchdata import keyed_flags, parse_size, produce_keyed, write_keyed


def sink_rows(path: Path, topic: str, first: int, records: int, partitions: int, per: int) -> None:
    import duckdb

    lo, hi = first // partitions, (first + records) // partitions
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE IF NOT EXISTS sink (src_topic VARCHAR, src_partition INTEGER, "
                "src_offset BIGINT, order_id VARCHAR)")
    con.execute(f"""
        INSERT INTO sink SELECT '{topic}', p::INTEGER, (i + i // {per})::BIGINT, p || '-' || i
        FROM range({partitions}) t(p), range({lo}, {hi}) r(i) ORDER BY p, i""")
    con.close()


def consume(bootstrap: str, topic: str, starts: dict[int, int]) -> tuple[float, int]:
    """(seconds, records) to read from ``starts`` up to each partition's LSO, read_committed."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-" + uuid.uuid4().hex[:6],
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "enable.partition.eof": True, "fetch.max.bytes": 64 << 20})
    try:
        t0 = time.monotonic()
        c.assign([TopicPartition(topic, p, o) for p, o in starts.items()])
        left, n = set(starts), 0
        deadline = time.monotonic() + 600
        while left and time.monotonic() < deadline:
            for m in c.consume(10_000, 1.0):
                if m.error():
                    if m.error().code() == -191:  # _PARTITION_EOF: this partition is read up to its LSO
                        left.discard(m.partition())
                    continue
                n += 1
        assert not left, f"partitions not read to their end: {left}"
        return time.monotonic() - t0, n
    finally:
        c.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    keyed_flags(ap, records="10M", repeat=2)
    ap.add_argument("--new", default="500K", help="keyed records written after the first audit")
    ap.add_argument("--no-key", action="store_true", help="audit offsets only (no key column)")
    ap.add_argument("--no-content-check", action="store_true",
                    help="with the key column, audit without the content check (both audits)")
    args = ap.parse_args()
    records, new = parse_size(args.records), parse_size(args.new)
    from auditors import audit
    from auditors.engine import EngineOptions
    from auditors.incremental import audit_incremental
    from eosctl.config.model import Cluster, Sink
    from eosctl.config.target import Target

    with tempfile.TemporaryDirectory(prefix="incremental-bench-") as tmp, \
            broker("kafka", args.bootstrap) as kafka:
        work, bootstrap = Path(tmp), kafka.bootstrap
        topic, per = write_keyed(bootstrap, kafka.name, "incr", records, args.partitions, args.txn)
        sink = work / "sink.duckdb"
        sink_rows(sink, topic, 0, records, args.partitions, per)
        cluster = Cluster(name="bench", bootstrap_servers=bootstrap)
        target = Target(cluster, None, None, (topic,), None)
        sink_of = Sink(duckdb=str(sink), table="sink", key_column=None if args.no_key else "order_id")
        state0 = work / "state0.duckdb"
        t0 = time.monotonic()
        content = not args.no_content_check
        first = audit_incremental(target, sink_of, str(state0), started=t0, content=content)
        print(f"first --incremental audit (full, writes the state): {time.monotonic() - t0:.2f}s, "
              f"{len(first.findings)} findings; state {state0.stat().st_size / 1e6:.0f} MB", flush=True)
        assert not first.findings, [f.to_dict() for f in first.findings[:3]]
        ends = {p.partition: p.last_stable_offset for p in first.partitions}

        t0 = time.monotonic()
        produce_keyed(bootstrap, topic, new, args.partitions, args.txn, first=records, create=False)
        sink_rows(sink, topic, records, new, args.partitions, per)
        print(f"wrote {new:,} more records and their rows in {time.monotonic() - t0:.1f}s", flush=True)

        consumer, incremental = float("inf"), float("inf")
        for r in range(args.repeat):
            seconds, n = consume(bootstrap, topic, ends)
            assert n == new, (n, new)
            consumer = min(consumer, seconds)
            print(f"  read_committed consumer, {n:,} records: {seconds:.2f}s", flush=True)
            state = work / f"state{r + 1}.duckdb"
            shutil.copyfile(state0, state)
            t0 = time.monotonic()
            report = audit_incremental(target, sink_of, str(state), started=t0, content=content)
            seconds = time.monotonic() - t0
            run = report.engine["incremental"]
            assert not run["full"] and run["new_sink_rows"] == new, run
            incremental = min(incremental, seconds)
            print(f"  incremental audit: {seconds:.2f}s ({run['new_offsets']:,} offsets read, "
                  f"{run['new_sink_rows']:,} sink rows, {run['keys_checked']:,} keys looked up)",
                  flush=True)
        t0 = time.monotonic()
        options = EngineOptions(engine="local", content_check=content)  # as the incremental audits
        full = audit(target, sink_of, options=options, started=t0)
        full_s = time.monotonic() - t0
        same = [f.to_dict() for f in full.findings] == [f.to_dict() for f in report.findings]
        check = "with" if content and not args.no_key else "no"
        print(f"full audit (local engine, {check} content check) of the same data: {full_s:.2f}s; same "
              f"findings: {same}", flush=True)
        offsets = sum(p.high_watermark - p.log_start_offset for p in report.partitions)
        what = "offsets only" if args.no_key else f"key column, {check} content check"
        print(f"{what}: {new:,} new records on top of "
              f"{records:,} audited ({offsets:,} offsets, {args.partitions} partitions), broker "
              f"{kafka.name}: "
              f"incremental audit {incremental:.2f}s, read_committed consumer {consumer:.2f}s: "
              f"{incremental / consumer:.2f}x; full audit {full_s:.2f}s", flush=True)


if __name__ == "__main__":
    main()
