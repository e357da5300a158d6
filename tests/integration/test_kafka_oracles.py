"""eosctl's answers against Apache Kafka's own tools, run from the same jars on the session's broker:
``TransactionsCommand`` (kafka-transactions.sh: list, describe, describe-producers, find-hanging),
``DumpLogSegments --deep-iteration`` on the partition's segment files, and ``ConsumerGroupCommand
--describe`` (kafka-consumer-groups.sh: the group offsets the Java AdminClient reports). Each runs on the
session's Apache Kafka 4.4 and, as part of the version set, on a 3.9.1 broker.

The module writes one topic: on partition 0 a committed transaction, an aborted one, and (a second instance
of the same transactional id, epoch 1) another committed one; on partition 1 a transaction left open by a
live producer (ended when the module ends); a group with a committed offset on partition 0.
"""

from __future__ import annotations

import re
import uuid
from functools import partial
from pathlib import Path

import pytest

from tests.support import txnguard
from tests.support.helpers import eosctl_json
from tests.support.markers import markers_written

pytestmark = pytest.mark.integration

TXN = "org.apache.kafka.tools.TransactionsCommand"
GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


eosctl = partial(eosctl_json, columns=None)


def table(stdout: str) -> list[dict[str, str]]:
    """A tab-separated table as Kafka's tools print it (header line first, padded cells)."""
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    header = [h.strip() for h in lines[0].split("\t") if h.strip()]
    return [dict(zip(header, (c.strip() for c in ln.split("\t")), strict=False)) for ln in lines[1:]]


@pytest.fixture(scope="module", params=["4.4", "3.9"])
def broker(request: pytest.FixtureRequest):
    """The session's Apache Kafka 4.4 and, as the version set, a 3.9.1 broker (transactions v1 only; its
    tools are the 3.9 classes)."""
    return request.getfixturevalue("kafka39" if request.param == "3.9" else "apache_kafka")


@pytest.fixture(scope="module")
def written(broker):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    bs = broker.bootstrap
    prefix = txnguard.register("t" + uuid.uuid4().hex[:10])
    topic, group = f"{prefix}.oracle", f"{prefix}.group"
    done_id, open_id = f"{prefix}.done", f"{prefix}.open"
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(60)

    def instance() -> Producer:
        p = Producer({"bootstrap.servers": bs, "transactional.id": done_id})
        p.init_transactions(60)
        return p

    first = instance()
    first.begin_transaction()
    for i in range(4):
        first.produce(topic, b"c%d" % i, partition=0)
    first.commit_transaction(60)
    first.begin_transaction()
    for i in range(3):
        first.produce(topic, b"a%d" % i, partition=0)
    first.flush(60)
    first.abort_transaction(60)
    second = instance()  # the same id again: the coordinator bumps the epoch
    second.begin_transaction()
    for i in range(2):
        second.produce(topic, b"d%d" % i, partition=0)
    second.commit_transaction(60)
    markers_written(bs, done_id)  # the tools compared below must read the same settled log
    hanging = Producer({"bootstrap.servers": bs, "transactional.id": open_id,
                        "transaction.timeout.ms": 600000})
    hanging.init_transactions(60)
    hanging.begin_transaction()
    for i in range(2):
        hanging.produce(topic, b"h%d" % i, partition=1)
    hanging.flush(60)
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
    c.close()
    try:
        yield {"bs": bs, "topic": topic, "group": group, "done_id": done_id, "open_id": open_id,
               "prefix": prefix}
    finally:
        hanging.abort_transaction(60)
        txnguard.end_ongoing(bs, [prefix])


