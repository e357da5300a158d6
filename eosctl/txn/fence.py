"""Ending a stuck transaction through its coordinator: `eosctl txns fence TRANSACTIONAL_ID`.

What Kafka's own remedy does (Admin.fenceProducers, KIP-618; FenceProducersHandler): InitProducerId for
the transactional id with no producer id or epoch. Its coordinator bumps the epoch; a transaction it still
runs is aborted on every partition it lists (PrepareEpochFence, then PrepareAbort and the ABORT markers,
TransactionCoordinator.handleInitProducerId) while it answers CONCURRENT_TRANSACTIONS; the producer still
running at the old epoch is fenced (its next write or commit fails with PRODUCER_FENCED /
INVALID_PRODUCER_EPOCH). Admin.fenceProducers retries CONCURRENT_TRANSACTIONS until an InitProducerId
succeeds, which bumps the epoch once more and leaves the id Empty; eosctl stops once the coordinator says
CompleteAbort at a higher epoch, so `txns describe` still tells what happened (the zombie is fenced the
same). A transaction its coordinator no longer lists (a hanging one, KIP-664) is not its coordinator's to
abort: only the marker-level `txns abort` ends it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import kafka.errors as Errors
from kafka.admin import KafkaAdminClient
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from kafka.protocol.producer.transaction import InitProducerIdRequest

from eosctl.base.errors import BrokerError, EosctlError
from eosctl.cluster.clientcauses import denied
from eosctl.cluster.logscan import scan_partition
from eosctl.cluster.model import TP, Kind
from eosctl.cluster.wire import WireClient
from eosctl.txn.transactions import TxnInfo, describe_producers, describe_transaction

# The timeout InitProducerId asks for when the id has none (FenceProducersOptions' default request timeout
# is what Kafka's admin sends; the coordinator only uses it for the epoch bump's log append).
DEFAULT_TIMEOUT_MS = 60_000
INIT_PRODUCER_ID_VERSION = 4  # the last before KIP-939's 2PC fields (v6); answered by Kafka 2.5+
CONCURRENT_TRANSACTIONS = Errors.ConcurrentTransactionsError.errno  # 51
RETRY = {CONCURRENT_TRANSACTIONS, Errors.CoordinatorLoadInProgressError.errno,
         Errors.NotCoordinatorError.errno, Errors.CoordinatorNotAvailableError.errno}
ACL = ("Write on transactional-id {txid} (kafka-acls --add --allow-principal User:NAME --operation Write "
       "--transactional-id {txid}), and Describe on it to plan")


@dataclass(frozen=True, slots=True)
class FencedPartition:
    topic: str
    partition: int
    lso: int
    hw: int
    first_offset: int | None  # where the producer's open transaction starts there (DescribeProducers)
    open_records: int | None  # its records without a marker in [first_offset, HW) (a scan of them)

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "first_offset": self.first_offset,
                "lso": self.lso, "hw": self.hw, "open_records": self.open_records}


@dataclass
class FencePlan:
    info: TxnInfo
    partitions: list[FencedPartition] = field(default_factory=list)

    @property
    def prefer(self) -> tuple[str, str]:
        """("fence" | "abort", why): which command ends what is stuck."""
        if self.info.active:
            return "fence", (f"its coordinator still runs this transaction ({self.info.state}): fence aborts "
                             "it on every partition and fences the producer; `txns abort` writes one "
                             "partition's marker and leaves the coordinator and the producer going (its next "
                             "commit succeeds without the aborted records)")
        return "abort", (f"its coordinator runs no transaction for it ({self.info.state}): fence only bumps "
                         "its epoch, fencing a zombie producer; an open transaction its coordinator lost "
                         "(`eosctl txns hanging`, rule kip664) is ended only by `eosctl txns abort`")

    def to_dict(self) -> dict[str, Any]:
        prefer, why = self.prefer
        i = self.info
        return {"transactional_id": i.transactional_id, "producer_id": i.producer_id,
                "producer_epoch": i.producer_epoch, "coordinator_id": i.coordinator_id,
                "coordinator_state": i.state, "two_phase": i.two_phase,
                "partitions": [p.to_dict() for p in self.partitions], "prefer": prefer, "why": why,
                "acl": ACL.format(txid=i.transactional_id)}


@dataclass(frozen=True, slots=True)
class Fenced:
    producer_id: int
    producer_epoch: int | None
    state: str

    def to_dict(self) -> dict[str, Any]:
        return {"producer_id": self.producer_id, "producer_epoch": self.producer_epoch, "state": self.state}


def plan_fence(client: WireClient, admin: KafkaAdminClient, transactional_id: str) -> FencePlan:
    """What fencing the id would end: its coordinator's view, and each partition it lists with the
    producer's open records there."""
    info = describe_transaction(admin, transactional_id)
    plan = FencePlan(info)
    if not info.active or not info.partitions:
        return plan
    tps = list(info.partitions)
    offsets = client.offsets(tps)
    producers, _ = describe_producers(admin, tps)
    for tp in tps:
        o = offsets[tp]
        first = next((p.current_transaction_start_offset for p in producers.get(tp, [])
                      if p.producer_id == info.producer_id and p.current_transaction_start_offset >= 0), None)
        plan.partitions.append(FencedPartition(tp[0], tp[1], o.last_stable, o.high_watermark, first,
                                               _open_records(client, tp, first, o.high_watermark,
                                                             info.producer_id)))
    return plan


