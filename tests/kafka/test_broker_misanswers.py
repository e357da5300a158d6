"""Issue 19: no verdict from a broker's wrong answer, through the CLI against the scripted broker's
injections of what Tansu 0.6.0 and real clients were measured doing (tests/kafkasim/server.py names each).

- ListOffsets contradicting Fetch (tansu_list_offsets): `lag`, `txns hanging`, `log` and `audit` use what
  a read_committed consumer is served (the Fetch's offsets), name the wrong answer, and never pass;
- a Fetch at max_wait_ms=0 answered with nothing: eosctl waits a little, as consumers do;
- transaction ages from the coordinator or the broker's clock, never from producer-set timestamps alone;
- a marker's timestamp is not a producer's last write.
"""

from __future__ import annotations

import json
import time
from functools import partial
from pathlib import Path

import duckdb
import pytest

from eosctl.cluster import logscan
from tests.kafkasim import KafkaSim, tansu_list_offsets
from tests.support.helpers import eosctl

PID = 7
HOUR_MS = 3_600_000


cli = partial(eosctl, columns=240)


def watch_once(sim: KafkaSim):
    return cli("lag", "--bootstrap", sim.bootstrap, "--format", "json", "--watch", "1", "--count", "1")


def blocked_partition(sim: KafkaSim, *, timestamp: int | None = None) -> None:
    """t-0: ten committed records (one batch), then producer PID's transaction of five records left open
    at offset 10: HW 15, LSO 10. Tansu's ListOffsets answers 11 (the last batch's base + 1) and 0."""
    now = int(time.time() * 1000)
    p = sim.partition("t", 0)
    p.data(10, timestamp=now)
    p.txn(PID, 0, 5, timestamp=now if timestamp is None else timestamp)
    p.producer_rows = []  # DescribeProducers returns nothing (as noida-db's; Tansu has none)


def lie_about_offsets(sim: KafkaSim) -> None:
    sim.inject("list_offsets", "t", 0, offset=tansu_list_offsets, times=None)


LIE = ("the broker disagrees with itself on t-0: ListOffsets answers high watermark 11, but a Fetch already "
       "showed 15; ListOffsets answers LSO 0, but a Fetch already showed 10: ListOffsets is wrong (these "
       "offsets never go back); a read_committed consumer is served the Fetch's")


# --- ListOffsets contradicting Fetch ----------------------------------------------------------------


def test_lag_uses_the_offsets_a_consumer_is_served_and_never_says_ok(kafka_sim: KafkaSim) -> None:
    blocked_partition(kafka_sim)
    lie_about_offsets(kafka_sim)
    kafka_sim.group("billing", {("t", 0): 5}, state="Stable")
    result = watch_once(kafka_sim)
    assert result.exit_code == 0, result.output
    p = json.loads(result.stdout)["groups"][0]["partitions"][0]
    # Trusting ListOffsets gave lag 0 (LSO 0) and status OK for a consumer blocked behind PID's transaction.
    assert (p["lso"], p["hw"], p["lag_to_lso"], p["records_behind"], p["blocked"]) == (10, 15, 5, 5, 5)
    assert p["open_transaction"]["producer_id"] == PID and p["open_transaction"]["first_offset"] == 10
    assert (p["status"], p["cause"], p["offsets_warning"]) == ("ERR", LIE, LIE)
    # A commit inside the open transaction's offsets, above ListOffsets' 11: no "topic recreated?" blame.
    kafka_sim.group("shipping", {("t", 0): 12}, state="Stable")
    doc = json.loads(cli("lag", "--bootstrap", kafka_sim.bootstrap, "--group", "shipping", "--format",
                         "json").stdout)
    [p] = doc["groups"][0]["partitions"]
    assert (p["committed"], p["hw"], p["error"], p["lag_to_lso"]) == (12, 15, None, 0)


