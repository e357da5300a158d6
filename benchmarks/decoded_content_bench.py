"""The decoded content check's cost (issue 50, item 5): an audit comparing each sink row's typed columns
with its record's Avro value, decoded through a Schema Registry, against the raw-bytes content check on
the same records, and against fastavro decoding the same values alone; one run, real I/O.

N records are written in committed transactions over P partitions of a private Apache Kafka (one KRaft
node, eosctl.sandbox.apache_kafka; or --bootstrap), each keyed ``p-i`` (a string key, as a Connect sink's
StringConverter reads it) with an Avro value framed by confluent-kafka's wire format (magic byte, schema
id) under a schema registered in a registry on 127.0.0.1 (tests/support/registrystub.py: the schema is fetched
once, so the registry is not what is measured). Two DuckDB sinks hold every committed record once: one
with the key and the value's bytes (``value_column``: the raw-bytes check), one with the key and the
value's fields as typed columns (BIGINT, DECIMAL(12, 2), TIMESTAMP, VARCHAR for the enum and a string:
the decoded check, columns named like the fields, so no mapping is written). Audits (local engine, best of
--repeat): the keyed audit without the check, the raw-bytes check, the decoded check; then fastavro's
``schemaless_reader`` over the same N payloads in memory (after their 5 bytes of framing), one call a
record, in as many processes as the audit's pool (one a core), with the schema's logical types and
without them (as the check reads values: auditors.fieldcolumns), as the baseline no check can beat
by decoding with fastavro.

    python benchmarks/decoded_content_bench.py [--records 10M] [--partitions 8] [--txn 8000]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import struct
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from benchbroker import broker  # benchmarks/ is on the path: run as python benchmarks/NAME.py
from benchdata import create_topics, keyed_flags, parse_size

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.support.registrystub

SCHEMA = {
    "type": "record", "name": "Order", "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
        {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID", "SHIPPED"]}},
        {"name": "note", "type": "string"},
    ],
}
STATES = ("NEW", "PAID", "SHIPPED")
T0 = datetime(2026, 12, 1, 10, 0, 0, 123456, tzinfo=UTC)


def order(p: int, i: int) -> dict:
    """Partition p's i-th record's value (the sinks' SQL builds the same from p and i)."""
    return {"id": i, "amount": Decimal(i % 1_000_000).scaleb(-2), "placed": T0 + timedelta(seconds=i),
            "state": STATES[i % 3], "note": f"order {p}-{i}"}


def produce(bootstrap: str, topic: str, schema_id: int, records: int, partitions: int,
            txn: int) -> tuple[int, list[list[bytes]]]:
    """The records, in transactions of ``txn`` (txn/partitions per partition): partition p's i-th record at
    offset i + i // per. Returns per and each partition's framed values, in offset order."""
    import fastavro
    from confluent_kafka import Producer

    parsed = fastavro.parse_schema(SCHEMA)
    prefix = b"\x00" + struct.pack(">I", schema_id)
    create_topics(bootstrap, {topic: partitions})
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}.bench", "linger.ms": 20,
                  "batch.size": 1 << 20, "queue.buffering.max.messages": 2_000_000,
                  "compression.type": "none"})
    p.init_transactions(60)
    per = txn // partitions
    n = records // partitions
    values: list[list[bytes]] = [[] for _ in range(partitions)]
    out = io.BytesIO()
    for start in range(0, n, per):
        p.begin_transaction()
        for part in range(partitions):
            for i in range(start, min(n, start + per)):
                out.seek(0)
                out.truncate()
                fastavro.schemaless_writer(out, parsed, order(part, i))
                value = prefix + out.getvalue()
                values[part].append(value)
                while True:
                    try:
                        p.produce(topic, key=f"{part}-{i}".encode(), value=value, partition=part)
                        break
                    except BufferError:  # the local queue is full: let librdkafka send some first
                        p.poll(0.05)
        p.commit_transaction(120)
    return per, values


