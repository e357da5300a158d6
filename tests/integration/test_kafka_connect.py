"""Kafka Connect's JDBC sink audited where it writes: one distributed worker (ConnectDistributed from Maven
Central's connect-runtime 4.4.0, eosctl/sandbox/jvm/connect.pom.xml) runs Debezium's JDBC sink connector
(3.5.0.Final) into the suite's PostgreSQL (over TCP: the JDBC driver speaks nothing else), reading a
transactional topic (committed, aborted and a still-open transaction; tests/support/streaming.py)
read_committed.

Two connectors: `upsert` (insert.mode=upsert, primary.key.mode=kafka: the row's key is its Kafka
coordinates) and `insert` (insert.mode=insert, no key; the coordinates come from Kafka's InsertField
transform, as users keep lineage). The worker runs with offsets flushed rarely, is SIGKILLed while the tables
fill, and restarts flushing every second: both tasks resume from what the worker had committed, so the
insert connector writes its rows again. Expected results come from the test's own reads: the topic with a
read_committed consumer, the group's committed offsets, the tables with SQL.
"""

from __future__ import annotations

import json
import re
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, TopicPartition

from eosctl.cli import main
from tests.support import helpers, jvm
from tests.support.helpers import exited
from tests.support.streaming import PARTITIONS, TxnTopic, audit, documented_config, offsets_found

pytestmark = [pytest.mark.integration]

WORKER = "org.apache.kafka.connect.cli.ConnectDistributed"
WAIT_S = 300  # a JVM start or the tasks' catching up, on a busy machine
COORDS = {"upsert": ("__connect_topic", "__connect_partition", "__connect_offset"),
          "insert": ("kafka_topic", "kafka_partition", "kafka_offset")}


def wait_until(what: str, ready: Callable[[], bool], seconds: float, worker=None,
               log: Path | None = None) -> None:
    """helpers.wait_until, failing at once when the Connect worker exited; its log on failure."""
    helpers.wait_until(what, ready, seconds, gone=exited("the Connect worker", worker),
                       detail=lambda: tail(log))


def tail(log: Path | None) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-30:]) if log and log.exists() else ""


