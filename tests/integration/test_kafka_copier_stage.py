"""Apache Kafka's transactions system test (tests/kafkatest/tests/core/transactions_test.py), reproduced on
the session's Apache Kafka and checked twice: by Kafka's own rule and by `eosctl audit`.

As Kafka's test does: the input is written by Kafka's VerifiableProducer (idempotent; values are a counter,
keys null), one TransactionalMessageCopier per input partition copies it to the output (same partition,
value unchanged) in transactions of TRANSACTION_SIZE with random aborts, and each copier is hard-bounced
(SIGKILL, then started again with the same transactional id) three times, each after it made at least 20%
progress. Kafka's check: the output read read_committed has no duplicate and holds exactly the input's
values. The copier adds no lineage, so the hop is audited with `lineage = "value"` (outputs paired with
inputs by value); its verdict must agree: clean, the aborted output transactions never counted.

The control, which shows both checks can fail: the same copy without transactions (tests/stages/
plain_copier.py: consume, produce, flush, then commit the input offsets), killed the same way between a
flush and its commit. Kafka's check finds duplicates; eosctl names exactly the inputs written twice, at
their input offsets, with the extra outputs as counts. Expected results come from the test's own raw reads
of both topics, never from eosctl.
"""

from __future__ import annotations

import json
import signal
import sys
from collections import Counter
from pathlib import Path

import pytest

from eosctl.sandbox import maven
from tests.support.jvm import die_with_test, java_cmd, run_java
from tests.support.stage import (
    Stage,
    Topics,
    audit_hop,
    covered,
    ends,
    group_offsets,
    no_fencing,
    read_records,
    wait_until,
)

pytestmark = [pytest.mark.integration]

INPUT_PARTITIONS, OUTPUT_PARTITIONS = 2, 3  # as Kafka's test: the copier writes to its input's partition
MESSAGES = 4000  # Kafka's test seeds 100,000: small here, still hundreds of transactions per copier
TRANSACTION_SIZE = 25  # Kafka's: 750
BOUNCES = 3  # each copier, each after >= 20% progress of its run
PLAIN = Path(__file__).resolve().parents[1] / "stages" / "plain_copier.py"
COPIER = "org.apache.kafka.tools.TransactionalMessageCopier"
PAUSE = "0.1"  # seconds the control copy waits between its flush and its commit (a slow commit)


@pytest.fixture(scope="module")
def kafka_jars() -> Path:
    return maven.jars("kafka")


def seed(bootstrap: str, topic: str, jars: Path, workdir: Path) -> list[bytes]:
    """VerifiableProducer writes MESSAGES integers, idempotent: the values it saw acknowledged."""
    props = workdir / "producer.properties"
    # As kafkatest's VerifiableProducer service does for enable_idempotence (the tool sets retries=0).
    props.write_text("enable.idempotence=true\nacks=all\nmax.in.flight.requests.per.connection=5\n"
                     "retries=2147483647\n")
    done = run_java(None, "org.apache.kafka.tools.VerifiableProducer", [jars],
                    ["--topic", topic, "--max-messages", str(MESSAGES), "--bootstrap-server", bootstrap,
                     "--command-config", str(props)], timeout=120, heap="256m")
    assert done.returncode == 0, done.stderr[-2000:]
    acked = [json.loads(line) for line in done.stdout.splitlines() if '"producer_send_success"' in line]
    return [str(a["value"]).encode() for a in acked]


def progress(stage: Stage) -> float:
    """This run's progress in percent as Kafka's service computes it (consumed / (consumed + remaining));
    a run that ended cleanly is done."""
    if stage.proc.poll() == 0:
        return 100.0
    status = [d for d in stage.json_lines() if "remaining" in d and "consumed" in d]
    if not status:
        return 0.0
    last = status[-1]
    total = last["consumed"] + last["remaining"]
    return 100.0 if total == 0 else 100.0 * last["consumed"] / total


def bounce(stages: list[Stage], restart, ready_to_kill=lambda stage: True) -> int:
    """transactions_test.bounce_copiers with clean_shutdown=False: three rounds, each copier SIGKILLed after
    >= 20% progress and started again. ``ready_to_kill`` is asked with the stage SIGSTOPped (so it can't
    move on between the look and the kill); if not ready it runs on. Returns how many kills hit a live
    process (a copier that finished before its bounce is just started again, as Kafka's test does)."""
    hits = 0
    for _ in range(BOUNCES):
        for i, stage in enumerate(stages):
            def frozen_ready(stage=stage) -> bool:
                if progress(stage) < 20.0:
                    return False
                if stage.proc.poll() is not None:
                    return True
                stage.signal(signal.SIGSTOP)
                if ready_to_kill(stage):
                    return True
                stage.signal(signal.SIGCONT)
                return False

            wait_until(f"{stage.name} at 20% progress", frozen_ready, 60, stage)
            hits += stage.proc.poll() is None
            stage.kill()
            stages[i] = restart(i)
    return hits


def finish(stages: list[Stage], seconds: float = 120) -> None:
    wait_until("every copier done", lambda: all(s.proc.poll() is not None for s in stages), seconds, *stages)
    for s in stages:
        assert s.proc.returncode == 0, s.tail()


