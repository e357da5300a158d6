"""The scripted broker itself: what eosctl's clients read from it is what was declared."""

from __future__ import annotations

from eosctl.cluster.batches import iter_batches
from eosctl.cluster.wire import READ_COMMITTED, WireClient
from tests.kafkasim import KafkaSim


def test_fetch_returns_the_declared_batches_and_kafka_offsets(kafka_sim: KafkaSim) -> None:
    p = kafka_sim.partition("orders", 0)
    p.data(3)
    p.txn(7, 0, 2)
    p.abort(7, 0)
    p.txn(8, 1, 1)  # open
    with WireClient(kafka_sim.bootstrap) as client:
        offsets = client.offsets([("orders", 0)])[("orders", 0)]
        r = client.fetch_raw("orders", 0, 0, isolation=READ_COMMITTED)
    assert (offsets.log_start, offsets.high_watermark, offsets.last_stable) == (0, 7, 6)
    batches = list(iter_batches(r.records))
    assert [(b.base_offset, b.last_offset, b.producer_id, b.is_transactional, b.marker) for b in batches] == [
        (0, 2, -1, False, None), (3, 4, 7, True, None), (5, 5, 7, True, "ABORT"), (6, 6, 8, True, None)]
    assert r.aborted == ((7, 3),)


def test_compacted_batch_keeps_its_last_offset_and_delete_horizon_flag(kafka_sim: KafkaSim) -> None:
    p = kafka_sim.partition("c", 0)
    p.compacted([0, 2], last_offset=4, delete_horizon=True, timestamp=123)
    p.skip(3)
    p.data(1)
    with WireClient(kafka_sim.bootstrap) as client:
        r = client.fetch_raw("c", 0, 0)
    batches = list(iter_batches(r.records))
    assert [(b.base_offset, b.last_offset, b.offsets, b.first_timestamp) for b in batches] == [
        (0, 4, (0, 2), 123), (8, 8, None, 1_700_000_000_000)]
    assert r.records[21 + 1] & 0x40  # attributes low byte: KIP-534 delete-horizon flag


def test_retention_answers_out_of_range_with_unknown_offsets(kafka_sim: KafkaSim) -> None:
    p = kafka_sim.partition("r", 0)
    for _ in range(4):
        p.data(5)
    p.delete_before(10)
    with WireClient(kafka_sim.bootstrap) as client:
        r = client.fetch_raw("r", 0, 3)
    assert (r.error, r.high_watermark, r.log_start_offset, r.last_stable_offset, r.records) == (
        "OffsetOutOfRangeError", -1, -1, -1, b"")
