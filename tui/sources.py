"""Where the TUI's data comes from: the live cluster or a snapshot file, both as an eosctl Capture.

Every method of a DataSource may block (broker, DuckDB, the audit), so the app only calls them from
Textual thread workers. Live, each refresh is `eosctl.inspection.live.LiveModel.refresh()` (the same model
`lag --watch` and the exporter read); a snapshot file is a Capture loaded from disk. A `Dashboard` is that
Capture plus what only a watcher keeps between refreshes (the lag history, the Burrow-style statuses and
each section's age); the views format it and never recompute what the core computes (lag, hanging
rules, ledger flags, statuses).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from eosctl.base.errors import EosctlError
from eosctl.base.progress import Progress
from eosctl.cluster.logscan import scan_partition
from eosctl.cluster.model import PartitionLog
from eosctl.cluster.wire import WireClient
from eosctl.config.target import Target
from eosctl.inspection.capture import Capture, hanging_at
from eosctl.inspection.failover import Failover, readiness, replica_sink
from eosctl.inspection.lag import LagSnapshot, Status
from eosctl.inspection.ledger import Ledger
from eosctl.inspection.live import LagHistory, LagKey, LiveModel
from eosctl.inspection.snapshot import load_snapshot
from eosctl.report.findings import AuditReport
from eosctl.txn.producers import ProducerRow
from eosctl.txn.transactions import DEFAULT_MAX_AGE_S, Hanging, TxnInfo

# run_audit(target, progress) -> the report; injected by the CLI (tui never imports auditors)
AuditRunner = Callable[[Target, Progress], AuditReport]

# The live view scans at most this many offsets at the end of each partition per refresh, so a huge topic
# costs the same as a small one; older offsets are read on demand in the Log view.
TAIL_OFFSETS = 5_000
# Log view: offsets scanned around the one asked for.
LOG_WINDOW = 2_000
RECORDS_SHOWN = 200  # records the Log view's records table holds (`v`), from the offset it opens at


@dataclass
class Dashboard:
    """One Capture, and what a watcher adds to it: the lag history and statuses."""

    capture: Capture
    lag_history: dict[LagKey, list[int]] = field(default_factory=dict)  # records behind, oldest first
    statuses: dict[LagKey, Status] = field(default_factory=dict)  # per partition
    group_statuses: dict[str, Status] = field(default_factory=dict)
    # Section name -> seconds since it was last read successfully (live only; None: never).
    section_ages: dict[str, float | None] = field(default_factory=dict)
    # The options pointing a command at what is shown (eosctl.config.target.Target.args), for hints to copy; a
    # snapshot's: its broker's address.
    args: str = ""
    # A MirrorMaker 2 replica pipeline: each checkpointed group's failover readiness, read with the last
    # audit run here (eosctl.inspection.failover; the Lag view's headline and detail show it).
    failover: list[Failover] = field(default_factory=list)

    @property
    def command_args(self) -> str:
        return self.args or f"--bootstrap {shlex.quote(self.capture.bootstrap)}"

    @property
    def pipeline(self) -> str:
        c = self.capture
        return c.pipeline or ",".join(c.topics) or "?"

    @property
    def taken_at(self) -> float:
        """Epoch seconds of the capture."""
        return self.capture.captured_at.timestamp()

    @property
    def transactions(self) -> list[TxnInfo]:
        return self.capture.transactions

    @property
    def producers(self) -> list[ProducerRow]:
        return self.capture.producers

    @property
    def lag(self) -> LagSnapshot | None:
        return self.capture.lag

    @property
    def ledger(self) -> Ledger | None:
        return self.capture.ledger

    @property
    def audit(self) -> AuditReport | None:
        return self.capture.audit

    @property
    def hanging(self) -> list[Hanging]:
        return self.capture.hanging.hanging if self.capture.hanging is not None else []

    @property
    def hanging_checked(self) -> bool:
        """False: the hanging rules were not run (e.g. an older snapshot, a broker error)."""
        return self.capture.hanging is not None

    @property
    def logs(self) -> list[PartitionLog]:
        return [self.capture.logs[tp] for tp in sorted(self.capture.logs)]

    @property
    def errors(self) -> dict[str, str]:
        """A section that could not be read says why in one line; the others still render."""
        return self.capture.errors()

    @property
    def unreadable(self) -> str | None:
        """The partitions this reading could not read (a broker down for good), named in one line; the
        views show the others."""
        dark = getattr(self.capture, "unreadable", None) or {}
        if not dark:
            return None
        names = [f"{t}-{p}" for t, p in sorted(dark)]
        listed = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
        why = "; ".join(sorted(set(dark.values())))
        return f"{len(names)} partition{'s' * (len(names) != 1)} can't be read: {listed} ({why})"

    def log_of(self, topic: str, partition: int) -> PartitionLog | None:
        return self.capture.log_of(topic, partition)


class DataSource(Protocol):
    label: str  # shown in the status bar: "live 127.0.0.1:9092" or "snapshot FILE"
    is_snapshot: bool
    pipeline: str

    def fetch(self) -> Dashboard: ...

    def partition_log(self, topic: str, partition: int, around: int | None) -> PartitionLog: ...

    def records(self, topic: str, partition: int, first: int, end: int) -> list[dict[str, Any]]:
        """The data records at offsets [first, end) (at most RECORDS_SHOWN), as
        eosctl.inspection.records documents them (decoded where the source can and is not raw)."""
        ...

    def can_audit(self) -> str | None:
        """None if the audit can run here, else the reason it can't."""
        ...

    def run_audit(self, progress: Progress) -> AuditReport: ...


