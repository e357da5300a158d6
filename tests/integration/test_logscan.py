"""scan_partition against a live broker: transactions written by confluent-kafka, classified remotely."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from eosctl.base.errors import BrokerError
from eosctl.cluster.logscan import scan_partition, scan_partitions
from eosctl.cluster.model import EpochBump, Kind, PartitionLog
from eosctl.cluster.wire import READ_COMMITTED, Offsets, WireClient
from tests.support.helpers import wait_until

pytestmark = pytest.mark.integration
D, M, A, OPEN = Kind.DATA, Kind.MARKER, Kind.ABORTED, Kind.OPEN
TIMEOUT = 10


def new_topic(bootstrap: str, partitions: int = 1) -> str:
    name = "scan-" + uuid.uuid4().hex[:10]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(TIMEOUT)
    return name


def txn_producer(bootstrap: str, txid: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txid, "linger.ms": 0})
    p.init_transactions(TIMEOUT)
    return p


def write_scenario(bootstrap: str, topic: str) -> list[Producer]:
    """commit 3, abort 2, 2 plain records, fence by a new instance, leave 2 records open.

    Returns the producers still holding the open transaction: the caller keeps them alive until the
    scan is done (noida never times transactions out, so leaving it open is harmless)."""
    first = txn_producer(bootstrap, "tx-" + topic)
    first.begin_transaction()
    for i in range(3):
        first.produce(topic, value=b"committed-%d" % i, partition=0)
    first.commit_transaction(TIMEOUT)
    first.begin_transaction()
    for i in range(2):
        first.produce(topic, value=b"aborted-%d" % i, partition=0)
    first.flush(TIMEOUT)  # the records reach the log before the abort marker
    first.abort_transaction(TIMEOUT)
    # EndTxn answers once the coordinator has logged PrepareAbort; it writes the markers after that
    # (TransactionCoordinator.endTransaction, then TransactionMarkerChannelManager). A non-transactional
    # producer is not held back by it, so without this wait its records can land before the ABORT marker.
    wait_until("the ABORT marker at offset 6", lambda: stable_at(bootstrap, topic, 7), TIMEOUT)
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(2):
        plain.produce(topic, value=b"plain-%d" % i, partition=0)
        plain.flush(TIMEOUT)  # one batch each
    second = txn_producer(bootstrap, "tx-" + topic)  # same transactional.id: fences `first`
    second.begin_transaction()
    for i in range(2):
        second.produce(topic, value=b"open-%d" % i, partition=0)
    second.flush(TIMEOUT)
    return [first, second]


def stable_at(bootstrap: str, topic: str, end: int) -> bool:
    with WireClient(bootstrap) as wire:
        offsets = wire.offsets([(topic, 0)])[(topic, 0)]
    return offsets.high_watermark == offsets.last_stable == end


def shape(log: PartitionLog) -> list[tuple[int, int, Kind]]:
    return [(r.first, r.last, r.kind) for r in log.ranges]


@pytest.fixture
def scenario(bootstrap: str):
    topic = new_topic(bootstrap)
    keep = write_scenario(bootstrap, topic)
    yield topic
    del keep


def test_scan_classifies_like_a_read_committed_consumer(bootstrap: str, scenario: str):
    with WireClient(bootstrap) as wire:
        log = scan_partition(wire, scenario, 0, keep_batches=True)
    assert shape(log) == [(0, 2, D), (3, 3, M), (4, 5, A), (6, 6, M), (7, 8, D), (9, 10, OPEN)]
    assert (log.log_start_offset, log.high_watermark, log.last_stable_offset) == (0, 11, 9)
    assert log.last_stable_offset == log.open_ranges()[0].first
    assert (log.scanned_from, log.scanned_to) == (0, 11)
    assert log.committed_records == 5 and log.warnings == []

    pid = log.ranges[0].producer_id
    assert pid >= 0 and log.ranges[4].producer_id == -1  # the plain producer has no producer id
    assert [(t.producer_id, t.producer_epoch, t.first_offset, t.last_offset, t.outcome, t.marker_offset,
             t.data_records) for t in log.transactions] == [
        (pid, 0, 0, 2, "COMMIT", 3, 3),
        (pid, 0, 4, 5, "ABORT", 6, 2),
        (pid, 1, 9, 10, "OPEN", None, 2),
    ]
    producer = log.producers[pid]
    # noida-db bumps the epoch by one and, with no transaction open, writes no marker for the fencing.
    assert producer.epochs == [0, 1] and producer.epoch_bumps == [EpochBump(9, 0, 1, False)]
    assert producer.open_txn_first_offset == 9 and producer.zombie_writes == []
    assert producer.sequence_anomalies == []
    assert [b.marker for b in log.batches if b.is_control] == ["COMMIT", "ABORT"]
    assert PartitionLog.from_dict(log.to_dict()) == log


def test_window_and_multi_partition_scan(bootstrap: str, scenario: str):
    other = new_topic(bootstrap, partitions=2)
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(5):
        plain.produce(other, value=b"x%d" % i, partition=1)
    plain.flush(TIMEOUT)
    with WireClient(bootstrap) as wire:
        window = scan_partition(wire, scenario, 0, start=1, end=5)
        # The aborted transaction's marker lies past the window, yet decides offset 4.
        assert shape(window) == [(1, 2, D), (3, 3, M), (4, 4, A)]
        assert window.transactions[-1].marker_offset == 6
        logs = scan_partitions(wire, [(scenario, 0), (other, 0), (other, 1)])
    assert logs[(other, 0)].ranges == [] and logs[(other, 0)].high_watermark == 0
    assert shape(logs[(other, 1)]) == [(0, 4, D)]
    assert shape(logs[(scenario, 0)])[-1] == (9, 10, OPEN)


def test_fencing_an_open_transaction(bootstrap: str):
    topic = new_topic(bootstrap)
    old = txn_producer(bootstrap, "tx-" + topic)
    old.begin_transaction()
    old.produce(topic, value=b"doomed", partition=0)
    old.flush(TIMEOUT)
    new = txn_producer(bootstrap, "tx-" + topic)  # aborts `old`'s transaction
    with WireClient(bootstrap) as wire:
        log = scan_partition(wire, topic, 0)
    assert shape(log) == [(0, 0, A), (1, 1, M)]
    assert log.transactions[0].outcome == "ABORT" and log.transactions[0].marker_offset == 1
    pid = log.transactions[0].producer_id
    # noida-db writes the ABORT at the new epoch; real Kafka writes it at epoch+1 and hands out epoch+2.
    assert log.producers[pid].epoch_bumps[0].offset == 1 and log.producers[pid].epoch_bumps[0].on_marker
    del old, new


def test_wire_offsets_and_raw_fetch(bootstrap: str, scenario: str):
    with WireClient(bootstrap) as wire:
        assert wire.partitions(scenario) == [0]
        assert wire.offsets([(scenario, 0)]) == {(scenario, 0): Offsets(0, 11, 9)}
        raw = wire.fetch_raw(scenario, 0, 0)
        assert raw.error is None
        assert (raw.high_watermark, raw.last_stable_offset, raw.log_start_offset) == (11, 9, 0)
        committed = wire.fetch_raw(scenario, 0, 0, isolation=READ_COMMITTED)
        pid = scan_partition(wire, scenario, 0).transactions[0].producer_id
        assert committed.aborted == ((pid, 4),)
        assert wire.fetch_raw(scenario, 0, 99).error == "OffsetOutOfRangeError"


def test_clear_errors(bootstrap: str):
    with WireClient(bootstrap) as wire:
        with pytest.raises(BrokerError, match="^topic 'no-such-topic' does not exist"):
            wire.metadata(["no-such-topic"])
    with pytest.raises(BrokerError, match=r"^cannot reach Kafka at 127\.0\.0\.1:1: connection refused; "):
        WireClient("127.0.0.1:1", timeout_ms=1000)
