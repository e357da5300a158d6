"""What an audit found: plain dataclasses with a stable JSON form (CI pipelines parse it).

Shared by the auditors (which produce reports) and the TUI (which shows them), so nothing here imports
Spark, DuckDB or Kafka clients.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from eosctl.config.policy import Waiver
from eosctl.report.readpoint import ReadPoint
from eosctl.report.rootcauses import KEY_KINDS, RootCause, root_causes
from eosctl.report.segments import LogSegment
from eosctl.report.window import PartitionWindow, WindowSpec

KINDS = (
    "gap",
    "duplicate",
    "phantom_aborted",
    "phantom_marker",
    "phantom_uncommitted",
    "phantom_beyond_hw",
    "key_duplicate",
    "offset_mismatch",
    "invalid_row",
    # Sink rows whose key is not the key of the record at their offset (eosctl.rules.content).
    "content_mismatch",
    # A Kafka stage audited with `lineage = "key"` (its outputs paired with its inputs by key): what the
    # reconciliation found, named for keys, with the outputs' offsets (eosctl.rules.hop.key_findings).
    "lost_key",
    "duplicate_key",
    "phantom_key",
    # A Kafka stage's outputs of input past its group's committed offsets (eosctl.rules.hop).
    "ahead_of_commit",
    # A replica (MirrorMaker 2, `lineage = "replica"`) holding a source record after records that follow it
    # (eosctl.rules.replica).
    "out_of_order",
    # A sink with a dead-letter queue (sink.dlq_topic, eosctl.rules.deadletter): a committed record held by
    # the sink and the DLQ, one dead-lettered twice, and a dead-lettered record of an aborted transaction.
    "sink_and_dlq",
    "dlq_duplicate",
    "dlq_aborted",
    # A sink with a route (sink.route, eosctl.config.route): rows of records its route leaves out.
    "misrouted",
    # A state sink (mode = "upsert"): a table keyed by the record's key, judged against the latest committed
    # record per key (eosctl.rules.upsert).
    "stale_value",
    "aborted_value",
    "uncommitted_value",
    "resurrected_key",
    "missing_key",
    "unknown_key",
    "value_mismatch",
    # mode = "aggregate": a key's fold (count, sum, min, max) differs from its committed records'
    # (eosctl.rules.aggregate).
    "aggregate_mismatch",
)

# One line per kind, for tables, JUnit messages and --help.
DESCRIPTIONS = {
    "gap": "committed source records missing from the sink",
    "duplicate": "source offsets stored in more than one sink row (count = extra rows)",
    "phantom_aborted": "sink rows for records of aborted transactions",
    "phantom_marker": "sink rows at offsets of transaction markers",
    "phantom_uncommitted": "sink rows for records of still-open transactions",
    "phantom_beyond_hw": "sink rows at offsets the log never had (>= high watermark, or unknown partition)",
    "key_duplicate": "one business key written from several committed source offsets",
    "offset_mismatch": "offsets stored in the sink disagree with the consumer group's committed offsets",
    "invalid_row": "sink rows no Kafka record can match (NULL topic, partition or offset; offset negative, "
                   "above 2^63-1 or not an integer)",
    "content_mismatch": "sink rows whose key is not the key of the Kafka record at their offset",
    "lost_key": "key lineage: committed input records whose key has no output left to pair with them",
    "duplicate_key": "key lineage: more outputs of a key than committed inputs carry it (count = extra)",
    "phantom_key": "key lineage: input records of aborted or open transactions whose key has outputs "
                   "(count = input records, outputs in detail)",
    "ahead_of_commit": "a stage's outputs of input past its group's committed offsets: written before the "
                       "commit, written again on restart (count = input records, outputs in detail)",
    "out_of_order": "a replica holds a source record once, but after records that follow it at the source",
    "sink_and_dlq": "committed records held by the sink and dead-lettered to its DLQ too",
    "dlq_duplicate": "committed records dead-lettered more than once (count = extra dead letters)",
    "dlq_aborted": "records of aborted or still-open transactions dead-lettered to the DLQ",
    "misrouted": "sink rows of committed records the sink's route does not select (count = rows)",
    "stale_value": "state sink: a key's row holds an older committed record's value (count = committed "
                   "updates behind)",
    "aborted_value": "state sink: a key's row holds the value of a record of an aborted transaction",
    "uncommitted_value": "state sink: a key's row holds the value of a record of a still-open transaction",
    "resurrected_key": "state sink: a row for a key whose latest committed record deletes it",
    "missing_key": "state sink: no row for a key whose latest committed record is a value",
    "unknown_key": "state sink: a row for a key no record of the source topics has",
    "value_mismatch": "state sink: a key's row holds a value no record of that key has",
    "aggregate_mismatch": "aggregate sink: a key's fold differs from the fold of its committed records "
                          "(count = the records that explain it)",
}
# The kinds of a state sink, whose cause carries a rule (eosctl.rules.upsert).
STATE_KINDS = ("stale_value", "aborted_value", "uncommitted_value", "resurrected_key", "missing_key",
               "unknown_key", "value_mismatch", "aggregate_mismatch")

PASS, FAIL = "pass", "fail"

# cause.transactions[].outcome
COMMITTED, ABORTED, OPEN, NON_TRANSACTIONAL = "committed", "aborted", "open", "non_transactional"
# cause.passed_by of a gap: what is already beyond its last offset.
STORED_OFFSETS, COMMITTED_OFFSETS = "stored_offsets", "committed_offsets"
# cause.rule of a key_duplicate: why nothing could deduplicate the second write.
KEY_RULES = ("non_idempotent", "producer_sessions", "same_session", "same_transaction")
MAX_LISTED = 100  # transactions or markers listed per cause; ``omitted`` counts the rest


@dataclass(frozen=True)
class TxnCause:
    """One transaction (or run of non-transactional batches) that wrote offsets of a finding."""

    producer_id: int
    producer_epoch: int
    first_offset: int  # the finding's offsets inside it
    last_offset: int
    outcome: str  # COMMITTED, ABORTED, OPEN or NON_TRANSACTIONAL
    marker_offset: int | None  # its COMMIT/ABORT marker; None when open or non-transactional
    fenced: bool = False  # aborted by the coordinator because a newer epoch of the producer took over
    # key_duplicate only: its offsets may lie in several partitions
    topic: str | None = None
    partition: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"producer_id": self.producer_id, "producer_epoch": self.producer_epoch,
                             "first_offset": self.first_offset, "last_offset": self.last_offset,
                             "outcome": self.outcome, "marker_offset": self.marker_offset,
                             "fenced": self.fenced}
        if self.topic is not None:
            d.update(topic=self.topic, partition=self.partition)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TxnCause:
        return cls(int(d["producer_id"]), int(d["producer_epoch"]), int(d["first_offset"]),
                   int(d["last_offset"]), d["outcome"], _int(d.get("marker_offset")), bool(d.get("fenced")),
                   d.get("topic"), _int(d.get("partition")))


@dataclass(frozen=True)
class MarkerCause:
    offset: int
    type: str  # COMMIT | ABORT
    producer_id: int
    producer_epoch: int  # the marker batch's own epoch

    def to_dict(self) -> dict[str, Any]:
        return {"offset": self.offset, "type": self.type, "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MarkerCause:
        return cls(int(d["offset"]), d["type"], int(d["producer_id"]), int(d["producer_epoch"]))


@dataclass(frozen=True)
class Cause:
    """Why a finding happened, from the log model and the sink the audit read (eosctl.rules.causes).

    Which fields a finding's JSON carries depends on its kind (docs/json.md): ``transactions`` for findings
    over data records, ``markers`` for phantom_marker, ``sink_before``/``sink_after``/``passed_by`` for a
    gap, ``rows_per_offset`` for a duplicate, ``rule`` for a key_duplicate."""

    kind: str  # the finding's kind
    summary: str  # one plain sentence for an incident ticket
    transactions: tuple[TxnCause, ...] = ()
    markers: tuple[MarkerCause, ...] = ()
    omitted: int = 0  # transactions or markers beyond MAX_LISTED
    sink_before: int | None = None
    sink_after: int | None = None
    passed_by: str | None = None
    rows_min: int | None = None
    rows_max: int | None = None
    rule: str | None = None
    # A duplicate's write order (sink.order_column): the column, then (min, max) of its first writes and of
    # its repeated writes over the finding's offsets.
    order_column: str | None = None
    first_write: tuple[Any, Any] | None = None
    repeated_write: tuple[Any, Any] | None = None
    # content_mismatch (eosctl.rules.content): the shift a writer stored offsets with (rule
    # shifted_coordinates);
    # the partition leader epoch of the records now at the offsets, the newest epoch the sink's rows before
    # them saw, and where that epoch begins in the log (rule rewritten_after_leader_change)
    shift: int | None = None
    leader_epoch: int | None = None
    sink_leader_epoch: int | None = None
    epoch_start: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"summary": self.summary}
        if self.kind in _WITH_TRANSACTIONS:
            d["transactions"] = [t.to_dict() for t in self.transactions]
        if self.kind == "phantom_marker":
            d["markers"] = [m.to_dict() for m in self.markers]
        if self.omitted:
            d["omitted"] = self.omitted
        if self.kind == "gap":
            d.update(sink_before=self.sink_before, sink_after=self.sink_after, passed_by=self.passed_by)
        if self.kind == "duplicate":
            d["rows_per_offset"] = {"min": self.rows_min, "max": self.rows_max}
            if self.order_column is not None:
                d["write_order"] = {"column": self.order_column,
                                    "first_write": _span_dict(self.first_write),
                                    "repeated_write": _span_dict(self.repeated_write)}
        if self.kind == "key_duplicate" or self.kind in STATE_KINDS or (
                self.kind == "phantom_beyond_hw" and self.rule is not None):
            d["rule"] = self.rule
        if self.kind == "content_mismatch":
            d.update(_content_dict(self))
        return d

    @classmethod
    def from_dict(cls, kind: str, d: dict[str, Any]) -> Cause:
        rows = d.get("rows_per_offset") or {}
        order = d.get("write_order") or {}
        return cls(kind, d["summary"], tuple(TxnCause.from_dict(t) for t in d.get("transactions", ())),
                   tuple(MarkerCause.from_dict(m) for m in d.get("markers", ())), int(d.get("omitted", 0)),
                   _int(d.get("sink_before")), _int(d.get("sink_after")), d.get("passed_by"),
                   _int(rows.get("min")), _int(rows.get("max")), d.get("rule"),
                   order.get("column"), _span_of(order.get("first_write")),
                   _span_of(order.get("repeated_write")), _int(d.get("shift")), _int(d.get("leader_epoch")),
                   _int(d.get("sink_leader_epoch")), _int(d.get("epoch_start")))


def _content_dict(c: Cause) -> dict[str, Any]:
    """A content_mismatch's cause fields (eosctl.rules.content): its rule, and what that rule rests on."""
    d: dict[str, Any] = {"rule": c.rule}
    if c.shift is not None:
        d["shift"] = c.shift
    if c.leader_epoch is not None:
        d["leader_epoch"] = c.leader_epoch
    if c.sink_leader_epoch is not None:
        d.update(sink_leader_epoch=c.sink_leader_epoch, epoch_start=c.epoch_start)
    return d


