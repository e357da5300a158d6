"""The transactional-state story on Apache Kafka 4.4 (issue 28, item 3), each behaviour on the real broker.

- transactions v2 from a Java producer (kafka-clients 4.4): every COMMIT bumps the epoch (data at E, marker
  at E+1, next data at E+1: TransactionMetadata.prepareAbortOrCommit); counted, never fencing, next to
  confluent-kafka's transactions v1 (librdkafka's EndTxn keeps the epoch) on the same cluster;
- a take-over (a second instance of the id while the first holds an open transaction): the coordinator
  fences and aborts (TransactionCoordinator.handleInitProducerId: ABORT at E+1, the new instance at E+2),
  told as one event;
- the transaction timeout (TransactionCoordinator.abortTimedOutTransactions): the coordinator's ABORT told
  as a timeout, the LSO moving, lag draining, the audit counting the records as aborted.
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
from tests.support.broker import audit_offsets, commit_offset, epoch_timeline
from tests.support.helpers import eosctl
from tests.support.txnjava import TxnJava

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> TxnJava:
    return TxnJava(tmp_path_factory.mktemp("txnjava"))


@pytest.fixture
def kafka(apache_kafka) -> str:
    """The session's Apache Kafka (these behaviours exist only there, whatever EOSCTL_TEST_BROKER says)."""
    return apache_kafka.bootstrap


cli = eosctl  # 200 columns: no cell wraps


def jdoc(*args: str, code: int = 0) -> dict:
    result = cli(*args, "--format", "json")
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


def new_topic(bootstrap: str, partitions: int) -> str:
    name = "t" + uuid.uuid4().hex[:10]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()
    return name


def producer_of(doc: dict, pid: int) -> dict:
    return next(p for p in doc["producers"] if p["producer_id"] == pid)


timeline = epoch_timeline  # a wrapped row's first line only


def fencing_metric(bootstrap: str, topic: str, tmp_path: Path) -> dict[int, float]:
    """eosctl_producer_fencing_events_total per partition from one exporter reading."""
    out = tmp_path / f"{topic}.prom"
    result = cli("exporter", "--bootstrap", bootstrap, "-t", topic, "--once", "--textfile", str(out))
    assert result.exit_code == 0, result.output
    got = {}
    for line in out.read_text().splitlines():
        if line.startswith("eosctl_producer_fencing_events_total{"):
            labels, value = line.rsplit(" ", 1)
            got[int(labels.split('partition="')[1].split('"')[0])] = float(value)
    return got


def tui(bootstrap: str, topic: str):
    """The TUI's Producers rows and each partition's Log rows, from one capture of the topic."""
    from eosctl.config.target import resolve
    from eosctl.inspection.capture import capture
    from tui.sources import Dashboard
    from tui.views.log import range_rows
    from tui.views.producers import producer_rows

    cap = capture(resolve(None, None, bootstrap, (topic,), None, need_topics=True))
    return producer_rows(Dashboard(cap)), {tp[1]: range_rows(log) for tp, log in cap.logs.items()}


def confluent(bootstrap: str, txid: str, **conf) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txid, "linger.ms": 0, **conf})
    p.init_transactions(30)
    return p


def confluent_txn(p: Producer, topic: str, partitions: int, commit: bool = True) -> None:
    p.begin_transaction()
    for part in range(partitions):
        p.produce(topic, key=b"k", value=b"v", partition=part)
    p.flush(30)
    (p.commit_transaction if commit else p.abort_transaction)(30)


# --- transactions v2: counted, never fencing --------------------------------------------------------------

