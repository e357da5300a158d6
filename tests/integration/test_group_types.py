"""Each group's type from ListGroups v5 on Apache Kafka 4.4 (issue 52, the first part of "every group
type"): a confluent-kafka consumer with `group.protocol=consumer` (KIP-848) is a `consumer` group, one
with the classic protocol a `classic` group, both shown with their state and their consumer (the
consumer-protocol one through ConsumerGroupDescribe) in `lag --format json`."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from tests import helpers

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
