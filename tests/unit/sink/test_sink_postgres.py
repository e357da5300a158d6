"""The PostgreSQL sink against a real server (the session's `postgres` fixture): the same answers as the
DuckDB reader on the same rows, one snapshot per command that a writer never waits for, and one line
(exit 2, no password) for every way the connection or the table can be wrong."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import psycopg
import pytest

from eosctl.base.errors import SinkError
from eosctl.config.model import Sink
from eosctl.sink import OffsetIsland, StoredOffset, frozen, open_reader
from tests.support.helpers import eosctl
from tests.unit.sink.sinksample import ISLANDS as ISLANDS_OF_SAMPLE
from tests.unit.sink.sinksample import SAMPLE, STORED, assert_sample_answers

WHERE = "pipelines.orders.sink"


def fill(uri: str, offsets: dict[tuple[str, int], list[int]], stored: dict[tuple[str, int], int],
         offset_type: str = "BIGINT") -> None:
    with psycopg.connect(uri, autocommit=True) as con:
        con.execute(f"CREATE TABLE orders_sink (src_topic TEXT, src_partition INTEGER, "
                    f"src_offset {offset_type}, order_id TEXT)")
        con.execute('CREATE TABLE sink_offsets (topic TEXT, "partition" INTEGER, next_offset BIGINT)')
        with con.cursor() as cur:
            cur.executemany("INSERT INTO orders_sink VALUES (%s, %s, %s, %s)",
                            [(t, p, o, f"k{o % 5}") for (t, p), offs in offsets.items() for o in offs])
            cur.executemany("INSERT INTO sink_offsets VALUES (%s, %s, %s)",
                            [(t, p, n) for (t, p), n in stored.items()])


def sink_of(uri: str, **kw) -> Sink:
    return Sink(postgres=uri, table=kw.pop("table", "orders_sink"),
                offsets_table=kw.pop("offsets_table", "sink_offsets"), **kw)


def error_of(fn) -> str:
    with pytest.raises(SinkError) as info:
        fn()
    message = str(info.value)
    assert "\n" not in message and info.value.exit_code == 2
    return message


@pytest.fixture
def sample(pg_db: str) -> str:
    fill(pg_db, SAMPLE, STORED)
    return pg_db


def test_same_answers_as_duckdb(sample: str, postgres):
    with open_reader(sink_of(sample, key_column="order_id"), WHERE) as reader:
        assert_sample_answers(reader)
        keys = [b.to_pylist() for b in reader.committed_keys("orders", 0, [(0, 4), (10, 11)])]
        assert sorted((r["key"], r["offset"]) for batch in keys for r in batch) == [
            ("k0", 0), ("k0", 10), ("k1", 1), ("k1", 11), ("k2", 2), ("k3", 3), ("k4", 4)]
        point = reader.read_point.to_dict()
        assert point["kind"] == "postgres" and point["server_version"].split(".")[0].isdigit()
        assert postgres.password not in point["source"] and "@/" in point["source"]


def test_an_index_on_topic_and_partition_gives_the_same_answers(sample: str):
    """A JDBC sink's key (topic, partition, offset): partitions found by probing the index, islands read
    one partition at a time in its order, the rows Kafka can't have found by probing it too (each counted
    once, under its first bad column); the answers are the unindexed table's."""
    with psycopg.connect(sample, autocommit=True) as con:
        con.execute("INSERT INTO orders_sink VALUES ('', 0, 1, NULL), ('orders', -1, 1, NULL), "
                    "(NULL, 2, 1, NULL), ('orders', NULL, 1, NULL), ('orders', 1, -5, NULL), "
                    "('orders', 0, NULL, NULL), ('', -1, NULL, NULL), ('orders', -2, -2, NULL), "
                    "('other', NULL, NULL, NULL)")
    tps = [("orders", 0), ("orders", 1)]
    with open_reader(sink_of(sample), WHERE) as plain:
        assert not plain.indexed
        want = (set(plain.partitions()), list(plain.islands_in(tps)), plain.invalid_rows())
    with psycopg.connect(sample, autocommit=True) as con:
        con.execute("CREATE INDEX ON orders_sink (src_topic, src_partition, src_offset)")
        con.execute("ANALYZE orders_sink")
    with open_reader(sink_of(sample), WHERE) as reader:
        assert reader.indexed
        assert (set(reader.partitions()), list(reader.islands_in(tps)), reader.invalid_rows()) == want
    assert want[0] == {("orders", 0), ("orders", 1)}
    assert want[1] == ISLANDS_OF_SAMPLE
    # each row once, under its first bad column; the partition named where it is valid
    assert [(f.topic, f.partition, f.count, f.detail) for f in want[2]] == [
        (None, None, 1, "src_topic is empty"), (None, 0, 1, "src_topic is empty"),
        (None, 2, 1, "src_topic is NULL"), ("orders", None, 1, "src_partition is NULL"),
        ("orders", None, 2, "src_partition is negative (e.g. -1)"),
        ("orders", 0, 1, "src_offset is NULL"), ("orders", 1, 1, "src_offset is negative (e.g. -5)"),
        ("other", None, 1, "src_partition is NULL")]


