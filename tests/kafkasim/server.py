"""A scripted Kafka-protocol broker for tests: real wire protocol, scripted answers.

Requests are decoded and responses encoded with kafka-python's own protocol classes (the same
JSON-schema generated messages Apache Kafka's clients use), so every byte on the socket is the real
format. One listener per simulated broker node lets leaders move between nodes.

Each scripted behaviour names the Apache Kafka code it imitates (paths under apache/kafka trunk).
"""

from __future__ import annotations

import socket
import socketserver
import struct
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafka.protocol.admin import DescribeLogDirsRequest, DescribeLogDirsResponse
from kafka.protocol.admin.groups import (
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.admin.transactions import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.consumer.group import OffsetFetchRequest, OffsetFetchResponse
from kafka.protocol.consumer.offsets import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer.transaction import WriteTxnMarkersRequest, WriteTxnMarkersResponse

from eosctl.cluster.messages import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    StreamsGroupDescribeRequest,
    StreamsGroupDescribeResponse,
)
from tests.kafkasim.log import SimPartition

# Error codes (org.apache.kafka.common.protocol.Errors)
NONE = 0
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
TOPIC_AUTHORIZATION_FAILED = 29
UNSUPPORTED_VERSION = 35
KAFKA_STORAGE_ERROR = 56
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
TRANSACTIONAL_ID_NOT_FOUND = 105
ZERO_ID = uuid.UUID(int=0)  # Uuid.ZERO_UUID: what Kafka names an unknown topic's id
# UnifiedLog.UnknownOffset / FetchResponse.INVALID_* : what an answer built from an error carries.
UNKNOWN_OFFSET = -1

EARLIEST, LATEST = -2, -1  # ListOffsetsRequest.EARLIEST_TIMESTAMP / LATEST_TIMESTAMP

# (request class, response class, lowest, highest version we answer). Kept low where a higher version
# changes the shape (Metadata to v10, which names topic ids; Fetch topic ids from v13, OffsetFetch's
# batched groups from v8, FindCoordinator's batched keys from v4); flexible versions (compact
# encodings, tagged fields, request header v2) are included where the clients want them: librdkafka
# sends ApiVersions v3+.
APIS: dict[int, tuple[Any, Any, int, int]] = {
    18: (ApiVersionsRequest, ApiVersionsResponse, 0, 3),
    3: (MetadataRequest, MetadataResponse, 0, 10),
    1: (FetchRequest, FetchResponse, 4, 12),
    2: (ListOffsetsRequest, ListOffsetsResponse, 1, 7),
    9: (OffsetFetchRequest, OffsetFetchResponse, 1, 7),
    10: (FindCoordinatorRequest, FindCoordinatorResponse, 0, 3),
    16: (ListGroupsRequest, ListGroupsResponse, 0, 4),
    15: (DescribeGroupsRequest, DescribeGroupsResponse, 0, 5),
    61: (DescribeProducersRequest, DescribeProducersResponse, 0, 0),
    65: (DescribeTransactionsRequest, DescribeTransactionsResponse, 0, 0),
    66: (ListTransactionsRequest, ListTransactionsResponse, 0, 1),
    27: (WriteTxnMarkersRequest, WriteTxnMarkersResponse, 1, 1),
    35: (DescribeLogDirsRequest, DescribeLogDirsResponse, 1, 2),
}
# The describe APIs of KIP-1071's streams and KIP-932's share groups, answered only where a test lists them
# (``extra_api_keys``, with ListGroups v5 for the groups' types): by default the broker is one without them.
GROUP_TYPE_APIS: dict[int, tuple[Any, Any]] = {
    89: (StreamsGroupDescribeRequest, StreamsGroupDescribeResponse),
    77: (ShareGroupDescribeRequest, ShareGroupDescribeResponse),
    90: (DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse),
}
GROUP_ID_NOT_FOUND = 69


