"""Where a consumer group stands: its committed offsets and its state, as Kafka's coordinators say.

The one place that asks; `eosctl lag`, `eosctl ledger`, the snapshot, the live model and the audit all
read committed offsets through here, as raw requests on the wire client (eosctl.cluster.wire): FindCoordinator
for each group, then OffsetFetch to its coordinator; ListGroups to every broker for the groups' states.
All of a round's requests are in flight together.

Why not confluent-kafka's AdminClient (what this module used until issue 35): librdkafka 2.16.1 dies with
SIGSEGV when an OffsetFetch answer of ListConsumerGroupOffsets carries NOT_COORDINATOR or
COORDINATOR_NOT_AVAILABLE, which Apache Kafka answers for seconds after a restart, while its group
coordinator has not taken the __consumer_offsets partitions back. rd_kafka_handle_OffsetFetch
(src/rdkafka_request.c) maps both to RD_KAFKA_ERR_ACTION_REFRESH and then calls
``rd_kafka_cgrp_op(rk->rk_cgrp, ..., RD_KAFKA_OP_COORD_QUERY)``; an admin client has no consumer group
handle (rk_cgrp is NULL), so rd_kafka_cgrp_op reads rkcg->rkcg_ops at address 0x58 (core dump of
`eosctl lag` on Apache Kafka 4.4.0, gdb: rd_kafka_cgrp_op <- rd_kafka_handle_OffsetFetch <-
rd_kafka_ListConsumerGroupOffsetsResponse_parse, si_addr 0x58; the same stack with err=NOT_COORDINATOR is
confluentinc/librdkafka#5040, open). No release fixes it: confluent-kafka 2.16.1 is the newest on PyPI,
and librdkafka's master (July 2026) still makes that call unguarded. Nothing a caller does can avoid it,
so no librdkafka handle reads group offsets here; the coordinator's errors are retried below instead.

Each call has one deadline (the wire client's timeout unless given): NOT_COORDINATOR and
COORDINATOR_NOT_AVAILABLE look the coordinator up again, COORDINATOR_LOAD_IN_PROGRESS asks the same one
again, a connection dropped mid-answer reconnects; past the deadline, one BrokerError names the
coordinator and what it is doing ("the group coordinator at HOST:PORT is loading; try again").

Offsets pending in a transaction: a consume-transform-produce stage commits its offsets inside its
transaction (TxnOffsetCommit), and until that transaction ends a consumer that fetches with RequireStable
(every read_committed KafkaConsumer) gets UNSTABLE_OFFSET_COMMIT for those partitions and waits. So
OffsetFetch asks with RequireStable (v7+, KIP-447) and keeps each such partition as pending; the broker
then answers offset -1 for it (OffsetMetadataManager.fetchAllOffsets / GroupMetadataManager.getOffsets),
so a second OffsetFetch without it, only for the groups with a pending partition, reads the offset
committed before the transaction. A partition whose only offset is pending (the group's first commit) is
not listed by an all-topics fetch at all, as Kafka lists committed offsets only.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import kafka.errors as Errors
from kafka.protocol.admin.groups import ListGroupsRequest
from kafka.protocol.consumer.group import OffsetFetchRequest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

from eosctl.base.errors import BrokerError
from eosctl.cluster import deadline, sharedwire
from eosctl.cluster.clientcauses import denied
from eosctl.cluster.model import TP
from eosctl.cluster.wire import WireClient
from eosctl.config.model import Cluster

NOT_COORDINATOR = Errors.NotCoordinatorError.errno  # 16
COORDINATOR_NOT_AVAILABLE = Errors.CoordinatorNotAvailableError.errno  # 15
COORDINATOR_LOAD_IN_PROGRESS = Errors.CoordinatorLoadInProgressError.errno  # 14
UNSTABLE_OFFSET_COMMIT = Errors.UnstableOffsetCommitError.errno  # 88
# What each retriable answer means for the user, in the one line a command ends with.
DOING = {
    COORDINATOR_LOAD_IN_PROGRESS: "is loading (COORDINATOR_LOAD_IN_PROGRESS)",
    NOT_COORDINATOR: "is not the group's coordinator yet (NOT_COORDINATOR)",
    COORDINATOR_NOT_AVAILABLE: "is not available yet (COORDINATOR_NOT_AVAILABLE)",
}
# Pauses between rounds (the last one repeats): a restarted broker loads its coordinators in seconds.
BACKOFF_S = (0.05, 0.1, 0.2, 0.4, 0.8)
# FindCoordinator v3 is the last version with one key per request (v4 batches them); ListGroups v4 is the
# first that names each group's state. Both are answered by Kafka 2.x-4.x.
FIND_COORDINATOR_VERSION = 3
# OffsetFetch: v8 (one group per request here, though it can batch) where the broker lists it (Kafka 3.0+,
# KIP-709), else v7. Tansu 0.6.0 answers v1-v7 with topics=null (all topics) in bytes no client can decode
# (measured: kafka-python "Unable to decode response" on v1-v5, no answer on v6-v7) but v8/v9 rightly.
OFFSET_FETCH_VERSION = 7
OFFSET_FETCH_GROUPS_VERSION = 8
OFFSET_FETCH_KEY = 9
LIST_GROUPS_VERSION = 4
LIST_GROUPS_TYPES_VERSION = 5  # names each group's type (KIP-848); the broker's newest up to it is sent
# ListGroups v4 state names (GroupState / ClassicGroupState) -> the names eosctl shows (confluent-kafka's
# ConsumerGroupState, what `lag --format json` has always shown).
STATE_NAMES = {"PreparingRebalance": "PREPARING_REBALANCING", "CompletingRebalance": "COMPLETING_REBALANCING",
               "": "UNKNOWN"}


@dataclass(frozen=True, slots=True)
class GroupOffsets:
    """One group's committed offsets ((topic, partition) -> next offset to read), and the partitions whose
    next commit is pending in an open transaction (their offset here is the one committed before it, or
    absent when there is none)."""

    committed: dict[TP, int]
    pending: frozenset[TP] = frozenset()


@dataclass(frozen=True, slots=True)
class _Coordinator:
    node: int
    address: str  # HOST:PORT, as FindCoordinator names it


def _ends(client: WireClient, timeout: float | None) -> float:
    """When a call's rounds end (time.monotonic()): its own timeout, but never past the command's
    deadline. Each round's requests stop at the deadline, but a round that only failed (a FindCoordinator
    that timed out) would start the next after it: an audit's driver phase ran 7.6 s past --timeout 30s."""
    own = client.timeout_ms / 1000 if timeout is None else timeout
    return time.monotonic() + min(own, max(0.0, deadline.current().remaining_s()))


