"""A genuinely hanging transaction on Apache Kafka 4.4 and 3.9.1, checked against Kafka's own
``kafka-transactions.sh find-hanging`` (TransactionsCommand.FindHangingCommand, KIP-664).

The classic hanging transaction: transactional data on a partition the coordinator never heard of. A
producer id and epoch come from InitProducerId for a transactional id, then a raw Produce request carries a
transactional batch with them WITHOUT AddPartitionsToTxn. Kafka 3.6+ refuses such a batch (KIP-890 part 1,
ReplicaManager.maybeStartTransactionVerificationForPartitions) unless
``transaction.partition.verification.enable=false``, which this module's private broker sets. The
coordinator's state for the id stays Empty (it has no partition to write a marker to, and no timeout to
run), and the partition's LSO stays at the batch for good: only an admin abort (WriteTxnMarkers) ends it.
The same on a group's offsets: a TxnOffsetCommit without AddOffsetsToTxn leaves a transactional offset
commit on its __consumer_offsets partition that find-hanging names since KAFKA-13288, and so does `txns
hanging`, with the group.

One private broker per version, shared by the module's tests; nothing else writes to it.
"""

from __future__ import annotations

import json
import shlex
import time
import uuid

import pytest

from tests.support.helpers import eosctl

pytestmark = pytest.mark.integration

TXN = "org.apache.kafka.tools.TransactionsCommand"
MAX_AGE_S = 1.0


@pytest.fixture(scope="module", params=["4.4", "3.9"])
def unverified(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """A broker that appends transactional batches without asking the coordinator (verification off)."""
    from eosctl.sandbox import apache_kafka as ak

    cluster = ak.start(tmp_path_factory.mktemp(f"kafka-unverified-{request.param}"), die_with_parent=True,
                       version="3.9.1" if request.param == "3.9" else None,
                       properties={"transaction.partition.verification.enable": "false"})
    try:
        yield cluster
    finally:
        ak.stop(cluster)


def cli(*args: str, code: int = 0):
    result = eosctl(*args, columns=250)
    assert result.exit_code == code, result.output
    return result


def jdoc(*args: str, code: int = 0) -> dict:
    return json.loads(cli(*args, "--format", "json", code=code).stdout)


def table(stdout: str) -> list[dict[str, str]]:
    """A tab-separated table as Kafka's tools print it (header line first, padded cells)."""
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    header = [h.strip() for h in lines[0].split("\t") if h.strip()]
    return [dict(zip(header, (c.strip() for c in ln.split("\t")), strict=False)) for ln in lines[1:]]


def plain_write(bootstrap: str, topic: str, partition: int, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0})
    for i in range(n):
        p.produce(topic, value=b"p%d" % i, partition=partition)
    assert p.flush(30) == 0


def plant_hanging(bootstrap: str, topic: str, partition: int, txid: str,
                  records: int) -> tuple[int, int, int]:
    """InitProducerId for ``txid``, then its transactional batch of ``records`` on the partition with no
    AddPartitionsToTxn: (producer id, epoch, the batch's base offset)."""
    from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
    from kafka.protocol.producer.produce import ProduceRequest
    from kafka.protocol.producer.transaction import InitProducerIdRequest
    from kafka.record.default_records import DefaultRecordBatchBuilder

    from eosctl.cluster.wire import WireClient

    with WireClient(bootstrap, timeout_ms=30_000) as client:
        deadline = time.monotonic() + 60
        while True:  # the coordinator loads __transaction_state (created on first use) for a while
            found = client.request_all([(client.any_node(), FindCoordinatorRequest(
                key=txid, key_type=1, max_version=3))])[0]
            if not found.error_code:
                init = client.request_all([(found.node_id, InitProducerIdRequest(
                    transactional_id=txid, transaction_timeout_ms=60_000, max_version=4))])[0]
                if not init.error_code:
                    break
            assert time.monotonic() < deadline, f"InitProducerId for {txid} kept failing: {found}"
            time.sleep(0.3)
        batch = DefaultRecordBatchBuilder(2, 0, True, init.producer_id, init.producer_epoch, 0, 1 << 20)
        now = int(time.time() * 1000)
        for i in range(records):
            batch.append(i, now, b"h%d" % i, b"hanging", [])
        data = ProduceRequest.TopicProduceData
        records_of = data.PartitionProduceData(index=partition, records=bytes(batch.build()))
        request = ProduceRequest(transactional_id=txid, acks=-1, timeout_ms=10_000, topic_data=[data(
            name=topic, partition_data=[records_of])],
            max_version=11)  # v12+ asks the broker to add the partition itself (KIP-890 part 2)
        (answer,) = client.request_all([(client.leader(topic, partition), request)])[0].responses
        (part,) = answer.partition_responses
        assert part.error_code == 0, part
        return init.producer_id, init.producer_epoch, part.base_offset


