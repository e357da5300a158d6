"""A sink with a route on Apache Kafka 4.4 (issue 53): a stage routing order types to tables and dropping
heartbeats. The table of type A misses one A record (a planted loss) and holds one B record (a planted
misroute): the audit gives exactly those two findings, and no gap for the B and heartbeat records.

One partition: offsets 0-11, types A, B, heartbeat in turn (A at 0, 3, 6, 9), in a header and the JSON
value both."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import duckdb
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.helpers import eosctl
from tests.support.markers import markers_written

pytestmark = pytest.mark.integration

TYPES = ["A", "B", "heartbeat"] * 4


@pytest.fixture(scope="module")
def topic(bootstrap: str) -> str:
    name = "route" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{name}-stage"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i, kind in enumerate(TYPES):
        producer.produce(name, key=f"k{i}".encode(), value=json.dumps({"order": {"kind": kind}}).encode(),
                         partition=0, headers=[("type", kind.encode())])
    producer.commit_transaction(30)  # offsets 0-11, the commit marker at 12
    markers_written(bootstrap, f"{name}-stage")  # else the audit may read the records above the LSO
    return name


def config(tmp_path: Path, bootstrap: str, topic: str, route: str) -> Path:
    sink = tmp_path / "orders_a.duckdb"
    if not sink.exists():
        con = duckdb.connect(str(sink))
        con.execute("CREATE TABLE orders_a (src_topic VARCHAR, src_partition INTEGER, src_offset BIGINT)")
        held = [0, 3, 9, 4]  # A records but 6 (lost), and the B record at 4 (misrouted)
        con.executemany("INSERT INTO orders_a VALUES (?, 0, ?)", [(topic, o) for o in held])
        con.close()
    cfg = tmp_path / "eosctl.toml"
    cfg.write_text(f"""
[clusters.local]
bootstrap_servers = "{bootstrap}"

[pipelines.orders-a]
source_topics = ["{topic}"]

