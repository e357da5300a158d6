"""`txns`, `producers` and `lag` against the reference pipeline run with a hanging transaction."""

from __future__ import annotations

import json
import re
import socket
from functools import partial
from pathlib import Path

import pytest

from tests.support import helpers

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def run(cluster, tmp_path_factory):
    """One pipeline run for the module: manifest and config path."""
    import uuid

    from eosctl.sandbox.pipeline import run_pipeline

    prefix = "t" + uuid.uuid4().hex[:10]
    workdir = tmp_path_factory.mktemp("txnslag")
    manifest = run_pipeline(cluster, prefix, workdir, faults=["hanging"], records=60)
    return manifest, str(workdir / "eosctl.toml")


eosctl = partial(helpers.eosctl, columns=None)


def _lag_json(config: str, *args: str) -> dict:
    result = eosctl("lag", "-c", config, "--format", "json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_hanging_transaction_is_found_and_exits_1(run):
    manifest, config = run
    h = manifest["hanging"][0]
    result = eosctl("txns", "hanging", "-c", config, "--max-age", "0")
    assert result.exit_code == 1, result.output
    # The hint works copied as printed: it names the config and pipeline it was run with.
    assert re.search(rf"to abort one: eosctl txns abort -c {re.escape(str(Path(config).resolve()))} -p \S+ "
                     rf"--topic {re.escape(h['topic'])} --partition {h['partition']} "
                     rf"--start-offset {h['first_offset']}\n", result.stdout), result.stdout
    doc = json.loads(eosctl("txns", "hanging", "-c", config, "--max-age", "0", "--format", "json").stdout)
    (found,) = doc["hanging"]
    assert (found["topic"], found["partition"], found["first_offset"], found["producer_id"]) == (
        h["topic"], h["partition"], h["first_offset"], h["producer_id"])
    assert found["transactional_id"] == h["transactional_id"]
    assert found["blocked"] == h["last_offset"] - h["first_offset"] + 1
    assert "lso" in found["rules"]


def test_young_open_transaction_is_not_hanging(run):
    manifest, config = run
    result = eosctl("txns", "hanging", "-c", config, "--max-age", "1h")
    assert result.exit_code == 0, result.output
    # The config's default is the whole pipeline: both hops' topics, never the other pipelines'.
    assert result.stdout.startswith("no hanging transactions (older than 1h00m) in 6 partitions of "
                                    f"{manifest['source_topic']}, {manifest['output_topic']}; ")


def test_lag_shows_the_partition_blocked_by_the_open_transaction(run):
    manifest, config = run
    h = manifest["hanging"][0]
    # The whole pipeline (the config's default): the stage's group, then the sink's, which the open
    # transaction on the stage's output blocks.
    stage, group = _lag_json(config)["groups"]
    assert (stage["group"], group["group"]) == (manifest["groups"]["processor"], manifest["groups"]["sink"])
    assert all(p["blocked"] == 0 for p in stage["partitions"])
    parts = {p["partition"]: p for p in group["partitions"]}
    blocked = parts[h["partition"]]
    # HW - LSO is exactly the hanging transaction's records: nothing else is written after it.
    assert blocked["blocked"] == h["last_offset"] - h["first_offset"] + 1
    assert blocked["lso"] == h["first_offset"]
    assert blocked["open_transaction"]["producer_id"] == h["producer_id"]
    assert blocked["open_transaction"]["first_offset"] == h["first_offset"]
    # the transactional id beside it, where the coordinator knows it (Apache Kafka; the sandbox doesn't)
    assert blocked["open_transaction"]["transactional_id"] in (h["transactional_id"], None)
    assert blocked["records_behind"] == 0  # the sink read everything it can: the consumer is not at fault
    assert all(p["blocked"] == 0 and p["open_transaction"] is None
               for n, p in parts.items() if n != h["partition"])
    table = eosctl("lag", "-c", config).stdout
    named = blocked["open_transaction"]["transactional_id"]
    assert f"pid {h['producer_id']}{f' {named}' if named else ''} @{h['first_offset']}" in table


def test_watch_names_the_open_transaction_as_the_cause(run):
    manifest, config = run
    h = manifest["hanging"][0]
    result = eosctl("lag", "-c", config, "--watch", "0.2", "--count", "2", "--format", "json")
    assert result.exit_code == 0, result.output
    last = json.loads(result.stdout.splitlines()[-1])
    stage, group = last["groups"]  # the whole pipeline: the stage's group is fine, the sink's stalls
    assert (stage["group"], stage["status"]) == (manifest["groups"]["processor"], "OK")
    assert (group["group"], group["status"]) == (manifest["groups"]["sink"], "STALL")
    # named by its transactional id where the coordinator knows it (Apache Kafka; not the sandbox)
    assert any(group["cause"].startswith(f"{h['topic']}[{h['partition']}] blocked by open transaction "
                                         f"pid {h['producer_id']}{named} at offset {h['first_offset']} for ")
               for named in (f" ({h['transactional_id']})", ""))


def test_trailing_commit_marker_is_zero_records_behind(run, bootstrap):
    """A consumer that processed the last record of a transaction commits the marker's offset: HW - committed
    is 1, yet nothing is left to read."""
    from confluent_kafka import Consumer, TopicPartition

    manifest, config = run
    topic = manifest["output_topic"]
    hanging = manifest["hanging"][0]["partition"]
    # The last offset of a finished partition is its last transaction's commit marker.
    partition, marker = max(((m["partition"], m["offset"]) for m in manifest["markers"]
                             if m["topic"] == topic and m["type"] == "COMMIT" and m["partition"] != hanging),
                            key=lambda pm: pm[1])
    group = manifest["prefix"] + ".reader"
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, partition, marker)], asynchronous=False)
    finally:
        c.close()
    (doc,) = _lag_json(config, "-g", group)["groups"]
    p = next(p for p in doc["partitions"] if p["partition"] == partition)
    assert p["hw"] == marker + 1 and p["lso"] == marker + 1
    assert (p["committed"], p["hw_lag"], p["lag_to_lso"], p["records_behind"]) == (marker, 1, 1, 0)
    assert p["time_lag_s"] == 0.0


