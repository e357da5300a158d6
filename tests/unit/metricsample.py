"""A pipeline state, built by hand, that makes the exporter emit every metric family
(eosctl.exporter.metrics).

Used by test_metrics.py (exact values) and test_docs.py (docs/metrics.md against what is emitted). The
model is a stand-in with the attributes of eosctl.inspection.live.LiveModel that the metrics read (contract
2): the
state is fixed, and ``refresh`` fails the test, so a test also proves a scrape never reads the cluster.
"""

from __future__ import annotations

from datetime import UTC, datetime

from eosctl.cluster.groups import GroupDescription, Member
from eosctl.cluster.model import PartitionLog, ProducerState
from eosctl.exporter.metrics import Source
from eosctl.inspection.capture import SECTIONS, Capture
from eosctl.inspection.lag import LagSnapshot, PartitionLag
from eosctl.inspection.live import LagHistory
from eosctl.report.findings import AuditReport, Finding, PartitionSummary
from eosctl.txn.opentxn import OpenTxn
from eosctl.txn.pendingoffsets import Holder, PendingCommit
from eosctl.txn.transactions import Hanging, HangingReport, TxnInfo

NOW_MS = 1_790_000_000_000
TOPIC = "orders"
GROUP = "billing"


class Model:
    """What eosctl.exporter.metrics reads of a LiveModel, with a fixed state."""

    def __init__(self, cap: Capture, history: LagHistory) -> None:
        self.current = cap
        self.lag_history = history
        self.up = True
        self.last_refresh_seconds = 0.25
        self.refresh_errors = dict.fromkeys(SECTIONS, 0) | {"lag": 2}
        self.ages = dict.fromkeys(SECTIONS, 1.5)

    def section_age(self, name: str, now: float | None = None) -> float | None:
        return self.ages.get(name)

    def refresh(self) -> Capture:
        raise AssertionError("a scrape must never read the cluster")

    def close(self) -> None:
        pass


def capture() -> Capture:
    """orders[0]: fully consumed, the last offset a COMMIT marker (HW 11, committed 10); a fencing event and
    two zombie batches in its log. orders[1]: an open transaction of producer 7 from offset 17 holds the LSO
    (HW 20), the group is 5 records behind."""
    fenced = ProducerState(producer_id=3, v1_markers=1, v1_takeovers=1, zombie_total=2)
    logs = {
        (TOPIC, 0): PartitionLog(TOPIC, 0, 0, 11, 11, 0, 11, producers={3: fenced}),
        (TOPIC, 1): PartitionLog(TOPIC, 1, 2, 20, 17, 2, 20),
    }
    txn = OpenTxn(7, 0, 17, NOW_MS - 1_200_000)
    lag = LagSnapshot(NOW_MS, [
        PartitionLag(GROUP, TOPIC, 0, committed=10, log_start=0, lso=11, hw=11, records_behind=0),
        PartitionLag(GROUP, TOPIC, 1, committed=12, log_start=2, lso=17, hw=20, records_behind=5,
                     oldest_unconsumed_ms=NOW_MS - 30_000, open_txn=txn,
                     pending=PendingCommit(GROUP, frozenset({(TOPIC, 1)}), 12, (
                         Holder(7, 0, 40, "app-1", "Ongoing", NOW_MS - 1_200_000, True),))),
    ], {GROUP: "STABLE"}, {GROUP: "consumer"},
        {GROUP: GroupDescription(GROUP, "consumer", "STABLE", 4, (
            Member("m-1", "billing-1", "/10.0.0.7", ((TOPIC, 0),)),
            Member("m-2", "billing-2", "/10.0.0.8", ((TOPIC, 1),))))},
        share_warnings={"billing-share": "share group billing-share reads transactional topic ..."})
    hanging = Hanging(TOPIC, 1, 7, 0, 17, 1200.0, ("lso",), lso=17, hw=20, transactional_id="app-1",
                      age_source="coordinator")
    cap = Capture(captured_at=datetime.fromtimestamp(NOW_MS / 1000, UTC), bootstrap="b:9092",
                  pipeline="payments", group=GROUP, topics=[TOPIC], logs=logs,
                  transactions=[TxnInfo("app-1", 7, 0, "Ongoing", 60_000, NOW_MS - 1_200_000, 1),
                                TxnInfo("app-2", 8, 3, "CompleteCommit", 60_000, None, 1),
                                TxnInfo("app-2pc", 9, 1, "Ongoing", 2**31 - 1, NOW_MS - 86_400_000, 1),
                                TxnInfo("app-2pc-done", 10, 1, "CompleteCommit", 2**31 - 1, NOW_MS, 1)],
                  lag=lag, hanging=HangingReport(900.0, 2, [hanging]), hanging_candidates=[hanging],
                  hanging_checked_ms=NOW_MS)
    cap.sections = dict.fromkeys(SECTIONS, "ok")
    return cap


def audit() -> AuditReport:
    return AuditReport.build(
        [PartitionSummary(TOPIC, 0, 0, 11, 11, 10, 11), PartitionSummary(TOPIC, 1, 2, 17, 20, 12, 9)],
        [Finding("gap", TOPIC, 1, 4, 6, 3), Finding("duplicate", TOPIC, 0, 2, 2, 1)],
        # an incremental audit (auditors.incremental): what it read, when the last full one ran
        engine={"name": "incremental", "incremental": {"full": False, "reason": "", "new_offsets": 40,
                                                       "new_sink_rows": 38, "keys_checked": 0,
                                                       "full_at": NOW_MS / 1000 - 3600}})


def source(with_audit: bool = True) -> Source:
    cap = capture()
    cap.unreadable = {(TOPIC, 2): "no leader: the brokers holding its replicas are down"}  # orders[2]: dark
    history = LagHistory()
    history.add(cap.lag)
    src = Source("prod", "payments", Model(cap, history))  # type: ignore[arg-type]
    src.refreshed(cap)
    if with_audit:
        # a MirrorMaker 2 replica pipeline's failover readiness (eosctl.inspection.failover)
        from eosctl.inspection.failover import Failover

        failover = [Failover(GROUP, TOPIC, 0, f"src.{TOPIC}", 11, 9, 10, 10, 10, 1, 0)]
        src.audited(audit(), 2.5, failover=failover)
        src.audit.finished_at = NOW_MS / 1000
    return src
