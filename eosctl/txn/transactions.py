"""Transactions: the coordinator's view (ListTransactions/DescribeTransactions), hanging transactions,
and the admin abort that clears one.

A transaction is *hanging* when it holds a partition's LSO with nobody left to finish it. Two rules,
either one is enough:

- KIP-664 (what ``kafka-transactions.sh find-hanging`` does): DescribeProducers shows a producer with a
  current transaction on the partition whose last write is older than ``max_age``, and its coordinator
  does not list that partition (no transactional id for the producer id, or DescribeTransactions does
  not name the partition). The coordinator lists a partition while the transaction is Ongoing and until
  its marker is written (PrepareCommit/PrepareAbort), whatever the epoch: transactions v2 bumps the epoch
  before the markers go out (TransactionsCommand.FindHangingCommand.filterHangingTransactions).
- LSO: the partition's LSO is below its HW and the open transaction at the LSO is older than
  ``max_age`` (age = now - first timestamp of its first batch, read from the log). This needs nothing
  but ListOffsets and one Fetch, so it works where DescribeProducers returns nothing (noida-db) and it
  also catches transactions the coordinator still lists but never ends (a coordinator that does not
  enforce transaction.timeout.ms).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

import kafka.errors as Errors
from kafka.protocol.admin.transactions import DescribeTransactionsRequest, ListTransactionsRequest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from kafka.structs import TopicPartition

from eosctl.base.errors import BrokerError, EosctlError
from eosctl.cluster import deadline
from eosctl.cluster.clientcauses import denied, is_denial
from eosctl.cluster.logscan import scan_partition
from eosctl.cluster.model import TP
from eosctl.cluster.wire import Offsets, WireClient, listed_api_versions
from eosctl.txn.opentxn import (
    COORDINATOR_CLOCK,
    PRODUCER_CLOCK,
    TRUSTED_CLOCKS,
    OpenTxn,
    first_batches,
    open_transactions,
)

if TYPE_CHECKING:  # kafka.admin (the admin client) imported only where one is used
    from kafka.admin import KafkaAdminClient, TransactionDescription
    from kafka.admin import ProducerState as ActiveProducer

# Kafka's default transaction.max.timeout.ms: after it the coordinator aborts a transaction by itself.
DEFAULT_MAX_AGE_S = 900.0
# A two-phase commit transaction (KIP-939): InitProducerId with enable2Pc makes the coordinator store the
# timeout as Integer.MAX_VALUE (TransactionCoordinator.handleInitProducerId: resolvedTxnTimeoutMs), which
# is how it knows one (TransactionMetadata.isDistributedTwoPhaseCommitTxn), and it never times one out
# (TransactionStateManager.timedOutTransactions skips them). Its external coordinator decides its outcome.
TWO_PHASE_TIMEOUT_MS = 2**31 - 1
ACTIVE_STATES = {"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"}
WRITE_TXN_MARKERS_API_KEY = 27
# DescribeProducers' answer: the active producers per partition, and "ok" / "unsupported" / the error.
Described = tuple[dict[TP, list["ActiveProducer"]], str]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class TxnInfo:
    transactional_id: str
    producer_id: int
    producer_epoch: int | None
    state: str
    timeout_ms: int | None
    start_time_ms: int | None  # None when no transaction runs (Kafka reports -1)
    coordinator_id: int | None
    partitions: tuple[TP, ...] = ()

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def two_phase(self) -> bool:
        """A two-phase commit (KIP-939) id: an external coordinator decides its transactions' outcome."""
        return self.timeout_ms == TWO_PHASE_TIMEOUT_MS

    def age_s(self, now_ms: int) -> float | None:
        """Age of the running transaction; None when none runs (brokers keep the last start time)."""
        if self.start_time_ms is None or not self.active:
            return None
        return max(0.0, (now_ms - self.start_time_ms) / 1000)

    def to_dict(self, now_ms: int) -> dict[str, Any]:
        return {
            "transactional_id": self.transactional_id, "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch, "state": self.state, "timeout_ms": self.timeout_ms,
            "start_time_ms": self.start_time_ms, "age_s": _round(self.age_s(now_ms)),
            "coordinator_id": self.coordinator_id, "two_phase": self.two_phase,
            "partitions": [{"topic": t, "partition": p} for t, p in self.partitions],
        }


