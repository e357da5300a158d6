"""Every group type on Apache Kafka 4.4 (issue 52, "every group type"): a confluent-kafka consumer with
`group.protocol=consumer` (KIP-848) is a `consumer` group, one with the classic protocol a `classic` group,
a Kafka Streams app with `group.protocol=streams` (KIP-1071) a `streams` group and a Java
KafkaShareConsumer (KIP-932) a `share` group, each shown with its type, state and members in
`lag --format json` (ConsumerGroupDescribe, StreamsGroupDescribe, ShareGroupDescribe), a share group's
progress from DescribeShareGroupOffsets, and a warning where a share group reads a transactional topic
read_uncommitted.

The session broker needs nothing set for it: Kafka 4.4 finalizes `streams.version=1` and
`share.version=2` at format time (FeatureCommand describe on the session broker; each feature's
latestProduction level, the one StorageTool formats with), and `group.coordinator.rebalance.protocols`
defaults to classic, consumer, streams (share groups are governed by share.version alone)."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.support import helpers, jvm
from tests.support.markers import markers_written

pytestmark = pytest.mark.integration


def consume_and_commit(bootstrap: str, topic: str, group: str, protocol: str):
    """A subscribed consumer of ``protocol`` that read the topic's 3 records and committed: left running
    (the group stays Stable), closed by the caller."""
    from confluent_kafka import Consumer

    conf = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "group.protocol": protocol, "client.id": f"{protocol}-reader"}
    if protocol == "classic":
        conf["session.timeout.ms"] = 10_000
    c = Consumer(conf)
    c.subscribe([topic])
    got, deadline = 0, time.monotonic() + 60
    while got < 3:
        assert time.monotonic() < deadline, f"the {protocol} consumer read {got} of 3 records"
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got += 1
    c.commit(asynchronous=False)
    return c


def test_lag_names_each_group_s_type(apache_kafka) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    bs = apache_kafka.bootstrap
    topic = "g" + uuid.uuid4().hex[:10]
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
    p = Producer({"bootstrap.servers": bs})
    for i in range(3):
        p.produce(topic, value=b"%d" % i)
    assert p.flush(30) == 0
    consumers = [consume_and_commit(bs, topic, f"{topic}-{protocol}", protocol)
                 for protocol in ("consumer", "classic")]
    try:
        result = helpers.eosctl("lag", "--bootstrap", bs, "-t", topic, "--format", "json", columns=None)
        assert result.exit_code == 0, result.output
        groups = {g["group"]: g for g in json.loads(result.stdout)["groups"]}
        assert {g: (d["type"], d["state"], [p["committed"] for p in d["partitions"]])
                for g, d in groups.items()} == {
            f"{topic}-consumer": ("consumer", "STABLE", [3]), f"{topic}-classic": ("classic", "STABLE", [3])}
        # Who consumes: ConsumerGroupDescribe for the consumer-protocol group (DescribeGroups answers it
        # as Dead with no members), DescribeGroups for the classic one.
        assert {g: [(p["consumer"] or {}).get("client_id") for p in d["partitions"]]
                for g, d in groups.items()} == {
            f"{topic}-consumer": ["consumer-reader"], f"{topic}-classic": ["classic-reader"]}
    finally:
        for c in consumers:
            c.close()


def transactional_topic(bootstrap: str, topic: str) -> None:
    """Two partitions and three transactions of one record per partition: committed, aborted, committed
    (each partition: data 0, COMMIT 1, aborted 2, ABORT 3, data 4, COMMIT 5)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, 2, 1), NewTopic(f"{topic}.out", 2, 1)]).values():
        f.result(60)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-writer"})
    p.init_transactions(60)
    for outcome in ("commit", "abort", "commit"):
        p.begin_transaction()
        for partition in (0, 1):
            p.produce(topic, partition=partition, value=outcome.encode())
        assert p.flush(30) == 0
        (p.commit_transaction if outcome == "commit" else p.abort_transaction)(30)
    markers_written(bootstrap, f"{topic}-writer")


@pytest.fixture(scope="module")
def group_apps(tmp_path_factory):
    from tests.support.groupjava import GroupJava

    return GroupJava(tmp_path_factory.mktemp("groupjava"))


