"""Where the TUI's data comes from: the live cluster (through the eosctl core) or a snapshot file.

Every method of a DataSource may block (broker, DuckDB, Spark), so the app only calls them from Textual
thread workers. Sources return the core's own dataclasses wrapped in one `Dashboard`; the views format
them and never recompute what the core computes (lag, hanging rules, ledger flags, statuses).
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from eosctl.errors import BrokerError, EosctlError
from eosctl.model import PartitionLog
from eosctl.progress import Progress

# run_audit(target, progress) -> eosctl.findings.AuditReport; injected by the CLI (tui never imports auditors)
AuditRunner = Callable[[Any, Progress], Any]
LagKey = tuple[str, str, int]  # group, topic, partition

# The live view scans at most this many offsets at the end of each partition per refresh, so a huge topic
# costs the same as a small one; older offsets are read on demand in the Log view.
TAIL_OFFSETS = 5_000
# Log view: offsets scanned around the one asked for.
LOG_WINDOW = 2_000
# Lag samples kept per partition for the sparklines (and the Burrow-style window).
HISTORY = 20


@dataclass
class Dashboard:
    """Everything the views show, read at one moment (`taken_at`, epoch seconds)."""

    pipeline: str
    taken_at: float
    transactions: list[Any] = field(default_factory=list)  # eosctl.txns.TxnInfo
    hanging: list[Any] = field(default_factory=list)  # eosctl.txns.Hanging
    hanging_checked: bool = False  # False: the hanging rules were not run (e.g. an older snapshot)
    producers: list[Any] = field(default_factory=list)  # eosctl.producers.ProducerRow
    lag: Any = None  # eosctl.lag.LagSnapshot
    lag_history: dict[LagKey, list[int]] = field(default_factory=dict)  # records behind, oldest first
    statuses: dict[LagKey, Any] = field(default_factory=dict)  # eosctl.lag.Status per partition
    group_statuses: dict[str, Any] = field(default_factory=dict)  # eosctl.lag.Status per group
    logs: list[PartitionLog] = field(default_factory=list)  # summaries (ranges, txns, producers)
    ledger: Any = None  # eosctl.ledger.Ledger
    audit: Any = None  # eosctl.findings.AuditReport, the last one known
    # A section that could not be read says why in one line; the others still render.
    errors: dict[str, str] = field(default_factory=dict)

    def log_of(self, topic: str, partition: int) -> PartitionLog | None:
        return next((lg for lg in self.logs if (lg.topic, lg.partition) == (topic, partition)), None)


class DataSource(Protocol):
    label: str  # shown in the status bar: "live 127.0.0.1:9092" or "snapshot FILE"
    is_snapshot: bool
    pipeline: str

    def fetch(self) -> Dashboard: ...

    def partition_log(self, topic: str, partition: int, around: int | None) -> PartitionLog: ...

    def can_audit(self) -> str | None:
        """None if the audit can run here, else the reason it can't."""
        ...

    def run_audit(self, progress: Progress) -> Any: ...


class LagTracker:
    """Feeds each lag poll to eosctl.lag.Watch (statuses) and keeps the recent series for sparklines."""

    def __init__(self, window: int = HISTORY) -> None:
        from eosctl.lag import Watch

        self.watch = Watch(window=window)
        self.history: dict[LagKey, deque[int]] = {}

    def add(self, dash: Dashboard) -> None:
        snap = dash.lag
        if snap is None:
            return
        self.watch.add(snap)
        seen = set()
        for p in snap.partitions:
            key = (p.group, p.topic, p.partition)
            seen.add(key)
            value = p.records_behind if p.records_behind is not None else (p.lag_to_lso or 0)
            self.history.setdefault(key, deque(maxlen=HISTORY)).append(value)
            dash.statuses[key] = self.watch.partition_status(*key)
        for key in set(self.history) - seen:
            del self.history[key]
        dash.lag_history = {k: list(v) for k, v in self.history.items()}
        dash.group_statuses = {g: self.watch.group_status(g) for g in snap.groups()}


# ---- live -------------------------------------------------------------------------------------------