@dataclass(frozen=True, slots=True)
class Hanging:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    first_offset: int
    age_s: float | None
    rules: tuple[str, ...]  # "kip664", "lso"
    lso: int | None = None
    hw: int | None = None
    transactional_id: str | None = None
    coordinator_state: str | None = None
    age_source: str = PRODUCER_CLOCK  # whose clock dates it (eosctl.txn.opentxn.TRUSTED_CLOCKS)
    # On __consumer_offsets-N: the consumer groups whose offsets it holds (eosctl.txn.pendingoffsets).
    groups: tuple[str, ...] = ()
    # Its coordinator runs it as a two-phase commit transaction (KIP-939): never hanging by age alone.
    two_phase: bool = False

    @property
    def blocked(self) -> int | None:
        return None if self.lso is None or self.hw is None else self.hw - self.lso

    @property
    def age_trusted(self) -> bool:
        return self.age_source in TRUSTED_CLOCKS

    def counts(self, max_age_s: float) -> bool:
        """Does it make `txns hanging` exit 1? Not when only a producer-set record timestamp makes it
        older than ``max_age_s``: its coordinator's orphaned partition (kip664) or a broker's clock must
        say so (or any age is enough: max-age 0)."""
        return "kip664" in self.rules or self.age_trusted or max_age_s <= 0

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch, "first_offset": self.first_offset,
                "age_s": _round(self.age_s), "rules": list(self.rules), "lso": self.lso, "hw": self.hw,
                "blocked": self.blocked, "transactional_id": self.transactional_id,
                "coordinator_state": self.coordinator_state, "age_source": self.age_source,
                "groups": list(self.groups), "two_phase": self.two_phase}


@dataclass
class HangingReport:
    max_age_s: float
    partitions_checked: int
    hanging: list[Hanging] = field(default_factory=list)
    producers_returned: int = 0  # by DescribeProducers, over all checked partitions
    describe_producers: str = "ok"  # "ok" | "unsupported" | an error name
    # The broker's ListOffsets and Fetch answers disagreed on these partitions (eosctl.cluster.wire.Offsets).
    offsets_disagreements: list[str] = field(default_factory=list)
    # Open transactions holding an LSO now that are not (yet) hanging: younger than max_age_s. What stalls
    # a read_committed consumer, whatever its age; never counted in the exit status.
    blocking: list[Hanging] = field(default_factory=list)
    # Why a producer the coordinators did not name may still be run by one: this principal may not Describe
    # every transactional id (coordinator_unseen), None when it may.
    coordinator_unseen: str | None = None

    @property
    def could_not_look(self) -> str | None:
        """Why the check could not look everywhere it must (a denied DescribeProducers, coordinators that
        hide ids from this principal): then "no hanging transactions" is not an answer."""
        if self.describe_producers not in ("ok", "unsupported"):
            return f"DescribeProducers: {self.describe_producers}"
        return self.coordinator_unseen

    @property
    def counted(self) -> list[Hanging]:
        """The findings that make `txns hanging` exit 1 (see Hanging.counts)."""
        return [h for h in self.hanging if h.counts(self.max_age_s)]

    def to_dict(self) -> dict[str, Any]:
        return {"max_age_s": self.max_age_s, "partitions_checked": self.partitions_checked,
                "describe_producers": {"status": self.describe_producers,
                                       "producers_returned": self.producers_returned},
                "offsets_disagreements": self.offsets_disagreements,
                "coordinator_unseen": self.coordinator_unseen,
                "hanging": [{**h.to_dict(), "counted": h.counts(self.max_age_s)} for h in self.hanging],
                "blocking": [h.to_dict() for h in self.blocking]}