@pytest.fixture(scope="module")
def hung(unverified):
    """Partition 0: 2 plain records. Partition 1: 3 plain, the hanging batch at 3..4, 2 plain at 5..6 (HW 7,
    LSO 3). A group committed at 2 and 1."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    bs = unverified.bootstrap
    topic = "t" + uuid.uuid4().hex[:10]
    txid, group = f"{topic}-hung", f"{topic}-g"
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(60)
    plain_write(bs, topic, 0, 2)
    plain_write(bs, topic, 1, 3)
    pid, epoch, first = plant_hanging(bs, topic, 1, txid, 2)
    # From its acknowledgement, not from before the call: the batch's timestamp is taken after
    # InitProducerId, which retries while the coordinator loads its log (seconds on a loaded machine).
    planted = time.monotonic()
    assert first == 3
    plain_write(bs, topic, 1, 2)
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 2), TopicPartition(topic, 1, 1)], asynchronous=False)
    finally:
        c.close()
    # Older than --max-age by the producer's clock (its batch timestamp), with no sleep beyond that.
    time.sleep(max(0.0, planted + MAX_AGE_S + 0.5 - time.monotonic()))
    return {"bs": bs, "topic": topic, "txid": txid, "group": group, "pid": pid, "epoch": epoch}


def find_hanging(cluster) -> list[tuple]:
    from eosctl.sandbox import apache_kafka as ak

    rows = table(ak.tool(cluster, TXN, "--bootstrap-server", cluster.bootstrap, "find-hanging",
                         "--broker-id", "1", "--max-transaction-timeout", "0").stdout)
    return [(r["Topic"], int(r["Partition"]), int(r["ProducerId"]), int(r["ProducerEpoch"]),
             int(r["StartOffset"])) for r in rows]


def test_hanging_transaction_found_as_find_hanging_finds_it_and_aborted(unverified, hung) -> None:
    from eosctl.sandbox import apache_kafka as ak

    bs, topic, pid, epoch = hung["bs"], hung["topic"], hung["pid"], hung["epoch"]
    assert find_hanging(unverified) == [(topic, 1, pid, epoch, 3)]
    (described,) = table(ak.tool(unverified, TXN, "--bootstrap-server", bs, "describe",
                                 "--transactional-id", hung["txid"]).stdout)
    assert (described["TransactionState"], described["TopicPartitions"]) == ("Empty", "")

    doc = jdoc("txns", "hanging", "--bootstrap", bs, "--topic", topic, "--max-age", f"{MAX_AGE_S:g}s", code=1)
    assert [(h["topic"], h["partition"], h["producer_id"], h["producer_epoch"], h["first_offset"], h["lso"],
             h["hw"], h["blocked"], h["transactional_id"], h["coordinator_state"], sorted(h["rules"]),
             h["counted"]) for h in doc["hanging"]] == [
        (topic, 1, pid, epoch, 3, 3, 7, 4, hung["txid"], "Empty", ["kip664", "lso"], True)]
    assert doc["blocking"] == [] and doc["partitions_checked"] == 2
    text = cli("txns", "hanging", "--bootstrap", bs, "--topic", topic, "--max-age", f"{MAX_AGE_S:g}s",
               code=1).stdout
    hint = text.strip().splitlines()[-1]
    assert hint == f"to abort one: eosctl txns abort --bootstrap {bs} --topic {topic} --partition 1 " \
                   "--start-offset 3"

    (g,) = jdoc("lag", "--bootstrap", bs, "-t", topic, "-g", hung["group"])["groups"]
    rows = {p["partition"]: p for p in g["partitions"]}
    assert [(r["committed"], r["lso"], r["hw"], r["blocked"], r["records_behind"])
            for r in (rows[0], rows[1])] == [(2, 2, 2, 0, 0), (1, 3, 7, 4, 2)]
    assert rows[1]["open_transaction"]["first_offset"] == 3 and rows[0]["open_transaction"] is None

    # What hanging printed, run: the dry run changes nothing, --yes writes the ABORT marker at the HW.
    args = shlex.split(hint.split(": ", 1)[1])[1:]
    dry = jdoc(*args)
    assert (dry["dry_run"], dry["producer_id"], dry["producer_epoch"], dry["supported"],
            dry["coordinator_state"]) == (True, pid, epoch, True, "Empty")
    assert _offsets(bs, topic) == (3, 7)
    done = jdoc(*args, "--yes")
    assert done["aborted"] is True
    assert _offsets(bs, topic) == (8, 8)
    log = jdoc("log", "--bootstrap", bs, "--topic", topic, "--partition", "1")
    assert [(r["first"], r["last"], r["kind"]) for r in log["ranges"]] == [
        (0, 2, "DATA"), (3, 4, "ABORTED"), (5, 6, "DATA"), (7, 7, "MARKER")]
    assert [(m["offset"], m["type"], m["producer_id"], m["producer_epoch"]) for m in log["markers"]] == [
        (7, "ABORT", pid, epoch)]

    # Afterwards neither Kafka's tool nor eosctl finds anything, and the partition no longer blocks.
    assert find_hanging(unverified) == []
    after = jdoc("txns", "hanging", "--bootstrap", bs, "--topic", topic, "--max-age", f"{MAX_AGE_S:g}s")
    assert (after["hanging"], after["blocking"]) == ([], [])
    (g,) = jdoc("lag", "--bootstrap", bs, "-t", topic, "-g", hung["group"])["groups"]
    assert [(p["lso"], p["hw"], p["blocked"]) for p in g["partitions"] if p["partition"] == 1] == [(8, 8, 0)]


def _offsets(bs: str, topic: str) -> tuple[int, int]:
    from eosctl.cluster.wire import WireClient

    with WireClient(bs) as client:
        o = client.offsets([(topic, 1)])[(topic, 1)]
    return o.last_stable, o.high_watermark


def plant_hanging_offsets(bootstrap: str, group: str, topic: str, partition: int, offset: int,
                          txid: str) -> tuple[int, int]:
    """InitProducerId for ``txid``, then its TxnOffsetCommit of ``offset`` for the group with no
    AddOffsetsToTxn: a transactional offset commit record on the group's __consumer_offsets partition its
    coordinator never heard of (verification off: KIP-890's check skipped). (producer id, epoch)."""
    from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
    from kafka.protocol.producer.transaction import InitProducerIdRequest, TxnOffsetCommitRequest

    from eosctl.cluster.wire import WireClient

    with WireClient(bootstrap, timeout_ms=30_000) as client:
        def coordinator(key: str, key_type: int) -> int:
            deadline = time.monotonic() + 60
            while True:  # a first transactional id creates __transaction_state: not available for a while
                (found,) = client.request_all([(client.any_node(), FindCoordinatorRequest(
                    key=key, key_type=key_type, max_version=3))])
                if not found.error_code:
                    return found.node_id
                assert time.monotonic() < deadline, f"FindCoordinator for {key} kept failing: {found}"
                time.sleep(0.3)

        deadline = time.monotonic() + 60
        while True:  # the coordinator loads __transaction_state (created on first use) for a while
            (init,) = client.request_all([(coordinator(txid, 1), InitProducerIdRequest(
                transactional_id=txid, transaction_timeout_ms=60_000, max_version=4))])
            if not init.error_code:
                break
            assert time.monotonic() < deadline, f"InitProducerId for {txid} kept failing: {init}"
            time.sleep(0.3)
        part = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
            partition_index=partition, committed_offset=offset, committed_leader_epoch=-1,
            committed_metadata="")
        request = TxnOffsetCommitRequest(
            transactional_id=txid, group_id=group, producer_id=init.producer_id,
            producer_epoch=init.producer_epoch, generation_id=-1, member_id="", group_instance_id=None,
            topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=topic, partitions=[part])],
            max_version=3)  # v5+ has the coordinator add the partition itself (KIP-890 part 2)
        (answer,) = client.request_all([(coordinator(group, 0), request)])
        errors = [p.error_code for t in answer.topics for p in t.partitions]
        assert errors == [0], answer
        return init.producer_id, init.producer_epoch


