"""Prometheus metrics of pipelines, read from their live models: what `eosctl exporter` serves.

Every figure comes from the one live model (eosctl.inspection.live.LiveModel) and the audit report, never from
a reading of its own: lag from eosctl.inspection.lag (the same rows and Burrow-style statuses `lag --watch`
shows), transactions and the hanging rules from eosctl.txn.transactions, fencing and zombie writes from the
partition logs.
Names and labels are listed once in ``METRICS`` (docs/metrics.md documents each, tests/unit/test_docs.py
checks both against what is emitted).

A scrape must not cost a reading, and at 10k partitions rendering the per-partition families takes
seconds, so `Exposition` renders them (and compresses them) once per model change (``State``) and a
scrape only renders the few families that change with the clock or with up (``Live``: section ages, up,
errors, group status: read at one moment, so `eosctl_up 0` never comes with a stale OK).
With ``partition_metrics`` off, per-partition series are summed per topic (ages: the maximum), so a
cluster with many partitions keeps a few series per topic and group; the names stay the same, so rules
and dashboards work either way.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder

from eosctl.inspection.capture import SECTIONS, Capture
from eosctl.inspection.lag import STATUSES, Status
from eosctl.inspection.live import LiveModel
from eosctl.report.findings import AuditReport
from eosctl.txn.fencing import fencing_events

BASE = ("cluster", "pipeline")
PARTITION = ("topic", "partition")
CONSUMER = ("group", "topic", "partition")
GAUGE, COUNTER = "gauge", "counter"
# The transaction states Kafka's coordinator reports (TransactionState), each always emitted (zeros too).
TXN_STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
              "PrepareEpochFence")


@dataclass(frozen=True)
class Spec:
    name: str  # as exposed (counters with _total)
    type: str
    labels: tuple[str, ...]  # with --partition-metrics on; off drops "partition"
    help: str


METRICS = (
    Spec("eosctl_partition_high_watermark", GAUGE, (*BASE, *PARTITION), "High watermark (next offset)."),
    Spec("eosctl_partition_last_stable_offset", GAUGE, (*BASE, *PARTITION),
         "Last stable offset: a read_committed consumer reads below it."),
    Spec("eosctl_partition_log_start_offset", GAUGE, (*BASE, *PARTITION), "Log start offset."),
    Spec("eosctl_partition_blocked_offsets", GAUGE, (*BASE, *PARTITION),
         "Offsets between the LSO and the high watermark, held back by an open transaction."),
    Spec("eosctl_partition_open_transaction_age_seconds", GAUGE,
         (*BASE, *PARTITION, "producer_id", "transactional_id"),
         "Age of the open transaction holding the partition's LSO."),
    Spec("eosctl_consumer_lag_records", GAUGE, (*BASE, *CONSUMER),
         "Data records a read_committed consumer has left to read (markers and aborted records not "
         "counted: reaches 0)."),
    Spec("eosctl_consumer_lag_offsets", GAUGE, (*BASE, *CONSUMER),
         "High watermark minus committed offset, what HW-based lag exporters report."),
    Spec("eosctl_consumer_lag_seconds", GAUGE, (*BASE, *CONSUMER),
         "Age of the oldest committed record the group has not consumed."),
    Spec("eosctl_consumer_offset_commit_pending_seconds", GAUGE, (*BASE, *CONSUMER, "transactional_id"),
         "Age of the open transaction holding the group's offset commit for the partition "
         "(UNSTABLE_OFFSET_COMMIT: a read_committed consumer of the group waits); only while one does."),
    Spec("eosctl_consumer_group_status", GAUGE, (*BASE, "group", "status"),
         "Burrow-style status of the group, as lag --watch computes it: 1 for the current one."),
    Spec("eosctl_consumer_group_members", GAUGE, (*BASE, "group", "type", "state"),
         "Members of the group, as the describe API of its type lists them (DescribeGroups, "
         "ConsumerGroupDescribe, StreamsGroupDescribe, ShareGroupDescribe); only for a group described."),
    Spec("eosctl_share_group_read_uncommitted", GAUGE, (*BASE, "group"),
         "1 for a share group reading a transactional topic without share.isolation.level=read_committed "
         "(its consumers process aborted records); only for such a group."),
    Spec("eosctl_transactions", GAUGE, (*BASE, "state"),
         "Transactional ids of the pipeline by coordinator state."),
    Spec("eosctl_two_phase_transaction_age_seconds", GAUGE, (*BASE, "transactional_id", "producer_id"),
         "Age of each open two-phase commit transaction (KIP-939), by its coordinator's start time: Kafka "
         "never times one out and it is never counted hanging, so alert on this age."),
    Spec("eosctl_hanging_transactions", GAUGE, BASE,
         "Open transactions older than --max-age that hold an LSO or that the coordinator forgot."),
    Spec("eosctl_producer_fencing_events_total", COUNTER, (*BASE, *PARTITION),
         "Producer epoch fencing events the partition's log shows."),
    Spec("eosctl_zombie_writes_total", COUNTER, (*BASE, *PARTITION),
         "Batches written at an epoch older than one already in the partition's log."),
    Spec("eosctl_audit_findings", GAUGE, (*BASE, "kind"), "Findings of the last audit by kind."),
    Spec("eosctl_audit_passed", GAUGE, BASE, "1 if the last audit passed, 0 if it failed."),
    Spec("eosctl_audit_failing_findings", GAUGE, BASE,
         "Findings of the last audit that fail it (not waived, not of a kind at its warn level)."),
    Spec("eosctl_audit_waived_findings", GAUGE, BASE,
         "Findings of the last audit a waiver in force covers ([audit] waivers)."),
    Spec("eosctl_audit_last_run_timestamp_seconds", GAUGE, BASE, "When the last audit finished (Unix time)."),
    Spec("eosctl_audit_duration_seconds", GAUGE, BASE, "How long the last audit took."),
    Spec("eosctl_audit_errors_total", COUNTER, BASE, "Audits that could not run (sink or broker error)."),
    Spec("eosctl_audit_incremental", GAUGE, BASE,
         "1 if the last audit read only what was new since the one before, 0 if it read everything."),
    Spec("eosctl_audit_read_offsets", GAUGE, BASE, "Offsets of Kafka the last audit read."),
    Spec("eosctl_audit_read_sink_rows", GAUGE, BASE, "Sink rows the last audit read."),
    Spec("eosctl_audit_last_full_timestamp_seconds", GAUGE, BASE,
         "When the last full audit (one that read everything) finished (Unix time)."),
    Spec("eosctl_sink_rows", GAUGE, (*BASE, *PARTITION), "Sink rows per source partition at the last audit."),
    Spec("eosctl_replica_failover_records", GAUGE, (*BASE, *CONSUMER, "outcome"),
         "A MirrorMaker 2 replica pipeline, at the last audit: records a consumer of the group resuming on "
         "the replica would process again (outcome=again) or never see (outcome=never)."),
    Spec("eosctl_partition_unreadable", GAUGE, (*BASE, *PARTITION),
         "1 for each partition the last refresh could not read (no leader: the brokers holding its replicas "
         "are down); the other partitions' metrics are still served."),
    Spec("eosctl_up", GAUGE, BASE, "1 if the cluster answered the last refresh."),
    Spec("eosctl_down_reason", GAUGE, (*BASE, "reason"),
         "1 while the last refresh failed (eosctl_up 0), its reason label the one-line error (the cluster "
         "unreachable, the deadline passed, ...); absent while the cluster answers."),
    Spec("eosctl_stale", GAUGE, BASE,
         "1 while the values served are stale: no refresh has finished yet, or the newest good one is older "
         "than twice the --interval plus its duration (at least 10 s: a refresh overdue on a slow or "
         "stalled link, before eosctl_up says anything); 0 otherwise."),
    Spec("eosctl_refresh_duration_seconds", GAUGE, BASE, "How long the last refresh took."),
    Spec("eosctl_refresh_errors_total", COUNTER, (*BASE, "section"), "Failed reads per section."),
    Spec("eosctl_section_age_seconds", GAUGE, (*BASE, "section"),
         "Seconds since the section was last read successfully."),
)
SPECS = {s.name: s for s in METRICS}
# Families that change only when the model or the audit does (rendered once per change), and the rest.
LIVE = ("eosctl_up", "eosctl_down_reason", "eosctl_stale", "eosctl_consumer_group_status",
        "eosctl_refresh_duration_seconds", "eosctl_refresh_errors_total", "eosctl_section_age_seconds")
# A reading is stale past STALE_FACTOR times (the interval + the duration of the refresh that made it), and
# never before STALE_MIN_S (a refresh a little slower than the last is not an incident).
STALE_FACTOR = 2.0
STALE_MIN_S = 10.0


@dataclass
class AuditState:
    """The continuous audit's last outcome for one pipeline."""

    report: AuditReport | None = None
    finished_at: float | None = None  # time.time()
    duration_s: float | None = None
    errors: int = 0
    last_error: str | None = None
    # A MirrorMaker 2 replica pipeline: each checkpointed group's failover readiness, read after the audit
    # (eosctl.inspection.failover.Failover).
    failover: list[Any] = field(default_factory=list)