@dataclass(frozen=True, slots=True)
class AbortPlan:
    topic: str
    partition: int
    start_offset: int
    producer_id: int
    producer_epoch: int
    lso: int
    hw: int
    started_ms: int | None
    transactional_id: str | None
    supported: bool  # the broker offers WriteTxnMarkers
    # The marker's coordinator epoch: the partition leader rejects a marker older than the last one it
    # saw for the producer, so it is the one DescribeProducers reports, or 0 when unknown (as
    # kafka-transactions.sh abort does).
    coordinator_epoch: int = 0
    # The coordinator's state for the transactional id (DescribeTransactions), None when unknown. The ABORT
    # marker goes to the partition leader only: a coordinator still "Ongoing" is not told, so a live
    # producer of the id goes on and commits its later records without the aborted ones.
    coordinator_state: str | None = None
    # Set when no coordinator named the producer and this principal may not Describe every transactional id:
    # a coordinator may run it unseen (see coordinator_unseen).
    coordinator_unseen: str | None = None
    # Its coordinator runs it as a two-phase commit transaction (KIP-939): its external coordinator decides.
    two_phase: bool = False

    def to_dict(self, now_ms: int) -> dict[str, Any]:
        age = None if self.started_ms is None else max(0.0, (now_ms - self.started_ms) / 1000)
        return {"topic": self.topic, "partition": self.partition, "start_offset": self.start_offset,
                "producer_id": self.producer_id, "producer_epoch": self.producer_epoch,
                "coordinator_epoch": self.coordinator_epoch, "lso": self.lso,
                "hw": self.hw, "blocked": self.hw - self.lso, "age_s": _round(age),
                "transactional_id": self.transactional_id, "coordinator_state": self.coordinator_state,
                "supported": self.supported, "two_phase": self.two_phase}

    @property
    def producer_may_be_alive(self) -> bool:
        return self.coordinator_state == "Ongoing"


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


# --- the admin client (built by eosctl.cluster.clients.kafka_admin)
# ------------------------------------------


def supports(admin: KafkaAdminClient, api_key: int) -> bool:
    """Whether the broker lists ``api_key`` in its ApiVersions answer
    (eosctl.cluster.wire.listed_api_versions: never through kafka-python's enum, which raises on keys it
    lacks)."""
    listed = listed_api_versions(getattr(admin, "_manager", None))
    if listed is None:
        try:
            listed = admin.api_versions()
        except ValueError:
            return False
    return api_key in {int(k) for k in listed}


def _call(what: str, fn: Callable[..., T], *args: object, request: str | None = None,
          name: str | None = None, **kwargs: object) -> T:
    """Run one admin call (retried after a dropped connection or a timeout, within the command's
    deadline); protocol errors become one line naming what failed (a refusal: what to grant; ``request``:
    the Kafka request, default ``what``, and ``name``: the resource it names)."""
    try:
        return deadline.library_call(what, fn, *args, **kwargs)
    except Errors.IncompatibleBrokerVersion:
        raise EosctlError(f"this broker does not support {what}") from None
    except Errors.KafkaError as e:
        raise BrokerError(f"{what} failed: {denied(e, request or what, name) or type(e).__name__}") from None


# --- list / describe -------------------------------------------------------------------------------------


def _info(txid: str, d: TransactionDescription) -> TxnInfo:
    return TxnInfo(
        transactional_id=txid, producer_id=d.producer_id, producer_epoch=d.producer_epoch,
        state=d.state.value, timeout_ms=d.transaction_timeout_ms,
        start_time_ms=d.transaction_start_time_ms if d.transaction_start_time_ms >= 0 else None,
        coordinator_id=d.coordinator_id,
        partitions=tuple(sorted((tp.topic, tp.partition) for tp in d.topic_partitions)),
    )


# The coordinator's state names (TransactionState.fromName): a state filter is sent as Kafka spells it.
STATE_NAMES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
               "PrepareEpochFence")
# Characters with a meaning in a regular expression (Java's and RE2J's): escaped in a prefix pattern.
_REGEX_SPECIAL = set("\\.^$|?*+()[]{}")


@dataclass
class Listing:
    """What list_transactions sent: the filters the brokers applied (``state``, ``duration``, ``pattern``:
    ListTransactions v0, v1 KIP-994, v2 KIP-1152), and the ids it described."""

    server_filters: tuple[str, ...] = ()
    described: int = 0