@dataclass
class Fault:
    """A scripted deviation for the next matching request(s) of one API and partition.

    ``before`` runs on the broker's state just before the answer is built (retention moving the log
    start, a leader moving): the answer then reflects the new state, as it would on a real broker.
    """

    api: str
    topic: str | None = None
    partition: int | None = None
    error: int = NONE
    # An answer with no records and no error below the HW: ReplicaManager.handleOffsetOutOfRangeError,
    # tiered storage (KIP-405) with remote fetches throttled, answers MemoryRecords.EMPTY with the real HW,
    # log start and LSO and no exception.
    no_records: bool = False
    drop: bool = False  # leave the partition out of the answer
    throttle_ms: int = 0  # KIP-219: an empty answer carrying throttle_time_ms
    before: Callable[[], None] | None = None
    # ListOffsets answered by this function of (partition, timestamp spec, isolation level) instead of
    # Kafka's rule: a broker whose ListOffsets disagrees with its Fetch (see tansu_list_offsets).
    offset: Callable[[SimPartition, int, int], int] | None = None
    # A Fetch with max_wait_ms=0 is answered with no topics at all; any wait from 1 ms on is answered
    # normally. Measured on Tansu 0.6.0 (2026-11-24); Kafka answers at once whatever the wait when
    # min_bytes is 0 (ReplicaManager.fetchMessages).
    empty_without_wait: bool = False
    # eosctl cross-checks ListOffsets with a 1-byte Fetch at the high watermark
    # (eosctl.cluster.wire.PROBE_BYTES).
    # Fetch faults are meant for the log scan and leave that probe alone; True: only the probe, None: both.
    probe: bool | None = False
    # Close the connection halfway through the answer's bytes (a broker killed while it answers).
    hang_up: bool = False
    after: int = 0  # let this many matching requests through first
    times: int | None = 1  # None: every matching request from then on

    def matches(self, api: str, topic: str | None, partition: int | None, probe: bool = False) -> bool:
        return (self.api == api and self.topic in (None, topic)
                and self.partition in (None, partition) and self.probe in (None, probe))


@dataclass
class SimGroup:
    group_id: str
    offsets: dict[tuple[str, int], int]
    state: str = "Empty"  # GroupState name as ListGroups v4 / DescribeGroups spell it
    group_type: str = "classic"  # ListGroups v5's type: "classic", "consumer", "streams", "share"


@dataclass
class SimTransaction:
    transactional_id: str
    producer_id: int
    producer_epoch: int = 0
    state: str = "Ongoing"  # TransactionState names: Ongoing, PrepareCommit, CompleteAbort, ...
    timeout_ms: int = 60_000
    start_ms: int = -1
    partitions: list[tuple[str, int]] = field(default_factory=list)