class LagTracker:
    """A lag history for Dashboards built outside a LiveModel (snapshot files, synthetic sources)."""

    def __init__(self) -> None:
        self.history = LagHistory()

    def add(self, dash: Dashboard) -> None:
        if dash.lag is not None:
            self.history.add(dash.lag)
        with_history(dash, self.history)


def with_history(dash: Dashboard, history: LagHistory) -> Dashboard:
    dash.lag_history = history.lists()
    dash.statuses = dict(history.statuses)
    dash.group_statuses = dict(history.group_statuses)
    return dash


# ---- live -------------------------------------------------------------------------------------------


class LiveSource:
    """The cluster (and the sink, read-only) through one eosctl.inspection.live.LiveModel, tail-scanned.

    The model keeps its admin clients across refreshes; a connection error drops them so the next
    refresh reconnects.
    """

    is_snapshot = False

    def __init__(
        self,
        target: Target,
        max_age_s: float | None = None,
        run_audit: AuditRunner | None = None,
        timeout_ms: int = 5_000,
        raw: bool = False,
    ) -> None:
        self.target = target
        self.max_age_s = DEFAULT_MAX_AGE_S if max_age_s is None else max_age_s
        self.runner = run_audit
        self.timeout_ms = timeout_ms
        pipe = target.pipeline
        self.pipeline = pipe.name if pipe else ",".join(target.topics) or "cluster"
        self.label = f"live {target.cluster.bootstrap_servers}"
        self.last_audit: AuditReport | None = None
        self.last_failover: list[Failover] = []
        self.model = LiveModel(target, tail=TAIL_OFFSETS, max_age_s=self.max_age_s, timeout_ms=timeout_ms,
                               long_lived=True)
        self.raw = raw
        self._decoder: Any = None  # the registry's decoder, made at the first records asked (schemas cached)

    def fetch(self) -> Dashboard:
        # An unreachable broker fails the whole fetch (BrokerError: the app shows the banner and retries).
        cap = self.model.refresh()
        if self.last_audit is not None:
            cap.audit, cap.audit_origin = self.last_audit, "run"
        dash = with_history(Dashboard(cap, args=self.target.args(), failover=self.last_failover),
                            self.model.lag_history)
        dash.section_ages = {name: self.model.section_age(name) for name in cap.sections}
        return dash

    def close(self) -> None:
        self.model.close()

    def partition_log(self, topic: str, partition: int, around: int | None) -> PartitionLog:
        with WireClient(self.target.cluster, timeout_ms=self.timeout_ms) as client:
            o = client.offsets([(topic, partition)])[(topic, partition)]
            if around is None:
                start = max(o.log_start, o.high_watermark - LOG_WINDOW)
            else:
                start = max(o.log_start, around - LOG_WINDOW // 2)
            return scan_partition(
                client, topic, partition, start=start, end=start + LOG_WINDOW, keep_batches=True
            )

    def records(self, topic: str, partition: int, first: int, end: int) -> list[dict[str, Any]]:
        # lazy: only when records are asked for; see docs/imports.md
        from eosctl.inspection.records import decoder_for, read_documents

        if self._decoder is None and not self.raw:
            self._decoder = decoder_for(self.target.cluster)
        with WireClient(self.target.cluster, timeout_ms=self.timeout_ms) as client:
            o = client.offsets([(topic, partition)])[(topic, partition)]
            first, end = max(first, o.log_start), min(end, o.high_watermark, first + RECORDS_SHOWN)
            return read_documents(client, topic, partition, first, end, self._decoder,
                                  limit=RECORDS_SHOWN) if end > first else []

    def can_audit(self) -> str | None:
        if self.runner is None:
            return "the audit is not available here (run `eosctl audit`)"
        pipe = self.target.pipeline
        if pipe is not None and (pipe.sink is not None or pipe.hops):  # a pipeline of hops: each hop's sink
            return None
        config = self.target.config
        with_sink = [n for n, p in sorted(config.pipelines.items()) if p.sink is not None or p.hops] \
            if config is not None else []
        if pipe is not None and with_sink:
            return (f"no sink to audit: pipeline {pipe.name} has none; start the TUI with -p NAME for one "
                    f"that has: {', '.join(with_sink)}")
        return "no sink to audit: start the TUI with --config FILE --pipeline NAME (with a sink)"

    def run_audit(self, progress: Progress) -> AuditReport:
        assert self.runner is not None
        self.last_audit = self.runner(self.target, progress)
        # A replica pipeline: where each group would resume on the replica, read after the audit (it reads
        # both topics, so it runs when the audit does, not at every refresh).
        mirror = replica_sink(self.target.pipeline.sink if self.target.pipeline else None)
        self.last_failover = readiness(mirror) if mirror is not None else []
        return self.last_audit


# ---- snapshot ---------------------------------------------------------------------------------------


class SnapshotSource:
    """An `eosctl snapshot` file: no cluster needed; the data is fixed at its capture time."""

    is_snapshot = True

    def __init__(self, path: str, max_age_s: float | None = None, raw: bool = False) -> None:
        self.path = path
        self.raw = raw  # records as stored, their decoded keys and values left out
        self.max_age_s = max_age_s  # None: the hanging report as captured (the snapshot's --max-age)
        self.label = f"file {os.path.basename(path)}"
        self.pipeline = "?"
        self._dash: Dashboard | None = None

    def fetch(self) -> Dashboard:
        if self._dash is None:
            self._dash = from_snapshot(load_snapshot(self.path), self.max_age_s)
            self.pipeline = self._dash.pipeline
        return self._dash

    def partition_log(self, topic: str, partition: int, around: int | None) -> PartitionLog:
        log = self.fetch().log_of(topic, partition)
        if log is None:
            raise EosctlError(f"the snapshot holds no log for {topic}[{partition}]")
        return log

    def records(self, topic: str, partition: int, first: int, end: int) -> list[dict[str, Any]]:
        stored = self.fetch().capture.records.get((topic, partition), [])
        shown = [r for r in stored if first <= r["offset"] < end][:RECORDS_SHOWN]
        if self.raw:
            shown = [{**r, "key_decoded": None, "value_decoded": None} for r in shown]
        return shown

    def can_audit(self) -> str | None:
        return "a snapshot has no cluster to audit; the audit stored with it (if any) is shown"

    def run_audit(self, progress: Progress) -> AuditReport:
        raise EosctlError(self.can_audit() or "")


def from_snapshot(cap: Capture, max_age_s: float | None = None) -> Dashboard:
    """A loaded capture as a Dashboard (nothing recomputed).

    With ``max_age_s`` the hanging rule is re-applied to the candidates the capture recorded at any age
    (eosctl.inspection.capture.hanging_at); without it, the report as captured is shown.
    """
    if cap.hanging is not None and max_age_s is not None:
        cap.hanging = hanging_at(cap, max_age_s)
    dash = Dashboard(cap)
    LagTracker().add(dash)
    return dash