def prefix_pattern(prefixes: Sequence[str]) -> str:
    """A TransactionalIdPattern matching the ids that start with one of ``prefixes``: anchored and ending in
    ``.*``, so it means the same whether the broker matches the whole id or searches it."""
    escaped = ("".join(f"\\{c}" if c in _REGEX_SPECIAL else c for c in p) for p in prefixes)
    return "^(?:" + "|".join(escaped) + ").*"


def list_transactions(admin: KafkaAdminClient, states: Sequence[str] = (), min_age_s: float | None = None,
                      producer_ids: Sequence[int] = (), now_ms: int | None = None,
                      prefixes: Sequence[str] = (), listing: Listing | None = None) -> list[TxnInfo]:
    """Every transactional id the coordinators know (under ``prefixes`` when given), described (state,
    epoch, timeout, start, partitions).

    The brokers filter where they can: the states (v0), the age (v1's DurationFilter, Kafka 3.8+), the
    prefixes (v2's TransactionalIdPattern, Kafka 4.1+), so only what matches is described; a broker without
    a version is asked without its filter (kafka-python checks ApiVersions and refuses to drop it silently).
    Every filter is applied here again on the described ids: the server-side ones only narrow what is
    described (DurationFilter counts from the last start time in any state, so the age asks for the running
    states too).
    ``listing``: filled with the filters the brokers applied.
    """
    now_ms = _now(now_ms)
    canonical = {n.lower(): n for n in STATE_NAMES}
    server_states = [canonical[s.lower()] for s in states] if all(s.lower() in canonical for s in states) \
        else []
    wanted_filters: dict[str, Any] = {}
    if min_age_s is not None:  # "running longer than": one ms less, so an id exactly min_age old stays
        wanted_filters["duration_filter_ms"] = max(0, int(min_age_s * 1000) - 1)
        # Kafka keeps an id whose last start is older than the filter in any state (an Empty one's -1
        # is oldest of all), while an age here is a running transaction's: ask for the running states.
        server_states = server_states if states else sorted(ACTIVE_STATES)
    if prefixes and all(prefixes):
        wanted_filters["transactional_id_pattern"] = prefix_pattern(prefixes)
    while True:
        try:
            listed = _call("ListTransactions", admin.list_transactions,
                           producer_id_filters=list(producer_ids) or None,
                           state_filters=server_states or None, **wanted_filters)
            break
        except BrokerError as e:
            # kafka-python raises UnsupportedVersionError for a filter the broker's versions lack (wrapped
            # by _call): drop the newest filter and ask again.
            if "UnsupportedVersion" not in str(e):
                raise
            if "transactional_id_pattern" in wanted_filters:
                del wanted_filters["transactional_id_pattern"]
            elif "duration_filter_ms" in wanted_filters:
                del wanted_filters["duration_filter_ms"]
            else:
                raise
    ids = sorted({t.transactional_id for per_broker in listed.values() for t in per_broker})
    if prefixes:
        ids = [i for i in ids if any(i.startswith(p) for p in prefixes)]
    described = _call("DescribeTransactions", admin.describe_transactions, ids) if ids else {}
    if listing is not None:
        listing.server_filters = tuple(name for name, on in (
            ("state", bool(server_states)), ("duration", "duration_filter_ms" in wanted_filters),
            ("pattern", "transactional_id_pattern" in wanted_filters)) if on)
        listing.described = len(ids)
    wanted = {s.lower() for s in states}
    out = []
    for txid in ids:
        if txid not in described:
            continue
        info = _info(txid, described[txid])
        if wanted and info.state.lower() not in wanted:
            continue
        age = info.age_s(now_ms)
        if min_age_s is not None and (age is None or age < min_age_s):
            continue
        out.append(info)
    return out


