"""Which of a producer id's epoch bumps are fencing: the rules behind the producer tables, the log's epoch
timeline, causes and the exporter's fencing metric, judged from what a scan recorded in
``eosctl.cluster.model.ProducerState`` (plain data; this module decides what it means).

Transactions v1 raise a producer id's epoch only through InitProducerId (a new instance) or the
coordinator's abort; transactions v2 (KIP-890) on every COMMIT and ABORT, so there a bump proves fencing
only in the cases ``fencing_events`` names.
"""

from __future__ import annotations

from eosctl.cluster.model import MIXED, UNKNOWN, V1, V2, EpochBump, ProducerState
from eosctl.txn.rotation import LAST_EPOCH


def fencing_events(p: ProducerState) -> int:
    """How many times the producer id's epoch was fenced, counted only on unambiguous evidence.

    Under transactions v1 the epoch rises only through InitProducerId (a new instance, which fences
    the old epoch; a producer re-initialising itself after an aborted transaction, KIP-360, fences it
    the same way) or the coordinator's abort of an open transaction (Kafka writes that ABORT at epoch+1
    and hands the new instance epoch+2: one event, told as one bump; noida-db writes both at epoch+1);
    an abort the coordinator made on the transaction's timeout is no take-over and not counted. Under
    transactions v2 every COMMIT and ABORT bumps the epoch, and a partition sees only the transactions
    that touched it, so a bump proves nothing there, except an ABORT two epochs above the data it
    closes (``EpochBump.fence_abort``) or a take-over the id's other partitions settled
    (``takeovers_settled``). In every protocol a write at an older epoch (a zombie write) proves its
    epoch was fenced while its writer still ran.
    """
    timed_out = sum(1 for b in p.epoch_bumps if _timed_out(p, b))
    if p.protocol == V1:
        by_bumps = p.v1_takeovers - timed_out
    else:
        by_bumps = p.fence_aborts + sum(
            1 for b in p.epoch_bumps if b.on_marker and b.marker == "ABORT" and not b.fence_abort
            and b.new_epoch in p.takeovers_settled and not _timed_out(p, b))
    return max(by_bumps, len({z.epoch for z in p.zombie_writes}))


def timeouts(p: ProducerState) -> int:
    """ABORT markers the coordinator wrote on the transaction's timeout (among the listed bumps)."""
    return sum(1 for b in p.epoch_bumps if _timed_out(p, b))


def _timed_out(p: ProducerState, b: EpochBump) -> bool:
    """The coordinator's ABORT on a timeout: it came ``transaction.timeout.ms`` or more after the
    transaction's first record (TransactionCoordinator.abortTimedOutTransactions fences the epoch and
    aborts)."""
    age = _age(b)
    return (b.marker == "ABORT" and b.on_marker and age is not None and p.txn_timeout_ms is not None
            and age >= p.txn_timeout_ms)


def bump_verdict(p: ProducerState, b: EpochBump) -> tuple[bool, str]:
    """(is it fencing, why) for one of this producer's epoch bumps, by the rule of ``fencing_events``."""
    if not b.on_marker and not b.transactional:
        return False, "idempotent producer bumped its own epoch (KIP-360)"
    if b.on_marker and b.marker != "ABORT":
        return False, f"transactions v2: a {b.marker or 'control'} marker moved the epoch on"
    if b.on_marker:
        return _abort_verdict(p, b)
    protocol = p.protocol
    if protocol == V1:
        if b.after_abort:
            return True, "FENCED: the new instance, after the coordinator's abort"
        return True, "FENCED: a new instance took over"
    if protocol == V2:
        return False, ("transactions v2: transactions of this id that skipped this partition (or a "
                       "restart of the id) moved the epoch on")
    if protocol == MIXED:
        return False, "markers of both transaction protocols: a bump proves no fencing"
    return False, ("bump on data: fencing under transactions v1, ordinary under v2; "
                   "no marker in the scan shows which")


