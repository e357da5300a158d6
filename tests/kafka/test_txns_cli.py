"""What the sandbox cannot show, through the CLI against the scripted broker: `producers` from
DescribeProducers answers, `txns hanging` by the KIP-664 rule, and `txns abort --yes` writing its marker.

The KIP-664 rule is Kafka's own (tools/.../TransactionsCommand.java, FindHangingCommand): a producer with
a current transaction whose last write is older than the maximum transaction timeout is hanging unless
its transactional id's DescribeTransactions lists the partition, whatever its state or epoch.
"""

from __future__ import annotations

import json
import time
from functools import partial

from tests.kafkasim import KafkaSim, ProducerRow
from tests.support.helpers import eosctl

PID = 5001


cli = partial(eosctl, columns=220)


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.split("│")[1:-1]]


def table_rows(text: str) -> list[list[str]]:
    return [cells(line) for line in text.splitlines() if line.startswith("│")]


def test_producers_from_describe_producers(kafka_sim: KafkaSim) -> None:
    p0, p1 = kafka_sim.partition("t", 0), kafka_sim.partition("t", 1, leader=1)
    p0.data(1)
    p0.producer_rows = [ProducerRow(PID, 3, 41, 1_700_000_000_000, coordinator_epoch=5,
                                    current_txn_start_offset=-1),
                        ProducerRow(5002, 0, 7, 1_700_000_360_000, coordinator_epoch=-1,
                                    current_txn_start_offset=0)]
    p1.data(1)
    p1.producer_rows = [ProducerRow(5003, 1, 0, 1_700_000_000_000)]
    result = cli("producers", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert (doc["source"], doc["note"]) == ("describe-producers",
                                            "from the brokers' producer state (DescribeProducers), epochs "
                                            "and fencing from the log (whole log of each partition)")
    keys = ("partition", "producer_id", "producer_epoch", "last_sequence", "last_timestamp_ms",
            "current_txn_start_offset", "coordinator_epoch")
    assert [tuple(r[k] for k in keys) for r in doc["producers"]] == [
        (0, PID, 3, 41, 1_700_000_000_000, None, 5), (0, 5002, 0, 7, 1_700_000_360_000, 0, -1),
        (1, 5003, 1, 0, 1_700_000_000_000, None, 0)]
    assert sum(1 for _, api, _ in kafka_sim.requests if api == "DescribeProducers") == 2  # one per leader
    text = cli("producers", "--bootstrap", kafka_sim.bootstrap, "--topic", "t")
    header = ("┃ partition ┃ producer id ┃ transactional id ┃ epoch ┃ last sequence ┃ last timestamp (UTC) ┃ "
              "open txn from ┃ epochs ┃ fencing ┃ zombie writes ┃")
    assert header in text.stdout  # the log adds epochs and fencing (none here: it holds no batch of theirs)
    assert table_rows(text.stdout) == [
        ["0", str(PID), "-", "3", "41", "2023-11-14 22:13:20", "-", "", "0", "0"],
        ["0", "5002", "-", "0", "7", "2023-11-14 22:19:20", "0", "", "0", "0"],
        ["1", "5003", "-", "1", "0", "2023-11-14 22:13:20", "-", "", "0", "0"]]


def stale_open_transaction(sim: KafkaSim) -> int:
    """Partition t-0: committed data, then producer PID's transaction from offset 3, written just now (the
    LSO rule's age stays 0) but whose last write DescribeProducers reports two hours old."""
    now = int(time.time() * 1000)
    p = sim.partition("t", 0)
    p.data(3, timestamp=now)
    p.txn(PID, 2, 2, timestamp=now)
    p.producer_rows = [ProducerRow(PID, 2, 1, now - 7_200_000, current_txn_start_offset=3)]
    return now


def hanging(sim: KafkaSim) -> tuple[int, list[dict]]:
    result = cli("txns", "hanging", "--bootstrap", sim.bootstrap, "--topic", "t", "--max-age", "30m",
                 "--format", "json")
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)["hanging"]


def test_kip664_no_transactional_id_is_hanging(kafka_sim: KafkaSim) -> None:
    stale_open_transaction(kafka_sim)
    code, found = hanging(kafka_sim)
    assert code == 1
    assert [(h["partition"], h["producer_id"], h["producer_epoch"], h["first_offset"], h["rules"], h["lso"],
             h["hw"], h["blocked"], h["transactional_id"]) for h in found] == [
        (0, PID, 2, 3, ["kip664"], 3, 5, 2, None)]
    assert found[0]["age_s"] >= 7200


