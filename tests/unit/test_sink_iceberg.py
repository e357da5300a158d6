"""The Iceberg sink against real tables written by pyiceberg through a SQL catalog on a local SQLite file:
the DuckDB reader's answers, one snapshot per command (appends, deletes and a rewrite after it change
nothing), and one line for a table the catalog doesn't have."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from eosctl.config import Sink
from eosctl.errors import SinkError
from eosctl.sink import OffsetIsland, SinkPartition, StoredOffset, frozen, open_reader

WHERE = "pipelines.orders.sink"
SAMPLE = {("orders", 0): [0, 1, 2, 3, 4, 5, 5, 6, 6, 7, 10, 11], ("orders", 1): [0, 1, 2]}


def rows(offsets: dict[tuple[str, int], list[int]]) -> pa.Table:
    flat = [(t, p, o) for (t, p), offs in offsets.items() for o in offs]
    return pa.table({"src_topic": pa.array([r[0] for r in flat], pa.string()),
                     "src_partition": pa.array([r[1] for r in flat], pa.int32()),
                     "src_offset": pa.array([r[2] for r in flat], pa.int64())})


@pytest.fixture
def sample(tmp_path: Path):
    from pyiceberg.catalog import load_catalog

    uri, warehouse = f"sqlite:///{tmp_path / 'catalog.db'}", f"file://{tmp_path / 'warehouse'}"
    catalog = load_catalog("local", uri=uri, warehouse=warehouse)
    catalog.create_namespace("shop")
    table = catalog.create_table("shop.orders", schema=rows({}).schema)
    for tp, offs in SAMPLE.items():  # one commit per partition
        table.append(rows({tp: offs}))
    offsets = pa.table({"topic": ["orders", "orders"], "partition": pa.array([0, 1], pa.int32()),
                        "next_offset": pa.array([12, 3], pa.int64())})
    catalog.create_table("shop.offsets", schema=offsets.schema).append(offsets)
    sink = Sink(iceberg="local.shop.orders", catalog_uri=uri, warehouse=warehouse, table="orders",
                offsets_table="shop.offsets")
    return sink, table


def test_same_answers_as_duckdb(sample):
    sink, table = sample
    with open_reader(sink, WHERE) as reader:
        assert reader.summaries() == [
            SinkPartition("orders", 0, rows=12, distinct_offsets=10, min_offset=0, max_offset=11,
                          duplicate_offsets=2, invalid_offset_rows=0),
            SinkPartition("orders", 1, rows=3, distinct_offsets=3, min_offset=0, max_offset=2,
                          duplicate_offsets=0, invalid_offset_rows=0)]
        assert list(reader.islands("orders", 1)) == [OffsetIsland("orders", 1, 0, 2, 1)]
        assert reader.stored_offsets() == [StoredOffset("orders", 0, 12), StoredOffset("orders", 1, 3)]
        assert reader.read_point.to_dict()["snapshot_id"] == str(table.current_snapshot().snapshot_id)


def test_one_snapshot_per_command_appends_deletes_and_rewrites_change_nothing(sample):
    sink, table = sample
    with frozen(sink, WHERE) as pinned:
        first = str(table.current_snapshot().snapshot_id)
        assert pinned.at.split(",")[0] == first
        table.append(rows({("orders", 1): [3, 4]}))  # the writer goes on
        table.delete("src_partition == 0 and src_offset == 5")  # rewrites a data file without those rows
        table.overwrite(table.scan().to_arrow())  # a compaction: every file rewritten, the old ones removed
        with open_reader(pinned, WHERE) as reader:
            assert [(s.partition, s.rows) for s in reader.summaries()] == [(0, 12), (1, 3)]
            assert reader.read_point.at["snapshot_id"] == first
    with open_reader(sink, WHERE) as now:
        assert [(s.partition, s.rows, s.duplicate_offsets) for s in now.summaries()] == [(0, 10, 1),
                                                                                         (1, 5, 0)]


def test_missing_table_is_one_line(sample):
    sink, _ = sample
    from dataclasses import replace

    with pytest.raises(SinkError) as info:
        open_reader(replace(sink, iceberg="local.shop.nope"), WHERE)
    assert str(info.value).startswith("Iceberg catalog has no table 'shop.nope' (")
    assert str(info.value).endswith(f"); check [{WHERE}].iceberg") and info.value.exit_code == 2
