"""A Kafka Streams 4.4 stage with its dead-letter queue (KIP-1034), audited with it (issue 53): the stage
maps each value and throws on one poison record, which its processing exception handler continues past and
Streams dead-letters with its `__streams.errors.*` headers, in the task's transaction (exactly_once_v2).
The hop (its output a `kafka_topic` sink, paired by key) with `dlq_topic`: no lost record for the poison one,
and the Streams convention and exception class in the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from eosctl.sandbox import maven
from tests.support.helpers import eosctl
from tests.support.jvm import compile_java, die_with_test, java_cmd
from tests.support.stage import Stage, Topics, group_offsets, read_records, wait_until

pytestmark = [pytest.mark.integration]

SOURCE = """
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;

/** INPUT -> values upper-cased -> OUTPUT; a value "poison" throws, and goes to the DLQ (KIP-1034).
 *  args: BOOTSTRAP APPLICATION_ID INPUT OUTPUT DLQ STATE_DIR */
public class DlqStage {
    public static void main(String[] a) throws Exception {
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, a[0]);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, a[1]);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, "exactly_once_v2");
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
        p.put(StreamsConfig.STATE_DIR_CONFIG, a[5]);
        p.put("errors.dead.letter.queue.topic.name", a[4]);
        p.put("processing.exception.handler",
              "org.apache.kafka.streams.errors.LogAndContinueProcessingExceptionHandler");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        StreamsBuilder b = new StreamsBuilder();
        b.stream(a[2], Consumed.with(Serdes.String(), Serdes.String()))
         .mapValues(v -> {
             if (v.equals("poison")) throw new IllegalStateException("poison record");
             return v.toUpperCase();
         })
         .to(a[3], Produced.with(Serdes.String(), Serdes.String()));
        KafkaStreams streams = new KafkaStreams(b.build(), p);
        streams.setStateListener((now, before) -> System.out.println("state " + now));
        streams.start();
        Thread.currentThread().join();
    }
}
"""
VALUES = ["v0", "v1", "poison", "v3", "v4", "v5"]


def test_a_streams_stage_dead_letters_are_no_lost_keys(bootstrap: str, tmp_path: Path) -> None:
    jars = maven.jars("kafka")
    classes = compile_java(tmp_path / "classes", "DlqStage", SOURCE, jars)
    topics = Topics.create(bootstrap, "sdlq", 1)
    dlq = f"{topics.input}.dlq"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(dlq, 1, 1)])[dlq].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, v in enumerate(VALUES):
        producer.produce(topics.input, key=f"k{i}".encode(), value=v.encode(), partition=0)
    assert producer.flush(30) == 0
    app = f"{topics.input}.app"
    cmd = [*java_cmd(classes, "DlqStage", jars, heap="256m"), bootstrap, app, topics.input, topics.output,
           dlq, str(tmp_path / "state")]
    stage = Stage("dlq-stage", cmd, tmp_path / "stage.log", preexec=die_with_test)
    try:
        wait_until("the stage committed past its input and dead-lettered the poison record",
                   lambda: group_offsets(bootstrap, app, topics.input).get(0, 0) >= len(VALUES)
                   and len(read_records(bootstrap, dlq, "read_committed")) == 1, 180, stage)
    finally:
        stage.kill()
    cfg = tmp_path / "eosctl.toml"
    text = (f'[clusters.c]\nbootstrap_servers = "{bootstrap}"\n\n'
            f'[pipelines.stage]\nsource_topics = ["{topics.input}"]\ngroup = "{app}"\n\n'
            f'[pipelines.stage.sink]\nkafka_topic = "{topics.output}"\nlineage = "key"\n')
    cfg.write_text(text)
    result = eosctl("audit", "-c", str(cfg), "--engine", "local", "--format", "json")
    without = json.loads(result.stdout)
    assert [(f["kind"], f["first_offset"]) for f in without["findings"]] == [("lost_key", 2)], result.output
    cfg.write_text(text + f'dlq_topic = "{dlq}"\n')
    result = eosctl("audit", "-c", str(cfg), "--engine", "local", "--format", "json")
    doc = json.loads(result.stdout)
    assert (result.exit_code, doc["findings"]) == (0, []), result.output
    assert doc["dlq"]["conventions"] == {"streams": 1} and doc["partitions"][0]["dead_lettered"] == 1
    assert doc["dlq"]["by_exception"][0]["exception"].endswith("IllegalStateException")