def test_txns_hanging_finds_the_open_transaction_the_lie_hid(kafka_sim: KafkaSim) -> None:
    blocked_partition(kafka_sim)
    lie_about_offsets(kafka_sim)
    result = cli("txns", "hanging", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--max-age", "0",
                 "--format", "json")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    found = [(h["producer_id"], h["first_offset"], h["lso"], h["hw"], h["counted"]) for h in doc["hanging"]]
    assert found == [(PID, 10, 10, 15, True)]
    assert doc["offsets_disagreements"] == [LIE]


def test_txns_hanging_never_says_none_on_offsets_that_disagree(kafka_sim: KafkaSim) -> None:
    p = kafka_sim.partition("t", 0)
    p.data(10)
    p.data(5)  # nothing open; ListOffsets still answers 11 where the HW is 15
    lie_about_offsets(kafka_sim)
    result = cli("txns", "hanging", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--max-age", "0")
    assert result.exit_code == 2
    assert "no hanging transactions" not in result.stdout
    assert result.stderr == (
        "eosctl: error: cannot rule out hanging transactions: the broker disagrees with itself on t-0: "
        "ListOffsets answers high watermark 11, but a Fetch already showed 15; ListOffsets answers LSO 11, "
        "but a Fetch already showed 15: ListOffsets is wrong (these offsets never go back); a read_committed "
        "consumer is served the Fetch's\n")


def test_log_names_the_wrong_listoffsets_answer(kafka_sim: KafkaSim) -> None:
    blocked_partition(kafka_sim)
    lie_about_offsets(kafka_sim)
    result = cli("log", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--partition", "0", "--format",
                 "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert (doc["high_watermark"], doc["last_stable_offset"]) == (15, 10)
    assert doc["warnings"] == [LIE, "the log agrees with the Fetch's LSO 10, not with ListOffsets' 0: the "
                                    "broker's ListOffsets answer is wrong"]


def test_a_listoffsets_beyond_the_log_is_named_and_the_log_read_to_its_real_end(kafka_sim: KafkaSim) -> None:
    """ListOffsets latest 20 where the log ends at 15: the Fetch there is OFFSET_OUT_OF_RANGE; one at the
    log start carries the real offsets."""
    blocked_partition(kafka_sim)
    kafka_sim.inject("list_offsets", "t", 0, times=None,
                     offset=lambda p, ts, iso: p.log_start if ts == -2 else p.high_watermark + 5)
    result = cli("log", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--partition", "0", "--format",
                 "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert (doc["high_watermark"], doc["last_stable_offset"]) == (15, 10)
    assert [(r["first"], r["last"], r["kind"]) for r in doc["ranges"]] == [(0, 9, "DATA"), (10, 14, "OPEN")]
    assert doc["warnings"][0] == (
        "the broker disagrees with itself on t-0: a Fetch shows high watermark 15, after ListOffsets "
        "answered 20; a Fetch shows LSO 10, after ListOffsets answered 20: one of its ListOffsets or Fetch "
        "answers is wrong (these offsets never go back); a read_committed consumer is served the Fetch's")


def sink(path: Path, offsets: list[int]) -> Path:
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE orders_sink (src_topic VARCHAR, src_partition INTEGER, src_offset BIGINT)")
        con.executemany("INSERT INTO orders_sink VALUES ('t', 0, ?)", [(o,) for o in offsets])
    return path


def audit(sim: KafkaSim, path: Path):
    return cli("audit", "--bootstrap", sim.bootstrap, "--topic", "t", "--sink-duckdb", str(path),
               "--sink-table", "orders_sink", "--engine", "local", "--format", "json")


def test_audit_refuses_on_offsets_the_broker_contradicts(kafka_sim: KafkaSim, tmp_path: Path) -> None:
    blocked_partition(kafka_sim)
    db = sink(tmp_path / "sink.duckdb", [0, 1, 2, 3, 5, 6, 7, 8, 9])  # offset 4 is missing
    honest = audit(kafka_sim, db)
    assert honest.exit_code == 1, honest.output
    findings = json.loads(honest.stdout)["findings"]
    assert [(f["kind"], f["first_offset"], f["last_offset"]) for f in findings] == [("gap", 4, 4)]
    lie_about_offsets(kafka_sim)
    lied = audit(kafka_sim, db)
    # Trusting ListOffsets' LSO 0 made expected 0 and printed PASS over the gap.
    assert lied.exit_code == 2
    assert "PASS" not in lied.stdout
    assert lied.stderr == f"eosctl: error: cannot audit t-0: {LIE}\n"


def test_ledger_gives_no_clean_bill_on_offsets_the_broker_contradicts(kafka_sim: KafkaSim,
                                                                      tmp_path: Path) -> None:
    blocked_partition(kafka_sim)
    kafka_sim.group("g", {("t", 0): 10})
    db = sink(tmp_path / "sink.duckdb", list(range(10)))

    def ledger():
        return cli("ledger", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--group", "g",
                   "--sink-duckdb", str(db), "--sink-table", "orders_sink")

    assert ledger().exit_code == 0
    lie_about_offsets(kafka_sim)
    lied = ledger()
    assert lied.exit_code == 2, lied.output
    assert lied.stderr == f"eosctl: error: cannot vouch for the ledger: {LIE}\n"


# --- max_wait_ms -------------------------------------------------------------------------------------


def test_a_broker_that_answers_nothing_without_a_wait_is_read(kafka_sim: KafkaSim) -> None:
    p = kafka_sim.partition("t", 0)
    p.data(3)
    p.txn(PID, 0, 2)
    p.commit(PID, 0)
    kafka_sim.inject("fetch", empty_without_wait=True, probe=None, times=None)
    started = time.monotonic()
    result = cli("log", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--partition", "0", "--format",
                 "json")
    assert result.exit_code == 0, result.output
    assert [(r["first"], r["last"], r["kind"]) for r in json.loads(result.stdout)["ranges"]] == [
        (0, 4, "DATA"), (5, 5, "MARKER")]
    # it never waited for the deadline
    assert time.monotonic() - started < logscan.RETRY_DEADLINE_S


def test_a_broker_that_never_answers_is_one_line_saying_what_was_tried(
        kafka_sim: KafkaSim, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logscan, "RETRY_DEADLINE_S", 0.5)
    kafka_sim.partition("t", 0).data(3)
    kafka_sim.inject("fetch", "t", 0, drop=True, times=None)
    result = cli("log", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--partition", "0")
    assert result.exit_code == 2
    assert result.stderr == ("eosctl: error: cannot read t-0 at offset 0: the broker left it out of every "
                             "answer (Fetch with min_bytes 0 and max_wait_ms 20, 100, 500, each retried) for "
                             "0s; retry later\n")


# --- transaction ages --------------------------------------------------------------------------------


def hanging(sim: KafkaSim, max_age: str):
    return cli("txns", "hanging", "--bootstrap", sim.bootstrap, "--topic", "t", "--max-age", max_age,
               "--format", "json")


def test_the_coordinators_start_time_dates_a_transaction_not_its_records(kafka_sim: KafkaSim) -> None:
    """An aiokafka transaction whose records carry two-hour-old timestamps, begun 17 minutes ago."""
    now = int(time.time() * 1000)
    blocked_partition(kafka_sim, timestamp=now - 2 * HOUR_MS)
    kafka_sim.transaction("replayer", PID, state="Ongoing", start_ms=now - 17 * 60_000,
                          partitions=[("t", 0)])
    young = hanging(kafka_sim, "30m")
    assert young.exit_code == 0, young.output
    assert json.loads(young.stdout)["hanging"] == []
    old = hanging(kafka_sim, "15m")
    assert old.exit_code == 1, old.output
    [h] = json.loads(old.stdout)["hanging"]
    assert (h["age_source"], h["counted"], h["transactional_id"]) == ("coordinator", True, "replayer")
    assert 17 * 60 <= h["age_s"] < 18 * 60
    kafka_sim.group("billing", {("t", 0): 10})
    lag = watch_once(kafka_sim)
    txn = json.loads(lag.stdout)["groups"][0]["partitions"][0]["open_transaction"]
    assert txn["age_source"] == "coordinator" and 17 * 60 <= txn["age_s"] < 18 * 60
    assert json.loads(lag.stdout)["groups"][0]["partitions"][0]["cause"].endswith(f"for {txn['age_s']:.0f}s")


def test_producer_timestamps_alone_never_make_hanging_exit_1(kafka_sim: KafkaSim) -> None:
    """No coordinator knows the producer id (a broker without ListTransactions, or one that forgot it on
    restart): only the records' CreateTime dates the transaction."""
    blocked_partition(kafka_sim, timestamp=int(time.time() * 1000) - 2 * HOUR_MS)
    result = hanging(kafka_sim, "30m")
    assert result.exit_code == 0, result.output
    [h] = json.loads(result.stdout)["hanging"]
    assert (h["producer_id"], h["age_source"], h["counted"]) == (PID, "producer-timestamp", False)
    assert 2 * 3600 <= h["age_s"] < 2 * 3600 + 60
    text = cli("txns", "hanging", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--max-age", "30m")
    assert text.exit_code == 0
    assert "Open transactions dated only by producer timestamps (1)" in text.stdout
    assert "coordinator state" in text.stdout
    assert "2h00m*" in text.stdout
    assert "not counted as hanging" in " ".join(text.stdout.split())
    # With --max-age 0 any age is enough: the open transaction counts whatever its timestamps say.
    assert hanging(kafka_sim, "0").exit_code == 1


def test_a_snapshot_does_not_count_what_producer_timestamps_alone_date(kafka_sim: KafkaSim,
                                                                       tmp_path: Path) -> None:
    blocked_partition(kafka_sim, timestamp=int(time.time() * 1000) - 2 * HOUR_MS)
    result = cli("snapshot", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--out",
                 str(tmp_path / "s.duckdb"))
    assert result.exit_code == 0, result.output
    assert ("hanging       ok (0 hanging (open longer than 15m00s), 1 older only by producer timestamps, "
            "0 younger open transactions recorded)") in result.stdout


def test_a_logappendtime_topic_is_dated_by_the_brokers_clock(kafka_sim: KafkaSim) -> None:
    """The producer's clock runs an hour ahead; the broker appended the batch 20 minutes ago."""
    now = int(time.time() * 1000)
    p = kafka_sim.partition("t", 0)
    p.log_append_time = True
    p.data(10, append_time=now - 30 * 60_000)
    p.txn(PID, 0, 5, timestamp=now + HOUR_MS, append_time=now - 20 * 60_000)
    p.producer_rows = []
    result = hanging(kafka_sim, "15m")
    assert result.exit_code == 1, result.output
    [h] = json.loads(result.stdout)["hanging"]
    assert (h["age_source"], h["counted"]) == ("log-append-time", True)
    assert 20 * 60 <= h["age_s"] < 21 * 60


# --- smaller -----------------------------------------------------------------------------------------


def test_last_timestamp_is_the_last_data_batch_not_the_marker(kafka_sim: KafkaSim) -> None:
    p = kafka_sim.partition("t", 0)
    p.txn(PID, 0, 3, timestamp=1_700_000_000_000)  # records at ...000, ...001, ...002
    p.commit(PID, 0, timestamp=1_700_000_011_000)
    p.producer_rows = []
    result = cli("producers", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--format", "json")
    assert result.exit_code == 0, result.output
    assert [r["last_timestamp_ms"] for r in json.loads(result.stdout)["producers"]] == [1_700_000_000_002]
    log = cli("log", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--partition", "0", "--format",
              "json")
    assert [pr["last_timestamp"] for pr in json.loads(log.stdout)["producers"]] == [1_700_000_000_002]
