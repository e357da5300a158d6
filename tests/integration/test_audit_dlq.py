"""DLQ-aware reconciliation on Apache Kafka 4.4 (issue 53): a dead-letter topic the test writes with Kafka
Connect's context headers (KIP-298), beside a transactional source topic.

Source: committed 0-4 (marker 5), aborted 6-7 (marker 8), committed 9-13 (marker 14). The sink misses 2
(dead-lettered, twice) and 12 (lost); it holds 10, which is dead-lettered too; 6 (aborted) is
dead-lettered; one DLQ record has no context headers."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import duckdb
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.helpers import eosctl
from tests.support.markers import markers_written

pytestmark = pytest.mark.integration

EXCEPTION = "org.apache.kafka.connect.errors.DataException"


def connect_headers(topic: str, offset: int) -> list[tuple[str, bytes]]:
    """What Connect's DeadLetterQueueReporter adds: the numbers as decimal text."""
    return [("__connect.errors.topic", topic.encode()), ("__connect.errors.partition", b"0"),
            ("__connect.errors.offset", str(offset).encode()), ("__connect.errors.connector.name", b"jdbc"),
            ("__connect.errors.task.id", b"0"), ("__connect.errors.stage", b"TASK_PUT"),
            ("__connect.errors.exception.class.name", EXCEPTION.encode()),
            ("__connect.errors.exception.message", b"ERROR: value too long")]


@pytest.fixture(scope="module")
def topics(bootstrap: str, unique_module: str) -> tuple[str, str]:
    source, dlq = f"{unique_module}-orders", f"{unique_module}-orders.dlq"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for name in (source, dlq):
        admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{unique_module}-src"})
    producer.init_transactions(30)
    for n, commit in ((5, True), (2, False), (5, True)):
        producer.begin_transaction()
        for i in range(n):
            producer.produce(source, key=f"k{i}".encode(), value=b"v", partition=0)
        assert producer.flush(30) == 0  # an abort purges what is unsent: write the aborted records
        producer.commit_transaction(30) if commit else producer.abort_transaction(30)
    markers_written(bootstrap, f"{unique_module}-src")
    plain = Producer({"bootstrap.servers": bootstrap})  # Connect's DLQ producer: not transactional
    for offset in (2, 2, 10, 6):
        plain.produce(dlq, value=b"v", partition=0, headers=connect_headers(source, offset))
    plain.produce(dlq, value=b"v", partition=0)  # context headers off
    assert plain.flush(30) == 0
    return source, dlq


@pytest.fixture(scope="module")
def unique_module() -> str:
    from tests.support import txnguard

    return txnguard.register("t" + uuid.uuid4().hex[:10])


def config(tmp_path: Path, bootstrap: str, source: str, dlq: str | None) -> Path:
    sink = tmp_path / "sink.duckdb"
    if not sink.exists():
        con = duckdb.connect(str(sink))
        con.execute("CREATE TABLE sink (src_topic VARCHAR, src_partition INTEGER, src_offset BIGINT)")
        con.executemany("INSERT INTO sink VALUES (?, 0, ?)",
                        [(source, o) for o in (0, 1, 3, 4, 9, 10, 11, 13)])
        con.close()
    cfg = tmp_path / "eosctl.toml"
    cfg.write_text(f"""
[clusters.local]
bootstrap_servers = "{bootstrap}"

[pipelines.p]
source_topics = ["{source}"]

[pipelines.p.sink]
duckdb = "{sink}"
{f'dlq_topic = "{dlq}"' if dlq else ""}
""")
    return cfg


def audit(cfg: Path) -> tuple[int, dict]:
    result = eosctl("audit", "-c", str(cfg), "--engine", "local", "--format", "json")
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


def found(doc: dict) -> list[tuple[str, int, int, int]]:
    return [(f["kind"], f["first_offset"], f["last_offset"], f["count"]) for f in doc["findings"]]


def test_the_dlq_accounts_for_its_records_and_its_findings_are_exact(bootstrap: str, topics: tuple[str, str],
                                                                      tmp_path: Path) -> None:
    source, dlq = topics
    code, without = audit(config(tmp_path, bootstrap, source, None))
    assert (code, found(without)) == (1, [("gap", 2, 2, 1), ("gap", 12, 12, 1)]) and without["dlq"] is None

    code, doc = audit(config(tmp_path, bootstrap, source, dlq))
    assert code == 1
    assert sorted(found(doc)) == [("dlq_aborted", 6, 6, 1), ("dlq_duplicate", 2, 2, 1), ("gap", 12, 12, 1),
                                  ("sink_and_dlq", 10, 10, 1)]
    gap = next(f for f in doc["findings"] if f["kind"] == "gap")
    assert gap["detail"] == f"in neither the sink nor the DLQ {dlq}"
    assert doc["partitions"][0]["dead_lettered"] == 1
    assert doc["dlq"] == {"topic": dlq, "records": 5, "dead_lettered": 1,
                          "by_exception": [{"exception": EXCEPTION, "records": 4}],
                          "conventions": {"connect": 4}, "unreadable": 1, "other_partitions": 0}
    rules = {r["rule"] for r in doc["root_causes"]}
    assert {"dead_lettered_and_written", "dead_lettered_twice", "sink_reads_aborted"} <= rules


def test_a_dlq_topic_kafka_does_not_have_is_one_line(bootstrap: str, topics: tuple[str, str],
                                                    tmp_path: Path) -> None:
    result = eosctl("audit", "-c", str(config(tmp_path, bootstrap, topics[0], "no-such-dlq")), "--engine",
                    "local")
    assert result.exit_code == 2 and "dlq_topic 'no-such-dlq' does not exist" in result.output, result.output
