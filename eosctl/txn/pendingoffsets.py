"""Which open transaction holds a group's committed offsets (offsets pending in a transaction).

A transactional stage commits its consumed offsets inside its transaction: AddOffsetsToTxn adds the
group's ``__consumer_offsets`` partition to the transaction, TxnOffsetCommit appends the offsets there as
transactional records, and the commit or abort marker makes them count or drops them. Until then a
read_committed consumer of the group waits on UNSTABLE_OFFSET_COMMIT (eosctl.cluster.offsets).

The group's partition is ``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions`` (Java's
String.hashCode; GroupCoordinatorService.partitionFor, GroupMetadataManager.partitionFor before 4.0), and
the transactions open on it are DescribeProducers' active producers with a current transaction start
offset, named by their coordinator (eosctl.txn.transactions.coordinator_view). Several groups can share a
partition, so every open transaction on it is named; the one the coordinator lists with that partition is
the group's where only one is.

What this finds is context for `lag`, `ledger` and the views: a pending commit is what a running stage
does between its commits, never a verdict by itself.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import kafka.errors as Errors
from kafka.protocol.admin.transactions import DescribeProducersRequest

from eosctl.base.durations import human
from eosctl.base.errors import EosctlError
from eosctl.cluster.model import TP
from eosctl.cluster.offsets import group_positions, group_states
from eosctl.cluster.wire import WireClient
from eosctl.txn.transactions import Hanging, HangingReport, coordinator_view

OFFSETS_TOPIC = "__consumer_offsets"


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: over UTF-16 code units, in 32-bit two's complement."""
    h = 0
    units = s.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def offsets_partition(group: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition that holds the group's offsets. Kafka's Utils.abs is Math.abs
    with Integer.MIN_VALUE taken to 0, not Utils.toPositive's ``& 0x7fffffff`` (they differ for every
    negative hash)."""
    h = java_string_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


@dataclass(frozen=True, slots=True)
class Holder:
    """An open transaction on the group's offsets partition."""

    producer_id: int
    producer_epoch: int
    first_offset: int  # where it starts on __consumer_offsets-N
    transactional_id: str | None = None  # None: its coordinator does not know the producer id
    state: str | None = None  # the coordinator's state (Ongoing, PrepareCommit, ...)
    started_ms: int | None = None  # the coordinator's start time
    listed: bool = False  # its coordinator lists __consumer_offsets-N among its partitions

    def to_dict(self, now_ms: int) -> dict[str, Any]:
        age = None if self.started_ms is None else round(max(0.0, (now_ms - self.started_ms) / 1000), 3)
        return {"transactional_id": self.transactional_id, "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch, "coordinator_state": self.state,
                "first_offset": self.first_offset, "started_ms": self.started_ms, "age_s": age}

    def describe(self, now_ms: int) -> str:
        who = f"{self.transactional_id} (pid {self.producer_id})" if self.transactional_id \
            else f"pid {self.producer_id}"
        if self.started_ms is None:
            return who
        return f"{who}, open {human(max(0.0, (now_ms - self.started_ms) / 1000))}"


@dataclass(frozen=True, slots=True)
class PendingCommit:
    """A group whose next offset commit is pending in an open transaction, on some of its partitions."""

    group: str
    partitions: frozenset[TP]  # the group's partitions answered UNSTABLE_OFFSET_COMMIT
    offsets_partition: int | None  # N of __consumer_offsets-N; None when the topic can't be described
    holders: tuple[Holder, ...] = ()
    problem: str | None = None  # why the holders are not known

    @property
    def likely(self) -> tuple[Holder, ...]:
        """The holders its coordinator lists with the offsets partition, else every one."""
        listed = tuple(h for h in self.holders if h.listed)
        return listed or self.holders

    def to_dict(self, now_ms: int) -> dict[str, Any]:
        return {"offsets_topic": OFFSETS_TOPIC, "offsets_partition": self.offsets_partition,
                "transactions": [h.to_dict(now_ms) for h in self.likely], "problem": self.problem}

    def describe(self, now_ms: int) -> str:
        if not self.likely:
            return "pending in an open transaction" + (f" ({self.problem})" if self.problem else "")
        return "pending in transaction " + " or ".join(h.describe(now_ms) for h in self.likely)


