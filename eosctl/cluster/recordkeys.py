"""The records' keys at their offsets, decoded from a Fetch response's bytes column by column.

The log scan reads batch headers only (eosctl.cluster.batches); the content check (eosctl.rules.content) needs
each record's key, i.e. the records themselves. Decoding them one by one in Python (kafka-python's
DefaultRecordBatch) costs microseconds a record: seconds at 10M. Here a record's fields are read in lock
step across every batch of a response: step k reads the k-th record of all batches at once with numpy
(varints included), so the Python-level work is one loop over batches (the headers, as the scan does
anyway) and one per record *position*, not per record.

Record layout (Kafka's DefaultRecord): length varint, attributes int8, timestampDelta varlong, offsetDelta
varint, keyLength varint (-1: null), key, valueLength varint, value, headers. Only length, offsetDelta and
the key are read (and the value, where the sink names a value column); ``length`` jumps to the next record.

Values (the content check's value column, eosctl.rules.content): ``values="raw"`` hashes each record's value
bytes like its key (compared with a sink column holding the value itself); ``values="md5"`` compares with a
sink column holding the lowercase hex MD5 of the value bytes (what SQL's md5() and Python's hashlib compute):
each record's value is MD5-hashed here, one hashlib call a record.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eosctl.base.arrowbuffers import null_mask
from eosctl.cluster.batches import (
    CONTROL_MASK,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    BatchDecodeError,
)
from eosctl.cluster.compression import decompress

_PAD = 16  # zero bytes after the records: a varint read near the end never reads past the buffer


@dataclass(frozen=True)
class RecordKeys:
    """One partition's records in offset order: offsets (int64), the partition leader epoch of each
    record's batch (int32), whether it is a control record (a marker), and its key's 64-bit hash
    (key_hashes: compared with the sink's keys hashed the same way, never copied out of the answer)."""

    offsets: np.ndarray
    epochs: np.ndarray
    control: np.ndarray
    keys: np.ndarray  # uint64
    # Each record's value hashed like the sink's value column is (VALUE_MODES), when the scan was asked to.
    values: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.offsets)


class AnswerBuffer:
    """One partition's fetch answers (their bytes, in log order) for its records in [start, end), as a
    scan reads them, held until FLUSH_BYTES of them are there and then decoded together by ``flush``: the
    lock step is as wide as the batches decoded together, and one answer holds only a few of a partition's
    batches. KeyCollector decodes keys; auditors.statebytes.RecordBytes the records' bytes."""

    FLUSH_BYTES = 32 << 20

    def __init__(self, start: int, end: int) -> None:
        self.next, self.end = start, end
        self.pending: list[bytes | bytearray | memoryview] = []
        self.pending_bytes = 0

    def add(self, data: bytes | bytearray | memoryview) -> None:
        if self.next >= self.end or not len(data):
            return
        self.pending.append(data)
        self.pending_bytes += len(data)
        if self.pending_bytes >= self.FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        raise NotImplementedError

    def take(self) -> list[bytes | bytearray | memoryview]:
        """The answers held, no longer held."""
        answers, self.pending, self.pending_bytes = self.pending, [], 0
        return answers

    def first_readings(self, offsets: np.ndarray) -> np.ndarray:
        """Which of the decoded offsets to keep: in [next, end), and each offset's first reading only (a
        fetch from inside a batch returns the whole batch again)."""
        before = np.maximum.accumulate(np.concatenate([[self.next - 1], offsets[:-1]]))
        return (offsets > before) & (offsets < self.end)


class KeyCollector(AnswerBuffer):
    """Collects the keys of one partition's records in [start, end) as a scan reads them."""

    def __init__(self, start: int, end: int, values: str | None = None) -> None:
        super().__init__(start, end)
        self.values = values
        self.parts: list[tuple[np.ndarray, ...]] = []

    def flush(self) -> None:
        part = decode_keys(self.take(), self.values)
        if part is None:
            return
        keep = self.first_readings(part[0])
        if not keep.all():
            idx = np.flatnonzero(keep)
            if not len(idx):
                return
            part = tuple(a[idx] for a in part)
        self.parts.append(part)
        self.next = int(part[0][-1]) + 1

    def result(self) -> RecordKeys:
        if self.pending:
            self.flush()
        if not self.parts:
            return RecordKeys(np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, bool),
                              np.zeros(0, np.uint64), values=np.zeros(0, np.uint64) if self.values else None)
        if len(self.parts) > 1:
            width = len(self.parts[0])
            self.parts = [tuple(np.concatenate([p[i] for p in self.parts]) for i in range(width))]
        return RecordKeys(*self.parts[0])


