"""What happens to a transactional log over its life on Apache Kafka 4.4 (issue 28, item 3): producer state
expiring from the broker (ProducerStateManager.removeExpiredProducers, ``producer.id.expiration.ms``),
DeleteRecords moving the log start through an open transaction (UnifiedLog.maybeIncrementLogStartOffset:
the first unstable offset follows the log start), time-based retention deleting a rolled segment that holds
the first half of a committed and of an aborted transaction (UnifiedLog.deleteRetentionMsBreachedSegments:
whole non-active segments below the HW, the LSO not consulted), and the cleaner on a compacted transactional
topic (LogCleaner: aborted batches dropped, markers kept until the delete horizon, KIP-534).

The expiry and cleaner settings need a broker of the test module's own.
"""

from __future__ import annotations

import json
import signal
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka.admin import KafkaAdminClient, NewTopic

from tests.support import jvm
from tests.support.broker import audit_offsets, commit_offset
from tests.support.helpers import eosctl, wait_until
from tests.support.markers import markers_written
from tests.support.txnjava import TxnJava

pytestmark = pytest.mark.integration

EXPIRY_MS = 3000


@pytest.fixture(scope="module")
def short_lived(tmp_path_factory: pytest.TempPathFactory):
    """A broker that forgets idle producers after EXPIRY_MS, cleans compacted topics and applies a topic's
    retention within seconds."""
    from eosctl.sandbox import apache_kafka as ak

    cluster = ak.start(tmp_path_factory.mktemp("kafka-short-lived"), die_with_parent=True, properties={
        "producer.id.expiration.ms": str(EXPIRY_MS), "producer.id.expiration.check.interval.ms": "500",
        "log.cleaner.backoff.ms": "500", "log.retention.check.interval.ms": "500",
        "log.initial.task.delay.ms": "1000"})  # the first retention check (default 30 s after the start)
    try:
        yield cluster
    finally:
        ak.stop(cluster)


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> TxnJava:
    return TxnJava(tmp_path_factory.mktemp("txnjava"))


cli = eosctl  # 200 columns: no cell wraps


def jdoc(*args: str, code: int = 0) -> dict:
    result = cli(*args, "--format", "json")
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


def new_topic(bootstrap: str, partitions: int = 1, **configs: str) -> str:
    name = "t" + uuid.uuid4().hex[:10]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1, topic_configs=configs)])
    finally:
        admin.close()
    return name


def idempotent_write(bootstrap: str, topic: str, n: int, key: str = "i") -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0})
    for i in range(n):
        p.produce(topic, key=f"{key}{i}".encode(), value=b"v", partition=0)
    assert p.flush(30) == 0


def test_producer_the_broker_forgot_is_still_read_from_the_log(short_lived, java):
    bs = short_lived.bootstrap
    topic = new_topic(bs)
    txid = f"{topic}-java"
    java.run(bs, topic, txid, "commit", 2)  # data 0, COMMIT 1 (epoch 1), data 2, COMMIT 3 (epoch 2)
    first = jdoc("producers", "--bootstrap", bs, "--topic", topic)
    (row,) = first["producers"]
    assert (first["source"], row["in_broker_state"], row["transactional_id"]) == (
        "describe-producers", True, txid)
    pid = row["producer_id"]
    # DescribeProducers forgets it EXPIRY_MS after its last write (no transaction open)...
    deadline = time.monotonic() + 60
    while _described(short_lived, topic):
        assert time.monotonic() < deadline, "the broker never expired the producer"
        time.sleep(0.5)
    # ...and with nobody else on the topic eosctl reads the producers from the log alone, as before.
    alone = jdoc("producers", "--bootstrap", bs, "--topic", topic)
    assert alone["source"] == "log-scan" and "DescribeProducers returned no producers" in alone["note"]
    assert [(r["producer_id"], r["epochs"], r["fencing_events"], r["protocol"], r["transactional_id"])
            for r in alone["producers"]] == [(pid, [0, 1, 2], 0, "v2", txid)]
    # Another producer writes: the broker reports it, and the forgotten one stays, marked so.
    idempotent_write(bs, topic, 2)
    both = jdoc("producers", "--bootstrap", bs, "--topic", topic)
    assert both["source"] == "describe-producers"
    assert "1 seen only in the log (the broker's producer state expired)" in both["note"]
    rows = {r["producer_id"]: r for r in both["producers"]}
    gone = rows.pop(pid)
    assert (gone["in_broker_state"], gone["epochs"], gone["producer_epoch"], gone["fencing_events"],
            gone["transactional_id"], gone["current_txn_start_offset"]) == (
        False, [0, 1, 2], 2, 0, txid, None)
    ((other_pid, other),) = rows.items()
    assert (other["in_broker_state"], other["epochs"], other["transactional_id"]) == (True, [0], None)
    text = cli("producers", "--bootstrap", bs, "--topic", topic).stdout
    assert f"{pid} (expired)" in text
    # The log keeps telling its story: the epochs and the routine commits.
    doc = jdoc("log", "--bootstrap", bs, "--topic", topic, "--partition", "0")
    p = next(p for p in doc["producers"] if p["producer_id"] == pid)
    assert (p["epochs"], p["commit_bumps"], p["fencing_events"], p["transactional_id"]) == (
        [0, 1, 2], 2, 0, txid)