def _span_dict(span: tuple[Any, Any] | None) -> dict[str, Any] | None:
    return None if span is None else {"min": span[0], "max": span[1]}


def _span_of(d: Any) -> tuple[Any, Any] | None:
    return (d.get("min"), d.get("max")) if isinstance(d, dict) else None


_WITH_TRANSACTIONS = ("gap", "phantom_aborted", "phantom_uncommitted", "key_duplicate", "aborted_value",
                      "uncommitted_value")


@dataclass(frozen=True)
class Finding:
    kind: str
    # None only for invalid_row: the row's topic/partition/offsets, where those are what is wrong with it.
    topic: str | None
    partition: int | None
    first_offset: int | None
    last_offset: int | None  # inclusive
    count: int
    key: str | None = None
    offsets: tuple[int, ...] | None = None
    # Free text for people (e.g. both sides of an offset_mismatch); not part of the comparison key.
    detail: str | None = None
    # Why it happened (eosctl.rules.causes); None in reports from before causes existed.
    cause: Cause | None = field(default=None, compare=False)
    # The waiver that covers it (eosctl.report.policy), set after the findings are final; an expired one
    # is kept to say so, and no longer waives.
    waiver: WaiverMatch | None = field(default=None, compare=False)
    # The sink it was found in, in a pipeline of several ([pipelines.NAME.sinks.LABEL]); None: the one sink.
    sink: str | None = None

    @property
    def waived(self) -> bool:
        return self.waiver is not None and not self.waiver.expired

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown finding kind {self.kind!r}")

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "kind": self.kind,
            "topic": self.topic,
            "partition": self.partition,
            "first_offset": self.first_offset,
            "last_offset": self.last_offset,
            "count": self.count,
        }
        if self.key is not None:
            d["key"] = self.key
        if self.offsets is not None:
            d["offsets"] = list(self.offsets)
        if self.detail is not None:
            d["detail"] = self.detail
        if self.cause is not None:
            d["cause"] = self.cause.to_dict()
        if self.waiver is not None:
            d["waiver"] = {**self.waiver.waiver.to_dict(), "expired": self.waiver.expired}
        if self.sink is not None:
            d["sink"] = self.sink
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Finding:
        offsets, cause, waiver = d.get("offsets"), d.get("cause"), d.get("waiver")
        return cls(d["kind"], d["topic"], _int(d["partition"]), _int(d["first_offset"]),
                   _int(d["last_offset"]), int(d["count"]), d.get("key"),
                   None if offsets is None else tuple(offsets), d.get("detail"),
                   None if cause is None else Cause.from_dict(KEY_KINDS.get(d["kind"], d["kind"]), cause),
                   None if not isinstance(waiver, dict) else
                   WaiverMatch(Waiver.from_dict(waiver), bool(waiver.get("expired"))), d.get("sink"))

    @property
    def sort_key(self) -> tuple:
        # Unknown topic/partition/offset (invalid_row) sort first; a tuple never compares None with an int.
        # Written out (no helper calls): every report and every partition's sweep sorts by it.
        t, p, o = self.topic, self.partition, self.first_offset
        return ((t is not None, t or ""), (p is not None, p or 0), (o is not None, o or 0),
                _KIND_ORDER[self.kind], self.key or "", self.detail or "", self.sink or "")


