"""Leaders move and a broker dies on the three-node cluster (issue 31 item 2): `audit` (both engines, content
check on), `ledger` and `lag --watch` give the same clean answers while a churn thread reassigns the
partitions' replicas (Kafka's ReassignPartitionsCommand) and moves their leaders (a preferred-leader
election through the Admin API), and while one broker is down (restarted in a finally: the cluster is the
session's).

The topic: 3 partitions, replication factor 3, 200 keyed records each in committed transactions of 20; the
sink holds each once with its key, its offsets table and the group's commits say the next offset is the
high watermark. Every answer must be a pass: no finding, no lag, exit 0, never a traceback.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from functools import partial
from pathlib import Path

import pytest

from tests.support.broker import keyed_sink
from tests.support.helpers import eosctl

pytestmark = [pytest.mark.integration]

PARTITIONS, RECORDS, TXN = 3, 200, 20


cli = partial(eosctl, columns=250)


@pytest.fixture(scope="module")
def moving(kafka_cluster3, tmp_path_factory):
    """(cluster, topic, group, sink) with the data written and committed."""
    cluster = kafka_cluster3
    topic, group = "moving" + uuid.uuid4().hex[:6], "g" + uuid.uuid4().hex[:6]
    sink = tmp_path_factory.mktemp("moving") / "sink.duckdb"
    keyed_sink(cluster.bootstrap, topic, group, sink, PARTITIONS, RECORDS, TXN, transactional_id=topic,
               replication=3)
    return cluster, topic, group, sink


class Churn:
    """Reassigns the topic's replicas in rotation and elects the preferred leaders, over and over, until
    stopped: every partition's leader moves every round. Counts the rounds that moved one."""

    def __init__(self, cluster, topic: str, workdir: Path) -> None:
        self.cluster, self.topic, self.workdir = cluster, topic, workdir
        self.stop = threading.Event()
        self.rounds = 0
        self.errors: list[str] = []
        self.seen: list[dict[int, int]] = []  # the partitions' leaders after each round
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Churn:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=120)

    def _run(self) -> None:
        from confluent_kafka import ElectionType, TopicPartition
        from confluent_kafka.admin import AdminClient

        from eosctl.sandbox import apache_kafka

        admin = AdminClient({"bootstrap.servers": self.cluster.bootstrap})
        nodes = [n.node_id for n in self.cluster.nodes]
        shift = 0
        while not self.stop.is_set():
            shift += 1
            order = [[nodes[(q + shift + i) % 3] for i in range(3)] for q in range(PARTITIONS)]
            plan = {"version": 1, "partitions": [{"topic": self.topic, "partition": q, "replicas": order[q]}
                                                 for q in range(PARTITIONS)]}
            path = self.workdir / "reassign.json"
            path.write_text(json.dumps(plan))
            try:
                apache_kafka.tool(self.cluster, "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
                                  "--bootstrap-server", self.cluster.bootstrap, "--reassignment-json-file",
                                  str(path), "--execute", timeout=120)
                admin.elect_leaders(ElectionType.PREFERRED,
                                    [TopicPartition(self.topic, q) for q in range(PARTITIONS)]).result(30)
                self.rounds += 1
                self.seen.append(leaders(self.cluster, self.topic))
            except Exception as e:  # a round the cluster refused (a reassignment still running): try again
                self.errors.append(str(e)[:200])


def leaders(cluster, topic: str) -> dict[int, int]:
    from eosctl.cluster.wire import WireClient

    with WireClient(cluster.bootstrap) as c:
        return c.metadata([topic])[topic]


def clean_answers(cluster, topic: str, group: str, sink: Path, engines: tuple[str, ...]) -> None:
    base = ["--bootstrap", cluster.bootstrap, "--topic", topic]
    sink_args = ["--sink-duckdb", str(sink), "--sink-table", "orders_sink"]
    for engine in engines:
        r = cli("audit", *base, *sink_args, "--key-column", "order_id", "--group", group, "--offsets-table",
                "sink_offsets", "--engine", engine, "--format", "json")
        assert r.exit_code == 0, r.stderr
        report = json.loads(r.stdout)
        assert report["findings"] == [] and report["summary"]["expected_records"] == PARTITIONS * RECORDS
    config = sink.parent / f"ledger-{len(cluster.nodes)}.toml"
    config.write_text(f'[clusters.c]\nbootstrap_servers = "{cluster.bootstrap}"\n'
                      f'[pipelines.p]\ncluster = "c"\nsource_topics = ["{topic}"]\ngroup = "{group}"\n'
                      f'[pipelines.p.sink]\nduckdb = "{sink}"\ntable = "orders_sink"\n'
                      'key_column = "order_id"\noffsets_table = "sink_offsets"\n')
    r = cli("ledger", "-c", str(config), "-p", "p", "--format", "json")
    assert r.exit_code == 0, r.stderr + r.stdout
    r = cli("lag", *base, "--group", group, "--watch", "0.3", "--count", "4", "--format", "json")
    assert r.exit_code == 0, r.stderr
    for line in r.stdout.splitlines():
        (g,) = json.loads(line)["groups"]
        assert g["status"] == "OK", g


def test_answers_stay_clean_while_leaders_move(moving, spark, tmp_path):
    cluster, topic, group, sink = moving
    with Churn(cluster, topic, tmp_path) as churn:
        deadline = time.monotonic() + 120
        while churn.rounds < 1 and time.monotonic() < deadline:
            time.sleep(0.5)
        clean_answers(cluster, topic, group, sink, ("local", "spark"))
    assert churn.rounds >= 2, churn.errors
    assert len({tuple(sorted(m.items())) for m in churn.seen}) >= 2  # the leaders did move


def test_answers_with_one_broker_down(moving, spark, tmp_path):
    from eosctl.sandbox import apache_kafka

    cluster, topic, group, sink = moving
    victim = cluster.nodes[0].node_id
    apache_kafka.kill_node(cluster, victim)
    try:
        from copy import copy

        up = copy(cluster)
        up.nodes = [n for n in cluster.nodes if n.node_id != victim]
        deadline = time.monotonic() + 60
        while any(leader in (victim, -1) for leader in leaders(up, topic).values()):
            assert time.monotonic() < deadline, "the dead broker's partitions got no new leader"
            time.sleep(0.5)
        clean_answers(up, topic, group, sink, ("local", "spark"))
    finally:
        apache_kafka.restart_node(cluster, victim)
