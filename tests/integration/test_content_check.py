"""The content check on the session's broker: each sink row's key against the key of the record at its offset
(issue 31 items 3 and 5), both engines.

The source: two partitions, each written by a transactional producer in three committed transactions of 5
keyed records and one aborted one in between (partition p: records 0..4, marker 5, 5 aborted 6..10, marker
11, 12..16, marker 17, 18..22, marker 23; high watermark 24), so every expected offset below is exact.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from eosctl.cli import main
from tests.support.helpers import eosctl
from tests.support.markers import markers_written

pytestmark = pytest.mark.integration

DATA = [o for o in range(24) if o not in (5, 11, 17, 23) and not 6 <= o <= 10]  # committed offsets


@pytest.fixture(scope="module")
def source(bootstrap: str) -> tuple[str, dict[int, dict[int, str]]]:
    """(topic, {partition: {offset: key}}) of the committed records."""
    import uuid

    topic = "content" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(30)
    keys: dict[int, dict[int, str]] = {0: {}, 1: {}}
    for partition in (0, 1):
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-{partition}",
                      "linger.ms": 50})
        p.init_transactions(30)
        for txn in range(4):
            p.begin_transaction()
            for i in range(5):
                key = f"p{partition}-t{txn}-{i}"

                def done(err, msg, key=key, txn=txn):
                    assert err is None
                    if txn != 1:
                        keys[msg.partition()][msg.offset()] = key
                p.produce(topic, key=key.encode(), value=value_of(key), partition=partition,
                          on_delivery=done)
            p.flush(30)
            (p.abort_transaction if txn == 1 else p.commit_transaction)(30)
    markers_written(bootstrap, f"{topic}-0", f"{topic}-1")
    assert sorted(keys[0]) == sorted(keys[1]) == DATA
    return topic, keys


def value_of(key: str) -> bytes:
    return f"value of {key}".encode()


def make_sink(path: Path, topic: str, rows: list[tuple[int, int, str]]) -> Path:
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE orders_sink (src_topic VARCHAR, src_partition INTEGER, src_offset BIGINT, "
                "order_id VARCHAR)")
    con.executemany("INSERT INTO orders_sink VALUES (?, ?, ?, ?)", [(topic, *r) for r in rows])
    con.close()
    return path


def run_audit(bootstrap: str, topic: str, sink: Path, *extra: str, check: bool | None = True) -> Any:
    """The audit with --content-check (check=True), --no-content-check (False) or neither (None)."""
    flag = {True: ["--content-check"], False: ["--no-content-check"], None: []}[check]
    return eosctl("audit", "--bootstrap", bootstrap, "--topic", topic, "--sink-duckdb", str(sink),
                  "--sink-table", "orders_sink", "--key-column", "order_id", "--format", "json", *flag,
                  *extra)


def audit(bootstrap: str, topic: str, sink: Path, *extra: str, check: bool | None = True) -> tuple[int, dict]:
    r = run_audit(bootstrap, topic, sink, *extra, check=check)
    return r.exit_code, json.loads(r.stdout)


def found(report: dict) -> list[tuple]:
    return [(f["kind"], f["partition"], f["first_offset"], f["last_offset"], f["count"],
             (f.get("cause") or {}).get("rule"), (f.get("cause") or {}).get("shift"))
            for f in report["findings"]]


def off_by_one_rows(keys: dict[int, dict[int, str]]) -> list[tuple[int, int, str]]:
    """Partition 0 stored at offset+1 (an off-by-one writer); partition 1 right but for two rows far apart
    whose keys are swapped (rows that belong to other records)."""
    rows = [(0, o + 1, k) for o, k in sorted(keys[0].items())]
    p1 = dict(keys[1])
    p1[1], p1[19] = p1[19], p1[1]
    return rows + [(1, o, k) for o, k in sorted(p1.items())]


EXPECTED = [
    # every row of partition 0 (stored 1..23) holds the record one below: one finding names the shift
    ("content_mismatch", 0, 1, 23, 15, "shifted_coordinates", 1),
    ("content_mismatch", 1, 1, 1, 1, "different_record", None),
    ("content_mismatch", 1, 19, 19, 1, "different_record", None),
]


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_off_by_one_and_swapped_rows_are_content_findings(source, bootstrap, tmp_path, engine, request):
    if engine == "spark":
        request.getfixturevalue("spark")
    topic, keys = source
    sink = make_sink(tmp_path / "sink.duckdb", topic, off_by_one_rows(keys))
    code, report = audit(bootstrap, topic, sink, "--engine", engine)
    assert code == 1
    assert found(report) == EXPECTED  # nothing else: no gap or phantom made up by the shift
    assert report["summary"]["findings"]["content_mismatch"] == 3
    shift = report["findings"][0]
    assert shift["detail"] == "the sink stores offset+1: each row holds the record at its offset -1"
    assert "hold the records at 0..22" in shift["cause"]["summary"]
    assert "'p0-t0-0', the key of the record at 0" in shift["cause"]["summary"]
    assert [r["rule"] for r in report["root_causes"]] == ["coordinates_shifted", "content_differs"]

    # offsets only: the shift shows only where it lands on a marker or leaves a hole; the swap not at all
    code, report = audit(bootstrap, topic, sink, "--engine", engine, check=False)
    assert code == 1
    assert found(report) == [
        ("gap", 0, 0, 0, 1, None, None), ("phantom_marker", 0, 5, 5, 1, None, None),
        ("gap", 0, 12, 12, 1, None, None), ("phantom_marker", 0, 17, 17, 1, None, None),
        ("gap", 0, 18, 18, 1, None, None), ("phantom_marker", 0, 23, 23, 1, None, None)]


def test_a_shift_keeps_the_real_gaps_and_duplicates_beside_it(source, bootstrap, tmp_path):
    """The rows are reconciled at the offsets they hold: a record the off-by-one writer lost is still a gap,
    a row it wrote twice still a duplicate; a clean sink passes."""
    topic, keys = source
    rows = [(0, o + 1, k) for o, k in sorted(keys[0].items()) if o != 13]
    rows.append((0, 21, keys[0][20]))  # record 20, stored at 21, written twice
    rows += [(1, o, k) for o, k in sorted(keys[1].items())]
    code, report = audit(bootstrap, topic, make_sink(tmp_path / "s.duckdb", topic, rows), "--engine", "local")
    assert code == 1
    assert found(report) == [
        ("content_mismatch", 0, 1, 23, 15, "shifted_coordinates", 1),
        ("gap", 0, 13, 13, 1, None, None),
        ("duplicate", 0, 20, 20, 1, None, None)]

    clean = [(p, o, k) for p in (0, 1) for o, k in sorted(keys[p].items())]
    code, report = audit(bootstrap, topic, make_sink(tmp_path / "c.duckdb", topic, clean), "--engine",
                         "local")
    assert (code, found(report)) == (0, [])


def make_value_sink(path: Path, topic: str, keys: dict[int, dict[int, str]],
                    values: dict[tuple[int, int], bytes]) -> Path:
    """The clean sink with each record's value (a BLOB column) and its md5 hex computed by the sink in SQL;
    ``values``: (partition, offset) -> the value stored instead."""
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE orders_sink (src_topic VARCHAR, src_partition INTEGER, src_offset BIGINT, "
                "order_id VARCHAR, payload BLOB, payload_md5 VARCHAR)")
    con.executemany("INSERT INTO orders_sink VALUES (?, ?, ?, ?, ?, NULL)",
                    [(topic, p, o, k, values.get((p, o), value_of(k))) for p in (0, 1)
                     for o, k in sorted(keys[p].items())])
    con.execute("UPDATE orders_sink SET payload_md5 = upper(md5(payload))")  # the case is not compared
    con.close()
    return path


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_a_row_with_its_records_key_but_another_value(source, bootstrap, tmp_path, engine, request):
    """A value column (the value itself, or the md5 hex of its bytes as SQL's md5() computes it): the one
    row whose key is right and whose value is not is a content finding at its exact offset."""
    if engine == "spark":
        request.getfixturevalue("spark")
    topic, keys = source
    sink = make_value_sink(tmp_path / "v.duckdb", topic, keys, {(1, 13): b"value of p1-t2-1, edited"})
    for column in (["--value-column", "payload"], ["--value-hash-column", "payload_md5"]):
        code, report = audit(bootstrap, topic, sink, "--engine", engine, *column)
        assert code == 1, column
        assert found(report) == [("content_mismatch", 1, 13, 13, 1, "different_value", None)], column
        f = report["findings"][0]
        assert f["detail"] == "the record at this offset has this key but another value"
        assert f"(the row at 13 has key {keys[1][13]!r}) holds the key" in f["cause"]["summary"]
        assert [r["rule"] for r in report["root_causes"]] == ["value_differs"]
    # keys only: the row passes
    code, report = audit(bootstrap, topic, sink, "--engine", engine)
    assert (code, found(report)) == (0, [])
    if engine == "local":
        clean = make_value_sink(tmp_path / "c.duckdb", topic, keys, {})
        code, report = audit(bootstrap, topic, clean, "--engine", engine, "--value-hash-column",
                             "payload_md5")
        assert (code, found(report)) == (0, [])


@pytest.mark.parametrize("extra, message", [
    (["--value-column", "nope"], "lacks column nope (value_column)"),
    (["--value-hash-column", "nope"], "lacks column nope (value_hash_column)"),
    (["--value-column", "payload", "--value-hash-column", "payload_md5"],
     "--value-column and --value-hash-column are both set; set one"),
])
def test_value_column_errors_are_one_line(source, bootstrap, tmp_path, extra, message):
    topic, keys = source
    sink = make_value_sink(tmp_path / "e.duckdb", topic, keys, {})
    r = run_audit(bootstrap, topic, sink, "--engine", "local", *extra)
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], r.stderr


def test_on_by_default_with_a_key_column_and_turned_off_by_the_config(source, bootstrap, tmp_path):
    """At 10M offsets the check costs at most 1.5x the keyed audit without it (docs/benchmarks.md,
    benchmarks/keyed_bench.py): an audit of a sink with a key column runs it unless told not to, by the flag
    or `[audit] content_check = false`; --content-check turns a configured "false" back on for one run."""
    topic, keys = source
    sink = make_sink(tmp_path / "sink.duckdb", topic, off_by_one_rows(keys))
    code, report = audit(bootstrap, topic, sink, "--engine", "local", check=None)
    assert (code, found(report)) == (1, EXPECTED)
    config = tmp_path / "eosctl.toml"
    config.write_text(f'[audit]\ncontent_check = false\n[clusters.c]\nbootstrap_servers = "{bootstrap}"\n'
                      f'[pipelines.p]\ncluster = "c"\nsource_topics = ["{topic}"]\n'
                      f'[pipelines.p.sink]\nduckdb = "{sink}"\ntable = "orders_sink"\n'
                      'key_column = "order_id"\n')
    runs = {}
    for extra in ([], ["--content-check"]):
        r = CliRunner().invoke(main, ["audit", "-c", str(config), "--engine", "local", "--format", "json",
                                      *extra], env={"COLUMNS": "200"})
        assert r.exit_code == 1, r.output[-2000:]
        runs[tuple(extra)] = [(f["kind"], f["partition"], f["first_offset"])
                              for f in json.loads(r.stdout)["findings"]]
    assert runs[("--content-check",)] == [(k, p, first) for k, p, first, *_ in EXPECTED]
    assert "content_mismatch" not in {k for k, _, _ in runs[()]}
    config.write_text(config.read_text().replace("content_check = false", 'content_check = "yes"'))
    r = CliRunner().invoke(main, ["audit", "-c", str(config), "--engine", "local"])
    assert (r.exit_code, r.output.strip()) == (
        2, f"eosctl: error: {config}: audit.content_check must be true or false, got a string 'yes'")
