"""Test and benchmark support (not shipped): a made-up DataSource with many partitions.

It exists to measure the UI thread's cost of one refresh at scale (1,000 partitions) and to test views
without a broker. Each fetch moves the offsets on, so a refresh really changes every row.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from eosctl.base.progress import Progress, Step
from eosctl.cluster.model import Kind, OffsetRange, PartitionLog, Transaction
from eosctl.inspection.capture import Capture
from eosctl.inspection.lag import LagSnapshot, PartitionLag
from eosctl.inspection.ledger import Ledger, LedgerFlag, PartitionLedger
from eosctl.report.findings import AuditReport, Finding, PartitionSummary
from eosctl.txn.opentxn import OpenTxn
from eosctl.txn.producers import ProducerRow
from eosctl.txn.transactions import HangingReport, TxnInfo
from tui.sources import Dashboard, LagTracker


class SyntheticSource:
    is_snapshot = False

    def __init__(
        self,
        partitions: int = 1000,
        topic: str = "synth.orders",
        clock=time.time,
        findings: int | None = None,
    ) -> None:
        self.partitions = partitions
        self.findings = findings  # how many findings run_audit reports (None: one per 50 partitions)
        self.topic = topic
        self.label = f"synthetic {partitions} partitions"
        self.pipeline = "synthetic"
        self.clock = clock
        self.round = 0
        self.tracker = LagTracker()

    def fetch(self) -> Dashboard:
        self.round += 1
        now = self.clock()
        logs = [self._log(p) for p in range(self.partitions)]
        cap = Capture(datetime.fromtimestamp(now, UTC), "synthetic:9092", self.pipeline, "synth.sink",
                      [self.topic], logs={(lg.topic, lg.partition): lg for lg in logs},
                      ledger=self._ledger(logs), hanging=HangingReport(900.0, self.partitions))
        cap.lag = LagSnapshot(
            int(now * 1000), [self._lag(log, now) for log in logs], {"synth.sink": "STABLE"}
        )
        cap.producers = [
            ProducerRow(
                log.topic, log.partition, 1000 + log.partition, 0, log.high_watermark, int(now * 1000), None
            )
            for log in logs
        ]
        cap.transactions = [
            TxnInfo(
                f"synth.tx{p}", 3000 + p, 0, "Ongoing", 60_000, int(now * 1000) - 5_000, 0, ((self.topic, p),)
            )
            for p in range(0, self.partitions, 10)
        ]
        dash = Dashboard(cap)
        self.tracker.add(dash)
        return dash

    def _lag(self, log: PartitionLog, now: float) -> PartitionLag:
        committed = max(0, log.last_stable_offset - (log.partition * self.round) % 17)
        txn = next((t for t in log.transactions if t.outcome == "OPEN"), None)
        open_txn = OpenTxn(txn.producer_id, 0, txn.first_offset, int(now * 1000) - 5_000) if txn else None
        return PartitionLag(
            "synth.sink",
            log.topic,
            log.partition,
            committed,
            0,
            log.last_stable_offset,
            log.high_watermark,
            log.last_stable_offset - committed,
            True,
            int(now * 1000) - 2_000,
            open_txn,
        )

    def _log(self, p: int) -> PartitionLog:
        hw = 1000 + p + self.round * 7
        # data, commit marker, aborted run, its marker, then data up to an open transaction on every 10th.
        ranges = [
            OffsetRange(0, 99, Kind.DATA),
            OffsetRange(100, 100, Kind.MARKER, 1000 + p, 0),
            OffsetRange(101, 110, Kind.ABORTED, 2000 + p, 0),
            OffsetRange(111, 111, Kind.MARKER, 2000 + p, 0),
        ]
        txns = [
            Transaction(1000 + p, 0, 0, 99, "COMMIT", 100, 100),
            Transaction(2000 + p, 0, 101, 110, "ABORT", 111, 10),
        ]
        if p % 10 == 0:
            ranges += [
                OffsetRange(112, hw - 11, Kind.DATA),
                OffsetRange(hw - 10, hw - 1, Kind.OPEN, 3000 + p, 0),
            ]
            txns.append(Transaction(3000 + p, 0, hw - 10, hw - 1, "OPEN", None, 10))
            lso = hw - 10
        else:
            ranges.append(OffsetRange(112, hw - 1, Kind.DATA))
            lso = hw
        return PartitionLog(self.topic, p, 0, hw, lso, 0, hw, ranges, txns)

    def _ledger(self, logs: list[PartitionLog]) -> Ledger:
        parts = []
        for log in logs:
            flags = []
            if log.partition % 50 == 7:
                flags.append(
                    LedgerFlag("duplicate", 5, 9, 5, "5 extra sink rows for offsets stored more than once")
                )
            parts.append(
                PartitionLedger(
                    log.topic,
                    log.partition,
                    rows=log.committed_records,
                    distinct_offsets=log.committed_records,
                    min_offset=0,
                    max_offset=log.last_stable_offset - 1,
                    stored_offset=log.last_stable_offset,
                    committed_offset=log.last_stable_offset,
                    log_start_offset=0,
                    high_watermark=log.high_watermark,
                    last_stable_offset=log.last_stable_offset,
                    flags=flags,
                )
            )
        return Ledger(self.pipeline, "synthetic.duckdb (orders_sink)", "synthetic.sink", True, parts)

    def partition_log(self, topic: str, partition: int, around: int | None) -> PartitionLog:
        return self._log(partition)

    def can_audit(self) -> str | None:
        return None

    def run_audit(self, progress: Progress) -> AuditReport:
        n = self.partitions
        for i in range(0, n, max(1, n // 10)):
            progress(Step(f"partition {i}/{n}", i, n))
        if self.findings is None:
            findings = [Finding("duplicate", self.topic, p, 5, 9, 5) for p in range(7, n, 50)]
        else:  # e.g. 100k findings: a sink that duplicated every other offset
            findings = [
                Finding("duplicate", self.topic, i % n, 2 * (i // n), 2 * (i // n), 1)
                for i in range(self.findings)
            ]
        parts = [PartitionSummary(self.topic, p, 0, 1000, 1000, 990, 990) for p in range(n)]
        return AuditReport.build(parts, findings, sink="synthetic.duckdb (orders_sink)")

    def close(self) -> None:
        pass


class Explained(SyntheticSource):
    """A synthetic cluster whose audit returns findings with causes (the longest: 544 characters)."""

    def run_audit(self, progress):
        from tests.unit.rules.test_causes import report  # the findings the unit tests of causes build

        return report()
