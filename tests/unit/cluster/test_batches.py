"""Record-batch header decoding on bytes recorded from a real broker (tests/unit/data/*.bin).

The .bin files are the ``records`` field of read_uncommitted Fetch responses from noida-db 0.2.3.
Re-record them with:  python tests/unit/cluster/test_batches.py --record HOST:PORT
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from eosctl.cluster import batches as batches_mod
from eosctl.cluster.batches import (
    HEADER_SIZE,
    BatchDecodeError,
    decode,
    decode_batch,
    iter_batches,
    last_sequence,
)

DATA = Path(__file__).parents[1] / "data"


def load(name: str) -> bytes:
    return (DATA / name).read_bytes()


def build(offset_deltas: list[int], *, base_offset: int = 0, compression: int = 0, pid: int = -1,
          epoch: int = -1, seq: int = -1, transactional: bool = False,
          last_delta: int | None = None) -> bytes:
    """A v2 batch as the broker would store it; offset deltas with gaps mimic compaction."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=transactional,
                                  producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                  batch_size=1 << 20)
    for d in offset_deltas:
        b.append(d, timestamp=1_700_000_000_000 + d, key=b"k%d" % d, value=b"v" * 200, headers=[])
    raw = bytearray(b.build())
    struct.pack_into(">q", raw, 0, base_offset)
    if last_delta is not None:  # compaction keeps lastOffsetDelta even when records are removed
        struct.pack_into(">i", raw, 23, last_delta)
    return bytes(raw)


def no_record_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_a, **_k):
        raise AssertionError("records were decoded for a contiguous batch")

    monkeypatch.setattr(batches_mod, "DefaultRecordBatch", refuse)


def test_transactional_log_markers_and_producers():
    chunk = decode(load("txn_mixed.bin"))
    assert not chunk.truncated and chunk.consumed == len(load("txn_mixed.bin"))
    got = [(b.base_offset, b.last_offset, b.record_count, b.producer_id, b.producer_epoch, b.base_sequence,
            b.last_sequence, b.is_transactional, b.is_control, b.marker) for b in chunk.batches]
    pid = chunk.batches[0].producer_id
    assert pid >= 0
    assert got == [
        (0, 2, 3, pid, 0, 0, 2, True, False, None),  # committed txn
        (3, 3, 1, pid, 0, -1, -1, True, True, "COMMIT"),
        (4, 5, 2, pid, 0, 3, 4, True, False, None),  # aborted txn
        (6, 6, 1, pid, 0, -1, -1, True, True, "ABORT"),
        (7, 7, 1, -1, -1, -1, -1, False, False, None),  # plain producer
        (8, 8, 1, -1, -1, -1, -1, False, False, None),
        (9, 10, 2, pid, 1, 0, 1, True, False, None),  # open txn after the epoch bump
    ]
    assert all(b.offsets is None and b.compression == "none" for b in chunk.batches)
    assert sum(b.size_bytes for b in chunk.batches) == len(load("txn_mixed.bin"))


def test_fencing_marker_at_new_epoch():
    bs = decode(load("fenced_open.bin")).batches
    assert [(b.base_offset, b.producer_epoch, b.is_control, b.marker) for b in bs] == [
        (0, 0, False, None), (1, 0, False, None), (2, 1, True, "ABORT"), (3, 1, False, None),
    ]


def test_compressed_batches_read_from_header_only(monkeypatch):
    no_record_decoding(monkeypatch)  # lz4 and zstd are not even decodable by kafka-python here
    bs = decode(load("compressed.bin")).batches
    assert [(b.base_offset, b.last_offset, b.record_count, b.compression) for b in bs] == [
        (0, 9, 10, "gzip"), (10, 19, 10, "lz4"), (20, 29, 10, "zstd"),
    ]
    # One idempotent producer per codec: three producer ids, each starting at sequence 0.
    assert len({b.producer_id for b in bs}) == 3 and all(b.producer_id >= 0 for b in bs)
    assert all(not b.is_transactional and b.offsets is None for b in bs)
    assert [(b.base_sequence, b.last_sequence) for b in bs] == [(0, 9)] * 3
    assert all(b.max_timestamp >= b.first_timestamp > 0 for b in bs)


def test_missing_offsets_are_listed():
    raw = build([0, 2, 3, 7], base_offset=100)
    b = decode_batch(raw)
    assert (b.base_offset, b.last_offset, b.record_count) == (100, 107, 4)
    assert b.offsets == (100, 102, 103, 107)
    assert list(b.present_offsets()) == [100, 102, 103, 107]


def test_missing_offsets_in_gzip_batch():
    raw = build([1, 4], base_offset=10, compression=1, pid=7, epoch=2, seq=40)
    b = decode_batch(raw)
    assert b.compression == "gzip"
    assert b.offsets == (11, 14) and b.last_offset == 14 and b.record_count == 2
    assert (b.base_sequence, b.last_sequence) == (40, 44)


