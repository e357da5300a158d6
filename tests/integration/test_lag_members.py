"""`lag` names who consumes each partition: member, client id and host, as kafka-consumer-groups.sh
--describe does (issue 32, item 6), against the session's Apache Kafka broker."""

from __future__ import annotations

import json
import time
import uuid

from click.testing import CliRunner
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from eosctl.cli import main


def test_lag_names_the_member_client_and_host_of_each_partition(bootstrap: str) -> None:
    topic, group = f"members-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(3):
        producer.produce(topic, value=str(i).encode())
    producer.flush(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "lag-reader",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        message = None
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(1.0)
        assert message is not None, "the consumer never got a record"
        consumer.commit(message=message, asynchronous=False)
        result = CliRunner().invoke(main, ["lag", "--bootstrap", bootstrap, "--group", group, "--format",
                                           "json"], env={"EOSCTL_CONFIG": None})
        assert result.exit_code == 0, result.output
        (part,) = json.loads(result.stdout)["groups"][0]["partitions"]
        assert part["consumer"]["client_id"] == "lag-reader"
        assert part["consumer"]["member_id"].startswith("lag-reader-")
        assert part["consumer"]["host"].lstrip("/") in ("127.0.0.1", "localhost", "::1")
    finally:
        consumer.close()
