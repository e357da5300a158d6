"""Who is in a group, of every type: each group described by the API its type answers to.

ListGroups v5 names a group's type; DescribeGroups answers only `classic` groups. Kafka 4.x answers a
KIP-848 `consumer` group, a KIP-1071 `streams` group and a KIP-932 `share` group as Dead with no members
there, so each is asked with its own API, sent to the group's coordinator:

- classic: DescribeGroups (v5), the members' assignments decoded as the consumer protocol's;
- consumer: ConsumerGroupDescribe (API 69), each member's assigned topic-partitions;
- streams: StreamsGroupDescribe (API 89), the topology (its epoch and subtopologies' source topics, None
  while the group has none: NOT_READY) and each member's active, standby and warm-up tasks; a task
  (subtopology, partition) reads that partition of each of the subtopology's source topics;
- share: ShareGroupDescribe (API 77, v1: 4.1+), each member's assigned topic-partitions (several members
  share a partition).

What a group's description adds is context (who consumes, the group's own state), never a reason to fail a
command: a group whose coordinator does not answer, whose broker lacks the API (UNSUPPORTED_VERSION, or an
older broker listing no such key) or that vanished meanwhile (GROUP_ID_NOT_FOUND) is left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kafka.protocol.admin.groups import DescribeGroupsRequest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

from eosctl.base.errors import BrokerError
from eosctl.cluster.messages import (
    ConsumerGroupDescribeRequest,
    ShareGroupDescribeRequest,
    StreamsGroupDescribeRequest,
)
from eosctl.cluster.model import TP
from eosctl.cluster.offsets import _find_coordinators, _Round, _state_name
from eosctl.cluster.wire import WireClient

DESCRIBE_GROUPS_VERSION = 5
# API keys of the describe requests kafka-python lacks, and the lowest version eosctl reads of each:
# ShareGroupDescribe v0 (Kafka 4.0's early access) was removed in 4.1, which answers v1 only.
CONSUMER_GROUP_DESCRIBE, STREAMS_GROUP_DESCRIBE, SHARE_GROUP_DESCRIBE = 69, 89, 77
MIN_VERSION = {CONSUMER_GROUP_DESCRIBE: 0, STREAMS_GROUP_DESCRIBE: 0, SHARE_GROUP_DESCRIBE: 1}
KEY_OF_TYPE = {"consumer": CONSUMER_GROUP_DESCRIBE, "streams": STREAMS_GROUP_DESCRIBE,
               "share": SHARE_GROUP_DESCRIBE}


@dataclass(frozen=True, slots=True)
class Task:
    """Tasks of one subtopology: the partitions it processes (a task per partition)."""

    subtopology: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Subtopology:
    subtopology: str
    source_topics: tuple[str, ...]  # its source and repartition source topics


@dataclass(frozen=True, slots=True)
class Member:
    member_id: str
    client_id: str
    host: str
    partitions: tuple[TP, ...] = ()  # assigned now (a streams member: its active tasks' source partitions)
    process_id: str | None = None  # a streams member's Kafka Streams instance
    active_tasks: tuple[Task, ...] | None = None  # streams only, as the next three
    standby_tasks: tuple[Task, ...] | None = None
    warmup_tasks: tuple[Task, ...] | None = None


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group: str
    type: str  # "classic", "consumer", "streams", "share"
    state: str  # as ListGroups names it in eosctl: "STABLE", "NOT_READY", ...
    epoch: int | None
    members: tuple[Member, ...]
    topology_epoch: int | None = None  # streams only: None while it has no topology
    subtopologies: tuple[Subtopology, ...] | None = None

    def partition_members(self) -> dict[TP, list[Member]]:
        """Each assigned partition's members (one, except in a share group)."""
        out: dict[TP, list[Member]] = {}
        for m in self.members:
            for tp in m.partitions:
                out.setdefault(tp, []).append(m)
        return out