_KIND_ORDER = {k: i for i, k in enumerate(KINDS)}


@dataclass(frozen=True)
class WaiverMatch:
    """A waiver that covers a finding, and whether it had expired when the audit ran."""

    waiver: Waiver
    expired: bool


def _int(v: Any) -> int | None:
    return None if v is None else int(v)


@dataclass(frozen=True)
class PartitionSummary:
    topic: str
    partition: int
    log_start_offset: int
    last_stable_offset: int
    high_watermark: int
    expected_records: int  # committed data records in [log start, LSO)
    sink_rows: int  # every sink row naming this partition, phantoms and duplicates included
    # Sink rows at offsets that can't be checked: below the log start (deleted by retention) or at offsets
    # compaction removed. Never reported as findings.
    unverifiable_below: int = 0
    # False when the topic/partition doesn't exist in Kafka (all its sink rows are phantom_beyond_hw).
    exists: bool = True
    # Aborted / marker / open / compacted stretches of the log, bounded; None when the audit didn't record
    # them (older reports, partitions Kafka doesn't have). Only the HTML gap map reads them.
    log_segments: tuple[LogSegment, ...] | None = None
    # An audit of a window (eosctl.report.window): the partition's window in offsets; its sink rows outside
    # it (never findings) and the committed records below the sink's retention floor it no longer holds
    # (expected gone, never gaps).
    window: PartitionWindow | None = None
    outside_window: int = 0
    expired: int = 0
    # A sink with a dead-letter queue: the committed records the DLQ alone holds (never gaps); None: no DLQ.
    dead_lettered: int | None = None
    # A sink with a route: the committed records the route leaves out (filtered: never gaps); None: no route.
    filtered: int | None = None
    # The sink these rows are of, in a pipeline of several sinks; None: the one sink.
    sink: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "topic": self.topic,
            "partition": self.partition,
            "log_start_offset": self.log_start_offset,
            "last_stable_offset": self.last_stable_offset,
            "high_watermark": self.high_watermark,
            "expected_records": self.expected_records,
            "sink_rows": self.sink_rows,
            "unverifiable_below": self.unverifiable_below,
            "exists": self.exists,
        }
        if self.log_segments is not None:
            d["log_segments"] = [s.to_dict() for s in self.log_segments]
        if self.window is not None:
            d["window"] = {**self.window.to_dict(), "outside_window": self.outside_window,
                           "expired": self.expired}
        if self.dead_lettered is not None:
            d["dead_lettered"] = self.dead_lettered
        if self.filtered is not None:
            d["filtered"] = self.filtered
        if self.sink is not None:
            d["sink"] = self.sink
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PartitionSummary:
        segments, window = d.get("log_segments"), d.get("window")
        return cls(d["topic"], int(d["partition"]), int(d["log_start_offset"]), int(d["last_stable_offset"]),
                   int(d["high_watermark"]), int(d["expected_records"]), int(d["sink_rows"]),
                   int(d.get("unverifiable_below", 0)), bool(d.get("exists", True)),
                   None if segments is None else tuple(LogSegment.from_dict(s) for s in segments),
                   None if not isinstance(window, dict) else PartitionWindow.from_dict(window),
                   int(window.get("outside_window", 0)) if isinstance(window, dict) else 0,
                   int(window.get("expired", 0)) if isinstance(window, dict) else 0,
                   _int(d.get("dead_lettered")), _int(d.get("filtered")), d.get("sink"))