@dataclass
class Source:
    """One pipeline the exporter serves: its model, its audit, and the counters kept across readings."""

    cluster: str
    pipeline: str
    model: LiveModel
    audit: AuditState = field(default_factory=AuditState)
    # Bumped whenever what ``State`` renders changes (a refresh, an audit).
    version: int = 0
    # Per section, the newest reading in which it was read (a section that fails keeps its last values, as
    # a whole refresh that fails does; eosctl_section_age_seconds says how old they are).
    good: dict[str, Capture] = field(default_factory=dict)
    failing: frozenset[str] = frozenset()  # sections the latest reading could not read
    # Partitions the latest reading could not read, with why (Capture.unreadable).
    unreadable: dict[tuple[str, int], str] = field(default_factory=dict)
    up: bool = False  # the latest reading reached the cluster (set with the rest, unlike model.up)
    down_reason: str | None = None  # why the latest reading failed (one line), None when it did not
    interval_s: float | None = None  # the exporter's --interval: how often a new reading is due
    fresh_at: float | None = None  # time.time() of the newest good reading (None: none yet)
    fresh_took_s: float = 0.0  # how long that reading took
    # Counters must not go down when old segments leave the log: the highest value seen per series.
    fencing: dict[tuple[str, int], int] = field(default_factory=dict)
    zombies: dict[tuple[str, int], int] = field(default_factory=dict)

    def refreshed(self, cap: Capture | None, reason: str | None = None) -> None:
        """Take in a new reading (or a failed one: ``None``, with its ``reason``)."""
        self.up = cap is not None
        self.down_reason = None if cap is not None else (reason or "the refresh failed")
        if cap is not None:
            self.fresh_at, self.fresh_took_s = time.time(), self.model.last_refresh_seconds or 0.0
        if cap is not None:  # new dicts, not updates: a scrape may be reading the old ones meanwhile
            failing = cap.errors()
            self.good = {**self.good, **{name: cap for name in cap.sections if name not in failing}}
            self.failing = frozenset(failing)
            self.unreadable = cap.unreadable
            if "logs" not in failing:
                fencing, zombies = dict(self.fencing), dict(self.zombies)
                for tp, log in cap.logs.items():
                    producers = log.producers.values()
                    fencing[tp] = max(fencing.get(tp, 0), sum(fencing_events(p) for p in producers))
                    zombies[tp] = max(zombies.get(tp, 0), sum(p.zombie_total for p in producers))
                self.fencing, self.zombies = fencing, zombies
        self.version += 1

    def starting(self, reason: str) -> None:
        """Before the first reading: served as down (eosctl_up 0) with ``reason`` until it ends."""
        self.up, self.down_reason = False, reason
        self.version += 1

    def stale(self, now: float) -> bool:
        """Whether the values served are stale (see eosctl_stale)."""
        if self.fresh_at is None:
            return True
        limit = max(STALE_MIN_S, STALE_FACTOR * ((self.interval_s or 0.0) + self.fresh_took_s))
        return now - self.fresh_at > limit

    def audited(self, report: AuditReport | None, duration_s: float, error: str | None = None,
                failover: list[Any] | None = None) -> None:
        if report is None:
            self.audit.errors += 1
            self.audit.last_error = error
        else:
            self.audit.report, self.audit.last_error = report, None
            self.audit.failover = failover or []
            self.audit.finished_at, self.audit.duration_s = time.time(), duration_s
        self.version += 1