def test_transactions_list_and_describe_match_kafkas(broker, written) -> None:
    from eosctl.sandbox import apache_kafka as ak

    bs = written["bs"]
    ours = {t["transactional_id"]: t for t in eosctl("txns", "list", "--bootstrap", bs)["transactions"]}
    listed = table(ak.tool(broker, TXN, "--bootstrap-server", bs, "list").stdout)
    kafka = {r["TransactionalId"]: r for r in listed if r["TransactionalId"].startswith(written["prefix"])}
    assert sorted(kafka) == sorted(i for i in ours if i.startswith(written["prefix"])) == sorted(
        [written["done_id"], written["open_id"]])
    for txid, row in kafka.items():
        assert (ours[txid]["producer_id"], ours[txid]["state"], ours[txid]["coordinator_id"]) == (
            int(row["ProducerId"]), row["TransactionState"], int(row["Coordinator"]))
    for txid in kafka:
        (d,) = table(ak.tool(broker, TXN, "--bootstrap-server", bs, "describe", "--transactional-id",
                             txid).stdout)
        mine = eosctl("txns", "describe", "--bootstrap", bs, txid)
        start = None if d["CurrentTransactionStartTimeMs"] in ("None", "-1") else int(
            d["CurrentTransactionStartTimeMs"])
        parts = sorted(f"{p['topic']}-{p['partition']}" for p in mine["partitions"])
        assert (mine["producer_id"], mine["producer_epoch"], mine["state"], mine["timeout_ms"], parts) == (
            int(d["ProducerId"]), int(d["ProducerEpoch"]), d["TransactionState"],
            int(d["TransactionTimeoutMs"]), sorted(p for p in d["TopicPartitions"].split(",") if p))
        if mine["state"] == "Ongoing":
            assert mine["start_time_ms"] == start
    assert ours[written["open_id"]]["state"] == "Ongoing"
    assert ours[written["done_id"]]["producer_epoch"] == 1


def test_producers_match_describe_producers(broker, written) -> None:
    from eosctl.sandbox import apache_kafka as ak

    bs, topic = written["bs"], written["topic"]
    ours = eosctl("producers", "--bootstrap", bs, "--topic", topic)
    assert ours["source"] == "describe-producers"
    for partition in (0, 1):
        rows = table(ak.tool(broker, TXN, "--bootstrap-server", bs, "describe-producers", "--topic",
                             topic, "--partition", str(partition)).stdout)
        kafka = sorted((int(r["ProducerId"]), int(r["ProducerEpoch"]), int(r["LastSequence"]),
                        int(r["LastTimestamp"]), int(r["LatestCoordinatorEpoch"]),
                        None if r["CurrentTransactionStartOffset"] == "None"
                        else int(r["CurrentTransactionStartOffset"])) for r in rows)
        mine = sorted((p["producer_id"], p["producer_epoch"], p["last_sequence"], p["last_timestamp_ms"],
                       p["coordinator_epoch"], p["current_txn_start_offset"])
                      for p in ours["producers"] if p["partition"] == partition)
        assert mine == kafka and kafka, partition
    assert [p["current_txn_start_offset"] for p in ours["producers"] if p["partition"] == 1] == [0]


def test_hanging_agrees_with_find_hanging(broker, written) -> None:
    """find-hanging reports only what KIP-664 calls hanging (the coordinator does not hold the partition in
    the producer's transaction); the open transaction here is young and its coordinator knows it: Kafka's
    tool finds nothing, and eosctl finds it only under its LSO rule (--max-age 0), never under kip664."""
    from eosctl.sandbox import apache_kafka as ak

    bs, topic = written["bs"], written["topic"]
    kafka = table(ak.tool(broker, TXN, "--bootstrap-server", bs, "find-hanging", "--topic", topic,
                          "--max-transaction-timeout", "0").stdout)
    doc = eosctl("txns", "hanging", "--bootstrap", bs, "--topic", topic, "--max-age", "0")
    assert [(h["partition"], h["first_offset"]) for h in doc["hanging"] if "kip664" in h["rules"]] == [
        (int(r["Partition"]), int(r["StartOffset"])) for r in kafka] == []
    ((found),) = doc["hanging"]
    assert (found["partition"], found["first_offset"], found["transactional_id"], found["coordinator_state"],
            found["rules"]) == (1, 0, written["open_id"], "Ongoing", ["lso"])


_BATCH = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .*producerId: (-?\d+) "
                    r"producerEpoch: (-?\d+) .*isTransactional: (\w+) isControl: (\w+)")
_MARKER = re.compile(r"^\| offset: (\d+) .*endTxnMarker: (\w+)")