def _described(cluster, topic: str) -> list[str]:
    """Kafka's own kafka-transactions.sh describe-producers rows for the partition (the oracle)."""
    from eosctl.sandbox import apache_kafka as ak

    out = ak.tool(cluster, "org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server",
                  cluster.bootstrap, "describe-producers", "--topic", topic, "--partition", "0").stdout
    return [line for line in out.splitlines()[1:] if line.strip()]


def test_delete_records_through_an_open_transaction(short_lived, java, tmp_path):
    bs = short_lived.bootstrap
    topic = new_topic(bs)
    java.run(bs, topic, f"{topic}-before", "commit", 1)  # data 0, COMMIT 1
    proc = java.start(bs, topic, f"{topic}-open", "open", 3, timeout_ms=12_000)  # open at 2..4
    try:
        admin = KafkaAdminClient(bootstrap_servers=bs)
        try:
            admin.delete_records({_tp(topic): 3})  # the log start moves inside the open transaction
        finally:
            admin.close()
        doc = jdoc("log", "--bootstrap", bs, "--topic", topic, "--partition", "0")
        # The LSO follows the log start (the first unstable offset can't be below it).
        assert (doc["log_start_offset"], doc["last_stable_offset"], doc["high_watermark"]) == (3, 3, 5)
        assert [(r["first"], r["last"], r["kind"]) for r in doc["ranges"]] == [(3, 4, "OPEN")]
        assert doc["warnings"] == []
        group = f"{topic}-g"
        _commit(bs, group, topic, 0)  # a group committed before the deleted records
        (row,) = jdoc("lag", "--bootstrap", bs, "-t", topic, "-g", group)["groups"][0]["partitions"]
        assert (row["log_start"], row["lso"], row["blocked"], row["records_behind"]) == (3, 3, 2, 0)
        assert row["open_transaction"]["first_offset"] == 3
    finally:
        jvm.stop(proc, signal.SIGKILL)
    # The coordinator aborts it on its timeout: its records left in the log are aborted, nothing open.
    doc = timed_out_abort(bs, topic, lso=6)
    assert [(r["first"], r["last"], r["kind"]) for r in doc["ranges"]] == [
        (3, 4, "ABORTED"), (5, 5, "MARKER")]
    # The audit: nothing expected (the one committed record is below the log start); a sink's row for it is
    # unverifiable, its row for an aborted one a phantom.
    audit = audit_offsets(bs, topic, tmp_path, [(topic, 0, 0), (topic, 0, 4)])
    (part,) = audit["partitions"]
    assert (part["log_start_offset"], part["expected_records"], part["unverifiable_below"]) == (3, 0, 1)
    assert [(f["kind"], f["first_offset"], f["last_offset"]) for f in audit["findings"]] == [
        ("phantom_aborted", 4, 4)]


def _tp(topic: str):
    from kafka import TopicPartition

    return TopicPartition(topic, 0)


_commit = commit_offset


def timed_out_abort(bootstrap: str, topic: str, lso: int) -> dict:
    """`eosctl log` of partition 0 once the coordinator has aborted the timed-out transaction (its LSO
    reached ``lso``)."""
    def log_at_lso() -> dict | None:
        doc = jdoc("log", "--bootstrap", bootstrap, "-t", topic, "-P", "0")
        return doc if doc["last_stable_offset"] >= lso else None

    return wait_until("the coordinator's abort of the timed-out transaction", log_at_lso, 90, interval=1)


