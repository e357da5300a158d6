"""The reference pipeline into PostgreSQL, Delta Lake and Iceberg (`run_pipeline(postgres=..., delta=...,
iceberg=...)`, what `sandbox pipeline --sink postgres|delta|iceberg` runs) and `eosctl audit`, `ledger` and
`snapshot` on them, against the session's real server and real Delta and Iceberg tables.

Every fault mode of the sink hop, planted together into each kind (one run per kind, as `eosctl demo` plants
them into DuckDB), gives exactly the manifest's findings, the ones the DuckDB sink gives for the same faults
(tests/integration/test_audit.py, tests/integration/test_demo.py), on both engines. A writer committing rows
to PostgreSQL throughout the commands is never blocked and causes no false finding.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from eosctl.cli import main
from eosctl.commands.demo_cmd import DEMO_FAULTS
from eosctl.sandbox.pipeline import run_pipeline
from tests.support.helpers import eosctl, wait_until

pytestmark = [pytest.mark.integration]

# Every fault of the sink hop (the stage's own are the Kafka hop's: tests/integration/test_hop_audit.py).
FAULTS = DEMO_FAULTS
KINDS = ("postgres", "delta", "iceberg")


@pytest.fixture(scope="module")
def runs(cluster, postgres, tmp_path_factory):
    """kind -> (workdir, manifest) of a run planting every fault of FAULTS, each run on first use."""
    done: dict[str, tuple[Path, dict]] = {}

    def run(kind: str = "postgres") -> tuple[Path, dict]:
        if kind not in done:
            prefix = f"{kind[:2]}{uuid.uuid4().hex[:8]}"
            workdir = tmp_path_factory.mktemp(kind)
            manifest = run_pipeline(cluster, prefix, workdir, faults=list(FAULTS), records=60,
                                    # Over TCP: the Spark engine reads its keys through JDBC then.
                                    postgres=postgres.tcp_uri() if kind == "postgres" else None,
                                    delta=kind == "delta", iceberg=kind == "iceberg")
            done[kind] = (workdir, manifest)
        return done[kind]

    return run


def cli(postgres, *args: str):
    result = eosctl(*args, env={"EOSCTL_SINK_PASSWORD": postgres.password})
    assert postgres.password not in result.output
    return result


def comparable(findings: list[dict]) -> list[tuple]:
    return sorted((f["kind"], f["topic"], f["partition"], f["first_offset"], f["last_offset"], f["count"],
                   f.get("key"), tuple(f["offsets"]) if f.get("offsets") is not None else None)
                  for f in findings)


@pytest.mark.parametrize("engine", ["local", "spark"])
@pytest.mark.parametrize("kind", KINDS)
def test_every_fault_into_each_sink_kind_gives_the_manifests_findings_on_both_engines(runs, postgres, spark,
                                                                                      kind, engine):
    workdir, manifest = runs(kind)
    assert manifest["sink"]["duckdb"] is None and manifest["sink"][kind]
    assert postgres.password not in json.dumps(manifest)
    assert not (workdir / "sink.duckdb").exists()
    assert {e["fault"] for e in manifest["expected_findings"]} >= {"duplicate-replay", "skip", "aborted-leak",
                                                                    "upstream-retry"}
    # The sink hop (-p PREFIX): the config's default is the whole pipeline, both hops.
    result = cli(postgres, "audit", "-c", str(workdir / "eosctl.toml"), "-p", manifest["prefix"], "--engine",
                 engine, "--format", "json")
    assert result.stdout, result.output
    report = json.loads(result.stdout)
    assert result.exit_code == 1 and report["verdict"] == "fail"
    assert comparable(report["findings"]) == comparable(manifest["expected_findings"])
    # On the Spark engine, each kind's keys read by Spark itself: PostgreSQL's through its JDBC source,
    # Delta's and Iceberg's pinned data files through its Parquet reader.
    assert report["engine"].get("keys_read_by") == ("spark" if engine == "spark" else None)
    point = report["sink_read_point"]
    assert point["kind"] == kind
    assert {"postgres": ("snapshot", "server_version"), "delta": ("version",),
            "iceberg": ("snapshot_id",)}[kind] == tuple(k for k in point if k not in ("kind", "source"))


def test_ledger_and_table_output_on_postgres(runs, postgres):
    workdir, manifest = runs("postgres")
    sink_hop = ("-c", str(workdir / "eosctl.toml"), "-p", manifest["prefix"])
    ledger = cli(postgres, "ledger", *sink_hop, "--format", "json")
    rows = json.loads(ledger.stdout)["partitions"]
    assert sum(r["rows"] for r in rows) == manifest["sink_rows"]
    table = cli(postgres, "audit", *sink_hop, "--engine", "local")
    assert table.exit_code == 1
    assert "PostgreSQL " in table.stdout and ", snapshot " in table.stdout  # the read point, under the table


# ---- a live writer ------------------------------------------------------------------------------------


PHANTOMS = {"phantom_aborted", "phantom_marker", "phantom_uncommitted", "phantom_beyond_hw"}


def test_a_live_writer_is_never_blocked_and_gives_no_false_findings(bootstrap, postgres, pg_db, tmp_path):
    """The pipeline's way: a record is committed in Kafka, then its row and the next offset are committed in
    PostgreSQL, in a loop, while audit, ledger and snapshot read."""
    topic = "pglive" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    with psycopg.connect(pg_db, autocommit=True) as con:
        con.execute("CREATE TABLE orders_sink (src_topic TEXT, src_partition INT, src_offset BIGINT)")
        con.execute('CREATE TABLE sink_offsets (topic TEXT, "partition" INT, next_offset BIGINT, '
                    'PRIMARY KEY (topic, "partition"))')
    stop, errors, written = threading.Event(), [], []

    def write() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        try:
            with psycopg.connect(pg_db, autocommit=True) as con:
                con.execute("SET lock_timeout = '10s'")  # a writer kept waiting would fail here
                while not stop.is_set():
                    acked: list = []
                    producer.produce(topic, b"v", partition=0,
                                     on_delivery=lambda e, m, a=acked: a.append((e, m)))
                    producer.flush(10)
                    err, msg = acked[0]
                    if err is not None:
                        errors.append(str(err))
                        return
                    with con.transaction():
                        con.execute("INSERT INTO orders_sink VALUES (%s, 0, %s)", (topic, msg.offset()))
                        con.execute("INSERT INTO sink_offsets VALUES (%s, 0, %s) ON CONFLICT (topic, "
                                    '"partition") DO UPDATE SET next_offset = excluded.next_offset',
                                    (topic, msg.offset() + 1))
                    written.append(msg.offset())
        except Exception as e:  # reported by the test, not lost in the thread
            errors.append(repr(e))

    config = tmp_path / "eosctl.toml"
    config.write_text(f'[clusters.c]\nbootstrap_servers = "{bootstrap}"\n\n[pipelines.live]\n'
                      f'source_topics = ["{topic}"]\n\n[pipelines.live.sink]\n'
                      f'postgres = "{pg_db.replace(postgres.password, "${EOSCTL_SINK_PASSWORD}")}"\n'
                      'table = "orders_sink"\noffsets_table = "sink_offsets"\n')
    writer = threading.Thread(target=write)
    writer.start()
    try:
        wait_until("the writer's first row (or its error)",
                   lambda: written or errors or not writer.is_alive(), 60)
        audit = cli(postgres, "audit", "-c", str(config), "--engine", "local", "--format", "json")
        report = json.loads(audit.stdout)
        (part,) = report["partitions"]
        assert not [f for f in report["findings"] if f["kind"] in PHANTOMS | {"duplicate", "invalid_row"}]
        # Records committed after the sink's snapshot are the only ones it may lack: a tail gap (the lag).
        for f in report["findings"]:
            assert (f["kind"], f["last_offset"]) == ("gap", part["high_watermark"] - 1)
        ledger = cli(postgres, "ledger", "-c", str(config), "--format", "json")
        assert ledger.exit_code == 0, ledger.output  # checked up to the stored offset: no flags
        snap = cli(postgres, "snapshot", "-c", str(config), "--out", str(tmp_path / "s.duckdb"), "--format",
                   "json")
        assert json.loads(snap.stdout)["sections"]["ledger"] == "ok", snap.output
    finally:
        stop.set()
        writer.join(timeout=60)
    assert errors == []
    assert len(written) > part["sink_rows"] > 0  # it kept committing while the commands read


def test_sandbox_pipeline_starts_its_postgres_and_sandbox_down_stops_it(bootstrap, tmp_path, monkeypatch):
    from eosctl.sandbox import pgserver

    home = tmp_path / "home"
    monkeypatch.setenv("EOSCTL_HOME", str(home))
    result = CliRunner().invoke(main, ["sandbox", "pipeline", "--bootstrap", bootstrap, "--yes", "--sink",
                                       "postgres", "--prefix", "pg" + uuid.uuid4().hex[:6], "--records", "20",
                                       "--partitions", "1"])
    server = pgserver.running(home)
    try:
        assert result.exit_code == 0, result.output
        assert server is not None and "PostgreSQL started on a Unix socket" in result.stderr
        assert f"sink      {server.uri(password=False)}" in result.stdout
        down = CliRunner().invoke(main, ["sandbox", "down"])
        assert down.exit_code == 0 and f"sandbox PostgreSQL stopped (pid {server.pid})" in down.stdout
        assert pgserver.running(home) is None
        with pytest.raises(ProcessLookupError):
            os.kill(server.pid, 0)
        assert not server.owned_root or not Path(server.root).exists()  # its /tmp directory (as root)
    finally:
        if server is not None and pgserver.running(home) is not None:
            pgserver.stop(server, home)