def test_txns_list_shows_the_hanging_transactional_id_ongoing(run):
    manifest, config = run
    h = manifest["hanging"][0]
    result = eosctl("txns", "list", "-c", config, "--state", "Ongoing")
    assert result.exit_code == 0, result.output
    row = next(line for line in result.stdout.splitlines() if h["transactional_id"] in line)
    assert "Ongoing" in row and str(h["producer_id"]) in row and f"{h['topic']}[{h['partition']}]" in row
    described = json.loads(eosctl("txns", "describe", "-c", config, h["transactional_id"], "--format",
                                  "json").stdout)
    assert described["state"] == "Ongoing"
    assert described["partitions"] == [{"topic": h["topic"], "partition": h["partition"]}]


def test_producers_names_its_source_and_the_open_transaction(run):
    manifest, config = run
    h = manifest["hanging"][0]
    # The sink hop: producers describe one topic, the one the stage writes and the sink reads.
    doc = json.loads(eosctl("producers", "-c", config, "-p", manifest["prefix"], "--format", "json").stdout)
    assert doc["source"] in ("describe-producers", "log-scan")
    opened = [p for p in doc["producers"] if p["current_txn_start_offset"] is not None]
    assert [(p["partition"], p["producer_id"], p["current_txn_start_offset"]) for p in opened] == [
        (h["partition"], h["producer_id"], h["first_offset"])]


def test_abort_without_yes_changes_nothing(run):
    manifest, config = run
    h = manifest["hanging"][0]
    before = _lag_json(config)["groups"][0]["partitions"]
    result = eosctl("txns", "abort", "-c", config, "--topic", h["topic"], "--partition", str(h["partition"]),
                    "--start-offset", str(h["first_offset"]))
    assert result.exit_code == 0, result.output
    assert f"producer {h['producer_id']} epoch 0 (transactional id {h['transactional_id']})" in result.stdout
    assert "dry run: nothing changed" in result.stdout
    after = _lag_json(config)["groups"][0]["partitions"]
    assert [(p["lso"], p["hw"]) for p in after] == [(p["lso"], p["hw"]) for p in before]


def test_abort_not_at_an_open_transaction_is_one_line(run):
    manifest, config = run
    h = manifest["hanging"][0]
    result = eosctl("txns", "abort", "-c", config, "--topic", h["topic"], "--partition", str(h["partition"]),
                    "--start-offset", "0")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"eosctl: error: no open transaction starts at offset 0 of "
                                    f"{h['topic']}-{h['partition']}")
    assert len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize("args", [("txns", "list"), ("lag", "-g", "g", "-t", "t"), ("producers", "-t", "t")])
def test_unreachable_bootstrap_is_one_line_and_exit_2(args):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nothing listens there
    result = eosctl(*args, "--bootstrap", f"127.0.0.1:{port}")
    assert result.exit_code == 2
    assert result.stderr == (f"eosctl: error: cannot reach Kafka at 127.0.0.1:{port}: connection refused; "
                             "check --bootstrap / that the broker is up\n")


def test_watch_judges_the_blocked_partition_stall_from_its_first_poll(run):
    """Issue 56: the first screen said OK for a partition a 19-minute-old transaction blocked, STALL only
    from the second poll on. Its coordinator's start time decides on the first poll."""
    import time

    manifest, config = run
    h = manifest["hanging"][0]
    described = json.loads(eosctl("txns", "describe", "-c", config, h["transactional_id"], "--format",
                                  "json").stdout)
    # Open for more than the interval: a second poll would have seen it too.
    helpers.wait_until("the hanging transaction open for 1 s", lambda: time.time() * 1000 -
                       described["start_time_ms"] > 1500, 10)
    result = eosctl("lag", "-c", config, "--watch", "1", "--count", "1", "--format", "json")
    assert result.exit_code == 0, result.output
    (first,) = result.stdout.splitlines()
    stage, group = json.loads(first)["groups"]
    assert (stage["status"], group["status"]) == ("OK", "STALL"), first
    parts = {p["partition"]: p for p in group["partitions"]}
    assert parts[h["partition"]]["status"] == "STALL"
    assert parts[h["partition"]]["cause"].startswith(f"blocked by open transaction pid {h['producer_id']}")
    assert all(p["status"] == "OK" for n, p in parts.items() if n != h["partition"])