def parse_kinds(text: str | Iterable[str] | None) -> tuple[str, ...]:
    """`--fail-on gap,duplicate` -> ("gap", "duplicate"); None or "all" -> every kind."""
    if text is None:
        return KINDS
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text) if n.strip()]
    if names in ([], ["all"]):
        return KINDS
    unknown = [n for n in names if n not in KINDS]
    if unknown:
        raise ValueError(f"unknown finding kind {unknown[0]!r} (kinds: {', '.join(KINDS)})")
    return tuple(k for k in KINDS if k in names)


@dataclass(frozen=True)
class Hop:
    """One hop of a pipeline audited hop by hop: which pipeline of the config, what it reads and where its
    output lands. Its findings and partitions are the report's whose topic is one of ``topics``."""

    name: str
    topics: tuple[str, ...]
    sink: str | None
    group: str | None
    verdict: str
    findings: int
    failing_findings: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "topics": list(self.topics), "sink": self.sink, "group": self.group,
                "verdict": self.verdict, "findings": self.findings, "failing_findings": self.failing_findings}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Hop:
        return cls(str(d["name"]), tuple(d.get("topics") or ()), d.get("sink"), d.get("group"),
                   str(d["verdict"]), int(d.get("findings", 0)), int(d.get("failing_findings", 0)))