def test_v2_commits_are_counted_not_listed_beside_confluent_kafkas_v1(kafka, java, tmp_path):
    topic = new_topic(kafka, 2)
    java.run(kafka, topic, f"{topic}-java", "commit", 20, partitions=2)
    cp = confluent(kafka, f"{topic}-librdkafka")
    for commit in (True, True, False, True):
        confluent_txn(cp, topic, 2, commit)
    cp.flush(10)

    doc = jdoc("log", "--bootstrap", kafka, "--topic", topic, "--partition", "0")
    java_pid = doc["transactions"][0]["producer_id"]
    j = producer_of(doc, java_pid)
    # data at E, COMMIT at E+1, the next data at E+1: 20 commits moved the epoch 0 -> 20, none listed
    assert (j["protocol"], j["fencing_events"], j["commit_bumps"], j["epoch_bumps"]) == ("v2", 0, 20, [])
    assert j["routine"] == "transactions v2: 20 commits moved the epoch 0 -> 20 (routine, never fencing)"
    assert j["transactional_id"] == f"{topic}-java"
    (c,) = [p for p in doc["producers"] if p["producer_id"] != java_pid]
    assert (c["protocol"], c["fencing_events"], c["epoch_bumps"], c["epochs"]) == ("v1", 0, [], [0])
    assert c["transactional_id"] == f"{topic}-librdkafka"
    assert [(t["outcome"], t["marker_epoch"] - t["producer_epoch"]) for t in doc["transactions"]
            if t["producer_id"] == c["producer_id"]] == [("COMMIT", 0), ("COMMIT", 0), ("ABORT", 0),
                                                           ("COMMIT", 0)]
    text = cli("log", "--bootstrap", kafka, "--topic", topic, "--partition", "0", "--no-batches").stdout
    assert timeline(text) == [(str(doc["transactions"][1]["marker_offset"] - 2), str(java_pid), j["routine"])]
    assert "FENCED" not in text and f"{topic}-java" in text

    prod = jdoc("producers", "--bootstrap", kafka, "--topic", topic)
    assert prod["source"] == "describe-producers"
    rows = {(r["partition"], r["producer_id"]): r for r in prod["producers"]}
    for part in (0, 1):
        r = rows[(part, java_pid)]
        assert (r["producer_epoch"], r["fencing_events"], r["protocol"], r["in_broker_state"]) == (
            20, 0, "v2", True)
        assert r["transactional_id"] == f"{topic}-java"
        assert rows[(part, c["producer_id"])]["fencing_events"] == 0

    marker = doc["transactions"][5]["marker_offset"]
    ex = jdoc("explain", "--bootstrap", kafka, "--topic", topic, "--partition", "0", "--offset", str(marker))
    assert ex["kind"] == "MARKER" and ex["producer"]["epoch_history"] == []
    assert (ex["producer"]["routine"], ex["producer"]["fencing_events"]) == (j["routine"], 0)
    assert fencing_metric(kafka, topic, tmp_path) == {0: 0.0, 1: 0.0}
    rows, _ = tui(kafka, topic)  # the TUI's Producers view: nobody FENCED, the ids beside the pids
    ids = ((java_pid, f"{topic}-java"), (c["producer_id"], f"{topic}-librdkafka"))
    assert sorted((r.cells[1], r.cells[7], r.cells[8]) for r in rows) == sorted(
        (pid, "", tid) for pid, tid in ids for _ in (0, 1))


# --- a take-over under each client ------------------------------------------------------------------------

