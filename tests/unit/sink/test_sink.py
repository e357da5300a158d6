from __future__ import annotations

import os
import re
import struct
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pytest

from eosctl.base.errors import SinkError
from eosctl.config.model import Sink
from eosctl.sink import OffsetIsland, SinkPartition, StoredOffset, open_reader
from eosctl.sink.duckdb import read_header

WHERE = "pipelines.orders.sink"


def make_sink(path: Path, offsets: dict[tuple[str, int], list[int]], storage_version: str | None = None,
              stored: dict[tuple[str, int], int] | None = None) -> Path:
    """A DuckDB sink like the reference pipeline's: orders_sink rows and a sink_offsets table.

    `storage_version` (e.g. "v1.0.0") writes a file older DuckDB releases can read.
    """
    con = duckdb.connect()
    option = f" (STORAGE_VERSION '{storage_version}')" if storage_version else ""
    con.execute(f"ATTACH '{path}' AS s{option}")
    con.execute("CREATE TABLE s.orders_sink (src_topic VARCHAR, src_partition INTEGER, src_offset BIGINT, "
                "order_id VARCHAR, amount DOUBLE)")
    con.execute('CREATE TABLE s.sink_offsets (topic VARCHAR, "partition" INTEGER, next_offset BIGINT)')
    rows = [(t, p, o, f"o{o}", 1.0) for (t, p), offs in offsets.items() for o in offs]
    if rows:
        con.executemany("INSERT INTO s.orders_sink VALUES (?, ?, ?, ?, ?)", rows)
    for (t, p), n in (stored or {}).items():
        con.execute("INSERT INTO s.sink_offsets VALUES (?, ?, ?)", [t, p, n])
    con.close()
    return path


def sink_config(path: Path, **kw) -> Sink:
    return Sink(duckdb=str(path), table=kw.pop("table", "orders_sink"),
                offsets_table=kw.pop("offsets_table", "sink_offsets"), **kw)


def error_of(fn) -> str:
    with pytest.raises(SinkError) as info:
        fn()
    message = str(info.value)
    assert "\n" not in message
    assert info.value.exit_code == 2
    return message


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    # p0: 0..4 once, 5..6 twice (a replay), 7 once, 10..11 once (8, 9 missing); p1: empty offsets table row
    return make_sink(
        tmp_path / "sink.duckdb",
        {("orders", 0): [0, 1, 2, 3, 4, 5, 5, 6, 6, 7, 10, 11], ("orders", 1): [0, 1, 2]},
        stored={("orders", 0): 12, ("orders", 1): 3},
    )


def test_summaries_islands_and_stored_offsets(sample: Path):
    with open_reader(sink_config(sample), WHERE) as reader:
        assert reader.summaries() == [
            SinkPartition("orders", 0, rows=12, distinct_offsets=10, min_offset=0, max_offset=11,
                          duplicate_offsets=2, invalid_offset_rows=0),
            SinkPartition("orders", 1, rows=3, distinct_offsets=3, min_offset=0, max_offset=2,
                          duplicate_offsets=0, invalid_offset_rows=0),
        ]
        assert reader.summaries()[0].duplicate_rows == 2
        assert list(reader.islands()) == [
            OffsetIsland("orders", 0, 0, 4, 1),
            OffsetIsland("orders", 0, 5, 6, 2),
            OffsetIsland("orders", 0, 7, 7, 1),
            OffsetIsland("orders", 0, 10, 11, 1),
            OffsetIsland("orders", 1, 0, 2, 1),
        ]
        assert list(reader.islands("orders", 1)) == [OffsetIsland("orders", 1, 0, 2, 1)]
        assert reader.stored_offsets() == [StoredOffset("orders", 0, 12), StoredOffset("orders", 1, 3)]


def test_missing_file(tmp_path: Path):
    msg = error_of(lambda: open_reader(sink_config(tmp_path / "nope.duckdb"), WHERE))
    assert msg == (f"sink file {tmp_path / 'nope.duckdb'} not found; "
                   f"check [pipelines.orders.sink].duckdb or --sink-duckdb")
    assert not (tmp_path / "nope.duckdb").exists()  # read-only open never creates the file