def dump_log_segments(cluster, partition_dir: Path) -> list[tuple]:
    """(base offset, record count, producer id, epoch, transactional, control, marker) of every batch in
    the partition's segments, as DumpLogSegments --deep-iteration prints them."""
    from eosctl.sandbox import apache_kafka as ak

    main_class = ("org.apache.kafka.tools.DumpLogSegments" if not cluster.version.startswith("3.")
                  else "kafka.tools.DumpLogSegments")
    batches: list[list] = []
    for segment in sorted(partition_dir.glob("*.log")):
        dumped = ak.tool(cluster, main_class, "--deep-iteration", "--files", str(segment)).stdout
        for line in dumped.splitlines():
            if m := _BATCH.match(line):
                base, _, count, pid, epoch, txn, control = m.groups()
                batches.append([int(base), int(count), int(pid), int(epoch), txn == "true", control == "true",
                                None])
            elif m := _MARKER.match(line):
                batches[-1][6] = m.group(2)
    return [tuple(b) for b in batches]


def aborted_ranges(batches: list[tuple]) -> list[tuple[int, int, int]]:
    """(first, last, producer id) of each aborted transaction, read off the dump as a read_committed
    reader would: a producer's data up to its ABORT marker."""
    open_at: dict[int, tuple[int, int]] = {}
    out = []
    for base, count, pid, _, txn, control, marker in batches:
        if control:
            first_last = open_at.pop(pid, None)
            if marker == "ABORT" and first_last:
                out.append((*first_last, pid))
        elif txn:
            first = open_at.get(pid, (base, 0))[0]
            open_at[pid] = (first, base + count - 1)
    return out


def test_log_matches_dump_log_segments(broker, written) -> None:
    bs, topic = written["bs"], written["topic"]
    partition_dir = Path(broker.nodes[0].log_dir) / f"{topic}-0"
    kafka = dump_log_segments(broker, partition_dir)
    doc = eosctl("log", "--bootstrap", bs, "--topic", topic, "--partition", "0")
    mine = [(b["base_offset"], b["record_count"], b["producer_id"], b["producer_epoch"],
             b["is_transactional"], b["is_control"], b["marker"]) for b in doc["batches"]]
    assert mine == kafka
    assert [(r["first"], r["last"], r["producer_id"]) for r in doc["aborted_ranges"]] == aborted_ranges(kafka)
    assert [(m["offset"], m["type"], m["producer_epoch"]) for m in doc["markers"]] == [
        (b[0], b[6], b[3]) for b in kafka if b[5]]
    # What the module wrote: 4 committed, COMMIT, 3 aborted, ABORT, then epoch 1: 2 committed, COMMIT.
    assert [(b[0], b[3], b[6]) for b in kafka if b[5]] == [
        (4, 0, "COMMIT"), (8, 0, "ABORT"), (11, 1, "COMMIT")]


def test_lag_matches_consumer_group_command(broker, written) -> None:
    from eosctl.sandbox import apache_kafka as ak

    bs, group = written["bs"], written["group"]
    out = ak.tool(broker, GROUPS, "--bootstrap-server", bs, "--describe", "--group", group).stdout
    lines = [ln.split() for ln in out.splitlines() if ln.strip() and not ln.startswith("Consumer group")]
    rows = [dict(zip(lines[0], cells, strict=True)) for cells in lines[1:]]
    kafka = sorted((r["TOPIC"], int(r["PARTITION"]), int(r["CURRENT-OFFSET"]), int(r["LOG-END-OFFSET"]),
                    int(r["LAG"])) for r in rows if r["CURRENT-OFFSET"] not in ("-", ""))
    (g,) = eosctl("lag", "--bootstrap", bs, "-g", group)["groups"]
    # The tool's LOG-END-OFFSET is the high watermark (ListOffsets latest, read_uncommitted), its LAG HW-lag.
    mine = sorted((p["topic"], p["partition"], p["committed"], p["hw"], p["hw_lag"])
                  for p in g["partitions"] if p["committed"] is not None)
    assert mine == kafka == [(written["topic"], 0, 3, 12, 9)]
