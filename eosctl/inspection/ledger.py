"""The sink ledger: per source partition, what the sink holds next to what Kafka says.

For each partition: sink rows, distinct offsets, min/max offset and duplicate rows (from the sink, opened
read-only through eosctl.sink); the next offset the sink stored with its rows (its offsets table); the
consumer group's committed offset, log start, HW and LSO (from Kafka). With a log scan (the default) the
sink's offset islands are reconciled against the log model up to the offset the sink claims to have
consumed, so a marker or aborted offset is never mistaken for a lost record; without it the ledger only
says how many offsets its span lacks and leaves the exact answer to `eosctl audit`.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from eosctl.base.errors import BrokerError
from eosctl.base.gcpause import paused
from eosctl.base.progress import Progress
from eosctl.cluster.logscan import scan_partitions
from eosctl.cluster.model import TP, PartitionLog
from eosctl.cluster.offsets import committed_positions
from eosctl.cluster.wire import Offsets, WireClient
from eosctl.config.model import Cluster, Sink
from eosctl.report.findings import Finding
from eosctl.rules.reconcile import Clipped, offset_mismatch, reconcile_partition
from eosctl.sink import OffsetIsland, SinkPartition, frozen, open_reader
from eosctl.txn.pendingoffsets import PendingCommit, pending_commits

# A ledger names at most this many flags of one kind per partition; counts stay exact.
MAX_FLAGS_PER_KIND = 20
FLAG_KINDS = ("offset_mismatch", "gap", "duplicate", "phantom_aborted", "phantom_marker",
              "phantom_uncommitted", "phantom_beyond_hw", "span_missing", "unexpected_topic", "invalid_row")


@dataclass(frozen=True)
class LedgerFlag:
    kind: str  # one of FLAG_KINDS
    first_offset: int | None
    last_offset: int | None
    count: int
    message: str


@dataclass
class PartitionLedger:
    # None only on the row holding invalid_row flags for sink rows whose topic or partition is invalid.
    topic: str | None
    partition: int | None
    rows: int = 0
    distinct_offsets: int = 0
    min_offset: int | None = None
    max_offset: int | None = None
    duplicate_rows: int = 0
    duplicate_offsets: int = 0
    stored_offset: int | None = None  # next offset in the sink's offsets table
    committed_offset: int | None = None  # the group's committed offset in Kafka
    log_start_offset: int | None = None
    high_watermark: int | None = None
    last_stable_offset: int | None = None
    checked_to: int | None = None  # exclusive: the offset the sink claims to have consumed up to
    missing_offsets: int | None = None  # committed data offsets below checked_to absent from the sink
    flags: list[LedgerFlag] = field(default_factory=list)
    # The group's next commit here is pending in an open transaction (committed_offset: the one before it).
    commit_pending: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PartitionLedger:
        d = dict(d)
        d["flags"] = [LedgerFlag(**f) for f in d.get("flags", [])]
        return cls(**d)


@dataclass
class Ledger:
    pipeline: str | None
    sink: str  # the file or glob, and table
    group: str | None
    scanned: bool  # True when holes were checked against the log model
    partitions: list[PartitionLedger]
    # Partitions whose ListOffsets and Fetch answers disagreed (eosctl.cluster.wire.Offsets): no clean bill on
    # them.
    offsets_disagreements: list[str] = field(default_factory=list)
    # The open transaction the group's pending offset commit is in (eosctl.txn.pendingoffsets), as a dict.
    pending_commit: dict[str, Any] | None = None

    @property
    def flags(self) -> list[tuple[PartitionLedger, LedgerFlag]]:
        return [(p, f) for p in self.partitions for f in p.flags]

    def to_dict(self) -> dict[str, Any]:
        return {
            "pipeline": self.pipeline,
            "sink": self.sink,
            "group": self.group,
            "scanned": self.scanned,
            "flagged_partitions": sum(1 for p in self.partitions if p.flags),
            "partitions": [p.to_dict() for p in self.partitions],
            "pending_commit": self.pending_commit,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Ledger:
        return cls(d.get("pipeline"), d["sink"], d.get("group"), bool(d.get("scanned")),
                   [PartitionLedger.from_dict(p) for p in d.get("partitions", [])],
                   pending_commit=d.get("pending_commit"))


def partition_ledger(
    topic: str,
    partition: int,
    summary: SinkPartition | None,
    islands: list[OffsetIsland],
    stored: int | None,
    committed: int | None,
    offsets: Offsets | None,
    log: PartitionLog | None,
    compare_offsets: bool = True,
    invalid: Iterable[Finding] = (),
) -> PartitionLedger:
    """One partition's ledger row and flags; pure, so it is tested without Kafka or DuckDB.

    `summary` is None when the sink has no rows, `islands` are the sink's, `offsets` were read after the
    sink, `log` covers [log start, HW) or is None (no scan). `compare_offsets`: the sink has an offsets
    table and a group was given (the audit's condition), so stored and committed are compared even when
    one side is missing. `invalid` are the partition's invalid_row findings (SinkReader.invalid_rows).
    """
    p = PartitionLedger(topic, partition, stored_offset=stored, committed_offset=committed)
    if summary is not None:
        p.rows, p.distinct_offsets = summary.rows, summary.distinct_offsets
        p.min_offset, p.max_offset = summary.min_offset, summary.max_offset
        p.duplicate_rows, p.duplicate_offsets = summary.duplicate_rows, summary.duplicate_offsets
    if offsets is not None:
        p.log_start_offset, p.high_watermark = offsets.log_start, offsets.high_watermark
        p.last_stable_offset = offsets.last_stable
    flags: list[LedgerFlag] = []

    if compare_offsets:
        # The audit's function, so the ledger and the audit never disagree on what a mismatch is (a
        # missing side means nothing consumed, from offset 0).
        m = offset_mismatch(topic, partition, stored, committed, log)
        if m is not None:
            side = "ahead of" if (stored or 0) > (committed or 0) else "behind"
            flags.append(LedgerFlag(
                "offset_mismatch", m.first_offset, m.last_offset, m.count,
                f"sink stored next offset {_none(stored)}, group committed {_none(committed)}: the sink is "
                f"{side} Kafka by {m.count} record{'s' if m.count != 1 else ''}"))
    flags += invalid_flags(invalid)

    # What the sink claims to have consumed: its own stored offset first (written atomically with its
    # rows), else the group's commit, else just past its highest row.
    upto = stored if stored is not None else committed
    if upto is None and p.max_offset is not None:
        upto = min(p.max_offset + 1, (1 << 63) - 1)  # a row at 2^63-1: the end must still be an int64
    p.checked_to = upto

    if log is not None and upto is not None:
        counts: dict[str, int] = {}
        # The first MAX_FLAGS_PER_KIND findings of each kind, and every gap's count: not 100k Findings.
        _, findings = reconcile_partition(Clipped(log, upto, offsets), islands, keep=MAX_FLAGS_PER_KIND,
                                          counts=counts)
        p.missing_offsets = counts.get("gap", 0)
        for kind, group in itertools.groupby(sorted(findings, key=lambda f: FLAG_KINDS.index(f.kind)),
                                             key=lambda f: f.kind):
            for f in list(group)[:MAX_FLAGS_PER_KIND]:
                flags.append(LedgerFlag(kind, f.first_offset, f.last_offset, f.count, _describe(f)))
    else:
        for i in [i for i in islands if i.multiplicity > 1][:MAX_FLAGS_PER_KIND]:
            extra = i.count * (i.multiplicity - 1)
            flags.append(LedgerFlag("duplicate", i.first, i.last, extra,
                                    f"offsets {span(i.first, i.last)} stored {i.multiplicity} times "
                                    f"({extra} extra rows)"))
        if p.min_offset is not None and p.max_offset is not None:
            missing = p.max_offset - p.min_offset + 1 - p.distinct_offsets
            if missing:
                flags.append(LedgerFlag(
                    "span_missing", p.min_offset, p.max_offset, missing,
                    f"offset span {p.min_offset}..{p.max_offset} has {missing} missing offsets (markers and "
                    f"aborted records included; run with --scan or `eosctl audit` for the exact answer)"))
    p.flags = flags
    return p


_WHAT = {
    "gap": "committed record{s} missing from the sink",
    "duplicate": "extra sink row{s} for offsets stored more than once",
    "phantom_aborted": "sink row{s} from aborted transactions",
    "phantom_marker": "sink row{s} at transaction-marker offsets",
    "phantom_uncommitted": "sink row{s} from still-open transactions",
    "phantom_beyond_hw": "sink row{s} at or beyond the high watermark",
}


def _describe(f: Finding) -> str:
    what = _WHAT[f.kind].format(s="" if f.count == 1 else "s")
    return f"{f.count} {what} at offsets {span(f.first_offset, f.last_offset)}"


def invalid_flags(findings: Iterable[Finding]) -> list[LedgerFlag]:
    """invalid_row findings as ledger flags: no offsets to name, the detail says which column is wrong."""
    return [LedgerFlag("invalid_row", None, None, f.count,
                       f"{f.count} sink row{'s' if f.count != 1 else ''} no Kafka record can match: "
                       f"{f.detail}") for f in findings]


def _none(v: int | None) -> str:
    return "none" if v is None else str(v)


def span(first: int | None, last: int | None) -> str:
    """An offset range as the ledger shows it: "-" (none), "7" or "7..9"."""
    return "-" if first is None else str(first) if first == last else f"{first}..{last}"


@dataclass
class SinkSide:
    """What the ledger reads from the sink, per source partition (read first, before Kafka)."""

    summaries: dict[TP, SinkPartition]
    stored: dict[TP, int] | None  # None: the sink has no offsets table
    islands: dict[TP, list[OffsetIsland]]
    invalid: list[Finding]
    shown: str  # the sink as the ledger names it


def read_sink(sink: Sink, where: str = "sink") -> SinkSide:
    """The sink's side of the ledger, read now. The sink first, then Kafka: every row read was written
    from a record Kafka committed before the offsets and scans that follow, so a live pipeline shows no
    phantom (eosctl.sink.frozen). The writer is kept out only while the file is copied."""
    with frozen(sink, where) as fixed, open_reader(fixed, where) as reader:
        summaries = {(s.topic, s.partition): s for s in reader.summaries()}
        stored_rows = reader.stored_offsets()
        by_partition = itertools.groupby(reader.islands(), key=lambda i: (i.topic, i.partition))
        islands: dict[TP, list[OffsetIsland]] = {tp: list(group) for tp, group in by_partition}
        invalid = reader.invalid_rows()
        source = reader.source
    stored = None if stored_rows is None else {(s.topic, s.partition): s.next_offset for s in stored_rows}
    shown = source if sink.parquet else f"{source} ({sink.table})"  # a table names its rows; a glob, files
    return SinkSide(summaries, stored, islands, invalid, shown)


def collect(
    cluster: Cluster,
    sink: Sink,
    topics: Iterable[str],
    group: str | None,
    *,
    pipeline: str | None = None,
    where: str = "sink",
    duckdb_path: str | None = None,
    parquet: str | None = None,
    scan: bool = True,
    logs: dict[TP, PartitionLog] | None = None,
    progress: Progress | None = None,
) -> Ledger:
    """Read the sink (read-only) and Kafka, and build the ledger for `topics` and the sink's own topics.

    `logs` are partition scans the caller already has (the snapshot scans once for everything).
    """
    if duckdb_path or parquet:
        sink = replace(sink, duckdb=duckdb_path, parquet=parquet)
    # An island and a finding per stretch of the sink: 100k of each, no cycles among them
    # (eosctl.base.gcpause).
    with paused():
        side = read_sink(sink, where)
        with WireClient(cluster) as client:
            positions = committed_positions(cluster, group) if group else None
            held = pending_commits(client, {group: positions.pending}) if group and positions else {}
            return ledger_of(client, side, topics, group, positions.committed if positions else {},
                             pipeline=pipeline, scan=scan, logs=logs, progress=progress,
                             pending=held.get(group or ""))


def _now_ms() -> int:
    return int(time.time() * 1000)


def ledger_of(
    client: WireClient,
    side: SinkSide,
    topics: Iterable[str],
    group: str | None,
    committed: dict[TP, int],
    *,
    pipeline: str | None = None,
    scan: bool = True,
    logs: dict[TP, PartitionLog] | None = None,
    offsets: dict[TP, Offsets] | None = None,
    progress: Progress | None = None,
    memo: dict[TP, tuple[tuple, PartitionLedger]] | None = None,
    pending: PendingCommit | None = None,
) -> Ledger:
    """The ledger from the sink's side read before, and Kafka now (the group's ``committed`` offsets).
    ``logs``: whole-log scans the caller has (the rest are scanned here when ``scan``); ``offsets``: the
    partitions' offsets if the caller just read them. ``memo``: kept by a caller that asks again and again
    (the live model): a partition whose inputs are the same as last time (its log the same object) keeps
    its row, so a refresh reconciles only the partitions that changed. ``pending``: the group's offset
    commit an open transaction holds, shown on its partitions (context: no flag of its own)."""
    summaries, islands, invalid = side.summaries, side.islands, side.invalid
    stored = side.stored or {}
    expected_topics = list(dict.fromkeys(topics))
    unexpected = sorted({t for t, _ in summaries} - set(expected_topics))
    known = client.metadata(expected_topics) if expected_topics else {}
    for t in unexpected:
        try:
            known.update(client.metadata([t]))
        except BrokerError:
            pass  # rows naming a topic Kafka lacks: flagged below
    tps = sorted({(t, p) for t, parts in known.items() for p in parts} | set(summaries) | set(stored))
    in_kafka = [tp for tp in tps if tp[0] in known and tp[1] in known[tp[0]]]
    offsets = dict(offsets or {})
    if any(tp not in offsets for tp in in_kafka):
        offsets = client.offsets(in_kafka)
    logs = dict(logs or {})
    todo = [tp for tp in in_kafka if tp not in logs]
    if scan and todo:
        logs.update(scan_partitions(client, todo, progress=progress))
    # The audit compares offsets under the same condition: a group, and an offsets table in the sink.
    compare = group is not None and side.stored is not None
    by_tp: dict[tuple[str | None, int | None], list[Finding]] = {}
    for f in invalid:
        by_tp.setdefault((f.topic, f.partition), []).append(f)
    rows = []
    for tp in tps:
        args = (summaries.get(tp), islands.get(tp, []), stored.get(tp), committed.get(tp), offsets.get(tp),
                logs.get(tp), compare and tp[0] in expected_topics, tuple(by_tp.pop(tp, ())))
        kept = memo.get(tp) if memo is not None and tp[0] not in unexpected else None
        if kept is not None and kept[0][5] is args[5] and kept[0][:5] == args[:5] and kept[0][6:] == args[6:]:
            rows.append(kept[1])
            continue
        row = partition_ledger(tp[0], tp[1], *args[:6], compare_offsets=args[6], invalid=args[7])
        if memo is not None and tp[0] not in unexpected:
            memo[tp] = (args, row)
        if tp[0] in unexpected:
            row.flags.insert(0, LedgerFlag("unexpected_topic", row.min_offset, row.max_offset, row.rows,
                                           f"topic {tp[0]} is not a source topic of the pipeline"
                                           + ("" if tp in offsets else " and does not exist in Kafka")))
        rows.append(row)
    # Rows whose topic or partition is itself invalid (or names a partition nothing else does): one row
    # each, first, so the table and JSON show them without guessing a partition.
    if memo is not None:
        for tp in set(memo) - set(tps):
            del memo[tp]
    rows[:0] = [PartitionLedger(t, p, rows=sum(f.count for f in fs), flags=invalid_flags(fs))
                for (t, p), fs in sorted(by_tp.items(), key=lambda kv: (kv[0][0] or "", kv[0][1] or -1))]
    if pending is not None:
        rows = [replace(r, commit_pending=True) if (r.topic, r.partition) in pending.partitions else r
                for r in rows]
    return Ledger(pipeline, side.shown, group, scan, rows,
                  [o.disagreement for tp, o in sorted(offsets.items()) if o.disagreement],
                  pending_commit=None if pending is None else pending.to_dict(_now_ms()))
