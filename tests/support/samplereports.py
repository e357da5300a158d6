"""AuditReports built from eosctl.report.findings dataclasses, shaped like real audits (no broker, no
Spark)."""

from __future__ import annotations

from eosctl.cluster.model import Kind, OffsetRange, PartitionLog
from eosctl.report.findings import AuditReport, Finding, LogSegment, PartitionSummary
from eosctl.report.segments import log_segments

TOPIC = "demo.enriched"
ENGINE = {"spark_version": "4.0.1", "master": "local[2]", "partitions_seconds": 5.1, "keys_seconds": 2.0,
          "tasks": 3}


def txn_log(topic: str, partition: int, hw: int, every: int = 11, aborted: tuple[int, ...] = (),
            open_from: int | None = None, start: int = 0) -> PartitionLog:
    """Transactions of every-1 records + a marker; those starting at ``aborted`` offsets were aborted;
    from ``open_from`` on, one transaction is still open (the LSO)."""
    ranges, pos = [], start
    end = hw if open_from is None else open_from
    while pos < end:
        last = min(pos + every - 2, end - 1)
        kind = Kind.ABORTED if pos in aborted else Kind.DATA
        ranges.append(OffsetRange(pos, last, kind, 7, 0))
        if last + 1 < end:
            ranges.append(OffsetRange(last + 1, last + 1, Kind.MARKER, 7, 0))
        pos = last + 2
    if open_from is not None:
        ranges.append(OffsetRange(open_from, hw - 1, Kind.OPEN, 9, 0))
    lso = hw if open_from is None else open_from
    return PartitionLog(topic, partition, start, hw, lso, start, hw, ranges)


def summary(log: PartitionLog, sink_rows: int, segments: bool = True) -> PartitionSummary:
    expected = log.data_between(log.log_start_offset, log.last_stable_offset)
    return PartitionSummary(log.topic, log.partition, log.log_start_offset, log.last_stable_offset,
                            log.high_watermark, expected, sink_rows, 0, True,
                            log_segments(log) if segments else None)


def demo_report(invalid_rows: bool = False, key_kinds: bool = False) -> AuditReport:
    """Three partitions like the demo's: aborted leaks, a duplicate, a gap, a key duplicate, a hanging
    transaction, plus one finding of every other kind so every colour is on the page."""
    logs = [txn_log(TOPIC, 0, 122, aborted=(0, 44, 88), open_from=119),
            txn_log(TOPIC, 1, 190, aborted=(0, 33, 121)),
            txn_log(TOPIC, 2, 165, aborted=(33, 77))]
    findings = [
        Finding("phantom_aborted", TOPIC, 0, 0, 9, 10),
        Finding("duplicate", TOPIC, 0, 22, 24, 3),
        Finding("phantom_aborted", TOPIC, 0, 44, 53, 10),
        Finding("phantom_marker", TOPIC, 0, 65, 65, 1),
        Finding("key_duplicate", TOPIC, 0, 101, 117, 2, key="o-000300", offsets=(101, 117)),
        Finding("phantom_uncommitted", TOPIC, 0, 119, 121, 3),
        Finding("gap", TOPIC, 1, 22, 24, 3),
        Finding("phantom_aborted", TOPIC, 1, 33, 42, 10),
        Finding("phantom_beyond_hw", TOPIC, 1, 200, 203, 4),
        Finding("offset_mismatch", TOPIC, 2, 150, 163, 12,
                detail="sink stored next offset 150, group demo.sink committed 165"),
        Finding("phantom_aborted", TOPIC, 2, 77, 86, 10),
    ]
    if key_kinds:  # the kinds a Kafka stage audited by key lineage reports
        findings += [Finding("lost_key", TOPIC, 2, 10, 12, 3, detail="no output"),
                     Finding("duplicate_key", TOPIC, 1, 60, 60, 1, detail="key o-60; outputs out[1]@60"),
                     Finding("phantom_key", TOPIC, 2, 40, 41, 2, detail="key o-40; outputs out[2]@40"),
                     Finding("ahead_of_commit", TOPIC, 0, 190, 194, 5,
                             detail="outputs out[0]@300..304; group demo.stage committed 190"),
                     Finding("content_mismatch", TOPIC, 1, 20, 22, 3, detail="the sink stores offset+1")]
    if invalid_rows:  # rows no record can match: in the legend and the table, never on a bar
        findings.append(Finding("invalid_row", TOPIC, 2, None, None, 2, detail="src_offset is NULL"))
    parts = [summary(lg, rows) for lg, rows in zip(logs, (111, 167, 149), strict=True)]
    return AuditReport.build(parts, findings, sink="/tmp/demo/sink.duckdb (orders_sink)", group="demo.sink",
                             engine=dict(ENGINE), elapsed_seconds=14.2)


def many_partitions_report(n: int = 200, size: int = 10_000_000) -> AuditReport:
    """n partitions of ``size`` offsets each (no full log models: segments are made directly); findings
    in a few of them, among them a one-offset gap that must stay visible."""
    parts, findings = [], []
    bad = {3: [Finding("gap", "orders", 3, 5_000_000, 5_000_000, 1)],
           17: [Finding("duplicate", "orders", 17, 120, 121, 2),
                Finding("phantom_aborted", "orders", 17, 9_000_000, 9_000_009, 10)],
           42: [Finding("phantom_beyond_hw", "orders", 42, size + 5, size + 5, 1)],
           150: [Finding("gap", "orders", 150, 1_000, 2_999_999, 2_999_000)],
           199: [Finding("phantom_uncommitted", "orders", 199, size - 40, size - 1, 40)]}
    for p in range(n):
        segs = [LogSegment("MARKER", o, o + 99_000, 100) for o in range(0, size - 100_000, 100_000)]
        segs.append(LogSegment("ABORTED", 9_000_000, 9_000_009, 10))
        lso = size - 40 if p == 199 else size
        if p == 199:
            segs.append(LogSegment("OPEN", size - 40, size - 1, 40))
        segs.sort(key=lambda s: s.first)
        parts.append(PartitionSummary("orders", p, 0, lso, size, lso - 110, lso - 110, 0, True, tuple(segs)))
        findings += bad.get(p, [])
    return AuditReport.build(parts, findings, sink="s3://lake/orders/*.parquet (orders)", group="orders-sink",
                             engine=dict(ENGINE, tasks=n), elapsed_seconds=312.5)
