"""A thin raw Kafka client over kafka-python 3: metadata, ListOffsets and Fetch, nothing else.

Consumers hide exactly what eosctl must see (markers, aborted batches, producer ids), so eosctl issues
the protocol requests itself and decodes the record bytes with eosctl.cluster.batches. Requests to different
leaders are in flight at the same time; one request per leader carries all of its partitions.
"""

from __future__ import annotations

import socket
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import kafka.errors as Errors
from kafka.net.compat import KafkaNetClient
from kafka.protocol.admin import DescribeLogDirsRequest
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest, OffsetSpec
from kafka.protocol.metadata import MetadataRequest

from eosctl.base.errors import BrokerError
from eosctl.cluster import deadline
from eosctl.cluster import wireanswers as answers
from eosctl.cluster.clientcauses import (
    BootstrapLog,
    check_tls_files,
    denied,
    diagnose,
    is_denial,
    reopen_for_close,
    stop_bootstrap,
)
from eosctl.cluster.model import TP
from eosctl.cluster.wireanswers import FetchResult, Offsets
from eosctl.config.model import Cluster

READ_UNCOMMITTED = 0
READ_COMMITTED = 1
# v12 is the last Fetch version that names topics (v13 switches to topic ids) and already carries
# the LSO, log start offset and aborted transactions we need.
FETCH_MAX_VERSION = 12
DEFAULT_MAX_BYTES = 1 << 20
# Kafka refuses more than this per response by default; the socket limit must allow one full fetch.
RECEIVE_MAX_BYTES = 128 << 20
# Partitions one Fetch request names at most. Kafka bounds an answer by the request's max_bytes, but some
# Kafka-compatible brokers ignore every size limit (noida-db answers a multi-partition Fetch of a 3M-record
# topic with one 200 MB frame); an answer over RECEIVE_MAX_BYTES halves this for the client, down to one.
MAX_FETCH_PARTITIONS = 256
# Requests in flight per connection at once (kafka-python's max_in_flight_requests_per_connection is 5).
IN_FLIGHT = 4

METADATA_ATTEMPTS = 5
_OUT_OF_RANGE_CODE = Errors.OffsetOutOfRangeError.errno
# A broker id, or kafka-python's "bootstrap-N" for a bootstrap server before metadata names the brokers.
NodeId = int | str