def describe_transaction(admin: KafkaAdminClient, transactional_id: str) -> TxnInfo:
    try:
        described = deadline.library_call("DescribeTransactions", admin.describe_transactions,
                                          [transactional_id])
    except Errors.TransactionalIdNotFoundError:
        raise EosctlError(f"no transactional id {transactional_id!r} on this cluster "
                          "(see `eosctl txns list`)") from None
    except Errors.KafkaError as e:
        why = denied(e, "DescribeTransactions", transactional_id) or type(e).__name__
        raise BrokerError(f"DescribeTransactions failed: {why}") from None
    if transactional_id not in described:
        raise EosctlError(f"no transactional id {transactional_id!r} on this cluster "
                          "(see `eosctl txns list`)")
    return _info(transactional_id, described[transactional_id])


# --- hanging ---------------------------------------------------------------------------------------------


def describe_producers(admin: KafkaAdminClient, tps: Iterable[TP],
                       leaders: Mapping[TP, int] | None = None) -> Described:
    """DescribeProducers for the partitions (kafka-python sends one request per leader).

    ``leaders``: each partition's leader when the caller knows it (eosctl.cluster.wire.WireClient), so no
    metadata is asked for first (kafka-python's own lookup decodes the whole topics' metadata, ~0.3 s at 10k
    partitions); a leader that moved sends the request the usual way.
    Returns (active producers per partition, status) where status is "ok", "unsupported" or the error.
    """
    tps = list(tps)
    if not tps:
        return {}, "ok"
    try:
        if leaders is not None and all(tp in leaders for tp in tps):
            try:
                return _described_by_leader(admin, tps, leaders), "ok"
            except (Errors.NotLeaderForPartitionError, Errors.UnknownTopicOrPartitionError):
                pass
        result = deadline.library_call("DescribeProducers", admin.describe_producers,
                                       [TopicPartition(t, p) for t, p in tps])
    except Errors.IncompatibleBrokerVersion:
        return {}, "unsupported"
    except Errors.KafkaError as e:
        return {}, _denied_topic(admin, tps, e) or type(e).__name__
    except BrokerError as e:  # the deadline passed while the connection kept dropping or timing out
        return {}, str(e)
    return {(tp.topic, tp.partition): list(s.active_producers) for tp, s in result.items()}, "ok"


def _denied_topic(admin: KafkaAdminClient, tps: list[TP], error: Exception) -> str | None:
    """For a refused DescribeProducers: which topic was refused, as the grant it needs (kafka-python raises
    the first error of the whole request: each topic is asked alone to find it)."""
    if denied(error, "DescribeProducers", None) is None:
        return None
    topics = sorted({t for t, _ in tps})
    for topic in topics if len(topics) > 1 else []:
        try:
            admin.describe_producers([TopicPartition(t, p) for t, p in tps if t == topic])
        except Errors.KafkaError as e:
            if denied(e, "DescribeProducers", topic):
                return denied(e, "DescribeProducers", topic)
    return denied(error, "DescribeProducers", topics[0])


# A transactional id no one uses: DescribeTransactions of it tells whether this principal may Describe
# transactional ids in general (Kafka checks the ACL before looking the id up: KafkaApis.
# handleDescribeTransactions answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED, else NOT_FOUND or
# NOT_COORDINATOR).
_PROBE_ID = "eosctl-visibility-probe"


def coordinator_unseen(client: WireClient, prefix: str = "") -> str | None:
    """Why the coordinators' answers may leave transactions out for this principal, or None.

    ListTransactions lists only the ids the principal may Describe (KafkaApis.handleListTransactions filters
    them without an error), so a missing id is either unknown to every coordinator or hidden. An id under
    ``prefix`` that nobody uses is described: refused means hidden ones are possible."""
    probe = f"{prefix}{_PROBE_ID}"
    try:
        (answer,) = client.request_all([(client.any_node(), DescribeTransactionsRequest(
            transactional_ids=[probe]))])
    except (EosctlError, Errors.KafkaError):
        return None
    codes = [t.error_code for t in answer.transaction_states]
    if not any(_is_denial(c) for c in codes):
        return None
    what = f"the transactional ids under {prefix!r}" if prefix else "every transactional id"
    how = (f"transactional-id {prefix} (kafka-acls --add --allow-principal User:NAME --operation Describe "
           f"--transactional-id {prefix} --resource-pattern-type prefixed)" if prefix else
           "transactional-id * or on the pipelines' prefixes")
    return (f"this principal may not Describe {what}: the coordinators list only the ids it may Describe, so "
            f"a transaction they run may be missing here; grant Describe on {how}")


