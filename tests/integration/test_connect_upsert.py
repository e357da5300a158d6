"""The Debezium JDBC sink in upsert mode (insert.mode=upsert, primary.key.mode=record_key,
delete.enabled=true) into the suite's PostgreSQL, audited as a state sink (issue 51, `mode = "upsert"`): one
distributed Connect worker (Maven Central's connect-runtime, eosctl/sandbox/jvm/connect.pom.xml), two
connectors on one transactional topic, one reading read_committed, one read_uncommitted (Connect's sink
tasks' Java consumer default).

The topic (two partitions, keys {"pk": "k0"}..{"pk": "k9"}, values {"n": N} with N unique, both Connect's
JSON with schema; the audit keys by the JSON key's field, `key_fields = {pk = "key.payload.pk"}`):
  txn 1, committed: k0..k9 = 0..9
  txn 2, aborted:   k0..k4 = 100..104
  txn 3, committed: k5..k7 = 10..12, k8 and k9 tombstones
  txn 4, open:      k1 = 200, k6 = 201 (left open until the module ends)
read_committed, the table is the latest committed value per key with k8 and k9 deleted: it audits clean.
read_uncommitted, k0, k2, k3, k4 hold their aborted values and k1, k6 the open transaction's: exactly those
are aborted_value and uncommitted_value, as the test's own SQL finds them.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support import helpers, jvm
from tests.support.helpers import eosctl, exited
from tests.support.markers import markers_written

pytestmark = [pytest.mark.integration]

WORKER = "org.apache.kafka.connect.cli.ConnectDistributed"
WAIT_S = 300
SCHEMA = {"type": "struct", "name": "state", "optional": False,
          "fields": [{"field": "n", "type": "int32", "optional": False}]}
# The record key as Debezium's record_key mode needs it: a struct (JsonConverter with its schema).
KEY_SCHEMA = {"type": "struct", "name": "key", "optional": False,
              "fields": [{"field": "pk", "type": "string", "optional": False}]}
TXNS = [  # (end, [(key, n or None: a tombstone)])
    ("commit", [(f"k{i}", i) for i in range(10)]),
    ("abort", [(f"k{i}", 100 + i) for i in range(5)]),
    ("commit", [("k5", 10), ("k6", 11), ("k7", 12), ("k8", None), ("k9", None)]),
    ("open", [("k1", 200), ("k6", 201)]),
]
COMMITTED = {"k0": 0, "k1": 1, "k2": 2, "k3": 3, "k4": 4, "k5": 10, "k6": 11, "k7": 12}
UNCOMMITTED = {"k0": 100, "k1": 200, "k2": 102, "k3": 103, "k4": 104, "k5": 10, "k6": 201, "k7": 12}


def wait_until(what: str, ready: Callable[[], bool], worker, log: Path) -> None:
    helpers.wait_until(what, ready, WAIT_S, gone=exited("the Connect worker", worker),
                       detail=lambda: "\n".join(log.read_text(errors="replace").splitlines()[-30:])
                       if log.exists() else "")


class Upserts:
    def __init__(self, bootstrap: str, postgres, pg_db: str, home: Path) -> None:
        from eosctl.sandbox import maven
        from eosctl.sandbox.net import free_port

        self.bootstrap, self.postgres, self.pg_db, self.home = bootstrap, postgres, pg_db, home
        self.schema = parse_qs(urlsplit(pg_db).query)["options"][0].split("=", 1)[1]
        self.name = f"u{uuid.uuid4().hex[:8]}"
        self.topic = f"{self.name}-state"
        self.url = f"http://127.0.0.1:{free_port()}"
        self.jars = maven.jars("connect")
        self.log = home / "worker.log"
        self.worker = None
        self.opener: Producer | None = None

    def write(self) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(self.topic, 2, 1)])[self.topic].result(30)
        for end, records in TXNS:
            p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": f"{self.topic}.{end}",
                          "transaction.timeout.ms": 600_000})
            p.init_transactions(30)
            p.begin_transaction()
            for key, n in records:
                value = None if n is None else json.dumps({"schema": SCHEMA, "payload": {"n": n}}).encode()
                k = json.dumps({"schema": KEY_SCHEMA, "payload": {"pk": key}}).encode()
                p.produce(self.topic, key=k, value=value, partition=int(key[1:]) % 2)
            assert p.flush(30) == 0
            if end == "open":
                self.opener = p
            else:
                (p.commit_transaction if end == "commit" else p.abort_transaction)(30)
                # the next id's records after this one's markers, as the offsets in TXNS have them
                markers_written(self.bootstrap, f"{self.topic}.{end}")

    def start(self) -> None:
        props = self.home / "worker.properties"
        props.write_text("\n".join(f"{k}={v}" for k, v in {
            "bootstrap.servers": self.bootstrap, "group.id": f"{self.name}-workers",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "config.storage.topic": f"{self.name}-configs", "offset.storage.topic": f"{self.name}-offsets",
            "status.storage.topic": f"{self.name}-status", "config.storage.replication.factor": 1,
            "offset.storage.replication.factor": 1, "status.storage.replication.factor": 1,
            "offset.storage.partitions": 1, "status.storage.partitions": 1, "listeners": self.url,
            "offset.flush.interval.ms": 1000, "connector.client.config.override.policy": "All",
        }.items()) + "\n")
        self.worker = jvm.start_java(None, WORKER, [self.jars], [str(props)], self.log, heap="512m")
        wait_until("the worker's REST API", self._rest_up, self.worker, self.log)

    def _rest_up(self) -> bool:
        try:
            urllib.request.urlopen(self.url + "/connectors", timeout=2).read()
            return True
        except OSError:
            return False

    def connector(self, isolation: str) -> None:
        name = f"{isolation}_{self.name}"
        config = {"connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector", "tasks.max": "1",
                  "topics": self.topic,
                  "connection.url": f"jdbc:postgresql://127.0.0.1:{self.postgres.tcp_port}/postgres"
                                    f"?currentSchema={self.schema}",
                  "connection.username": "eosctl", "connection.password": self.postgres.password,
                  "schema.evolution": "basic", "table.name.format": name, "insert.mode": "upsert",
                  "primary.key.mode": "record_key", "delete.enabled": "true",
                  "consumer.override.isolation.level": isolation}
        request = urllib.request.Request(f"{self.url}/connectors/{name}/config", json.dumps(config).encode(),
                                         {"Content-Type": "application/json"}, method="PUT")
        urllib.request.urlopen(request, timeout=30).read()

    def table(self, isolation: str) -> dict[str, int]:
        """The test's own SQL: pk -> n."""
        import psycopg

        name = f"{isolation}_{self.name}"
        with psycopg.connect(self.pg_db) as con:
            if con.execute("SELECT to_regclass(%s)", (name,)).fetchone()[0] is None:
                return {}
            return dict(con.execute(f'SELECT pk, n FROM "{name}"').fetchall())

    def audit(self, isolation: str) -> tuple[int, dict]:
        name = f"{isolation}_{self.name}"
        uri = self.pg_db.replace(self.postgres.password, "${EOSCTL_SINK_PASSWORD}")
        config = self.home / f"{name}.toml"
        config.write_text(f'[clusters.c]\nbootstrap_servers = "{self.bootstrap}"\n\n[pipelines.p]\n'
                          f'source_topics = ["{self.topic}"]\ngroup = "connect-{name}"\n\n'
                          f'[pipelines.p.sink]\npostgres = "{uri}"\ntable = "{name}"\nmode = "upsert"\n'
                          'key_fields = {pk = "key.payload.pk"}\nvalue_fields = {n = "value.payload.n"}\n')
        r = eosctl("audit", "-c", str(config), "--engine", "local", "--format", "json",
                   env={"EOSCTL_SINK_PASSWORD": self.postgres.password})
        return r.exit_code, json.loads(r.stdout)