VALUE_MODES = ("raw", "md5")


def decode_keys(answers: Sequence[bytes | bytearray | memoryview] | bytes,
                values: str | None = None) -> tuple[np.ndarray, ...] | None:
    """(offsets, leader epochs, control flags, keys) of every record of the complete v2 batches in the
    fetch ``answers`` (each answer's trailing partial batch is left out), in their order; None if there
    are none. ``values`` ("raw" or "md5", VALUE_MODES): the values' hashes too, a fifth array."""
    laid = lay_out([answers] if isinstance(answers, bytes | bytearray | memoryview) else answers,
                   "the content check")
    if laid is None:
        return None
    return _records(laid.buf, laid.starts, laid.bases, laid.epochs, laid.counts, laid.controls, values)


_LOG_APPEND_TIME = 0x08  # the batch attributes' timestampType bit


@dataclass(frozen=True)
class Batches:
    """The complete v2 batches of some fetch answers, laid out for the record walk (native or numpy): their
    records back to back in one buffer and each batch's header fields, in log order."""

    data: bytes  # the batches' records (decompressed where compressed), then _PAD zero bytes
    buf: np.ndarray  # data as uint8
    starts: np.ndarray  # int64: where each batch's records start in buf
    bases: np.ndarray  # int64 base offsets
    epochs: np.ndarray  # int32 partition leader epochs
    counts: np.ndarray  # int64 records per batch
    controls: np.ndarray  # bool: a control batch (markers)
    first_ts: np.ndarray  # int64 base timestamps
    max_ts: np.ndarray  # int64
    log_append_time: np.ndarray  # bool: every record carries the broker's time (max_ts)


def lay_out(answers: Iterable[bytes | bytearray | memoryview], reader: str) -> Batches | None:
    """The complete batches of the fetch answers (each answer's trailing partial batch left out); None if
    they hold no record. A legacy (v0/v1) batch raises BatchDecodeError saying ``reader`` reads v2 only."""
    segments: list[Any] = []
    header: list[tuple[int, int, int, bool, int, int, bool]] = []
    for data in answers:
        view = memoryview(data)
        pos, end = 0, len(view)
        while end - pos >= LOG_OVERHEAD:
            (length,) = struct.unpack_from(">i", view, pos + 8)
            total = LOG_OVERHEAD + length
            if length < 0 or pos + total > end or end - pos <= MAGIC_OFFSET:
                break
            if view[pos + MAGIC_OFFSET] < 2 or total < HEADER_SIZE:
                raise BatchDecodeError(f"{reader} reads v2 record batches only (byte {pos})")
            (base, _l, epoch, _m, _crc, attributes, _delta, first_ts, max_ts, _pid, _pe, _seq,
             count) = HEADER.unpack_from(view, pos)
            raw = view[pos + HEADER_SIZE:pos + total]
            codec = attributes & 0x07
            segments.append(raw if codec == 0 else decompress(codec, bytes(raw), base))
            header.append((base, epoch, count, bool(attributes & CONTROL_MASK), first_ts, max_ts,
                           bool(attributes & _LOG_APPEND_TIME)))
            pos += total
    if not segments or not sum(h[2] for h in header):
        return None
    joined = b"".join([*segments, bytes(_PAD)])
    starts = np.zeros(len(segments), np.int64)
    np.cumsum([len(s) for s in segments[:-1]], out=starts[1:])
    bases, epochs, counts, controls, first_ts, max_ts, appended = zip(*header, strict=True)
    return Batches(joined, np.frombuffer(joined, dtype=np.uint8), starts, np.array(bases, np.int64),
                   np.array(epochs, np.int32), np.array(counts, np.int64), np.array(controls, bool),
                   np.array(first_ts, np.int64), np.array(max_ts, np.int64), np.array(appended, bool))