def _open_records(client: WireClient, tp: TP, first: int | None, hw: int, producer_id: int) -> int | None:
    if first is None or first >= hw:
        return None if first is None else 0
    try:
        log = scan_partition(client, tp[0], tp[1], first, hw)
    except EosctlError:
        return None
    return sum(r.count for r in log.ranges if r.kind is Kind.OPEN and r.producer_id == producer_id)


def fence(client: WireClient, admin: KafkaAdminClient, plan: FencePlan, timeout_s: float = 60.0) -> Fenced:
    """InitProducerId for the id through its coordinator until it has fenced the producer: an answer with
    a new epoch, or (a transaction it was running) its state CompleteAbort at a higher epoch. BrokerError
    naming the grant when refused, or what it still said at the deadline."""
    info = plan.info
    txid = info.transactional_id
    until = time.monotonic() + timeout_s
    request_timeout = info.timeout_ms if info.timeout_ms and not info.two_phase else DEFAULT_TIMEOUT_MS
    answer = _init_producer_id(client, txid, request_timeout)
    while True:
        if answer is not None and not answer.error_code:
            return Fenced(answer.producer_id, answer.producer_epoch, describe_transaction(admin, txid).state)
        if answer is not None and answer.error_code not in RETRY:
            code = answer.error_code
            grant = denied(code, "InitProducerId", txid)
            raise BrokerError(f"cannot fence {txid}: "
                              + (f"{grant}; it needs {ACL.format(txid=txid)}" if grant
                                 else Errors.for_code(code).__name__))
        why = "no answer" if answer is None else Errors.for_code(answer.error_code).__name__
        now = None
        if answer is not None and answer.error_code == CONCURRENT_TRANSACTIONS:
            # Its coordinator is ending the transaction (the fence's abort, or a commit under way): watch it
            # rather than ask again, which would bump the epoch once more after the abort and leave Empty.
            now = describe_transaction(admin, txid)
            if now.producer_id != info.producer_id or (
                    now.state == "CompleteAbort" and (now.producer_epoch or 0) > (info.producer_epoch or 0)):
                return Fenced(now.producer_id, now.producer_epoch, now.state)
        if time.monotonic() >= until:
            said = f"{why}, coordinator state {now.state}" if now is not None else why
            raise BrokerError(f"cannot fence {txid}: its coordinator did not finish in {timeout_s:g}s "
                              f"({said}); run the command again")
        time.sleep(0.2)
        if now is None or now.state in ("Empty", "CompleteCommit", "CompleteAbort"):
            answer = _init_producer_id(client, txid, request_timeout)  # ended without the bump: fence it


def _init_producer_id(client: WireClient, txid: str, timeout_ms: int) -> Any | None:
    """One InitProducerId for the id at its coordinator (FindCoordinator first); None when either answer
    did not come (the caller retries)."""
    try:
        (found,) = client.request_all([(client.any_node(), FindCoordinatorRequest(
            key=txid, key_type=1, max_version=3))])
        if found.error_code:
            return found  # NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE are retried, the rest named
        (answer,) = client.request_all([(found.node_id, InitProducerIdRequest(
            transactional_id=txid, transaction_timeout_ms=timeout_ms, producer_id=-1, producer_epoch=-1,
            max_version=INIT_PRODUCER_ID_VERSION))])
        return answer
    except BrokerError:
        return None