class _Families:
    """Families filled source by source; with partition metrics off, series are folded per topic."""

    def __init__(self, names: Iterable[str], partition_metrics: bool) -> None:
        self.partition_metrics = partition_metrics
        self.values: dict[str, dict[tuple[str, ...], float]] = {n: {} for n in names}

    def add(self, name: str, labels: Mapping[str, object], value: float | None,
            fold: Callable[[float, float], float] = float.__add__) -> None:
        if value is None:
            return
        spec = SPECS[name]
        names = self.label_names(spec)
        key = tuple(str(labels[n]) for n in names)
        series = self.values[name]
        series[key] = fold(series[key], float(value)) if key in series else float(value)

    def label_names(self, spec: Spec) -> tuple[str, ...]:
        return spec.labels if self.partition_metrics else tuple(n for n in spec.labels if n != "partition")

    def metrics(self) -> Iterator[Metric]:
        for name, series in self.values.items():
            if not series:  # nothing to say (no audit yet, no open transaction): no HELP/TYPE lines either
                continue
            spec = SPECS[name]
            cls = CounterMetricFamily if spec.type == COUNTER else GaugeMetricFamily
            family = cls(name, spec.help, labels=self.label_names(spec))
            for key, value in series.items():
                family.add_metric(list(key), value)
            yield family


