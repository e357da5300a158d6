"""The Iceberg sink against real tables written by pyiceberg through a SQL catalog on a local SQLite file:
the DuckDB reader's answers, one snapshot per command (appends, deletes and a rewrite after it change
nothing), and one line for a table the catalog doesn't have."""

from __future__ import annotations

from pathlib import Path

import pytest

from eosctl.base.errors import SinkError
from eosctl.config.model import Sink
from eosctl.sink import frozen, open_reader
from tests.unit.sink.sinksample import SAMPLE, STORED, arrow_offsets, assert_sample_answers
from tests.unit.sink.sinksample import arrow_rows as rows

WHERE = "pipelines.orders.sink"


@pytest.fixture
def sample(tmp_path: Path):
    from pyiceberg.catalog import load_catalog

    uri, warehouse = f"sqlite:///{tmp_path / 'catalog.db'}", f"file://{tmp_path / 'warehouse'}"
    catalog = load_catalog("local", uri=uri, warehouse=warehouse)
    catalog.create_namespace("shop")
    table = catalog.create_table("shop.orders", schema=rows({}).schema)
    for tp, offs in SAMPLE.items():  # one commit per partition
        table.append(rows({tp: offs}))
    offsets = arrow_offsets(STORED)
    catalog.create_table("shop.offsets", schema=offsets.schema).append(offsets)
    sink = Sink(iceberg="local.shop.orders", catalog_uri=uri, warehouse=warehouse, table="orders",
                offsets_table="shop.offsets")
    return sink, table


def test_same_answers_as_duckdb(sample):
    sink, table = sample
    with open_reader(sink, WHERE) as reader:
        assert_sample_answers(reader)
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


def test_an_audit_task_loads_only_its_partitions_rows(sample, monkeypatch):
    """A task's reader (open_reader(partitions=...)) has pyiceberg read only those partitions' rows and only
    the columns the sink names: what the audit's tasks hold in memory is their share of the table."""
    import eosctl.sink.iceberg as ice

    sink, _ = sample
    loaded = []
    real = ice._arrow

    def counted(*args, **kw):
        table = real(*args, **kw)
        loaded.append((table.num_rows, table.column_names))
        return table

    monkeypatch.setattr(ice, "_arrow", counted)
    with open_reader(sink, WHERE, partitions=[("orders", 1)]) as reader:
        assert [(s.partition, s.rows) for s in reader.summaries()] == [(1, 3)]
        assert [(i.first, i.last) for i in reader.islands("orders", 1)] == [(0, 2)]
    assert loaded[0] == (3, ["src_topic", "src_partition", "src_offset"])
    with open_reader(sink, WHERE) as reader:  # the driver's reader (invalid rows): every row
        assert [(s.partition, s.rows) for s in reader.summaries()] == [(0, 12), (1, 3)]
    assert loaded[2][0] == 15


def test_a_pinned_snapshot_of_plain_files_is_read_without_pyiceberg(sample, monkeypatch):
    """The pin plans the snapshot's files once; every reader of the command (a Spark task's or a forked
    worker's) scans them itself, loading no catalog or table, with the same answers."""
    import eosctl.sink.iceberg as ice

    sink, table = sample
    with frozen(sink, WHERE) as pinned:
        assert len(pinned.files) == 2 and len(pinned.offsets_files) == 1

        def no_table(*args, **kw):
            raise AssertionError("the table was loaded again")

        monkeypatch.setattr(ice, "_table_at", no_table)
        with open_reader(pinned, WHERE) as reader:
            assert_sample_answers(reader)
            assert reader.read_point.at["snapshot_id"] == str(table.current_snapshot().snapshot_id)


def test_files_pyiceberg_must_interpret_are_read_through_it(sample, tmp_path: Path):
    """A column added since files were written (they lack it), and an identity partition on a column the
    audit reads (its value may live in the manifest only): the pin lists no files, pyiceberg reads."""
    from pyiceberg.catalog import load_catalog
    from pyiceberg.types import StringType

    sink, table = sample
    with table.update_schema() as update:
        update.add_column("note", StringType())
    with frozen(sink, WHERE) as pinned, open_reader(pinned, WHERE) as reader:
        assert pinned.files is None
        assert [(s.partition, s.rows) for s in reader.summaries()] == [(0, 12), (1, 3)]
    catalog = load_catalog("local", uri=sink.catalog_uri, warehouse=sink.warehouse)
    by_partition = catalog.create_table("shop.by_partition", schema=rows({}).schema)
    with by_partition.update_spec() as spec:
        spec.add_identity("src_partition")
    by_partition.append(rows(SAMPLE))
    other = Sink(iceberg="local.shop.by_partition", catalog_uri=sink.catalog_uri, warehouse=sink.warehouse)
    with frozen(other, WHERE) as pinned, open_reader(pinned, WHERE) as reader:
        assert pinned.files is None
        assert [(s.partition, s.rows) for s in reader.summaries()] == [(0, 12), (1, 3)]