def _abort_verdict(p: ProducerState, b: EpochBump) -> tuple[bool, str]:
    span = (f" at offsets {b.txn_first}..{b.txn_last}" if b.txn_first is not None
            else " (its data lies before the scan)")
    later = (f"; the new instance wrote at epoch {b.next_epoch} from offset {b.next_offset}"
             if b.next_offset is not None else "")
    takeover = ("a new instance took the id over and the coordinator aborted the old one's "
                f"transaction{span}")
    if _timed_out(p, b):
        age = _age(b) or 0
        after = (f"; a new instance took the id at epoch {b.next_epoch} from offset {b.next_offset}"
                 if b.next_offset is not None else "")
        return False, (f"TIMEOUT: the coordinator aborted the transaction{span} {age / 1000:.1f} s after "
                       f"its first record (transaction.timeout.ms {p.txn_timeout_ms}){after}")
    if b.fence_abort:
        return True, f"FENCED: {takeover}, two epochs up{later}"
    protocol = p.protocol
    if b.continued:
        if protocol == V1:  # noida-db: the fencing ABORT and the new instance at one epoch
            return True, f"FENCED: {takeover}"
        return False, "transactions v2: the id's own ABORT moved the epoch on (it wrote on at that epoch)"
    if protocol != V1 and b.next_offset is None and b.new_epoch == LAST_EPOCH \
            and b.new_epoch - b.old_epoch == 1 and b.new_epoch not in p.takeovers_settled:
        # EndTxn(ABORT) at the exhausted epoch: the id goes on as a new producer id (eosctl.txn.rotation).
        return False, ("transactions v2: the id's epoch ran out (32767): the coordinator moved it to a new "
                       "producer id at epoch 0 (KAFKA-18660)")
    if protocol == V1 or b.new_epoch in p.takeovers_settled:
        if b.next_offset is None:
            return True, (f"FENCED: the coordinator aborted the old epoch's transaction{span} (a new "
                          "instance took the id over, or the transaction timed out)")
        return True, f"FENCED: {takeover}{later}"
    if b.new_epoch in p.own_aborts_settled:
        return False, (f"transactions v2: the id aborted its transaction{span} itself; its other "
                       f"partitions hold its transactions at epoch {b.new_epoch}")
    if b.next_offset is not None and protocol in (V2, UNKNOWN):
        return False, (f"TAKEOVER?: {takeover}{later}; or (transactions v2) the id aborted it itself, "
                       f"then started again or wrote transactions that skipped this partition (epoch "
                       f"{b.new_epoch} holds no data here): the id's other partitions settle it")
    if protocol == V2:
        return False, "transactions v2: an ABORT marker moved the epoch on"
    if protocol == MIXED:
        return False, "markers of both transaction protocols: a bump proves no fencing"
    return False, ("bump on an ABORT marker: fencing under transactions v1, ordinary under v2; "
                   "no marker in the scan shows which")


def abort_cause(p: ProducerState, marker_offset: int | None) -> str | None:
    """Who ended the transaction whose ABORT is at ``marker_offset``, where its bump tells: "takeover"
    (a new instance; the coordinator aborted the old one's transaction), "timeout" (the coordinator, on
    the transaction's timeout), "takeover?" (transactions v2: a take-over or the id's own abort)."""
    for b in p.epoch_bumps:
        if b.on_marker and b.offset == marker_offset and b.marker == "ABORT":
            fencing, why = bump_verdict(p, b)
            return ("timeout" if why.startswith("TIMEOUT") else "takeover" if fencing
                    else "takeover?" if why.startswith("TAKEOVER?") else None)
    return None


def routine(p: ProducerState, b: EpochBump) -> bool:
    """A transactions-v2 bump of the id's own making (a commit, its own abort, transactions that
    skipped the partition): counted in ``routine_summary``, not told one by one."""
    fencing, why = bump_verdict(p, b)
    return not fencing and why.startswith("transactions v2:")


def routine_summary(p: ProducerState) -> str | None:
    """One line for all routine bumps: the epoch timeline keeps what is not routine."""
    routines = [b for b in p.epoch_bumps if routine(p, b)]
    listed_own = sum(1 for b in routines if b.continued)
    aborts = p.own_aborts - sum(1 for b in p.epoch_bumps if b.continued) + listed_own
    skipped = sum(1 for b in routines if not b.on_marker)
    others = sum(1 for b in routines if b.on_marker and not b.continued)
    commits = p.commit_bumps
    if not (commits or aborts or skipped or others):
        return None
    epochs = [e for b in routines for e in (b.old_epoch, b.new_epoch)] + list(p.routine_epochs or ())
    parts = [f"{n} {what}{'s' * (n != 1)}" for n, what in ((commits, "commit"), (aborts, "abort"),
                                                            (others, "ABORT marker")) if n]
    text = f"transactions v2: {' and '.join(parts)}" if parts else "transactions v2:"
    if skipped:
        text += (f"{',' if parts else ''} {skipped} bump{'s' * (skipped != 1)} on data (transactions of "
                 "this id that skipped this partition, or restarts)")
    return f"{text} moved the epoch {min(epochs)} -> {max(epochs)} (routine, never fencing)"


def fencing_bumps(p: ProducerState) -> list[EpochBump]:
    """The bumps ``bump_verdict`` calls fencing (the TUI marks them on the producer's timeline)."""
    return [b for b in p.epoch_bumps if bump_verdict(p, b)[0]]


def _age(b: EpochBump) -> int | None:
    """Milliseconds from an aborted transaction's first record to its ABORT marker."""
    return None if b.txn_first_ts is None or b.marker_ts is None else b.marker_ts - b.txn_first_ts