def _is_denial(code: int) -> bool:
    return denied(code, "DescribeTransactions", None) is not None


def _described_by_leader(admin: KafkaAdminClient, tps: list[TP],
                         leaders: Mapping[TP, int]) -> dict[TP, list[ActiveProducer]]:
    by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
    for t, p in tps:
        by_leader[leaders[(t, p)]].append(TopicPartition(t, p))
    out: dict[TP, list[ActiveProducer]] = {}
    for leader, parts in by_leader.items():
        result = deadline.library_call("DescribeProducers", admin.describe_producers, parts, broker_id=leader)
        out.update({(tp.topic, tp.partition): list(s.active_producers) for tp, s in result.items()})
    return out


def find_hanging(client: WireClient, admin: KafkaAdminClient, topics: Sequence[str],
                 max_age_s: float = DEFAULT_MAX_AGE_S, now_ms: int | None = None,
                 described: Described | None = None,
                 known: Mapping[TP, Offsets] | None = None) -> HangingReport:
    """Apply both rules to every partition of ``topics``; one finding per partition and producer.

    ``described``: describe_producers' answer when the caller already has it (the TUI asks once per refresh);
    ``known``: the partitions' offsets read a moment ago (the live model), used if they cover them.
    """
    now_ms = _now(now_ms)
    partitions = client.metadata(topics)
    tps = [(t, p) for t in topics for p in sorted(partitions[t])]
    offsets = {tp: known[tp] for tp in tps} if known and all(tp in known for tp in tps) \
        else client.offsets(tps)
    report = HangingReport(max_age_s=max_age_s, partitions_checked=len(tps))
    found: dict[tuple[str, int, int], Hanging] = {}

    report.offsets_disagreements = [o.disagreement for o in offsets.values() if o.disagreement]
    producers, report.describe_producers = described or describe_producers(admin, tps)
    report.producers_returned = sum(len(v) for v in producers.values())
    candidates = [(tp, p) for tp, ps in producers.items() for p in ps
                  if p.current_transaction_start_offset >= 0 and p.last_timestamp >= 0
                  and (now_ms - p.last_timestamp) / 1000 >= max_age_s]
    blocked = [tp for tp in tps if offsets[tp].last_stable < offsets[tp].high_watermark]
    at_lso = open_transactions(client, blocked, {tp: offsets[tp].last_stable for tp in blocked})
    coordinator = coordinator_view(client, {p.producer_id for _, p in candidates} |
                                   {t.producer_id for t in at_lso.values()})
    if any(p.producer_id not in coordinator for _, p in candidates) or \
            any(t.producer_id not in coordinator for t in at_lso.values()):
        report.coordinator_unseen = coordinator_unseen(client)

    # LSO rule, aged by the coordinator's start time where it has one
    young: list[Hanging] = []
    for tp, txn in dated(at_lso, coordinator).items():
        age = txn.age_s(now_ms)
        o = offsets[tp]
        h = Hanging(tp[0], tp[1], txn.producer_id, txn.producer_epoch, txn.first_offset, age, ("lso",),
                    o.last_stable, o.high_watermark, age_source=txn.age_source)
        info = coordinator.get(txn.producer_id)
        if info is not None and info.two_phase and info.active and tp in info.partitions:
            # Its external coordinator ends it, whenever it decides: old is not hanging (KIP-939).
            young.append(replace(h, two_phase=True))
        elif age is not None and age >= max_age_s:
            found[(*tp, txn.producer_id)] = h
        else:
            young.append(h)

    # KIP-664 rule (its age is DescribeProducers' last timestamp: the last batch's max timestamp,
    # ProducerAppendInfo.appendDataBatch, so the producer's clock on a CreateTime topic)
    for tp, p in candidates:
        info = coordinator.get(p.producer_id)
        if info is not None and tp in info.partitions:
            continue  # the coordinator will still end it on this partition (a marker, or its timeout)
        key = (*tp, p.producer_id)
        o = offsets[tp]
        age = (now_ms - p.last_timestamp) / 1000
        prior = found.get(key)
        if prior is not None and prior.age_trusted:
            age, source = prior.age_s or 0.0, prior.age_source
        else:
            age, source = max(age, prior.age_s or 0) if prior else age, PRODUCER_CLOCK
        found[key] = Hanging(tp[0], tp[1], p.producer_id, p.producer_epoch,
                             p.current_transaction_start_offset, age,
                             ("kip664", "lso") if prior else ("kip664",), o.last_stable, o.high_watermark,
                             age_source=source)
    for key, h in found.items():
        info = coordinator.get(h.producer_id)
        if info is not None:
            found[key] = _with_coordinator(h, info)
    report.hanging = sorted(found.values(), key=lambda h: (h.topic, h.partition, h.first_offset))
    hung = {(h.topic, h.partition) for h in report.hanging if h.lso == h.first_offset}
    report.blocking = sorted((_with_coordinator(h, coordinator[h.producer_id]) if h.producer_id in coordinator
                              else h for h in young if (h.topic, h.partition) not in hung),
                             key=lambda h: (h.topic, h.partition, h.first_offset))
    return report


