""""Is it safe to abort?" answered by the abort dry run and `txns describe` (issue 32, item 2): whether the
coordinator still runs the transaction, when its timeout ends it (start + transaction.timeout.ms, as
TransactionCoordinator.abortTimedOutTransactions does), the producer's last write, and the groups it
blocks; durations in one style (a 900000 ms timeout is 15m00s everywhere)."""

from __future__ import annotations

import json
import time
from functools import partial

from tests.kafkasim import KafkaSim, ProducerRow
from tests.support.helpers import eosctl

PID = 6001


cli = partial(eosctl, columns=250)


def open_txn(sim: KafkaSim, last_write_ms: int) -> None:
    p = sim.partition("t", 0)
    p.data(3)
    p.txn(PID, 2, 2)
    p.producer_rows = [ProducerRow(PID, 2, 1, last_write_ms, current_txn_start_offset=3)]
    sim.group("readers", {("t", 0): 3}, state="Stable")
    sim.group("elsewhere", {("u", 0): 1}, state="Stable")


def test_a_transaction_its_coordinator_runs_is_left_to_its_timeout(kafka_sim: KafkaSim) -> None:
    now = int(time.time() * 1000)
    open_txn(kafka_sim, now - 1_000)
    kafka_sim.transaction("app-1", PID, producer_epoch=2, state="Ongoing", timeout_ms=900_000,
                          start_ms=now - 60_000, partitions=[("t", 0)])
    args = ["txns", "abort", "--bootstrap", kafka_sim.bootstrap, "-t", "t", "-P", "0", "--start-offset", "3"]
    doc = json.loads(cli(*args, "--format", "json").stdout)["safety"]
    assert (doc["safe"], doc["coordinator_state"], doc["tracked"], doc["timeout_ends_ms"],
            doc["last_write_ms"], doc["producer_writing"], doc["blocked"], doc["blocked_groups"]) == (
        "wait", "Ongoing", True, now + 840_000, now - 1_000, True, 2, [{"group": "readers", "committed": 3}])
    text = cli(*args).stdout
    assert "│ safe to abort?" in text
    assert "wait: its coordinator still runs it (Ongoing) and aborts it itself in 13m5" in text
    assert "(transaction.timeout.ms 15m00s)" in text
    assert "2 offsets beyond the LSO, for readers (at 3)" in text
    described = cli("txns", "describe", "--bootstrap", kafka_sim.bootstrap, "app-1").stdout
    assert "│ timeout" in described and "15m00s" in described and "900000" not in described
    assert "safe to abort? (t[0])" in described


def test_a_transaction_no_coordinator_runs_and_a_quiet_producer_is_safe(kafka_sim: KafkaSim) -> None:
    now = int(time.time() * 1000)
    open_txn(kafka_sim, now - 7_200_000)
    args = ["txns", "abort", "--bootstrap", kafka_sim.bootstrap, "-t", "t", "-P", "0", "--start-offset", "3"]
    doc = json.loads(cli(*args, "--format", "json").stdout)["safety"]
    assert (doc["safe"], doc["coordinator_state"], doc["tracked"], doc["timeout_ends_ms"],
            doc["producer_writing"]) == ("yes", None, False, None, False)
    text = cli(*args).stdout
    assert "yes: no coordinator runs it (nothing will end it but an ABORT marker) and its producer is quiet" \
        in text
    assert "(2h00m ago)" in text


def test_hanging_names_a_young_transaction_that_blocks_the_lso_apart(kafka_sim: KafkaSim) -> None:
    # Issue 32, item 3: "No hanging transactions" while lag stalls. Not hanging (exit 0), but named.
    now = int(time.time() * 1000)
    p = kafka_sim.partition("t", 0)
    p.data(3, timestamp=now)
    p.txn(PID, 2, 2, timestamp=now)
    kafka_sim.transaction("app-1", PID, producer_epoch=2, state="Ongoing", timeout_ms=900_000,
                          start_ms=now - 5_000, partitions=[("t", 0)])
    result = cli("txns", "hanging", "--bootstrap", kafka_sim.bootstrap, "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["hanging"] == []
    assert [(b["topic"], b["partition"], b["producer_id"], b["transactional_id"], b["first_offset"], b["lso"],
             b["blocked"], b["coordinator_state"]) for b in doc["blocking"]] == [
        ("t", 0, PID, "app-1", 3, 3, 2, "Ongoing")]
    text = cli("txns", "hanging", "--bootstrap", kafka_sim.bootstrap)
    assert text.exit_code == 0
    lines = text.stdout.splitlines()
    assert lines[0].startswith("no hanging transactions (older than 15m00s) in 1 partitions of t")
    assert lines[1].rstrip() == "Open transactions blocking an LSO now (1, not hanging: younger than 15m00s)"
    assert any(line.startswith("│ t     │         0 │        6001 │     2 │ app-1 ") for line in lines)
