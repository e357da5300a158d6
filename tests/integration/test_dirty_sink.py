"""Dirty sinks through the CLI (`audit`, `ledger`, `snapshot`): invalid_row, offset_mismatch with one side
missing, schema-qualified table names (issue 9 cases 8 and 9, issue 10 items 5, 7 and 10).

One source topic per module: partition 0 holds offsets 0..9, partition 1 offsets 0..4 (plain produce,
no transactions), so every expected count below is exact.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import duckdb
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.helpers import eosctl

pytestmark = pytest.mark.integration

MAX = (1 << 63) - 1
P0, P1 = 10, 5  # records per partition


@pytest.fixture(scope="module")
def topic(bootstrap: str) -> str:
    import uuid

    name = "dirty" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=2, replication_factor=1)])[name].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False})
    for partition, n in ((0, P0), (1, P1)):
        for i in range(n):
            producer.produce(name, value=f"v{i}".encode(), partition=partition)
    assert producer.flush(30) == 0
    return name


def make_sink(path: Path, rows: list[tuple], offset_type: str = "BIGINT", table: str = "orders_sink",
              schema: str | None = None, stored: list[tuple] | None = None) -> Path:
    con = duckdb.connect(str(path))
    qualified = f'"{table}"' if schema is None else f'{schema}."{table}"'
    if schema:
        con.execute(f"CREATE SCHEMA {schema}")
    con.execute(f"CREATE TABLE {qualified} (src_topic VARCHAR, src_partition INTEGER, "
                f"src_offset {offset_type}, order_id VARCHAR)")
    con.executemany(f"INSERT INTO {qualified} VALUES (?, ?, ?, ?)",
                    [(*r, f"k{i}") for i, r in enumerate(rows)])
    if stored is not None:
        con.execute('CREATE TABLE sink_offsets (topic VARCHAR, "partition" INTEGER, next_offset BIGINT)')
        con.executemany("INSERT INTO sink_offsets VALUES (?, ?, ?)", stored)
    con.close()
    return path


def clean_rows(topic: str) -> list[tuple]:
    return [(topic, 0, o) for o in range(P0)] + [(topic, 1, o) for o in range(P1)]


cli = eosctl  # 200 columns: no cell wraps


def ledger_config(tmp_path: Path, bootstrap: str, topic: str, sink: Path, group: str | None = None) -> Path:
    """A config of pipeline `p` whose DuckDB sink has its offsets table (what `eosctl ledger` reads)."""
    cfg = tmp_path / "eosctl.toml"
    group_line = f'group = "{group}"\n' if group else ""
    cfg.write_text(f"""
[clusters.local]
bootstrap_servers = "{bootstrap}"

