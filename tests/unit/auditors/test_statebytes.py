"""auditors.statebytes reads a state sink's source records from fetch answers as kafka-python's record
reader does: each data record's offset, timestamp, key and value, markers left out, a batch fetched twice
counted once, a LogAppendTime batch stamped with the broker's time."""

from __future__ import annotations

import struct

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from auditors import statebytes
from eosctl.cluster.batches import BatchDecodeError

pytestmark = pytest.mark.skipif(not statebytes.available(), reason="run `make setup`: it builds the walker")
T0 = 1_700_000_000_000
LOG_APPEND_TIME = 0x08
CONTROL = 0x20
Row = tuple[int, int, bytes | None, bytes]


def batch(base: int, n: int, codec: int = 0, attributes: int = 0, max_ts: int | None = None) -> bytes:
    b = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 24)
    for i in range(n):
        b.append(i, timestamp=T0 + base + i * 7, key=None if i % 5 == 4 else f"k{base + i}".encode(),
                 value=f"v{base + i}".encode() * (i % 3), headers=[])
    raw = bytearray(b.build())
    struct.pack_into(">q", raw, 0, base)  # the base offset is outside the CRC
    if attributes or max_ts is not None:  # a header field the test sets by hand (the CRC is not checked)
        (attr,) = struct.unpack_from(">h", raw, 21)
        struct.pack_into(">h", raw, 21, attr | attributes)
        if max_ts is not None:
            struct.pack_into(">q", raw, 35, max_ts)
    return bytes(raw)


def reference(data: bytes) -> list[Row]:
    return [(r.offset, r.timestamp, r.key, r.value or b"") for r in DefaultRecordBatch(data)]


def read(answers: list[bytes], start: int = 0, end: int = 1 << 40) -> list[Row]:
    rb = statebytes.RecordBytes(start, end)
    for answer in answers:
        rb.add(answer)
    offsets, stamps, keys, values = rb.result()
    return [(int(o), int(t), k, v or b"") for o, t, k, v in zip(offsets, stamps, keys.to_pylist(),
                                                                     values.to_pylist(), strict=True)]


@pytest.mark.parametrize("codec", [0, 1, 4])  # none, gzip, zstd
def test_records_match_kafka_pythons_reader(codec: int) -> None:
    first, second = batch(0, 12, codec), batch(12, 9, codec)
    assert read([first + second]) == reference(first) + reference(second)


def test_markers_are_left_out_and_a_batch_fetched_twice_counts_once() -> None:
    data, marker, more = batch(0, 4), batch(4, 1, attributes=CONTROL), batch(5, 3)
    got = read([data + marker, marker + more, more])
    assert [o for o, *_ in got] == [0, 1, 2, 3, 5, 6, 7]


def test_a_log_append_time_batch_carries_the_brokers_time_and_the_window_is_kept() -> None:
    broker_time = T0 + 999_999
    got = read([batch(0, 5, attributes=LOG_APPEND_TIME, max_ts=broker_time)], start=1, end=4)
    assert [(o, t) for o, t, *_ in got] == [(1, broker_time), (2, broker_time), (3, broker_time)]


def test_a_legacy_batch_is_refused_in_one_line() -> None:
    legacy = bytearray(batch(0, 2))
    legacy[16] = 1  # magic v1
    refused = r"a state sink's audit reads v2 record batches only \(byte 0\)"
    with pytest.raises(BatchDecodeError, match=refused):
        read([bytes(legacy)])


def test_the_native_copy_of_byte_ranges_is_numpys_gather(monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    buf = np.frombuffer(bytes(range(256)) * 4 + bytes(16), np.uint8)
    at = np.array([0, 5, 300, 7, 1000, 0], np.int64)
    lengths = np.array([3, -1, 40, 0, 24, -1], np.int64)
    native = statebytes._binary(buf, at, lengths)

    class Old:  # a build from before copy_ranges: the numpy gather
        walk_records_ts = None

    monkeypatch.setattr(statebytes, "_lib", lambda: Old())
    gathered = statebytes._binary(buf, at, lengths)
    assert native.to_pylist() == gathered.to_pylist() == [bytes(range(3)), None, bytes(range(44, 84)), b"",
                                                          bytes(range(232, 256)), None]