@pytest.mark.parametrize("offset_type", ["BIGINT", "INTEGER"])
def test_offsets_read_in_pages_of_the_index_give_the_same_islands(pg_db: str, monkeypatch, offset_type: str):
    """With the offset third in the index, a partition's offsets come in pages: a duplicated offset
    across a page's end, and a page that holds one offset only, still give its exact islands."""
    import eosctl.sink.postgres as pg

    offsets = [0, 1, 1, 2, 3, 3, 3, 3, 3, 3, 3, 4, 6, 7, 7, 8, 9, 9, 12]
    fill(pg_db, {("orders", 0): offsets, ("orders", 1): [5]}, {}, offset_type)
    with open_reader(sink_of(pg_db), WHERE) as plain:  # no index: the server's lead() over sorted rows
        want = [(i.first, i.last, i.multiplicity) for i in plain.islands("orders", 0)]
    with psycopg.connect(pg_db, autocommit=True) as con:
        con.execute("CREATE INDEX ON orders_sink (src_topic, src_partition, src_offset)")
    monkeypatch.setattr(pg, "OFFSET_CHUNK", 3)
    pages: list[str] = []
    with open_reader(sink_of(pg_db), WHERE) as reader:
        real = reader._one
        monkeypatch.setattr(reader, "_one", lambda sql: pages.append(sql) or real(sql))
        got = [(i.first, i.last, i.multiplicity) for i in reader.islands("orders", 0)]
    assert got == want
    # 9 pages of 3 (from 0, 1, 2, 3, 4, 7, 8, 9, 12) and offset 3's rows counted: its page held only it
    assert len(pages) == 10 and [sql for sql in pages if "count(*)" in sql][0].endswith('"src_offset" = 3')
    assert got == [(0, 0, 1), (1, 1, 2), (2, 2, 1), (3, 3, 7), (4, 4, 1), (6, 6, 1), (7, 7, 2), (8, 8, 1),
                   (9, 9, 2), (12, 12, 1)]


@pytest.mark.parametrize("offset_type, offsets, valid, invalid", [
    ("DOUBLE PRECISION", [0.0, 1.0, 1.5, float("nan"), float("inf"), -2.0, 1e30],
     [(0, 1, 1)], [(1, "src_offset is above 2^63-1 (e.g. 1e+30)"), (1, "src_offset is negative (e.g. -2)"),
                   (3, "src_offset is not an integer (e.g. 1.5)")]),
    ("NUMERIC(30,2)", [3, 4.25, 10 ** 25], [(3, 3, 1)],
     [(1, "src_offset is above 2^63-1 (e.g. 10000000000000000000000000.00)"),
      (1, "src_offset is not an integer (e.g. 4.25)")]),
    ("TEXT", ["7", " 8 ", "x", "-3", "99999999999999999999"], [(7, 8, 1)],
     [(1, "src_offset is above 2^63-1 (e.g. 99999999999999999999)"), (1, "src_offset is negative (e.g. -3)"),
      (1, "src_offset is not an integer (e.g. x)")]),
])
def test_offsets_kafka_cannot_have_are_invalid_rows(pg_db: str, offset_type, offsets, valid, invalid):
    fill(pg_db, {}, {}, offset_type)
    with psycopg.connect(pg_db, autocommit=True) as con, con.cursor() as cur:
        cur.executemany("INSERT INTO orders_sink VALUES ('orders', 0, %s, NULL)", [(o,) for o in offsets])
    with open_reader(sink_of(pg_db, offsets_table=None), WHERE) as reader:
        assert [(i.first, i.last, i.multiplicity) for i in reader.islands()] == valid
        assert [(i.first, i.last, i.multiplicity) for i in reader.islands("orders", 0)] == valid
        assert [(f.count, f.detail) for f in reader.invalid_rows()] == invalid


