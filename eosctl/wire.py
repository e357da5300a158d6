"""A thin raw Kafka client over kafka-python 3: metadata, ListOffsets and Fetch, nothing else.

Consumers hide exactly what eosctl must see (markers, aborted batches, producer ids), so eosctl issues
the protocol requests itself and decodes the record bytes with eosctl.batches. Requests to different
leaders are in flight at the same time; one request per leader carries all of its partitions.
"""

from __future__ import annotations

import socket
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import kafka.errors as Errors
from kafka.net.compat import KafkaNetClient
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest, OffsetSpec
from kafka.protocol.metadata import MetadataRequest

from eosctl.config import Cluster
from eosctl.errors import BrokerError
from eosctl.model import TP

READ_UNCOMMITTED = 0
READ_COMMITTED = 1
# v12 is the last Fetch version that names topics (v13 switches to topic ids) and already carries
# the LSO, log start offset and aborted transactions we need.
FETCH_MAX_VERSION = 12
DEFAULT_MAX_BYTES = 1 << 20
# Kafka refuses more than this per response by default; the socket limit must allow one full fetch.
RECEIVE_MAX_BYTES = 128 << 20

METADATA_ATTEMPTS = 5
# A broker id, or kafka-python's "bootstrap-N" for a bootstrap server before metadata names the brokers.
NodeId = int | str



@dataclass(frozen=True, slots=True)
class Offsets:
    log_start: int
    high_watermark: int
    last_stable: int


@dataclass(frozen=True, slots=True)
class FetchResult:
    topic: str
    partition: int
    fetch_offset: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: tuple[tuple[int, int], ...]  # (producer_id, first_offset), only sent for read_committed
    records: bytes
    throttle_ms: int = 0  # the response's throttle_time_ms (KIP-219: don't ask that broker again sooner)
    # False: the broker's answer left this partition out (a throttled fetch is answered with no
    # partitions at all, KIP-219); every other field is then a placeholder.
    answered: bool = True

    @property
    def error(self) -> str | None:
        return None if self.error_code == 0 else Errors.for_code(self.error_code).__name__


