"""Audit verdicts issue 34 found wrong, through the CLI against the session's broker (Apache Kafka 4.4):

- item 2: two sink rows for one offset below the log start are a duplicate (DeleteRecords can't hide it);
- item 4: a tail gap the group has committed past is a skip (`passed_by` committed_offsets), also for a sink
  without an offsets table (Kafka Connect's JDBC sink);
- item 5: a pipeline audited hop by hop covers its hops' topics and groups, not every group of the cluster;
- item 6: a topic name from ${NAME} is not echoed by "topic ... does not exist".

One topic per module: partition 0 holds offsets 0..99 (plain produce, no transactions).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import duckdb
import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from eosctl.base.files import shown
from tests.support.broker import commit_offset
from tests.support.helpers import eosctl

pytestmark = pytest.mark.integration

N = 100
TIMEOUT = 30


def plain_topic(bootstrap: str, prefix: str) -> str:
    """A new 1-partition topic holding offsets 0..N-1 (plain produce, no transactions)."""
    name = prefix + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name].result(TIMEOUT)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False})
    for i in range(N):
        producer.produce(name, value=f"v{i}".encode(), partition=0)
    assert producer.flush(TIMEOUT) == 0
    return name


@pytest.fixture(scope="module")
def topic(bootstrap: str) -> str:
    return plain_topic(bootstrap, "rules")


commit = commit_offset


def sink(path: Path, topic: str, offsets: list[int]) -> Path:
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE s (src_topic VARCHAR, src_partition INTEGER, src_offset BIGINT)")
    con.executemany("INSERT INTO s VALUES (?, 0, ?)", [(topic, o) for o in offsets])
    con.close()
    return path


cli = partial(eosctl, columns=None, check=False)


def test_a_second_row_below_the_log_start_is_a_duplicate(bootstrap, tmp_path):
    name = plain_topic(bootstrap, "retained")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(name, 0, 50)
    admin.delete_records([tp])[tp].result(TIMEOUT)
    db = sink(tmp_path / "s.duckdb", name, [*range(N), 11])
    args = ["--bootstrap", bootstrap, "--topic", name, "--sink-duckdb", str(db), "--sink-table", "s"]
    r = cli("audit", *args, "--engine", "local", "--format", "json")
    assert r.exit_code == 1, r.output
    report = json.loads(r.stdout)
    assert report["verdict"] == "fail"
    assert [(f["kind"], f["first_offset"], f["last_offset"], f["count"]) for f in report["findings"]] == [
        ("duplicate", 11, 11, 1)]
    assert report["partitions"][0]["log_start_offset"] == 50
    r = cli("ledger", *args)
    assert r.exit_code == 1, r.output
    assert "no flags" not in r.stdout and "duplicate" in r.stdout


@pytest.mark.parametrize("offsets_table", [False, True])
def test_a_tail_gap_the_group_committed_past_is_a_skip(bootstrap, topic, tmp_path, offsets_table):
    group = "g" + uuid.uuid4().hex[:8]
    commit(bootstrap, group, topic, N)
    db = sink(tmp_path / "s.duckdb", topic, list(range(90)))
    args = ["--bootstrap", bootstrap, "--topic", topic, "--group", group, "--sink-duckdb", str(db),
            "--sink-table", "s", "--engine", "local", "--format", "json"]
    if offsets_table:
        con = duckdb.connect(str(db))
        con.execute('CREATE TABLE o (topic VARCHAR, "partition" INTEGER, next_offset BIGINT)')
        con.execute("INSERT INTO o VALUES (?, 0, 90)", [topic])
        con.close()
        args += ["--offsets-table", "o"]
    r = cli("audit", *args)
    assert r.exit_code == 1, r.output
    report = json.loads(r.stdout)
    gaps = [f for f in report["findings"] if f["kind"] == "gap"]
    assert [(f["first_offset"], f["last_offset"]) for f in gaps] == [(90, 99)]
    assert gaps[0]["cause"]["passed_by"] == "committed_offsets"
    assert f"group {group} committed offset {N}, past them" in gaps[0]["cause"]["summary"]
    assert "sink_skipped" in [c["rule"] for c in report["root_causes"]]
    assert "not_yet_consumed" not in [c["rule"] for c in report["root_causes"]]


def test_a_hops_pipeline_lags_its_hops_groups_only(bootstrap, topic, tmp_path):
    mine, other = "mine" + uuid.uuid4().hex[:6], "other" + uuid.uuid4().hex[:6]
    commit(bootstrap, mine, topic, 40)
    commit(bootstrap, other, topic, 60)
    config = tmp_path / "c.toml"
    config.write_text(f'[clusters.c]\nbootstrap_servers = "{bootstrap}"\n'
                      f'[pipelines.stage]\nsource_topics = ["{topic}"]\ngroup = "{mine}"\n'
                      '[pipelines.whole]\nhops = ["stage"]\n')
    r = cli("lag", "-c", str(config), "-p", "whole", "--format", "json")
    assert r.exit_code == 0, r.output
    groups = {g["group"] for g in json.loads(r.stdout)["groups"]}
    assert groups == {mine}


def test_a_substituted_topic_is_not_echoed_when_missing(bootstrap, tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(f'[clusters.c]\nbootstrap_servers = "{bootstrap}"\n'
                      '[pipelines.p]\nsource_topics = ["${T}"]\n')
    secret = "nosuch" + uuid.uuid4().hex[:8]
    r = cli("producers", "-c", str(config), "-p", "p", env={"T": secret})
    assert r.exit_code == 2, r.output
    assert secret not in r.output
    assert "[the value of ${T}]" in r.stderr


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KB tmpfs filled up: a real ENOSPC (root only; skipped where mounting is not allowed)."""
    import subprocess

    where = tmp_path / "full"
    where.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        fd = os.open(where / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(fd, b"x" * 4096):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def test_a_textfile_on_a_full_disk_is_one_line_and_keeps_nothing(bootstrap, topic, full_disk):
    """Issue 34, item 15: before, a traceback."""
    out = full_disk / "eosctl.prom"
    r = cli("exporter", "--bootstrap", bootstrap, "-t", topic, "--once", "--textfile", str(out),
            "--audit-every", "0")
    assert r.exit_code == 2, r.output
    assert r.stderr.splitlines() == [f"eosctl: error: cannot write --textfile {shown(str(out))}: No "
                                     "space left on "
                                     "device; the earlier reading is kept"]
    assert sorted(os.listdir(full_disk)) == ["filler"]


def test_a_pipeline_on_a_full_disk_is_one_line_and_leaves_no_sink(bootstrap, full_disk):
    """Issue 34, item 15: before, a traceback and an empty sink.duckdb left behind."""
    work = full_disk / "work"
    r = cli("sandbox", "pipeline", "--bootstrap", bootstrap, "--yes", "--prefix",
            "full" + uuid.uuid4().hex[:6], "--records", "20", "--workdir", str(work))
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("eosctl: ")]
    assert len(lines) == 1 and lines[0].startswith("eosctl: error: the pipeline could not write"), r.stderr
    assert "Traceback" not in r.output
    assert not (work / "sink.duckdb").exists() and not (work / "sink.duckdb.wal").exists()


