"""The sink ledger: per source partition, what the sink holds next to what Kafka says.

For each partition: sink rows, distinct offsets, min/max offset and duplicate rows (from the sink, opened
read-only through eosctl.sinkdb); the next offset the sink stored with its rows (its offsets table); the
consumer group's committed offset, log start, HW and LSO (from Kafka). With a log scan (the default) the
sink's offset islands are reconciled against the log model up to the offset the sink claims to have
consumed, so a marker or aborted offset is never mistaken for a lost record; without it the ledger only
says how many offsets its span lacks and leaves the exact answer to `eosctl audit`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from eosctl.config import Cluster, Sink
from eosctl.errors import BrokerError
from eosctl.progress import Progress

# A ledger names at most this many flags of one kind per partition; counts stay exact.
MAX_FLAGS_PER_KIND = 20
FLAG_KINDS = ("offset_mismatch", "gap", "duplicate", "phantom_aborted", "phantom_marker",
              "phantom_uncommitted", "phantom_beyond_hw", "span_missing", "unexpected_topic")


@dataclass(frozen=True)
class LedgerFlag:
    kind: str  # one of FLAG_KINDS
    first_offset: int | None
    last_offset: int | None
    count: int
    message: str


@dataclass
class PartitionLedger:
    topic: str
    partition: int
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
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Ledger:
        return cls(d.get("pipeline"), d["sink"], d.get("group"), bool(d.get("scanned")),
                   [PartitionLedger.from_dict(p) for p in d.get("partitions", [])])


def committed_offsets(cluster: Cluster, group: str, timeout: float = 10.0) -> dict[tuple[str, int], int]:
    """The group's committed offsets in Kafka ((topic, partition) -> next offset); {} if none."""
    from eosctl.clients import confluent_admin
    from eosctl.lag import group_offsets

    return group_offsets(confluent_admin(cluster, timeout), [group], timeout)[group]


class _Clipped:
    """The log as far as the sink claims to have read: DATA past `upto` is pending, not missing."""

    def __init__(self, log: Any, upto: int):
        self.topic, self.partition, self.ranges = log.topic, log.partition, log.ranges
        self.log_start_offset, self.high_watermark = log.log_start_offset, log.high_watermark
        self.last_stable_offset = min(log.last_stable_offset, upto)