def test_one_snapshot_per_command_and_the_writer_never_waits(sample: str):
    sink = sink_of(sample)
    done: list[int] = []
    with frozen(sink, WHERE) as pinned:
        assert pinned.at and pinned.frozen_from == sink
        # A writer keeps committing while the command reads: never blocked (lock_timeout would fail it).
        def write() -> None:
            with psycopg.connect(sample, autocommit=True) as con:
                con.execute("SET lock_timeout = '5s'")
                for o in range(100, 150):
                    con.execute("INSERT INTO orders_sink VALUES ('orders', 1, %s, 'new')", (o,))
                    con.execute("UPDATE sink_offsets SET next_offset = %s WHERE \"partition\" = 1", (o + 1,))
                    done.append(o)

        with open_reader(pinned, WHERE) as first:
            writer = threading.Thread(target=write)
            writer.start()
            islands = list(first.islands("orders", 1))
            writer.join(timeout=60)
        assert len(done) == 50
        # Every reader of the command, before and after the writer's commits, reads the pinned point.
        with open_reader(pinned, WHERE) as later:
            assert list(later.islands("orders", 1)) == islands == [OffsetIsland("orders", 1, 0, 2, 1)]
            assert later.stored_offsets()[1] == StoredOffset("orders", 1, 3)
            assert later.read_point.at["snapshot"] == pinned.at
    with open_reader(sink, WHERE) as now:  # the next command sees the writer's rows
        assert list(now.islands("orders", 1))[-1] == OffsetIsland("orders", 1, 100, 149, 1)
    with pytest.raises(SinkError, match="the command that pinned it has ended"):
        open_reader(pinned, WHERE)


def test_mixed_case_names_and_a_schema(pg_db: str, unique: str):
    # Unquoted names fold to lower case in PostgreSQL: the user's app.orders is the table "App"."Orders".
    with psycopg.connect(pg_db, autocommit=True) as con:
        con.execute(f'CREATE TABLE "{unique}"."Orders" ("Topic" TEXT, "Part" INT, "Off" BIGINT)')
        con.execute(f"INSERT INTO \"{unique}\".\"Orders\" VALUES ('t', 0, 0), ('t', 0, 1)")
    sink = Sink(postgres=pg_db, table=f"{unique.upper()}.orders", topic_column="topic",
                partition_column="part", offset_column="off")
    with open_reader(sink, WHERE) as reader:
        assert list(reader.islands()) == [OffsetIsland("t", 0, 0, 1, 1)]


# ---- one line, exit 2, never the password ---------------------------------------------------------


def config(tmp_path: Path, sink_lines: str) -> Path:
    path = tmp_path / "eosctl.toml"
    path.write_text(f"""
[clusters.c]
bootstrap_servers = "127.0.0.1:1"

[pipelines.orders]
cluster = "c"
source_topics = ["orders"]

[pipelines.orders.sink]
{sink_lines}
""")
    return path


def run_ledger(path: Path, env: dict[str, str]) -> tuple[int, str]:
    result = eosctl("ledger", "-c", str(path), env=env, columns=None, check=False)
    return result.exit_code, result.output