def describe_groups(client: WireClient, groups: Sequence[str], types: Mapping[str, str],
                    timeout: float | None = None) -> dict[str, GroupDescription]:
    """Each group's description by its type (``types``: group -> its type from ListGroups; a group of no
    known type is described as classic). The groups that could not be described are left out."""
    if not groups:
        return {}
    wanted = list(dict.fromkeys(groups))
    try:
        coordinators = _find_coordinators(_Round(client, timeout), wanted)
    except BrokerError:
        return {}
    by_node: dict[tuple[int, str], list[str]] = {}
    for g in wanted:
        kind = types.get(g) or "classic"
        key = KEY_OF_TYPE.get(kind)
        if g not in coordinators or (key is not None and (client.max_version(key) or -1) < MIN_VERSION[key]):
            continue  # no coordinator now, or a broker without the API: no description, no failure
        by_node.setdefault((coordinators[g].node, kind if key else "classic"), []).append(g)
    calls = list(by_node.items())
    try:
        answers = client.request_all([(n, _request(kind, gs)) for (n, kind), gs in calls])
    except BrokerError:
        return {}
    out: dict[str, GroupDescription] = {}
    for ((_, kind), _), answer in zip(calls, answers, strict=True):
        for d in answer.groups:
            if d.error_code:
                continue  # GROUP_ID_NOT_FOUND (it vanished, or it is of another type now), refused, ...
            described = _READERS[kind](d)
            if described is not None:
                out[described.group] = described
    return {g: out[g] for g in wanted if g in out}


def _request(kind: str, groups: list[str]):
    if kind == "consumer":
        return ConsumerGroupDescribeRequest(group_ids=groups, include_authorized_operations=False)
    if kind == "streams":
        return StreamsGroupDescribeRequest(group_ids=groups, include_authorized_operations=False,
                                           include_topology_description=False)
    if kind == "share":
        return ShareGroupDescribeRequest(group_ids=groups, include_authorized_operations=False,
                                         min_version=MIN_VERSION[SHARE_GROUP_DESCRIBE])
    return DescribeGroupsRequest(groups=groups, max_version=DESCRIBE_GROUPS_VERSION)


def _classic(d) -> GroupDescription | None:
    if d.protocol_type != "consumer":
        return None  # Connect's workers and others: their assignments are not topic-partitions
    members = []
    for m in d.members:
        try:
            assignment = ConsumerProtocolAssignment.decode(m.member_assignment)
            tps = tuple((tp.topic, tp.partition) for tp in assignment.partitions())
        except Exception:  # an assignment in another format: the member, without its partitions
            tps = ()
        members.append(Member(m.member_id, m.client_id, m.client_host, tps))
    return GroupDescription(d.group_id, "classic", _state_name(d.group_state), None, tuple(members))


def _assigned(assignment) -> tuple[TP, ...]:
    return tuple((t.topic_name, p) for t in assignment.topic_partitions for p in t.partitions)


def _consumer(d) -> GroupDescription:
    members = tuple(Member(m.member_id, m.client_id, m.client_host, _assigned(m.assignment))
                    for m in d.members)
    return GroupDescription(d.group_id, "consumer", _state_name(d.group_state), d.group_epoch, members)


def _share(d) -> GroupDescription:
    members = tuple(Member(m.member_id, m.client_id, m.client_host, _assigned(m.assignment))
                    for m in d.members)
    return GroupDescription(d.group_id, "share", _state_name(d.group_state), d.group_epoch, members)


def _tasks(tasks) -> tuple[Task, ...]:
    return tuple(Task(t.subtopology_id, tuple(t.partitions)) for t in tasks)


def _streams(d) -> GroupDescription:
    topology = d.topology
    subs = None if topology is None or topology.subtopologies is None else tuple(
        Subtopology(s.subtopology_id, tuple(dict.fromkeys(
            [*s.source_topics, *(r.name for r in s.repartition_source_topics)])))
        for s in topology.subtopologies)
    sources = {s.subtopology: s.source_topics for s in subs or ()}
    members = []
    for m in d.members:
        active = _tasks(m.assignment.active_tasks)
        # A task (subtopology, partition) reads that partition of every source topic of its subtopology.
        tps = tuple(dict.fromkeys((topic, p) for t in active for p in t.partitions
                                  for topic in sources.get(t.subtopology, ())))
        members.append(Member(m.member_id, m.client_id, m.client_host, tps, m.process_id, active,
                              _tasks(m.assignment.standby_tasks), _tasks(m.assignment.warmup_tasks)))
    return GroupDescription(d.group_id, "streams", _state_name(d.group_state), d.group_epoch, tuple(members),
                            None if topology is None else topology.epoch, subs)


_READERS = {"classic": _classic, "consumer": _consumer, "streams": _streams, "share": _share}