class _Round:
    """The deadline of one call, and what stands in the way of the groups still pending."""

    def __init__(self, client: WireClient, timeout: float | None) -> None:
        self.client = client
        self.deadline = _ends(client, timeout)
        self.attempt = 0
        self.problem: str | None = None

    def again(self) -> bool:
        """Sleep before the next round; False when the deadline leaves no time for one."""
        pause = BACKOFF_S[min(self.attempt, len(BACKOFF_S) - 1)]
        self.attempt += 1
        if time.monotonic() + pause >= self.deadline:
            return False
        time.sleep(pause)
        return True

    def fail(self, what: str) -> BrokerError:
        return BrokerError(f"{what}: {self.problem or 'no answer in time'}; try again in a few seconds")

    def send(self, calls: list) -> list | None:
        """The answers, or None after a connection dropped (noted as the problem; the next round
        reconnects): a broker restarting closes connections in the middle of answers."""
        try:
            return self.client.request_all(calls)
        except BrokerError as e:
            self.problem = f"{e}".removesuffix(".")
            return None


def group_offsets(client: WireClient, groups: Sequence[str],
                  timeout: float | None = None) -> dict[str, dict[TP, int]]:
    """Committed offsets of each group ((topic, partition) -> next offset to read; {} for a group with
    none), from its coordinator's OffsetFetch. Raises BrokerError when a group's coordinator has not
    answered by the deadline, naming it and what it is doing."""
    return {g: o.committed for g, o in group_positions(client, groups, timeout).items()}


