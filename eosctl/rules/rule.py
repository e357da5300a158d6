"""What the audit decides for one partition, and for one business key: the rule both engines run.

``audit_partition`` takes what a task read (the partition's log, or None when only the sink names it,
and the sink's offset islands) and what the driver knows (the stage's committed offset for a hop, the
sink's stored and the group's committed offsets) and returns the partition's summary and its findings,
each with its cause. ``key_finding`` judges a key found at several committed places.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from eosctl.cluster.model import PartitionLog
from eosctl.report.findings import Finding, PartitionSummary
from eosctl.report.segments import log_segments
from eosctl.report.window import PartitionWindow
from eosctl.rules.causes import Writer, committed_writers, explain_partition, key_cause
from eosctl.rules.deadletter import HeldAt, with_dead_letters
from eosctl.rules.reconcile import (
    Island,
    SinkFacts,
    clipped,
    offset_mismatch,
    reconcile_partition,
    reconcile_unknown,
)

if TYPE_CHECKING:
    from eosctl.sink import OffsetIsland


def audit_partition(topic: str, partition: int, log: PartitionLog | None,
                    islands: Iterable[Island | OffsetIsland], *,
                    expected_upto: int | None = None, check_offsets: bool = False,
                    stored_offset: int | None = None, committed_offset: int | None = None,
                    group: str | None = None, window: PartitionWindow | None = None,
                    dead_lettered: Sequence[tuple[int, int]] | None = None,
                    dlq_topic: str | None = None, routed_out: Sequence[tuple[int, int]] | None = None,
                    ) -> tuple[PartitionSummary, list[Finding]]:
    """One partition's summary and findings.

    ``log`` None: Kafka doesn't have the partition (only the sink names it). ``expected_upto``: on a
    Kafka-to-Kafka hop, the stage's committed offset; input past it is the stage's lag, never a gap.
    ``check_offsets``: compare the sink's stored offset with the group's committed one (offset_mismatch).
    ``window``: judge only the partition's offsets in it (eosctl.report.window); an offset_mismatch
    wholly outside it is not reported either. ``dead_lettered``: with a DLQ (``dlq_topic``), its
    (source offset, dead letters) of this partition: expected = each committed record in the sink or the
    DLQ, once (eosctl.rules.deadletter). ``routed_out``: with a route (sink.route), the ranges of committed
    records it leaves out: filtered, never gaps; held, misrouted.
    """
    facts = SinkFacts()
    if log is None:
        summary, findings = reconcile_unknown(topic, partition, islands)
    else:
        side = log if expected_upto is None else clipped(log, expected_upto)
        held = None
        if dead_lettered is not None:
            dead_lettered = [d for d in dead_lettered if window is None or window.holds(d[0], d[0])]
            islands = held = HeldAt(islands, [o for o, _ in dead_lettered])
        summary, findings = reconcile_partition(side, islands, facts, window=window, routed_out=routed_out)
        summary = replace(summary, log_segments=log_segments(log))  # for the HTML gap map
    if check_offsets:
        mismatch = offset_mismatch(topic, partition, stored_offset, committed_offset, log, group)
        if mismatch is not None and (window is None or window.holds(mismatch.first_offset,
                                                                     mismatch.last_offset)):
            findings = [*findings, mismatch]
    told: list[Finding] = []
    if log is not None and held is not None and dead_lettered is not None:
        # Before the causes: a gap the DLQ splits is explained as the pieces it leaves (the sink's
        # neighbours of each piece are the whole gap's: it held nothing inside it).
        end = side.last_stable_offset if window is None or window.end is None else \
            min(side.last_stable_offset, window.end)
        findings, n = with_dead_letters(log, findings, dead_lettered, held.rows, end, dlq_topic or "", facts)
        told = [f for f in findings if f.cause is not None]
        findings = [f for f in findings if f.cause is None]
        summary = replace(summary, dead_lettered=n)
    return summary, [*explain_partition(log, findings, facts, stored_offset, committed_offset, group), *told]


def committed_ranges(log: PartitionLog) -> list[tuple[int, int, int | None, int | None, int | None]]:
    """The committed offsets [log start, LSO) by writer (first, last, producer id, epoch, marker offset):
    what the key rule needs to name who wrote each place of a key."""
    return list(committed_writers(log))


def key_finding(key: str, at: Sequence[Any]) -> Finding:
    """A key at more than one committed place (``at``: dicts or Rows with topic, partition, offset,
    producer_id, producer_epoch, marker_offset): one finding at its first place's partition, first/last
    = min/max offset, count = distinct committed source records carrying the key; its cause from the
    places' writers."""
    dicts = [x if isinstance(x, dict) else x.asDict() for x in at]
    writers = sorted((Writer(a["topic"], a["partition"], a["offset"], a["producer_id"], a["producer_epoch"],
                             a["marker_offset"]) for a in dicts),
                     key=lambda w: (w.topic, w.partition, w.offset))
    offsets = tuple(w.offset for w in writers)
    topic, partition = writers[0].topic, writers[0].partition
    detail = None
    if len({(w.topic, w.partition) for w in writers}) > 1:
        detail = "in " + ", ".join(f"{w.topic}[{w.partition}]@{w.offset}" for w in writers)
    f = Finding("key_duplicate", topic, partition, min(offsets), max(offsets), len(writers), key=key,
                offsets=offsets, detail=detail)
    return replace(f, cause=key_cause(f, writers))