def kafka_check(inputs: list[bytes], outputs: list[bytes]) -> tuple[int, bool]:
    """transactions_test's verdict: (duplicates in the output, output value set == input value set)."""
    return len(outputs) - len(set(outputs)), set(outputs) == set(inputs)


def test_kafka_transactions_system_test_hard_bounced_copiers_audit_clean(bootstrap, kafka_jars, tmp_path):
    topics = Topics.create(bootstrap, "copier", INPUT_PARTITIONS, OUTPUT_PARTITIONS)
    acked = seed(bootstrap, topics.input, kafka_jars, tmp_path)
    group = f"{topics.input}.copiers"

    def start(i: int) -> Stage:
        args = ["--broker-list", bootstrap, "--input-topic", topics.input, "--input-partition", str(i),
                "--output-topic", topics.output, "--transactional-id", f"{topics.input}.copier-{i}",
                "--consumer-group", group, "--transaction-size", str(TRANSACTION_SIZE),
                "--transaction-timeout", "40000", "--enable-random-aborts", "--use-group-metadata"]
        return Stage(f"copier-{i}", [*java_cmd(None, COPIER, kafka_jars, heap="256m"), *args],
                     tmp_path / f"copier-{i}.log", preexec=die_with_test)

    copiers = [start(i) for i in range(INPUT_PARTITIONS)]
    try:
        hits = bounce(copiers, start)
        finish(copiers)
    finally:
        for c in copiers:
            c.kill()
    assert hits >= 1, "no bounce hit a running copier: the copy is too short to test anything"

    inputs = [v for _, _, _, v in read_records(bootstrap, topics.input, "read_committed")]
    outputs = [v for _, _, _, v in read_records(bootstrap, topics.output, "read_committed")]
    assert sorted(inputs) == sorted(acked) and len(inputs) == MESSAGES
    assert kafka_check(inputs, outputs) == (0, True)  # Kafka's own check: clean
    # The random aborts and the bounces' open transactions are in the output's log, aborted.
    assert len(read_records(bootstrap, topics.output, "read_uncommitted")) > len(outputs)

    code, report, err = audit_hop(tmp_path / "eosctl.toml", bootstrap, topics, group, "value")
    assert (code, report["findings"]) == (0, []), err  # eosctl agrees: clean
    assert report["summary"]["expected_records"] == MESSAGES
    assert report["summary"]["sink_rows"] == MESSAGES  # the aborted output never counted
    assert report["sink_read_point"]["lineage"] == "value"
    assert no_fencing(report)


def test_a_non_transactional_copy_bounced_the_same_way_fails_both_checks_at_the_same_inputs(bootstrap,
                                                                                            kafka_jars,
                                                                                            tmp_path):
    topics = Topics.create(bootstrap, "plaincopy", INPUT_PARTITIONS, OUTPUT_PARTITIONS)
    seed(bootstrap, topics.input, kafka_jars, tmp_path)
    group = f"{topics.input}.plain"

    def start(i: int) -> Stage:
        args = [bootstrap, topics.input, str(i), topics.output, group, str(TRANSACTION_SIZE), PAUSE]
        return Stage(f"plain-{i}", [sys.executable, str(PLAIN), *args], tmp_path / f"plain-{i}.log",
                     preexec=die_with_test)

    def between_flush_and_commit(stage: Stage) -> bool:
        """Outputs of input the copy has not committed: the kill now makes the restart copy them again."""
        p = int(stage.name.split("-")[1])
        return ends(bootstrap, topics.output, "read_uncommitted")[p] > max(
            group_offsets(bootstrap, group, topics.input)[p], 0)

    copiers = [start(i) for i in range(INPUT_PARTITIONS)]
    try:
        hits = bounce(copiers, start, between_flush_and_commit)
        finish(copiers)
    finally:
        for c in copiers:
            c.kill()
    # Each kill that hit a live copy landed between a flush and its commit (a copy may finish before its
    # later bounces, as in Kafka's test).
    assert hits >= BOUNCES

    inputs = read_records(bootstrap, topics.input, "read_committed")
    outputs = [v for _, _, _, v in read_records(bootstrap, topics.output, "read_committed")]
    dups, same_set = kafka_check([v for _, _, _, v in inputs], outputs)
    assert dups > 0 and same_set  # Kafka's check fails: duplicates, nothing lost
    copies = Counter(outputs)
    place = {v: (p, o) for p, o, _, v in inputs}
    written_twice = {place[v] for v, n in copies.items() if n > 1}

    code, report, err = audit_hop(tmp_path / "eosctl.toml", bootstrap, topics, group, "value")
    assert code == 1, err
    assert {f["kind"] for f in report["findings"]} == {"duplicate"}
    assert covered(report["findings"], "duplicate", set(place.values())) == written_twice
    assert sum(f["count"] for f in report["findings"]) == dups
    assert report["summary"]["expected_records"] == MESSAGES
    assert report["summary"]["sink_rows"] == MESSAGES + dups
    assert no_fencing(report)