def build_sinks(work: Path, topic: str, partitions: int, n: int, per: int,
                values: list[list[bytes]]) -> tuple[Path, Path]:
    import duckdb
    import pyarrow as pa

    coords = (f"'{topic}' AS src_topic, p::INTEGER AS src_partition, (i + i // {per})::BIGINT AS src_offset, "
              "p || '-' || i AS order_id")
    raw, typed = work / "raw.duckdb", work / "typed.duckdb"
    con = duckdb.connect(str(raw))
    con.execute("CREATE TABLE sink (src_topic VARCHAR, src_partition INTEGER, src_offset BIGINT, "
                "order_id VARCHAR, payload BLOB)")
    for part in range(partitions):
        chunk = pa.table({"p": pa.array([part] * n, pa.int64()), "i": pa.array(range(n), pa.int64()),  # noqa: F841
                          "payload": pa.array(values[part], pa.binary())})  # chunk: read by the SQL
        con.execute(f"INSERT INTO sink SELECT {coords}, payload FROM chunk")
    con.close()
    con = duckdb.connect(str(typed))
    con.execute(f"""
        CREATE TABLE sink AS
        SELECT {coords}, i::BIGINT AS id, ((i % 1000000)::DECIMAL(12, 0) / 100)::DECIMAL(12, 2) AS amount,
               TIMESTAMP '{T0.replace(tzinfo=None).isoformat(sep=" ")}' + to_seconds(i) AS placed,
               ['NEW', 'PAID', 'SHIPPED'][i % 3 + 1] AS state, 'order ' || p || '-' || i AS note
        FROM range({partitions}) t(p), range({n}) r(i)""")
    con.close()
    return raw, typed


def audit(bootstrap: str, registry: str | None, topic: str, sink: Path, content: bool,
          value_column: str | None = None):
    from auditors import engine as engines
    from auditors.engine import EngineOptions
    from auditors.plan import AuditInput
    from auditors.sources import KafkaSource
    from eosctl.config.model import Cluster, Sink

    cluster = Cluster(name="bench", bootstrap_servers=bootstrap, schema_registry_url=registry)
    sink_of = Sink(duckdb=str(sink), table="sink", key_column="order_id", value_column=value_column)
    inp = AuditInput(source=KafkaSource(cluster), sink=sink_of, topics=(topic,), cluster=cluster,
                     content_check=content)
    t0 = time.monotonic()
    report = engines.run(inp, EngineOptions(engine="local", content_check=content), started=t0)
    return time.monotonic() - t0, report


_VALUES: list[list[bytes]] = []  # the payloads, for the forked workers of fastavro_alone


def _decode_partitions(job: tuple[list[int], bool]) -> int:
    import gc

    import fastavro

    from auditors.fieldcolumns import plain_schema

    parts, plain = job
    parsed = fastavro.parse_schema(plain_schema(SCHEMA)[0] if plain else SCHEMA)
    read = fastavro.schemaless_reader
    gc.disable()  # as in the audit's tasks (eosctl.base.gcpause)
    n = 0
    for p in parts:
        for v in _VALUES[p]:
            read(io.BytesIO(v[5:]), parsed, None)
            n += 1
    return n


def fastavro_alone(values: list[list[bytes]], plain: bool = False) -> tuple[float, int, int]:
    """fastavro's schemaless_reader over every payload (in memory), one call a record, the partitions
    shared among as many forked processes as the local engine's pool has (one a core): (seconds, records,
    processes). ``plain``: the schema without its logical types, as the check reads it."""
    import multiprocessing

    from auditors.local import default_workers

    _VALUES[:] = values
    workers = max(default_workers(), 1)
    jobs = [([p for p in range(len(values)) if p % workers == w], plain) for w in range(workers)]
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(workers) as pool:
        t0 = time.monotonic()
        n = sum(pool.map(_decode_partitions, jobs))
        seconds = time.monotonic() - t0
    return seconds, n, workers