def group_positions(client: WireClient, groups: Sequence[str],
                    timeout: float | None = None) -> dict[str, GroupOffsets]:
    """Each group's committed offsets and the partitions pending in an open transaction (RequireStable
    where the broker answers OffsetFetch v7+: UNSTABLE_OFFSET_COMMIT). Raises BrokerError as
    group_offsets does."""
    stable = (client.max_version(OFFSET_FETCH_KEY) or 0) >= OFFSET_FETCH_VERSION
    until = _ends(client, timeout)
    found = _fetch(client, groups, timeout, require_stable=stable)
    unstable = [g for g, (_, held) in found.items() if held]
    before = _fetch(client, unstable, max(0.5, until - time.monotonic()), require_stable=False) \
        if unstable else {}
    out: dict[str, GroupOffsets] = {}
    for g, (offs, held) in found.items():
        if held:  # the broker answered -1 for these: the offset committed before the transaction
            offs = {**offs, **{tp: c for tp, c in before[g][0].items() if tp in held}}
        out[g] = GroupOffsets(offs, frozenset(held))
    return out


def _fetch(client: WireClient, groups: Sequence[str], timeout: float | None,
           require_stable: bool) -> dict[str, tuple[dict[TP, int], set[TP]]]:
    """(committed offsets, partitions answered UNSTABLE_OFFSET_COMMIT) of each group."""
    pending = list(dict.fromkeys(groups))
    out: dict[str, tuple[dict[TP, int], set[TP]]] = {}
    coordinators: dict[str, _Coordinator] = {}
    step = _Round(client, timeout)
    groups_version = (client.max_version(OFFSET_FETCH_KEY) or 0) >= OFFSET_FETCH_GROUPS_VERSION
    while pending:
        missing = [g for g in pending if g not in coordinators]
        if missing:
            coordinators.update(_find_coordinators(step, missing))
        ask = [g for g in pending if g in coordinators]
        answers = step.send([(coordinators[g].node, _offset_fetch(g, groups_version, require_stable))
                             for g in ask]) if ask else []
        if answers is None:
            coordinators.clear()
        for g, answer in zip(ask, answers or (), strict=False):
            if groups_version:
                answer = answer.groups[0]
            error = answer.error_code
            if error in (0, UNSTABLE_OFFSET_COMMIT):  # the group-level one too: the partitions say which
                out[g] = ({(t.name, p.partition_index): p.committed_offset
                           for t in answer.topics for p in t.partitions
                           if p.committed_offset >= 0 and not p.error_code},
                          {(t.name, p.partition_index) for t in answer.topics for p in t.partitions
                           if p.error_code == UNSTABLE_OFFSET_COMMIT})
                pending.remove(g)
            elif error in DOING:
                step.problem = f"the group coordinator at {coordinators[g].address} {DOING[error]}"
                if error != COORDINATOR_LOAD_IN_PROGRESS:
                    del coordinators[g]  # it moved, or the broker gave it up: look it up again
            else:
                raise BrokerError(f"cannot read committed offsets of group {g!r} from the group coordinator "
                                  f"at {coordinators[g].address}: {_named(error, 'OffsetFetch', g)}")
        if pending and not step.again():
            raise step.fail(f"cannot read committed offsets of group {pending[0]!r} from Kafka at "
                            f"{client.bootstrap}")
    return {g: out[g] for g in dict.fromkeys(groups)}


def _offset_fetch(group: str, groups_version: bool, require_stable: bool = False) -> OffsetFetchRequest:
    """All committed offsets of one group (topics null), in the request shape the broker answers."""
    if groups_version:
        one = OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=None)
        return OffsetFetchRequest(groups=[one], require_stable=require_stable,
                                  min_version=OFFSET_FETCH_GROUPS_VERSION,
                                  max_version=OFFSET_FETCH_GROUPS_VERSION)
    if require_stable:
        return OffsetFetchRequest(group_id=group, topics=None, require_stable=True,
                                  min_version=OFFSET_FETCH_VERSION, max_version=OFFSET_FETCH_VERSION)
    return OffsetFetchRequest(group_id=group, topics=None, max_version=OFFSET_FETCH_VERSION)