def test_kip664_coordinator_listing_the_partition_is_not_hanging_whatever_its_epoch(kafka_sim: KafkaSim):
    # Transactions v2: EndTxn already bumped the coordinator's epoch to 3 while the markers are pending.
    stale_open_transaction(kafka_sim)
    kafka_sim.transaction("app-1", PID, producer_epoch=3, state="PrepareCommit", partitions=[("t", 0)])
    code, found = hanging(kafka_sim)
    assert (code, found) == (0, [])
    text = cli("txns", "hanging", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--max-age", "30m")
    assert text.stdout.splitlines()[0] == ("no hanging transactions (older than 30m00s) in 1 partitions of "
                                           "t; DescribeProducers returned 1 producers")
    # Not hanging, but it holds the LSO now (issue 32): named apart, exit 0.
    assert text.stdout.splitlines()[1].startswith("Open transactions blocking an LSO now (1, not hanging")


def test_kip664_coordinator_without_the_partition_is_hanging(kafka_sim: KafkaSim) -> None:
    stale_open_transaction(kafka_sim)
    kafka_sim.transaction("app-1", PID, producer_epoch=2, state="Ongoing", partitions=[("other", 0)])
    code, found = hanging(kafka_sim)
    assert code == 1
    assert [(h["producer_id"], h["first_offset"], h["rules"], h["transactional_id"], h["coordinator_state"])
            for h in found] == [(PID, 3, ["kip664"], "app-1", "Ongoing")]


def test_txns_abort_writes_the_marker_and_the_log_shows_it(kafka_sim: KafkaSim) -> None:
    p = kafka_sim.partition("t", 0)
    p.data(3)
    p.txn(PID, 2, 2)  # open since offset 3, no coordinator knows it: hanging on any max-age
    p.producer_rows = [ProducerRow(PID, 2, 1, 1_700_000_000_000, coordinator_epoch=4,
                                   current_txn_start_offset=3)]
    args = ["txns", "abort", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--partition", "0",
            "--start-offset", "3"]
    dry = cli(*args)
    assert dry.exit_code == 0 and dry.stdout.splitlines()[-1] == (
        "dry run: nothing changed; add --yes to write the ABORT marker")
    assert p.high_watermark == 5 and not any(api == "WriteTxnMarkers" for _, api, _ in kafka_sim.requests)
    p.producer_rows = None  # from here the broker's producer state follows its log, as Kafka's does
    done = cli(*args, "--yes")
    assert done.exit_code == 0, done.output
    assert done.stdout.splitlines()[-1] == f"aborted: ABORT marker written for producer {PID} epoch 2 on t[0]"
    assert sum(1 for _, api, _ in kafka_sim.requests if api == "WriteTxnMarkers") == 1
    result = cli("log", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--partition", "0", "--format",
                 "json")
    doc = json.loads(result.stdout)
    assert (doc["last_stable_offset"], doc["high_watermark"]) == (6, 6)
    assert doc["markers"] == [{"offset": 5, "type": "ABORT", "producer_id": PID, "producer_epoch": 2}]
    assert doc["aborted_ranges"] == [{"first": 3, "last": 4, "producer_id": PID, "producer_epoch": 2}]
    control = [b for b in doc["batches"] if b["is_control"]]
    assert [(b["base_offset"], b["producer_id"], b["producer_epoch"], b["marker"]) for b in control] == [
        (5, PID, 2, "ABORT")]
    code, found = hanging(kafka_sim)
    assert (code, found) == (0, [])


def _open_txn_to_abort(kafka_sim: KafkaSim) -> list[str]:
    p = kafka_sim.partition("t", 0)
    p.data(3)
    p.txn(PID, 2, 2)
    return ["txns", "abort", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--partition", "0",
            "--start-offset", "3"]


def test_txns_abort_works_whatever_api_keys_the_broker_lists(kafka_sim: KafkaSim) -> None:
    """Apache Kafka 4.4 lists API key 93, which kafka-python 3's ApiKey enum lacks (its api_versions() raised
    ValueError); newer brokers will list more."""
    kafka_sim.extra_api_keys.update({93: (0, 0), 94: (0, 1), 1000: (0, 3)})
    args = _open_txn_to_abort(kafka_sim)
    dry = cli(*args, "--format", "json")
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.stdout)["supported"] is True
    done = cli(*args, "--yes")
    assert done.exit_code == 0, done.output
    assert done.stdout.splitlines()[-1] == f"aborted: ABORT marker written for producer {PID} epoch 2 on t[0]"


def test_abort_yes_is_refused_where_the_broker_lacks_the_api(kafka_sim: KafkaSim) -> None:
    kafka_sim.unlisted_api_keys.add(27)  # WriteTxnMarkers
    args = _open_txn_to_abort(kafka_sim)
    dry = cli(*args)
    assert dry.exit_code == 0, dry.output
    assert dry.stdout.splitlines()[-1] == (
        "dry run: nothing changed; this broker has no WriteTxnMarkers API, so --yes would be refused")
    result = cli(*args, "--yes")
    assert result.exit_code == 2
    assert result.stderr == ("eosctl: error: this broker does not support aborting transactions "
                             "(no WriteTxnMarkers API); nothing was changed\n")
    assert not any(api == "WriteTxnMarkers" for _, api, _ in kafka_sim.requests)
