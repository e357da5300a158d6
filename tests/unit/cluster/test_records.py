"""eosctl.cluster.records: every data record of a window, whatever its batch's codec, markers left out."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from eosctl.cluster.batches import BatchDecodeError
from eosctl.cluster.records import Record, read_records

NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def batch(base: int, n: int, codec: int, control: bool = False, value_size: int = 60) -> bytes:
    b = DefaultRecordBatchBuilder(2, codec, control, 7 if control else -1, 0, -1, 1 << 24)
    for i in range(n):
        key = struct.pack(">hh", 0, 1) if control else b"k%d" % (base + i)
        value = None if i == 1 else b"v" * value_size
        b.append(i, timestamp=1_700_000_000_000 + base + i, key=key, value=value, headers=[])
    raw = bytearray(b.build())
    struct.pack_into(">q", raw, 0, base)
    if control:
        (attributes,) = struct.unpack_from(">h", raw, 21)
        struct.pack_into(">h", raw, 21, attributes | 0x20)  # kafka-python builds data batches only
    return bytes(raw)


@dataclass
class Answer:
    records: bytes


class Log:
    """A partition's log answering fetches as a broker does: from the batch holding the offset, whole
    batches up to max_bytes (the first one whole only if it fits: else a cut-off part)."""

    def __init__(self, batches: list[bytes]) -> None:
        self.batches = batches
        self.asked: list[tuple[int, int]] = []

    def fetch_raw(self, topic: str, partition: int, offset: int, max_bytes: int) -> Answer:
        self.asked.append((offset, max_bytes))
        out = b""
        for raw in self.batches:
            (base,) = struct.unpack_from(">q", raw, 0)
            (last_delta,) = struct.unpack_from(">i", raw, 23)
            if base + last_delta < offset:
                continue
            if len(out) + len(raw) > max_bytes:
                return Answer(out or raw[:max_bytes])
            out += raw
        return Answer(out)


def test_every_codecs_records_in_the_window_in_offset_order() -> None:
    log = Log([batch(0, 3, 0), batch(3, 4, 1), batch(7, 1, 0, control=True), batch(8, 3, 2), batch(11, 2, 3),
               batch(13, 3, 4)])
    got = read_records(log, "t", 0, 1, 15)
    assert [(r.offset, r.compression) for r in got] == [
        (1, "none"), (2, "none"), (3, "gzip"), (4, "gzip"), (5, "gzip"), (6, "gzip"), (8, "snappy"),
        (9, "snappy"), (10, "snappy"), (11, "lz4"), (12, "lz4"), (13, "zstd"), (14, "zstd")]  # 7: a marker
    assert got[0] == Record(1, b"k1", None, 1_700_000_000_001, "none")
    assert got[2] == Record(3, b"k3", b"v" * 60, 1_700_000_000_003, "gzip")


def test_a_batch_larger_than_the_answer_is_asked_for_again_with_more_bytes() -> None:
    log = Log([batch(0, 2, 0, value_size=3 << 20)])  # a 3 MB batch: the answer cut at 1 MB, then 2 MB
    got = read_records(log, "t", 0, 0, 2)
    assert [r.offset for r in got] == [0, 1] and len(got[0].value) == 3 << 20
    assert [m for _, m in log.asked] == [1 << 20, 2 << 20, 4 << 20]


def test_a_missing_codec_is_named(monkeypatch) -> None:
    from kafka import codec

    log = Log([batch(0, 2, 3)])
    monkeypatch.setattr(codec, "has_lz4", lambda: False)
    with pytest.raises(BatchDecodeError, match="^the batch at offset 0 is lz4-compressed and this Python "
                                               "has no lz4 codec"):
        read_records(log, "t", 0, 0, 2)
