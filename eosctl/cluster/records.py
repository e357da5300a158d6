"""The data records of a span of one partition, decoded one by one for a person to read (`eosctl log
--records`): offset, key, value, timestamp and the codec of the batch holding it.

The audit never reads records this way (eosctl.cluster.recordkeys decodes keys column by column); this is
for a bounded window (`log --limit`), so kafka-python's record reader one record at a time is fine.
Control records (transaction markers) are left out: `log`'s batch table shows them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from kafka.record.default_records import DefaultRecordBatch
from kafka.record.legacy_records import LegacyRecordBatch

from eosctl.cluster import compression
from eosctl.cluster.batches import CONTROL_MASK, LOG_OVERHEAD, MAGIC_OFFSET, BatchDecodeError

_START_BYTES = 1 << 20
_MAX_BYTES = 64 << 20  # one batch larger than this is refused with its offset, not read


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    compression: str  # the codec of its batch ("none", "gzip", "snappy", "lz4", "zstd")


def read_records(client: Any, topic: str, partition: int, start: int, end: int) -> list[Record]:
    """Every data record at offsets [start, end) of the partition, in offset order (read_uncommitted: aborted
    and open records too, as `log` shows their batches)."""
    out: list[Record] = []
    pos, max_bytes = start, _START_BYTES
    while pos < end:
        data = client.fetch_raw(topic, partition, pos, max_bytes).records
        got, after = decode_records(data)
        if after is None:
            if len(data) and max_bytes < _MAX_BYTES:  # a batch larger than the answer: ask for more
                max_bytes *= 2
                continue
            if len(data):
                raise BatchDecodeError(f"the batch at offset {pos} of {topic}-{partition} is larger than "
                                       f"{_MAX_BYTES >> 20} MB: narrow --from/--to past it")
            break  # nothing more below the high watermark
        out += [r for r in got if pos <= r.offset < end]
        pos, max_bytes = max(pos, after), _START_BYTES
    return out


def decode_records(data: bytes | bytearray | memoryview) -> tuple[list[Record], int | None]:
    """The data records of the complete batches in a fetch answer, and the offset after its last complete
    batch (None: no complete batch)."""
    view = memoryview(data)
    pos, end, after = 0, len(view), None
    out: list[Record] = []
    while end - pos >= LOG_OVERHEAD:
        base, length = struct.unpack_from(">qi", view, pos)
        size = LOG_OVERHEAD + length
        if length < 0 or pos + size > end or end - pos <= MAGIC_OFFSET:
            break
        raw = bytes(view[pos:pos + size])
        magic = raw[MAGIC_OFFSET]
        if magic >= 2:
            (attributes,) = struct.unpack_from(">h", raw, 21)
            (last_delta,) = struct.unpack_from(">i", raw, 23)
            codec = attributes & 0x07
            compression.check(codec, base)
            after = base + last_delta + 1
            if not attributes & CONTROL_MASK:
                out += _read(DefaultRecordBatch(raw), codec, base)
        else:
            codec = raw[17] & 0x07
            compression.check(codec, base)
            records = _read(LegacyRecordBatch(raw, magic), codec, base)
            out += records
            after = (records[-1].offset if records else base) + 1
        pos += size
    return out, after


def _read(batch: Any, codec: int, base: int) -> list[Record]:
    name = compression.codec_name(codec)
    try:
        return [Record(r.offset, r.key, r.value, r.timestamp, name) for r in batch]
    except Exception as e:  # codecs raise their own types (BadGzipFile, LZ4 errors, ...)
        raise compression.corrupt(codec, base, e) from None
