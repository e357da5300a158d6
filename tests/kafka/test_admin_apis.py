"""The scripted broker's admin APIs through the CLI: DescribeProducers, List/DescribeTransactions and
WriteTxnMarkers (what the sandbox can't show: `producers` from the brokers' producer state, and
`txns abort --yes` writing a real marker that the log then shows)."""

from __future__ import annotations

import json
import time

from tests.kafkasim import KafkaSim
from tests.support.helpers import eosctl


def run(*args: str) -> tuple[int, dict]:
    result = eosctl(*args, "--format", "json", columns=None)
    return result.exit_code, json.loads(result.stdout) if result.exit_code in (0, 1) else result.stderr


def open_transaction(sim: KafkaSim) -> None:
    p = sim.partition("t", 0)
    p.data(3, producer_id=4, epoch=2)
    p.txn(9, 1, 2)  # offsets 3..4, no marker: the LSO stays at 3
    sim.transaction("tx-9", 9, producer_epoch=1, partitions=[("t", 0)],
                    start_ms=int(time.time() * 1000) - 3_600_000)


def test_producers_come_from_describe_producers(kafka_sim: KafkaSim) -> None:
    open_transaction(kafka_sim)
    code, doc = run("producers", "--bootstrap", kafka_sim.bootstrap, "--topic", "t")
    assert code == 0 and doc["source"] == "describe-producers"
    assert [(p["producer_id"], p["producer_epoch"], p["last_sequence"], p["last_timestamp_ms"],
             p["current_txn_start_offset"]) for p in doc["producers"]] == [
        (4, 2, 2, 1_700_000_000_002, None), (9, 1, 1, 1_700_000_000_001, 3)]


def test_txns_abort_writes_a_marker_that_the_log_then_shows(kafka_sim: KafkaSim) -> None:
    open_transaction(kafka_sim)
    code, plan = run("txns", "abort", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--partition", "0",
                     "--start-offset", "3", "--yes")
    assert code == 0
    keys = ("producer_id", "producer_epoch", "transactional_id", "lso", "hw", "aborted")
    assert {k: plan[k] for k in keys} == {"producer_id": 9, "producer_epoch": 1, "transactional_id": "tx-9",
                                          "lso": 3, "hw": 5, "aborted": True}
    code, log = run("log", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--partition", "0",
                    "--no-batches")
    assert code == 0
    assert (log["last_stable_offset"], log["high_watermark"]) == (6, 6)
    assert log["markers"] == [{"offset": 5, "type": "ABORT", "producer_id": 9, "producer_epoch": 1}]
    assert [(r["first"], r["last"], r["kind"]) for r in log["ranges"]] == [
        (0, 2, "DATA"), (3, 4, "ABORTED"), (5, 5, "MARKER")]