def test_java_takeover_is_one_event_the_partition_alone_cannot_settle(kafka, java, tmp_path):
    topic = new_topic(kafka, 2)
    txid = f"{topic}-java"
    java.run(kafka, topic, txid, "commit", 2, partitions=2)
    first = java.start(kafka, topic, txid, "open", 2, partitions=2)  # holds a transaction open
    try:
        java.run(kafka, topic, txid, "commit", 1, partitions=2)  # the second instance takes the id over
    finally:
        jvm.stop(first, signal.SIGKILL)
    for part in (0, 1):
        doc = jdoc("log", "--bootstrap", kafka, "--topic", topic, "--partition", str(part))
        (aborted,) = doc["aborted_ranges"]
        (p,) = doc["producers"]
        # the coordinator's ABORT and the new instance's data: one event (the first instance's start after
        # the commits is a routine bump on data)
        (b,) = [b for b in p["epoch_bumps"] if not b["routine"]]
        assert b["marker"] == "ABORT"
        assert (b["txn_first"], b["txn_last"]) == (aborted["first"], aborted["last"])
        assert (b["new_epoch"] - b["old_epoch"], b["next_epoch"] - b["new_epoch"]) == (1, 1)
        # Under transactions v2 the id's own abort followed by a restart reads the same in every partition:
        # both are said, and nothing is counted as fencing.
        assert b["why"].startswith(
            "TAKEOVER?: a new instance took the id over and the coordinator aborted the old one's "
            f"transaction at offsets {aborted['first']}..{aborted['last']}; the new instance wrote at "
            f"epoch {b['next_epoch']} from offset {b['next_offset']}; or (transactions v2) the id aborted it "
            "itself")
        assert (b["fencing"], p["fencing_events"], p["transactional_id"]) == (False, 0, txid)
        # (the first instance's start after the commits: a routine bump on data)
        assert p["routine"] == ("transactions v2: 3 commits, 1 bump on data (transactions of this id that "
                                "skipped this partition, or restarts) moved the epoch 0 -> 6 (routine, never "
                                "fencing)")
        text = cli("log", "--bootstrap", kafka, "--topic", topic, "--partition", str(part), "--no-batches")
        rows = timeline(text.stdout)
        assert [r[0] for r in rows] == [str(doc["transactions"][0]["marker_offset"]), str(b["offset"])]
        assert rows[1][2].startswith(f"epoch {b['old_epoch']} -> {b['new_epoch']} -> {b['next_epoch']} "
                                     "(TAKEOVER?: a new instance took the id over")
        ex = jdoc("explain", "--bootstrap", kafka, "--topic", topic, "--partition", str(part),
                  "--offset", str(aborted["first"]))
        assert ex["transaction"]["aborted_by"] == "takeover?" and "can't tell" in ex["summary"]
    assert fencing_metric(kafka, topic, tmp_path) == {0: 0.0, 1: 0.0}


def test_v2_abort_then_transactions_elsewhere_is_settled_by_the_other_partition(kafka, java, tmp_path):
    # One Java process: an aborted transaction on both partitions (ABORT at E+1), a commit on partition 1
    # only (its data at E+1), then one on both (data at E+2). Partition 0 alone reads like a take-over;
    # partition 1's data at E+1 says the id went on by itself.
    topic = new_topic(kafka, 2)
    txid = f"{topic}-java"
    java.run(kafka, topic, txid, "script", script="abort:0,1;commit:1;commit:0,1")
    doc = jdoc("log", "--bootstrap", kafka, "--topic", topic, "--partition", "0")
    (p,) = doc["producers"]
    (b,) = [b for b in p["epoch_bumps"] if b["marker"] == "ABORT"]
    assert (b["offset"], b["txn_first"], b["txn_last"], b["next_offset"]) == (1, 0, 0, 2)
    assert (b["next_epoch"] - b["new_epoch"], p["own_aborts_settled"], p["fencing_events"]) == (
        1, [b["new_epoch"]], 0)
    assert b["why"] == ("transactions v2: the id aborted its transaction at offsets 0..0 itself; its other "
                        f"partitions hold its transactions at epoch {b['new_epoch']}")
    assert b["routine"] and "TAKEOVER" not in cli("log", "--bootstrap", kafka, "-t", topic, "-P", "0").stdout
    prod = jdoc("producers", "--bootstrap", kafka, "--topic", topic)
    assert [(r["partition"], r["fencing_events"], r["transactional_id"]) for r in prod["producers"]] == [
        (0, 0, txid), (1, 0, txid)]


