"""Decode record-batch headers straight from a Fetch response's bytes.

Only the 61-byte v2 header is read for ordinary batches: it already holds the offsets, producer id,
epoch, sequence and flags, so a contiguous batch is never decompressed. Records are decoded only where
the header cannot answer: control batches (COMMIT or ABORT lives in the record key) and batches with
offsets removed by compaction (record count < offset span).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from kafka.record.default_records import DefaultRecordBatch
from kafka.record.legacy_records import LegacyRecordBatch

from eosctl.cluster import compression
from eosctl.cluster.compression import COMPRESSION, BatchDecodeError
from eosctl.cluster.model import Batch

HEADER = struct.Struct(">qiibIhiqqqhii")  # see DefaultRecordBatch in Kafka's clients
HEADER_SIZE = HEADER.size  # 61
# Bytes before batchLength's payload starts; a batch occupies LOG_OVERHEAD + batchLength bytes.
LOG_OVERHEAD = 12
MAGIC_OFFSET = 16  # same position in v0/v1 message sets and v2 batches

TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
# KIP-534: the cleaner sets this bit and stores the delete horizon in the base timestamp field; record
# timestamps stay base + delta (DefaultRecordBatch.deleteHorizonMs, MemoryRecordsBuilder).
DELETE_HORIZON_MASK = 0x40
# The broker overwrote the timestamps with its append time (LogValidator, message.timestamp.type=
# LogAppendTime): records then all carry the batch's max timestamp (DefaultRecordBatch.timestampType).
LOG_APPEND_TIME_MASK = 0x08
CONTROL_KEY = struct.Struct(">hh")
MARKERS = {0: "ABORT", 1: "COMMIT"}
INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class Chunk:
    """The complete batches of one fetch response and where decoding stopped."""

    batches: list[Batch]
    consumed: int  # bytes of complete batches
    truncated: bool  # a partial batch followed the complete ones (the broker cut at max_bytes)


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """Sequence of the batch's last record; sequences wrap from INT32_MAX to 0 like Kafka's."""
    if base_sequence < 0:
        return -1
    if base_sequence > INT32_MAX - last_offset_delta:
        return last_offset_delta - (INT32_MAX - base_sequence) - 1
    return base_sequence + last_offset_delta


def decode(data: bytes | bytearray | memoryview) -> Chunk:
    """Decode every complete batch in ``data``; a partial trailing batch is reported, not an error."""
    batches = list(iter_batches(data))
    consumed = sum(b.size_bytes for b in batches)
    return Chunk(batches, consumed, consumed < len(data))


def iter_batches(data: bytes | bytearray | memoryview) -> Iterator[Batch]:
    view = memoryview(data)
    pos, end = 0, len(view)
    while end - pos >= LOG_OVERHEAD:
        _, length = struct.unpack_from(">qi", view, pos)
        size = LOG_OVERHEAD + length
        if length < 0 or pos + size > end or end - pos <= MAGIC_OFFSET:
            return  # the broker cuts the last batch at max_bytes; the next fetch starts there
        magic = view[pos + MAGIC_OFFSET]
        raw = view[pos:pos + size]
        if magic >= 2:
            if size < HEADER_SIZE:
                raise BatchDecodeError(f"corrupt record batch at byte {pos}: {size} bytes, header needs 61")
            yield decode_batch(raw)
        else:
            yield _legacy_batch(raw, magic)
        pos += size


def decode_batch(raw: bytes | bytearray | memoryview) -> Batch:
    """One complete v2 batch (header + records) into a Batch."""
    (base_offset, _length, leader_epoch, _magic, _crc, attributes, last_delta, first_ts, max_ts,
     producer_id, producer_epoch, base_sequence, count) = HEADER.unpack_from(raw, 0)
    is_control = bool(attributes & CONTROL_MASK)
    marker = None
    offsets: tuple[int, ...] | None = None
    horizon = first_ts if attributes & DELETE_HORIZON_MASK else None
    log_append_time = bool(attributes & LOG_APPEND_TIME_MASK)
    # Header-only unless the header cannot tell us what we need: compaction holes, the marker type, or
    # the first record's time when the header's first timestamp is a delete horizon.
    if is_control and count == 1 and last_delta == 0 and not attributes & 0x07 and horizon is None:
        marker = _marker(raw)  # the usual marker batch, read without building the record
    if marker is None and (is_control or count != last_delta + 1 or horizon is not None):
        record_offsets, marker, first_record_ts = _decode_records(raw, base_offset, is_control)
        if count != last_delta + 1:
            offsets = tuple(record_offsets)
        if horizon is not None:
            first_ts = first_record_ts
    if log_append_time:
        first_ts = max_ts
    return Batch(
        base_offset=base_offset,
        last_offset=base_offset + last_delta,
        record_count=count,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        last_sequence=last_sequence(base_sequence, last_delta),
        is_transactional=bool(attributes & TRANSACTIONAL_MASK),
        is_control=is_control,
        marker=marker,
        first_timestamp=first_ts,
        max_timestamp=max_ts,
        compression=COMPRESSION.get(attributes & 0x07, f"unknown({attributes & 0x07})"),
        size_bytes=len(raw),
        offsets=offsets,
        delete_horizon_ms=horizon,
        log_append_time=log_append_time,
        leader_epoch=leader_epoch,
    )


def _marker(raw: bytes | bytearray | memoryview) -> str | None:
    """The marker type of an uncompressed control batch of one record (how Kafka writes every marker:
    MemoryRecords.withEndTransactionMarker), from the record's key; None if it isn't laid out so.

    Record (DefaultRecord): length, attributes (1 byte), timestampDelta, offsetDelta, keyLength, key;
    the key of an end-transaction marker is version (int16) and type (int16)."""
    pos = HEADER_SIZE
    try:
        _, pos = _varint(raw, pos)  # length
        pos += 1  # attributes
        for _ in range(2):  # timestampDelta, offsetDelta
            _, pos = _varint(raw, pos)
        key_length, pos = _varint(raw, pos)
        if key_length < CONTROL_KEY.size or pos + key_length > len(raw):
            return None
        _version, kind = CONTROL_KEY.unpack_from(raw, pos)
    except (IndexError, struct.error):
        return None
    return MARKERS.get(kind, f"CONTROL({kind})")


def _varint(raw: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """A zigzag varint (Kafka's ByteUtils.readVarlong) at ``pos``: (value, position after it)."""
    shift = result = 0
    while True:
        b = raw[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise IndexError("varint too long")


def _legacy_batch(raw: bytes | bytearray | memoryview, magic: int) -> Batch:
    """A v0/v1 message (possibly a compressed wrapper): no producer, never transactional."""
    codec = raw[17] & 0x07  # the wrapper message's attributes
    compression.check(codec, struct.unpack_from(">q", raw, 0)[0])  # a missing codec named, with what to do
    try:
        offsets = [r.offset for r in LegacyRecordBatch(bytes(raw), magic)]
    except Exception as e:  # corrupt or undecodable: name it instead of a stack trace
        raise BatchDecodeError(f"cannot decode a v{magic} message set ({e})") from None
    if not offsets:
        offsets = [struct.unpack_from(">q", raw, 0)[0]]
    first, last = offsets[0], offsets[-1]
    contiguous = len(offsets) == last - first + 1
    ts = struct.unpack_from(">q", raw, 18)[0] if magic == 1 else -1
    return Batch(
        base_offset=first, last_offset=last, record_count=len(offsets), producer_id=-1, producer_epoch=-1,
        base_sequence=-1, last_sequence=-1, is_transactional=False, is_control=False, marker=None,
        first_timestamp=ts, max_timestamp=ts, compression=COMPRESSION.get(codec, f"unknown({codec})"),
        size_bytes=len(raw), offsets=None if contiguous else tuple(offsets),
    )


def _decode_records(raw: bytes | bytearray | memoryview, base_offset: int,
                    is_control: bool) -> tuple[list[int], str | None, int]:
    """Offsets of the records, the marker type of a control batch, and the first record's timestamp
    (-1, Kafka's NO_TIMESTAMP, when the cleaner left no record)."""
    codec = struct.unpack_from(">h", raw, 21)[0] & 0x07  # the attributes, after the CRC
    compression.check(codec, base_offset)  # a missing codec named, with what to install
    try:
        records = list(DefaultRecordBatch(bytes(raw)))
    except Exception as e:  # codecs raise their own types (BadGzipFile, LZ4 errors, ...)
        raise compression.corrupt(codec, base_offset, e) from None
    marker = None
    if is_control and records:
        key = records[0].key
        if key is not None and len(key) >= CONTROL_KEY.size:
            _version, kind = CONTROL_KEY.unpack_from(key)
            marker = MARKERS.get(kind, f"CONTROL({kind})")
    return [r.offset for r in records], marker, records[0].timestamp if records else -1