# Fetch's max_wait_ms: a small wait, as consumers use (fetch.max.wait.ms), instead of 0. With min_bytes 0
# Kafka answers at once whatever the wait (ReplicaManager.fetchMessages: bytesReadable >= minBytes);
# Tansu 0.6.0 answers a Fetch at max_wait_ms=0 with no topics at all (measured 2026-11-24), and any wait
# from 1 ms on is answered. A partition left out of an answer is asked again with the next, longer wait.
FETCH_WAITS_MS = (20, 100, 500)
# A request's first try waits this many times the slowest answer seen lately (a bootstrap or a wave on a
# new connection: two round trips and a connection), when that is longer than the client's timeout; the
# estimate decays by SLOWEST_DECAY per answer.
SLOW_FACTOR = 1.5
SLOWEST_DECAY = 0.9
# The cross-check's Fetch at the listed high watermark only needs the offsets its answer carries.
PROBE_BYTES = 1


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
        self.receive_max_bytes = receive_max_bytes
        self.max_fetch_partitions = MAX_FETCH_PARTITIONS  # halved on an oversized answer (fetch_many)
        # The bytes a Fetch may ask for at most, once one had to be asked again smaller to be answered (a
        # link that cuts connections after so many bytes): later ones keep to it (None: no limit learnt).
        self.fetch_cap: int | None = None
        self._leaders: dict[str, dict[int, int]] = {}
        # While holding (hold_metadata), metadata answers are kept and reused: one refresh of the live model
        # asks once, not once per section (at 10k partitions each answer costs ~0.2 s to decode).
        self._held: dict[str, dict[int, int]] | None = None
        # Topic name -> its id (Metadata v10+, KIP-516), None where the broker names no id: a topic
        # deleted and created again under the same name gets a new id.
        self.topic_ids: dict[str, str | None] = {}
        # The cluster's id from the last Metadata answer (KIP-78; None from a broker that sends none): an
        # incremental audit's state names the cluster it was read from.
        self.cluster_id: str | None = None
        self._brokers_stale = False
        self._closed = False
        if isinstance(target, Cluster):
            check_tls_files(target)
        # One try, bounded by the command's deadline: a wrong address or a broker that is down is one line
        # at once, never a retry (the watchers reconnect at their next refresh). A cause found in the
        # client's log (a refused login, an untrusted certificate) ends the wait at once.
        if isinstance(target, Cluster):
            deadline.prefer(target.timeout_s)
        d = deadline.current()
        began = time.monotonic()
        # Every wait of kafka-python's own (the bootstrap's Metadata, a connection's set-up: TCP, TLS,
        # SASL, ApiVersions) may take what is left of the deadline; eosctl's requests give each try a
        # timeout of its own (_send_wave). Its defaults (30 s per request, 10 s per connection) were fixed
        # waits --timeout did not change.
        left_ms = deadline.connect_timeout_ms(d)
        self._client = KafkaNetClient(receive_message_max_bytes=receive_max_bytes, request_timeout_ms=left_ms,
                                      socket_connection_setup_timeout_ms=left_ms,
                                      socket_connection_setup_timeout_max_ms=left_ms, **conf)
        manager = self._client._manager
        # A refused connection or an unknown host is nothing to wait for either, with one bootstrap
        # address (of several, another may answer).
        with BootstrapLog(target if isinstance(target, Cluster) else None,
                          on_cause=lambda: stop_bootstrap(manager),
                          stop_on_refusal="," not in self.bootstrap.strip(",")) as log:
            try:
                self._client.check_version(timeout_ms=left_ms)
            except Exception as e:
                reopen_for_close(manager)
                self._client.close()
                cause = diagnose(target, log.errors) if isinstance(target, Cluster) else None
                why = _why_unreachable(self.bootstrap, e)
                if not cause and deadline.ended_by(d):
                    # The deadline ended the bootstrap, not the broker: say so, with the whole wait.
                    raise BrokerError(deadline.at_deadline(
                        f"cannot connect to Kafka at {self.bootstrap}",
                        "the Kafka handshake (ApiVersions, Metadata) " + (
                            "on a connection the broker accepted" if why.startswith("the broker accepted TCP")
                            else f"({why})"), d)) from None
                # The wait is said where there was one to speak of: TCP accepted, then no answer (a stall,
                # a black hole), not a refusal.
                if why.startswith("the broker accepted TCP"):
                    why += f" (waited {time.monotonic() - began:.1f} s)"
                raise BrokerError(
                    f"cannot connect to Kafka at {self.bootstrap}: {cause}" if cause else
                    f"cannot reach Kafka at {self.bootstrap}: {why}; check --bootstrap / that the broker is "
                    "up"
                ) from None
        # The slowest answer seen (here: a bootstrap, two round trips and a connection) sets the first try
        # of later requests: at 4.5 s of latency a request on a new connection needs 9 s, and a fixed 3 s
        # first try (then 6 s, 12 s) cost each request 20 s of retries.
        self._slowest_ms = (time.monotonic() - began) * 1000

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._client.close()

    def max_version(self, api_key: int) -> int | None:
        """The newest version of ``api_key`` the bootstrap broker listed (None where it listed none)."""
        versions = (listed_api_versions(self._client._manager) or {}).get(api_key)
        return versions[1] if versions else None

    # --- metadata ---------------------------------------------------------------------------------

    @contextmanager
    def hold_metadata(self) -> Iterator[None]:
        """Inside, metadata() for topics already asked about answers from that answer (leaders that moved
        meanwhile are found again through NOT_LEADER errors, as always)."""
        self._held = {}
        try:
            yield
        finally:
            self._held = None

    def metadata(self, topics: Iterable[str] | None = None) -> dict[str, dict[int, int]]:
        """topic -> partition -> leader node id; all topics when ``topics`` is None."""
        wanted = None if topics is None else list(dict.fromkeys(topics))
        if wanted is not None and self._held is not None and all(t in self._held for t in wanted):
            return {t: self._held[t] for t in wanted}
        request = MetadataRequest(
            topics=None if wanted is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in wanted],
            allow_auto_topic_creation=False,
        )
        for attempt in range(METADATA_ATTEMPTS):
            response = self._send_any(request)
            # Keep kafka-python's broker list current: connections to leaders are made from it.
            self._client.cluster.update_metadata(response)
            self.cluster_id = getattr(response, "cluster_id", None) or self.cluster_id
            found: dict[str, dict[int, int]] = {}
            missing, transient = [], []
            for t in response.topics:
                error = Errors.for_code(t.error_code)
                if error is Errors.UnknownTopicOrPartitionError:
                    missing.append(t.name)
                elif t.error_code and getattr(error, "retriable", False):
                    transient.append((t.name, error.__name__))  # e.g. a topic created a moment ago
                elif t.error_code:
                    raise BrokerError(f"metadata for topic {t.name!r} failed: "
                                      f"{denied(error, 'Metadata', t.name) or error.__name__}")
                else:
                    found[t.name] = {p.partition_index: p.leader_id for p in t.partitions}
                    self.topic_ids[t.name] = _topic_id(getattr(t, "topic_id", None))
            if not transient or attempt == METADATA_ATTEMPTS - 1:
                break
            time.sleep(0.1 * 2**attempt)
        if transient:
            name, error_name = transient[0]
            raise BrokerError(f"metadata for topic {name!r} failed: {error_name}; retry in a few seconds")
        if missing:
            raise BrokerError(self._no_such_topic(missing[0]))
        self._leaders.update(found)
        if self._held is not None:
            self._held.update(found)
        return {t: found[t] for t in wanted} if wanted is not None else found

    def partitions(self, topic: str) -> list[int]:
        return sorted(self.metadata([topic])[topic])

    def leader(self, topic: str, partition: int) -> int:
        leaders = self._leaders.get(topic) or self.metadata([topic])[topic]
        if partition not in leaders:
            raise BrokerError(f"topic {topic!r} has no partition {partition} (it has {len(leaders)})")
        leader = leaders[partition]
        if leader < 0:
            raise BrokerError(f"{topic}-{partition} has no leader on {self.bootstrap} right now "
                              "(LEADER_NOT_AVAILABLE: its broker is down or restarting); "
                              "try again in a few seconds")
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
        """Log start, high watermark and LSO of each partition, from ListOffsets cross-checked against the
        same three offsets every Fetch answer carries.

        Some brokers answer ListOffsets wrongly (Tansu 0.6.0: latest = the last batch's base offset + 1,
        and 0 for read_committed while a transaction is open, where its Fetch shows the true HW and LSO).
        All three offsets only ever grow, so: ListOffsets (L1), then a Fetch at L1's high watermark (F),
        and, when F shows more than L1 somewhere, ListOffsets again (L2). Honest answers give
        L1 <= F <= L2; otherwise ``disagreement`` names the answer that is wrong and the offsets are F's,
        which is what a read_committed consumer is served. A partition the Fetch did not answer keeps L1.
        """
        wanted = list(dict.fromkeys(tps))
        first = self.list_offsets(wanted)
        probes = self.fetch_many({tp: first[tp].high_watermark for tp in wanted}, PROBE_BYTES, READ_COMMITTED)
        refused = next((r.error for r in probes.values() if r.error and is_denial(r.error)), None)
        if refused:
            # ListOffsets needs only Describe: offsets without the records (Read) are no answer to read.
            raise BrokerError(f"Fetch refused: {refused}")
        ahead = [tp for tp in wanted if (served := answers.served(probes[tp])) and
                 any(f > f1 for f, f1 in zip(served, first[tp].triple, strict=True))]
        second = self.list_offsets(ahead) if ahead else {}
        # A listed high watermark beyond the log is out of range: its log start still gets an answer.
        beyond = [tp for tp in wanted if probes[tp].error_code == _OUT_OF_RANGE_CODE]
        if beyond:
            probes.update(self.fetch_many({tp: first[tp].log_start for tp in beyond}, PROBE_BYTES,
                                          READ_COMMITTED))
        out = {}
        for tp in wanted:
            served = answers.served(probes[tp])
            listed = first[tp]
            if served is not None:
                out[tp] = answers.checked(tp, listed, second.get(tp), served)
            elif tp in beyond:
                out[tp] = replace(listed, disagreement=(
                    f"ListOffsets gives {tp[0]}-{tp[1]} a high watermark of {listed.high_watermark}, but a "
                    "Fetch there is answered OFFSET_OUT_OF_RANGE: the broker's ListOffsets or Fetch is "
                    "wrong"),
                    listed=listed.triple)
            else:
                out[tp] = listed
        return out

    def served_offsets(self, positions: Mapping[TP, int]) -> dict[TP, Offsets]:
        """Log start, HW and LSO as a read_committed Fetch at each position carries them, without ListOffsets:
        what offsets() returns when the broker's answers agree, for a quarter of its requests. The live model
        reads this way between full cross-checks, at the high watermarks it last saw. A partition whose answer
        carries no offsets (an error; out of range after a truncation or retention; left out) is missing
        from the result: ask offsets() for it."""
        probes = self.fetch_many(dict(positions), PROBE_BYTES, READ_COMMITTED)
        return {tp: Offsets(*served) for tp, r in probes.items() if (served := answers.served(r)) is not None}

    def list_offsets(self, tps: Iterable[TP]) -> dict[TP, Offsets]:
        """ListOffsets' answer alone (see offsets() for the cross-checked one).

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
                return {tp: Offsets(got[tp][0], got[tp][1], got[tp][2]) for tp in wanted}
            topic, partition, error = failed
            attempt += 1
            if not getattr(error, "retriable", False) or attempt == METADATA_ATTEMPTS:
                raise BrokerError(f"ListOffsets for {topic}-{partition} failed: "
                                  f"{denied(error, 'ListOffsets', topic) or error.__name__}")
            # A leader moved (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH...): look it up again.
            self.forget_leaders()
            time.sleep(0.1 * 2**attempt)

    def offsets_for_time(self, tps: Iterable[TP], timestamp_ms: int) -> dict[TP, int | None]:
        """Each partition's first offset whose record timestamp is at or after ``timestamp_ms`` (ListOffsets
        by timestamp, KIP-79: the broker looks it up in its time index; up to the high watermark), None
        where no record is that new (a consumer's offsetsForTimes answers null there too)."""
        wanted = list(dict.fromkeys(tps))
        attempt = 0
        while True:
            by_leader: dict[int, list[TP]] = defaultdict(list)
            for tp in wanted:
                by_leader[self.leader(*tp)].append(tp)
            calls = [(node, _list_offsets(parts, timestamp_ms, READ_UNCOMMITTED, min_version=1))
                     for node, parts in by_leader.items()]
            got: dict[TP, int | None] = {}
            failed = None
            for response in self._send_all(calls):
                for t in response.topics:
                    for p in t.partitions:
                        if p.error_code:
                            failed = (t.name, p.partition_index, Errors.for_code(p.error_code))
                        got[(t.name, p.partition_index)] = p.offset if p.offset >= 0 else None
            if failed is None:
                return {tp: got.get(tp) for tp in wanted}
            topic, partition, error = failed
            attempt += 1
            if not getattr(error, "retriable", False) or attempt == METADATA_ATTEMPTS:
                raise BrokerError(f"ListOffsets by timestamp for {topic}-{partition} failed: "
                                  f"{denied(error, 'ListOffsets', topic) or error.__name__}")
            self.forget_leaders()
            time.sleep(0.1 * 2**attempt)

    def log_sizes(self, tps: Iterable[TP]) -> dict[TP, int]:
        """Bytes of each partition's log on its leader (DescribeLogDirs, KIP-113: the sum of its segment
        files, log start to log end); {} where the broker does not answer it (unsupported, not allowed)."""
        by_leader: dict[int, list[TP]] = defaultdict(list)
        for tp in dict.fromkeys(tps):
            by_leader[self.leader(*tp)].append(tp)
        calls = []
        for node, parts in by_leader.items():
            by_topic: dict[str, list[int]] = defaultdict(list)
            for topic, partition in parts:
                by_topic[topic].append(partition)
            calls.append((node, DescribeLogDirsRequest(topics=[
                DescribeLogDirsRequest.DescribableLogDirTopic(topic=t, partitions=ps)
                for t, ps in by_topic.items()])))
        try:
            responses = self._send_all(calls)
        except BrokerError:
            return {}
        sizes: dict[TP, int] = {}
        for (node, _), response in zip(calls, responses, strict=True):
            led = set(by_leader[node])
            for result in response.results:
                if result.error_code:
                    continue
                for t in result.topics:
                    for p in t.partitions:
                        tp = (t.name, p.partition_index)
                        if tp in led and not p.is_future_key:
                            sizes[tp] = p.partition_size
        return sizes

    # --- fetch ------------------------------------------------------------------------------------

    def fetch_raw(self, topic: str, partition: int, offset: int, max_bytes: int = DEFAULT_MAX_BYTES,
                  isolation: int = READ_UNCOMMITTED) -> FetchResult:
        return self.fetch_many({(topic, partition): offset}, max_bytes, isolation)[(topic, partition)]

    def fetch_many(self, positions: Mapping[TP, int], max_bytes: int = DEFAULT_MAX_BYTES,
                   isolation: int = READ_UNCOMMITTED,
                   max_wait_ms: int = FETCH_WAITS_MS[0]) -> dict[TP, FetchResult]:
        """Fetch each partition from its offset: Fetch requests of at most ``max_fetch_partitions``
        partitions per leader, all in flight together.

        ``max_bytes`` is per partition; the broker may cut the last batch short (see batches.Chunk). An
        answer larger than the client may receive (a broker that ignores size limits) is asked again in
        smaller requests: the limit halves, and stays halved for this client. Partitions an unthrottled
        answer leaves out are asked again with the next longer FETCH_WAITS_MS.
        """
        while True:
            try:
                return self._fetch_many(positions, max_bytes, isolation, max_wait_ms)
            except _Oversized as e:
                if e.partitions <= 1 and not e.too_large:
                    raise BrokerError(str(e)) from None
                if e.partitions <= 1:
                    raise BrokerError(
                        f"Kafka at {self.bootstrap} answered a Fetch of one partition with more than "
                        f"{self.receive_max_bytes:,} bytes although it was asked for {max_bytes:,}; the "
                        "broker ignores fetch size limits") from None
                self.max_fetch_partitions = e.partitions // 2

    def _fetch_many(self, positions: Mapping[TP, int], max_bytes: int, isolation: int,
                    max_wait_ms: int) -> dict[TP, FetchResult]:
        by_leader: dict[int, dict[TP, int]] = defaultdict(dict)
        for tp, offset in positions.items():
            by_leader[self.leader(*tp)][tp] = offset
        calls = []
        for node, parts in by_leader.items():
            items = list(parts.items())
            for i in range(0, len(items), self.max_fetch_partitions):
                calls.append((node, _fetch_request(dict(items[i:i + self.max_fetch_partitions]), max_bytes,
                                                   isolation, max_wait_ms, self.fetch_cap)))
        try:
            responses = self._send_all(calls)
        except _Oversized as e:
            e.partitions = max(sum(len(t.partitions) for t in r.topics) for _, r in calls)
            for node in by_leader:  # answers may still be arriving there: start those connections afresh
                self._client.close(node)
            raise
        out: dict[TP, FetchResult] = {}
        for (_, request), response in zip(calls, responses, strict=True):
            if response.error_code:
                error = Errors.for_code(response.error_code)
                raise BrokerError(f"Fetch failed: {denied(error, 'Fetch', None) or error.__name__}")
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
                        max_wait_ms=max_wait_ms,
                    )
            for t in request.topics:
                for p in t.partitions:
                    tp = (t.topic, p.partition)
                    if tp not in out:
                        out[tp] = FetchResult(t.topic, p.partition, positions[tp], 0, -1, -1, -1, (), b"",
                                              throttle_ms=throttle, answered=False, max_wait_ms=max_wait_ms)
        left = {tp: positions[tp] for tp, r in out.items() if not r.answered and not r.throttle_ms}
        longer = [w for w in FETCH_WAITS_MS if w > max_wait_ms]
        if left and longer:
            out.update(self.fetch_many(left, max_bytes, isolation, longer[0]))
        return out

    def know_leaders(self, leaders: Mapping[TP, int]) -> None:
        """Take leaders someone already asked for (an audit's driver, for all partitions at once), so
        requests go straight to them; a NOT_LEADER answer still makes the client ask again."""
        for (topic, partition), leader in leaders.items():
            self._leaders.setdefault(topic, {})[partition] = leader

    def brokers(self) -> list[int]:
        """Node ids of every broker the last metadata named."""
        if self._brokers_stale or not self._client.cluster.brokers():
            # Metadata for no topic names just the brokers (all topics could be thousands of partitions).
            request = MetadataRequest(topics=[], allow_auto_topic_creation=False)
            self._client.cluster.update_metadata(self._send_all([(self._any_node(), request)])[0])
            self._brokers_stale = False
        return sorted(b.node_id for b in self._client.cluster.brokers())

    def forget_brokers(self) -> None:
        """The next brokers() asks for them again (a coordinator named a broker the last metadata did not)."""
        self._brokers_stale = True

    def address(self, node: NodeId) -> str:
        """HOST:PORT of a broker, for messages (the bootstrap address where metadata names none)."""
        b = self._client.cluster.broker_metadata(node)
        return f"{b.host}:{b.port}" if b is not None else self.bootstrap

    def any_node(self) -> NodeId:
        """A broker to send a request any broker answers (FindCoordinator, Metadata)."""
        return self._any_node()

    def request_all(self, calls: Sequence[tuple[NodeId, ApiMessage]]) -> list[Any]:
        """Send each (node, request) together; the responses in order (BrokerError on no answer)."""
        return self._send_all(calls)

    def forget_leaders(self) -> None:
        """Drop cached leaders (after NOT_LEADER errors) so the next request looks them up again."""
        self._leaders.clear()
        if self._held is not None:
            self._held.clear()

    # --- plumbing ---------------------------------------------------------------------------------

    def _send_any(self, request: ApiMessage) -> Any:
        """A request any broker can answer (Metadata), sent to another broker when one is down: the
        brokers a client learnt of include one that died since (its connection is refused until the
        cluster drops it from Metadata), and the others still answer. Tried again within the command's
        deadline (eosctl.cluster.deadline) while no broker answers."""
        name = type(request).__name__.removesuffix("Request")

        def once(attempt: int) -> Any:
            node = self._client.least_loaded_node(bootstrap_fallback=True)
            if node is None:
                raise deadline.Transient(f"no broker of {self.bootstrap} is reachable")
            try:
                timeout_ms = deadline.request_timeout_ms(self.first_try_ms(), attempt)
                return self._send_wave([(node, request)], timeout_ms)[0]
            except deadline.Transient:
                self._client.close(node)  # kafka-python backs off from it: the next try picks another
                raise

        return deadline.reads(f"{name} to Kafka at {self.bootstrap}", once)

    def _any_node(self) -> NodeId:
        node = self._client.least_loaded_node(bootstrap_fallback=True)
        if node is None:
            raise BrokerError(f"no broker of {self.bootstrap} is reachable right now; check that it is up")
        return node

    def _send_all(self, calls: Sequence[tuple[NodeId, ApiMessage]]) -> list[Any]:
        """Send every (node, request) before waiting for any, and return responses in order (each of its
        request's response class, read by attribute). A node gets at most IN_FLIGHT requests at a time
        (kafka-python refuses more per connection): the rest go in later waves. Every request this client
        sends is an idempotent read: a wave that meets a dropped connection or a timeout is sent again on
        new connections with a longer timeout, within the command's deadline (eosctl.cluster.deadline)."""
        waves: list[list[int]] = []
        per_node: dict[NodeId, int] = defaultdict(int)
        for i, (node, _) in enumerate(calls):
            wave = per_node[node] // IN_FLIGHT
            per_node[node] += 1
            if wave == len(waves):
                waves.append([])
            waves[wave].append(i)
        responses: list[Any] = [None] * len(calls)
        for indices in waves:
            sent = [calls[i] for i in indices]
            for i, response in zip(indices, self._send_retrying(sent), strict=True):
                responses[i] = response
        return responses

    def _send_retrying(self, calls: Sequence[tuple[NodeId, ApiMessage]]) -> list[Any]:
        if not all(type(r).__name__ in IDEMPOTENT for _, r in calls):
            return self._send_wave(calls, self.first_try_ms())
        names = sorted({type(r).__name__.removesuffix("Request") for _, r in calls})
        drops = 0
        shrunk = False

        def drop(failure: deadline.Transient) -> None:
            nonlocal drops, shrunk
            for node in dict.fromkeys(node for node, _ in calls):
                self._client.close(node)  # a half-open connection must not take the next try too
            drops += not failure.timed_out
            # A timeout (a slow link) or a connection dropped mid-answer (a link that cuts each connection
            # after so many bytes: the same answer would be cut again): the retry asks for half.
            for _, request in calls:
                shrunk |= _shrink_fetch(request)

        def retry(failure: deadline.Transient, tries: int) -> bool:
            # A Fetch cut short is asked again, smaller, on any cluster, until it is as small as it gets.
            cut = not failure.timed_out and "refused" not in str(failure).lower() and any(
                isinstance(r, FetchRequest) and r.max_bytes > MIN_FETCH_BYTES for _, r in calls)
            return cut or self._retry_leader(failure, tries)

        responses = deadline.reads(
            f"{'/'.join(names)} to Kafka at {self.bootstrap}",
            lambda attempt: self._send_wave(calls, deadline.request_timeout_ms(self.first_try_ms(), attempt)),
            drop, retry_if=retry)
        if shrunk and drops >= 2:
            # Cut on fresh connections too: what got through is what the link lets through, and later
            # Fetches ask for no more (one drop alone may have been the connection's earlier answers).
            sizes = [r.max_bytes for _, r in calls if isinstance(r, FetchRequest)]
            self.fetch_cap = min([*sizes, *([self.fetch_cap] if self.fetch_cap else [])])
        return responses

    def _retry_leader(self, failure: deadline.Transient, tries: int) -> bool:
        """Whether a request to a named broker is worth sending there again: always after a timeout (a
        stall, a slow link) and after one dropped connection (a reset); a broker that keeps refusing on a
        cluster of several is down, and its partitions' new leaders are found by the caller (NOT_LEADER
        and a metadata refresh), as before."""
        return failure.timed_out or tries <= 1 or len(self._client.cluster.brokers()) <= 1

    def first_try_ms(self) -> int:
        """The first try's timeout of a request: the client's own (short: a black hole is noticed in
        seconds), or SLOW_FACTOR times the slowest answer seen lately when that is longer (a slow link)."""
        return max(self.timeout_ms, int(SLOW_FACTOR * self._slowest_ms))

    def _send_wave(self, calls: Sequence[tuple[NodeId, ApiMessage]], timeout_ms: int) -> list[Any]:
        manager = self._client._manager
        # A connection this try makes (the leader's, after the bootstrap's closed) is set up within what
        # is left of the deadline now, not what was left when this client was made.
        deadline.bound(manager)
        began = time.monotonic()
        ends = began + timeout_ms / 1000
        try:
            # The try's timeout is the whole try's: connecting and then waiting for the answers may not
            # each take it (twice the try, past the deadline on the last one).
            for node in dict.fromkeys(node for node, _ in calls):
                self._client.await_ready(node, timeout_ms=_left_ms(ends))
            # Each request with what is left of this try (kafka-python 3 closes the connection then).
            futures = [manager.send(request, node_id=node, request_timeout_ms=_left_ms(ends))
                       for node, request in calls]
            for f in futures:
                if not f.is_done:
                    self._client.poll(timeout_ms=_left_ms(ends) + 100, future=f)
        except Errors.InvalidReceiveError as e:
            raise _Oversized(f"request to Kafka at {self.bootstrap} failed: {e}", too_large=True) from None
        except deadline.TRANSIENT as e:
            # A connection that took the whole try to fail was not refused: its handshake got no answer (a
            # stall, a black hole), retried like any timeout; a refusal fails at once.
            waited = (time.monotonic() - began) * 1000 >= 0.9 * timeout_ms
            raise deadline.Transient(deadline.named(e),
                                     timed_out=isinstance(e, Errors.KafkaTimeoutError) or waited) from None
        except Errors.KafkaError as e:
            raise BrokerError(f"request to Kafka at {self.bootstrap} failed: {e}") from None
        responses = []
        for f in futures:
            if not f.is_done:
                raise deadline.Transient(f"no answer within {timeout_ms} ms", timed_out=True)
            if f.failed():
                error = f"request to Kafka at {self.bootstrap} failed: {f.exception}"
                if isinstance(f.exception, Errors.InvalidReceiveError):
                    raise _Oversized(error, too_large=True)
                if isinstance(f.exception, deadline.TRANSIENT):
                    raise deadline.Transient(deadline.named(f.exception),
                                             timed_out=isinstance(f.exception, Errors.RequestTimedOutError))
                raise BrokerError(error)
            responses.append(f.value)
        # Lately: one slow answer (a large Fetch) raises it, and it falls back as answers come quickly.
        self._slowest_ms = max((time.monotonic() - began) * 1000, self._slowest_ms * SLOWEST_DECAY)
        return responses