[pipelines.p]
cluster = "local"
source_topics = ["{topic}"]
{group_line}
[pipelines.p.sink]
duckdb = "{sink}"
table = "orders_sink"
offsets_table = "sink_offsets"
""")
    return cfg


def as_tuples(findings: list[dict]) -> list[tuple]:
    return [(f["kind"], f["topic"], f["partition"], f["first_offset"], f["last_offset"], f["count"],
             f.get("detail")) for f in findings]


def dirty_rows(topic: str) -> list[tuple]:
    return [*clean_rows(topic), (None, 0, 3), (topic, None, 4), (topic, 0, None), (topic, 0, None),
            (topic, 0, -3), (topic, 1, MAX)]


DIRTY_INVALID = [  # (topic known?, partition, detail, count), in report order
    (False, 0, "src_topic is NULL", 1),
    (True, None, "src_partition is NULL", 1),
    (True, 0, "src_offset is NULL", 2),
    (True, 0, "src_offset is negative (e.g. -3)", 1),
]


def expected_invalid(topic: str) -> list[tuple]:
    return [("invalid_row", topic if known else None, p, None, None, n, detail)
            for known, p, detail, n in DIRTY_INVALID]


# ---- audit (Spark) ----------------------------------------------------------------------------------


def test_audit_reports_invalid_rows_and_a_row_at_2_63_minus_1(topic, bootstrap, spark, tmp_path):
    sink = make_sink(tmp_path / "dirty.duckdb", dirty_rows(topic))
    base = ["audit", "--bootstrap", bootstrap, "--topic", topic, "--sink-duckdb", str(sink),
            "--sink-table", "orders_sink"]
    r = cli(*base, "--format", "json")
    assert r.exit_code == 1, r.stderr
    report = json.loads(r.stdout)
    assert report["verdict"] == "fail"
    assert as_tuples(report["findings"]) == [
        *expected_invalid(topic)[:1],  # topic unknown sorts first
        *expected_invalid(topic)[1:],
        ("phantom_beyond_hw", topic, 1, MAX, MAX, 1, None),
    ]
    assert report["summary"]["findings"]["invalid_row"] == 4
    assert report["summary"]["failing_findings"] == 5
    # the valid rows still reconcile exactly: nothing missing, nothing doubled
    assert [(p["partition"], p["expected_records"], p["sink_rows"]) for p in report["partitions"]] == [
        (0, P0, P0), (1, P1, P1 + 1)]

    # --fail-on: invalid_row fails only when asked to
    r = cli(*base, "--format", "json", "--fail-on", "gap,phantom_beyond_hw")
    assert r.exit_code == 1 and json.loads(r.stdout)["summary"]["failing_findings"] == 1
    r = cli(*base, "--format", "json", "--fail-on", "invalid_row")
    assert r.exit_code == 1 and json.loads(r.stdout)["summary"]["failing_findings"] == 4
    r = cli(*base, "--format", "json", "--fail-on", "gap")
    assert r.exit_code == 0 and json.loads(r.stdout)["verdict"] == "pass"

    # JUnit: each invalid_row is a <failure>, the rows without a topic in a testcase of their own
    r = cli(*base, "--format", "junit")
    assert r.exit_code == 1
    suite = ET.fromstring(r.stdout)
    failures = [(case.get("classname"), case.get("name"), f.get("type"), f.get("message"))
                for case in suite.iter("testcase") for f in case.iter("failure")]
    why = ": rows without valid source coordinates"  # the finding's cause, after what was found
    assert ("(no topic)", "partition 0: invalid_row", "invalid_row",
            f"invalid_row: src_topic is NULL (1 row){why}") in failures
    assert (topic, "(no partition): invalid_row", "invalid_row",
            f"invalid_row: src_partition is NULL (1 row){why}") in failures
    assert sum(1 for f in failures if f[2] == "invalid_row") == 4

    # the table names the column and the problem
    r = cli(*base)
    assert r.exit_code == 1
    assert "src_offset is negative (e.g. -3)" in r.stdout and "4 invalid_row" in r.stdout


def test_audit_of_a_clean_sink_still_passes(topic, bootstrap, spark, tmp_path):
    sink = make_sink(tmp_path / "clean.duckdb", clean_rows(topic))
    r = cli("audit", "--bootstrap", bootstrap, "--topic", topic, "--sink-duckdb", str(sink),
            "--sink-table", "orders_sink", "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["findings"] == []


def test_offset_mismatch_with_one_side_missing_agrees_between_audit_and_ledger(topic, bootstrap, spark,
                                                                              tmp_path, unique):
    # p0: the sink stored next offset 10, the group never committed; p1: the group committed 5, the sink
    # stored nothing. Both mean a restart from the other side re-reads (or skips) every record.
    group = unique + "-g"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 1, P1)], asynchronous=False)
    finally:
        consumer.close()
    sink = make_sink(tmp_path / "offsets.duckdb", clean_rows(topic), stored=[(topic, 0, P0)])
    args = ["--bootstrap", bootstrap, "--topic", topic, "--group", group, "--sink-duckdb", str(sink),
            "--sink-table", "orders_sink", "--format", "json"]
    r = cli("audit", *args, "--offsets-table", "sink_offsets")
    assert r.exit_code == 1, r.stderr
    audited = [(f["partition"], f["first_offset"], f["last_offset"], f["count"])
               for f in json.loads(r.stdout)["findings"] if f["kind"] == "offset_mismatch"]
    assert audited == [(0, 0, P0 - 1, P0), (1, 0, P1 - 1, P1)]
    # the ledger reads the offsets table from the pipeline config; flags use the same function
    cfg = ledger_config(tmp_path, bootstrap, topic, sink, group)
    r = cli("ledger", "-c", str(cfg), "--pipeline", "p", "--format", "json")
    assert r.exit_code == 1, r.stderr
    ledger = json.loads(r.stdout)
    flagged = [(p["partition"], f["first_offset"], f["last_offset"], f["count"])
               for p in ledger["partitions"] for f in p["flags"] if f["kind"] == "offset_mismatch"]
    assert flagged == audited


# ---- ledger and snapshot (no Spark) ------------------------------------------------------------------


def test_ledger_flags_invalid_rows_instead_of_crashing(topic, bootstrap, tmp_path):
    sink = make_sink(tmp_path / "dirty.duckdb", dirty_rows(topic),
                     stored=[(topic, 0, P0), (topic, None, 3), (None, 1, 5)])
    cfg = ledger_config(tmp_path, bootstrap, topic, sink)
    r = cli("ledger", "-c", str(cfg), "--pipeline", "p", "--format", "json")
    assert r.exit_code == 1, r.stderr
    ledger = json.loads(r.stdout)
    invalid = [(p["topic"], p["partition"], f["count"], f["message"]) for p in ledger["partitions"]
               for f in p["flags"] if f["kind"] == "invalid_row"]
    msg = "sink row{} no Kafka record can match: {}"
    assert invalid == [
        (None, 0, 1, "1 " + msg.format("", "src_topic is NULL")),
        (None, 1, 1, "1 " + msg.format("", "offsets table sink_offsets: topic is NULL")),
        (topic, None, 1, "1 " + msg.format("", "offsets table sink_offsets: partition is NULL")),
        (topic, None, 1, "1 " + msg.format("", "src_partition is NULL")),
        (topic, 0, 2, "2 " + msg.format("s", "src_offset is NULL")),
        (topic, 0, 1, "1 " + msg.format("", "src_offset is negative (e.g. -3)")),
    ]
    p0 = next(p for p in ledger["partitions"] if (p["topic"], p["partition"]) == (topic, 0))
    assert (p0["rows"], p0["distinct_offsets"], p0["min_offset"], p0["max_offset"], p0["duplicate_rows"]) == (
        P0 + 3, P0, 0, P0 - 1, 0)
    p1 = next(p for p in ledger["partitions"] if (p["topic"], p["partition"]) == (topic, 1))
    assert [(f["kind"], f["first_offset"], f["count"]) for f in p1["flags"]] == [
        ("phantom_beyond_hw", MAX, 1)]

    # the table form shows them too, and a snapshot stores them
    r = cli("ledger", "-c", str(cfg), "--pipeline", "p")
    assert r.exit_code == 1 and "src_partition is NULL" in r.stdout
    out = tmp_path / "snap.duckdb"
    r = cli("snapshot", "-c", str(cfg), "--pipeline", "p", "--out", str(out), "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["sections"]["ledger"] == "ok"
    con = duckdb.connect(str(out), read_only=True)
    try:
        assert con.execute("SELECT count(*), sum(count) FROM ledger_flags WHERE kind = 'invalid_row'"
                           ).fetchone() == (6, 7)
    finally:
        con.close()
    from eosctl.inspection.snapshot import load_snapshot

    loaded = load_snapshot(out)  # what `eosctl tui --snapshot` shows
    assert sorted((p.topic or "", f.count) for p, f in loaded.ledger.flags if f.kind == "invalid_row") == [
        ("", 1), ("", 1), (topic, 1), (topic, 1), (topic, 1), (topic, 2)]


def test_offsets_beyond_int64_or_not_integers_are_invalid_rows(topic, bootstrap, tmp_path):
    rows = [(topic, 0, str(o)) for o in range(P0)] + [(topic, 1, str(o)) for o in range(P1)]
    rows += [(topic, 0, "9223372036854775808"), (topic, 0, "12x"), (topic, 0, "1.5"), (topic, 1, " 7 "),
             (topic, 1, "-0")]
    sink = make_sink(tmp_path / "text.duckdb", rows, offset_type="VARCHAR")
    r = cli("ledger", "--bootstrap", bootstrap, "--topic", topic, "--sink-duckdb", str(sink),
            "--sink-table", "orders_sink", "--format", "json")
    assert r.exit_code == 1, r.stderr
    flags = [(p["partition"], f["kind"], f["first_offset"], f["count"], f["message"].split(": ", 1)[-1])
             for p in json.loads(r.stdout)["partitions"] for f in p["flags"]]
    assert flags == [
        (0, "invalid_row", None, 1, "src_offset is above 2^63-1 (e.g. 9223372036854775808)"),
        (0, "invalid_row", None, 2, "src_offset is not an integer (e.g. 1.5)"),
        # " 7 " is offset 7, "-0" is 0: a duplicate; 7 is beyond partition 1's HW
        (1, "duplicate", 0, 1, "1 extra sink row for offsets stored more than once at offsets 0"),
        (1, "phantom_beyond_hw", 7, 1, "1 sink row at or beyond the high watermark at offsets 7"),
    ]


@pytest.mark.parametrize("table, create", [
    ("main.orders_sink", None),
    ("s.orders_sink", "s"),
    ('"my.table"', None),
])
def test_schema_qualified_and_quoted_table_names(topic, bootstrap, tmp_path, table, create):
    name = "my.table" if table.startswith('"') else "orders_sink"
    sink = make_sink(tmp_path / "t.duckdb", clean_rows(topic), table=name, schema=create)
    r = cli("ledger", "--bootstrap", bootstrap, "--topic", topic, "--sink-duckdb", str(sink),
            "--sink-table", table, "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert [p["rows"] for p in json.loads(r.stdout)["partitions"]] == [P0, P1]


def test_a_dotted_table_name_unquoted_says_how_to_quote_it(topic, bootstrap, tmp_path):
    sink = make_sink(tmp_path / "t.duckdb", clean_rows(topic), table="my.table")
    r = cli("ledger", "--bootstrap", bootstrap, "--topic", topic, "--sink-duckdb", str(sink),
            "--sink-table", "my.table")
    assert r.exit_code == 2
    assert r.stderr.strip().splitlines() == [
        f"eosctl: error: {sink} has no table 'my.table' (tables: \"my.table\"); check [sink].table "
        f"(schema.table, and double quotes for a name with dots: \"my.table\")"]


def test_audit_with_a_quoted_dotted_table(topic, bootstrap, spark, tmp_path):
    sink = make_sink(tmp_path / "t.duckdb", clean_rows(topic), table="my.table")
    r = cli("audit", "--bootstrap", bootstrap, "--topic", topic, "--sink-duckdb", str(sink),
            "--sink-table", '"my.table"', "--format", "json")
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)
    assert [p["sink_rows"] for p in report["partitions"]] == [P0, P1]
    assert report["sink"] == f'{sink} ("my.table")'


def test_parquet_on_s3_without_httpfs_is_one_whole_line(topic, bootstrap):
    r = cli("ledger", "--bootstrap", bootstrap, "--topic", topic, "--sink-parquet", "s3://bucket/sink/*.parquet")
    assert r.exit_code == 2
    assert r.stderr.splitlines() == [
        "eosctl: error: cannot read the columns of read_parquet('s3://bucket/sink/*.parquet'): reading it "
        "needs DuckDB's httpfs extension, which eosctl never downloads by itself: install it once (python -c "
        "\"import duckdb; duckdb.install_extension('httpfs')\") or audit a local copy of the files"]