def test_emptied_batch_keeps_its_span_with_no_offsets():
    raw = build([], base_offset=50, pid=3, epoch=0, seq=5, last_delta=4)
    b = decode_batch(raw)
    assert (b.base_offset, b.last_offset, b.record_count, b.offsets) == (50, 54, 0, ())


def test_contiguous_builder_batch_is_not_decoded(monkeypatch):
    raw = build(list(range(5)), base_offset=20, compression=1)
    no_record_decoding(monkeypatch)
    b = decode_batch(raw)
    assert (b.base_offset, b.last_offset, b.offsets, b.compression) == (20, 24, None, "gzip")


def test_markers_are_read_without_decoding_records(monkeypatch):
    """A marker batch as Kafka writes it (uncompressed, one record) names its type from the record's key
    read in place: the same markers as the full decode, at a fraction of the cost of a log of markers."""
    no_record_decoding(monkeypatch)
    assert [b.marker for b in decode(load("txn_mixed.bin")).batches if b.is_control] == ["COMMIT", "ABORT"]
    assert [b.marker for b in decode(load("fenced_open.bin")).batches if b.is_control] == ["ABORT"]


def test_empty_fetch():
    assert load("empty.bin") == b""
    chunk = decode(load("empty.bin"))
    assert chunk.batches == [] and chunk.consumed == 0 and not chunk.truncated


@pytest.mark.parametrize("cut", [1, 11, 12, 30, HEADER_SIZE, 70])
def test_truncated_trailing_batch(cut):
    data = load("txn_mixed.bin")
    last = decode(data).batches[-1]
    cut_data = data[: len(data) - last.size_bytes + min(cut, last.size_bytes - 1)]
    chunk = decode(cut_data)
    assert [b.base_offset for b in chunk.batches] == [0, 3, 4, 6, 7, 8]
    assert chunk.truncated and chunk.consumed == len(data) - last.size_bytes


def test_only_a_partial_batch():
    data = load("txn_mixed.bin")[:40]
    assert list(iter_batches(data)) == []
    assert decode(data).truncated


def test_concatenated_sources():
    data = load("compressed.bin") + build([0, 1], base_offset=30)
    assert [b.base_offset for b in decode(data).batches] == [0, 10, 20, 30]


def test_corrupt_compressed_records_name_the_batch():
    raw = bytearray(build([0, 3], base_offset=5, compression=1))
    raw[HEADER_SIZE:] = b"\x00" * (len(raw) - HEADER_SIZE)
    with pytest.raises(BatchDecodeError, match="offset 5"):
        decode_batch(bytes(raw))


def test_sequence_wraps_like_kafka():
    assert last_sequence(-1, 5) == -1
    assert last_sequence(10, 5) == 15
    assert last_sequence(2**31 - 2, 3) == 1


# --- recording ---------------------------------------------------------------------------------------

def _record(bootstrap: str) -> None:  # pragma: no cover - run by hand against a broker
    import uuid

    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from eosctl.cluster.wire import WireClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    base = "rec-" + uuid.uuid4().hex[:8]

    def topic(name: str) -> str:
        t = f"{base}-{name}"
        admin.create_topics([NewTopic(t, 1, 1)])[t].result(30)
        return t

    def txn_producer(tid: str) -> Producer:
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 0})
        p.init_transactions(10)
        return p

    mixed = topic("mixed")
    p = txn_producer(mixed)
    p.begin_transaction()
    for i in range(3):
        p.produce(mixed, value=b"c%d" % i)
    p.commit_transaction(10)
    p.begin_transaction()
    for i in range(2):
        p.produce(mixed, value=b"a%d" % i)
    p.flush(10)
    p.abort_transaction(10)
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(2):
        plain.produce(mixed, value=b"n%d" % i)
        plain.flush(10)
    p2 = txn_producer(mixed)
    p2.begin_transaction()
    for i in range(2):
        p2.produce(mixed, value=b"o%d" % i)
    p2.flush(10)

    fenced = topic("fenced")
    f1 = txn_producer(fenced)
    f1.begin_transaction()
    for i in range(2):
        f1.produce(fenced, value=b"f%d" % i)
        f1.flush(10)
    f2 = txn_producer(fenced)  # fences f1 while its transaction is open
    f2.begin_transaction()
    f2.produce(fenced, value=b"x")
    f2.flush(10)

    comp = topic("compressed")
    for codec in ("gzip", "lz4", "zstd"):
        cp = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 100,
                       "compression.type": codec})
        for i in range(10):
            cp.produce(comp, value=b"%s-%d " % (codec.encode(), i) * 20)
        cp.flush(10)

    empty = topic("empty")
    with WireClient(bootstrap) as w:
        named = {"txn_mixed": mixed, "fenced_open": fenced, "compressed": comp, "empty": empty}
        for name, t in named.items():
            (DATA / f"{name}.bin").write_bytes(w.fetch_raw(t, 0, 0).records)
            print(name, len((DATA / f"{name}.bin").read_bytes()), "bytes")


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "--record":
    _record(sys.argv[2])
