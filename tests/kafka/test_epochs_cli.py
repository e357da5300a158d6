"""Issue 9, cases 4-6 and what the sandbox broker cannot show, through the CLI against the scripted broker.

- case 4: transactions v2 (KIP-890): every COMMIT/ABORT marker one epoch up, the producer continuing at
  it (TransactionMetadata.prepareAbortOrCommit bumps, TransactionMarkerChannelManager writes the markers
  at the new epoch). Ordinary v2 markers are never FENCED; Kafka v1's fencing abort still is.
- case 5: a marker's producer_epoch in `log --format json` is the marker batch's own.
- case 6: compaction: the delete horizon (KIP-534) is no record time; sequence gaps over removed batches
  are no anomaly.
- DescribeProducers answers in `producers`, the KIP-664 hanging rule live, and `txns abort --yes`
  writing its marker with WriteTxnMarkers.
"""

from __future__ import annotations

import json
import time
from functools import partial

import pytest

from tests.kafkasim import KafkaSim
from tests.support.broker import epoch_timeline
from tests.support.helpers import eosctl

PID = 4000


cli = eosctl  # 200 columns: no cell wraps


def log_doc(sim: KafkaSim, *extra: str, topic: str = "t") -> dict:
    result = cli("log", "--bootstrap", sim.bootstrap, "--topic", topic, "--partition", "0",
                 "--format", "json", *extra)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


timeline = partial(epoch_timeline, wrapped=True)


def v2_log(sim: KafkaSim) -> None:
    """A transactions-v2 producer: commit, three aborts, then a transaction skipping to epoch 7."""
    p = sim.partition("t", 0)
    p.txn(PID, 0, 2)
    p.commit(PID, 1)
    for epoch in (1, 2, 3):
        p.txn(PID, epoch, 1, sequence=0)
        p.abort(PID, epoch + 1)
    p.txn(PID, 7, 1, sequence=0)
    p.commit(PID, 8)


# --- case 4 ----------------------------------------------------------------------------------------------