def test_confluent_kafka_takeover_is_one_fencing_event_everywhere(kafka, tmp_path):
    topic = new_topic(kafka, 2)
    txid = f"{topic}-librdkafka"
    old = confluent(kafka, txid)
    confluent_txn(old, topic, 2)  # a commit at the data's epoch: librdkafka ends transactions the v1 way
    old.begin_transaction()
    for part in (0, 1):
        old.produce(topic, key=b"z", value=b"zombie", partition=part)
    old.flush(30)
    new = confluent(kafka, txid)  # fences the old instance: the coordinator aborts its open transaction
    confluent_txn(new, topic, 2)
    new.flush(10)
    fenced = {}
    for part in (0, 1):
        doc = jdoc("log", "--bootstrap", kafka, "--topic", topic, "--partition", str(part))
        (aborted,) = doc["aborted_ranges"]
        (p,) = doc["producers"]
        (b,) = p["epoch_bumps"]
        # 0 -> 1 at the coordinator's ABORT, 1 -> 2 at the new instance's first batch: one event
        assert (b["old_epoch"], b["new_epoch"], b["next_epoch"], b["fencing"]) == (0, 1, 2, True)
        assert b["why"] == ("FENCED: a new instance took the id over and the coordinator aborted the old "
                            f"one's transaction at offsets {aborted['first']}..{aborted['last']}; the new "
                            "instance "
                            f"wrote at epoch 2 from offset {b['next_offset']}")
        assert (p["protocol"], p["fencing_events"], p["transactional_id"]) == ("v1", 1, txid)
        ex = jdoc("explain", "--bootstrap", kafka, "--topic", topic, "--partition", str(part),
                  "--offset", str(aborted["first"]))
        assert ex["transaction"]["aborted_by"] == "takeover" and ex["transaction"]["fenced"]
        assert "a new instance took the id over" in ex["summary"]
        fenced[part] = p["producer_id"]
    prod = jdoc("producers", "--bootstrap", kafka, "--topic", topic)
    rows = sorted((r["partition"], r["producer_id"], r["fencing_events"], r["epochs"])
                  for r in prod["producers"])
    assert rows == [(0, fenced[0], 1, [0, 1, 2]), (1, fenced[1], 1, [0, 1, 2])]
    assert fencing_metric(kafka, topic, tmp_path) == {0: 1.0, 1: 1.0}
    rows, logs = tui(kafka, topic)
    assert [(r.cells[7], r.cells[8]) for r in rows] == [("FENCED x1", txid)] * 2
    for part in (0, 1):
        (aborted,) = [r for r in logs[part] if r.cells[3] == "aborted"]
        assert aborted.cells[6].endswith("(a new instance took the id over: the coordinator's abort)")


# --- the transaction timeout ------------------------------------------------------------------------------

TIMEOUT_MS = 8000


def test_timed_out_transaction_is_the_coordinators_abort(kafka, java, tmp_path):
    topic = new_topic(kafka, 1)
    txid = f"{topic}-dies"
    group = f"{topic}-g"
    java.run(kafka, topic, f"{topic}-before", "commit", 1)  # one committed record, consumed by the group
    _commit_group(kafka, group, topic, 2)  # past the record and its marker
    proc = java.start(kafka, topic, txid, "open", 3, timeout_ms=TIMEOUT_MS)
    started = time.monotonic()
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    # Before the timeout: the partition is blocked behind the open transaction, and it is found hanging.
    lag = jdoc("lag", "--bootstrap", kafka, "-t", topic, "-g", group)
    (row,) = lag["groups"][0]["partitions"]
    open_txn = row["open_transaction"]
    assert (row["lso"], row["hw"], row["blocked"], open_txn["first_offset"]) == (2, 5, 3, 2)
    assert open_txn["transactional_id"] == txid
    time.sleep(max(0.0, 2.5 - (time.monotonic() - started)))  # older than --max-age, younger than the timeout
    hanging = jdoc("txns", "hanging", "--bootstrap", kafka, "-t", topic, "--max-age", "2s", code=1)
    assert time.monotonic() - started < TIMEOUT_MS / 1000, "too slow to look before the timeout"
    assert [(h["partition"], h["first_offset"], h["transactional_id"]) for h in hanging["hanging"]] == [
        (0, 2, txid)]
    # After it: the coordinator's ABORT (TransactionCoordinator.abortTimedOutTransactions), the LSO moves.
    deadline = time.monotonic() + 90
    while True:
        doc = jdoc("log", "--bootstrap", kafka, "--topic", topic, "--partition", "0")
        if doc["last_stable_offset"] == doc["high_watermark"]:
            break
        assert time.monotonic() < deadline, "the coordinator never aborted the timed-out transaction"
        time.sleep(1)
    assert doc["aborted_ranges"] == [{"first": 2, "last": 4, "producer_id": open_txn["producer_id"],
                                      "producer_epoch": open_txn["producer_epoch"]}]
    p = producer_of(doc, open_txn["producer_id"])
    (b,) = p["epoch_bumps"]
    assert b["marker_ts"] - b["txn_first_ts"] >= TIMEOUT_MS and p["txn_timeout_ms"] == TIMEOUT_MS
    assert b["why"].startswith("TIMEOUT: the coordinator aborted the transaction at offsets 2..4 ")
    assert b["why"].endswith(f"s after its first record (transaction.timeout.ms {TIMEOUT_MS})")
    assert (b["fencing"], p["fencing_events"], p["timeouts"]) == (False, 0, 1)
    ex = jdoc("explain", "--bootstrap", kafka, "--topic", topic, "--partition", "0", "--offset", "3")
    assert ex["transaction"]["aborted_by"] == "timeout" and "timed out" in ex["summary"]
    _, logs = tui(kafka, topic)
    (aborted,) = [r for r in logs[0] if r.cells[3] == "aborted"]
    assert aborted.cells[6] == "ABORT marker at 5 (the coordinator's abort: transaction timed out)"
    # Lag drains: nothing left to read past the aborted records and the marker.
    (row,) = jdoc("lag", "--bootstrap", kafka, "-t", topic, "-g", group)["groups"][0]["partitions"]
    assert (row["blocked"], row["records_behind"], row["open_transaction"]) == (0, 0, None)
    # The audit: the aborted records are not expected; a sink that took them holds phantoms at 2..4.
    audit = audit_offsets(kafka, topic, tmp_path, [(topic, 0, p) for p in (0, 2, 3, 4)])
    (part,) = audit["partitions"]
    assert part["expected_records"] == 1
    assert [(f["kind"], f["first_offset"], f["last_offset"]) for f in audit["findings"]] == [
        ("phantom_aborted", 2, 4)]
    # its cause: the transaction, aborted on its timeout, not fenced by a new instance
    (txn,) = audit["findings"][0]["cause"]["transactions"]
    assert (txn["outcome"], txn["fenced"]) == ("aborted", False)