@pytest.fixture(scope="module")
def pg_module(postgres) -> Iterator[str]:
    import psycopg

    schema = f"upsert_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres.uri(), autocommit=True) as con:
        con.execute(f'CREATE SCHEMA "{schema}"')
    yield postgres.uri() + f"&options=-csearch_path%3D{schema}"
    with psycopg.connect(postgres.uri(), autocommit=True) as con:
        con.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture(scope="module")
def upserts(bootstrap: str, postgres, pg_module: str, tmp_path_factory) -> Iterator[Upserts]:
    if postgres.tcp_port is None:
        pytest.fail("the suite's PostgreSQL listens on no TCP port; Connect's JDBC driver needs one")
    u = Upserts(bootstrap, postgres, pg_module, tmp_path_factory.mktemp("upserts"))
    try:
        u.write()
        u.start()
        u.connector("read_committed")
        u.connector("read_uncommitted")

        def both() -> bool:
            return u.table("read_committed") == COMMITTED and u.table("read_uncommitted") == UNCOMMITTED

        wait_until("both tables as their consumers read the topic", both, u.worker, u.log)
        yield u
    finally:
        if u.worker is not None:
            jvm.stop(u.worker, sig=9)
        if u.opener is not None:
            u.opener.abort_transaction(30)


def test_debezium_upsert_with_deletes_read_committed_audits_clean(upserts):
    code, report = upserts.audit("read_committed")
    assert (code, report["findings"]) == (0, [])


def test_debezium_upsert_read_uncommitted_holds_exactly_the_aborted_and_open_values(upserts):
    table = upserts.table("read_uncommitted")
    aborted = {k for k, n in table.items() if 100 <= n < 200}  # the test's own SQL
    opened = {k for k, n in table.items() if n >= 200}
    code, report = upserts.audit("read_uncommitted")
    assert code == 1
    found = {(f["kind"], f["key"]) for f in report["findings"]}
    assert found == {("aborted_value", k) for k in aborted} | {("uncommitted_value", k) for k in opened}
    assert (aborted, opened) == ({"k0", "k2", "k3", "k4"}, {"k1", "k6"})
    assert {r["rule"] for r in report["root_causes"]} == {"sink_reads_aborted"}