class WireClient:
    """Raw requests to a Kafka cluster. Use as a context manager, or call close()."""

    def __init__(self, target: Cluster | str, *, timeout_ms: int = 10_000,
                 receive_max_bytes: int = RECEIVE_MAX_BYTES) -> None:
        if isinstance(target, Cluster):
            conf = target.kafka_python()
            self.bootstrap = target.bootstrap_servers
        else:
            conf = {"bootstrap_servers": target.split(",")}
            self.bootstrap = target
        self.timeout_ms = timeout_ms
        self._leaders: dict[str, dict[int, int]] = {}
        self._closed = False
        self._client = KafkaNetClient(receive_message_max_bytes=receive_max_bytes,
                                      request_timeout_ms=timeout_ms, **conf)
        try:
            self._client.check_version(timeout_ms=timeout_ms)
        except Exception as e:
            self._client.close()
            raise BrokerError(
                f"cannot reach Kafka at {self.bootstrap}: {_why_unreachable(self.bootstrap, e)}; "
                "check --bootstrap / that the broker is up"
            ) from None

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._client.close()

    # --- metadata ---------------------------------------------------------------------------------

    def metadata(self, topics: Iterable[str] | None = None) -> dict[str, dict[int, int]]:
        """topic -> partition -> leader node id; all topics when ``topics`` is None."""
        wanted = None if topics is None else list(dict.fromkeys(topics))
        request = MetadataRequest(
            topics=None if wanted is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in wanted],
            allow_auto_topic_creation=False,
        )
        for attempt in range(METADATA_ATTEMPTS):
            response = self._send_all([(self._any_node(), request)])[0]
            # Keep kafka-python's broker list current: connections to leaders are made from it.
            self._client.cluster.update_metadata(response)
            found: dict[str, dict[int, int]] = {}
            missing, transient = [], []
            for t in response.topics:
                error = Errors.for_code(t.error_code)
                if error is Errors.UnknownTopicOrPartitionError:
                    missing.append(t.name)
                elif t.error_code and getattr(error, "retriable", False):
                    transient.append((t.name, error.__name__))  # e.g. a topic created a moment ago
                elif t.error_code:
                    raise BrokerError(f"metadata for topic {t.name!r} failed: {error.__name__}")
                else:
                    found[t.name] = {p.partition_index: p.leader_id for p in t.partitions}
            if not transient or attempt == METADATA_ATTEMPTS - 1:
                break
            time.sleep(0.1 * 2**attempt)
        if transient:
            name, error_name = transient[0]
            raise BrokerError(f"metadata for topic {name!r} failed: {error_name}; retry in a few seconds")
        if missing:
            raise BrokerError(self._no_such_topic(missing[0]))
        self._leaders.update(found)
        return {t: found[t] for t in wanted} if wanted is not None else found

    def partitions(self, topic: str) -> list[int]:
        return sorted(self.metadata([topic])[topic])

    def leader(self, topic: str, partition: int) -> int:
        leaders = self._leaders.get(topic) or self.metadata([topic])[topic]
        if partition not in leaders:
            raise BrokerError(f"topic {topic!r} has no partition {partition} (it has {len(leaders)})")
        leader = leaders[partition]
        if leader < 0:
            raise BrokerError(f"{topic}-{partition} has no leader right now; retry in a few seconds")
        return leader

    def _no_such_topic(self, topic: str) -> str:
        try:
            existing = sorted(t for t in self.metadata() if not t.startswith("__"))
        except BrokerError:
            existing = []
        shown = ", ".join(existing[:10]) + (f" and {len(existing) - 10} more" if len(existing) > 10 else "")
        return (f"topic {topic!r} does not exist on {self.bootstrap} "
                f"(list topics with `kafka-topics --list`; existing: {shown or 'none'})")

    # --- offsets ----------------------------------------------------------------------------------

    def offsets(self, tps: Iterable[TP]) -> dict[TP, Offsets]:
        """Log start, high watermark and LSO of each partition.

        ListOffsets takes one isolation level per request and Kafka rejects a partition listed twice, so
        each leader gets three requests (earliest; latest uncommitted = HW; latest committed = LSO),
        each carrying all of that leader's partitions and all in flight together.
        """
        specs = [(OffsetSpec.EARLIEST, READ_UNCOMMITTED), (OffsetSpec.LATEST, READ_UNCOMMITTED),
                 (OffsetSpec.LATEST, READ_COMMITTED)]
        wanted = list(dict.fromkeys(tps))
        attempt = 0
        while True:
            by_leader: dict[int, list[TP]] = defaultdict(list)
            for tp in wanted:
                by_leader[self.leader(*tp)].append(tp)
            calls = [(node, _list_offsets(parts, spec, isolation))
                     for node, parts in by_leader.items() for spec, isolation in specs]
            got: dict[TP, list[int]] = defaultdict(lambda: [0, 0, 0])
            failed = None
            for i, response in enumerate(self._send_all(calls)):
                slot = i % len(specs)
                for t in response.topics:
                    for p in t.partitions:
                        if p.error_code:
                            failed = (t.name, p.partition_index, Errors.for_code(p.error_code))
                        got[(t.name, p.partition_index)][slot] = p.offset
            if failed is None:
                return {tp: Offsets(*got[tp]) for tp in wanted}
            topic, partition, error = failed
            attempt += 1
            if not getattr(error, "retriable", False) or attempt == METADATA_ATTEMPTS:
                raise BrokerError(f"ListOffsets for {topic}-{partition} failed: {error.__name__}")
            # A leader moved (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH...): look it up again.
            self.forget_leaders()
            time.sleep(0.1 * 2**attempt)

    # --- fetch ------------------------------------------------------------------------------------

    def fetch_raw(self, topic: str, partition: int, offset: int, max_bytes: int = DEFAULT_MAX_BYTES,
                  isolation: int = READ_UNCOMMITTED) -> FetchResult:
        return self.fetch_many({(topic, partition): offset}, max_bytes, isolation)[(topic, partition)]

    def fetch_many(self, positions: Mapping[TP, int], max_bytes: int = DEFAULT_MAX_BYTES,
                   isolation: int = READ_UNCOMMITTED) -> dict[TP, FetchResult]:
        """Fetch each partition from its offset: one Fetch request per leader, all in flight together.

        ``max_bytes`` is per partition; the broker may cut the last batch short (see batches.Chunk).
        """
        by_leader: dict[int, dict[TP, int]] = defaultdict(dict)
        for tp, offset in positions.items():
            by_leader[self.leader(*tp)][tp] = offset
        calls = [(node, _fetch_request(parts, max_bytes, isolation)) for node, parts in by_leader.items()]
        out: dict[TP, FetchResult] = {}
        for (_, request), response in zip(calls, self._send_all(calls), strict=True):
            if response.error_code:
                raise BrokerError(f"Fetch failed: {Errors.for_code(response.error_code).__name__}")
            throttle = response.throttle_time_ms or 0
            for t in response.responses:
                for p in t.partitions:
                    tp = (t.topic, p.partition_index)
                    aborted = tuple((a.producer_id, a.first_offset) for a in (p.aborted_transactions or ()))
                    out[tp] = FetchResult(
                        topic=t.topic, partition=p.partition_index, fetch_offset=positions[tp],
                        error_code=p.error_code, high_watermark=p.high_watermark,
                        last_stable_offset=p.last_stable_offset, log_start_offset=p.log_start_offset,
                        aborted=aborted, records=bytes(p.records or b""), throttle_ms=throttle,
                    )
            for t in request.topics:
                for p in t.partitions:
                    tp = (t.topic, p.partition)
                    if tp not in out:
                        out[tp] = FetchResult(t.topic, p.partition, positions[tp], 0, -1, -1, -1, (), b"",
                                              throttle_ms=throttle, answered=False)
        return out

    def know_leaders(self, leaders: Mapping[TP, int]) -> None:
        """Take leaders someone already asked for (an audit's driver, for all partitions at once), so
        requests go straight to them; a NOT_LEADER answer still makes the client ask again."""
        for (topic, partition), leader in leaders.items():
            self._leaders.setdefault(topic, {})[partition] = leader

    def forget_leaders(self) -> None:
        """Drop cached leaders (after NOT_LEADER errors) so the next request looks them up again."""
        self._leaders.clear()

    # --- plumbing ---------------------------------------------------------------------------------

    def _any_node(self) -> NodeId:
        node = self._client.least_loaded_node(bootstrap_fallback=True)
        if node is None:
            raise BrokerError(f"no broker of {self.bootstrap} is reachable right now; check that it is up")
        return node

    def _send_all(self, calls: Sequence[tuple[NodeId, ApiMessage]]) -> list[Any]:
        """Send every (node, request) before waiting for any, and return responses in order (each of its
        request's response class, read by attribute)."""
        try:
            for node in dict.fromkeys(node for node, _ in calls):
                self._client.await_ready(node, timeout_ms=self.timeout_ms)
            futures = [self._client.send(node, request) for node, request in calls]
            for f in futures:
                if not f.is_done:
                    self._client.poll(timeout_ms=self.timeout_ms, future=f)
        except Errors.KafkaError as e:
            raise BrokerError(f"request to Kafka at {self.bootstrap} failed: {e}") from None
        responses = []
        for f in futures:
            if not f.is_done:
                raise BrokerError(f"Kafka at {self.bootstrap} did not answer within {self.timeout_ms} ms")
            if f.failed():
                raise BrokerError(f"request to Kafka at {self.bootstrap} failed: {f.exception}")
            responses.append(f.value)
        return responses


