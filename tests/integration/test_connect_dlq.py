"""Kafka Connect's own dead-letter queue, audited with the sink (issue 53): one distributed worker
(connect-runtime 4.4.0) runs Debezium's JDBC sink into the suite's PostgreSQL with errors.tolerance=all and
a DLQ with context headers (KIP-298). A record the JsonConverter cannot read is dead-lettered by the
worker itself; the test then plants one sink-and-DLQ record (a dead letter of a record the table holds).
The audit gives no gap for the dead-lettered record and exactly the planted finding."""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support import helpers, jvm
from tests.support.helpers import eosctl, exited
from tests.support.streaming import SCHEMA

pytestmark = [pytest.mark.integration]

WORKER = "org.apache.kafka.connect.cli.ConnectDistributed"
WAIT_S = 300
POISON = 3  # the offset of the record the converter rejects
EXCEPTION = "org.apache.kafka.connect.errors.DataException"


def tail(log: Path) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-30:]) if log.exists() else ""


def dlq_records(bootstrap: str, topic: str) -> list[list[tuple[str, bytes]]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "t-dlq-check",
                         "enable.partition.eof": True, "enable.auto.commit": False})
    out = []
    try:
        meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None:
            return []
        consumer.assign([TopicPartition(topic, 0, 0)])
        while True:
            msg = consumer.poll(5.0)
            if msg is None or msg.error():
                return out
            out.append(list(msg.headers() or []))
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def pg_schema(postgres) -> Iterator[str]:
    import psycopg

    schema = f"cdlq_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres.uri(), autocommit=True) as con:
        con.execute(f'CREATE SCHEMA "{schema}"')
    yield schema
    with psycopg.connect(postgres.uri(), autocommit=True) as con:
        con.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture(scope="module")
def worker(bootstrap: str, postgres, pg_schema: str, tmp_path_factory: pytest.TempPathFactory):
    from eosctl.sandbox import maven
    from eosctl.sandbox.net import free_port

    if postgres.tcp_port is None:
        pytest.fail("the suite's PostgreSQL listens on no TCP port; Connect's JDBC driver needs one")
    home = tmp_path_factory.mktemp("connect-dlq")
    name = f"d{uuid.uuid4().hex[:8]}"
    topic, dlq = f"{name}-orders", f"{name}-orders.dlq"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: its futures need the live handle
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(6):
        value = b"not json" if i == POISON else json.dumps({"schema": SCHEMA,
                                                            "payload": {"id": f"o-{i}", "n": i}}).encode()
        producer.produce(topic, key=f"o-{i}".encode(), value=value, partition=0)
        assert producer.flush(30) == 0  # one by one: offset i is record i
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    props = home / "worker.properties"
    props.write_text("\n".join(f"{k}={v}" for k, v in {
        "bootstrap.servers": bootstrap, "group.id": f"{name}-workers",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "config.storage.topic": f"{name}-configs", "offset.storage.topic": f"{name}-offsets",
        "status.storage.topic": f"{name}-status", "config.storage.replication.factor": 1,
        "offset.storage.replication.factor": 1, "status.storage.replication.factor": 1,
        "offset.storage.partitions": 1, "status.storage.partitions": 1, "listeners": url,
        "offset.flush.interval.ms": 1000, "consumer.isolation.level": "read_committed"}.items()) + "\n")
    log = home / "worker.log"
    proc = jvm.start_java(None, WORKER, [maven.jars("connect")], [str(props)], log, heap="512m")

    def rest_up() -> bool:
        try:
            urllib.request.urlopen(url + "/connectors", timeout=2).read()
            return True
        except OSError:
            return False

    try:
        helpers.wait_until("the worker's REST API", rest_up, WAIT_S, gone=exited("the Connect worker", proc),
                           detail=lambda: tail(log))
        config = {"connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector", "tasks.max": "1",
                  "topics": topic,
                  "connection.url": f"jdbc:postgresql://127.0.0.1:{postgres.tcp_port}/postgres"
                                    f"?currentSchema={pg_schema}",
                  "connection.username": "eosctl", "connection.password": postgres.password,
                  "schema.evolution": "basic", "table.name.format": name,
                  "insert.mode": "upsert", "primary.key.mode": "kafka",
                  "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
                  "errors.deadletterqueue.topic.replication.factor": "1",
                  "errors.deadletterqueue.context.headers.enable": "true"}
        request = urllib.request.Request(f"{url}/connectors/{name}/config", json.dumps(config).encode(),
                                         {"Content-Type": "application/json"}, method="PUT")
        urllib.request.urlopen(request, timeout=30).read()
        uri = postgres.uri() + f"&options=-csearch_path%3D{pg_schema}"

        def rows() -> set[int]:
            import psycopg

            with psycopg.connect(uri) as con:
                if con.execute("SELECT to_regclass(%s)", (name,)).fetchone()[0] is None:
                    return set()
                return {o for (o,) in con.execute(f'SELECT "__connect_offset" FROM {name}').fetchall()}

        helpers.wait_until("the table's five rows and the worker's dead letter",
                           lambda: rows() == {0, 1, 2, 4, 5} and len(dlq_records(bootstrap, dlq)) == 1,
                           WAIT_S, gone=exited("the Connect worker", proc), detail=lambda: tail(log))
        yield {"topic": topic, "dlq": dlq, "name": name, "uri": uri, "home": home}
    finally:
        jvm.stop(proc, sig=9)


def test_the_workers_dead_letter_is_no_gap_and_the_planted_sink_and_dlq_is_the_one_finding(
        worker, bootstrap: str) -> None:
    headers = dict(dlq_records(bootstrap, worker["dlq"])[0])
    assert headers["__connect.errors.offset"] == str(POISON).encode()  # Connect's own context headers
    assert headers["__connect.errors.exception.class.name"] == EXCEPTION.encode()
    cfg = worker["home"] / "eosctl.toml"
    cfg.write_text(f"""
[clusters.local]
bootstrap_servers = "{bootstrap}"

[pipelines.p]
source_topics = ["{worker['topic']}"]
group = "connect-{worker['name']}"

[pipelines.p.sink]
postgres = "{worker['uri']}"
table = "{worker['name']}"
topic_column = "__connect_topic"
partition_column = "__connect_partition"
offset_column = "__connect_offset"
dlq_topic = "{worker['dlq']}"
""")

    def audit() -> tuple[int, dict]:
        result = eosctl("audit", "-c", str(cfg), "--engine", "local", "--format", "json")
        assert result.exit_code in (0, 1), result.output
        return result.exit_code, json.loads(result.stdout)

    code, doc = audit()
    assert (code, doc["findings"]) == (0, [])  # the rejected record is dead-lettered, not a gap
    assert doc["partitions"][0]["dead_lettered"] == 1
    assert doc["dlq"]["by_exception"] == [{"exception": EXCEPTION, "records": 1}]

    # plant a dead letter of a record the table holds
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce(worker["dlq"], value=b"{}", partition=0, headers=[
        ("__connect.errors.topic", worker["topic"].encode()), ("__connect.errors.partition", b"0"),
        ("__connect.errors.offset", b"4"), ("__connect.errors.exception.class.name", EXCEPTION.encode())])
    assert plain.flush(30) == 0
    code, doc = audit()
    assert code == 1
    assert [(f["kind"], f["first_offset"], f["last_offset"], f["count"]) for f in doc["findings"]] == [
        ("sink_and_dlq", 4, 4, 1)]
