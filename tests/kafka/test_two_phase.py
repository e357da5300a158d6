"""Two-phase commit transactions (KIP-939) on the scripted broker: recognized, never "safe to abort",
never hanging by their age, and `txns abort --yes` refuses them without the explicit override.

What is scripted is Apache Kafka's coordinator: InitProducerId with enable2Pc stores the transaction
timeout as Integer.MAX_VALUE (TransactionCoordinator.handleInitProducerId: ``resolvedTxnTimeoutMs = if
(enableTwoPCFlag) Int.MaxValue``), which DescribeTransactions reports as TransactionTimeoutMs 2147483647,
and it never times such a transaction out (TransactionMetadata.isDistributedTwoPhaseCommitTxn,
TransactionStateManager.timedOutTransactions: "Do not apply timeout to distributed two phase commit
transactions"); the transaction stays Ongoing until its external coordinator completes it.
"""

from __future__ import annotations

import json
import time
from functools import partial

from tests.kafkasim import KafkaSim, ProducerRow
from tests.support.helpers import eosctl

PID = 7001
TXID = "payments-2pc"
DAY_MS = 86_400_000

cli = partial(eosctl, columns=250)


def prepared(sim: KafkaSim, now: int) -> None:
    """t[0]: 3 committed records, then the 2PC transaction's 2 records (LSO 3, HW 5), open 40 days by its
    coordinator's clock (far past Kafka's 15-minute transaction.max.timeout.ms) with a quiet producer."""
    p = sim.partition("t", 0)
    p.data(3)
    p.txn(PID, 4, 2)
    p.producer_rows = [ProducerRow(PID, 4, 1, now - 40 * DAY_MS, current_txn_start_offset=3)]
    sim.group("readers", {("t", 0): 3}, state="Stable")
    sim.transaction(TXID, PID, producer_epoch=4, state="Ongoing", timeout_ms=2**31 - 1,
                    start_ms=now - 40 * DAY_MS, partitions=[("t", 0)])


def markers_written(sim: KafkaSim) -> int:
    return sum(1 for _, name, _ in sim.requests if name == "WriteTxnMarkers")


def test_a_two_phase_transaction_is_never_safe_to_abort_and_abort_refuses_it(kafka_sim: KafkaSim) -> None:
    now = int(time.time() * 1000)
    prepared(kafka_sim, now)
    args = ["txns", "abort", "--bootstrap", kafka_sim.bootstrap, "-t", "t", "-P", "0", "--start-offset", "3"]
    dry = json.loads(cli(*args, "--format", "json").stdout)
    assert (dry["two_phase"], dry["dry_run"], dry["transactional_id"]) == (True, True, TXID)
    safety = dry["safety"]
    assert (safety["safe"], safety["two_phase"], safety["tracked"], safety["timeout_ends_ms"]) == (
        "no", True, True, None)
    text = cli(*args).stdout
    assert "no: a two-phase commit transaction (KIP-939): its external coordinator decides whether it " \
           "commits" in text
    assert "never (two-phase commit, KIP-939: its external coordinator ends it)" in text
    assert "24d" not in text  # Integer.MAX_VALUE ms is no deadline
    assert text.strip().splitlines()[-1] == (
        "dry run: nothing changed; a two-phase commit transaction (KIP-939): --yes is refused unless its "
        "external coordinator decided to abort it (--two-phase-decided-abort)")

    refused = cli(*args, "--yes")
    assert refused.exit_code == 2, refused.output
    assert refused.stderr.strip() == (
        f"eosctl: error: not aborted: {TXID} runs a two-phase commit transaction (KIP-939: its coordinator's "
        "timeout is Integer.MAX_VALUE), whose outcome its external coordinator decides; aborting it here may "
        "undo what the other systems committed. Ask that coordinator to complete it "
        "(KafkaProducer.completeTransaction), or add --two-phase-decided-abort once it decided to abort it")
    assert markers_written(kafka_sim) == 0

    done = cli(*args, "--yes", "--two-phase-decided-abort", "--format", "json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["aborted"] is True
    assert markers_written(kafka_sim) == 1


def test_an_old_two_phase_transaction_blocks_but_is_not_hanging(kafka_sim: KafkaSim) -> None:
    now = int(time.time() * 1000)
    prepared(kafka_sim, now)
    result = cli("txns", "hanging", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--max-age", "1s",
                 "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["hanging"] == []
    assert [(b["partition"], b["producer_id"], b["transactional_id"], b["two_phase"], b["rules"])
            for b in doc["blocking"]] == [(0, PID, TXID, True, ["lso"])]

    described = json.loads(cli("txns", "describe", "--bootstrap", kafka_sim.bootstrap, TXID,
                               "--format", "json").stdout)
    assert (described["two_phase"], described["timeout_ms"], described["state"]) == (
        True, 2**31 - 1, "Ongoing")
    assert described["safety"][0]["safe"] == "no"
    text = cli("txns", "describe", "--bootstrap", kafka_sim.bootstrap, TXID).stdout
    assert "none (two-phase commit)" in text and "yes (KIP-939): an external coordinator decides" in text


def test_an_ordinary_transaction_past_its_timeout_is_still_hanging(kafka_sim: KafkaSim) -> None:
    """The same transaction with an ordinary timeout: the LSO rule counts it (what the 2PC one escapes)."""
    now = int(time.time() * 1000)
    prepared(kafka_sim, now)
    kafka_sim.transaction(TXID, PID, producer_epoch=4, state="Ongoing", timeout_ms=900_000,
                          start_ms=now - 40 * DAY_MS, partitions=[("t", 0)])
    result = cli("txns", "hanging", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--max-age", "1s",
                 "--format", "json")
    assert result.exit_code == 1, result.output
    (h,) = json.loads(result.stdout)["hanging"]
    assert (h["producer_id"], h["two_phase"], h["rules"]) == (PID, False, ["lso"])


def test_fence_refuses_a_two_phase_transaction_too(kafka_sim: KafkaSim) -> None:
    now = int(time.time() * 1000)
    prepared(kafka_sim, now)
    dry = json.loads(cli("txns", "fence", "--bootstrap", kafka_sim.bootstrap, TXID,
                         "--format", "json").stdout)
    assert (dry["two_phase"], dry["prefer"], [p["open_records"] for p in dry["partitions"]]) == (
        True, "fence", [2])
    refused = cli("txns", "fence", "--bootstrap", kafka_sim.bootstrap, TXID, "--yes")
    assert refused.exit_code == 2, refused.output
    assert refused.stderr.startswith(f"eosctl: error: not fenced: {TXID} runs a two-phase commit transaction")
    assert not any(name == "InitProducerId" for _, name, _ in kafka_sim.requests)