def test_bad_uri_credentials_table_and_column_are_one_line(sample: str, postgres, tmp_path: Path):
    secret = postgres.password
    good = sample.replace(f":{secret}@", ":${PGPW}@")
    wrong = {"PGPW": "not-" + secret}
    socket, port = postgres.socket_dir, postgres.port  # the socket file is named for the port
    cases = [
        (f'postgres = "mysql://u:{secret}@h/db"\ntable = "orders_sink"', {},
         "[pipelines.orders.sink].postgres is not a PostgreSQL URI; write postgresql://USER@HOST:PORT/DB, or "
         "postgresql://USER@/DB?host=/socket/dir for a Unix socket (a password goes in from the environment: "
         "postgresql://USER:${PGPASSWORD}@HOST/DB)"),
        (f'postgres = "{good}"\ntable = "orders_sink"', wrong,
         f"PostgreSQL at {good.replace(':${PGPW}', '')} refused the password of user eosctl; check the "
         "password in [pipelines.orders.sink].postgres (e.g. from ${PGPASSWORD})"),
        (f'postgres = "postgresql://eosctl:${{PGPW}}@/nodb?host={socket}&port={port}"\ntable = "orders_sink"',
         {"PGPW": secret},
         f"PostgreSQL at postgresql://eosctl@/nodb?host={socket}&port={port} has no database nodb; check "
         "[pipelines.orders.sink].postgres"),
        (f'postgres = "postgresql://eosctl:${{PGPW}}@/x?host={tmp_path}&port=5432"', {"PGPW": secret},
         f"cannot connect to PostgreSQL at postgresql://eosctl@/x?host={tmp_path}&port=5432: No such file or "
         "directory; check [pipelines.orders.sink].postgres and that the server is running"),
        # The server is the session's: other tests' schemas may be listed after this schema's own tables.
        (f'postgres = "{good}"\ntable = "nope"', {"PGPW": secret},
         re.compile(re.escape(f"{good.replace(':${PGPW}', '')} has no table 'nope' (tables: orders_sink, "
                              "sink_offsets") + r"(, .+)?" + re.escape(
             "); check [pipelines.orders.sink].table (schema.table, and double quotes for a name with dots: "
             "\"my.table\")"))),
        (f'postgres = "{good}"\ntable = "orders_sink"\noffset_column = "off"', {"PGPW": secret},
         f"table orders_sink in {good.replace(':${PGPW}', '')} lacks column off (offset_column); it has "
         "src_topic, src_partition, src_offset, order_id; set the column names in [pipelines.orders.sink]"),
    ]
    for lines, env, expected in cases:
        code, out = run_ledger(config(tmp_path, lines), env)
        if isinstance(expected, re.Pattern):
            assert code == 2 and len(out.strip().splitlines()) == 1, (lines, out)
            assert expected.fullmatch(out.strip().removeprefix("eosctl: error: ")), (lines, out)
        else:
            assert (code, out.strip().splitlines()) == (2, [f"eosctl: error: {expected}"]), lines
        assert secret not in out


def test_without_an_index_a_task_reads_its_partitions_in_one_pass(pg_db: str, monkeypatch):
    """With no index, every query of one partition passes over the whole table: a task's partitions are
    read by one query (one pass), but for a partition holding a large share of the task's rows."""
    from auditors import task
    from auditors.plan import WorkItem
    from auditors.task import _group_islands

    monkeypatch.setattr(task, "OWN_QUERY_ROWS", 3)
    offsets = {("orders", p): list(range(4)) for p in range(7)} | {("orders", 7): list(range(40))}
    fill(pg_db, offsets, {})
    with open_reader(sink_of(pg_db), WHERE) as reader:
        assert reader.scans_all_per_partition
        calls: list[tuple[str, object]] = []
        one, many = reader.islands, reader.islands_in
        monkeypatch.setattr(reader, "islands", lambda t, p: calls.append(("islands", p)) or one(t, p))
        monkeypatch.setattr(reader, "islands_in",
                            lambda tps: calls.append(("islands_in", len(tps))) or many(tps))
        items = [WorkItem(t, p, True, sink_rows=len(offs)) for (t, p), offs in offsets.items()]
        got = {item.partition: [(i.first, i.last, i.multiplicity) for i in islands]
               for item, islands in _group_islands(reader, items)}
    assert calls == [("islands", 7), ("islands_in", 7)]
    assert got == {p: [(0, len(offs) - 1, 1)] for (_, p), offs in offsets.items()}


def test_only_an_index_on_the_columns_themselves_is_counted_on(sample: str):
    """An expression between topic and partition, or a partial index, can't seek a partition's rows: the
    reader doesn't count on them (a query that did would pass over the whole table for every page)."""
    with psycopg.connect(sample, autocommit=True) as con:
        con.execute("CREATE INDEX ON orders_sink (src_topic, lower(order_id), src_partition, src_offset)")
        con.execute("CREATE INDEX ON orders_sink (src_topic, src_partition, src_offset) WHERE src_offset > 0")
    with open_reader(sink_of(sample), WHERE) as reader:
        assert (reader.indexed, reader.ordered) == (False, False)
        assert list(reader.islands_in([("orders", 0), ("orders", 1)])) == ISLANDS_OF_SAMPLE
    with psycopg.connect(sample, autocommit=True) as con:
        con.execute("CREATE INDEX ON orders_sink (src_topic, src_partition, src_offset)")
    with open_reader(sink_of(sample), WHERE) as reader:
        assert (reader.indexed, reader.ordered) == (True, True)
        assert list(reader.islands_in([("orders", 0), ("orders", 1)])) == ISLANDS_OF_SAMPLE