def _left_ms(ends: float) -> int:
    """What is left of a try ending at ``ends`` (time.monotonic()), never below deadline.MIN_TRY_MS."""
    return max(deadline.MIN_TRY_MS, int((ends - time.monotonic()) * 1000))


# Every request WireClient sends: reads that change nothing, so sending one again is always safe.
IDEMPOTENT = frozenset({
    "MetadataRequest", "ListOffsetsRequest", "FetchRequest", "DescribeLogDirsRequest", "OffsetFetchRequest",
    "FindCoordinatorRequest", "DescribeGroupsRequest", "ListGroupsRequest", "DescribeProducersRequest",
    "ListTransactionsRequest", "DescribeTransactionsRequest", "ApiVersionsRequest",
})




class _Oversized(BrokerError):
    """An answer larger than the client may receive (kafka-python closed the connection), or one that did
    not arrive in time (a huge answer on a busy machine): a Fetch asks again in smaller requests."""

    partitions = 0  # in the largest request sent

    def __init__(self, message: str, too_large: bool = False) -> None:
        super().__init__(message)
        self.too_large = too_large


# A Fetch that timed out is asked again for half the bytes, down to this per partition: on a slow link a
# smaller answer arrives in time, and a scan reads on from where it got (Kafka still sends a whole first
# batch larger than the limit: KIP-74).
MIN_FETCH_BYTES = 16 << 10


