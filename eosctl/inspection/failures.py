"""`eosctl audit --store-failures DIR`: the rows behind each finding, as Parquet files a repair job reads.

``findings.parquet`` (one row per finding, its ``id``), ``kafka_records.parquet`` (the records Kafka holds at
each finding's offsets, read read_committed) and ``sink_rows.parquet`` (the sink's rows at them, every column
of the table), both with the ``finding_id`` they belong to. Written with DuckDB into a directory beside DIR,
renamed to DIR once complete: a failed run leaves nothing half-written."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from eosctl.base.errors import EosctlError
from eosctl.cluster.consumed import headers, placed
from eosctl.config.model import Cluster, Sink
from eosctl.report.findings import AuditReport, Finding
from eosctl.sink import frozen, open_reader
from eosctl.sink.sql import ident

if TYPE_CHECKING:
    import pyarrow as pa

MAX_PER_FINDING = 100_000  # records and rows written per finding
READ_SECONDS = 30.0  # reading one finding's records from Kafka


def storable(sink: Sink) -> str | None:
    """Why --store-failures cannot read this sink's rows, in one sentence; None if it can."""
    if sink.duckdb or sink.parquet:
        return None
    return "--store-failures reads the rows of DuckDB and Parquet sinks; this sink is neither"


def store_failures(report: AuditReport, sink: Sink, cluster: Cluster, out_dir: str) -> dict[str, int]:
    """Write the three files into ``out_dir`` (which must not exist); rows written per file."""
    import duckdb  # lazy: see docs/imports.md

    if os.path.lexists(out_dir):
        raise EosctlError(f"--store-failures {out_dir} exists; name a new directory")
    parent = os.path.dirname(os.path.abspath(out_dir))
    work = tempfile.mkdtemp(prefix=".eosctl-failures-", dir=parent)
    try:
        findings = [f for f in report.findings]
        counts = {}
        con = duckdb.connect()
        try:
            con.register("found", _findings_table(findings))
            con.execute(f"COPY found TO '{_path(work, 'findings.parquet')}' (FORMAT parquet)")
            counts["findings"] = len(findings)
            records = _records_table(findings, cluster)
            con.register("records", records)
            con.execute(f"COPY records TO '{_path(work, 'kafka_records.parquet')}' (FORMAT parquet)")
            counts["kafka_records"] = records.num_rows
        finally:
            con.close()
        counts["sink_rows"] = _sink_rows(findings, sink, _path(work, "sink_rows.parquet"))
        os.rename(work, out_dir)
        return counts
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def _path(directory: str, name: str) -> str:
    return os.path.join(directory, name).replace("'", "''")


def _ranged(findings: list[Finding]) -> Iterator[tuple[int, Finding]]:
    """(id, finding) of the findings at offsets of one partition."""
    for i, f in enumerate(findings):
        if f.topic is not None and f.partition is not None and f.first_offset is not None \
                and f.last_offset is not None:
            yield i, f


def _findings_table(findings: list[Finding]) -> pa.Table:
    import pyarrow as pa  # lazy: see docs/imports.md

    return pa.table({
        "id": pa.array(range(len(findings)), pa.int64()),
        "kind": [f.kind for f in findings], "topic": [f.topic for f in findings],
        "partition": pa.array([f.partition for f in findings], pa.int32()),
        "first_offset": pa.array([f.first_offset for f in findings], pa.int64()),
        "last_offset": pa.array([f.last_offset for f in findings], pa.int64()),
        "count": pa.array([f.count for f in findings], pa.int64()), "key": [f.key for f in findings],
        "waived": [f.waived for f in findings], "detail": [f.detail for f in findings],
        "cause": [None if f.cause is None else f.cause.summary for f in findings]})


_RECORD_SCHEMA: Any = None


