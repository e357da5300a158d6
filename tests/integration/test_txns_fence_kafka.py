"""`txns fence` on a real open transaction on Apache Kafka 4.4 (issue 52).

A confluent-kafka producer (a process of the test's own) opens a transaction over two partitions of two
topics, writes 3 and 2 records and is frozen (SIGSTOP). The dry run names both partitions, the records it
would abort and why `fence` is the command to prefer, and changes nothing. `--yes` sends InitProducerId
for the id, as Kafka's Admin.fenceProducers (KIP-618): Kafka's own `kafka-transactions.sh describe` then
shows CompleteAbort at a higher epoch, the LSO is at the high watermark on both partitions (the ABORT
markers), and the resumed producer's next write is fenced. Compare test_txns_abort_kafka.py: the
marker-level abort leaves the coordinator Ongoing and the producer committing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from functools import partial
from pathlib import Path

import pytest

from tests.support import helpers, txnguard

pytestmark = pytest.mark.integration

TXN = "org.apache.kafka.tools.TransactionsCommand"
PRODUCER = r'''
import json, os, sys, time
from confluent_kafka import KafkaException, Producer

bootstrap, a, b, txid, gate = sys.argv[1:6]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txid, "transaction.timeout.ms": 600000})
p.init_transactions(60)
p.begin_transaction()
for i in range(3):
    p.produce(a, value=b"a-%d" % i, partition=0)
for i in range(2):
    p.produce(b, value=b"b-%d" % i, partition=0)
p.flush(60)
print("OPEN", flush=True)
deadline = time.monotonic() + 300
while not os.path.exists(gate) and time.monotonic() < deadline:
    time.sleep(0.05)
step = "produce"
try:
    p.produce(a, value=b"after-fence", partition=0)
    p.flush(60)
    step = "commit"
    p.commit_transaction(60)
    print("COMMITTED", flush=True)
except KafkaException as e:
    err = e.args[0]
    print("ERROR", json.dumps({"step": step, "name": err.name(), "fatal": err.fatal()}), flush=True)
'''

eosctl = partial(helpers.eosctl, columns=250)


def table(stdout: str) -> list[dict[str, str]]:
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    header = [h.strip() for h in lines[0].split("\t") if h.strip()]
    return [dict(zip(header, (c.strip() for c in ln.split("\t")), strict=False)) for ln in lines[1:]]


def _lso_hw(bootstrap: str, tps: list[tuple[str, int]]) -> list[tuple[int, int]]:
    from eosctl.cluster.wire import WireClient

    with WireClient(bootstrap) as client:
        offsets = client.offsets(tps)
    return [(offsets[tp].last_stable, offsets[tp].high_watermark) for tp in tps]


@pytest.fixture
def frozen(apache_kafka, tmp_path: Path):
    from confluent_kafka.admin import AdminClient, NewTopic

    bs = apache_kafka.bootstrap
    prefix = txnguard.register("f" + uuid.uuid4().hex[:10])
    a, b, txid = f"{prefix}.a", f"{prefix}.b", f"{prefix}.stuck"
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(a, 1, 1), NewTopic(b, 1, 1)]).values():
        f.result(60)
    gate = tmp_path / "resume"
    proc = subprocess.Popen([sys.executable, "-c", PRODUCER, bs, a, b, txid, str(gate)],
                            stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        line = proc.stdout.readline()  # the producer's own 60 s deadlines bound this read
        assert line == "OPEN\n", f"the producer did not open its transaction: {line!r}"
        os.kill(proc.pid, signal.SIGSTOP)
        yield bs, a, b, txid, proc, gate
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            proc.wait(30)
        txnguard.end_ongoing(bs, [prefix])


def test_fence_ends_the_transaction_on_every_partition_and_fences_the_producer(apache_kafka, frozen) -> None:
    from eosctl.sandbox import apache_kafka as ak

    bs, a, b, txid, proc, gate = frozen
    tps = [(a, 0), (b, 0)]
    assert _lso_hw(bs, tps) == [(0, 3), (0, 2)]
    (before,) = table(ak.tool(apache_kafka, TXN, "--bootstrap-server", bs, "describe",
                              "--transactional-id", txid).stdout)
    assert before["TransactionState"] == "Ongoing"

    dry = eosctl("txns", "fence", "--bootstrap", bs, txid, "--format", "json")
    assert dry.exit_code == 0, dry.output
    plan = json.loads(dry.stdout)
    assert (plan["dry_run"], plan["fenced"], plan["coordinator_state"], plan["prefer"], plan["after"]) == (
        True, False, "Ongoing", "fence", None)
    assert plan["producer_id"] == int(before["ProducerId"])
    assert [(p["topic"], p["partition"], p["first_offset"], p["lso"], p["hw"], p["open_records"])
            for p in plan["partitions"]] == [(a, 0, 0, 0, 3, 3), (b, 0, 0, 0, 2, 2)]
    assert plan["acl"].startswith(f"Write on transactional-id {txid} ")
    text = eosctl("txns", "fence", "--bootstrap", bs, txid).stdout
    assert "prefer `fence`: its coordinator still runs this transaction (Ongoing)" in text
    assert text.strip().splitlines()[-1] == "dry run: nothing changed; add --yes to fence it"
    assert _lso_hw(bs, tps) == [(0, 3), (0, 2)]  # the dry run changed nothing

    done = eosctl("txns", "fence", "--bootstrap", bs, txid, "--yes", "--format", "json")
    assert done.exit_code == 0, done.output
    after = json.loads(done.stdout)["after"]
    (described,) = table(ak.tool(apache_kafka, TXN, "--bootstrap-server", bs, "describe",
                                 "--transactional-id", txid).stdout)
    assert (described["TransactionState"], after["state"]) == ("CompleteAbort", "CompleteAbort")
    assert int(described["ProducerEpoch"]) > int(before["ProducerEpoch"])
    assert int(described["ProducerEpoch"]) == after["producer_epoch"]
    # The ABORT markers took one offset each: the LSO is at the HW on every partition.
    assert _lso_hw(bs, tps) == [(4, 4), (3, 3)]

    gate.touch()
    os.kill(proc.pid, signal.SIGCONT)
    out, _ = proc.communicate(timeout=120)
    last = out.strip().splitlines()[-1]
    assert last.startswith("ERROR "), out
    err = json.loads(last.split(" ", 1)[1])
    assert err["fatal"] and err["name"] in ("_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"), err