def _records(buf: np.ndarray, starts: np.ndarray, bases: np.ndarray, epochs: np.ndarray, counts: np.ndarray,
             controls: np.ndarray, values: str | None = None) -> tuple[np.ndarray, ...]:
    """(offsets, epochs, controls, key hashes[, value hashes]) of every record, in log order: walked by the
    native piece where `make setup` built it, else in numpy (the same arrays, _walk_numpy)."""
    delta_of, key_at, key_len, value_at, value_len = _walk(buf, starts, counts, bool(values))
    batch = np.repeat(np.arange(len(counts)), counts)
    out = (bases[batch] + delta_of, epochs[batch], controls[batch], key_hashes(buf, key_at, key_len))
    if not values:
        return out
    if values == "md5":
        return (*out, _md5_hashes(buf, value_at, value_len))
    return (*out, key_hashes(buf, value_at, value_len))


def _walk(buf: np.ndarray, starts: np.ndarray, counts: np.ndarray,
          values: bool) -> tuple[np.ndarray, ...]:
    """Each record's (offsetDelta, key position, key length, value position, value length), in log order;
    the value arrays are empty unless ``values``."""
    lib = native()
    if lib is None:
        return _walk_numpy(buf, starts, counts, values)
    total = int(counts.sum())
    first = np.zeros(len(counts), np.int64)
    np.cumsum(counts[:-1], out=first[1:])
    delta_of, key_at, key_len = (np.empty(total, np.int64) for _ in range(3))
    value_at, value_len = (np.empty(total if values else 0, np.int64) for _ in range(2))
    buf = np.ascontiguousarray(buf)
    starts = np.ascontiguousarray(starts, np.int64)
    counts = np.ascontiguousarray(counts, np.int64)
    rc = lib.walk_records(_ptr(buf), len(buf) - _PAD, _ptr(starts), _ptr(counts), _ptr(first), len(counts),
                          1 if values else 0, _ptr(delta_of), _ptr(key_at), _ptr(key_len), _ptr(value_at),
                          _ptr(value_len))
    if rc:
        raise BatchDecodeError(_CORRUPT.get(rc, "corrupt record in a batch"))
    return delta_of, key_at, key_len, value_at, value_len


@dataclass(frozen=True)
class RecordSpans:
    """The records of complete v2 batches where they lie in one buffer: what the decoded content check
    (auditors.fieldcheck) reads keys and values from without a Python object a record. Log order."""

    data: bytes  # the batches' records (decompressed where compressed), then _PAD zero bytes
    buf: np.ndarray  # data as uint8
    offsets: np.ndarray  # int64
    control: np.ndarray  # bool: a transaction marker
    key_at: np.ndarray  # int64 positions in buf; lengths -1 where null
    key_len: np.ndarray
    value_at: np.ndarray
    value_len: np.ndarray
    headers: np.ndarray  # bool: the record carries headers (a schema id may be one of them)

    def __len__(self) -> int:
        return len(self.offsets)


def record_spans(answers: Sequence[bytes | bytearray | memoryview]) -> RecordSpans | None:
    """The RecordSpans of the complete batches in these fetch answers; None if there are none. A legacy
    (v0/v1) batch raises BatchDecodeError, as decode_keys does."""
    laid = lay_out(answers, "the content check")
    if laid is None:
        return None
    delta_of, key_at, key_len, value_at, value_len = _walk(laid.buf, laid.starts, laid.counts, True)
    batch = np.repeat(np.arange(len(laid.counts)), laid.counts)
    # After the value comes the header count (a varint, one 0 byte when there are none).
    headers = laid.buf[value_at + np.maximum(value_len, 0)] != 0
    return RecordSpans(laid.data, laid.buf, laid.bases[batch] + delta_of, laid.controls[batch], key_at,
                       key_len, value_at, value_len, headers)


_CORRUPT = {-1: "corrupt record in a batch (its fields run past the record)",
            -2: "corrupt record in a batch (its value runs past the record)",
            -3: "corrupt record in a batch (a varint longer than 5 bytes)",
            -4: "corrupt record in a batch (a varlong longer than 10 bytes)"}
NATIVE = Path(__file__).with_name("_recordwalk.so")  # built by `make setup` from recordwalk.c
_native: list[Any] = []