def _list_offsets(parts: list[TP], spec: int, isolation: int) -> ListOffsetsRequest:
    by_topic: dict[str, list[ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition]] = defaultdict(list)
    for topic, partition in parts:
        by_topic[topic].append(ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=partition, current_leader_epoch=-1, timestamp=int(spec)))
    return ListOffsetsRequest(
        replica_id=-1, isolation_level=isolation,
        topics=[ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
        min_version=ListOffsetsRequest.min_version_for_isolation_level(isolation),
    )


def _fetch_request(parts: Mapping[TP, int], max_bytes: int, isolation: int) -> FetchRequest:
    fetch_topic = FetchRequest.FetchTopic
    by_topic: dict[str, list[FetchRequest.FetchTopic.FetchPartition]] = defaultdict(list)
    for (topic, partition), offset in parts.items():
        by_topic[topic].append(fetch_topic.FetchPartition(
            partition=partition, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
            partition_max_bytes=max_bytes))
    return FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=0,
        max_bytes=min(max_bytes * len(parts), RECEIVE_MAX_BYTES // 2),
        isolation_level=isolation, session_id=0, session_epoch=-1,
        topics=[fetch_topic(topic=t, partitions=ps) for t, ps in by_topic.items()],
        min_version=max(4, FetchRequest.min_version_for_isolation_level(isolation)),
        max_version=FETCH_MAX_VERSION,
    )


def _why_unreachable(bootstrap: str, error: Exception) -> str:
    """kafka-python only says 'Unable to bootstrap'; one plain socket attempt names the real cause."""
    first = bootstrap.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]") or first, int(port or 9092)), timeout=2):
            return f"the broker accepted TCP but the Kafka handshake failed ({error})"
    except socket.gaierror:
        return f"cannot resolve host {host!r}"
    except ConnectionRefusedError:
        return "connection refused"
    except TimeoutError:
        return "connection timed out"
    except (OSError, ValueError) as e:
        return str(e) or type(e).__name__