[pipelines.orders-a.sink]
duckdb = "{sink}"
table = "orders_a"
route = "{route}"
""")
    return cfg


@pytest.mark.parametrize("route", ["header:type=A", "value:order.kind=A"])
def test_a_routed_sink_has_exactly_its_loss_and_its_misroute(bootstrap: str, topic: str, tmp_path: Path,
                                                             route: str) -> None:
    result = eosctl("audit", "-c", str(config(tmp_path, bootstrap, topic, route)), "--engine", "local",
                    "--format", "json")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert [(f["kind"], f["first_offset"], f["last_offset"], f["count"]) for f in doc["findings"]] == [
        ("misrouted", 4, 4, 1), ("gap", 6, 6, 1)]
    part = doc["partitions"][0]
    assert (part["filtered"], part["expected_records"], part["sink_rows"]) == (8, 4, 4)
    assert [r["rule"] for r in doc["root_causes"]] == ["sink_skipped", "routed_wrong"]


def test_without_the_route_every_record_left_out_is_a_gap(bootstrap: str, topic: str, tmp_path: Path) -> None:
    cfg = config(tmp_path, bootstrap, topic, "header:type=A")
    cfg.write_text(cfg.read_text().replace('route = "header:type=A"', ""))
    result = eosctl("audit", "-c", str(cfg), "--engine", "local", "--format", "json")
    assert result.exit_code == 1
    gaps = [(f["first_offset"], f["last_offset"]) for f in json.loads(result.stdout)["findings"]]
    assert gaps == [(1, 2), (5, 8), (10, 11)]


def test_a_wrong_route_is_one_line(bootstrap: str, topic: str, tmp_path: Path) -> None:
    result = eosctl("audit", "-c", str(config(tmp_path, bootstrap, topic, "type=A")))
    assert result.exit_code == 2 and "sink.route is 'type=A'; expected header:NAME=VALUE" in result.output


def test_a_pipeline_of_two_routed_sinks_audits_to_exactly_its_planted_findings(bootstrap: str, topic: str,
                                                                              tmp_path: Path) -> None:
    """The issue's case: a stage writing two DuckDB tables (A, B) and dropping heartbeats, with a planted
    misrouted record (A record 0 also in B's table) and a planted loss (B record 7 missing)."""
    import xml.etree.ElementTree as ET

    sink = tmp_path / "warehouse.duckdb"
    con = duckdb.connect(str(sink))
    for table, held in (("orders_a", [0, 3, 6, 9]), ("orders_b", [1, 4, 10, 0])):
        con.execute(f"CREATE TABLE {table} (src_topic VARCHAR, src_partition INTEGER, src_offset BIGINT)")
        con.executemany(f"INSERT INTO {table} VALUES (?, 0, ?)", [(topic, o) for o in held])
    con.close()
    cfg = tmp_path / "eosctl.toml"
    cfg.write_text(f"""
[clusters.local]
bootstrap_servers = "{bootstrap}"

[pipelines.router]
source_topics = ["{topic}"]

[pipelines.router.sinks.a]
duckdb = "{sink}"
table = "orders_a"
route = "header:type=A"

[pipelines.router.sinks.b]
duckdb = "{sink}"
table = "orders_b"
route = "value:order.kind=B"
""")
    result = eosctl("audit", "-c", str(cfg), "--engine", "local", "--format", "json")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert [(f["sink"], f["kind"], f["first_offset"], f["last_offset"]) for f in doc["findings"]] == [
        ("b", "misrouted", 0, 0), ("b", "gap", 7, 7)]
    assert [(s["name"], s["verdict"], s["findings"]) for s in doc["sinks"]] == [("a", "pass", 0),
                                                                               ("b", "fail", 2)]
    assert [(p["sink"], p["expected_records"], p["filtered"]) for p in doc["partitions"]] == [
        ("a", 4, 8), ("b", 4, 8)]
    junit = eosctl("audit", "-c", str(cfg), "--engine", "local", "--format", "junit")
    suites = ET.fromstring(junit.stdout).findall("testsuite")
    assert [(s.get("name"), s.get("failures")) for s in suites] == [("eosctl audit: sink a", "0"),
                                                                    ("eosctl audit: sink b", "2")]
    text = eosctl("audit", "-c", str(cfg), "--engine", "local")
    assert text.exit_code == 1 and "misrouted" in text.stdout and "8 filtered by its route" in text.stdout
    # the one-sink options name one sink
    one = eosctl("audit", "-c", str(cfg), "--key-column", "k")
    assert one.exit_code == 2 and "has several sinks (a, b)" in one.output


def test_the_tuis_audit_view_shows_each_sinks_verdict_and_names_each_findings_sink(
        bootstrap: str, topic: str, tmp_path: Path) -> None:
    """Two routed sinks, A's table missing record 9 and B's holding A record 0 (misrouted) and missing 7:
    the TUI audits both sinks (not only the first), each finding's row names its sink, in the config's
    order, and the headline has each sink's verdict."""
    import asyncio

    from tests.support.tui import tui_audit_view

    sink = tmp_path / "warehouse.duckdb"
    con = duckdb.connect(str(sink))
    for table, held in (("orders_b", [1, 4, 10, 0]), ("orders_a", [0, 3, 6])):
        con.execute(f"CREATE TABLE {table} (src_topic VARCHAR, src_partition INTEGER, src_offset BIGINT)")
        con.executemany(f"INSERT INTO {table} VALUES (?, 0, ?)", [(topic, o) for o in held])
    con.close()
    cfg = tmp_path / "eosctl.toml"
    cfg.write_text(f"""
[clusters.local]
bootstrap_servers = "{bootstrap}"

[pipelines.router]
source_topics = ["{topic}"]

[audit]
engine = "local"

[pipelines.router.sinks.b]
duckdb = "{sink}"
table = "orders_b"
route = "value:order.kind=B"

[pipelines.router.sinks.a]
duckdb = "{sink}"
table = "orders_a"
route = "header:type=A"
""")
    _, report, rows, head = asyncio.run(tui_audit_view(["tui", "-c", str(cfg), "-p", "router"]))
    assert report.verdict == "fail"
    assert [(r[0], r[3], r[5].split(" · ")[0]) for r in rows] == [
        ("misrouted", "0", "sink b"), ("gap", "7", "sink b"), ("gap", "9", "sink a")]
    lines = head.splitlines()
    assert [line.split(":")[0] for line in lines[1:3]] == [" FAIL  sink b", " FAIL  sink a"]
    assert lines[1].endswith("2 findings (2 failing)") and lines[2].endswith("1 finding (1 failing)")
