"""Who a producer id is, and what its epoch bumps mean across the partitions it wrote.

``identify``: the transactional id and its ``transaction.timeout.ms`` from the coordinators
(ListTransactions filtered by producer id, then DescribeTransactions: KIP-664), for the ids they still
know (``transactional.id.expiration.ms`` forgets an idle one). The timeout tells the coordinator's abort
of a timed-out transaction (the ABORT came at least that long after the transaction's first record).

``settle``: transactions v2 (KIP-890) makes one partition's "ABORT at E+1, then the id's data at E+2"
ambiguous: a new instance took the id over (the coordinator fenced the old one and aborted its open
transaction: TransactionCoordinator.handleInitProducerId), or the id aborted by itself and then wrote
transactions at E+1 that skipped this partition. The id's other partitions settle it: data at E+1 on any
of them proves the second; a transactions-v1 producer (its own ABORT keeps its epoch) proves the first.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from eosctl.cluster.model import V1, PartitionLog
from eosctl.cluster.wire import WireClient


def identify(client: WireClient, logs: Iterable[PartitionLog]) -> None:
    """Fill in ``transactional_id`` and ``txn_timeout_ms`` of every producer in the logs the coordinators
    know (in place); producers they don't know keep None."""
    from eosctl.txn.transactions import coordinator_view  # lazy: see docs/imports.md

    logs = list(logs)
    # Transactional producers only (markers, an open transaction, epoch bumps): O(producers) per refresh.
    pids = {pid for log in logs for pid, p in log.producers.items() if p.epoch_bumps or p.bumps_total
            or p.open_txn_first_offset is not None or p.v1_markers or p.v2_markers}
    view = coordinator_view(client, pids)
    for log in logs:
        for pid, p in log.producers.items():
            info = view.get(pid)
            if info is not None:
                p.transactional_id, p.txn_timeout_ms = info.transactional_id, info.timeout_ms


def settle(logs: Iterable[PartitionLog]) -> None:
    """Settle each producer's ambiguous ABORT-then-new-epoch pairs from its other partitions (in place)."""
    logs = list(logs)
    pending = {pid for log in logs if ambiguous(log) for pid in log.producers}
    if not pending:
        return  # nothing to settle: no walk over the transactions (the live model refreshes often)
    data_epochs: dict[int, dict[int, list[tuple[str, int]]]] = defaultdict(lambda: defaultdict(list))
    v1: set[int] = set()
    for log in logs:
        for t in log.transactions:
            if t.data_records and t.producer_id in pending:
                data_epochs[t.producer_id][t.producer_epoch].append((log.topic, log.partition))
        v1 |= {pid for pid, p in log.producers.items() if pid in pending and p.protocol == V1}
    for log in logs:
        for pid, p in log.producers.items():
            for b in p.epoch_bumps:
                if not (b.on_marker and b.marker == "ABORT" and b.next_offset is not None
                        and not b.fence_abort):
                    continue
                elsewhere = [tp for tp in data_epochs[pid].get(b.new_epoch, [])
                             if tp != (log.topic, log.partition)]
                if elsewhere and b.new_epoch not in p.own_aborts_settled:
                    p.own_aborts_settled.append(b.new_epoch)
                elif not elsewhere and pid in v1 and b.new_epoch not in p.takeovers_settled:
                    p.takeovers_settled.append(b.new_epoch)


def ambiguous(log: PartitionLog) -> bool:
    """Does the log hold an ABORT-then-new-epoch pair only the id's other partitions can read?"""
    return any(b.on_marker and b.marker == "ABORT" and b.next_offset is not None and not b.fence_abort
               and p.protocol != V1 and b.new_epoch not in p.takeovers_settled
               and b.new_epoch not in p.own_aborts_settled
               for p in log.producers.values() for b in p.epoch_bumps)


def read_one(client: WireClient, log: PartitionLog, scan_last: int = 100_000) -> None:
    """For a command that scanned one partition (``log``, ``explain``): its producers' transactional ids
    and timeouts, and a transactions-v2 pair it can't read settled from the topic's other partitions
    (their last ``scan_last`` offsets), read only when there is one."""
    from eosctl.cluster.logscan import scan_partitions  # lazy: see docs/imports.md

    identify(client, [log])
    if not ambiguous(log):
        return
    others = [(log.topic, p) for p in client.partitions(log.topic) if p != log.partition]
    if others:
        offsets = client.offsets(others)
        starts = {tp: max(o.log_start, o.high_watermark - scan_last) for tp, o in offsets.items()}
        settle([log, *scan_partitions(client, others, start=starts, offsets=offsets).values()])