@contextmanager
def live_writer(path: Path) -> Iterator[subprocess.Popen]:
    """A process holding ``path`` open in DuckDB (as a pipeline's writer does) until the block ends."""
    writer = subprocess.Popen(
        [sys.executable, "-c",
         "import duckdb, sys; c = duckdb.connect(sys.argv[1]); print('open', flush=True); sys.stdin.read()",
         str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert writer.stdout.readline().strip() == "open"
        yield writer
    finally:
        writer.stdin.close()
        writer.wait(timeout=10)


def test_file_locked_by_a_live_writer(sample: Path, monkeypatch):
    monkeypatch.setattr("eosctl.sink.duckdb.LOCK_WAIT_S", 0.3)  # a writer that never closes: give up soon
    with live_writer(sample) as writer:
        msg = error_of(lambda: open_reader(sink_config(sample), WHERE))
        program = Path(os.path.realpath(f"/proc/{writer.pid}/exe")).name
        assert msg == (
            f"{sample} stayed locked by a running writer ({program}, PID {writer.pid}) for 0.3s; DuckDB lets "
            "nobody read while a writer holds the file, and eosctl reads it between the writer's "
            "transactions: have the writer close the file between batches, or audit a Parquet export "
            "(in the writer: COPY orders_sink TO 'sink.parquet') with --sink-parquet"
        )
        assert writer.poll() is None  # the writer is untouched
    with open_reader(sink_config(sample), WHERE) as reader:  # and readable once the writer is gone
        assert reader.summaries()[0].rows == 12


def test_wrong_table_lists_the_tables(sample: Path):
    msg = error_of(lambda: open_reader(sink_config(sample, table="orders"), WHERE))
    assert msg == (f"{sample} has no table 'orders' (tables: orders_sink, sink_offsets); "
                   "check [pipelines.orders.sink].table (schema.table, and double quotes for a name with "
                   'dots: "my.table")')


def test_wrong_columns_names_both_sides(sample: Path):
    bad = sink_config(sample, offset_column="offset", key_column="order_id")
    msg = error_of(lambda: open_reader(bad, WHERE))
    assert msg == (f"table orders_sink in {sample} lacks column offset (offset_column); it has src_topic, "
                   "src_partition, src_offset, order_id, amount; "
                   "set the column names in [pipelines.orders.sink]")
    bad = sink_config(sample, topic_column="topic", partition_column="part")
    msg = error_of(lambda: open_reader(bad, WHERE))
    assert "lacks columns topic (topic_column), part (partition_column); it has src_topic," in msg


def fake_storage_version(path: Path, version: int, library: str) -> None:
    """Rewrite the version fields of a DuckDB header, then fix the header checksum.

    DuckDB checks the first block's checksum before the version and names the checksum it computed,
    so one failed open tells us what to store.
    """
    with open(path, "r+b") as f:
        f.seek(12)
        f.write(struct.pack("<Q", version))
        f.seek(52)
        f.write(library.encode().ljust(32, b"\0"))
    try:
        duckdb.connect(str(path), read_only=True).close()
    except duckdb.Error as e:
        computed = re.search(r"computed checksum (\d+)", str(e))
        if computed:
            with open(path, "r+b") as f:
                f.write(struct.pack("<Q", int(computed.group(1))))


@pytest.mark.parametrize(("version", "library", "message"), [
    (1000, "v2.9.0",
     "{path} was written by DuckDB v2.9.0 (storage version 1000), newer than the installed duckdb "
     "{duckdb} can read (storage versions 64-69); upgrade duckdb (pip install -U duckdb), or have the writer "
     "save with STORAGE_VERSION 'v1.0.0' or export Parquet"),
    (39, "",
     "{path} was written by another DuckDB version (storage version 39), older than the installed duckdb "
     "{duckdb} can read (storage versions 64-69); convert it with the DuckDB that wrote it (EXPORT DATABASE) "
     "or export Parquet"),
], ids=["newer", "older"])
def test_a_storage_version_the_installed_duckdb_cannot_read(tmp_path: Path, version, library, message):
    path = make_sink(tmp_path / "sink.duckdb", {("orders", 0): [0]})
    fake_storage_version(path, version, library)
    assert (read_header(path).storage_version, read_header(path).library) == (version, library)
    msg = error_of(lambda: open_reader(sink_config(path), WHERE))
    assert msg == message.format(path=path, duckdb=duckdb.__version__)


def test_v1_storage_file_reads_and_header_says_so(tmp_path: Path):
    path = make_sink(tmp_path / "v1.duckdb", {("orders", 0): [0, 1]}, storage_version="v1.0.0")
    assert read_header(path).storage_version == 64
    with open_reader(sink_config(path), WHERE) as reader:
        assert [s.rows for s in reader.summaries()] == [2]


def test_not_a_duckdb_file(tmp_path: Path):
    path = tmp_path / "sink.duckdb"
    path.write_bytes(b"SQLite format 3\0" + b"\0" * 5000)
    assert read_header(path) is None
    msg = error_of(lambda: open_reader(sink_config(path), WHERE))
    assert msg == (f"{path} is not a DuckDB database file; check [pipelines.orders.sink].duckdb "
                   "(Parquet sinks go in [pipelines.orders.sink].parquet)")


def test_parquet_glob(sample: Path, tmp_path: Path):
    out = tmp_path / "export"
    out.mkdir()
    con = duckdb.connect(str(sample), read_only=True)
    con.execute(f"COPY (SELECT * FROM orders_sink WHERE src_partition = 0) TO '{out / 'part-0.parquet'}'")
    con.execute(f"COPY (SELECT * FROM orders_sink WHERE src_partition = 1) TO '{out / 'part-1.parquet'}'")
    con.execute(f"COPY sink_offsets TO '{out / 'offsets.parquet'}'")
    con.close()
    sink = Sink(parquet=str(out / "part-*.parquet"), offsets_table=str(out / "offsets.parquet"))
    with open_reader(sink, WHERE) as reader:
        summary = [(s.partition, s.rows, s.distinct_offsets) for s in reader.summaries()]
        assert summary == [(0, 12, 10), (1, 3, 3)]
        assert list(reader.islands("orders", 0))[1] == OffsetIsland("orders", 0, 5, 6, 2)
        assert reader.stored_offsets() == [StoredOffset("orders", 0, 12), StoredOffset("orders", 1, 3)]
    msg = error_of(lambda: open_reader(Sink(parquet=str(out / "nothing-*.parquet")), WHERE))
    assert msg == (f"no Parquet files match {out / 'nothing-*.parquet'}; "
                   "check [pipelines.orders.sink].parquet or --sink-parquet")
    msg = error_of(lambda: open_reader(Sink(parquet=str(out / "part-*.parquet"), offset_column="off"), WHERE))
    assert msg.startswith(f"Parquet files {out / 'part-*.parquet'} lacks column off (offset_column); it has ")


# ---- invalid rows, names, frozen copies ---------------------------------------------------------------


def typed_sink(path: Path, offset_type: str, offsets: list, partition_type: str = "INTEGER",
               partitions: list | None = None) -> Sink:
    con = duckdb.connect(str(path))
    con.execute(f"CREATE TABLE s (src_topic VARCHAR, src_partition {partition_type}, "
                f"src_offset {offset_type})")
    parts = partitions or [0] * len(offsets)
    con.executemany("INSERT INTO s VALUES ('orders', ?, ?)", list(zip(parts, offsets, strict=True)))
    con.close()
    return Sink(duckdb=str(path), table="s")


@pytest.mark.parametrize("offset_type, offsets, valid, invalid", [
    ("DOUBLE", [0.0, 1.0, 1.5, float("nan"), float("inf"), -2.0, 1e30],
     [(0, 1, 1)], [(1, "src_offset is above 2^63-1 (e.g. 1e+30)"), (1, "src_offset is negative (e.g. -2.0)"),
                   (3, "src_offset is not an integer (e.g. 1.5)")]),
    ("UBIGINT", [0, 2, 9223372036854775807, 9223372036854775808],
     [(0, 0, 1), (2, 2, 1), (9223372036854775807, 9223372036854775807, 1)],
     [(1, "src_offset is above 2^63-1 (e.g. 9223372036854775808)")]),
    ("HUGEINT", [5, -1, 1 << 100], [(5, 5, 1)],
     [(1, "src_offset is above 2^63-1 (e.g. 1267650600228229401496703205376)"),
      (1, "src_offset is negative (e.g. -1)")]),
    ("DECIMAL(20,2)", [3, 4.25], [(3, 3, 1)], [(1, "src_offset is not an integer (e.g. 4.25)")]),
])
def test_offsets_kafka_cannot_have_are_invalid_rows(tmp_path: Path, offset_type, offsets, valid, invalid):
    with open_reader(typed_sink(tmp_path / "t.duckdb", offset_type, offsets), WHERE) as reader:
        assert [(i.first, i.last, i.multiplicity) for i in reader.islands()] == valid
        assert [(i.first, i.last, i.multiplicity) for i in reader.islands("orders", 0)] == valid
        found = reader.invalid_rows()
        assert [(f.count, f.detail) for f in found] == invalid
        assert {(f.kind, f.topic, f.partition, f.first_offset, f.last_offset) for f in found} == {
            ("invalid_row", "orders", 0, None, None)}
        (summary,) = reader.summaries()
        assert (summary.rows, summary.distinct_offsets, summary.invalid_offset_rows) == (
            len(offsets), len(valid) if offset_type != "DOUBLE" else 2, sum(n for n, _ in invalid))


def test_partitions_kafka_cannot_have_are_invalid_rows(tmp_path: Path):
    sink = typed_sink(tmp_path / "t.duckdb", "BIGINT", [1, 2, 3, 4], partition_type="BIGINT",
                      partitions=[0, -1, 1 << 40, None])
    with open_reader(sink, WHERE) as reader:
        assert reader.partitions() == {("orders", 0): 1}
        assert [(f.topic, f.partition, f.count, f.detail) for f in reader.invalid_rows()] == [
            ("orders", None, 1, "src_partition is NULL"),
            ("orders", None, 1, "src_partition is above 2^31-1 (e.g. 1099511627776)"),
            ("orders", None, 1, "src_partition is negative (e.g. -1)")]


def test_name_parts_follow_duckdb():
    from eosctl.sink.sql import ident, name_parts

    assert name_parts("orders") == ["orders"]
    assert name_parts("main.orders") == ["main", "orders"]
    assert name_parts('"my.table"') == ["my.table"]
    assert name_parts('s."my.table"') == ["s", "my.table"]
    assert name_parts('"a""b"') == ['a"b']
    assert ident('s."my.table"') == '"s"."my.table"'
    for bad in ('"open', "a..b", "a.b.c.d", ""):
        error_of(lambda bad=bad: name_parts(bad))


def test_frozen_copy_is_read_and_deleted_on_every_exit(sample: Path):
    from eosctl.sink import frozen

    sink = sink_config(sample)
    with frozen(sink, WHERE) as fixed:
        copy = Path(fixed.duckdb)
        assert copy != sample and copy.exists() and fixed.frozen_from == sink
        with frozen(fixed, WHERE) as same:  # a frozen sink is read as it is
            assert same == fixed
        # the writer can write to the original meanwhile; the copy doesn't change
        con = duckdb.connect(str(sample))
        con.execute("INSERT INTO orders_sink VALUES ('orders', 1, 3, 'o3', 1.0)")
        con.close()
        with open_reader(fixed, WHERE) as reader:
            assert reader.source == str(sample)  # messages name the user's file
            assert reader.read_point.to_dict() == {"kind": "duckdb", "source": str(sample),
                                                   "copied_at": fixed.at}
            assert [s.rows for s in reader.summaries()] == [12, 3]
    assert not copy.parent.exists()
    with pytest.raises(RuntimeError), frozen(sink, WHERE) as fixed:
        copy = Path(fixed.duckdb)
        raise RuntimeError("boom")
    assert not copy.parent.exists()


def test_frozen_waits_for_a_writer_then_says_who_holds_the_file(sample: Path, monkeypatch):
    from eosctl.sink import frozen

    monkeypatch.setattr("eosctl.sink.duckdb.LOCK_WAIT_S", 0.3)
    with live_writer(sample) as writer:
        program = Path(os.path.realpath(f"/proc/{writer.pid}/exe")).name

        def freeze() -> None:
            with frozen(sink_config(sample), WHERE):
                pass

        assert error_of(freeze) == (
            f"{sample} stayed locked by a running writer ({program}, PID {writer.pid}) for 0.3s; DuckDB lets "
            "nobody read while a writer holds the file, and eosctl reads it between the writer's "
            "transactions: have the writer close the file between batches, or audit a Parquet export with "
            "--sink-parquet")
        assert writer.poll() is None


def test_frozen_parquet_file_list(sample: Path, tmp_path: Path):
    from eosctl.sink import frozen

    out = tmp_path / "export" / "src_partition=0"
    out.mkdir(parents=True)
    con = duckdb.connect(str(sample), read_only=True)
    con.execute(f"COPY (SELECT * EXCLUDE (src_partition) FROM orders_sink WHERE src_partition = 0) "
                f"TO '{out / 'a.parquet'}'")
    with frozen(Sink(parquet=str(tmp_path / "export" / "*" / "*.parquet")), WHERE) as fixed:
        # a file the writer adds after the freeze is not read
        con.execute(f"COPY (SELECT * EXCLUDE (src_partition) FROM orders_sink WHERE src_partition = 0) "
                    f"TO '{out / 'b.parquet'}'")
        with open_reader(fixed, WHERE) as reader:
            assert [(s.partition, s.rows) for s in reader.summaries()] == [(0, 12)]  # hive column kept
    con.close()
    assert not Path(fixed.parquet).parent.parent.exists()


def test_parquet_on_s3_says_which_extension_is_missing():
    msg = error_of(lambda: open_reader(Sink(parquet="s3://bucket/x/*.parquet"), WHERE))
    assert msg.endswith("reading it needs DuckDB's httpfs extension, which eosctl never downloads by "
                        "itself: install it once (python -c \"import duckdb; "
                        "duckdb.install_extension('httpfs')\") or audit a local copy of the files")


def test_islands_from_breaks_equal_islands_from_counted_offsets():
    """The SQL readers' islands from where offsets break (duplicates, gaps, runs of any
    multiplicity, batches cut anywhere) are those of the offsets counted one by one."""
    import random
    from collections import Counter

    import numpy as np

    from eosctl.rules.reconcile import islands_from_counts
    from eosctl.sink.relation import islands_from_breaks, islands_from_offsets

    rng = random.Random(7)
    for _ in range(3000):
        offsets = sorted(o + rng.choice([0, 0, 1, 2]) for o in range(rng.randint(0, 25))
                         for _ in range(rng.choice([1, 1, 2, 3])) if rng.random() > 0.2)
        breaks = [(o, offsets[i + 1] if i + 1 < len(offsets) else None) for i, o in enumerate(offsets)
                  if i + 1 == len(offsets) or offsets[i + 1] - 1 != o]
        cut = rng.randint(0, len(breaks))
        got = islands_from_breaks("t", 3, offsets[0] if offsets else None, [breaks[:cut], breaks[cut:]])
        want = list(islands_from_counts(sorted(Counter(offsets).items())))
        assert [(i.first, i.last, i.multiplicity) for i in got] == want, offsets
        # The same from the offsets themselves (PostgreSQL's pages of offsets), chunks cut anywhere.
        cuts = sorted(rng.randint(0, len(offsets)) for _ in range(rng.randint(0, 3)))
        chunks = [np.array(offsets[a:b], dtype=np.int64) for a, b in
                  zip([0, *cuts], [*cuts, len(offsets)], strict=True)]
        got = islands_from_offsets("t", 3, chunks)
        assert [(i.first, i.last, i.multiplicity) for i in got] == want, (offsets, cuts)

