"""The log side of the gap map: a partition's aborted, marker, open and compacted stretches, bounded.

A partition of 10M offsets written in transactions of 100 records has 100,000 markers; the report needs a
picture, not a list, so each kind keeps at most ``per_kind`` segments. When there are more, neighbours of
that kind are coalesced (only the largest distances stay boundaries): a coalesced segment spans
first..last and ``count`` says how many offsets of its kind it really holds, so a title never overstates.
Runs inside the audit's per-partition task (pure Python, no I/O).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

from eosctl.cluster.model import PartitionLog

# Log segments a read_committed consumer never delivers, drawn under the findings on the gap map.
SEGMENT_KINDS = ("ABORTED", "MARKER", "OPEN", "HOLE")


@dataclass(frozen=True)
class LogSegment:
    kind: str  # one of SEGMENT_KINDS (eosctl.cluster.model.Kind values)
    first: int
    last: int  # inclusive
    # Offsets of this kind inside first..last: less than last - first + 1 once neighbours were coalesced
    # to keep the list bounded (see log_segments).
    count: int

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "first": self.first, "last": self.last, "count": self.count}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LogSegment:
        return cls(d["kind"], int(d["first"]), int(d["last"]), int(d["count"]))


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