def _shrink_fetch(request: ApiMessage) -> bool:
    """Halve a Fetch's sizes (down to MIN_FETCH_BYTES); whether it was one."""
    if not isinstance(request, FetchRequest):
        return False
    request.max_bytes = max(MIN_FETCH_BYTES, request.max_bytes // 2)
    for t in request.topics:
        for p in t.partitions:
            size = p.partition_max_bytes
            p.partition_max_bytes = max(min(size, MIN_FETCH_BYTES), size // 2)
    return True


def _topic_id(value: object) -> str | None:
    """A topic id as text; None for none (older Metadata versions) or the all-zero id (Uuid.ZERO_UUID)."""
    text = str(value) if value is not None else ""
    return text if text.strip("0-") else None


def _list_offsets(parts: list[TP], spec: int, isolation: int, min_version: int = 0) -> ListOffsetsRequest:
    by_topic: dict[str, list[ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition]] = defaultdict(list)
    for topic, partition in parts:
        by_topic[topic].append(ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=partition, current_leader_epoch=-1, timestamp=int(spec)))
    return ListOffsetsRequest(
        replica_id=-1, isolation_level=isolation,
        topics=[ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
        # A timestamp lookup needs v1 (v0 answers a list of segment offsets, not the offset of a time).
        min_version=max(min_version, ListOffsetsRequest.min_version_for_isolation_level(isolation)),
    )


def _fetch_request(parts: Mapping[TP, int], max_bytes: int, isolation: int, max_wait_ms: int,
                   cap: int | None = None) -> FetchRequest:
    """``max_bytes`` per partition; ``cap``: at most this many bytes in all (and per partition)."""
    if cap is not None:
        max_bytes = min(max_bytes, cap)
    fetch_topic = FetchRequest.FetchTopic
    by_topic: dict[str, list[FetchRequest.FetchTopic.FetchPartition]] = defaultdict(list)
    for (topic, partition), offset in parts.items():
        by_topic[topic].append(fetch_topic.FetchPartition(
            partition=partition, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
            partition_max_bytes=max_bytes))
    return FetchRequest(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=0,
        max_bytes=min(max_bytes * len(parts), RECEIVE_MAX_BYTES // 2, cap or RECEIVE_MAX_BYTES),
        isolation_level=isolation, session_id=0, session_epoch=-1,
        topics=[fetch_topic(topic=t, partitions=ps) for t, ps in by_topic.items()],
        min_version=max(4, FetchRequest.min_version_for_isolation_level(isolation)),
        max_version=FETCH_MAX_VERSION,
    )


def listed_api_versions(manager: Any) -> dict[int, tuple[int, int]] | None:
    """API key -> (min, max) version, as the broker's ApiVersions answer listed them to a kafka-python
    connection manager (None before it answered). Read from the raw answer: kafka-python's own lookups turn
    every listed key into its enum and raise on one it lacks (Apache Kafka 4.4 lists key 93), and newer
    brokers will list more."""
    listed = getattr(getattr(manager, "broker_version_data", None), "api_versions", None)
    if listed is None:
        return None
    return {int(key): (int(v[0]), int(v[1])) for key, v in listed.items()}


def unreachable_now(bootstrap: str) -> str | None:
    """Why the first bootstrap address cannot be reached at all (TCP refused, a host that does not
    resolve), or None: nothing to wait for then."""
    why = _why_unreachable(bootstrap, Exception())
    return why if why == "connection refused" or why.startswith("cannot resolve host") else None


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