class Connect:
    """The topic, the worker (started, killed, restarted) and the two connectors' tables."""

    def __init__(self, bootstrap: str, postgres, pg_db: str, home: Path) -> None:
        from eosctl.sandbox import maven
        from eosctl.sandbox.net import free_port

        self.topic = TxnTopic(bootstrap, "connect", connect_json=True)
        self.bootstrap, self.home, self.pg_db = bootstrap, home, pg_db
        self.schema = parse_qs(urlsplit(pg_db).query)["options"][0].split("=", 1)[1]
        self.jars = maven.jars("connect")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.postgres = postgres
        self.log = home / "worker.log"
        self.worker = None
        self.name = f"c{uuid.uuid4().hex[:8]}"
        # connector (and table) names of this run: their groups (connect-NAME) are new on the session's broker
        self.names = {kind: f"{kind}_{self.name}" for kind in COORDS}

    def start(self, flush_ms: int) -> None:
        props = self.home / "worker.properties"
        props.write_text("\n".join(f"{k}={v}" for k, v in {
            "bootstrap.servers": self.bootstrap, "group.id": f"{self.name}-workers",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "config.storage.topic": f"{self.name}-configs", "offset.storage.topic": f"{self.name}-offsets",
            "status.storage.topic": f"{self.name}-status", "config.storage.replication.factor": 1,
            "offset.storage.replication.factor": 1, "status.storage.replication.factor": 1,
            "offset.storage.partitions": 1, "status.storage.partitions": 1,
            "listeners": self.url, "offset.flush.interval.ms": flush_ms,
            # Sink tasks read with the Java consumer's default, read_uncommitted, unless told.
            "consumer.isolation.level": "read_committed",
            "consumer.max.poll.records": 5,  # small batches: the kill lands among them
        }.items()) + "\n")
        self.worker = jvm.start_java(None, WORKER, [self.jars], [str(props)], self.log, heap="512m")
        wait_until("the worker's REST API", self._rest_up, WAIT_S, self.worker, self.log)

    def _rest_up(self) -> bool:
        try:
            urllib.request.urlopen(self.url + "/connectors", timeout=2).read()
            return True
        except OSError:
            return False

    def kill(self) -> None:
        if self.worker is not None:
            jvm.stop(self.worker, sig=9)

    def connector(self, kind: str) -> None:
        name = self.names[kind]
        config = {"connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector", "tasks.max": "1",
                  "topics": self.topic.name,
                  "connection.url": f"jdbc:postgresql://127.0.0.1:{self.postgres.tcp_port}/postgres"
                                    f"?currentSchema={self.schema}",
                  "connection.username": "eosctl", "connection.password": self.postgres.password,
                  "schema.evolution": "basic", "table.name.format": name}
        if kind == "upsert":
            config.update({"insert.mode": "upsert", "primary.key.mode": "kafka"})
        else:
            config.update({"insert.mode": "insert", "primary.key.mode": "none", "transforms": "coords",
                           "transforms.coords.type": "org.apache.kafka.connect.transforms.InsertField$Value",
                           "transforms.coords.topic.field": "kafka_topic",
                           "transforms.coords.partition.field": "kafka_partition",
                           "transforms.coords.offset.field": "kafka_offset"})
        request = urllib.request.Request(f"{self.url}/connectors/{name}/config", json.dumps(config).encode(),
                                         {"Content-Type": "application/json"}, method="PUT")
        urllib.request.urlopen(request, timeout=30).read()

    def rows(self, kind: str) -> Counter:
        """(partition, offset) -> rows of the connector's table: the test's own SQL."""
        import psycopg

        name = self.names[kind]
        _, p, o = COORDS[kind]
        with psycopg.connect(self.pg_db) as con:
            exists = con.execute("SELECT to_regclass(%s)", (name,)).fetchone()[0]
            if exists is None:
                return Counter()
            counts = con.execute(f'SELECT "{p}", "{o}", count(*) FROM {name} GROUP BY 1, 2').fetchall()
            return Counter({(pp, oo): n for pp, oo, n in counts})

    def committed(self, kind: str) -> dict[int, int]:
        """The connector's group's committed offsets (connect-NAME), from the test's own consumer."""
        consumer = Consumer({"bootstrap.servers": self.bootstrap,
                             "group.id": f"connect-{self.names[kind]}"})
        try:
            tps = consumer.committed([TopicPartition(self.topic.name, p) for p in range(PARTITIONS)], 10)
        finally:
            consumer.close()
        return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}

    def config(self, kind: str) -> Path:
        """The config of docs/audit.md's Kafka Connect section."""
        name = self.names[kind]
        path = self.home / f"{name}.toml"
        text = documented_config("Kafka Connect")
        for documented, mine in [('["orders"]', f'["{self.topic.name}"]'), ("orders-sink", name),
                                 ("pipelines.orders", f"pipelines.{name}"),
                                 ('table = "orders"', f'table = "{name}"'),
                                 *zip(COORDS["upsert"], COORDS[kind], strict=True)]:
            text = text.replace(documented, mine)
        text = re.sub(r'postgres = ".*"', lambda _: f'postgres = "{self.pg_db}"', text)
        path.write_text(f'[clusters.local]\nbootstrap_servers = "{self.bootstrap}"\n\n{text}')
        return path


@pytest.fixture(scope="module")
def pg_module(postgres) -> Iterator[str]:
    """A schema of the session's PostgreSQL for this module (pg_db is per test)."""
    import psycopg

    schema = f"connect_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres.uri(), autocommit=True) as con:
        con.execute(f'CREATE SCHEMA "{schema}"')
    yield postgres.uri() + f"&options=-csearch_path%3D{schema}"
    with psycopg.connect(postgres.uri(), autocommit=True) as con:
        con.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture(scope="module")
def connect(bootstrap: str, postgres, pg_module: str,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Connect]:
    if postgres.tcp_port is None:
        pytest.fail("the suite's PostgreSQL listens on no TCP port; Connect's JDBC driver needs one")
    c = Connect(bootstrap, postgres, pg_module, tmp_path_factory.mktemp("connect"))
    try:
        c.start(flush_ms=600_000)  # no offset commit before the kill
        c.connector("upsert")
        c.connector("insert")
        wait_until("rows in both tables", lambda: bool(c.rows("upsert")) and bool(c.rows("insert")), WAIT_S,
                   c.worker, c.log)
        c.kill()
        c.rows_at_kill = {name: c.rows(name) for name in ("upsert", "insert")}
        c.start(flush_ms=1000)
        committed = c.topic.read("read_committed")
        ends = {p: max(o for q, o in committed if q == p) + 1 for p in range(PARTITIONS)}

        def done() -> bool:
            return all(set(c.rows(n)) == committed
                       and all(c.committed(n).get(p, -1) >= e for p, e in ends.items())
                       for n in ("upsert", "insert"))

        wait_until("both connectors caught up and committed", done, WAIT_S, c.worker, c.log)
        c.ends = ends
        yield c
    finally:
        c.kill()
        c.topic.close()


