"""A Java transactional producer (kafka-clients from the project's Kafka pom: transactions v2 on a 4.x
cluster, KIP-890) for the tests of Kafka's transactional behaviours, compiled once per directory.

    producer = TxnJava(tmp_path)
    producer.run(bootstrap, topic, "txn-id", "commit", 20)         # 20 committed transactions
    proc = producer.start(bootstrap, topic, "txn-id", "open", 1)    # prints OPEN, holds it open

Each transaction writes ``records`` records to every partition of the topic (one each per partition per
round), so every partition sees every transaction of the id.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from tests.support import jvm

SOURCE = r"""
import java.util.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.StringSerializer;

public class TxnProducer {
    // args: bootstrap topic txnId mode count partitions timeoutMs [script [compressionType]]
    //   commit N: N transactions committed; abort N: N aborted; open N: one transaction of N records per
    //   partition left open (prints OPEN, then sleeps until killed); script: one process runs the
    //   transactions "commit:0,1;abort:1" (outcome:partitions, one record per partition)
    public static void main(String[] a) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", a[0]);
        p.put("transactional.id", a[2]);
        p.put("transaction.timeout.ms", a[6]);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("linger.ms", "0");
        if (a.length > 8 && !a[8].isEmpty()) p.put("compression.type", a[8]);
        String mode = a[3];
        int n = Integer.parseInt(a[4]), parts = Integer.parseInt(a[5]);
        KafkaProducer<String, String> producer = new KafkaProducer<>(p);
        producer.initTransactions();
        System.out.println("INIT");
        System.out.flush();
        if (mode.equals("script")) {
            int t = 0;
            for (String step : a[7].split(";")) {
                String[] sp = step.split(":");
                producer.beginTransaction();
                for (String part : sp[1].split(","))
                    producer.send(new ProducerRecord<>(a[1], Integer.parseInt(part), "s" + t, sp[0])).get();
                if (sp[0].equals("commit")) producer.commitTransaction(); else producer.abortTransaction();
                t++;
            }
            System.out.println("DONE");
            producer.close();
            return;
        }
        int txns = mode.equals("open") ? 1 : n, per = mode.equals("open") ? n : 1;
        for (int t = 0; t < txns; t++) {
            producer.beginTransaction();
            for (int part = 0; part < parts; part++)
                for (int r = 0; r < per; r++)
                    producer.send(new ProducerRecord<>(a[1], part, "k" + t + "-" + r, mode + t)).get();
            if (mode.equals("commit")) producer.commitTransaction();
            else if (mode.equals("abort")) producer.abortTransaction();
        }
        System.out.println(mode.equals("open") ? "OPEN" : "DONE");
        System.out.flush();
        if (mode.equals("open")) Thread.sleep(3_600_000L);
        producer.close();
    }
}
"""


class TxnJava:
    def __init__(self, workdir: Path) -> None:
        from eosctl.sandbox import maven

        self.jars = maven.jars("kafka")
        self.workdir = workdir
        self.classes = jvm.compile_java(workdir / "txnjava", "TxnProducer", SOURCE, self.jars)

    def _args(self, bootstrap: str, topic: str, txn_id: str, mode: str, count: int, partitions: int,
              timeout_ms: int, script: str = "", compression: str = "") -> list[str]:
        return [bootstrap, topic, txn_id, mode, str(count), str(partitions), str(timeout_ms), script,
                compression]

    def run(self, bootstrap: str, topic: str, txn_id: str, mode: str, count: int = 1, partitions: int = 1,
            timeout_ms: int = 60_000, script: str = "", compression: str = "") -> None:
        """Run to the end (``mode`` "script": the transactions ``script`` names, in one process;
        ``compression``: the producer's compression.type, e.g. "lz4")."""
        done = jvm.run_java(self.classes, "TxnProducer", [self.jars],
                                self._args(bootstrap, topic, txn_id, mode, count, partitions, timeout_ms,
                                           script, compression), heap="128m")
        assert done.returncode == 0 and "DONE" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]

    def start(self, bootstrap: str, topic: str, txn_id: str, mode: str, count: int, partitions: int = 1,
              timeout_ms: int = 60_000, wait_for: str = "OPEN", deadline_s: float = 90.0) -> subprocess.Popen:
        """Start the producer; returns once it printed ``wait_for`` (the caller stops it)."""
        log = self.workdir / f"{txn_id}-{mode}-{time.monotonic_ns()}.log"
        proc = jvm.start_java(self.classes, "TxnProducer", [self.jars],
                                  self._args(bootstrap, topic, txn_id, mode, count, partitions, timeout_ms),
                                  log=log, heap="128m")
        deadline = time.monotonic() + deadline_s
        while wait_for not in (log.read_text() if log.exists() else ""):
            if proc.poll() is not None or time.monotonic() > deadline:
                jvm.stop(proc)
                raise AssertionError(f"producer never printed {wait_for}: {log.read_text()[-2000:]}")
            time.sleep(0.2)
        return proc