def native() -> Any:
    """The native piece (ctypes), or None where it was not built (no C compiler): numpy does the same."""
    if not _native:
        lib = None
        if NATIVE.exists() and not os.environ.get("EOSCTL_NO_NATIVE"):
            try:
                lib = ctypes.CDLL(str(NATIVE))
            except OSError:
                lib = None
        if lib is not None:
            p, i64 = ctypes.c_void_p, ctypes.c_int64
            lib.walk_records.argtypes = [p, i64, p, p, p, i64, ctypes.c_int, p, p, p, p, p]
            lib.walk_records.restype = ctypes.c_int
            lib.hash_ranges.argtypes = [p, p, p, i64, p]
            lib.hash_ranges.restype = None
        _native.append(lib)
    return _native[0]


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


def _walk_numpy(buf: np.ndarray, starts: np.ndarray, counts: np.ndarray,
                values: bool) -> tuple[np.ndarray, ...]:
    """_walk in numpy, lock step: batches sorted by record count, so the batches still holding a k-th
    record are always a prefix; record k of a batch lands at the batch's first index + k (log order, no
    sort)."""
    order = np.argsort(-counts, kind="stable")
    pos = starts[order].copy()
    limit = len(buf) - _PAD
    n_of = counts[order]
    first = np.zeros(len(counts), np.int64)  # each batch's first record's index in log order
    np.cumsum(counts[:-1], out=first[1:])
    first = first[order]
    total = int(counts.sum())
    delta_of = np.empty(total, np.int64)
    key_at = np.empty(total, np.int64)
    key_len = np.empty(total, np.int64)
    value_at = np.empty(total if values else 0, np.int64)
    value_len = np.empty(total if values else 0, np.int64)
    neg = -n_of  # ascending
    for k in range(int(n_of[0])):
        n = int(np.searchsorted(neg, -k, side="left"))  # batches with more than k records
        p = pos[:n]
        length, p2 = _varint(buf, p)
        nxt = p2 + length
        q = _skip_varint(buf, p2 + 1)  # past attributes, then timestampDelta
        delta, q = _varint(buf, q)
        klen, q = _varint(buf, q)
        if nxt.max() > limit or (q + np.maximum(klen, 0) > nxt).any():
            raise BatchDecodeError("corrupt record in a batch (its fields run past the record)")
        at = first[:n] + k
        delta_of[at], key_at[at], key_len[at] = delta, q, klen
        if values:
            vlen, v = _varint(buf, q + np.maximum(klen, 0))
            if (v + np.maximum(vlen, 0) > nxt).any():
                raise BatchDecodeError("corrupt record in a batch (its value runs past the record)")
            value_at[at], value_len[at] = v, vlen
        pos[:n] = nxt
    return delta_of, key_at, key_len, value_at, value_len