def pending_commits(client: WireClient, pending: Mapping[str, frozenset[TP]]) -> dict[str, PendingCommit]:
    """The open transactions holding each group's pending partitions (groups with none pending left
    out). What can't be read (no Describe on __consumer_offsets, no DescribeProducers) leaves the holders
    empty with the reason, never fails the caller."""
    groups = {g: tps for g, tps in pending.items() if tps}
    if not groups:
        return {}
    try:
        leaders = client.metadata([OFFSETS_TOPIC])[OFFSETS_TOPIC]
    except EosctlError as e:
        return {g: PendingCommit(g, tps, None, problem=f"cannot describe {OFFSETS_TOPIC}: {e}")
                for g, tps in groups.items()}
    count = len(leaders)
    where = {g: offsets_partition(g, count) for g in groups}
    producers, problem = _open_producers(client, sorted(set(where.values())), leaders)
    coordinator = coordinator_view(client, {p[0] for ps in producers.values() for p in ps})
    out: dict[str, PendingCommit] = {}
    for g, tps in groups.items():
        n = where[g]
        holders = []
        for pid, epoch, first in producers.get(n, ()):
            info = coordinator.get(pid)
            holders.append(Holder(pid, epoch, first) if info is None else Holder(
                pid, epoch, first, info.transactional_id, info.state, info.start_time_ms,
                (OFFSETS_TOPIC, n) in info.partitions))
        out[g] = PendingCommit(g, tps, n, tuple(sorted(holders, key=lambda h: h.first_offset)),
                               problem if not holders else None)
    return out


def _open_producers(client: WireClient, partitions: list[int], leaders: Mapping[int, int]
                    ) -> tuple[dict[int, list[tuple[int, int, int]]], str | None]:
    """partition -> (producer id, epoch, current transaction's first offset) of the producers with an open
    transaction there (DescribeProducers to each partition's leader), and what went wrong, if anything."""
    by_leader: dict[int, list[int]] = {}
    for n in partitions:
        by_leader.setdefault(leaders[n], []).append(n)
    topic = DescribeProducersRequest.TopicRequest
    try:
        answers = client.request_all([(node, DescribeProducersRequest(
            topics=[topic(name=OFFSETS_TOPIC, partition_indexes=ns)])) for node, ns in by_leader.items()])
    except (EosctlError, Errors.KafkaError) as e:
        return {}, f"DescribeProducers on {OFFSETS_TOPIC}: {e}"
    out: dict[int, list[tuple[int, int, int]]] = {}
    problem = None
    for answer in answers:
        for t in answer.topics:
            for p in t.partitions:
                if p.error_code:
                    problem = f"DescribeProducers on {OFFSETS_TOPIC}-{p.partition_index}: " \
                              f"{Errors.for_code(p.error_code).__name__}"
                    continue
                out[p.partition_index] = [(s.producer_id, s.producer_epoch, s.current_txn_start_offset)
                                          for s in p.active_producers if s.current_txn_start_offset >= 0]
    return out, problem


def with_groups(client: WireClient, report: HangingReport) -> HangingReport:
    """The report with each transaction on ``__consumer_offsets-N`` naming the groups whose offsets it
    holds: the groups of that partition whose offsets are pending (a group coordinator keeps a transaction's
    offsets pending until its marker, whether or not the transaction coordinator still tracks it), else every
    group of the partition. Left as it is where the groups can't be listed."""
    on = [h for h in [*report.hanging, *report.blocking] if h.topic == OFFSETS_TOPIC]
    if not on:
        return report
    try:
        count = len(client.metadata([OFFSETS_TOPIC])[OFFSETS_TOPIC])
        by_partition: dict[int, list[str]] = defaultdict(list)
        for g in sorted(group_states(client)):
            by_partition[offsets_partition(g, count)].append(g)
        wanted = sorted({g for h in on for g in by_partition.get(h.partition, ())})
        positions = group_positions(client, wanted) if wanted else {}
    except EosctlError:
        return report

    def named(h: Hanging) -> Hanging:
        if h.topic != OFFSETS_TOPIC:
            return h
        mapped = by_partition.get(h.partition, [])
        held = [g for g in mapped if positions[g].pending]
        return replace(h, groups=tuple(held or mapped))

    report.hanging = [named(h) for h in report.hanging]
    report.blocking = [named(h) for h in report.blocking]
    return report