def dated(txns: Mapping[TP, OpenTxn], coordinator: Mapping[int, TxnInfo]) -> dict[TP, OpenTxn]:
    """Each open transaction aged by its coordinator's start time (DescribeTransactions) when the
    coordinator runs that transaction on that partition; otherwise as the log dates it."""
    out = {}
    for tp, txn in txns.items():
        info = coordinator.get(txn.producer_id)
        if info is not None:
            txn = replace(txn, transactional_id=info.transactional_id)
        if info is not None and info.active and info.start_time_ms is not None and tp in info.partitions:
            txn = replace(txn, started_ms=info.start_time_ms, age_source=COORDINATOR_CLOCK)
        out[tp] = txn
    return out


def coordinator_view(client: WireClient, producer_ids: Iterable[int]) -> dict[int, TxnInfo]:
    """What the transaction coordinators say about these producer ids: ListTransactions (filtered by
    producer id) to every broker, FindCoordinator and DescribeTransactions for the ids it names, as
    ``kafka-transactions.sh`` does. Empty where the broker can't say (no such APIs, an error): the caller
    then has only the log to go by. Raw requests on the wire client, so `lag` needs no other client."""
    pids = sorted(set(producer_ids))
    if not pids:
        return {}
    try:
        nodes = client.brokers()
        listed = client.request_all([(n, ListTransactionsRequest(state_filters=[], producer_id_filters=pids))
                                     for n in nodes])
        ids = sorted({t.transactional_id for r in listed if not r.error_code for t in r.transaction_states
                      if t.producer_id in pids})
        found = client.request_all([(nodes[0], FindCoordinatorRequest(key=i, key_type=1, max_version=3))
                                    for i in ids])
        by_node: dict[int, list[str]] = defaultdict(list)
        for i, f in zip(ids, found, strict=True):
            if not f.error_code:
                by_node[f.node_id].append(i)
        described = client.request_all([(n, DescribeTransactionsRequest(transactional_ids=tids))
                                        for n, tids in by_node.items()])
    except (EosctlError, Errors.KafkaError):
        return {}
    out: dict[int, TxnInfo] = {}
    for node, response in zip(by_node, described, strict=True):
        for t in response.transaction_states:
            if t.error_code or t.producer_id not in pids:
                continue
            out[t.producer_id] = TxnInfo(
                transactional_id=t.transactional_id, producer_id=t.producer_id,
                producer_epoch=t.producer_epoch, state=t.transaction_state,
                timeout_ms=t.transaction_timeout_ms,
                start_time_ms=t.transaction_start_time_ms if t.transaction_start_time_ms >= 0 else None,
                coordinator_id=node,
                partitions=tuple(sorted((x.topic, p) for x in t.topics for p in x.partitions)))
    return out