@contextmanager
def _column_pass(on: bool) -> Iterator[None]:
    """The decoded check with auditors.fieldfast (on) or record by record (its answer None: the path before
    it); the local engine's workers are forked from here, so they see it too."""
    from auditors import fieldfast

    column_pass = fieldfast.partition
    if not on:
        fieldfast.partition = lambda *args, **kwargs: None
    try:
        yield
    finally:
        fieldfast.partition = column_pass


def _load() -> str:
    return "load average " + ", ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    from tests.support.registrystub import RegistryStub

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    keyed_flags(ap, records="10M", repeat=1)
    ap.add_argument("--record-by-record", action="store_true",
                    help="also the decoded check without its column pass (auditors.fieldfast): as before")
    args = ap.parse_args()
    records = parse_size(args.records)
    print(f"start: {_load()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="decoded-bench-") as tmp, RegistryStub() as registry, \
            broker("kafka", args.bootstrap) as kafka:
        work, bootstrap = Path(tmp), kafka.bootstrap
        topic = f"decoded{int(time.time()) % 100000}"
        schema_id = registry.register(f"{topic}-value", json.dumps(SCHEMA))
        t0 = time.monotonic()
        per, values = produce(bootstrap, topic, schema_id, records, args.partitions, args.txn)
        print(f"wrote {records:,} Avro records in {time.monotonic() - t0:.1f}s to {kafka.name}", flush=True)
        raw, typed = build_sinks(work, topic, args.partitions, records // args.partitions, per, values)
        variants = [("keyed, --no-content-check", None, raw, False, None),
                    ("raw-bytes check (key + value bytes)", None, raw, True, "payload"),
                    ("decoded check (key bytes + Avro value fields)", registry.url, typed, True, None)]
        if args.record_by_record:
            variants.append(("decoded check, record by record", registry.url, typed, True, None))
        best: dict[str, float] = {}
        report = None
        for _ in range(args.repeat):
            for name, url, sink, content, value in variants:
                with _column_pass(name != "decoded check, record by record"):
                    seconds, report = audit(bootstrap, url, topic, sink, content, value)
                assert not report.findings, [f.to_dict() for f in report.findings[:3]]
                best[name] = min(best.get(name, seconds), seconds)
                print(f"  {name}: {seconds:.2f}s", flush=True)
        alone, n, workers = fastavro_alone(values)
        print(f"  fastavro schemaless_reader alone, {n:,} values in memory, {workers} processes: "
              f"{alone:.2f}s", flush=True)
        bare, n, workers = fastavro_alone(values, plain=True)
        print(f"  the same without logical types (as the check reads them): {bare:.2f}s", flush=True)
        assert report is not None
        offsets = sum(p.high_watermark - p.log_start_offset for p in report.partitions)
        keyed, rawcheck, decoded = (best[v[0]] for v in variants[:3])
        if args.record_by_record:
            old = best["decoded check, record by record"]
            print(f"  record by record / column pass: {old / decoded:.2f}x", flush=True)
        print(f"{offsets:,} offsets, {args.partitions} partitions, broker {kafka.name}, {_load()}: keyed "
              f"{keyed:.2f}s, raw-bytes check {rawcheck:.2f}s, decoded check {decoded:.2f}s, fastavro alone "
              f"{alone:.2f}s (without logical types {bare:.2f}s): decoded/raw {decoded / rawcheck:.2f}x, "
              f"decoded/fastavro {decoded / alone:.2f}x, fastavro/raw {alone / rawcheck:.2f}x (without "
              f"logical types {bare / rawcheck:.2f}x); what each check adds to the keyed audit: raw "
              f"{rawcheck - keyed:.2f}s, decoded {decoded - keyed:.2f}s ({(decoded - keyed) / alone:.2f}x "
              "fastavro alone)", flush=True)


if __name__ == "__main__":
    main()
