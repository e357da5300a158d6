"""The Delta Lake sink against real tables written by `deltalake`: the DuckDB reader's answers, one table
version per command (appends, deletes and compactions after it change nothing), and the files a
compaction removed never counted again (what a Parquet glob over the table's directory gets wrong)."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable, write_deltalake

from eosctl.base.errors import SinkError
from eosctl.config.model import Sink
from eosctl.sink import frozen, open_reader
from tests.unit.sink.sinksample import ISLANDS, SAMPLE, STORED, arrow_offsets, assert_sample_answers
from tests.unit.sink.sinksample import arrow_rows as rows

WHERE = "pipelines.orders.sink"


@pytest.fixture
def sample(tmp_path: Path) -> Sink:
    data, offsets = tmp_path / "orders", tmp_path / "offsets"
    for (t, p), offs in SAMPLE.items():  # one commit (one file) per partition, as a streaming sink makes
        write_deltalake(str(data), rows({(t, p): offs}), mode="append")
    write_deltalake(str(offsets), arrow_offsets(STORED))
    return Sink(delta=str(data), table="orders", offsets_table=str(offsets))


def test_same_answers_as_duckdb(sample: Sink):
    with open_reader(sample, WHERE) as reader:
        assert_sample_answers(reader)
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


def test_a_pinned_version_of_plain_files_is_read_without_deltalake(sample: Sink, monkeypatch):
    """The pin lists the version's files; every reader of the command scans them itself (no table opened,
    so the local engine's workers are forked, not spawned), with the same answers."""
    import eosctl.sink.delta as delta
    from auditors.local import _context

    with frozen(sample, WHERE) as pinned:
        assert len(pinned.files) == 2 and len(pinned.offsets_files) == 1
        assert _context(pinned).get_start_method() == "fork"

        def no_table(*args, **kw):
            raise AssertionError("the table was opened again")

        monkeypatch.setattr(delta, "_table", no_table)
        with open_reader(pinned, WHERE) as reader:
            assert_sample_answers(reader)
            assert reader.read_point.at == {"version": 1, "offsets_version": 0}


def test_a_table_partitioned_by_a_column_the_audit_reads_is_read_through_deltalake(tmp_path: Path):
    """Partition values live in the log, not in the files: partitioned by the source partition, the pin
    lists no files and deltalake reads; partitioned by a day (a column the audit doesn't read), the files
    hold every column it reads and are scanned as they are."""
    import pyarrow as pa

    from auditors.local import _context

    for by, plain in (("src_partition", False), ("day", True)):
        data = tmp_path / by
        table = rows(SAMPLE)
        table = table.append_column("day", pa.array(["2026-11-2" + str(o % 2) for o in
                                                     table.column("src_offset").to_pylist()]))
        write_deltalake(str(data), table, partition_by=[by])
        sink = Sink(delta=str(data), table="orders")
        with frozen(sink, WHERE) as pinned, open_reader(pinned, WHERE) as reader:
            assert (pinned.files is not None) is plain
            assert _context(pinned).get_start_method() == ("fork" if plain else "spawn")
            assert [(s.partition, s.rows) for s in reader.summaries()] == [(0, 12), (1, 3)]
            assert list(reader.islands()) == ISLANDS


def test_a_column_added_after_some_files_were_written_is_read_through_deltalake(tmp_path: Path):
    """The audit's order column added later (schema evolution): the files written before lack it, where
    deltalake reads NULLs, so the pin lists no files and deltalake reads."""
    import pyarrow as pa

    data = tmp_path / "orders"
    write_deltalake(str(data), rows({("orders", 0): [0, 1, 2]}))
    later = rows({("orders", 0): [3, 4]}).append_column("written_at", pa.array([10, 11], pa.int64()))
    write_deltalake(str(data), later, mode="append", schema_mode="merge")
    with frozen(Sink(delta=str(data), table="orders"), WHERE) as pinned:
        assert pinned.files is not None  # without the order column the files hold all it reads
    sink = Sink(delta=str(data), table="orders", order_column="written_at")
    with frozen(sink, WHERE) as pinned, open_reader(pinned, WHERE) as reader:
        assert pinned.files is None
        assert [(i.first, i.last, i.multiplicity) for i in reader.islands()] == [(0, 4, 1)]