def test_upsert_keyed_by_kafka_coordinates_killed_and_restarted_audits_clean(connect):
    rows = connect.rows("upsert")
    assert connect.rows_at_kill["upsert"] and set(rows.values()) == {1}
    code, report = audit(connect.config("upsert"))
    assert (code, report["findings"]) == (0, [])
    assert sum(p["sink_rows"] for p in report["partitions"]) == len(connect.topic.committed)


def test_insert_without_key_writes_the_replay_twice_found_at_its_offsets(connect):
    rows = connect.rows("insert")
    twice = {po for po, n in rows.items() if n > 1}
    # Nothing was committed before the kill: every row written before it was written again.
    assert twice == set(connect.rows_at_kill["insert"]) and set(rows.values()) == {1, 2}
    code, report = audit(connect.config("insert"))
    assert code == 1
    assert {f["kind"] for f in report["findings"]} == {"duplicate"}
    assert offsets_found(report, "duplicate", set(connect.topic.committed)) == twice
    assert sum(f["count"] for f in report["findings"]) == len(twice)


def test_lag_and_ledger_show_the_worker_committed_next_to_the_table(connect):
    committed = connect.committed("insert")
    rows = connect.rows("insert")
    result = CliRunner().invoke(main, ["ledger", "-c", str(connect.config("insert")), "--format", "json"])
    assert result.exit_code == 1, result.output  # the duplicates are flagged
    ledger = {p["partition"]: p for p in json.loads(result.stdout)["partitions"]}
    for p in range(PARTITIONS):
        mine = [o for q, o in rows if q == p]
        assert ledger[p]["committed_offset"] == committed[p]
        assert (ledger[p]["max_offset"], ledger[p]["rows"]) == (max(mine), sum(n for (q, _), n in rows.items()
                                                                                  if q == p))
        assert ledger[p]["duplicate_offsets"] == sum(1 for (q, _), n in rows.items() if q == p and n > 1)

    result = CliRunner().invoke(main, ["lag", "-c", str(connect.config("insert")), "--format", "json"])
    assert result.exit_code == 0, result.output
    (group,) = json.loads(result.stdout)["groups"]
    assert group["group"] == f"connect-{connect.names['insert']}"
    assert {p["partition"]: p["committed"] for p in group["partitions"]} == committed
    assert all(p["records_behind"] == 0 for p in group["partitions"])


def test_tui_ledger_shows_the_worker_committed_next_to_the_table(connect):
    """The TUI's ledger pane on the connector's group: the table's rows, span and duplicates next to the
    offsets the worker committed."""
    from eosctl.config.target import resolve
    from tests.support.tui import rows_of, running, sync, until
    from tui.app import EosApp
    from tui.sources import LiveSource

    committed = connect.committed("insert")
    rows = connect.rows("insert")
    name = connect.names["insert"]

    @sync
    async def run() -> None:
        app = EosApp(LiveSource(resolve(str(connect.config("insert")), name, None)), refresh_seconds=60)
        async with running(app, (160, 30)) as pilot:
            await until(pilot, lambda: app.dash is not None, "the first refresh", timeout=120)
            await pilot.press("6")
            await pilot.pause()
            shown = {r[0]: r for r in rows_of(app, "ledger")}
            for p in range(PARTITIONS):
                mine = {o: n for (q, o), n in rows.items() if q == p}
                row = shown[f"{connect.topic.name}[{p}]"]
                assert row[1] == f"{sum(mine.values()):,}"
                assert row[2] == f"{min(mine)}..{max(mine)}"
                extra = sum(n - 1 for n in mine.values())
                assert row[3] == (f"{extra:,}" if extra else "-")  # a partition the kill came before: none
                assert row[5] == str(committed[p])

    run()