def follow_stages(hops: list[list[Finding]]) -> list[Finding]:
    """The hops' findings, in hop order, where a key duplicate a stage copied faithfully is blamed on its
    input: a later hop's key_duplicate whose key is duplicated in an earlier hop (the stage's input topic,
    whose sink rows are the stage's output records, traced back by their lineage) takes that cause's rule
    and writers after its own."""
    out: list[Finding] = []
    upstream: dict[str, Finding] = {}  # key -> the earliest hop's key_duplicate with a cause
    for findings in hops:
        here = []
        for f in findings:
            source = upstream.get(f.key or "") if f.kind == "key_duplicate" else None
            if source is not None and source.cause is not None and f.cause is not None:
                c = source.cause
                f = replace(f, cause=replace(
                    f.cause, rule=c.rule, transactions=f.cause.transactions + c.transactions,
                    summary=f"{f.cause.summary.split(': ', 1)[0]}: the stage copied it faithfully from its "
                            f"input, where {c.summary[0].lower()}{c.summary[1:]}"))
            here.append(f)
        for f in here:
            if f.kind == "key_duplicate" and f.key is not None and f.cause is not None:
                upstream.setdefault(f.key, f)
        out += here
    return out


def merge_hops(reports: list[tuple[str, AuditReport]], topics: list[tuple[str, ...]],
               elapsed_seconds: float | None = None) -> AuditReport:
    """One pipeline's report from its hops' reports, in hop order: every partition and finding (a hop's
    are those of its input topics), ``hops`` says which is which, and the verdict is the pipeline's."""
    first = reports[0][1]
    hops = [Hop(name, tuple(t), r.sink, r.group, r.verdict, len(r.findings), len(r.failing))
            for (name, r), t in zip(reports, topics, strict=True)]
    return AuditReport.build([p for _, r in reports for p in r.partitions],
                               follow_stages([r.findings for _, r in reports]), first.fail_on,
                               sink=reports[-1][1].sink, group=reports[-1][1].group, engine=first.engine,
                               elapsed_seconds=elapsed_seconds, hops=hops)


