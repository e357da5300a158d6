"""Transactions v1 vs v2 in the log, by broker version: the same Java producer (kafka-clients from the
broker's own jars) commits three transactions and aborts one on Apache Kafka 4.4 (transaction.version=2
on a freshly formatted cluster: the coordinator bumps the epoch at every EndTxn, KIP-890 part 2, so each
marker carries the data's epoch + 1 and the next transaction writes at it) and on 3.9.1 (v1: one epoch
throughout). Only the raw log is checked here (`eosctl log`'s batches and markers against the test's own
expectation); how eosctl tells such bumps from fencing is tested elsewhere."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from eosctl.cli import main
from tests.support import jvm, txnguard

pytestmark = pytest.mark.integration

SOURCE = r'''
import java.util.Properties;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.StringSerializer;

public class TxnWriter {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("transactional.id", args[2]);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            for (String outcome : new String[] {"commit", "commit", "abort", "commit"}) {
                producer.beginTransaction();
                for (int i = 0; i < 2; i++)
                    producer.send(new ProducerRecord<>(args[1], 0, null, outcome + i));
                producer.flush();
                if (outcome.equals("commit")) producer.commitTransaction(); else producer.abortTransaction();
            }
        }
        System.out.println("DONE");
    }
}
'''


@pytest.fixture(scope="module")
def writer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from eosctl.sandbox import maven

    workdir = tmp_path_factory.mktemp("txnwriter")
    return jvm.compile_java(workdir, "TxnWriter", SOURCE, maven.jars("kafka"))


def test_marker_epochs_by_transaction_version(kafka_version, writer) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    from eosctl.sandbox import maven

    bs = kafka_version.bootstrap
    prefix = txnguard.register("t" + uuid.uuid4().hex[:10])
    topic = f"{prefix}.versions"
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
    done = jvm.run_java(writer, "TxnWriter", [maven.jars("kafka")], [bs, topic, f"{prefix}.java"],
                            timeout=180)
    assert done.stdout.strip().endswith("DONE"), done.stdout + done.stderr
    result = CliRunner().invoke(main, ["log", "--bootstrap", bs, "--topic", topic, "--partition", "0",
                                       "--format", "json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    data = [(b["base_offset"], b["producer_epoch"]) for b in doc["batches"] if not b["is_control"]]
    markers = [(m["offset"], m["type"], m["producer_epoch"]) for m in doc["markers"]]
    # Each transaction's data epochs (its records may come in one batch or several), then its marker.
    txn_epochs, previous = [], -1
    for offset, _, _ in markers:
        txn_epochs.append(sorted({epoch for base, epoch in data if previous < base < offset}))
        previous = offset
    if kafka_version.version.startswith("3."):
        # v1: every batch and marker at the epoch InitProducerId gave (0 for a new id).
        assert txn_epochs == [[0], [0], [0], [0]]
        assert markers == [(2, "COMMIT", 0), (5, "COMMIT", 0), (8, "ABORT", 0), (11, "COMMIT", 0)]
    else:
        # v2: marker at data's epoch + 1, the next transaction's data at that epoch.
        assert txn_epochs == [[0], [1], [2], [3]]
        assert markers == [(2, "COMMIT", 1), (5, "COMMIT", 2), (8, "ABORT", 3), (11, "COMMIT", 4)]
    assert [(r["first"], r["last"]) for r in doc["aborted_ranges"]] == [(6, 7)]
