"""Java members of the newer group types for tests on Apache Kafka 4.4 (kafka-clients and kafka-streams from
the project's kafka pom), compiled once per directory:

    apps = GroupJava(tmp_path)
    proc = apps.share(bootstrap, topic, "g", records=4)            # a KafkaShareConsumer; prints READ n (n >= 4)
    proc = apps.streams(bootstrap, topic, topic + ".out", "app")   # Kafka Streams, group.protocol=streams

Each prints a line the caller waits for and then stays a member of its group until stopped
(jvmhelp.stop)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from tests import jvmhelp

SHARE = r"""
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ShareReader {
    // args: bootstrap topic group records isolation("" keeps the group's default)
    // Sets the group's share.auto.offset.reset=earliest (and share.isolation.level), reads `records`
    // records, acknowledges them (commitSync), prints READ n, and stays a member until killed.
    public static void main(String[] a) throws Exception {
        Properties ap = new Properties();
        ap.put("bootstrap.servers", a[0]);
        try (Admin admin = Admin.create(ap)) {
            List<AlterConfigOp> ops = new ArrayList<>();
            ops.add(new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET));
            if (!a[4].isEmpty())
                ops.add(new AlterConfigOp(new ConfigEntry("share.isolation.level", a[4]), AlterConfigOp.OpType.SET));
            admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.GROUP, a[2]), ops)).all().get();
        }
        Properties p = new Properties();
        p.put("bootstrap.servers", a[0]);
        p.put("group.id", a[2]);
        p.put("client.id", "share-reader");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        int want = Integer.parseInt(a[3]), got = 0;
        boolean said = false;
        try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p)) {
            c.subscribe(List.of(a[1]));
            while (true) {
                ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(200));
                got += rs.count();
                if (!rs.isEmpty()) {
                    c.commitSync();
                    if (got >= want && !said) { System.out.println("READ " + got); System.out.flush(); said = true; }
                }
            }
        }
    }
}
"""

STREAMS = r"""
import java.time.Duration;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.*;
import org.apache.kafka.streams.kstream.*;

public class StreamsPassthrough {
    // args: bootstrap input output applicationId stateDir
    // INPUT -> OUTPUT unchanged, exactly_once_v2, on the streams rebalance protocol (KIP-1071); prints
    // `state S` on each state change.
    public static void main(String[] a) throws Exception {
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, a[0]);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, a[3]);
        p.put(StreamsConfig.STATE_DIR_CONFIG, a[4]);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        StreamsBuilder b = new StreamsBuilder();
        b.stream(a[1], Consumed.with(Serdes.String(), Serdes.String())).to(a[2], Produced.with(Serdes.String(), Serdes.String()));
        KafkaStreams streams = new KafkaStreams(b.build(), p);
        streams.setStateListener((now, before) -> { System.out.println("state " + now); System.out.flush(); });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> streams.close(Duration.ofSeconds(10))));
        streams.start();
        Thread.currentThread().join();
    }
}
"""


class GroupJava:
    def __init__(self, workdir: Path) -> None:
        from eosctl.sandbox import maven

        self.jars = maven.jars("kafka")
        self.workdir = workdir
        self.share_classes = jvmhelp.compile_java(workdir / "share", "ShareReader", SHARE, self.jars)
        self.streams_classes = jvmhelp.compile_java(workdir / "streams", "StreamsPassthrough", STREAMS, self.jars)

    def _start(self, classes: Path, main: str, args: list[str], wait_for: str, deadline_s: float,
               heap: str) -> subprocess.Popen:
        log = self.workdir / f"{main}-{time.monotonic_ns()}.log"
        proc = jvmhelp.start_java(classes, main, [self.jars], args, log=log, heap=heap)
        deadline = time.monotonic() + deadline_s
        while wait_for not in (log.read_text() if log.exists() else ""):
            if proc.poll() is not None or time.monotonic() > deadline:
                jvmhelp.stop(proc)
                raise AssertionError(f"{main} never printed {wait_for!r}: {log.read_text()[-3000:]}")
            time.sleep(0.2)
        return proc

    def share(self, bootstrap: str, topic: str, group: str, records: int, isolation: str = "",
              deadline_s: float = 90.0) -> subprocess.Popen:
        """A share consumer that read and acknowledged at least ``records`` records (``isolation``: the group's
        share.isolation.level to set first; "" leaves its default, read_uncommitted)."""
        return self._start(self.share_classes, "ShareReader", [bootstrap, topic, group, str(records), isolation],
                           "READ ", deadline_s, "128m")

    def streams(self, bootstrap: str, topic: str, output: str, app_id: str,
                deadline_s: float = 120.0) -> subprocess.Popen:
        """A Kafka Streams app on group.protocol=streams, returned once it is RUNNING."""
        state = self.workdir / f"state-{app_id}"
        return self._start(self.streams_classes, "StreamsPassthrough", [bootstrap, topic, output, app_id, str(state)],
                           "state RUNNING", deadline_s, "192m")