class KafkaSim:
    """The broker. Declare partitions and groups, inject faults, point clients at ``bootstrap``."""

    def __init__(self, nodes: int = 1, cluster_id: str = "kafkasim") -> None:
        self.cluster_id = cluster_id
        self.topics: dict[str, dict[int, SimPartition]] = {}
        # Metadata v10+ names each topic's id (KIP-516): a topic created again gets a new one.
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.groups: dict[str, SimGroup] = {}
        self.transactions: dict[str, SimTransaction] = {}
        self.faults: list[Fault] = []
        self.requests: list[tuple[int, str, int]] = []  # (node, api name, version), in arrival order
        self.fetches: list[tuple[int, str, int, int]] = []  # (node, topic, partition, fetch offset)
        self.fetch_times: list[float] = []  # time.monotonic() of each Fetch request
        # (node, topic, partition, offset) of eosctl's offset cross-check Fetches (1 byte each, at the HW),
        # kept apart from ``fetches`` and ``fetch_times``, which are the log scan's.
        self.probes: list[tuple[int, str, int, int]] = []
        self.list_offsets: list[tuple[str, int, int, int]] = []  # (topic, partition, timestamp, isolation)
        self.errors: list[str] = []  # handler crashes: a test fixture fails on them
        # ApiVersions as a given broker answers it: keys it lists beyond what the sim serves (Apache Kafka
        # 4.4 lists key 93, newer brokers more: RequestContext/ApiVersionsResponse list every ApiKeys entry
        # the listener enables) and keys it leaves out (a broker without the abort API).
        self.extra_api_keys: dict[int, tuple[int, int]] = {}
        self.unlisted_api_keys: set[int] = set()
        self.lock = threading.RLock()
        self._hang_up = False  # set by a fault while an answer is built (under the lock)
        self._servers = [_Server(self, node) for node in range(nodes)]
        for s in self._servers:
            threading.Thread(target=s.serve_forever, args=(0.05,), name=f"kafkasim-{s.node}",
                             daemon=True).start()

    # --- declaring the cluster --------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self._servers[0].port}"

    def partition(self, topic: str, partition: int = 0, leader: int = 0) -> SimPartition:
        """The partition (created with its topic on first use)."""
        with self.lock:
            if topic not in self.topics:
                self.topic_ids[topic] = uuid.uuid4()
            parts = self.topics.setdefault(topic, {})
            if partition not in parts:
                parts[partition] = SimPartition(topic, partition, leader=leader)
            return parts[partition]

    def group(self, group_id: str, offsets: dict[tuple[str, int], int], state: str = "Empty",
              group_type: str = "classic") -> SimGroup:
        with self.lock:
            self.groups[group_id] = SimGroup(group_id, dict(offsets), state, group_type)
            return self.groups[group_id]

    def transaction(self, transactional_id: str, producer_id: int, **kw: Any) -> SimTransaction:
        with self.lock:
            self.transactions[transactional_id] = SimTransaction(transactional_id, producer_id, **kw)
            return self.transactions[transactional_id]

    def delete_topic(self, topic: str) -> None:
        with self.lock:
            self.topics.pop(topic, None)

    def move_leader(self, topic: str, partition: int, node: int) -> None:
        """The leader moved: the old node answers NOT_LEADER_OR_FOLLOWER, Metadata names the new one."""
        with self.lock:
            p = self.topics[topic][partition]
            p.leader = node
            p.leader_epoch += 1

    def inject(self, api: str, topic: str | None = None, partition: int | None = None, **kw: Any) -> Fault:
        """Script the next answer(s): api is 'fetch', 'list_offsets', 'metadata', 'describe_producers'..."""
        fault = Fault(api, topic, partition, **kw)
        with self.lock:
            self.faults.append(fault)
        return fault

    def close(self) -> None:
        for s in self._servers:
            s.shutdown()
            s.server_close()

    def __enter__(self) -> KafkaSim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- answering --------------------------------------------------------------------------------

    def answer(self, node: int, payload: bytes) -> bytes | None:
        api_key, version = struct.unpack_from(">hh", payload, 0)
        if api_key in GROUP_TYPE_APIS and api_key in self.extra_api_keys:
            request_cls, response_cls = GROUP_TYPE_APIS[api_key]
            highest = self.extra_api_keys[api_key][1]
        elif api_key not in APIS:
            self.errors.append(f"node {node}: unsupported API key {api_key} v{version}")
            return None  # Kafka closes the connection on an API it does not know
        else:
            request_cls, response_cls, _, highest = APIS[api_key]
        if api_key == 18 and version > highest:
            # ApiVersions above what we know: answer v0 with UNSUPPORTED_VERSION and our ranges
            # (KIP-511; clients then retry with the highest version we list).
            correlation_id = struct.unpack_from(">i", payload, 4)[0]
            response = ApiVersionsResponse(version=0, error_code=UNSUPPORTED_VERSION,
                                           api_keys=self._api_versions())
            response.with_header(correlation_id=correlation_id)
            return bytes(response.encode(header=True, framed=True))
        request = request_cls.decode(payload, version=version, header=True)
        handler = getattr(self, "_" + request_cls.__name__.removesuffix("Request").lower())
        with self.lock:
            self.requests.append((node, request_cls.__name__.removesuffix("Request"), version))
            self._hang_up = False
            body = handler(node, request, version)
            hang_up = self._hang_up
        response = response_cls(version=version, **body)
        response.with_header(correlation_id=request.header.correlation_id)
        frame = bytes(response.encode(header=True, framed=True))
        return _HangUp(frame[:len(frame) // 2]) if hang_up else frame

    def _group_fault(self, api: str) -> Fault | None:
        """The fault scripted for a group-coordinator API (offset_fetch, find_coordinator, list_groups)."""
        fault = self._take(api)
        if fault is not None and fault.hang_up:
            self._hang_up = True
        return fault

    def _take(self, api: str, topic: str | None = None, partition: int | None = None,
              probe: bool = False) -> Fault | None:
        for fault in self.faults:
            if not fault.matches(api, topic, partition, probe):
                continue
            if fault.after > 0:
                fault.after -= 1
                continue
            if fault.times is not None:
                fault.times -= 1
                if fault.times == 0:
                    self.faults.remove(fault)
            if fault.before is not None:
                fault.before()
            return fault
        return None

    def _api_versions(self) -> list[Any]:
        item = ApiVersionsResponse.ApiVersion
        listed = {k: (lo, hi) for k, (_, _, lo, hi) in APIS.items() if k not in self.unlisted_api_keys}
        listed.update(self.extra_api_keys)
        return [item(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in sorted(listed.items())]

    def _apiversions(self, node: int, request: Any, version: int) -> dict[str, Any]:
        return {"error_code": NONE, "api_keys": self._api_versions(), "throttle_time_ms": 0}

    def _metadata(self, node: int, request: Any, version: int) -> dict[str, Any]:
        r = MetadataResponse
        brokers = [r.MetadataResponseBroker(node_id=s.node, host="127.0.0.1", port=s.port, rack=None)
                   for s in self._servers]
        if request.topics:
            names = [t.name for t in request.topics]
        else:
            # KafkaApis.handleTopicMetadataRequest: a request for all topics leaves out the topics the
            # principal may not describe instead of listing them with an error.
            names = [t for t in self.topics
                     if not any(f.matches("metadata", t, None) and f.error for f in self.faults)]
        topics = []
        for name in names:
            fault = self._take("metadata", name)
            # KafkaApis.handleTopicMetadataRequest: an unknown topic (or one the principal may not
            # describe) is listed with its error and no partitions.
            error = fault.error if fault else (NONE if name in self.topics else UNKNOWN_TOPIC_OR_PARTITION)
            parts = [] if error else [
                # KRaftMetadataCache.partitionMetadata: a partition whose leader is not alive is listed
                # with LEADER_NOT_AVAILABLE and leader -1 (move_leader(..., node=-1)).
                r.MetadataResponseTopic.MetadataResponsePartition(
                    error_code=NONE if p.leader >= 0 else LEADER_NOT_AVAILABLE, partition_index=p.partition,
                    leader_id=p.leader, leader_epoch=p.leader_epoch,
                    replica_nodes=[p.leader] if p.leader >= 0 else [], isr_nodes=[p.leader] if p.leader >= 0
                    else [], offline_replicas=[])
                for p in self.topics[name].values()]
            topics.append(r.MetadataResponseTopic(
                error_code=error, name=name, is_internal=False, partitions=parts,
                topic_id=self.topic_ids.get(name, ZERO_ID)))
        return {"throttle_time_ms": 0, "brokers": brokers, "cluster_id": self.cluster_id,
                "controller_id": 0, "topics": topics}

    def _partition_error(self, node: int, topic: str, partition: int) -> tuple[SimPartition | None, int]:
        """ReplicaManager.getPartitionOrException: unknown partition, or this node is not its leader."""
        p = self.topics.get(topic, {}).get(partition)
        if p is None:
            return None, UNKNOWN_TOPIC_OR_PARTITION
        if p.leader != node:
            return p, NOT_LEADER_OR_FOLLOWER
        return p, NONE

    def _listoffsets(self, node: int, request: Any, version: int) -> dict[str, Any]:
        r = ListOffsetsResponse.ListOffsetsTopicResponse
        topics = []
        for t in request.topics:
            parts = []
            for rp in t.partitions:
                fault = self._take("list_offsets", t.name, rp.partition_index)
                if fault and fault.drop:
                    continue
                p, error = self._partition_error(node, t.name, rp.partition_index)
                error = (fault.error if fault else NONE) or error
                self.list_offsets.append((t.name, rp.partition_index, rp.timestamp, request.isolation_level))
                offset = UNKNOWN_OFFSET
                if not error:
                    # UnifiedLog.fetchOffsetByTimestamp: EARLIEST is the log start; LATEST is the HW, or
                    # the LSO for read_committed (ReplicaManager.fetchOffsetForTimestamp).
                    if fault and fault.offset:
                        offset = fault.offset(p, rp.timestamp, request.isolation_level)
                    elif rp.timestamp == EARLIEST:
                        offset = p.log_start
                    elif rp.timestamp == LATEST:
                        offset = p.last_stable if request.isolation_level == 1 else p.high_watermark
                parts.append(r.ListOffsetsPartitionResponse(partition_index=rp.partition_index,
                                                            error_code=error, timestamp=-1, offset=offset,
                                                            leader_epoch=p.leader_epoch if p else -1))
            topics.append(r(name=t.name, partitions=parts))
        return {"throttle_time_ms": 0, "topics": topics}

    def _fetch(self, node: int, request: Any, version: int) -> dict[str, Any]:
        probe = all(p.partition_max_bytes <= 1 for t in request.topics for p in t.partitions)
        if probe:
            self.probes.extend((node, t.topic, p.partition, p.fetch_offset)
                               for t in request.topics for p in t.partitions)
        else:
            self.fetch_times.append(time.monotonic())
        faults = {(t.topic, p.partition): self._take("fetch", t.topic, p.partition, probe)
                  for t in request.topics for p in t.partitions}
        throttle = max((f.throttle_ms for f in faults.values() if f is not None), default=0)
        if request.max_wait_ms == 0 and any(f and f.empty_without_wait for f in faults.values()):
            return {"throttle_time_ms": 0, "error_code": NONE, "session_id": 0, "responses": []}
        for t in request.topics:
            for p in t.partitions:
                if not probe:
                    self.fetches.append((node, t.topic, p.partition, p.fetch_offset))
        if throttle:
            # KIP-219, FetchContext.getThrottledResponse: a throttled fetch is answered at once with
            # throttle_time_ms and no partitions at all (the other partitions' faults are spent too).
            return {"throttle_time_ms": throttle, "error_code": NONE, "session_id": 0, "responses": []}
        budget = request.max_bytes
        responses = []
        r = FetchResponse.FetchableTopicResponse
        for t in request.topics:
            parts = []
            for fp in t.partitions:
                fault = faults[(t.topic, fp.partition)]
                if fault and fault.drop:
                    continue
                first = budget == request.max_bytes  # nothing in this answer yet
                data, used = self._read(node, t.topic, fp, request.isolation_level, fault,
                                        min(budget, fp.partition_max_bytes), first)
                budget -= used
                parts.append(r.PartitionData(**data))
            responses.append(r(topic=t.topic, partitions=parts))
        return {"throttle_time_ms": 0, "error_code": NONE, "session_id": 0, "responses": responses}

    def _read(self, node: int, topic: str, fp: Any, isolation: int, fault: Fault | None, limit: int,
              first: bool) -> tuple[dict[str, Any], int]:
        p, error = self._partition_error(node, topic, fp.partition)
        if not error and fault and fault.error:
            error = fault.error
        offset = fp.fetch_offset
        if not error and not p.log_start <= offset <= p.high_watermark:
            error = OFFSET_OUT_OF_RANGE  # UnifiedLog.read / LocalLog.read: OffsetOutOfRangeException
        if error:
            # core/src/main/scala/kafka/server/ReplicaManager.scala (apache/kafka 1eb7644): readFromLog turns
            # NotLeaderOrFollower / UnknownLeaderEpoch / FencedLeaderEpoch / KafkaStorage exceptions, and
            # OffsetOutOfRange outside tiered storage (handleOffsetOutOfRangeError), into
            # createLogReadResult(e): highWatermark and leaderLogStartOffset are UnifiedLog.UnknownOffset
            # (-1), lastStableOffset None (KafkaApis: FetchResponse.INVALID_LAST_STABLE_OFFSET, -1), and
            # MemoryRecords.EMPTY.
            return {"partition_index": fp.partition, "error_code": error, "high_watermark": UNKNOWN_OFFSET,
                    "last_stable_offset": UNKNOWN_OFFSET, "log_start_offset": UNKNOWN_OFFSET,
                    "aborted_transactions": [], "records": b""}, 0
        chunks, size, upper = [], 0, offset
        if not (fault and fault.no_records):
            for b in p.batches:
                if b.last_offset < offset:
                    continue
                # LogSegment.read: maxSize bytes from the batch holding the offset; only the first
                # partition of a response gets at least one whole batch (KIP-74, minOneMessage); the
                # rest may be cut in the middle of a batch.
                take = b.size if size + b.size <= limit or (size == 0 and first) else max(0, limit - size)
                if take:
                    chunks.append(b.data[:take])
                    size += take
                    upper = b.last_offset + 1
                if take < b.size or size >= limit:
                    break
        aborted = []
        if isolation == 1:
            # UnifiedLog.collectAbortedTransactions: transactions overlapping [fetch offset, upper bound).
            t = FetchResponse.FetchableTopicResponse.PartitionData.AbortedTransaction
            aborted = [t(producer_id=pid, first_offset=start) for pid, start, end in p.aborted_index()
                       if end >= offset and start < upper]
        return {"partition_index": fp.partition, "error_code": NONE, "high_watermark": p.high_watermark,
                "last_stable_offset": p.last_stable, "log_start_offset": p.log_start,
                "aborted_transactions": aborted, "records": b"".join(chunks)}, size

    def _offsetfetch(self, node: int, request: Any, version: int) -> dict[str, Any]:
        r = OffsetFetchResponse.OffsetFetchResponseTopic
        fault = self._group_fault("offset_fetch")
        if fault is not None and fault.error:
            # GroupCoordinatorService.fetchAllOffsets: a coordinator that is loading the group's
            # __consumer_offsets partition answers COORDINATOR_LOAD_IN_PROGRESS, one that does not (yet)
            # own it NOT_COORDINATOR (CoordinatorRuntime.withActiveContextOrThrow), with no topics.
            return {"throttle_time_ms": 0, "error_code": fault.error, "topics": []}
        group = self.groups.get(request.group_id)
        offsets = group.offsets if group else {}
        wanted = None if request.topics is None else {(t.name, i) for t in request.topics
                                                      for i in t.partition_indexes}
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            if wanted is None or (topic, partition) in wanted:
                by_topic.setdefault(topic, []).append(r.OffsetFetchResponsePartition(
                    partition_index=partition, committed_offset=offset, committed_leader_epoch=-1,
                    metadata="", error_code=NONE))
        # A deleted topic's offsets are dropped only when the coordinator's broker applies the deletion
        # (BrokerMetadataPublisher -> GroupCoordinator.onPartitionsDeleted), so OffsetFetch may still
        # list them while another broker's Metadata already answers UNKNOWN_TOPIC_OR_PARTITION.
        return {"throttle_time_ms": 0, "error_code": NONE,
                "topics": [r(name=t, partitions=ps) for t, ps in by_topic.items()]}

    def _findcoordinator(self, node: int, request: Any, version: int) -> dict[str, Any]:
        s = self._servers[0]
        fault = self._group_fault("find_coordinator")
        if fault is not None and fault.error:
            # KafkaApis.handleFindCoordinatorRequest: __consumer_offsets' partition for the key has no
            # live leader yet -> COORDINATOR_NOT_AVAILABLE, node -1.
            return {"throttle_time_ms": 0, "error_code": fault.error, "error_message": None, "node_id": -1,
                    "host": "", "port": -1}
        return {"throttle_time_ms": 0, "error_code": NONE, "error_message": None, "node_id": s.node,
                "host": "127.0.0.1", "port": s.port}

    def _listgroups(self, node: int, request: Any, version: int) -> dict[str, Any]:
        item = ListGroupsResponse.ListedGroup
        fault = self._group_fault("list_groups")
        if fault is not None and fault.error:
            # GroupCoordinatorService.listGroups: any of this broker's coordinator shards still loading
            # fails the whole answer with COORDINATOR_LOAD_IN_PROGRESS.
            return {"throttle_time_ms": 0, "error_code": fault.error, "groups": []}
        wanted = {s.lower() for s in (getattr(request, "states_filter", None) or [])}
        groups = [item(group_id=g.group_id, protocol_type="consumer", group_state=g.state,
                       group_type=g.group_type)
                  for g in self.groups.values() if node == 0 and (not wanted or g.state.lower() in wanted)]
        return {"throttle_time_ms": 0, "error_code": NONE, "groups": groups}

    def _describegroups(self, node: int, request: Any, version: int) -> dict[str, Any]:
        item = DescribeGroupsResponse.DescribedGroup
        out = []
        for gid in request.groups:
            g = self.groups.get(gid)
            # GroupCoordinator.handleDescribeGroup: an unknown group is Dead, with no error.
            out.append(item(error_code=NONE, group_id=gid, group_state=g.state if g else "Dead",
                            protocol_type="consumer" if g else "", protocol_data="", members=[],
                            # KIP-430's bit field: kafka-python encodes it from a set (an int fails at v5).
                            authorized_operations=set()))
        return {"throttle_time_ms": 0, "groups": out}

    def _typed_group(self, gid: str, kind: str) -> SimGroup | None:
        """The group, if it is there and of ``kind``. Apache Kafka 4.4.0 answers StreamsGroupDescribe and
        ShareGroupDescribe for a group missing or of another type with that group's GROUP_ID_NOT_FOUND
        ("Group nope not found.", "Group x is not a streams group.") and the others as usual, and
        DescribeShareGroupOffsets for a missing group with no error and no topics (measured, raw
        requests to a 4.4.0 broker, 2026-12-02)."""
        g = self.groups.get(gid)
        return g if g is not None and g.group_type == kind else None

    def _typed_describe(self, request: Any, kind: str, item: Any, **fields: Any) -> dict[str, Any]:
        """A StreamsGroupDescribe or ShareGroupDescribe answer: the fields both carry, the group's own
        ``fields`` (its topology or assignor) beside them; a group missing or of another type as
        _typed_group says."""
        out = []
        for gid in request.group_ids:
            g = self._typed_group(gid, kind)
            out.append(item(error_code=NONE if g else GROUP_ID_NOT_FOUND,
                            error_message=None if g else f"Group {gid} not found.", group_id=gid,
                            group_state=g.state if g else "", group_epoch=1, assignment_epoch=1, members=[],
                            authorized_operations=-2147483648, **fields))
        return {"throttle_time_ms": 0, "groups": out}

    def _streamsgroupdescribe(self, node: int, request: Any, version: int) -> dict[str, Any]:
        return self._typed_describe(request, "streams", StreamsGroupDescribeResponse.Groups, topology=None,
                                    topology_description=None, topology_description_status=0,
                                    assignor_name=None)

    def _sharegroupdescribe(self, node: int, request: Any, version: int) -> dict[str, Any]:
        return self._typed_describe(request, "share", ShareGroupDescribeResponse.Groups,
                                    assignor_name="simple")

    def _describesharegroupoffsets(self, node: int, request: Any, version: int) -> dict[str, Any]:
        item = DescribeShareGroupOffsetsResponse.Groups
        out = []
        for asked in request.groups:
            g = self._typed_group(asked.group_id, "share")
            topics: dict[str, list[Any]] = {}
            for (topic, partition), start in sorted((g.offsets if g else {}).items()):
                topics.setdefault(topic, []).append(item.Topics.Partitions(
                    partition_index=partition, start_offset=start, leader_epoch=0, lag=-1, error_code=NONE,
                    error_message=None))
            out.append(item(group_id=asked.group_id, topics=[
                item.Topics(topic_name=t, topic_id=self.topic_ids.get(t, ZERO_ID), partitions=ps)
                for t, ps in topics.items()], error_code=NONE, error_message=None))
        return {"throttle_time_ms": 0, "groups": out}

    def _describeproducers(self, node: int, request: Any, version: int) -> dict[str, Any]:
        r = DescribeProducersResponse.TopicResponse
        topics = []
        for t in request.topics:
            parts = []
            for i in t.partition_indexes:
                fault = self._take("describe_producers", t.name, i)
                p, error = self._partition_error(node, t.name, i)
                error = (fault.error if fault else NONE) or error
                rows = [] if error else [r.PartitionResponse.ProducerState(
                    producer_id=row.producer_id, producer_epoch=row.producer_epoch,
                    last_sequence=row.last_sequence, last_timestamp=row.last_timestamp,
                    coordinator_epoch=row.coordinator_epoch,
                    current_txn_start_offset=row.current_txn_start_offset) for row in p.producers()]
                parts.append(r.PartitionResponse(partition_index=i, error_code=error, error_message=None,
                                                 active_producers=rows))
            topics.append(r(name=t.name, partitions=parts))
        return {"throttle_time_ms": 0, "topics": topics}

    def _describelogdirs(self, node: int, request: Any, version: int) -> dict[str, Any]:
        """ReplicaManager.describeLogDirs: this node's replicas of the named topics (all topics when
        none are named), each with the bytes of its log segments (UnifiedLog.size); one log dir."""
        r = DescribeLogDirsResponse.DescribeLogDirsResult
        wanted = {t.topic: set(t.partitions) for t in request.topics} if request.topics is not None \
            else {t: set(parts) for t, parts in self.topics.items()}
        topics = []
        for name, indexes in wanted.items():
            parts = [r.DescribeLogDirsTopic.DescribeLogDirsPartition(
                partition_index=p.partition, partition_size=sum(b.size for b in p.batches), offset_lag=0,
                is_future_key=False)
                for i, p in sorted(self.topics.get(name, {}).items()) if i in indexes and p.leader == node]
            if parts:
                topics.append(r.DescribeLogDirsTopic(name=name, partitions=parts))
        return {"throttle_time_ms": 0, "results": [r(error_code=NONE, log_dir="/kafkasim", topics=topics)]}

    def _listtransactions(self, node: int, request: Any, version: int) -> dict[str, Any]:
        item = ListTransactionsResponse.TransactionState
        states = set(request.state_filters or [])
        pids = set(request.producer_id_filters or [])
        rows = [item(transactional_id=t.transactional_id, producer_id=t.producer_id,
                     transaction_state=t.state)
                for t in self.transactions.values()
                if node == 0 and (not states or t.state in states) and (not pids or t.producer_id in pids)]
        return {"throttle_time_ms": 0, "error_code": NONE, "unknown_state_filters": [],
                "transaction_states": rows}

    def _describetransactions(self, node: int, request: Any, version: int) -> dict[str, Any]:
        item = DescribeTransactionsResponse.TransactionState
        out = []
        for tid in request.transactional_ids:
            t = self.transactions.get(tid)
            if t is None:
                out.append(item(error_code=TRANSACTIONAL_ID_NOT_FOUND, transactional_id=tid,
                                transaction_state="", transaction_timeout_ms=0, transaction_start_time_ms=-1,
                                producer_id=-1, producer_epoch=-1, topics=[]))
                continue
            by_topic: dict[str, list[int]] = {}
            for topic, partition in t.partitions:
                by_topic.setdefault(topic, []).append(partition)
            out.append(item(error_code=NONE, transactional_id=tid, transaction_state=t.state,
                            transaction_timeout_ms=t.timeout_ms, transaction_start_time_ms=t.start_ms,
                            producer_id=t.producer_id, producer_epoch=t.producer_epoch,
                            topics=[item.TopicData(topic=k, partitions=v) for k, v in by_topic.items()]))
        return {"throttle_time_ms": 0, "transaction_states": out}

    def _writetxnmarkers(self, node: int, request: Any, version: int) -> dict[str, Any]:
        r = WriteTxnMarkersResponse.WritableTxnMarkerResult
        markers = []
        for m in request.markers:
            topics = []
            for t in m.topics:
                parts = []
                for i in t.partition_indexes:
                    p, error = self._partition_error(node, t.name, i)
                    if not error:
                        # ReplicaManager.appendRecords of MemoryRecords.withEndTransactionMarker: one
                        # control batch at the marker's producer id and epoch.
                        p.marker("COMMIT" if m.transaction_result else "ABORT", m.producer_id,
                                 m.producer_epoch, coordinator_epoch=m.coordinator_epoch)
                    parts.append(r.WritableTxnMarkerTopicResult.WritableTxnMarkerPartitionResult(
                        partition_index=i, error_code=error))
                topics.append(r.WritableTxnMarkerTopicResult(name=t.name, partitions=parts))
            markers.append(r(producer_id=m.producer_id, topics=topics))
        return {"markers": markers}


def tansu_list_offsets(p: SimPartition, timestamp: int, isolation: int) -> int:
    """ListOffsets as Tansu 0.6.0 answers it (measured 2026-11-24, where its Fetch answers showed the true
    offsets): latest is the last batch's base offset + 1 (1 where the HW was 2,880), and read_committed
    latest is 0 while a transaction is open; earliest is the log start."""
    if timestamp == EARLIEST:
        return p.log_start
    if isolation == 1 and p.open_transactions():
        return 0
    return p.batches[-1].base_offset + 1 if p.batches else p.log_start


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        sock: socket.socket = self.request
        while True:
            head = _recv(sock, 4)
            if head is None:
                return
            payload = _recv(sock, struct.unpack(">i", head)[0])
            if payload is None:
                return
            try:
                answer = self.server.sim.answer(self.server.node, payload)
            except Exception:
                self.server.sim.errors.append(traceback.format_exc())
                return
            if answer is None:
                return
            sock.sendall(answer)
            if isinstance(answer, _HangUp):
                return  # the connection closes with the answer half sent


class _HangUp(bytes):
    """The first half of an answer, after which the connection closes."""


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver's backlog is 5: a capture's clients (kafka-python, librdkafka's per-broker connections)
    # connecting at once while the accept thread waits for the GIL overflow it, and Linux drops the SYNs,
    # which the client resends after 1, 3, 7, 15 s: the likeliest cause of ci9's "Node 1 not ready after
    # 19338 ms" from a scripted broker in a loaded xdist worker.
    request_queue_size = 128

    def __init__(self, sim: KafkaSim, node: int) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.sim, self.node = sim, node
        self.port = self.server_address[1]


def _recv(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        try:
            chunk = sock.recv(n - len(buf))
        except OSError:
            return None
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)
