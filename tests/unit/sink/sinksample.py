"""The sample every sink kind's tests write in their own format, and what every reader must answer for it
(the DuckDB reader's answers, tests/unit/sink/test_sink.py)."""

from __future__ import annotations

import pyarrow as pa

from eosctl.sink import OffsetIsland, SinkPartition, StoredOffset

# p0: 0..4 once, 5..6 twice (a replay), 7 once, 10..11 once (8, 9 missing); p1: 0..2
SAMPLE = {("orders", 0): [0, 1, 2, 3, 4, 5, 5, 6, 6, 7, 10, 11], ("orders", 1): [0, 1, 2]}
STORED = {("orders", 0): 12, ("orders", 1): 3}
SUMMARIES = [SinkPartition("orders", 0, rows=12, distinct_offsets=10, min_offset=0, max_offset=11,
                           duplicate_offsets=2, invalid_offset_rows=0),
             SinkPartition("orders", 1, rows=3, distinct_offsets=3, min_offset=0, max_offset=2,
                           duplicate_offsets=0, invalid_offset_rows=0)]
ISLANDS = [OffsetIsland("orders", 0, 0, 4, 1), OffsetIsland("orders", 0, 5, 6, 2),
           OffsetIsland("orders", 0, 7, 7, 1), OffsetIsland("orders", 0, 10, 11, 1),
           OffsetIsland("orders", 1, 0, 2, 1)]
STORED_OFFSETS = [StoredOffset("orders", 0, 12), StoredOffset("orders", 1, 3)]


def arrow_rows(offsets: dict[tuple[str, int], list[int]]) -> pa.Table:
    """Sink rows (src_topic, src_partition, src_offset) as Arrow, for the table formats' writers."""
    flat = [(t, p, o) for (t, p), offs in offsets.items() for o in offs]
    return pa.table({"src_topic": pa.array([r[0] for r in flat], pa.string()),
                     "src_partition": pa.array([r[1] for r in flat], pa.int32()),
                     "src_offset": pa.array([r[2] for r in flat], pa.int64())})


def arrow_offsets(stored: dict[tuple[str, int], int]) -> pa.Table:
    return pa.table({"topic": pa.array([t for t, _ in stored], pa.string()),
                     "partition": pa.array([p for _, p in stored], pa.int32()),
                     "next_offset": pa.array(list(stored.values()), pa.int64())})


def assert_sample_answers(reader) -> None:
    """What every reader answers for SAMPLE (with STORED as its offsets table)."""
    assert reader.summaries() == SUMMARIES
    assert list(reader.islands()) == ISLANDS
    assert list(reader.islands("orders", 1)) == ISLANDS[-1:]
    assert reader.partitions() == {("orders", 0): 12, ("orders", 1): 3}
    assert reader.stored_offsets() == STORED_OFFSETS
    assert reader.invalid_rows() == []
