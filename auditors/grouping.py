"""Work units sized by work: which partitions each task of an audit takes.

A task costs a fixed price (a Kafka connection, a sink read, a Python worker's turn) plus its records, so a
task per partition makes a 10,000-partition audit of a few records cost what 10,000 connections cost.
Instead the partitions are grouped: per leader (a task's fetches go to one broker), into as many tasks as
the engine has slots, balanced by records; a partition bigger than a task's share stays a task of its own.
Both engines run the groups this module makes.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from auditors.plan import WorkItem

# What one partition costs in a task beyond its records (a scan round's share, a reconcile, its rows out),
# in records: measured on the local engine, a partition of a few records costs about what 500 records do.
PARTITION_COST = 500
NO_LEADER = -1  # partitions only the sink names: no broker to ask


def work(item: WorkItem) -> int:
    """The cost of one partition, in records: what Kafka holds of it or what the sink holds, whichever is
    more, plus the fixed cost of a partition."""
    records = item.sink_rows
    if item.placement is not None:
        records = max(records, item.placement.high_watermark - item.placement.log_start)
    return records + PARTITION_COST


def tasks(items: Sequence[WorkItem], slots: int) -> list[tuple[WorkItem, ...]]:
    """The items in groups, each group one task: grouped by leader, each leader's share of ``slots`` (at
    least one task each) filled largest partition first into the least loaded task (LPT), so the tasks'
    records are even and a partition larger than a task's share is a task alone. Items keep their order
    inside a task; empty tasks are dropped."""
    if not items:
        return []
    by_leader: dict[int, list[WorkItem]] = defaultdict(list)
    for item in items:
        by_leader[item.placement.leader if item.placement is not None else NO_LEADER].append(item)
    total = sum(work(i) for i in items)
    out: list[tuple[WorkItem, ...]] = []
    for leader in sorted(by_leader):
        group = by_leader[leader]
        share = sum(work(i) for i in group)
        n = max(1, min(len(group), round(max(1, slots) * share / total)))
        bins: list[list[WorkItem]] = [[] for _ in range(n)]
        heap = [(0, b) for b in range(n)]
        for item in sorted(group, key=work, reverse=True):
            load, b = heapq.heappop(heap)
            bins[b].append(item)
            heapq.heappush(heap, (load + work(item), b))
        order = {id(i): k for k, i in enumerate(group)}
        out.extend(tuple(sorted(b, key=lambda i: order[id(i)])) for b in bins if b)
    return out
