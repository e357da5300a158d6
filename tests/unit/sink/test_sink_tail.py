"""The live model's incremental DuckDB read (eosctl.sink.tail) equals a whole read of the sink after
appends, replays, deletes, invalid rows and a checkpoint that renumbers rows, also when a read takes
many slices."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from eosctl.config.model import Sink
from eosctl.inspection.ledger import read_sink
from eosctl.sink.base import OffsetIsland
from eosctl.sink.tail import DuckDBTail, merge_islands

STEPS = [
    "insert into sink select 't', 0, range from range(0, 100)",
    "insert into sink values ('t', 1, 5), ('t', 1, 5), (NULL, 1, 3), ('t', 2, NULL), ('', -1, 1)",
    "insert into sink select 't', 0, range from range(50, 120)",  # replayed rows
    "insert into offsets values ('t', 0, 120), (NULL, 0, 1)",
    "delete from sink where src_offset = 7",  # a delete: read again from the first row
    "insert into sink select 't', 3, range from range(0, 10)",  # (DuckDB may renumber rows meanwhile)
]


def test_reading_new_rows_equals_reading_the_whole_sink(tmp_path: Path) -> None:
    path = str(tmp_path / "s.duckdb")
    with duckdb.connect(path) as con:
        con.execute("create table sink (src_topic varchar, src_partition int, src_offset bigint)")
        con.execute("create table offsets (topic varchar, partition int, next_offset bigint)")
    sink = Sink(duckdb=path, offsets_table="offsets")
    tail = DuckDBTail(sink)
    for sql in STEPS:
        with duckdb.connect(path) as con:
            con.execute(sql)
        tail.chunk = 64  # several slices per read
        assert tail.read()
        whole = read_sink(sink)
        assert tail.summaries() == whole.summaries, sql
        assert {tp: i for tp, i in tail.state.islands.items() if i} == whole.islands, sql
        assert tail.invalid_rows() == whole.invalid, sql
        assert {(s.topic, s.partition): s.next_offset for s in tail.state.stored} == whole.stored, sql
    assert tail.restarts >= 1  # the delete
    assert tail.slices > len(STEPS)
    assert whole.islands[("t", 0)] == [OffsetIsland("t", 0, 0, 6, 1), OffsetIsland("t", 0, 8, 49, 1),
                                       OffsetIsland("t", 0, 50, 99, 2), OffsetIsland("t", 0, 100, 119, 1)]


@pytest.mark.parametrize("a, b, merged", [
    ([(0, 9, 1)], [(10, 19, 1)], [(0, 19, 1)]),
    ([(0, 9, 1)], [(5, 14, 1)], [(0, 4, 1), (5, 9, 2), (10, 14, 1)]),
    ([(0, 3, 2), (6, 9, 1)], [(0, 9, 1)], [(0, 3, 3), (4, 5, 1), (6, 9, 2)]),
    ([(5, 5, 1)], [(0, 1, 1)], [(0, 1, 1), (5, 5, 1)]),
])
def test_merged_islands_add_multiplicities_and_stay_maximal(a, b, merged) -> None:
    def isl(rows):
        return [OffsetIsland("t", 0, f, last, m) for f, last, m in rows]

    assert merge_islands(isl(a), isl(b)) == isl(merged)