class State:
    """prometheus_client collector: the families read from each source's model and audit."""

    def __init__(self, sources: list[Source], partition_metrics: bool = True) -> None:
        self.sources = sources
        self.partition_metrics = partition_metrics

    def collect(self) -> Iterator[Metric]:
        out = _Families((s.name for s in METRICS if s.name not in LIVE), self.partition_metrics)
        for src in self.sources:
            base = {"cluster": src.cluster, "pipeline": src.pipeline}
            good = src.good
            if "logs" in good:
                _partitions(out, base, good["logs"])
            if "lag" in good:
                _consumers(out, base, good["lag"])
                _groups(out, base, good["lag"])
            if "transactions" in good:
                _transactions(out, base, good["transactions"])
            if "hanging" in good:
                _hanging(out, base, good["hanging"])
            for (topic, partition), n in src.fencing.items():
                out.add("eosctl_producer_fencing_events_total",
                        {**base, "topic": topic, "partition": partition}, n)
            for (topic, partition), n in src.zombies.items():
                out.add("eosctl_zombie_writes_total", {**base, "topic": topic, "partition": partition}, n)
            for topic, partition in sorted(src.unreadable):
                out.add("eosctl_partition_unreadable", {**base, "topic": topic, "partition": partition}, 1)
            _audit(out, base, src.audit)
        yield from out.metrics()


def _partitions(out: _Families, base: dict[str, str], cap: Capture) -> None:
    for (topic, partition), log in sorted(cap.logs.items()):
        labels = {**base, "topic": topic, "partition": partition}
        out.add("eosctl_partition_high_watermark", labels, log.high_watermark)
        out.add("eosctl_partition_last_stable_offset", labels, log.last_stable_offset)
        out.add("eosctl_partition_log_start_offset", labels, log.log_start_offset)
        blocked = max(0, log.high_watermark - log.last_stable_offset)
        out.add("eosctl_partition_blocked_offsets", labels, blocked)


def _hanging(out: _Families, base: dict[str, str], cap: Capture) -> None:
    if cap.hanging is not None:
        out.add("eosctl_hanging_transactions", base, len(cap.hanging.counted))
    for h in cap.hanging_candidates:  # every open transaction holding an LSO, at any age
        if h.age_s is not None:
            out.add("eosctl_partition_open_transaction_age_seconds",
                    {**base, "topic": h.topic, "partition": h.partition, "producer_id": h.producer_id,
                     "transactional_id": h.transactional_id or ""},
                    h.age_s, max)


def _consumers(out: _Families, base: dict[str, str], cap: Capture) -> None:
    snap = cap.lag
    if snap is None:
        return
    for p in snap.partitions:
        if p.error:
            continue
        labels = {**base, "group": p.group, "topic": p.topic, "partition": p.partition}
        out.add("eosctl_consumer_lag_records", labels, p.records_behind)
        out.add("eosctl_consumer_lag_offsets", labels, p.hw_lag)
        out.add("eosctl_consumer_lag_seconds", labels, p.time_lag_s(snap.taken_ms), max)
        if p.pending is not None:  # 0 where no coordinator dates the transaction holding it
            for h in p.pending.likely or (None,):
                age = None if h is None or h.started_ms is None else (snap.taken_ms - h.started_ms) / 1000
                out.add("eosctl_consumer_offset_commit_pending_seconds",
                        {**labels, "transactional_id": (h.transactional_id if h else None) or ""},
                        max(0.0, age or 0.0), max)


def _groups(out: _Families, base: dict[str, str], cap: Capture) -> None:
    """Each described group's members, by its type and state; the share groups warned of in `lag`."""
    snap = cap.lag
    if snap is None:
        return
    for g, d in snap.descriptions.items():
        out.add("eosctl_consumer_group_members", {**base, "group": g, "type": d.type, "state": d.state},
                len(d.members))
    for g in snap.share_warnings:
        out.add("eosctl_share_group_read_uncommitted", {**base, "group": g}, 1)