def partition_ledger(
    topic: str,
    partition: int,
    summary: Any | None,
    islands: list[Any],
    stored: int | None,
    committed: int | None,
    offsets: Any | None,
    log: Any | None,
) -> PartitionLedger:
    """One partition's ledger row and flags; pure, so it is tested without Kafka or DuckDB.

    `summary` is a sinkdb.PartitionSummary (None: no rows), `islands` its sinkdb.OffsetIslands, `offsets`
    a wire.Offsets, `log` an eosctl.model.PartitionLog covering [log start, HW) or None (no scan).
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

    if stored is not None and committed is not None:
        from eosctl.reconcile import offset_mismatch

        # The audit's rule, so the ledger and the audit never disagree on what a mismatch is.
        m = offset_mismatch(topic, partition, stored, committed, log)
        if m is not None:
            side = "ahead of" if stored > committed else "behind"
            flags.append(LedgerFlag(
                "offset_mismatch", m.first_offset, m.last_offset, m.count,
                f"sink stored next offset {stored}, group committed {committed}: the sink is {side} Kafka "
                f"by {m.count} record{'s' if m.count != 1 else ''}"))

    # What the sink claims to have consumed: its own stored offset first (written atomically with its
    # rows), else the group's commit, else just past its highest row.
    upto = stored if stored is not None else committed
    if upto is None and p.max_offset is not None:
        upto = p.max_offset + 1
    p.checked_to = upto

    if log is not None and upto is not None:
        from eosctl.reconcile import reconcile_partition

        _, findings = reconcile_partition(_Clipped(log, upto), islands)
        p.missing_offsets = sum(f.count for f in findings if f.kind == "gap")
        for kind, group in itertools.groupby(sorted(findings, key=lambda f: FLAG_KINDS.index(f.kind)),
                                             key=lambda f: f.kind):
            for f in list(group)[:MAX_FLAGS_PER_KIND]:
                flags.append(LedgerFlag(kind, f.first_offset, f.last_offset, f.count, _describe(f)))
    else:
        for i in [i for i in islands if i.multiplicity > 1][:MAX_FLAGS_PER_KIND]:
            extra = i.count * (i.multiplicity - 1)
            flags.append(LedgerFlag("duplicate", i.first, i.last, extra,
                                    f"offsets {_span(i.first, i.last)} stored {i.multiplicity} times "
                                    f"({extra} extra rows)"))
        if p.min_offset is not None:
            span = p.max_offset - p.min_offset + 1 - p.distinct_offsets
            if span:
                flags.append(LedgerFlag(
                    "span_missing", p.min_offset, p.max_offset, span,
                    f"offset span {p.min_offset}..{p.max_offset} has {span} missing offsets (markers and "
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


def _describe(f: Any) -> str:
    what = _WHAT[f.kind].format(s="" if f.count == 1 else "s")
    return f"{f.count} {what} at offsets {_span(f.first_offset, f.last_offset)}"


def _span(first: int | None, last: int | None) -> str:
    return "-" if first is None else str(first) if first == last else f"{first}..{last}"


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
    logs: dict[tuple[str, int], Any] | None = None,
    progress: Progress | None = None,
) -> Ledger:
    """Read the sink (read-only) and Kafka, and build the ledger for `topics` and the sink's own topics.

    `logs` are partition scans the caller already has (the snapshot scans once for everything).
    """
    from eosctl.sinkdb import open_sink
    from eosctl.wire import WireClient

    with open_sink(sink, where, duckdb_path, parquet) as reader:
        summaries = {(s.topic, s.partition): s for s in reader.summaries()}
        stored = {(s.topic, s.partition): s.next_offset for s in reader.stored_offsets() or ()}
        by_partition = itertools.groupby(reader.islands(), key=lambda i: (i.topic, i.partition))
        islands: dict[tuple[str, int], list[Any]] = {tp: list(group) for tp, group in by_partition}
        source = reader.source
    expected_topics = list(dict.fromkeys(topics))
    unexpected = sorted({t for t, _ in summaries} - set(expected_topics))
    with WireClient(cluster) as client:
        known = client.metadata(expected_topics) if expected_topics else {}
        for t in unexpected:
            try:
                known.update(client.metadata([t]))
            except BrokerError:
                pass  # rows naming a topic Kafka lacks: flagged below
        tps = sorted({(t, p) for t, parts in known.items() for p in parts} | set(summaries) | set(stored))
        in_kafka = [tp for tp in tps if tp[0] in known and tp[1] in known[tp[0]]]
        offsets = client.offsets(in_kafka) if in_kafka else {}
        committed = committed_offsets(cluster, group) if group else {}
        logs = dict(logs or {})
        todo = [tp for tp in in_kafka if tp not in logs]
        if scan and todo:
            from eosctl.logscan import scan_partitions

            logs.update(scan_partitions(client, todo, progress=progress))
    rows = []
    for tp in tps:
        row = partition_ledger(tp[0], tp[1], summaries.get(tp), islands.get(tp, []), stored.get(tp),
                               committed.get(tp), offsets.get(tp), logs.get(tp))
        if tp[0] in unexpected:
            row.flags.insert(0, LedgerFlag("unexpected_topic", row.min_offset, row.max_offset, row.rows,
                                           f"topic {tp[0]} is not a source topic of the pipeline"
                                           + ("" if tp in offsets else " and does not exist in Kafka")))
        rows.append(row)
    return Ledger(pipeline, f"{source} ({sink.table})" if sink.duckdb or duckdb_path else source, group,
                  scan, rows)