def test_a_transaction_hanging_on_a_group_s_offsets_is_found_as_find_hanging_finds_it(unverified) -> None:
    """KAFKA-13288: find-hanging checks __consumer_offsets too. A transactional offset commit whose
    transaction its coordinator never heard of holds the group's offsets partition for good: `txns
    hanging` (every topic, by default) names __consumer_offsets-N and the group, as find-hanging names the
    partition; `lag` shows the group's offset pending in it; the marker-level abort ends it."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from eosctl.cluster.wire import WireClient
    from eosctl.txn.pendingoffsets import java_string_hash, offsets_partition

    bs = unverified.bootstrap
    topic = "o" + uuid.uuid4().hex[:10]
    while java_string_hash(f"{topic}-g") >= 0:  # a negative hash: Utils.abs negates it, a mask would not
        topic = "o" + uuid.uuid4().hex[:10]
    group, txid = f"{topic}-g", f"{topic}-stage"
    admin = AdminClient({"bootstrap.servers": bs})  # kept: a collected client ends its futures
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
    plain_write(bs, topic, 0, 4)
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    finally:
        c.close()
    pid, epoch = plant_hanging_offsets(bs, group, topic, 0, 3, txid)
    planted = time.monotonic()  # after the commit, as for plant_hanging: its age starts there at the latest
    with WireClient(bs) as client:
        n = offsets_partition(group, len(client.metadata(["__consumer_offsets"])["__consumer_offsets"]))
    time.sleep(max(0.0, planted + MAX_AGE_S + 0.5 - time.monotonic()))

    ((t, p, kpid, kepoch, start),) = find_hanging(unverified)
    assert (t, p, kpid, kepoch) == ("__consumer_offsets", n, pid, epoch)
    doc = jdoc("txns", "hanging", "--bootstrap", bs, "--max-age", f"{MAX_AGE_S:g}s", code=1)
    assert [(h["topic"], h["partition"], h["producer_id"], h["first_offset"], h["transactional_id"],
             sorted(h["rules"]), h["groups"], h["counted"]) for h in doc["hanging"]] == [
        ("__consumer_offsets", n, pid, start, txid, ["kip664", "lso"], [group], True)]
    text = cli("txns", "hanging", "--bootstrap", bs, "--max-age", f"{MAX_AGE_S:g}s", code=1).stdout
    assert text.strip().splitlines()[-1] == (f"to abort one: eosctl txns abort --bootstrap {bs} --topic "
                                             f"__consumer_offsets --partition {n} --start-offset {start}")

    # The group's consumer would wait at offset 1: its commit of 3 is pending in the hanging transaction.
    (g,) = jdoc("lag", "--bootstrap", bs, "-t", topic, "-g", group)["groups"]
    (row,) = g["partitions"]
    assert (row["committed"], row["pending_commit"]["offsets_partition"]) == (1, n)
    assert [(x["transactional_id"], x["producer_id"], x["first_offset"])
            for x in row["pending_commit"]["transactions"]] == [(txid, pid, start)]

    # The marker-level abort ends it: nothing hangs, and the offset stays the one committed before.
    done = jdoc("txns", "abort", "--bootstrap", bs, "--topic", "__consumer_offsets", "--partition", str(n),
                "--start-offset", str(start), "--yes")
    assert done["aborted"] is True
    assert find_hanging(unverified) == []
    after = jdoc("txns", "hanging", "--bootstrap", bs, "--max-age", f"{MAX_AGE_S:g}s")
    assert (after["hanging"], after["blocking"]) == ([], [])
    (g,) = jdoc("lag", "--bootstrap", bs, "-t", topic, "-g", group)["groups"]
    assert [(r["committed"], r["pending_commit"]) for r in g["partitions"]] == [(1, None)]