def _find_coordinators(step: _Round, groups: list[str]) -> dict[str, _Coordinator]:
    """Each group's coordinator, for the groups whose FindCoordinator answered (the problem noted for the
    others). One request per group (v3), all in flight, to any broker."""
    client, version = step.client, FIND_COORDINATOR_VERSION
    try:
        known = set(client.brokers())
        node = client.any_node()
    except BrokerError as e:
        step.problem = str(e)
        return {}
    answers = step.send([(node, FindCoordinatorRequest(key=g, key_type=0, max_version=version))
                         for g in groups])
    found: dict[str, _Coordinator] = {}
    for g, answer in zip(groups, answers or (), strict=False):
        if answer.error_code in DOING:
            step.problem = (f"Kafka at {client.bootstrap} has no group coordinator for {g!r} yet "
                            f"({Errors.for_code(answer.error_code).__name__})")
        elif answer.error_code:
            raise BrokerError(f"cannot find the group coordinator of {g!r} on {client.bootstrap}: "
                              f"{_named(answer.error_code, 'FindCoordinator', g)}")
        else:
            found[g] = _Coordinator(answer.node_id, f"{answer.host}:{answer.port}")
    if any(c.node not in known for c in found.values()):
        client.forget_brokers()  # a broker the last metadata did not name: ask for the brokers again
    return found


def group_states(client: WireClient, timeout: float | None = None) -> dict[str, str]:
    """Every group's state ("STABLE", "EMPTY", ...) from ListGroups to every broker (each lists the
    groups it coordinates). Raises BrokerError when a broker's coordinator has not answered by the
    deadline, naming it and what it is doing."""
    return {g: state for g, (state, _) in group_listing(client, timeout).items()}


def group_listing(client: WireClient, timeout: float | None = None) -> dict[str, tuple[str, str | None]]:
    """Every group's (state, type): the type ("classic", "consumer" for KIP-848's protocol, "streams",
    "share") from ListGroups v5 (Kafka 3.8+), None from a broker that does not say. Raises as
    group_states."""
    step = _Round(client, timeout)
    states: dict[str, tuple[str, str | None]] = {}
    try:
        pending = client.brokers()
    except BrokerError as e:
        raise BrokerError(f"cannot list consumer groups: {e}") from None
    while pending:
        answers = step.send([(n, ListGroupsRequest(states_filter=[], types_filter=[],
                                                   max_version=LIST_GROUPS_TYPES_VERSION)) for n in pending])
        for n, answer in zip(list(pending), answers or (), strict=False):
            if answer.error_code == 0:
                states.update({g.group_id: (_state_name(getattr(g, "group_state", "") or ""),
                                            (getattr(g, "group_type", "") or "").lower() or None)
                               for g in answer.groups})
                pending.remove(n)
            elif answer.error_code in DOING:
                step.problem = f"the group coordinator at {client.address(n)} {DOING[answer.error_code]}"
            else:
                raise BrokerError(f"cannot list consumer groups on {client.address(n)}: "
                                  f"{Errors.for_code(answer.error_code).__name__}")
        if pending and not step.again():
            raise step.fail("cannot list consumer groups")
    return states


def _state_name(name: str) -> str:
    if name in STATE_NAMES:
        return STATE_NAMES[name]
    # CamelCase -> UPPER_SNAKE: Stable -> STABLE, Assigning -> ASSIGNING (KIP-848's consumer groups).
    return "".join(f"_{c}" if c.isupper() and i else c for i, c in enumerate(name)).upper()


def committed_offsets(cluster: Cluster, group: str, timeout: float = 10.0) -> dict[TP, int]:
    """One group's committed offsets ((topic, partition) -> next offset to read); {} if it has none."""
    return committed_positions(cluster, group, timeout).committed


def committed_positions(cluster: Cluster, group: str, timeout: float = 10.0) -> GroupOffsets:
    """One group's committed offsets and its partitions pending in an open transaction."""
    # An audit's driver asks on the client its other phases use (eosctl.cluster.sharedwire).
    with sharedwire.client(cluster, timeout_ms=int(timeout * 1000)) as client:
        return group_positions(client, [group], timeout)[group]


def _named(code: int, request: str, group: str) -> str:
    """A group request's error: the grant it needs when refused, else Kafka's error name."""
    return denied(code, request, group) or Errors.for_code(code).__name__
