"""The log side of the HTML gap map: a partition's aborted, marker, open and compacted stretches, bounded.

A partition of 10M offsets written in transactions of 100 records has 100,000 markers; the report needs a
picture, not a list, so each kind keeps at most ``per_kind`` segments. When there are more, the closest
neighbours of that kind are coalesced (smallest distance first): a coalesced segment spans first..last
and ``count`` says how many offsets of its kind it really holds, so a title never overstates.
Runs inside the audit's per-partition task (pure Python, no I/O).
"""

from __future__ import annotations

from typing import Any

from eosctl.findings import SEGMENT_KINDS, LogSegment

PER_KIND = 100  # at most 4 x 100 segments per partition: ~20 kB of JSON, a few hundred SVG rects


def log_segments(log: Any, per_kind: int = PER_KIND) -> tuple[LogSegment, ...]:
    """``log`` is an eosctl.model.PartitionLog; only offsets between its log start and HW are kept."""
    start, hw = log.log_start_offset, log.high_watermark
    by_kind: dict[str, list[list[int]]] = {k: [] for k in SEGMENT_KINDS}
    for r in sorted(log.ranges, key=lambda r: r.first):
        kind = str(r.kind)
        first, last = max(r.first, start), min(r.last, hw - 1)
        if kind not in by_kind or first > last:
            continue
        runs = by_kind[kind]
        if runs and runs[-1][1] + 1 == first:  # adjacent ranges of one kind (other producers): one run
            runs[-1][1], runs[-1][2] = last, runs[-1][2] + last - first + 1
        else:
            runs.append([first, last, last - first + 1])
    out = [LogSegment(kind, f, la, n)
           for kind, runs in by_kind.items() for f, la, n in _coalesce(runs, per_kind)]
    return tuple(sorted(out, key=lambda s: (s.first, SEGMENT_KINDS.index(s.kind))))


def _coalesce(runs: list[list[int]], cap: int) -> list[list[int]]:
    """Merge the len(runs) - cap smallest distances between neighbours, so exactly ``cap`` runs remain."""
    if len(runs) <= cap:
        return runs
    distance = [runs[i + 1][0] - runs[i][1] for i in range(len(runs) - 1)]
    merge = set(sorted(range(len(distance)), key=lambda i: (distance[i], i))[:len(runs) - max(cap, 1)])
    out = [list(runs[0])]
    for i in range(1, len(runs)):
        if i - 1 in merge:
            out[-1][1], out[-1][2] = runs[i][1], out[-1][2] + runs[i][2]
        else:
            out.append(list(runs[i]))
    return out
