"""`txns abort` on a real open transaction, on Apache Kafka 4.4 and 3.9.1.

A confluent-kafka producer (a process of the test's own) opens a transaction with a long
transaction.timeout.ms, writes to one partition and is frozen (SIGSTOP). The dry run shows it and changes
nothing; `--yes` writes the ABORT marker and the LSO moves past it. What the resumed producer gets is what
Kafka does: WriteTxnMarkers reaches the partition leader only (Admin.abortTransaction, KIP-664), so the
coordinator still holds the transaction Ongoing and the resumed producer's next write and commit succeed:
its records written after the abort are committed, those before it stay aborted (Kafka's
ProducerStateManager starts a new transaction in the partition at the producer's next transactional batch;
KIP-890's verification asks the coordinator, which still lists the partition in the transaction).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from functools import partial
from pathlib import Path

import pytest

from tests.support import helpers, txnguard

pytestmark = pytest.mark.integration

OPEN_RECORDS = 5
PRODUCER = r'''
import json, os, sys, time
from confluent_kafka import KafkaException, Producer

bootstrap, topic, txid, gate = sys.argv[1:5]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txid, "transaction.timeout.ms": 600000})
p.init_transactions(60)
p.begin_transaction()
offsets = []
for i in range(int(sys.argv[5])):
    p.produce(topic, value=b"open-%d" % i, partition=0, on_delivery=lambda e, m: offsets.append(m.offset()))
p.flush(60)
print("OPEN", json.dumps(offsets), flush=True)
deadline = time.monotonic() + 300
while not os.path.exists(gate) and time.monotonic() < deadline:
    time.sleep(0.05)
step = "produce"
try:
    p.produce(topic, value=b"after-abort", partition=0)
    p.flush(60)
    step = "commit"
    p.commit_transaction(60)
    print("COMMITTED", flush=True)
except KafkaException as e:
    err = e.args[0]
    print("ERROR", json.dumps({"step": step, "name": err.name(), "fatal": err.fatal(),
                               "abortable": err.txn_requires_abort()}), flush=True)
'''


eosctl = partial(helpers.eosctl, columns=None)


def _coordinator_state(bootstrap: str, txid: str) -> str:
    result = eosctl("txns", "describe", "--bootstrap", bootstrap, txid, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["state"]


def _offsets(bootstrap: str, topic: str) -> tuple[int, int]:
    """(LSO, HW) of partition 0, read by the test itself (a read_committed and a plain consumer)."""
    from confluent_kafka import Consumer, TopicPartition

    out = []
    for isolation in ("read_committed", "read_uncommitted"):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "isolation.level": isolation})
        try:
            out.append(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30, cached=False)[1])
        finally:
            c.close()
    return out[0], out[1]


def _read_committed(bootstrap: str, topic: str, until: int) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "t" + uuid.uuid4().hex[:8],
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    values = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                values.append(m.value())
            pos = c.position([TopicPartition(topic, 0)])[0].offset
            if pos >= until:
                break
    finally:
        c.close()
    return values


@pytest.fixture
def frozen(kafka_version, tmp_path: Path):
    """(bootstrap, topic, txid, first offset, producer process, gate file): a producer frozen inside its
    open transaction; ended on every exit path (its transaction aborted by the coordinator)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = kafka_version.bootstrap
    prefix = txnguard.register("t" + uuid.uuid4().hex[:10])
    topic, txid = f"{prefix}.abort", f"{prefix}.frozen"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
    gate = tmp_path / "resume"
    proc = subprocess.Popen([sys.executable, "-c", PRODUCER, bootstrap, topic, txid, str(gate),
                             str(OPEN_RECORDS)], stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        line = proc.stdout.readline()  # the producer's own deadlines bound this read
        assert line.startswith("OPEN "), f"the producer did not open its transaction: {line!r}"
        offsets = json.loads(line.split(" ", 1)[1])
        os.kill(proc.pid, signal.SIGSTOP)
        yield bootstrap, topic, txid, offsets[0], proc, gate
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            proc.wait(30)
        txnguard.end_ongoing(bootstrap, [prefix])


def test_abort_a_frozen_producers_open_transaction(frozen, kafka_version) -> None:
    bootstrap, topic, txid, first, proc, gate = frozen
    args = ["txns", "abort", "--bootstrap", bootstrap, "--topic", topic, "--partition", "0",
            "--start-offset", str(first)]
    assert _offsets(bootstrap, topic) == (first, first + OPEN_RECORDS)

    dry = eosctl(*args)
    assert dry.exit_code == 0, dry.output
    lines = dry.stdout.splitlines()
    assert lines[0].startswith(f"open transaction on {topic}[0] from offset {first}: producer ")
    assert f"(transactional id {txid})" in lines[0]
    assert lines[0].endswith(f"LSO {first}, HW {first + OPEN_RECORDS}, blocking {OPEN_RECORDS} offsets")
    assert lines[1].startswith(f"note: the coordinator still has {txid} Ongoing")
    assert lines[-1] == "dry run: nothing changed; add --yes to write the ABORT marker"
    assert _offsets(bootstrap, topic) == (first, first + OPEN_RECORDS)

    done = eosctl(*args, "--yes", "--format", "json")
    assert done.exit_code == 0, done.output
    plan = json.loads(done.stdout)
    assert (plan["aborted"], plan["supported"], plan["coordinator_state"]) == (True, True, "Ongoing")
    # The marker takes one offset: the LSO moves past it, to the HW.
    assert _offsets(bootstrap, topic) == (first + OPEN_RECORDS + 1, first + OPEN_RECORDS + 1)
    log = json.loads(eosctl("log", "--bootstrap", bootstrap, "--topic", topic, "--partition", "0",
                            "--format", "json").stdout)
    assert [(m["offset"], m["type"], m["producer_id"]) for m in log["markers"]] == [
        (first + OPEN_RECORDS, "ABORT", plan["producer_id"])]
    # The coordinator was not told: it still holds the transaction open.
    assert _coordinator_state(bootstrap, txid) == "Ongoing"

    gate.touch()
    os.kill(proc.pid, signal.SIGCONT)
    out, _ = proc.communicate(timeout=120)
    assert out.strip().splitlines()[-1] == "COMMITTED", out
    # Its first records stay aborted; the one written after the abort is committed.
    hw = _offsets(bootstrap, topic)[1]
    assert _read_committed(bootstrap, topic, hw) == [b"after-abort"]
    assert _coordinator_state(bootstrap, txid) == "CompleteCommit"