def _with_coordinator(h: Hanging, info: TxnInfo) -> Hanging:
    return replace(h, transactional_id=info.transactional_id, coordinator_state=info.state)


# --- abort -----------------------------------------------------------------------------------------------


def plan_abort(client: WireClient, admin: KafkaAdminClient, topic: str, partition: int,
               start_offset: int) -> AbortPlan:
    """Find the open transaction that starts at ``start_offset``; EosctlError if there is none.

    DescribeProducers names it where the broker fills it in; otherwise the log does: the first batch at
    the offset must be transactional data, and its transaction must still be open (it holds the LSO, or
    a scan up to the HW finds no marker for it).
    """
    tp = (topic, partition)
    client.leader(topic, partition)
    o = client.offsets([tp])[tp]
    where = f"{topic}-{partition}"
    if start_offset < o.last_stable or start_offset >= o.high_watermark:
        raise EosctlError(f"no open transaction starts at offset {start_offset} of {where}: open "
                          f"transactions lie in [LSO {o.last_stable}, HW {o.high_watermark}) "
                          "(see `eosctl txns hanging`)")
    producers, status = describe_producers(admin, [tp])
    if is_denial(status):
        raise BrokerError(f"cannot plan the abort: {status}")
    match = [p for p in producers.get(tp, []) if p.current_transaction_start_offset == start_offset]
    coordinator_epoch = 0
    if match:
        pid, epoch = match[0].producer_id, match[0].producer_epoch
        started = match[0].last_timestamp if match[0].last_timestamp >= 0 else None
        coordinator_epoch = max(0, match[0].coordinator_epoch)  # -1: no marker yet for this producer
    else:
        batch = first_batches(client, {tp: start_offset}).get(tp)
        if batch is None or batch.base_offset != start_offset:
            raise EosctlError(f"offset {start_offset} of {where} is not the first offset of a batch; "
                              "pass the transaction's first offset (see `eosctl txns hanging`)")
        if not batch.is_transactional:
            raise EosctlError(f"offset {start_offset} of {where} is not transactional data")
        pid, epoch, started = batch.producer_id, batch.producer_epoch, batch.first_timestamp
        if start_offset != o.last_stable:  # the one at the LSO is open by definition; others need the log
            log = scan_partition(client, topic, partition, start_offset, o.high_watermark)
            if not any(t.producer_id == pid and t.first_offset == start_offset and t.outcome == "OPEN"
                       for t in log.transactions):
                raise EosctlError(f"the transaction of producer {pid} at offset {start_offset} of {where} "
                                  "is not open (it has a marker)")
    if pid < 0:
        raise EosctlError(f"offset {start_offset} of {where} is not transactional data")
    coordinator = coordinator_view(client, {pid}).get(pid)
    return AbortPlan(topic, partition, start_offset, pid, epoch, o.last_stable, o.high_watermark, started,
                     coordinator.transactional_id if coordinator else None,
                     supports(admin, WRITE_TXN_MARKERS_API_KEY), coordinator_epoch,
                     coordinator.state if coordinator else None,
                     None if coordinator else coordinator_unseen(client),
                     bool(coordinator and coordinator.two_phase and coordinator.active))


def abort(admin: KafkaAdminClient, plan: AbortPlan) -> None:
    """Write the ABORT marker for the planned transaction (WriteTxnMarkers to the partition leader)."""
    if not plan.supported:
        raise EosctlError("this broker does not support aborting transactions (no WriteTxnMarkers API); "
                          "nothing was changed")
    from kafka.admin import AbortTransactionSpec  # lazy: see docs/imports.md

    spec = AbortTransactionSpec(TopicPartition(plan.topic, plan.partition), plan.producer_id,
                                plan.producer_epoch, plan.coordinator_epoch)
    _call(f"aborting the transaction of producer {plan.producer_id}", admin.abort_transaction, spec,
          request="WriteTxnMarkers")


def _now(now_ms: int | None) -> int:
    return int(time.time() * 1000) if now_ms is None else now_ms