def _record_schema() -> Any:
    import pyarrow as pa  # lazy: see docs/imports.md

    global _RECORD_SCHEMA
    if _RECORD_SCHEMA is None:
        header = pa.struct([("key", pa.string()), ("value", pa.binary())])
        _RECORD_SCHEMA = pa.schema([("finding_id", pa.int64()), ("topic", pa.string()),
                                    ("partition", pa.int32()), ("offset", pa.int64()),
                                    ("timestamp", pa.int64()), ("key", pa.binary()), ("value", pa.binary()),
                                    ("headers", pa.list_(header))])
    return _RECORD_SCHEMA


def _records_table(findings: list[Finding], cluster: Cluster) -> pa.Table:
    """Kafka's committed records at each finding's offsets (at most MAX_PER_FINDING each)."""
    import pyarrow as pa  # lazy: see docs/imports.md

    rows: list[dict[str, Any]] = []
    ranged = list(_ranged(findings))
    if ranged:
        from confluent_kafka import Consumer, KafkaError, TopicPartition  # lazy: see docs/imports.md

        consumer = Consumer({**cluster.confluent(), "group.id": "eosctl-store-failures",
                             "enable.auto.commit": False, "isolation.level": "read_committed",
                             "enable.partition.eof": True, "auto.offset.reset": "earliest"})
        try:
            for i, f in ranged:
                assert f.topic is not None and f.partition is not None and f.first_offset is not None
                last = min(f.last_offset or f.first_offset, f.first_offset + MAX_PER_FINDING - 1)
                consumer.assign([TopicPartition(f.topic, f.partition, f.first_offset)])
                deadline = time.monotonic() + READ_SECONDS
                while time.monotonic() < deadline:
                    msg = consumer.poll(1.0)
                    if msg is None:
                        continue
                    error = msg.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            break
                        raise EosctlError(f"--store-failures: reading {f.topic}-{f.partition} at "
                                          f"{f.first_offset}: {error.str()}")
                    offset = placed(msg)[2]
                    if offset > last:
                        break
                    rows.append({"finding_id": i, "topic": f.topic, "partition": f.partition,
                                 "offset": offset, "timestamp": msg.timestamp()[1], "key": msg.key(),
                                 "value": msg.value(),
                                 "headers": [{"key": k, "value": v} for k, v in headers(msg)]})
                    if offset >= last:
                        break
        finally:
            consumer.close()
    return pa.Table.from_pylist(rows, schema=_record_schema())


def _sink_rows(findings: list[Finding], sink: Sink, path: str) -> int:
    """The sink's rows at each finding's offsets, every column, with the finding's id; rows written."""
    import pyarrow as pa  # lazy: see docs/imports.md

    ranged = list(_ranged(findings))
    wanted = pa.table({"finding_id": pa.array([i for i, _ in ranged], pa.int64()),
                       "f_topic": [f.topic for _, f in ranged],
                       "f_partition": pa.array([f.partition for _, f in ranged], pa.int64()),
                       "f_first": pa.array([f.first_offset for _, f in ranged], pa.int64()),
                       "f_last": pa.array([min(f.last_offset or 0,
                                               (f.first_offset or 0) + MAX_PER_FINDING - 1)
                                           for _, f in ranged], pa.int64())})
    with frozen(sink) as fixed, open_reader(fixed) as reader:
        con = getattr(reader, "conn", None)
        relation = getattr(reader, "relation", None)
        if con is None or relation is None:
            raise EosctlError(storable(sink) or "--store-failures cannot read this sink's rows")
        con.register("eosctl_wanted", wanted)
        t, p, o = (ident(sink.topic_column), ident(sink.partition_column), ident(sink.offset_column))
        con.execute(f"COPY (SELECT w.finding_id, s.* FROM {relation} s JOIN eosctl_wanted w "
                    f"ON CAST(s.{t} AS VARCHAR) = w.f_topic AND TRY_CAST(s.{p} AS BIGINT) = w.f_partition "
                    f"AND TRY_CAST(s.{o} AS BIGINT) BETWEEN w.f_first AND w.f_last "
                    f"ORDER BY w.finding_id, TRY_CAST(s.{o} AS BIGINT)) TO '{path}' (FORMAT parquet)")
        return int(con.execute(f"SELECT count(*) FROM read_parquet('{path}')").fetchone()[0])
