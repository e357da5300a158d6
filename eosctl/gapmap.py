"""The log side of the HTML gap map: a partition's aborted, marker, open and compacted stretches, bounded.

A partition of 10M offsets written in transactions of 100 records has 100,000 markers; the report needs a
picture, not a list, so each kind keeps at most ``per_kind`` segments. When there are more, neighbours of
that kind are coalesced (only the largest distances stay boundaries): a coalesced segment spans
first..last and ``count`` says how many offsets of its kind it really holds, so a title never overstates.
Runs inside the audit's per-partition task (pure Python, no I/O).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass

from eosctl.findings import SEGMENT_KINDS, Finding, LogSegment
from eosctl.model import PartitionLog

PER_KIND = 100  # at most 4 x 100 segments per partition: ~20 kB of JSON, a few hundred SVG rects


def log_segments(log: PartitionLog, per_kind: int = PER_KIND) -> tuple[LogSegment, ...]:
    """Only offsets between the log's start and HW are kept.

    One pass over the ranges and, per kind with too many runs, a selection
    of the largest distances: cheap next to the reconciliation itself even for 10M offsets.
    """
    start, hw = log.log_start_offset, log.high_watermark
    runs: dict[str, list[list[int]]] = {k: [] for k in SEGMENT_KINDS}
    # PartitionLog.ranges are sorted and disjoint (range_at bisects them).
    for r in log.ranges:
        mine = runs.get(r.kind)  # Kind is a StrEnum: DATA (most ranges) finds no list
        if mine is None:
            continue
        first = r.first if r.first > start else start
        last = r.last if r.last < hw else hw - 1
        if first > last:
            continue
        if mine and mine[-1][1] + 1 == first:  # adjacent ranges of one kind (other producers): one run
            mine[-1][1], mine[-1][2] = last, mine[-1][2] + last - first + 1
        else:
            mine.append([first, last, last - first + 1])
    out = [LogSegment(kind, f, la, n)
           for kind, mine in runs.items() for f, la, n in _coalesce(mine, per_kind)]
    return tuple(sorted(out, key=lambda s: (s.first, SEGMENT_KINDS.index(s.kind))))


def _coalesce(runs: list[list[int]], cap: int) -> list[list[int]]:
    """Keep the cap - 1 largest distances between neighbours as boundaries and merge across the rest, so
    at most ``cap`` runs remain, each the nearest neighbours."""
    if len(runs) <= cap:
        return runs
    distance = [runs[i + 1][0] - runs[i][1] for i in range(len(runs) - 1)]
    keep = sorted(heapq.nlargest(max(cap, 1) - 1, range(len(distance)), key=distance.__getitem__))
    out, begin = [], 0
    for end in [*keep, len(runs) - 1]:
        out.append([runs[begin][0], runs[end][1], sum(r[2] for r in runs[begin:end + 1])])
        begin = end + 1
    return out


@dataclass(frozen=True)
class DensityRun:
    """Consecutive pixel columns of one partition's bar holding findings of one kind."""

    kind: str
    x1: float
    x2: float
    first: int  # first offset of the stretch the columns cover
    last: int
    findings: int  # findings that touch it
    offsets: int  # offsets those findings hold inside it


def density_runs(findings: Iterable[Finding], lo: int, span: int, width: float) -> list[DensityRun]:
    """A partition's findings as runs of pixel columns per kind, at most ``width`` per kind whatever the
    number of findings: what the gap map draws when one mark per finding would overlap into a smear.

    A finding adds its offsets to each column it covers (in proportion), so a stretch where every other
    offset is missing holds half its offsets, and reads as half-dense, not as solid or blank."""
    columns = max(int(width), 1)
    per_col = span / columns  # offsets per column
    counts: dict[str, dict[int, list[float]]] = {}
    for f in findings:
        first, last = f.first_offset, f.last_offset
        if first is None or last is None:
            continue
        c1 = min(max(int((first - lo) / per_col), 0), columns - 1)
        c2 = min(max(int((last - lo) / per_col), 0), columns - 1)
        cols = counts.setdefault(f.kind, {})
        share = (last - first + 1) / (c2 - c1 + 1)
        for c in range(c1, c2 + 1):
            cell = cols.setdefault(c, [0, 0.0])
            cell[0] += c == c1  # counted once, in the run holding its first offset
            cell[1] += share
    runs = []
    for kind, cols in counts.items():
        start = prev = None
        n, offsets = 0, 0.0
        for c in sorted(cols) + [None]:
            if c is not None and prev is not None and c == prev + 1:
                prev, n, offsets = c, n + cols[c][0], offsets + cols[c][1]
                continue
            if start is not None and prev is not None:
                runs.append(DensityRun(kind, start * width / columns, (prev + 1) * width / columns,
                                       lo + int(start * per_col), lo + max(int((prev + 1) * per_col) - 1, 0),
                                       n, round(offsets)))
            if c is not None:
                start, prev, n, offsets = c, c, cols[c][0], cols[c][1]
    return runs
