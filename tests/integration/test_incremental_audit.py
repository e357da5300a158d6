"""`eosctl audit --incremental STATE` (issue 39 item 3) on Apache Kafka: the findings after new offsets and
new sink rows equal a full audit's of the same data (with the content check), to the offset; a state of
another pipeline, another cluster or a recreated topic is refused in one line.

The story (one topic, 2 partitions, one transactional producer; offsets exact):
  before the first audit  p0: a0..a4 @0-4 COMMIT @5, c0..c2 @6-8 still OPEN;  p1: b0..b4 @0-4 COMMIT @5
                          sink: p0 0-3 (4 missing), 8 (key a3: an old row's), p1 0-4 (0 with key zz:
                          another record's row)
  after it                p0: COMMIT of c @9, e0..e4 @10-14 COMMIT @15
                          p1: d0,d1 @6-7 ABORT @8, f0..f2 @9-11 COMMIT @12, g0 @13 OPEN
                          sink adds p0 7, 10, 11 (e0 and e1 swapped), 12, 12, 13, 14 (its key a0: a key of an
                          old row), p1 6, 7 (the aborted records), 10, 11, 12 (f0..f2 stored at offset+1)
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from eosctl.cli import main
from tests.support.markers import markers_written

pytestmark = pytest.mark.integration


def cli(*args: str):
    result = CliRunner().invoke(main, list(args), env={"COLUMNS": "200"})
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.stderr
    return result


def create_topic(bootstrap: str, name: str, partitions: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 60
    while True:  # a topic deleted a moment ago is still being removed: created once it is gone
        try:
            new = NewTopic(name, num_partitions=partitions, replication_factor=1)
            admin.create_topics([new])[name].result(30)
            break
        except Exception as e:  # noqa: BLE001
            if "marked for deletion" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    while True:  # created: the metadata of every broker names it (with a leader) a moment later
        meta = admin.list_topics(name, timeout=10).topics.get(name)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions \
                and all(p.leader >= 0 for p in meta.partitions.values()):
            return
        assert time.monotonic() < deadline, f"topic {name} not in the metadata"
        time.sleep(0.1)


def sink_rows(path: Path, rows: list[tuple[str, int, int, str]]) -> None:
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE IF NOT EXISTS orders (src_topic VARCHAR, src_partition INTEGER, "
                "src_offset BIGINT, order_id VARCHAR)")
    con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?)", rows)
    con.close()


def send(p: Producer, topic: str, partition: int, keys: list[str]) -> None:
    for k in keys:
        p.produce(topic, key=k.encode(), value=b"v", partition=partition)
    assert p.flush(30) == 0


def as_tuples(report: dict) -> list[tuple]:
    return [(f["kind"], f["partition"], f["first_offset"], f["last_offset"], f["count"], f.get("key"))
            for f in report["findings"]]


def content_rules(report: dict) -> list[tuple]:
    return [(f["partition"], f["first_offset"], f["cause"]["rule"], f["cause"].get("shift"))
            for f in report["findings"] if f["kind"] == "content_mismatch"]


def comparable(report: dict) -> list[dict]:
    """Everything a finding says, its cause included."""
    return report["findings"]


def test_incremental_findings_equal_a_full_audit(bootstrap: str, unique: str, tmp_path: Path) -> None:
    topic = unique + "in"
    create_topic(bootstrap, topic)
    sink, state = tmp_path / "sink.duckdb", tmp_path / "audit.state"
    base = ["audit", "--bootstrap", bootstrap, "--topic", topic, "--sink-duckdb", str(sink), "--sink-table",
            "orders", "--key-column", "order_id", "--format", "json"]
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique + "-w", "linger.ms": 5})
    p.init_transactions(30)
    p.begin_transaction()
    send(p, topic, 0, [f"a{i}" for i in range(5)])
    send(p, topic, 1, [f"b{i}" for i in range(5)])
    p.commit_transaction(30)
    p.begin_transaction()
    send(p, topic, 0, ["c0", "c1", "a3"])  # open at the first audit: above the LSO
    # p0@8 is held while its transaction is open (a phantom then, and only that: one finding per row), its
    # key a3 also an old row's
    sink_rows(sink, [(topic, 0, o, f"a{o}") for o in range(4)] + [(topic, 1, 0, "zz")]
              + [(topic, 1, o, f"b{o}") for o in range(1, 5)] + [(topic, 0, 8, "a3")])

    first = cli(*base, "--incremental", str(state))
    assert first.exit_code == 1, first.stderr
    one = json.loads(first.stdout)
    assert one["engine"]["incremental"]["full"] is True
    full = cli(*base, "--engine", "local")
    assert comparable(one) == comparable(json.loads(full.stdout))
    assert sorted(as_tuples(one), key=str) == sorted([
        ("gap", 0, 4, 4, 1, None), ("phantom_uncommitted", 0, 8, 8, 1, None),
        ("content_mismatch", 1, 0, 0, 1, None)], key=str)

    p.commit_transaction(30)  # the open tail is decided after the first audit
    p.begin_transaction()
    send(p, topic, 1, ["d0", "d1"])
    p.abort_transaction(30)
    p.begin_transaction()
    send(p, topic, 0, ["e0", "e1", "e2", "e3", "a0"])  # a0 again: the producer wrote the key twice
    send(p, topic, 1, ["f0", "f1", "f2"])
    p.commit_transaction(30)
    p.begin_transaction()
    send(p, topic, 1, ["g0"])  # open at the second audit
    sink_rows(sink, [(topic, 0, 7, "c1"), (topic, 0, 10, "e1"), (topic, 0, 11, "e0"),
                     (topic, 0, 12, "e2"), (topic, 0, 12, "e2"), (topic, 0, 13, "e3"), (topic, 0, 14, "a0"),
                     (topic, 1, 6, "d0"), (topic, 1, 7, "d1"), (topic, 1, 10, "f0"), (topic, 1, 11, "f1"),
                     (topic, 1, 12, "f2")])
    second = cli(*base, "--incremental", str(state))
    assert second.exit_code == 1, second.stderr
    two = json.loads(second.stdout)
    run = two["engine"]["incremental"]
    # Only what is new: the sink's 12 new rows, the log past where each scan stopped.
    assert (run["full"], run["new_sink_rows"]) == (False, 12)
    assert run["new_offsets"] <= 10 + 8
    full = json.loads(cli(*base, "--engine", "local").stdout)
    assert comparable(two) == comparable(full)
    assert [p_["sink_rows"] for p_ in two["partitions"]] == [p_["sink_rows"] for p_ in full["partitions"]]
    assert sorted(as_tuples(two), key=str) == sorted([
        ("gap", 0, 4, 6, 2, None),  # one run across the old and the new part (the marker @5 between)
        ("duplicate", 0, 12, 12, 1, None),
        ("phantom_aborted", 1, 6, 7, 2, None),
        ("key_duplicate", 0, 0, 14, 2, "a0"),  # an old row's key in a new row
        ("key_duplicate", 0, 3, 8, 2, "a3"),  # an old row's key in a row committed since
        ("content_mismatch", 1, 0, 0, 1, None),  # as before
        ("content_mismatch", 0, 10, 10, 1, None), ("content_mismatch", 0, 11, 11, 1, None),  # swapped
        # offset+1: reconciled at 9..11, so neither a gap at 9 nor a phantom at the marker @12
        ("content_mismatch", 1, 10, 12, 3, None),
    ], key=str)
    assert sorted(content_rules(two)) == [
        (0, 10, "shifted_coordinates", -1), (0, 11, "shifted_coordinates", 1),
        (1, 0, "different_record", None), (1, 10, "shifted_coordinates", 1)]
    p.commit_transaction(30)
    # The two audits below must read the same log: g0's marker in it for both, not only for the second
    markers_written(bootstrap, unique + "-w")

    # Nothing new: the same verdict again, nothing read of the sink.
    again = json.loads(cli(*base, "--incremental", str(state)).stdout)
    assert again["engine"]["incremental"]["new_sink_rows"] == 0
    full = json.loads(cli(*base, "--engine", "local").stdout)
    assert comparable(again) == comparable(full)


def test_incremental_refuses_another_pipeline_cluster_or_recreated_topic(bootstrap: str, unique: str,
                                                                           tmp_path: Path) -> None:
    topic, other = unique + "a", unique + "b"
    create_topic(bootstrap, topic, 1)
    create_topic(bootstrap, other, 1)
    p = Producer({"bootstrap.servers": bootstrap})
    send(p, topic, 0, ["x", "y"])
    sink, state = tmp_path / "sink.duckdb", tmp_path / "audit.state"
    sink_rows(sink, [(topic, 0, 0, "x"), (topic, 0, 1, "y")])

    def run(t: str, *more: str):
        return cli("audit", "--bootstrap", bootstrap, "--topic", t, "--sink-duckdb", str(sink),
                   "--sink-table", "orders", "--format", "json", "--incremental", str(state), *more)

    assert run(topic).exit_code == 0
    refused = run(other)
    assert refused.exit_code == 2 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and "belongs to another pipeline" in refused.stderr

    con = duckdb.connect(str(state))
    [(value,)] = con.execute("SELECT value FROM eosctl_audit_state WHERE name = 'meta'").fetchall()
    meta = json.loads(bytes(value))
    real = meta["cluster_id"]
    con.execute("UPDATE eosctl_audit_state SET value = ? WHERE name = 'meta'",
                [json.dumps({**meta, "cluster_id": "another-cluster"}).encode()])
    con.close()
    refused = run(topic)
    assert refused.exit_code == 2 and refused.stderr.count("\n") == 1
    assert f"was written for cluster another-cluster, this is cluster {real}" in refused.stderr

    for path, why in ((sink, "is a file this command reads"),
                      (tmp_path / "notes.txt", "is not an eosctl audit state")):
        if not path.exists():
            path.write_text("notes\n")
        refused = cli("audit", "--bootstrap", bootstrap, "--topic", topic, "--sink-duckdb", str(sink),
                      "--sink-table", "orders", "--incremental", str(path))
        assert refused.exit_code == 2 and refused.stderr.count("\n") == 1, refused.stderr
        assert why in refused.stderr
    assert (tmp_path / "notes.txt").read_text() == "notes\n"

    state.unlink()
    assert run(topic).exit_code == 0
    # What an incremental audit cannot see: a row rewritten in place (its rowid kept, the count unchanged).
    con = duckdb.connect(str(sink))
    con.execute("UPDATE orders SET src_offset = 9 WHERE src_offset = 0")
    con.close()
    blind = run(topic)
    assert blind.exit_code == 0 and json.loads(blind.stdout)["findings"] == []
    due = run(topic, "--full-every", "0.001")  # the scheduled full audit sees it
    assert due.exit_code == 1 and json.loads(due.stdout)["engine"]["incremental"]["full"] is True
    assert as_tuples(json.loads(due.stdout)) == [("gap", 0, 0, 0, 1, None),
                                                 ("phantom_beyond_hw", 0, 9, 9, 1, None)]
    # A deleted row changes the count: the sink is read again whole at once.
    con = duckdb.connect(str(sink))
    con.execute("DELETE FROM orders WHERE src_offset = 1")
    con.close()
    report = json.loads(run(topic).stdout)
    assert "deleted" in report["engine"]["incremental"]["reason"]
    assert as_tuples(report) == [("gap", 0, 0, 1, 2, None), ("phantom_beyond_hw", 0, 9, 9, 1, None)]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(30)
    create_topic(bootstrap, topic, 1)
    refused = run(topic)
    assert refused.exit_code == 2 and refused.stderr.count("\n") == 1
    assert f"topic {topic} was deleted and created again" in refused.stderr


def test_the_exporters_continuous_audit_reads_only_what_is_new(bootstrap: str, unique: str,
                                                                tmp_path: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    topic = unique + "x"
    create_topic(bootstrap, topic, 1)
    p = Producer({"bootstrap.servers": bootstrap})
    send(p, topic, 0, [f"k{i}" for i in range(5)])
    sink, states = tmp_path / "sink.duckdb", tmp_path / "states"
    sink_rows(sink, [(topic, 0, o, f"k{o}") for o in range(5)])
    config = tmp_path / "eosctl.toml"
    config.write_text(f'[clusters.c]\nbootstrap_servers = "{bootstrap}"\n\n[pipelines.orders]\n'
                      f'cluster = "c"\nsource_topics = ["{topic}"]\n\n[pipelines.orders.sink]\n'
                      f'duckdb = "{sink}"\ntable = "orders"\nkey_column = "order_id"\n')

    def scrape() -> dict[str, float]:
        out = tmp_path / "eosctl.prom"
        r = cli("exporter", "--config", str(config), "--once", "--textfile", str(out), "--audit-state",
                str(states))
        assert r.exit_code == 0, r.stderr
        families = text_string_to_metric_families(out.read_text())
        return {(s.name.removeprefix("eosctl_audit_"), s.labels.get("kind")): s.value for f in families
                for s in f.samples if s.name.startswith("eosctl_audit")}

    first = scrape()
    assert first[("incremental", None)] == 0  # no state yet: a full audit
    assert (first[("read_offsets", None)], first[("read_sink_rows", None)]) == (5, 5)
    assert sorted(p.name for p in states.iterdir()) == ["orders.audit-state"]

    send(p, topic, 0, ["k5", "k6", "k1"])  # k1 again
    sink_rows(sink, [(topic, 0, 5, "k5"), (topic, 0, 7, "k1")])  # 6 missing
    second = scrape()
    assert second[("incremental", None)] == 1
    assert (second[("read_offsets", None)], second[("read_sink_rows", None)]) == (3, 2)
    assert (second[("findings", "gap")], second[("findings", "key_duplicate")]) == (1, 1)
    assert second[("last_full_timestamp_seconds", None)] == first[("last_full_timestamp_seconds", None)]
    assert second[("passed", None)] == 0
