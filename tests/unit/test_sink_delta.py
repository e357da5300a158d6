"""The Delta Lake sink against real tables written by `deltalake`: the DuckDB reader's answers, one table
version per command (appends, deletes and compactions after it change nothing), and the files a
compaction removed never counted again (what a Parquet glob over the table's directory gets wrong)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from eosctl.config import Sink
from eosctl.errors import SinkError
from eosctl.sink import OffsetIsland, SinkPartition, StoredOffset, frozen, open_reader

WHERE = "pipelines.orders.sink"
SAMPLE = {("orders", 0): [0, 1, 2, 3, 4, 5, 5, 6, 6, 7, 10, 11], ("orders", 1): [0, 1, 2]}


def rows(offsets: dict[tuple[str, int], list[int]]) -> pa.Table:
    flat = [(t, p, o) for (t, p), offs in offsets.items() for o in offs]
    return pa.table({"src_topic": [r[0] for r in flat],
                     "src_partition": pa.array([r[1] for r in flat], pa.int32()),
                     "src_offset": pa.array([r[2] for r in flat], pa.int64())})


@pytest.fixture
def sample(tmp_path: Path) -> Sink:
    data, offsets = tmp_path / "orders", tmp_path / "offsets"
    for (t, p), offs in SAMPLE.items():  # one commit (one file) per partition, as a streaming sink makes
        write_deltalake(str(data), rows({(t, p): offs}), mode="append")
    write_deltalake(str(offsets), pa.table({"topic": ["orders", "orders"],
                                            "partition": pa.array([0, 1], pa.int32()),
                                            "next_offset": pa.array([12, 3], pa.int64())}))
    return Sink(delta=str(data), table="orders", offsets_table=str(offsets))


def test_same_answers_as_duckdb(sample: Sink):
    with open_reader(sample, WHERE) as reader:
        assert reader.summaries() == [
            SinkPartition("orders", 0, rows=12, distinct_offsets=10, min_offset=0, max_offset=11,
                          duplicate_offsets=2, invalid_offset_rows=0),
            SinkPartition("orders", 1, rows=3, distinct_offsets=3, min_offset=0, max_offset=2,
                          duplicate_offsets=0, invalid_offset_rows=0)]
        assert list(reader.islands("orders", 0)) == [
            OffsetIsland("orders", 0, 0, 4, 1), OffsetIsland("orders", 0, 5, 6, 2),
            OffsetIsland("orders", 0, 7, 7, 1), OffsetIsland("orders", 0, 10, 11, 1)]
        assert reader.stored_offsets() == [StoredOffset("orders", 0, 12), StoredOffset("orders", 1, 3)]
        assert reader.read_point.to_dict() == {"kind": "delta", "source": sample.delta, "version": 1,
                                               "offsets_version": 0}


def test_one_version_per_command_appends_deletes_and_compaction_change_nothing(sample: Sink):
    with frozen(sample, WHERE) as pinned:
        assert pinned.at == "1,0"
        write_deltalake(sample.delta, rows({("orders", 1): [3, 4]}), mode="append")  # the writer goes on
        table = DeltaTable(sample.delta)
        table.delete("src_partition = 0 AND src_offset = 5")
        DeltaTable(sample.delta).optimize.compact()  # rewrites the files into one, removing the old ones
        assert DeltaTable(sample.delta).version() == 4
        with open_reader(pinned, WHERE) as reader:  # every reader of the command: version 1
            assert [(s.partition, s.rows) for s in reader.summaries()] == [(0, 12), (1, 3)]
            assert reader.read_point.at["version"] == 1
    with open_reader(sample, WHERE) as now:  # the next command: the compacted latest version
        # both rows of offset 5 deleted, offset 6 still twice
        assert [(s.partition, s.rows, s.duplicate_offsets) for s in now.summaries()] == [(0, 10, 1),
                                                                                         (1, 5, 0)]
        assert now.read_point.at["version"] == 4
    # A glob over the table's directory reads the removed files too: every row counted twice, and more.
    with open_reader(Sink(parquet=f"{sample.delta}/*.parquet"), WHERE) as glob:
        assert sum(s.rows for s in glob.summaries()) > 2 * (10 + 5)


def test_not_a_delta_table_is_one_line(tmp_path: Path):
    with pytest.raises(SinkError) as info:
        open_reader(Sink(delta=str(tmp_path)), WHERE)
    assert str(info.value) == (f"{tmp_path} is not a Delta table (no _delta_log with a commit); check "
                               f"[{WHERE}].delta")
    assert info.value.exit_code == 2