def merge_sinks(reports: list[tuple[str, AuditReport]], topics: tuple[str, ...],
                elapsed_seconds: float | None = None) -> AuditReport:
    """One pipeline's report from the reports of its sinks (label, report), in order: every partition and
    finding, each naming its sink; ``sinks`` says each one's verdict, and the verdict is the pipeline's."""
    first = reports[0][1]
    sinks = [Hop(label, topics, r.sink, r.group, r.verdict, len(r.findings), len(r.failing))
             for label, r in reports]
    return AuditReport.build([replace(p, sink=label) for label, r in reports for p in r.partitions],
                             [replace(f, sink=label) for label, r in reports for f in r.findings],
                             first.fail_on,
                             sink=", ".join(f"{label}: {r.sink}" for label, r in reports), group=first.group,
                             engine=first.engine, elapsed_seconds=elapsed_seconds, sinks=sinks,
                             window=first.window)


@dataclass
class AuditReport:
    verdict: str  # "pass" | "fail"
    partitions: list[PartitionSummary]
    findings: list[Finding]
    fail_on: tuple[str, ...] = KINDS
    sink: str | None = None  # what was audited, for people: file or glob and table
    # The one state of the sink the audit read (kind, source, and e.g. copied_at, or a PostgreSQL snapshot
    # and server_version), parsed once when a report is read back.
    sink_read_point: ReadPoint | None = None
    group: str | None = None  # consumer group checked for offset_mismatch, if any
    engine: dict[str, Any] = field(default_factory=dict)  # Spark master/remote, timings
    elapsed_seconds: float | None = None
    hops: list[Hop] = field(default_factory=list)  # a pipeline audited hop by hop; [] for one hop
    window: WindowSpec | None = None  # the window judged (--since/--until, sink retention); None: all of it
    # The policy applied to the final findings (eosctl.report.policy): each configured kind's level
    # ({"warn", "fail", "count", "level"}), and every waiver given with the findings it matched.
    levels: dict[str, dict[str, Any]] = field(default_factory=dict)
    waivers: list[dict[str, Any]] = field(default_factory=list)
    # A sink with a dead-letter queue: what the DLQ held (auditors.deadletters.summary); None: no DLQ.
    dlq: dict[str, Any] | None = None
    # A pipeline of several sinks ([pipelines.NAME.sinks.LABEL]): each sink's verdict, in the file's order
    # (Hop's fields: name = its label, sink = where it is); [] for one sink.
    sinks: list[Hop] = field(default_factory=list)

    @classmethod
    def build(cls, partitions: Iterable[PartitionSummary], findings: Iterable[Finding],
              fail_on: Iterable[str] = KINDS, **kw: Any) -> AuditReport:
        """Sort everything and derive the verdict from the findings whose kind is in ``fail_on``."""
        fail_on = tuple(fail_on)
        findings = sorted(findings, key=lambda f: f.sort_key)
        partitions = sorted(partitions, key=lambda p: (p.topic, p.partition, p.sink or ""))
        verdict = FAIL if any(f.kind in fail_on for f in findings) else PASS
        return cls(verdict, partitions, findings, fail_on, **kw)

    @cached_property
    def root_causes(self) -> list[RootCause]:
        """What explains the findings, grouped (eosctl.report.rootcauses), computed once: the JSON form and
        every renderer list these. First asked for after a report file's types are checked (findings
        are not changed after the report is built: a changed report is a new one, dataclasses.replace)."""
        return root_causes(self.findings)

    @property
    def failing(self) -> list[Finding]:
        """The findings that fail the audit: of a kind in fail_on, not waived, and of a kind whose level
        (where one is set) reached fail."""
        levels = self.levels
        return [f for f in self.findings if f.kind in self.fail_on and not f.waived
                and (f.kind not in levels or levels[f.kind]["level"] == "fail")]

    @property
    def warnings(self) -> list[Finding]:
        """The findings of a kind whose level is warn (not waived, in fail_on)."""
        levels = self.levels
        return [f for f in self.findings if f.kind in self.fail_on and not f.waived
                and f.kind in levels and levels[f.kind]["level"] == "warn"]

    def counts(self) -> dict[str, int]:
        """Findings per kind, every kind listed (zeros included) so consumers need no defaults."""
        out = dict.fromkeys(KINDS, 0)
        for f in self.findings:
            out[f.kind] += 1
        return out

    def to_dict(self, findings: bool = True) -> dict[str, Any]:
        """The report's JSON form; ``findings`` False leaves them None (eosctl.report.compactjson writes
        them)."""
        return {
            "verdict": self.verdict,
            "fail_on": list(self.fail_on),
            "summary": {
                "partitions": len(self.partitions),
                "expected_records": sum(p.expected_records for p in self.partitions),
                "sink_rows": sum(p.sink_rows for p in self.partitions),
                "unverifiable_rows": sum(p.unverifiable_below for p in self.partitions),
                "findings": self.counts(),
                "failing_findings": len(self.failing),
                "waived_findings": sum(1 for f in self.findings if f.waived),
                "warning_findings": len(self.warnings),
            },
            "partitions": [p.to_dict() for p in self.partitions],
            "findings": [f.to_dict() for f in self.findings] if findings else None,
            "root_causes": [r.to_dict() for r in self.root_causes],
            "sink": self.sink,
            "sink_read_point": None if self.sink_read_point is None else self.sink_read_point.to_dict(),
            "group": self.group,
            "engine": self.engine,
            "elapsed_seconds": None if self.elapsed_seconds is None else round(self.elapsed_seconds, 3),
            "hops": [h.to_dict() for h in self.hops],
            "window": None if self.window is None else self.window.to_dict(),
            "levels": [{"kind": k, **v} for k, v in self.levels.items()],
            "dlq": self.dlq,
            "sinks": [h.to_dict() for h in self.sinks],
            "waivers": self.waivers,
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AuditReport:
        return cls(
            verdict=d["verdict"],
            partitions=[PartitionSummary.from_dict(p) for p in d.get("partitions", [])],
            findings=[Finding.from_dict(f) for f in d.get("findings", [])],
            fail_on=tuple(d.get("fail_on", KINDS)),
            sink=d.get("sink"),
            sink_read_point=_read_point(d.get("sink_read_point")),
            group=d.get("group"),
            engine=dict(d.get("engine") or {}),
            elapsed_seconds=d.get("elapsed_seconds"),
            hops=[Hop.from_dict(h) for h in d.get("hops") or []],
            window=WindowSpec.from_dict(d["window"]) if isinstance(d.get("window"), dict) else None,
            levels={str(lv["kind"]): {k: v for k, v in lv.items() if k != "kind"}
                    for lv in d.get("levels") or [] if isinstance(lv, dict) and "kind" in lv},
            waivers=list(d.get("waivers") or []),
            dlq=d.get("dlq") if isinstance(d.get("dlq"), dict) else None,
            sinks=[Hop.from_dict(h) for h in d.get("sinks") or []],
        )

    @classmethod
    def from_json(cls, text: str) -> AuditReport:
        return cls.from_dict(json.loads(text))


def _read_point(d: Any) -> Any:
    """A report file's sink_read_point as a ReadPoint; anything but an object is left as it is, for the
    file's check to name (eosctl.report.file)."""
    return ReadPoint.from_dict(d) if isinstance(d, dict) else d