def test_an_empty_offset_is_shown_as_an_empty_string(bootstrap, topic, tmp_path):
    """A smaller item of issue 34: before, "(e.g. )"."""
    con = duckdb.connect(str(tmp_path / "s.duckdb"))
    con.execute("CREATE TABLE s (src_topic VARCHAR, src_partition INTEGER, src_offset VARCHAR)")
    con.executemany("INSERT INTO s VALUES (?, 0, ?)", [(topic, str(o)) for o in range(N)] + [(topic, "")])
    con.close()
    r = cli("audit", "--bootstrap", bootstrap, "--topic", topic, "--sink-duckdb", str(tmp_path / "s.duckdb"),
            "--sink-table", "s", "--engine", "local", "--format", "json")
    assert r.exit_code == 1, r.output
    (invalid,) = [f for f in json.loads(r.stdout)["findings"] if f["kind"] == "invalid_row"]
    assert invalid["detail"] == "src_offset is not an integer (e.g. '')"


def test_substituted_values_are_on_no_output_of_a_run(bootstrap, topic, tmp_path):
    """Issue 34, item 6: a topic and a sink path from ${NAME}s are in neither the JSON on stdout, nor the
    report written with --out, nor stderr; the JSON still parses and names where each came from."""
    db = sink(tmp_path / "secret-sink.duckdb", topic, [*range(N), 3])
    config = tmp_path / "c.toml"
    config.write_text(f'[clusters.c]\nbootstrap_servers = "{bootstrap}"\n'
                      '[pipelines.p]\nsource_topics = ["${T}"]\n'
                      '[pipelines.p.sink]\nduckdb = "${DB}"\ntable = "s"\n')
    env = {"T": topic, "DB": str(db)}
    r = cli("audit", "-c", str(config), "-p", "p", "--engine", "local", "--format", "json", env=env)
    assert r.exit_code == 1, r.output
    assert topic not in r.output and str(db) not in r.output
    report = json.loads(r.stdout)
    assert report["findings"][0]["topic"] == "[the value of ${T}]"
    out = tmp_path / "r.json"
    r = cli("audit", "-c", str(config), "-p", "p", "--engine", "local", "--format", "json", "--out", str(out),
            env=env)
    assert r.exit_code == 1, r.output
    assert topic not in out.read_text() and str(db) not in out.read_text()
    r = cli("ledger", "-c", str(config), "-p", "p", env=env)
    assert topic not in r.output and str(db) not in r.output