def _transactions(out: _Families, base: dict[str, str], cap: Capture) -> None:
    states = dict.fromkeys(TXN_STATES, 0)
    for t in cap.transactions:
        states[t.state] = states.get(t.state, 0) + 1
    for state, n in states.items():
        out.add("eosctl_transactions", {**base, "state": state}, n)
    for t in cap.transactions:
        age = t.age_s(int(cap.captured_at.timestamp() * 1000)) if t.two_phase else None
        if age is not None:  # an open one, dated by its coordinator
            out.add("eosctl_two_phase_transaction_age_seconds",
                    {**base, "transactional_id": t.transactional_id, "producer_id": t.producer_id}, age, max)


def _audit(out: _Families, base: dict[str, str], audit: AuditState) -> None:
    out.add("eosctl_audit_errors_total", base, audit.errors)
    report = audit.report
    if report is None:
        return
    for kind, n in report.counts().items():
        out.add("eosctl_audit_findings", {**base, "kind": kind}, n)
    out.add("eosctl_audit_passed", base, 1 if report.verdict == "pass" else 0)
    out.add("eosctl_audit_failing_findings", base, len(report.failing))
    out.add("eosctl_audit_waived_findings", base, sum(1 for f in report.findings if f.waived))
    out.add("eosctl_audit_last_run_timestamp_seconds", base, audit.finished_at)
    out.add("eosctl_audit_duration_seconds", base, audit.duration_s)
    run = report.engine.get("incremental") if isinstance(report.engine, dict) else None
    if run is not None:  # auditors.incremental: what it read (and whether it read everything)
        out.add("eosctl_audit_incremental", base, 0 if run["full"] else 1)
        out.add("eosctl_audit_read_offsets", base, run["new_offsets"])
        out.add("eosctl_audit_read_sink_rows", base, run["new_sink_rows"])
        if run.get("full_at") is not None:
            out.add("eosctl_audit_last_full_timestamp_seconds", base, run["full_at"])
    for p in report.partitions:
        out.add("eosctl_sink_rows", {**base, "topic": p.topic, "partition": p.partition}, p.sink_rows)
    for f in audit.failover:
        labels = {**base, "group": f.group, "topic": f.topic, "partition": f.partition}
        out.add("eosctl_replica_failover_records", {**labels, "outcome": "again"}, f.rereads)
        out.add("eosctl_replica_failover_records", {**labels, "outcome": "never"}, f.misses)


class Live:
    """prometheus_client collector: the exporter's own figures, which change with the clock."""

    def __init__(self, sources: list[Source]) -> None:
        self.sources = sources

    def collect(self) -> Iterator[Metric]:
        out = _Families(LIVE, partition_metrics=True)
        now = time.time()
        for src in self.sources:
            base = {"cluster": src.cluster, "pipeline": src.pipeline}
            model = src.model
            up, failing, lag = src.up, src.failing, src.good.get("lag")  # one moment for both
            out.add("eosctl_up", base, 1 if up else 0)
            if not up and src.down_reason is not None:
                out.add("eosctl_down_reason", {**base, "reason": src.down_reason}, 1)
            out.add("eosctl_stale", base, 1 if src.stale(now) else 0)
            if lag is not None and lag.lag is not None:
                _group_status(out, base, lag.lag.groups(), model.lag_history.group_statuses,
                              up and "lag" not in failing)
            out.add("eosctl_refresh_duration_seconds", base, model.last_refresh_seconds)
            errors = dict(model.refresh_errors)
            for section in SECTIONS:
                labels = {**base, "section": section}
                out.add("eosctl_refresh_errors_total", labels, errors.get(section, 0))
                out.add("eosctl_section_age_seconds", labels, model.section_age(section, now))
        yield from out.metrics()


def _group_status(out: _Families, base: dict[str, str], groups: list[str], statuses: dict[str, Status],
                  answered: bool) -> None:
    """One series per status, 1 for the current; a failed reading is ERR for every group, as lag --watch
    shows an outage (the last lag values stay)."""
    for group in groups:
        current = statuses.get(group) if answered else None
        now = current.status if current is not None else "ERR"
        for status in STATUSES:
            out.add("eosctl_consumer_group_status", {**base, "group": group, "status": status},
                    1 if status == now else 0)


