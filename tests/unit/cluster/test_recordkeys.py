"""eosctl.cluster.recordkeys decodes the same keys at the same offsets as kafka-python's record reader."""

from __future__ import annotations

import random
import struct

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from eosctl.cluster.batches import decode_batch
from eosctl.cluster.recordkeys import KeyCollector, decode_keys, hash_bytes, keys_of


def batch(base: int, keys: list[bytes | None], epoch: int = 0, codec: int = 0, gaps: int = 0,
          value: bytes = b"v") -> bytes:
    b = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 24)
    delta = 0
    for k in keys:
        b.append(delta, timestamp=1_700_000_000_000 + delta * 1_000_003, key=k, value=value * (delta % 7),
                 headers=[("h", b"x")] if delta % 3 == 0 else [])
        delta += 1 + gaps
    raw = bytearray(b.build())
    struct.pack_into(">q", raw, 0, base)  # base offset and leader epoch are outside the CRC
    struct.pack_into(">i", raw, 12, epoch)
    return bytes(raw)


def reference(data: bytes) -> list[tuple[int, bytes | None]]:
    out, pos = [], 0
    while pos < len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        out += [(r.offset, r.key) for r in DefaultRecordBatch(data[pos:pos + 12 + length])]
        pos += 12 + length
    return out


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])  # none, gzip, snappy, lz4, zstd: all dependencies
def test_keys_match_kafka_pythons_reader(codec: int) -> None:
    rng = random.Random(codec)
    chunks, base = [], 5
    for i in range(40):
        n = rng.choice([1, 2, 3, 17, 300])
        keys = [None if rng.random() < 0.05 else rng.randbytes(rng.choice([0, 1, 8, 200])) for _ in range(n)]
        chunks.append(batch(base, keys, epoch=i // 10, codec=codec, gaps=int(i % 5 == 0)))
        base += n * (1 + int(i % 5 == 0)) + 1
    data = b"".join(chunks)
    # kafka-python's builder leaves a batch uncompressed where compressing would not shrink it
    assert codec == 0 or ["none", "gzip", "snappy", "lz4", "zstd"][codec] in {decode_batch(c).compression
                                                                              for c in chunks}
    got = decode_keys(data)
    assert got is not None
    offsets, epochs, control, keys = got
    want = reference(data)
    assert offsets.tolist() == [o for o, _ in want]
    assert keys.tolist() == hash_bytes(k for _, k in want).tolist()
    assert len(set(keys.tolist())) == len({k for _, k in want})  # no two keys hash alike here
    assert not control.any()
    # each record carries its batch's leader epoch, as the batch header says
    by_batch = {decode_batch(c).base_offset: decode_batch(c).leader_epoch for c in chunks}
    assert epochs.tolist() == [by_batch[max(b for b in by_batch if b <= o)] for o in offsets.tolist()]


def test_collector_skips_what_it_read_and_stops_at_the_end() -> None:
    a, b = batch(0, [b"a", b"b", b"c"]), batch(3, [b"d", b"e"])
    c = KeyCollector(1, 4)
    c.add(a + b[:20])  # a partial trailing batch is left for the next answer
    c.add(a + b)  # a fetch from inside batch a returns it whole again
    got = c.result()
    assert got.offsets.tolist() == [1, 2, 3] and got.keys.tolist() == hash_bytes([b"b", b"c", b"d"]).tolist()
    assert len(keys_of([a, b])) == 5


def test_hash_tells_apart_lengths_trailing_zeros_and_null() -> None:
    keys = [None, b"", b"\x00", b"\x00\x00", b"a", b"a\x00", b"abcdefgh", b"abcdefgh\x00", b"abcdefghi",
            "é".encode()]
    h = hash_bytes(keys).tolist()
    assert len(set(h)) == len(keys)
    import pyarrow as pa

    from eosctl.cluster.recordkeys import hash_arrow
    # the sink's text keys hash as their UTF-8 bytes; a sliced array as its own values
    assert hash_arrow(pa.array(["x", "é", None])).tolist() == hash_bytes([b"x", "é".encode(), None]).tolist()
    assert hash_arrow(pa.array(["x", "yy", "zzz"]).slice(1)).tolist() == hash_bytes([b"yy", b"zzz"]).tolist()


def test_values_raw_and_md5_match_kafka_pythons_reader() -> None:
    """The value hashes (the content check's value column): each record's value bytes as
    hash_bytes hashes the sink's value column, and the md5 hex of them as it hashes a value hash column."""
    import hashlib

    rng = random.Random(7)
    chunks, base = [], 0
    for i in range(12):
        n = rng.choice([1, 3, 40])
        chunks.append(batch(base, [rng.randbytes(rng.choice([0, 5, 30])) for _ in range(n)], codec=i % 2,
                            value=rng.randbytes(rng.choice([1, 9, 130]))))
        base += n
    data = b"".join(chunks)
    values = []
    pos = 0
    while pos < len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        values += [r.value for r in DefaultRecordBatch(data[pos:pos + 12 + length])]
        pos += 12 + length
    assert any(v == b"" for v in values) and any(len(v) > 127 for v in values)  # empty, 2-byte varints
    raw = keys_of([data], "raw")
    assert raw.values.tolist() == hash_bytes(values).tolist()
    md5 = keys_of([data], "md5")
    assert md5.values.tolist() == hash_bytes(hashlib.md5(v).hexdigest().encode() for v in values).tolist()
    assert md5.keys.tolist() == raw.keys.tolist() == keys_of([data]).keys.tolist()
    assert keys_of([data]).values is None


def test_the_native_walk_answers_exactly_what_numpy_does(monkeypatch) -> None:
    """`make setup` builds the native walk (recordwalk.c); where it is missing numpy does the same: the
    same offsets, epochs, key and value hashes (of batches of every codec), and the same one line for a
    corrupt record."""
    from eosctl.cluster import recordkeys
    from eosctl.cluster.batches import HEADER_SIZE, BatchDecodeError

    assert recordkeys.native() is not None, "run `make setup`: it builds eosctl/cluster/_recordwalk.so"
    rng = random.Random(11)
    chunks, base = [], 0
    for i in range(30):
        n = rng.choice([1, 2, 70, 300])  # 300 records: offset deltas of 2-byte varints
        keys = [None if rng.random() < 0.1 else rng.randbytes(rng.choice([0, 3, 8, 9, 200]))
                for _ in range(n)]
        chunks.append(batch(base, keys, epoch=i, codec=i % 5, gaps=int(i % 4 == 0), value=b"val"))
        base += n * (1 + int(i % 4 == 0)) + 1
    data = b"".join(chunks)
    # every codec's records reach both walks (decompressed before them)
    assert {decode_batch(c).compression for c in chunks} == {"none", "gzip", "snappy", "lz4", "zstd"}
    plain = batch(0, [b"a", b"bb"])
    corrupt = {"its fields run past the record": plain[:HEADER_SIZE] + b"\x7f" + plain[HEADER_SIZE + 1:],
               "a varint longer than 5 bytes": plain[:HEADER_SIZE] + b"\xff" * 6 + plain[HEADER_SIZE + 6:]}
    answers = {}
    for way in ("native", "numpy"):
        if way == "numpy":
            monkeypatch.setattr(recordkeys, "_native", [None])
        got = [decode_keys(data, values) for values in (None, "raw", "md5")]
        errors = {}
        for name, bad in corrupt.items():
            with pytest.raises(BatchDecodeError) as info:
                decode_keys(bad)
            errors[name] = str(info.value)
        answers[way] = ([[a.tolist() for a in g] for g in got], errors)
    assert answers["native"] == answers["numpy"]
    assert answers["native"][1] == {name: f"corrupt record in a batch ({name})" for name in corrupt}
    assert len(answers["native"][0][1][0]) == sum(1 for _ in reference(data))