def test_retention_moves_the_log_start_through_a_committed_and_an_aborted_transaction(short_lived, tmp_path):
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    bs = short_lived.bootstrap
    topic = new_topic(bs, 2, **{"segment.ms": "600000"})
    committed, aborted = (_txn_producer(bs, f"{topic}-{what}") for what in ("c", "a"))
    for p in (committed, aborted):
        p.begin_transaction()
    # Each transaction: 2 records stamped an hour ago, then one stamped now: the jump in record time rolls a
    # segment (LogSegment.shouldRoll: the new timestamp minus the segment's first is past segment.ms), then
    # its marker: partition 0 committed, partition 1 aborted; offsets 0..1 | 2, marker 3.
    hour_ago = int(time.time() * 1000) - 3_600_000
    for part, p in enumerate((committed, aborted)):
        for i in range(2):
            p.produce(topic, key=b"k%d" % i, value=b"v", partition=part, timestamp=hour_ago)
        assert p.flush(30) == 0
        p.produce(topic, key=b"k2", value=b"v", partition=part)
        assert p.flush(30) == 0
    committed.commit_transaction(30)
    aborted.abort_transaction(30)
    markers_written(bs, f"{topic}-c", f"{topic}-a")  # the markers at offset 3 are what `log` must show
    before = [[(r["first"], r["last"], r["kind"]) for r in jdoc("log", "--bootstrap", bs, "-t", topic, "-P",
                                                                  str(part))["ranges"]] for part in (0, 1)]
    assert before == [[(0, 2, "DATA"), (3, 3, "MARKER")], [(0, 2, "ABORTED"), (3, 3, "MARKER")]]
    for part in (0, 1):
        segments = (Path(short_lived.nodes[0].log_dir) / f"{topic}-{part}").glob("*.log")
        assert sorted(p.name for p in segments) == [f"{0:020d}.log", f"{2:020d}.log"]
    # Retention of ten minutes: the first segment of each partition goes (its records are an hour old), the
    # active one stays; the log start moves to 2, inside each transaction (retention is checked every
    # log.retention.check.interval.ms, from log.initial.task.delay.ms after the broker started).
    admin = AdminClient({"bootstrap.servers": bs})
    resource = ConfigResource("TOPIC", topic, incremental_configs=[
        ConfigEntry("retention.ms", "600000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    deadline = time.monotonic() + 90
    while True:
        docs = [jdoc("log", "--bootstrap", bs, "-t", topic, "-P", str(part)) for part in (0, 1)]
        if all(d["log_start_offset"] != 0 for d in docs):
            break
        assert time.monotonic() < deadline, "retention never deleted the first segments"
        time.sleep(0.5)
    # Read again: a scan that met the deletion rightly warns that the log start moved under it (ci26).
    docs = [jdoc("log", "--bootstrap", bs, "-t", topic, "-P", str(part)) for part in (0, 1)]
    for d, kind in zip(docs, ("DATA", "ABORTED"), strict=True):
        assert (d["log_start_offset"], d["last_stable_offset"], d["high_watermark"]) == (2, 4, 4)
        assert [(r["first"], r["last"], r["kind"]) for r in d["ranges"]] == [(2, 2, kind), (3, 3, "MARKER")]
        assert d["warnings"] == []
    assert [(r["first"], r["last"]) for r in docs[1]["aborted_ranges"]] == [(2, 2)]
    assert [(m["offset"], m["type"]) for m in docs[0]["markers"] + docs[1]["markers"]] == [
        (3, "COMMIT"), (3, "ABORT")]
    # The audit expects only the committed record left (offset 2 of partition 0); rows for the deleted ones
    # are unverifiable, a row for the aborted record the retention left is a phantom.
    rows = [(topic, 0, 0), (topic, 0, 1), (topic, 0, 2), (topic, 1, 0), (topic, 1, 2)]
    audit = audit_offsets(bs, topic, tmp_path / "a", rows, code=1)
    assert [(p["partition"], p["log_start_offset"], p["expected_records"], p["unverifiable_below"])
            for p in audit["partitions"]] == [(0, 2, 1, 2), (1, 2, 0, 1)]
    assert [(f["partition"], f["kind"], f["first_offset"], f["last_offset"]) for f in audit["findings"]] == [
        (1, "phantom_aborted", 2, 2)]
    missing = audit_offsets(bs, topic, tmp_path / "m", [(topic, 0, 0)], code=1)
    assert [(f["partition"], f["kind"], f["first_offset"], f["last_offset"])
            for f in missing["findings"]] == [(0, "gap", 2, 2)]


def _txn_producer(bootstrap: str, txid: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txid, "linger.ms": 0})
    p.init_transactions(60)
    return p


def test_compacted_transactional_topic_after_the_cleaner(short_lived, java, tmp_path):
    bs = short_lived.bootstrap
    topic = new_topic(bs, **{"cleanup.policy": "compact", "segment.ms": "500",
                             "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "2000",
                             "min.compaction.lag.ms": "0"})
    txid = f"{topic}-java"
    # One id, one process each (each run is a segment: segment.ms): keys k<txn>-0.
    java.run(bs, topic, txid, "commit", 2)  # 0 k0-0, COMMIT 1, 2 k1-0, COMMIT 3
    java.run(bs, topic, txid, "abort", 2)  # 4 k0-0, ABORT 5, 6 k1-0, ABORT 7
    java.run(bs, topic, txid, "commit", 1)  # 8 k0-0 (overwrites 0), COMMIT 9
    proc = java.start(bs, topic, txid, "open", 1, timeout_ms=10_000)  # 10 k0-0, open: cleaning stops there
    before = {0: "DATA", 1: "MARKER", 2: "DATA", 3: "MARKER", 4: "ABORTED", 5: "MARKER", 6: "ABORTED",
              7: "MARKER", 8: "DATA", 9: "MARKER", 10: "OPEN"}
    try:
        # The first pass drops the overwritten record and the aborted ones at once; the markers stay until
        # their delete horizon (delete.retention.ms, KIP-534) has passed and a later pass runs.
        first = [(0, 0, "HOLE"), (1, 1, "MARKER"), (2, 2, "DATA"), (3, 3, "MARKER"), (4, 4, "HOLE"),
                 (5, 5, "MARKER"), (6, 6, "HOLE"), (7, 7, "MARKER"), (8, 8, "DATA"), (9, 9, "MARKER"),
                 (10, 10, "OPEN")]
        doc = _until(bs, topic, lambda ranges: ranges == first, before, "the cleaner's first pass")
        assert (doc["last_stable_offset"], doc["high_watermark"], doc["counts"]["HOLE"]) == (10, 11, 3)
        p = doc["producers"][0]
        assert (p["fencing_events"], p["sequence_anomalies"], p["transactional_id"]) == (0, [], txid)
        # The audit expects the committed records still there: 2 and 8 (0 is a hole now: unverifiable).
        audit = audit_offsets(bs, topic, tmp_path / "a", [(topic, 0, 0), (topic, 0, 2), (topic, 0, 8)],
                              code=0)
        (part,) = audit["partitions"]
        assert (part["expected_records"], part["unverifiable_below"], audit["findings"]) == (2, 1, [])
        missing = audit_offsets(bs, topic, tmp_path / "m", [(topic, 0, 2)], code=1)
        assert [(f["kind"], f["first_offset"], f["last_offset"]) for f in missing["findings"]] == [
            ("gap", 8, 8)]
    finally:
        jvm.stop(proc, signal.SIGKILL)
    # The open transaction times out (ABORT at 11); new keys from another producer make the log dirty again,
    # and later passes remove the emptied ABORT markers past their horizon, and the aborted record 10.
    doc = timed_out_abort(bs, topic, lso=12)
    before.update({10: "ABORTED", 11: "MARKER"})
    writes = iter(range(1000))

    def later(ranges: list) -> bool:
        idempotent_write(bs, topic, 1, key=f"new{next(writes)}")
        return (5, 5, "HOLE") in _single(ranges) and (7, 7, "HOLE") in _single(ranges) and \
            (10, 10, "HOLE") in _single(ranges)

    doc = _until(bs, topic, later, before, "the markers' removal after their delete horizon")
    kinds = _kinds(doc)
    assert [kinds[o] for o in (2, 3, 8, 9)] == ["DATA", "MARKER", "DATA", "MARKER"]
    assert doc["last_stable_offset"] == doc["high_watermark"] and doc["warnings"] == []
    audit = audit_offsets(bs, topic, tmp_path / "b", [(topic, 0, 2), (topic, 0, 8)], code=1)
    assert {f["kind"] for f in audit["findings"]} == {"gap"}  # only the new keys, written past the sink
    assert all(f["first_offset"] > 11 for f in audit["findings"])


def _kinds(doc: dict) -> dict[int, str]:
    return {o: r["kind"] for r in doc["ranges"] for o in range(r["first"], r["last"] + 1)}


def _single(ranges: list) -> list:
    return [(o, o, k) for a, b, k in ranges for o in range(a, b + 1)]


def _until(bs: str, topic: str, done, before: dict[int, str], what: str) -> dict:
    """Read the log until ``done(ranges)``; every read must show each offset as it was or as a hole."""
    deadline = time.monotonic() + 120
    seen = []
    while True:
        doc = jdoc("log", "--bootstrap", bs, "-t", topic, "-P", "0")
        ranges = [(r["first"], r["last"], r["kind"]) for r in doc["ranges"]]
        assert all(k in (before.get(o, "DATA"), "HOLE") for o, k in _kinds(doc).items()), str(ranges)
        assert doc["warnings"] == [], doc["warnings"]
        if not seen or seen[-1] != ranges:
            seen.append(ranges)
        if done(ranges):
            return doc
        assert time.monotonic() < deadline, f"{what} never came: {seen}"
        time.sleep(1)
