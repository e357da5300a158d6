"""The open transaction at a partition's LSO: what a read_committed consumer waits for.

`eosctl lag` shows it as the reason a group is blocked, `txns hanging` applies the LSO rule to it and
`txns abort` plans its marker from it. It is read from the first data batch at the LSO, one Fetch per
leader for all blocked partitions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from eosctl.base.errors import BrokerError
from eosctl.cluster.batches import iter_batches
from eosctl.cluster.logscan import MAX_FETCH_BYTES
from eosctl.cluster.model import TP, Batch
from eosctl.cluster.wire import WireClient

# Enough for the first batch at the LSO of almost any topic; a partition whose first batch does not fit
# is fetched again alone, with a growing size if need be (see first_batches).
OPEN_TXN_FETCH_BYTES = 64 << 10


# Whose clock an open transaction's start time comes from, most trusted first: its coordinator's
# (DescribeTransactions' transaction start time), the partition leader's (the first batch's timestamp on
# a LogAppendTime topic), or only the producer's (a CreateTime record timestamp, which a client may set to
# anything: stream processors keep their input's timestamps, so a replayed backlog looks hours old).
COORDINATOR_CLOCK = "coordinator"
BROKER_CLOCK = "log-append-time"
PRODUCER_CLOCK = "producer-timestamp"
TRUSTED_CLOCKS = (COORDINATOR_CLOCK, BROKER_CLOCK)


@dataclass(frozen=True, slots=True)
class OpenTxn:
    """The open transaction at the LSO: what a read_committed consumer waits for."""

    producer_id: int
    producer_epoch: int
    first_offset: int
    started_ms: int | None
    age_source: str = PRODUCER_CLOCK  # whose clock ``started_ms`` is (see TRUSTED_CLOCKS)
    transactional_id: str | None = None  # the coordinator's name for the id, where it knows it (KIP-664)

    @property
    def age_trusted(self) -> bool:
        return self.age_source in TRUSTED_CLOCKS

    def age_s(self, now_ms: int) -> float | None:
        return None if self.started_ms is None else max(0.0, (now_ms - self.started_ms) / 1000)

    def describe(self, now_ms: int) -> str:
        age = self.age_s(now_ms)
        since = "" if age is None else f" for {age:.0f}s"
        if age is not None and not self.age_trusted:
            since += " by its producer's record timestamps"
        who = f" ({self.transactional_id})" if self.transactional_id else ""
        return f"open transaction pid {self.producer_id}{who} at offset {self.first_offset}{since}"


def first_batches(client: WireClient, positions: Mapping[TP, int],
                  max_bytes: int = OPEN_TXN_FETCH_BYTES) -> dict[TP, Batch]:
    """The first data batch holding or after each offset: one Fetch per leader for all partitions.

    A partition whose answer holds no complete batch is fetched again alone. Kafka returns an oversized
    first batch whole only for the first partition of a response (KIP-74) and leaves the others empty or
    cut short; alone, a partition is the first, and brokers that cut every batch at max_bytes get twice
    the size each time (up to eosctl.cluster.logscan.MAX_FETCH_BYTES, as the log scan does).
    Only the first batch is decoded; brokers that ignore max_bytes (noida-db) may still send more.
    """
    if not positions:
        return {}
    out: dict[TP, Batch] = {}
    again: list[TP] = []
    results = client.fetch_many(positions, max_bytes)
    for tp, r in results.items():
        if r.error_code:
            continue
        batch, complete = _first_data_batch(r.records, positions[tp])
        if batch is not None:
            out[tp] = batch
            continue
        cut_short = bool(r.records) and not complete
        # Left empty once the response's max_bytes went to other partitions.
        starved = not r.records and len(results) > 1 and positions[tp] < r.high_watermark
        if cut_short or starved:
            again.append(tp)
    # Alone in its response already: the same size would only bring the same bytes.
    size = max_bytes if len(results) > 1 else 2 * max_bytes
    for tp in again:
        batch = _first_batch_alone(client, tp, positions[tp], size)
        if batch is not None:
            out[tp] = batch
    return out


def _first_data_batch(records: bytes, position: int) -> tuple[Batch | None, bool]:
    """(the first non-control batch ending at or after ``position`` or None, whether any batch decoded)."""
    complete = False
    for b in iter_batches(records):
        complete = True
        if b.last_offset >= position and not b.is_control:
            return b, True
    return None, complete


def _first_batch_alone(client: WireClient, tp: TP, position: int, max_bytes: int) -> Batch | None:
    size = max_bytes
    while True:
        r = client.fetch_raw(tp[0], tp[1], position, size)
        if r.error_code or not r.records:
            return None
        batch, complete = _first_data_batch(r.records, position)
        if batch is not None or complete:
            return batch
        if size >= MAX_FETCH_BYTES:
            raise BrokerError(f"the batch of {tp[0]}-{tp[1]} at offset {position} is larger than "
                              f"{MAX_FETCH_BYTES} bytes")
        size *= 2


def open_transactions(client: WireClient, tps: Iterable[TP], lsos: Mapping[TP, int]) -> dict[TP, OpenTxn]:
    """The open transaction at the LSO of each blocked partition, from its first batch there."""
    batches = first_batches(client, {tp: lsos[tp] for tp in tps})
    return {tp: OpenTxn(b.producer_id, b.producer_epoch, max(b.base_offset, lsos[tp]), b.first_timestamp,
                        BROKER_CLOCK if b.log_append_time else PRODUCER_CLOCK)
            for tp, b in batches.items()}
