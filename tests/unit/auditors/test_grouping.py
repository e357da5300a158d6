"""Issue 21: how an audit's partitions are grouped into tasks (auditors.grouping)."""

from __future__ import annotations

from auditors.grouping import PARTITION_COST, tasks
from auditors.plan import WorkItem
from auditors.sources import Placement


def item(partition: int, records: int, leader: int = 0, topic: str = "t") -> WorkItem:
    return WorkItem(topic, partition, True, placement=Placement(leader, 0, records, records))


def layout(groups: list[tuple[WorkItem, ...]]) -> list[list[int]]:
    return sorted(sorted(i.partition for i in g) for g in groups)


def test_ten_thousand_small_partitions_are_as_many_tasks_as_slots() -> None:
    groups = tasks([item(p, 2) for p in range(10_000)], slots=4)
    assert [len(g) for g in groups] == [2500] * 4
    assert sorted(i.partition for g in groups for i in g) == list(range(10_000))  # each exactly once


def test_a_huge_partition_is_a_task_of_its_own_and_the_rest_share_the_others() -> None:
    items = [item(0, 1_000_000), *(item(p, 1000) for p in range(1, 101))]
    groups = tasks(items, slots=3)
    assert layout(groups)[0] == [0]
    loads = sorted(sum(i.placement.high_watermark + PARTITION_COST for i in g) for g in groups[1:]
                   if all(i.partition for i in g))
    assert len(loads) == 2 and loads[1] - loads[0] <= 1000 + PARTITION_COST  # balanced to one partition


def test_tasks_never_mix_leaders_and_every_leader_gets_one() -> None:
    items = [item(p, 100, leader=p % 3) for p in range(30)]
    groups = tasks(items, slots=2)
    assert all(len({i.placement.leader for i in g}) == 1 for g in groups)
    assert sorted({g[0].placement.leader for g in groups}) == [0, 1, 2]


def test_partitions_only_the_sink_names_are_sized_by_their_rows() -> None:
    phantom = WorkItem("gone", 0, False, sink_rows=5_000_000)
    groups = tasks([phantom, *(item(p, 10) for p in range(50))], slots=2)
    assert (phantom,) in groups


def test_items_keep_their_order_inside_a_task() -> None:
    items = [item(p, 10 * (p % 7)) for p in range(40)]
    for g in tasks(items, slots=3):
        assert [i.partition for i in g] == sorted(i.partition for i in g)


def test_no_items_no_tasks() -> None:
    assert tasks([], slots=8) == []