def test_log_labels_ordinary_v2_markers_without_fencing(kafka_sim: KafkaSim) -> None:
    v2_log(kafka_sim)
    text = cli("log", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--partition", "0", "--no-batches")
    assert text.exit_code == 0, text.output
    assert "FENCED" not in text.stdout
    rows = timeline(text.stdout)
    # The routine bumps counted in one row (the COMMITs, the aborts it wrote on after); the last ABORT and
    # the data three epochs up read alike as a take-over or as the id's own abort then transactions
    # elsewhere: one row saying both (the topic has no other partition to settle it).
    assert rows[0] == ("2", str(PID), "transactions v2: 2 commits and 2 aborts moved the epoch 0 -> 8 "
                                      "(routine, never fencing)")
    assert rows[1][:2] == ("8", str(PID)) and rows[1][2].startswith("epoch 3 -> 4 -> 7 (TAKEOVER?: a new "
                                                                      "instance took the id over")
    assert [r[0] for r in rows if r[0]] == ["2", "8"]  # (the long row wraps)
    (prod,) = log_doc(kafka_sim)["producers"]
    assert (prod["protocol"], prod["fencing_events"], prod["epochs"]) == ("v2", 0, [0, 1, 2, 3, 4, 7, 8])
    assert [b["fencing"] for b in prod["epoch_bumps"]] == [False] * 3
    assert (prod["commit_bumps"], prod["own_aborts"]) == (2, 2)


def test_producers_count_no_fencing_for_v2_aborts(kafka_sim: KafkaSim) -> None:
    # Only aborts (the three ordinary v2 aborts): the markers prove no protocol, so no fencing.
    p = kafka_sim.partition("t", 0)
    for epoch in (0, 1, 2):
        p.txn(PID, epoch, 1, sequence=0)
        p.abort(PID, epoch + 1)
    p.producer_rows = []  # DescribeProducers answers nobody: eosctl reads the log
    result = cli("producers", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["source"] == "log-scan"
    rows = [(r["producer_id"], r["epochs"], r["fencing_events"], r["zombie_writes"])
            for r in doc["producers"]]
    assert rows == [(PID, [0, 1, 2, 3], 0, 0)]


def test_kafka_v1_fencing_is_one_event_and_labelled(kafka_sim: KafkaSim) -> None:
    # Transactions v1 on Kafka: a commit at the data's epoch, then the zombie's open transaction aborted by
    # the coordinator at epoch 1 (prepareFenceProducerEpoch), the new instance at epoch 2.
    p = kafka_sim.partition("t", 0)
    p.txn(PID, 0, 2)
    p.commit(PID, 0)
    p.txn(PID, 0, 1)
    p.abort(PID, 1)
    p.txn(PID, 2, 1, sequence=0)
    p.commit(PID, 2)
    p.producer_rows = []
    text = cli("log", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--partition", "0", "--no-batches")
    (row,) = timeline(text.stdout)  # one event: the coordinator's ABORT and the new instance's data
    assert row[:2] == ("4", str(PID)) and row[2].startswith(
        "epoch 0 -> 1 -> 2 (FENCED: a new instance took the id over and the coordinator aborted the old "
        "one's "
        "transaction at offsets 3..3")
    result = cli("producers", "--bootstrap", kafka_sim.bootstrap, "--topic", "t")
    row = next(line for line in result.stdout.splitlines() if f" {PID} │" in line)
    assert [c.strip() for c in row.split("│")[1:-1]][-3:] == ["0,1,2", "1", "0"]  # epochs, fencing, zombies


def test_v2_fencing_abort_two_epochs_up_is_the_one_fencing(kafka_sim: KafkaSim) -> None:
    # A transactions-v2 cluster: InitProducerId of a new instance while epoch 1's transaction is open makes
    # the coordinator fence (epoch 2) and abort with the v2 bump (epoch 3); the new instance gets epoch 4.
    p = kafka_sim.partition("t", 0)
    p.txn(PID, 0, 1)
    p.commit(PID, 1)
    p.txn(PID, 1, 1, sequence=0)
    p.abort(PID, 3)
    p.txn(PID, 4, 1, sequence=0)
    p.commit(PID, 5)
    text = cli("log", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--partition", "0", "--no-batches")
    assert [event for _, _, event in timeline(text.stdout) if "FENCED" in event] == [
        "epoch 1 -> 3 -> 4 (FENCED: a new instance took the id over and the coordinator aborted the old "
        "one's "
        "transaction at offsets 2..2, two epochs up; the new instance wrote at epoch 4"]
    (prod,) = log_doc(kafka_sim)["producers"]
    assert (prod["protocol"], prod["fencing_events"]) == ("v2", 1)


# --- case 5 ----------------------------------------------------------------------------------------------

def test_abort_marker_epoch_is_the_marker_batch_epoch_in_every_window(kafka_sim: KafkaSim) -> None:
    # The zombie's transaction (offsets 0-1, epoch 0) aborted by the coordinator at the new epoch 1.
    p = kafka_sim.partition("t", 0)
    p.txn(PID, 0, 2)
    p.abort(PID, 1)
    p.txn(PID, 1, 1, sequence=0)
    p.commit(PID, 1)
    full = log_doc(kafka_sim)
    assert full["markers"] == [
        {"offset": 2, "type": "ABORT", "producer_id": PID, "producer_epoch": 1},
        {"offset": 4, "type": "COMMIT", "producer_id": PID, "producer_epoch": 1}]
    controls = [(b["base_offset"], b["producer_epoch"]) for b in full["batches"] if b["is_control"]]
    assert controls == [(2, 1), (4, 1)]
    markers = [(r["first"], r["producer_epoch"]) for r in full["ranges"] if r["kind"] == "MARKER"]
    assert markers == [(2, 1), (4, 1)]
    assert full["aborted_ranges"] == [{"first": 0, "last": 1, "producer_id": PID, "producer_epoch": 0}]
    text = cli("log", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--partition", "0", "--no-batches")
    txn_rows = [[c.strip() for c in line.split("│")[1:-1]] for line in text.stdout.splitlines()
                if line.startswith("│") and line.count("│") == 8]
    # pid, epoch (the data's), offsets, records, outcome, marker, marker epoch
    assert txn_rows == [[str(PID), "0", "0..1", "2", "ABORT", "2", "1"],
                        [str(PID), "1", "3..3", "1", "COMMIT", "4", "1"]]
    for window in (("--from", "2", "--to", "2"), ("--from", "0", "--to", "1"), ("--from", "1", "--to", "3")):
        doc = log_doc(kafka_sim, *window)
        abort = [m for m in doc["markers"] if m["type"] == "ABORT"]
        assert abort == [full["markers"][0]], window


# --- case 6 ----------------------------------------------------------------------------------------------

def test_lag_time_on_a_compacted_batch_is_its_records_time_not_the_delete_horizon(kafka_sim: KafkaSim):
    now = int(time.time() * 1000)
    written = now - 3_600_000
    p = kafka_sim.partition("c", 0)
    # The cleaner kept offsets 0 and 2 of a 4-record batch and set the delete horizon a day ahead.
    p.compacted([0, 2], last_offset=3, delete_horizon=True, timestamp=now + 86_400_000,
                record_timestamp=written)
    p.data(2, timestamp=now)
    kafka_sim.group("g", {("c", 0): 0})
    result = cli("lag", "--bootstrap", kafka_sim.bootstrap, "--group", "g", "--format", "json")
    assert result.exit_code == 0, result.output
    (part,) = json.loads(result.stdout)["groups"][0]["partitions"]
    assert (part["records_behind"], part["lag_to_lso"]) == (4, 6)
    taken = json.loads(result.stdout)["taken_ms"]
    assert part["time_lag_s"] == round((taken - written) / 1000, 3) >= 3600  # was 0: the horizon is ahead
    doc = log_doc(kafka_sim, topic="c")
    assert [(b["base_offset"], b["first_timestamp"], b["delete_horizon_ms"]) for b in doc["batches"]] == [
        (0, written, now + 86_400_000), (4, now, None)]


def test_sequence_gap_over_removed_batches_is_no_anomaly(kafka_sim: KafkaSim) -> None:
    p = kafka_sim.partition("t", 0)
    p.data(2, producer_id=PID, epoch=0, sequence=0)  # seq 0..1
    p.skip(3)  # the cleaner removed this producer's batch of offsets 2..4 (seq 2..4)
    p.data(1, producer_id=PID, epoch=0, sequence=5)
    p.data(1, producer_id=PID, epoch=0, sequence=9)  # seq 6..8 never written: a real gap
    text = cli("log", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--partition", "0", "--no-batches")
    assert timeline(text.stdout) == [("6", str(PID), "sequence gap at epoch 0: expected 6, got 9")]
    doc = log_doc(kafka_sim)
    assert doc["counts"]["HOLE"] == 3 and doc["producers"][0]["anomaly_total"] == 1


@pytest.mark.parametrize("described", [True, False], ids=["describe-producers", "log-scan"])
def test_producers_read_a_producer_id_rotation_as_one_session(kafka_sim: KafkaSim, described: bool) -> None:
    # Transactions v2 at epoch exhaustion (KAFKA-18660): TransactionCoordinator.endTransaction allocates
    # nextProducerId when TransactionMetadata.isEpochExhausted (>= 32766), the markers go out with the old
    # id at 32767 (prepareAbortOrCommit) and the transactional id continues as the new id at epoch 0
    # (prepareComplete); DescribeTransactions then names only the new id.
    old, new = PID, PID + 1
    p0, p1 = kafka_sim.partition("t", 0), kafka_sim.partition("t", 1)
    p0.txn(old, 32765, 1, sequence=0)
    p0.commit(old, 32766)
    p0.txn(old, 32766, 1, sequence=0)
    p0.commit(old, 32767)
    for p in (p0, p1):
        p.txn(new, 0, 1, sequence=0)
        p.commit(new, 1)
    kafka_sim.transaction("app-0", new, producer_epoch=1, state="CompleteCommit")
    if not described:
        p0.producer_rows = p1.producer_rows = []  # DescribeProducers answers nobody: eosctl reads the log
    result = cli("producers", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["source"] == ("describe-producers" if described else "log-scan")
    rows = [(r["partition"], r["producer_id"], r["transactional_id"], r["continues_producer_id"],
             r["fencing_events"], r["zombie_writes"]) for r in doc["producers"]]
    # The new id continues the old one in partition 1 too, where the old one never wrote.
    assert rows == [(0, old, "app-0", None, 0, 0), (0, new, "app-0", old, 0, 0), (1, new, "app-0", old, 0, 0)]
    text = cli("producers", "--bootstrap", kafka_sim.bootstrap, "--topic", "t").stdout
    assert text.count(f"{new} (continues {old})") == 2 and "FENCED" not in text