class Exposition:
    """What /metrics and --textfile serve: the state families rendered once per change, the live ones per
    scrape, in the format the client asked for (Prometheus text or OpenMetrics), gzip-compressed if it
    accepts that (Prometheus does: 10k partitions are 10 MB of text, 0.5 MB compressed).

    A body is two parts sent one after the other: the cached state and the live families. Compressed,
    each is its own gzip member; a gzip stream may hold several (RFC 1952 2.2), and Prometheus' reader
    (Go's compress/gzip) reads them all, as every gzip reader does.
    """

    def __init__(self, sources: list[Source], partition_metrics: bool = True) -> None:
        self.sources = sources
        self.state = CollectorRegistry(auto_describe=False)
        self.state.register(State(sources, partition_metrics))
        self.live = CollectorRegistry(auto_describe=False)
        self.live.register(Live(sources))
        self._lock = threading.Lock()
        # (content type, gzip) -> (the sources' versions it was rendered at, the state part)
        self._cache: dict[tuple[str, bool], tuple[tuple[int, ...], bytes]] = {}

    def parts(self, accept: str | None = None, gzipped: bool = False) -> tuple[list[bytes], str]:
        """([state, live], content type) for an Accept header (None: the Prometheus text format)."""
        encoder, content_type = choose_encoder(negotiate(accept) or "")
        versions = tuple(s.version for s in self.sources)
        key = (content_type, gzipped)
        with self._lock:  # one render per change, however many scrapes arrive meanwhile
            cached = self._cache.get(key)
            if cached is None or cached[0] != versions:
                state = encoder(self.state).removesuffix(EOF)  # OpenMetrics: one EOF, at the very end
                cached = (versions, _gzip(state) if gzipped else state)
                self._cache[key] = cached
        live = encoder(self.live)
        return [cached[1], _gzip(live) if gzipped else live], content_type

    def render(self, accept: str | None = None) -> tuple[bytes, str]:
        """(body, content type), uncompressed."""
        parts, content_type = self.parts(accept)
        return b"".join(parts), content_type

    def warm(self) -> None:
        """Render again, after a change, every format served so far (so no scrape pays for it)."""
        with self._lock:
            served = list(self._cache)
        for content_type, gzipped in served:
            self.parts(content_type if "openmetrics" in content_type else None, gzipped)


EOF = b"# EOF\n"
OPENMETRICS = "application/openmetrics-text; version=1.0.0"
# The OpenMetrics versions served; any other asked for gets the Prometheus text format.
_OPENMETRICS_VERSIONS = ("1.0.0",)


def negotiate(accept: str | None) -> str | None:
    """What to hand prometheus_client for a client's Accept header: exactly OPENMETRICS when the client
    accepts a version served (q above 0), else None (the Prometheus text format). prometheus_client copies
    the asked version into Content-Type (`version=9.9.9` came back as if served), and each distinct header
    would be a cache entry of its own."""
    for media_range in (accept or "").split(","):
        media, *params = (x.strip() for x in media_range.split(";"))
        if media.lower() != "application/openmetrics-text":
            continue
        args = {k.strip().lower(): v.strip() for k, _, v in (p.partition("=") for p in params)}
        if _q(args.get("q")) > 0 and args.get("version", _OPENMETRICS_VERSIONS[0]) in _OPENMETRICS_VERSIONS:
            return OPENMETRICS
    return None


def _q(value: str | None) -> float:
    """An HTTP quality value (RFC 9110 12.4.2); absent: 1, unreadable: 0."""
    if value is None:
        return 1.0
    try:
        q = float(value)
    except ValueError:
        return 0.0
    return q if 0 <= q <= 1 else 0.0


def accepts_gzip(accept_encoding: str | None) -> bool:
    """Whether an Accept-Encoding header takes gzip: named (or `*`) with q above 0 (`gzip;q=0` refuses it,
    RFC 9110 12.5.3)."""
    gzip_q = star_q = None
    for coding in (accept_encoding or "").split(","):
        name, *params = (x.strip() for x in coding.split(";"))
        args = {k.strip().lower(): v.strip() for k, _, v in (p.partition("=") for p in params)}
        q = _q(args.get("q"))
        if name.lower() in ("gzip", "x-gzip"):
            gzip_q = q
        elif name == "*":
            star_q = q
    chosen = gzip_q if gzip_q is not None else star_q
    return chosen is not None and chosen > 0


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=1, mtime=0)  # level 1: a tenth of the size, quickly