class LiveSource:
    """Reads the cluster (and the sink, read-only) through the eosctl core on every fetch.

    The admin clients are built once and kept across refreshes (eosctl.clients.Admins); a connection
    error drops them so the next refresh reconnects.
    """

    is_snapshot = False

    def __init__(
        self,
        target: Any,
        max_age_s: float | None = None,
        run_audit: AuditRunner | None = None,
        timeout_ms: int = 5_000,
    ) -> None:
        from eosctl.clients import Admins
        from eosctl.txns import DEFAULT_MAX_AGE_S

        self.target = target
        self.max_age_s = DEFAULT_MAX_AGE_S if max_age_s is None else max_age_s
        self.runner = run_audit
        self.timeout_ms = timeout_ms
        pipe = target.pipeline
        self.pipeline = pipe.name if pipe else ",".join(target.topics) or "cluster"
        self.label = f"live {target.cluster.bootstrap_servers}"
        self.topics = list(
            dict.fromkeys([*target.topics, *([pipe.output_topic] if pipe and pipe.output_topic else [])])
        )
        self.tracker = LagTracker()
        self.last_audit: Any = None
        self.admins = Admins(target.cluster, timeout=timeout_ms / 1000)

    def fetch(self) -> Dashboard:
        try:
            return self._fetch()
        except BrokerError:
            self.admins.reset()  # the broker went away: reconnect on the next refresh
            raise

    def close(self) -> None:
        self.admins.close()

    def _fetch(self) -> Dashboard:
        from eosctl.logscan import scan_partitions
        from eosctl.wire import WireClient

        t = self.target
        dash = Dashboard(pipeline=self.pipeline, taken_at=time.time(), audit=self.last_audit)
        # An unreachable broker fails the whole fetch (the app shows the banner and retries).
        with WireClient(t.cluster, timeout_ms=self.timeout_ms) as client:
            known = client.metadata(self.topics) if self.topics else {}
            tps = [(topic, p) for topic, parts in known.items() for p in sorted(parts)]
            offsets = client.offsets(tps) if tps else {}
            starts = {tp: max(o.log_start, o.high_watermark - TAIL_OFFSETS) for tp, o in offsets.items()}
            logs = scan_partitions(client, tps, start=starts) if tps else {}
            dash.logs = [logs[tp] for tp in tps]
            self._section(dash, "lag", lambda: self._lag(client, dash))
            described: list[Any] = []  # DescribeProducers once per refresh, shared by two sections
            self._section(dash, "transactions", lambda: self._txns(client, dash, tps, described))
            self._section(dash, "producers", lambda: self._producers(client, dash, tps, logs, described))
        if t.pipeline is not None and t.pipeline.sink is not None:
            from eosctl.ledger import collect

            def ledger() -> Any:
                # The ledger needs each partition's log from its start; collect scans what is missing.
                source_logs = whole_logs({tp: lg for tp, lg in logs.items() if tp[0] in t.topics})
                return collect(
                    t.cluster, t.pipeline.sink, t.topics, t.group, pipeline=t.pipeline.name, logs=source_logs
                )

            self._section(dash, "ledger", lambda: setattr(dash, "ledger", ledger()))
        self.tracker.add(dash)
        return dash

    def _section(self, dash: Dashboard, name: str, fn: Callable[[], Any]) -> None:
        """`_section`, and a broker error also drops the admin clients (rebuilt on the next refresh)."""
        if isinstance(_section(dash, name, fn), BrokerError):
            self.admins.reset()

    def _lag(self, client: Any, dash: Dashboard) -> None:
        from eosctl import lag

        t = self.target
        dash.lag = lag.poll(
            client, self.admins.confluent, groups=[t.group] if t.group else None, topics=t.topics or None
        )

    def _described(self, tps: list, described: list) -> Any:
        from eosctl.txns import describe_producers

        if not described:
            described.append(describe_producers(self.admins.kafka, tps))
        return described[0]

    def _txns(self, client: Any, dash: Dashboard, tps: list, described: list) -> None:
        from eosctl import txns

        admin = self.admins.kafka
        prefix = self.target.pipeline.transactional_id_prefix if self.target.pipeline else None

        def listed() -> None:
            rows = txns.list_transactions(admin)
            dash.transactions = [x for x in rows if not prefix or x.transactional_id.startswith(prefix)]

        # A broker without ListTransactions still gets the hanging check (and keeps its clients: `admin`
        # is used again below).
        _section(dash, "transactions", listed)
        report = txns.find_hanging(client, admin, self.topics, max_age_s=self.max_age_s,
                                   described=self._described(tps, described))
        dash.hanging, dash.hanging_checked = report.hanging, True

    def _producers(self, client: Any, dash: Dashboard, tps: list, logs: dict, described: list) -> None:
        from eosctl import producers

        dash.producers = (producers.find(client, self.admins.kafka, tps, logs=logs,
                                         described=self._described(tps, described)).rows if tps else [])

    def partition_log(self, topic: str, partition: int, around: int | None) -> PartitionLog:
        from eosctl.logscan import scan_partition
        from eosctl.wire import WireClient

        with WireClient(self.target.cluster, timeout_ms=self.timeout_ms) as client:
            o = client.offsets([(topic, partition)])[(topic, partition)]
            if around is None:
                start = max(o.log_start, o.high_watermark - LOG_WINDOW)
            else:
                start = max(o.log_start, around - LOG_WINDOW // 2)
            return scan_partition(
                client, topic, partition, start=start, end=start + LOG_WINDOW, keep_batches=True
            )

    def can_audit(self) -> str | None:
        if self.runner is None:
            return "the audit is not available here (run `eosctl audit`)"
        if self.target.pipeline is None or self.target.pipeline.sink is None:
            return "no sink to audit: start the TUI with --config FILE --pipeline NAME (with a sink)"
        return None

    def run_audit(self, progress: Progress) -> Any:
        assert self.runner is not None
        self.last_audit = self.runner(self.target, progress)
        return self.last_audit


def _section(dash: Dashboard, name: str, fn: Callable[[], Any]) -> EosctlError | None:
    """Run one section; a problem the user can fix (an old broker, a locked sink) is recorded, not fatal.

    Returns that problem, if any.
    """
    try:
        fn()
    except EosctlError as e:
        dash.errors[name] = str(e)
        return e
    return None


def whole_logs(logs: dict[Any, PartitionLog]) -> dict[Any, PartitionLog]:
    """The scans that cover their partition's whole log, [log start, HW): the only ones the ledger can
    use (a tail scan would make every record before it look missing, or hide what is missing there)."""
    return {
        tp: lg
        for tp, lg in logs.items()
        if lg.scanned_from == lg.log_start_offset and lg.scanned_to == lg.high_watermark
    }


# ---- snapshot ---------------------------------------------------------------------------------------


class SnapshotSource:
    """An `eosctl snapshot` file: no cluster needed; the data is fixed at its capture time."""

    is_snapshot = True

    def __init__(self, path: str, max_age_s: float | None = None) -> None:
        self.path = path
        self.max_age_s = max_age_s  # None: the hanging report as captured (the snapshot's --max-age)
        self.label = f"file {os.path.basename(path)}"
        self.pipeline = "?"
        self._dash: Dashboard | None = None

    def fetch(self) -> Dashboard:
        if self._dash is None:
            from eosctl.snapshot import load_snapshot

            self._dash = from_snapshot(load_snapshot(self.path), self.max_age_s)
            self.pipeline = self._dash.pipeline
        return self._dash

    def partition_log(self, topic: str, partition: int, around: int | None) -> PartitionLog:
        log = self.fetch().log_of(topic, partition)
        if log is None:
            raise EosctlError(f"the snapshot holds no log for {topic}[{partition}]")
        return log

    def can_audit(self) -> str | None:
        return "a snapshot has no cluster to audit; the audit stored with it (if any) is shown"

    def run_audit(self, progress: Progress) -> Any:
        raise EosctlError(self.can_audit() or "")


def from_snapshot(snap: Any, max_age_s: float | None = None) -> Dashboard:
    """The snapshot module's Snapshot as a Dashboard (the same dataclasses, nothing recomputed).

    With ``max_age_s`` the hanging rule is re-applied to the candidates the snapshot recorded at any age
    (eosctl.snapshot.hanging_at); without it, the report as captured is shown.
    """
    dash = Dashboard(
        pipeline=snap.pipeline or ",".join(snap.topics) or "?",
        taken_at=snap.captured_at.timestamp(),
        transactions=list(snap.transactions or []),
        producers=list(snap.producers or []),
        lag=snap.lag,
        logs=[snap.logs[tp] for tp in sorted(snap.logs)],
        ledger=snap.ledger,
        audit=getattr(snap, "audit", None),
        errors={name: status for name, status in snap.sections.items() if status != "ok"},
    )
    hanging = getattr(snap, "hanging", None)
    if hanging is not None and max_age_s is not None:
        from eosctl.snapshot import hanging_at

        hanging = hanging_at(snap, max_age_s)
    if hanging is not None:
        dash.hanging = list(getattr(hanging, "hanging", hanging))
        dash.hanging_checked = True
    LagTracker().add(dash)
    return dash