def test_streams_and_share_groups_show_their_type_members_and_state(apache_kafka, group_apps) -> None:
    bs = apache_kafka.bootstrap
    topic = "gs" + uuid.uuid4().hex[:10]
    transactional_topic(bs, topic)
    loose, strict, app = f"{topic}-share", f"{topic}-share-rc", f"{topic}-app"
    procs: list[subprocess.Popen] = []
    try:
        # The share consumer at the default reads all 6 data records, the 2 aborted ones too (it would
        # never print READ at read_committed), the other the 4 committed ones.
        procs.append(group_apps.share(bs, topic, loose, records=6))
        procs.append(group_apps.share(bs, topic, strict, records=4, isolation="read_committed"))
        procs.append(group_apps.streams(bs, topic, f"{topic}.out", app))
        doc: dict = {}

        def described() -> bool:
            result = helpers.eosctl("lag", "--bootstrap", bs, "-t", topic, "--format", "json", columns=None)
            assert result.exit_code == 0, result.output
            doc.update({g["group"]: g for g in json.loads(result.stdout)["groups"]})
            streams = doc.get(app) or {}
            # Stable, with both tasks assigned and both partitions committed (its first commit).
            return (streams.get("state") == "STABLE" and bool(streams.get("members"))
                    and [p["committed"] for p in streams["partitions"]] == [6, 6]
                    and all(doc.get(g, {}).get("state") == "STABLE" for g in (loose, strict)))

        helpers.wait_until("the streams app committed and every group is Stable", described, 90, interval=1)
        streams = doc[app]
        assert (streams["type"], streams["state"], len(streams["members"])) == ("streams", "STABLE", 1)
        member = streams["members"][0]
        assert member["process_id"] and member["client_id"].startswith(app)
        assert member["active_tasks"] == [{"subtopology": "0", "partitions": [0, 1]}]
        assert (member["standby_tasks"], member["warmup_tasks"]) == ([], [])
        assert member["assignment"] == [{"topic": topic, "partition": 0}, {"topic": topic, "partition": 1}]
        assert streams["topology"]["subtopologies"] == [{"subtopology": "0", "source_topics": [topic]}]
        assert [p["consumer"]["client_id"] for p in streams["partitions"]] == [member["client_id"]] * 2
        assert streams["share"] is None
        for group, isolation in ((loose, "read_uncommitted"), (strict, "read_committed")):
            share = doc[group]
            assert (share["type"], share["state"]) == ("share", "STABLE")
            assert [(m["client_id"], m["assignment"], m["active_tasks"]) for m in share["members"]] == [
                ("share-reader", [{"topic": topic, "partition": 0}, {"topic": topic, "partition": 1}], None)]
            assert share["share"]["isolation_level"] == isolation
            assert share["topology"] is None
            # Its progress: each share-partition's start offset (as committed) and the broker's lag.
            for p in share["partitions"]:
                progress = p["share_progress"]
                assert isinstance(progress["start_offset"], int) and progress["start_offset"] >= 0
                assert p["committed"] == progress["start_offset"]
                assert progress["lag"] is None or progress["lag"] >= 0
                assert p["consumer"]["client_id"] == "share-reader"
        assert doc[loose]["share"]["warning"].startswith(
            f"share group {loose} reads transactional topic {topic} with share.isolation.level="
            "read_uncommitted: its consumers process aborted records")
        assert doc[strict]["share"]["warning"] is None
        table = helpers.eosctl("lag", "--bootstrap", bs, "-t", topic, columns=400)
        assert table.exit_code == 0, table.output
        lines = table.stdout.splitlines()
        assert f"{app}: streams group, STABLE, 1 member (1 process), 2 active tasks, topology epoch " \
            f"{streams['topology']['epoch']}" in lines
        assert f"{loose}: share group, STABLE, 1 member, read_uncommitted" in lines
        assert f"{strict}: share group, STABLE, 1 member, read_committed" in lines
        warned = [line for line in lines if line.startswith("warning: share group")]
        assert len(warned) == 1 and warned[0].startswith(f"warning: share group {loose} reads transactional")
    finally:
        for proc in procs:
            jvm.stop(proc)


MESSAGES = Path(__file__).resolve().parents[2] / "eosctl" / "cluster" / "messages"


@pytest.mark.jvm
@pytest.mark.parametrize("message", ["StreamsGroupDescribeRequest 89", "StreamsGroupDescribeResponse 89",
                                     "ShareGroupDescribeRequest 77", "ShareGroupDescribeResponse 77",
                                     "DescribeShareGroupOffsetsRequest 90",
                                     "DescribeShareGroupOffsetsResponse 90"])
def test_the_message_definitions_are_the_4_4_jar_s_schemas(message: str, tmp_path_factory) -> None:
    """eosctl/cluster/messages/*.json as SchemaDump.java prints them from Apache Kafka 4.4.0's jar now."""
    from eosctl.sandbox import maven

    jars = maven.jars("kafka")
    workdir = tmp_path_factory.getbasetemp() / "schemadump"
    if not (workdir / "classes" / "SchemaDump.class").exists():
        jvm.compile_java(workdir, "SchemaDump", (MESSAGES / "SchemaDump.java").read_text(), jars)
    name, key = message.split()
    done = jvm.run_java(workdir / "classes", "SchemaDump", [jars], [name, key], heap="128m")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == (MESSAGES / f"{name}.json").read_text()
