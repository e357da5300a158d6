"""A broker down for good on a three-node cluster (issue 31 item 2): the exporter keeps answering /metrics
with what it can read and names the partitions it can't (eosctl_partition_unreadable and a log line with
the reason), never crashing; the TUI keeps refreshing and names them in its banner.

The cluster is the module's own (a broker is killed and never restarted): three nodes, and a topic of three
single-replica partitions, partition q on node q + 1, so killing node 1 leaves partition 0 without a
leader while 1 and 2 stay readable. 30 records a partition in committed transactions (a marker after each
10: high watermark 33), the group committed at the high watermark.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid

import pytest
from textual.widgets import Static

from tests.support.markers import markers_written
from tests.support.prometheus import Exporter, poll
from tests.support.tui import running, sync, text_of, until

pytestmark = pytest.mark.integration

RECORDS, TXN = 30, 10
HW = RECORDS + RECORDS // TXN
VICTIM = 1  # the node holding partition 0


class Dark:
    """The module's cluster, topic and group; kill() stops node VICTIM for good (once) and waits until the
    controller gives partition 0 no leader."""

    def __init__(self, cluster, topic: str, group: str) -> None:
        self.cluster, self.topic, self.group = cluster, topic, group
        self.killed = False

    def leaders(self) -> dict[int, int]:
        from eosctl.cluster.wire import WireClient

        with WireClient(self.cluster.bootstrap) as c:
            return c.metadata([self.topic])[self.topic]

    def kill(self) -> None:
        from eosctl.sandbox import apache_kafka

        if not self.killed:
            apache_kafka.kill_node(self.cluster, VICTIM)
            self.killed = True
        deadline = time.monotonic() + 60
        while self.leaders().get(0, 0) >= 0:
            assert time.monotonic() < deadline, "partition 0 kept a leader after its only broker died"
            time.sleep(0.3)


@pytest.fixture(scope="module")
def dark(tmp_path_factory):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from eosctl.sandbox import apache_kafka

    # A fenced broker is noticed in 3 s (default 9 s): the dark partition shows sooner.
    cluster = apache_kafka.start(tmp_path_factory.mktemp("dark") / "kafka", nodes=3, heap="320m",
                                 die_with_parent=True, properties={"broker.heartbeat.interval.ms": "500",
                                                                   "broker.session.timeout.ms": "3000"})
    try:
        topic, group = "dark" + uuid.uuid4().hex[:6], "g" + uuid.uuid4().hex[:6]
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        nodes = [n.node_id for n in cluster.nodes]
        assert nodes[0] == VICTIM
        admin.create_topics([NewTopic(topic, num_partitions=3, replica_assignment=[[n] for n in nodes],
                                      config={"min.insync.replicas": "1"})])[topic].result(60)
        p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": topic, "linger.ms": 5})
        p.init_transactions(60)
        for start in range(0, RECORDS, TXN):
            p.begin_transaction()
            for q in range(3):
                for i in range(start, start + TXN):
                    p.produce(topic, key=f"{q}-{i}".encode(), value=b"v", partition=q)
            p.commit_transaction(60)
        # Every partition's last marker before the group's offsets and the victim's kill: a marker still
        # owed to the victim's partition would leave its HW short of HW.
        markers_written(cluster.bootstrap, topic)
        c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
        c.commit(offsets=[TopicPartition(topic, q, HW) for q in range(3)], asynchronous=False)
        c.close()
        yield Dark(cluster, topic, group)
    finally:
        # Throwaway data: killed, not shut down (a controlled shutdown waits on the dead node's partitions).
        for n in cluster.nodes:
            apache_kafka.kill_node(cluster, n.node_id)
        apache_kafka.stop(cluster)


def values(scrape: dict, name: str, **labels: str) -> list[float]:
    return [v for ls, v in scrape.get(name, []) if all(ls.get(k) == w for k, w in labels.items())]


@pytest.mark.timeout(300)
def test_exporter_serves_what_it_can_read_and_names_the_dark_partition(dark):
    exporter = Exporter("--bootstrap", dark.cluster.bootstrap, "-t", dark.topic, "-g", dark.group,
                        "--listen", "127.0.0.1:0", "--interval", "0.5", "--audit-every", "0")
    try:
        address = exporter.wait_for(r"serving http://(127\.0\.0\.1:\d+)/metrics")[1]
        before = poll(lambda: exporter.metrics(address),
                      lambda s: len(values(s, "eosctl_partition_high_watermark", topic=dark.topic)) == 3,
                      "three partitions served")
        assert values(before, "eosctl_partition_unreadable") == []
        dark.kill()  # while it runs
        after = poll(lambda: exporter.metrics(address),
                     lambda s: values(s, "eosctl_up") == [1]
                     and values(s, "eosctl_partition_unreadable", topic=dark.topic) == [1],
                     "the dark partition named, the cluster up", timeout=90)
        assert [ls["partition"] for ls, _ in after["eosctl_partition_unreadable"]] == ["0"]
        line = exporter.wait_for(r"can't be read", timeout=30).string
        assert re.search(rf"1 partition can't be read \(eosctl_partition_unreadable\): {dark.topic}-0: "
                         r"no leader: the brokers holding its replicas are down; the others are served",
                         line), line
        # It keeps answering, with the readable partitions right, refresh after refresh.
        for _ in range(4):
            s = exporter.metrics(address)
            assert values(s, "eosctl_up") == [1]
            for q in (1, 2):
                hw = values(s, "eosctl_partition_high_watermark", topic=dark.topic, partition=str(q))
                assert hw == [HW]
                assert values(s, "eosctl_consumer_lag_records", topic=dark.topic, partition=str(q)) == [0]
            assert values(s, "eosctl_partition_unreadable", topic=dark.topic, partition="0") == [1]
            time.sleep(0.6)
        assert exporter.proc.poll() is None
    finally:
        exporter.stop()
    assert not any("Traceback" in line for line in exporter.seen + exporter.rest_of_stderr())


@sync
async def test_the_tui_keeps_refreshing_and_names_the_dark_partition(dark):
    from eosctl.config.model import Cluster
    from eosctl.config.target import Target
    from tui.app import EosApp
    from tui.sources import LiveSource

    dark.kill()  # down before the TUI starts (if the exporter's test did not run first)
    target = Target(cluster=Cluster(name="c3", bootstrap_servers=dark.cluster.bootstrap), pipeline=None,
                    config=None, topics=(dark.topic,), group=dark.group)
    app = EosApp(LiveSource(target, timeout_ms=5000), refresh_seconds=0.5)
    async with running(app, (160, 30)) as pilot:
        await until(pilot, lambda: app.dash is not None, "the first refresh", timeout=60)
        banner = app.query_one("#banner", Static)
        want = (f"1 partition can't be read: {dark.topic}-0 (no leader: the brokers holding its replicas "
                "are down)")
        await until(pilot, lambda: banner.has_class("shown") and want in text_of(banner), "the banner",
                    timeout=30, step=0.2)
        seen = [app.dash]
        deadline = time.monotonic() + 60
        while len(seen) < 3:  # it keeps refreshing: new readings, each naming the partition
            assert time.monotonic() < deadline, "the TUI stopped refreshing"
            if app.dash is not seen[-1]:
                seen.append(app.dash)
            await asyncio.sleep(0.2)
        for dash in seen:
            assert dash.unreadable is not None and want in dash.unreadable
            rows = {p.partition: p for p in dash.lag.partitions if p.topic == dark.topic}
            assert sorted(rows) == [0, 1, 2]
            assert all(rows[q].hw == HW and rows[q].committed == HW and rows[q].error is None for q in (1, 2))
            assert (rows[0].committed, rows[0].error) == (HW, "no leader: the brokers holding its replicas "
                                                                "are down")
            assert sorted(tp for tp in dash.capture.logs if tp[0] == dark.topic) == [(dark.topic, 1),
                                                                                     (dark.topic, 2)]
        assert want in text_of(banner)
