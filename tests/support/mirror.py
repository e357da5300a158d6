"""MirrorMaker 2 for the replica tests: dedicated mode (org.apache.kafka.connect.mirror.MirrorMaker from Maven
Central's connect-mirror, eosctl/sandbox/jvm/mirror.pom.xml) copying one topic of the session's broker
("src") to a second one-node cluster ("dr", the ``kafka_dr`` fixture), started, SIGKILLed, restarted and
stopped by the test (its JVM also dies with the test process).

Its intervals are shortened so a test waits seconds, not minutes: topics and groups refreshed every second,
checkpoints emitted and group offsets synced every second (MirrorCheckpointConfig's defaults are 10 min and
1 min). Heartbeats are off (`emit.heartbeats.enabled = false`): otherwise MM2 also runs a dr->src herder that
writes its own internal topics into the session's broker. Connect's own topics and group are named per run,
so runs on the one dr cluster never share offsets or connector configs.

Settings checked against Kafka's source (connect/mirror): MirrorMakerConfig.clusterPairs (heartbeat
herders), workerConfig (a `dr.` setting is the worker's: `dr.exactly.once.source.support`,
`dr.offset.flush.interval.ms`), connectorBaseConfig (`src.consumer.isolation.level` becomes the connector's
`source.consumer.isolation.level`, which MirrorSourceConfig.sourceConsumerConfig reads;
MirrorSourceConnector.exactlyOnceSupport is SUPPORTED only with read_committed).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from tests.support import jvm

MAIN = "org.apache.kafka.connect.mirror.MirrorMaker"
WAIT_S = 240  # MM2's start (two herders, its internal topics) or its catching up, on a busy machine
IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"


class MirrorMaker:
    """One MM2 of the test: ``src`` -> ``dr`` for ``topic``; ``eos``: exactly-once source support (KIP-618,
    with the internal REST dedicated mode needs for it); ``read_committed``: its source consumer's isolation;
    ``identity``: IdentityReplicationPolicy (the replica keeps the topic's name) instead of the default
    policy (`src.TOPIC`); ``flush_ms``: how often Connect commits its source offsets (without exactly-once,
    what a restart resumes from)."""

    def __init__(self, src: str, dr: str, home: Path, topic: str, *, eos: bool, read_committed: bool,
                 identity: bool = False, flush_ms: int = 1000, poll_records: int = 500) -> None:
        from eosctl.sandbox import maven
        from eosctl.sandbox.net import free_port

        self.src, self.dr, self.home, self.topic = src, dr, home, topic
        self.replica = topic if identity else f"src.{topic}"
        self.jars = maven.jars("mirror")
        self.log = home / "mm2.log"
        self.proc = None
        run = f"mm2-{uuid.uuid4().hex[:8]}"
        settings = {
            "clusters": "src, dr",
            "src.bootstrap.servers": src, "dr.bootstrap.servers": dr,
            "src->dr.enabled": "true", "src->dr.topics": topic,
            "emit.heartbeats.enabled": "false",
            "tasks.max": "1",
            "replication.factor": "1", "checkpoints.topic.replication.factor": "1",
            "heartbeats.topic.replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
            "offset.storage.replication.factor": "1", "status.storage.replication.factor": "1",
            "config.storage.replication.factor": "1",
            "offset.storage.topic": f"{run}-offsets", "config.storage.topic": f"{run}-configs",
            "status.storage.topic": f"{run}-status", "dr.group.id": run,
            "sync.topic.configs.enabled": "false", "sync.topic.acls.enabled": "false",
            "refresh.topics.interval.seconds": "1", "refresh.groups.interval.seconds": "1",
            "emit.checkpoints.interval.seconds": "1",
            "sync.group.offsets.enabled": "true", "sync.group.offsets.interval.seconds": "1",
            "dr.offset.flush.interval.ms": str(flush_ms),
            # Connectors found from the jars' ServiceLoader manifests, not by scanning every class on the
            # class path: 14 s from start to the first copy instead of 38 s, measured.
            "dr.plugin.discovery": "service_load", "plugin.discovery": "service_load",
            # A restarted worker gets its task at once: the killed member's session ends after 6 s (the
            # broker's minimum), and Connect holds no lost assignment back (its default waits up to 5 min).
            "dr.session.timeout.ms": "6000", "dr.heartbeat.interval.ms": "1000",
            "dr.scheduled.rebalance.max.delay.ms": "0",
            # Small fetches: a copy takes seconds, so a kill lands in the middle of it.
            "src.consumer.max.poll.records": str(poll_records),
            "src.consumer.max.partition.fetch.bytes": "512",
            # Internal REST on a port of our own (default :8083, shared by everyone on the machine).
            "listeners": f"http://127.0.0.1:{free_port()}",
        }
        if identity:
            settings["replication.policy.class"] = IDENTITY
        if read_committed:
            settings["src.consumer.isolation.level"] = "read_committed"
        if eos:
            settings["dr.exactly.once.source.support"] = "enabled"
            settings["dedicated.mode.enable.internal.rest"] = "true"
        self.properties = home / "mm2.properties"
        self.properties.write_text("".join(f"{k} = {v}\n" for k, v in settings.items()))

    def start(self) -> None:
        with self.log.open("ab") as out:
            out.write(f"--- start {time.strftime('%H:%M:%S')}\n".encode())
        self.proc = jvm.start_java(None, MAIN, [self.jars], [str(self.properties)], self.log, heap="512m")

    def kill(self) -> None:
        """SIGKILL: no shutdown, no last offset commit."""
        if self.proc is not None:
            jvm.stop(self.proc, sig=9)

    def stop(self) -> None:
        if self.proc is not None:
            jvm.stop(self.proc)

    def wait_until(self, what: str, ready: Callable[[], bool], seconds: float = WAIT_S) -> None:
        deadline = time.monotonic() + seconds
        while not ready():
            if self.proc is not None and self.proc.poll() is not None:
                pytest.fail(f"MirrorMaker 2 exited ({self.proc.returncode}) before {what}:\n{self.tail()}")
            if time.monotonic() > deadline:
                pytest.fail(f"no {what} within {seconds:.0f} s\n{self.tail()}")
            time.sleep(0.1)

    def tail(self) -> str:
        lines = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return "\n".join(lines[-40:])


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """Each partition's high watermark (0 where the topic does not exist yet)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "hw-probe"})
    try:
        out = {}
        for p in range(partitions):
            try:
                out[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
            except Exception:  # the topic is not there yet
                out[p] = 0
        return out
    finally:
        consumer.close()


def read_records(bootstrap: str, topic: str, partitions: int, isolation: str = "read_committed",
                 start: dict[int, int] | None = None) -> list[tuple[int, int, str, str]]:
    """The test's own read of a topic: (partition, offset, key, value) of every record a consumer with this
    isolation is served from ``start`` (default: the beginning) to its end offsets."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"raw-{uuid.uuid4().hex[:6]}",
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "enable.partition.eof": True})
    out = []
    try:
        consumer.assign([TopicPartition(topic, p, (start or {}).get(p, 0)) for p in range(partitions)])
        at_end: set[int] = set()
        deadline = time.monotonic() + 60
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"no end of {topic} within 60 s"
            msg = consumer.poll(1)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_end.add(msg.partition())
                continue
            out.append((msg.partition(), msg.offset(), msg.key().decode(), msg.value().decode()))
    finally:
        consumer.close()
    return out
