"""A sink's dead-letter queue in the audit's plan: the driver reads the DLQ once (eosctl.cluster.deadletter)
and ships each partition's dead letters with its work item; the task's rule reconciles the sink and the DLQ
together (eosctl.rules.deadletter). The report's `dlq` says what the DLQ held."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from eosctl.cluster.deadletter import DeadLetters

if TYPE_CHECKING:
    from auditors.plan import WorkItem


def with_dead_letters(items: list[WorkItem], dead: DeadLetters) -> list[WorkItem]:
    """Each audited partition Kafka has with its (source offset, dead letters), [] where none."""
    return [replace(i, dead_lettered=tuple(sorted(dead.by_partition.get(i.tp, {}).items())))
            if i.in_kafka else i for i in items]


def summary(dead: DeadLetters, items: list[WorkItem], dead_lettered: int) -> dict[str, Any]:
    """The report's `dlq`: the topic, its records, how many the audit counted as accounted for, by exception
    class, and the records it could not place (no source headers, or a partition not audited)."""
    audited = {i.tp for i in items if i.in_kafka}
    elsewhere = sum(sum(c.values()) for tp, c in dead.by_partition.items() if tp not in audited)
    return {"topic": dead.topic, "records": dead.records, "dead_lettered": dead_lettered,
            "by_exception": [{"exception": e, "records": n} for e, n in dead.exceptions.most_common()],
            "conventions": dict(sorted(dead.conventions.items())),
            "unreadable": dead.unreadable, "other_partitions": elsewhere}
