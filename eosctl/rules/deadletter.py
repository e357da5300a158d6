"""A partition reconciled with the sink and its dead-letter queue together (sink.dlq_topic): expected = each
committed source record in the sink or the DLQ, exactly once across both.

The sweep (eosctl.rules.reconcile) judges the sink alone; this pass then takes out of its gaps the records
the DLQ accounts for (dead-lettered: information, never gaps) and judges each dead-lettered offset:
`sink_and_dlq` (held by the sink too), `dlq_duplicate` (dead-lettered more than once: Connect's DLQ producer
is not transactional) and `dlq_aborted` (a record of an aborted or still-open transaction dead-lettered: a
reader that was not read_committed). What is left of a gap is a loss no DLQ record explains."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from eosctl.cluster.model import Kind, PartitionLog
from eosctl.report.findings import Cause, Finding
from eosctl.rules.reconcile import SinkFacts

DLQ_KINDS = ("sink_and_dlq", "dlq_duplicate", "dlq_aborted")


class HeldAt:
    """The sink's islands passed through unchanged, noting how many rows it holds at each offset the DLQ
    names (a bisect per island: the DLQ's offsets are few)."""

    def __init__(self, islands: Iterable[Any], offsets: Sequence[int]):
        self.islands, self.offsets = islands, sorted(offsets)
        self.rows: dict[int, int] = {}

    def __iter__(self) -> Iterator[Any]:
        offsets, rows = self.offsets, self.rows
        for isl in self.islands:
            first, last, mult = isl if isinstance(isl, tuple) else (isl.first, isl.last, isl.multiplicity)
            i = bisect.bisect_left(offsets, first)
            while i < len(offsets) and offsets[i] <= last:
                rows[offsets[i]] = mult
                i += 1
            yield isl


def with_dead_letters(log: PartitionLog, findings: list[Finding], dead: Sequence[tuple[int, int]],
                      held: dict[int, int], lso: int, dlq_topic: str,
                      facts: SinkFacts | None = None) -> tuple[list[Finding], int]:
    """The partition's findings with the DLQ's records accounted for, and how many committed records the
    DLQ alone holds (dead-lettered). ``dead``: (source offset, dead letters of it); ``held``: the sink's
    rows at those offsets; ``lso``: the end of the expected records (the window's or a stage's, if any);
    ``facts``: the sweep's, given each piece of a split gap (the sink's neighbours of the whole gap)."""
    counts = dict(dead)
    accounted = sorted(o for o, _ in dead
                       if held.get(o, 0) == 0 and _kind_at(log, o) is Kind.DATA and o < lso)
    out: list[Finding] = []
    for f in findings:
        if f.kind == "gap" and f.first_offset is not None and f.last_offset is not None:
            inside = accounted[bisect.bisect_left(accounted, f.first_offset):
                               bisect.bisect_right(accounted, f.last_offset)]
            if inside:
                pieces = _rest_of_gap(log, f, inside, dlq_topic)
                if facts is not None and f.first_offset in facts.gaps:
                    for piece in pieces:
                        facts.gaps[piece.first_offset] = facts.gaps[f.first_offset]  # type: ignore[index]
                out += pieces
                continue
            f = replace(f, detail=_no_dlq(dlq_topic))
        out.append(f)
    made: list[tuple[str, int, int]] = []  # (kind, offset, count)
    for offset in sorted(counts):
        n, kind = counts[offset], _kind_at(log, offset)
        if kind is Kind.DATA and offset < lso:
            if held.get(offset, 0):
                made.append(("sink_and_dlq", offset, n))
            if n > 1:
                made.append(("dlq_duplicate", offset, n - 1))
        elif kind in (Kind.ABORTED, Kind.OPEN):
            made.append(("dlq_aborted", offset, n))
    out += _runs(log, made, dlq_topic)
    dead_lettered = sum(1 for o in accounted if o >= log.log_start_offset)
    return out, dead_lettered


def _no_dlq(topic: str) -> str:
    return f"in neither the sink nor the DLQ {topic}"


def _rest_of_gap(log: PartitionLog, f: Finding, inside: list[int], topic: str) -> list[Finding]:
    """The gap without the dead-lettered offsets: each remaining run of missing committed records."""
    out = []
    bounds = [f.first_offset - 1, *inside, f.last_offset + 1]  # type: ignore[operator]
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        span = _data_span(log, lo + 1, hi - 1)
        if span is not None:
            first, last = span
            out.append(replace(f, first_offset=first, last_offset=last,
                               count=log.data_between(first, last + 1), detail=_no_dlq(topic)))
    return out


def _data_span(log: PartitionLog, lo: int, hi: int) -> tuple[int, int] | None:
    """The first and last committed data offsets in lo..hi, or None."""
    if lo > hi:
        return None
    first = last = None
    for r in log.ranges:
        if r.kind is Kind.DATA and r.last >= lo and r.first <= hi:
            a, b = max(r.first, lo), min(r.last, hi)
            first = a if first is None else min(first, a)
            last = b if last is None else max(last, b)
    return None if first is None or last is None else (first, last)


def _kind_at(log: PartitionLog, offset: int) -> Kind | None:
    for r in log.ranges:
        if r.first <= offset <= r.last:
            return r.kind
    return None


_SUMMARIES = {
    "sink_and_dlq": "held by the sink and dead-lettered to {topic} too: the writer failed after writing, or "
                    "a retry wrote what the first try had dead-lettered",
    "dlq_duplicate": "dead-lettered to {topic} more than once (count = extra dead letters): Connect's DLQ "
                     "producer is not transactional, so a task restarted after sending re-sends",
    "dlq_aborted": "records of aborted or still-open transactions dead-lettered to {topic}: the sink read "
                   "its input read_uncommitted",
}


def _runs(log: PartitionLog, made: list[tuple[str, int, int]], topic: str) -> list[Finding]:
    """One finding per run of consecutive offsets of one kind."""
    out: list[Finding] = []
    for kind in DLQ_KINDS:
        run: list[tuple[int, int]] = []
        for k, offset, n in made:
            if k != kind:
                continue
            if run and offset != run[-1][0] + 1:
                out.append(_finding(log, kind, run, topic))
                run = []
            run.append((offset, n))
        if run:
            out.append(_finding(log, kind, run, topic))
    return out


def _finding(log: PartitionLog, kind: str, run: list[tuple[int, int]], topic: str) -> Finding:
    f = Finding(kind, log.topic, log.partition, run[0][0], run[-1][0], sum(n for _, n in run),
                detail=f"dlq_topic {topic}")
    return replace(f, cause=Cause(kind, f"{f.topic}[{f.partition}] {f.first_offset}..{f.last_offset}: "
                                  + _SUMMARIES[kind].format(topic=topic), rule=kind))
