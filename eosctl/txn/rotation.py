"""Producer-id rotation under transactions v2 (KAFKA-18660): one transactional id, two producer ids.

Under transactions v2 (KIP-890) every EndTxn bumps the epoch. When the transaction ends at an exhausted
epoch (TransactionMetadata.isEpochExhausted: epoch >= Short.MaxValue - 1 = 32766), the coordinator
allocates a new producer id before writing the markers (TransactionCoordinator.endTransaction:
``producerIdManager.generateProducerId()`` as ``nextProducerId``), writes the markers with the old id at
the bumped epoch (prepareAbortOrCommit: epoch + 1, so 32767), and on completion moves the transactional id
to the new id at epoch 0 (prepareComplete: ``(nextProducerId, 0)``; the old id is kept as
``previousProducerId``). The EndTxn answer carries the new id and epoch, and the same producer goes on
writing with them: one producer session continuing, not a new instance.

In a log that is: producer P's transaction at epoch 32766 closed by a marker at 32767, then a producer id
Q never seen before, at epoch 0.
"""

from __future__ import annotations

from collections.abc import Iterable

from eosctl.cluster.model import PartitionLog

EXHAUSTED_EPOCH = 32766  # TransactionMetadata.isEpochExhausted: Short.MaxValue - 1
LAST_EPOCH = 32767  # Short.MaxValue: the epoch of the rotating transaction's markers


def exhausted(epoch: int) -> bool:
    return epoch >= EXHAUSTED_EPOCH


def rotations(log: PartitionLog) -> dict[int, int]:
    """{new producer id: the producer id it continues} for the rotations this partition's log shows: a
    marker at epoch 32767 closing its producer's exhausted-epoch data, followed by the first transaction
    of a producer id not seen before it, at epoch 0."""
    txns = sorted(log.transactions, key=lambda t: t.first_offset)
    out: dict[int, int] = {}
    seen_before: dict[int, int] = {}  # producer id -> first offset of its first transaction here
    for t in txns:
        seen_before.setdefault(t.producer_id, t.first_offset)
    for t in txns:
        if t.marker_offset is None or t.marker_epoch != LAST_EPOCH or not exhausted(t.producer_epoch) \
                or t.marker_epoch != t.producer_epoch + 1:
            continue
        # The first producer id new to the partition after the marker (others' transactions running on
        # across it are theirs): the rotated id where it starts at epoch 0.
        after = next((n for n in txns if n.first_offset > t.marker_offset
                      and seen_before[n.producer_id] > t.marker_offset and n.producer_id not in out), None)
        if after is not None and after.producer_epoch == 0:
            out[after.producer_id] = t.producer_id
    return out


def all_rotations(logs: Iterable[PartitionLog]) -> dict[int, int]:
    """The rotations of every log, merged (a transactional id rotates once for all its partitions)."""
    out: dict[int, int] = {}
    for log in logs:
        out.update(rotations(log))
    return out


def continued(old: tuple[int, int], new: tuple[int, int]) -> bool:
    """Do two writers' (producer id, epoch) read as one session across a rotation: the old id at its
    exhausted epoch, the new one at epoch 0? (What the key rule's writers carry, without the log.)"""
    return old[0] != new[0] and exhausted(old[1]) and new[1] == 0