_commit_group = commit_offset


def test_confluent_kafkas_timed_out_transaction_is_no_fencing(kafka, tmp_path):
    # Under transactions v1 the coordinator's ABORT one epoch up reads as fencing, unless it came the id's
    # transaction.timeout.ms after the transaction's first record: then it is the timeout's.
    topic = new_topic(kafka, 1)
    txid = f"{topic}-librdkafka"
    p = confluent(kafka, txid, **{"transaction.timeout.ms": 3000})
    confluent_txn(p, topic, 1)  # 0 data, COMMIT 1 at the data's epoch: v1
    p.begin_transaction()
    for _ in range(2):
        p.produce(topic, key=b"k", value=b"abandoned", partition=0)
    p.flush(30)  # 2..3, then the producer walks away
    deadline = time.monotonic() + 60
    while (doc := jdoc("log", "--bootstrap", kafka, "-t", topic, "-P", "0"))["last_stable_offset"] < 5:
        assert time.monotonic() < deadline, "the coordinator never aborted the timed-out transaction"
        time.sleep(1)
    (prod,) = doc["producers"]
    (b,) = prod["epoch_bumps"]
    assert (prod["protocol"], b["marker"], b["old_epoch"], b["new_epoch"]) == ("v1", "ABORT", 0, 1)
    assert b["why"].startswith("TIMEOUT: the coordinator aborted the transaction at offsets 2..3 ")
    assert (b["fencing"], prod["fencing_events"], prod["timeouts"]) == (False, 0, 1)
    (row,) = jdoc("producers", "--bootstrap", kafka, "--topic", topic)["producers"]
    assert (row["fencing_events"], row["transactional_id"]) == (0, txid)
    assert fencing_metric(kafka, topic, tmp_path) == {0: 0.0}
    audit = audit_offsets(kafka, topic, tmp_path, [(topic, 0, 0), (topic, 0, 2)])
    (finding,) = audit["findings"]
    assert (finding["kind"], finding["first_offset"]) == ("phantom_aborted", 2)
    assert [t["fenced"] for t in finding["cause"]["transactions"]] == [False]
    del p
