"""Real v2 record batches (magic 2) for the scripted broker, built with kafka-python's own builder.

The builder writes what a producer writes; the broker-side fields (base offset, control flag, the
delete-horizon flag, a lastOffsetDelta beyond the last surviving record after compaction) are patched
into the header afterwards and the CRC is recomputed, as the broker's log layer does
(org.apache.kafka.common.record.DefaultRecordBatch: the CRC covers attributes..end, not the base offset).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.util import calc_crc32c

NO_PRODUCER = -1
CONTROL_FLAG = 0x20
# KIP-534: the cleaner sets this bit and stores the delete horizon in the batch's first-timestamp field.
DELETE_HORIZON_FLAG = 0x40
LOG_APPEND_TIME_FLAG = 0x08  # the timestamp-type bit LogValidator sets for LogAppendTime topics
ABORT, COMMIT = 0, 1  # ControlRecordType in org.apache.kafka.common.record.ControlRecordType

_BASE_OFFSET = struct.Struct(">q")
_ATTRIBUTES_AT, _LAST_DELTA_AT, _CRC_AT, _MAX_TIMESTAMP_AT = 21, 23, 17, 35
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_CONTROL_VALUE = struct.Struct(">hi")  # version, coordinator epoch (EndTransactionMarker)


@dataclass(frozen=True)
class SimBatch:
    """One batch as stored in the simulated log: its offsets and its exact bytes."""

    base_offset: int
    last_offset: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    transactional: bool
    control: str | None  # "COMMIT" / "ABORT" for markers
    first_timestamp: int
    data: bytes
    offsets: tuple[int, ...]  # offsets of the records present (compaction may have removed some)
    log_append_time: int | None = None  # the broker's append time, on a LogAppendTime topic

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def max_timestamp(self) -> int:
        if self.log_append_time is not None:
            return self.log_append_time
        return self.first_timestamp + len(self.offsets) - 1  # build_batch stamps records 1 ms apart


def build_batch(base_offset: int, offsets: Sequence[int], *, last_offset: int | None = None,
                producer_id: int = NO_PRODUCER, producer_epoch: int = -1, base_sequence: int = -1,
                transactional: bool = False, control: str | None = None, timestamp: int = 1_700_000_000_000,
                delete_horizon: bool = False, value_size: int = 8, coordinator_epoch: int = 0,
                record_timestamp: int | None = None, log_append_time: int | None = None) -> SimBatch:
    """A batch holding records at ``offsets`` (absolute); ``last_offset`` defaults to the last of them.

    ``log_append_time``: the topic stamps LogAppendTime and the broker appended the batch then
    (LogValidator.assignOffsetsNonCompressed: setMaxTimestamp(LOG_APPEND_TIME, now) sets the timestamp-type
    bit and the max timestamp; the producer's first timestamp stays in the header)."""
    if not offsets:
        raise ValueError("a batch holds at least one record")
    last = offsets[-1] if last_offset is None else last_offset
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=transactional,
                                        producer_id=producer_id, producer_epoch=producer_epoch,
                                        base_sequence=base_sequence, batch_size=1 << 30)
    if record_timestamp is not None:
        # The cleaner's rewrite (MemoryRecordsBuilder with a deleteHorizonMs): the base timestamp is the
        # horizon and each record keeps its own time as a delta from it.
        builder._first_timestamp, builder._max_timestamp = timestamp, -1
        timestamp = record_timestamp
    for i, offset in enumerate(offsets):
        if control is not None:
            key = _CONTROL_KEY.pack(0, COMMIT if control == "COMMIT" else ABORT)
            value = _CONTROL_VALUE.pack(0, coordinator_epoch)
        else:
            key, value = f"k{offset}".encode(), bytes(value_size)
        builder.append(offset - base_offset, timestamp + i, key, value, [])
    data = bytearray(builder.build())
    _BASE_OFFSET.pack_into(data, 0, base_offset)
    attributes = struct.unpack_from(">h", data, _ATTRIBUTES_AT)[0]
    attributes |= (CONTROL_FLAG if control else 0) | (DELETE_HORIZON_FLAG if delete_horizon else 0)
    if log_append_time is not None:
        attributes |= LOG_APPEND_TIME_FLAG
        struct.pack_into(">q", data, _MAX_TIMESTAMP_AT, log_append_time)
    struct.pack_into(">h", data, _ATTRIBUTES_AT, attributes)
    struct.pack_into(">i", data, _LAST_DELTA_AT, last - base_offset)
    struct.pack_into(">I", data, _CRC_AT, calc_crc32c(memoryview(data)[_ATTRIBUTES_AT:]))
    return SimBatch(base_offset, last, producer_id, producer_epoch, base_sequence, transactional, control,
                    timestamp, bytes(data), tuple(offsets), log_append_time)
