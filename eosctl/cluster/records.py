"""A few records of one partition, whole: offset, timestamp, key, value and headers, for a person to read
(`eosctl log --records`, `explain --offset`).

The log scan and the content check never build records (eosctl.cluster.batches, recordkeys); this does,
with kafka-python's record classes, so it is for tens or thousands of records, never a whole partition:
every caller bounds the range. Control batches (markers) hold no record a producer wrote and are skipped;
records of aborted and open transactions are read like the others (the log's classification says which
they are).
"""

from __future__ import annotations

from dataclasses import dataclass

from kafka.record.default_records import DefaultRecordBatch
from kafka.record.legacy_records import LegacyRecordBatch

from eosctl.base.errors import BrokerError
from eosctl.cluster.batches import MAGIC_OFFSET, iter_batches
from eosctl.cluster.wire import WireClient

MAX_FETCH_BYTES = 64 * 1024 * 1024
_FIRST_FETCH_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Record:
    offset: int
    timestamp: int  # ms; -1: none
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def read_records(client: WireClient, topic: str, partition: int, start: int, stop: int) -> list[Record]:
    """The data records at offsets in [start, stop), read uncommitted (aborted and open ones included)."""
    out: list[Record] = []
    position, size = start, _FIRST_FETCH_BYTES
    while position < stop:
        r = client.fetch_raw(topic, partition, position, size)
        if r.error:
            raise BrokerError(f"cannot read {topic}-{partition} at offset {position}: {r.error}")
        if position >= r.high_watermark:
            break
        view, pos, progressed = memoryview(r.records), 0, False
        for batch in iter_batches(r.records):
            raw = bytes(view[pos:pos + batch.size_bytes])
            pos += batch.size_bytes
            if batch.last_offset < position:
                continue
            progressed = True
            position = batch.last_offset + 1
            if batch.is_control:
                continue
            magic = raw[MAGIC_OFFSET]
            records = DefaultRecordBatch(raw) if magic >= 2 else LegacyRecordBatch(raw, magic)
            for rec in records:
                if start <= rec.offset < stop:
                    headers = tuple((k, v) for k, v in getattr(rec, "headers", None) or ())
                    out.append(Record(rec.offset, rec.timestamp if rec.timestamp is not None else -1,
                                      rec.key, rec.value, headers))
            if position >= stop:
                break
        if not progressed:
            if size >= MAX_FETCH_BYTES:
                raise BrokerError(f"the batch of {topic}-{partition} at offset {position} is larger than "
                                  f"{MAX_FETCH_BYTES} bytes")
            size *= 2
    return out