def _md5_hashes(buf: np.ndarray, at: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """key_hashes of the lowercase hex MD5 of each byte range (a null value stays null): what a sink's
    value hash column holds, hashed as hash_arrow hashes that column."""
    data = buf.tobytes()
    md5 = hashlib.md5
    hexes = [None if n < 0 else md5(data[a:a + n]).hexdigest().encode()
             for a, n in zip(at.tolist(), lengths.tolist(), strict=True)]
    return hash_bytes(hexes)


def _varint(buf: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zigzag varints (at most 5 bytes: Kafka's int32 varints) at positions ``p``: (values, after)."""
    b = buf[p]
    if b.max() < 0x80:  # all one byte (small lengths and deltas): most steps
        v = b.astype(np.int64)
        return (v >> 1) ^ -(v & 1), p + 1
    value = np.zeros(len(p), np.int64)
    done = np.zeros(len(p), bool)
    after = p.copy()
    for i in range(5):
        b = buf[p + i].astype(np.int64)
        live = ~done
        value |= np.where(live, (b & 0x7F) << (7 * i), 0)
        ends = live & (b < 0x80)
        after[ends] = p[ends] + i + 1
        done |= ends
        if done.all():
            break
    if not done.all():
        raise BatchDecodeError("corrupt record in a batch (a varint longer than 5 bytes)")
    return (value >> 1) ^ -(value & 1), after


def _skip_varint(buf: np.ndarray, p: np.ndarray) -> np.ndarray:
    """The positions after the varlongs (at most 10 bytes) at ``p``."""
    b = buf[p]
    if b.max() < 0x80:
        return p + 1
    after = p.copy()
    done = np.zeros(len(p), bool)
    for i in range(10):
        ends = ~done & (buf[p + i] < 0x80)
        after[ends] = p[ends] + i + 1
        done |= ends
        if done.all():
            return after
    raise BatchDecodeError("corrupt record in a batch (a varlong longer than 10 bytes)")


_NULL = np.uint64(0x9E3779B97F4A7C15)  # the hash of a null key (no record key, or a NULL sink key)
_M1, _M2 = np.uint64(0xFF51AFD7ED558CCD), np.uint64(0xC4CEB9FE1A85EC53)


def key_hashes(buf: np.ndarray, at: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each byte range (at, length) of ``buf`` (length -1: null): the key compared
    without copying it out, 8 bytes a step (``buf`` needs 8 readable bytes past its last range).

    Words are read little-endian and masked to the key's length; the length seeds the hash, so keys that
    differ only in trailing zero bytes still differ. MurmurHash3's finaliser mixes each word in. The
    native piece where built (recordwalk.c: hash_ranges, bit for bit the same), else numpy."""
    lib = native()
    if lib is None or not len(at):
        return key_hashes_numpy(buf, at, lengths)
    buf = np.ascontiguousarray(buf, np.uint8)
    at = np.ascontiguousarray(at, np.int64)
    lengths = np.ascontiguousarray(lengths, np.int64)
    out = np.empty(len(at), np.uint64)
    lib.hash_ranges(_ptr(buf), _ptr(at), _ptr(lengths), len(at), _ptr(out))
    return out


def key_hashes_numpy(buf: np.ndarray, at: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """key_hashes in numpy: 8 bytes of every range a step."""
    n = len(at)
    h = lengths.astype(np.uint64) * _M1 + np.uint64(1)
    if not n:
        return h
    words = np.lib.stride_tricks.as_strided(buf, shape=(max(len(buf) - 7, 0), 8), strides=(1, 1))
    longest = int(lengths.max())
    for j in range(0, max(longest, 0), 8):
        live: Any = np.flatnonzero(lengths > j) if j else np.flatnonzero(lengths > 0)
        if len(live) == n:
            live = slice(None)
        w = words[at[live] + j].view(np.uint64).ravel()
        rem = (lengths[live] - j).astype(np.uint64)
        short = rem < 8
        if short.any():
            w = np.where(short, w & ((np.uint64(1) << (rem.clip(0, 7) * np.uint64(8))) - np.uint64(1)), w)
        h[live] = _mix(h[live] ^ w)
    h = _mix(h)
    h[lengths < 0] = _NULL
    return h


def _mix(h: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        h = h ^ (h >> np.uint64(33))
        h = h * _M1
        h = h ^ (h >> np.uint64(33))
        h = h * _M2
        return h ^ (h >> np.uint64(33))


def hash_arrow(values: Any) -> np.ndarray:
    """key_hashes of an Arrow string or binary array (the sink's keys, as text: their UTF-8 bytes)."""
    import pyarrow as pa  # lazy: see docs/imports.md

    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    # Text and bytes as their buffers are (a cast imports pyarrow.compute, a cost docs/imports.md measures).
    width: type[np.int32] | type[np.int64]
    if arr.type in (pa.string(), pa.binary()):
        width = np.int32
    elif arr.type in (pa.large_string(), pa.large_binary()):
        width = np.int64
    else:
        arr, width = arr.cast(pa.large_binary()), np.int64
    n = len(arr)
    if not n:
        return np.zeros(0, np.uint64)
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], width)[arr.offset:arr.offset + n + 1].astype(np.int64)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    data = np.concatenate([data[:int(offsets[-1])], np.zeros(_PAD, np.uint8)])
    lengths = np.diff(offsets)
    if arr.null_count:
        lengths = np.where(null_mask(arr), -1, lengths)
    return key_hashes(data, offsets[:-1].copy(), lengths)


def hash_bytes(values: Iterable[bytes | None]) -> np.ndarray:
    """key_hashes of Python byte strings (tests)."""
    import pyarrow as pa  # lazy: see docs/imports.md

    return hash_arrow(pa.array(list(values), pa.binary()))


def keys_of(chunks: Iterable[bytes], values: str | None = None) -> RecordKeys:
    """Every record of these fetch answers (tests, benchmarks): collected as a scan does."""
    c = KeyCollector(0, 1 << 62, values)
    for data in chunks:
        c.add(data)
    return c.result()
