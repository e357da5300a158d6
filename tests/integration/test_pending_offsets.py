"""Offsets pending in a transaction, on Apache Kafka 4.4 (issue 52).

A consume-transform-produce stage (a confluent-kafka process of the test's own) commits its first
transaction (outputs of offsets 0..1 of both source partitions, offsets 2 sent with it), then opens a
second one, sends offsets 4 with it (AddOffsetsToTxn + TxnOffsetCommit) and is frozen (SIGSTOP). Until
that transaction ends, the group's OffsetFetch with RequireStable answers UNSTABLE_OFFSET_COMMIT for both
partitions: `lag` and `ledger` show the offsets 2 committed before it as pending in the stage's
transaction (its transactional id and producer id), and `txns hanging` names the group's
`__consumer_offsets-N`, where Kafka's own `kafka-transactions.sh describe` lists it in the transaction. The
coordinator still tracks the transaction, so neither eosctl's KIP-664 rule nor `kafka-transactions.sh
find-hanging` calls it hanging; eosctl's LSO rule names it, by the coordinator's clock. Resumed, the stage
commits: nothing is pending, the committed offsets are 4.
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

TXN = "org.apache.kafka.tools.TransactionsCommand"
STAGE = r'''
import sys
from confluent_kafka import Consumer, Producer, TopicPartition

bootstrap, src, out, group, txid = sys.argv[1:6]
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
              "enable.auto.commit": False})
c.assign([TopicPartition(src, 0, 0), TopicPartition(src, 1, 0)])
got = {}
while sum(len(v) for v in got.values()) < 8:
    m = c.poll(1.0)
    if m is not None and m.error() is None:
        got.setdefault(m.partition(), []).append(m)
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txid, "transaction.timeout.ms": 300000})
p.init_transactions(60)


def transaction(lo, hi):
    p.begin_transaction()
    for part in (0, 1):
        for m in got[part][lo:hi]:
            p.produce(out, value=m.value(), partition=0)
    p.flush(60)
    p.send_offsets_to_transaction([TopicPartition(src, 0, hi), TopicPartition(src, 1, hi)],
                                  c.consumer_group_metadata(), 60)


transaction(0, 2)
p.commit_transaction(60)
transaction(2, 4)
print("PENDING", flush=True)
sys.stdin.readline()
p.commit_transaction(60)
print("COMMITTED", flush=True)
'''

eosctl = partial(helpers.eosctl, columns=250)


def jdoc(*args: str, code: int = 0) -> dict:
    result = eosctl(*args, "--format", "json")
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


def table(stdout: str) -> list[dict[str, str]]:
    """A tab-separated table as Kafka's tools print it (header line first, padded cells)."""
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    header = [h.strip() for h in lines[0].split("\t") if h.strip()]
    return [dict(zip(header, (c.strip() for c in ln.split("\t")), strict=False)) for ln in lines[1:]]


@pytest.fixture
def frozen_stage(apache_kafka, tmp_path: Path):
    """(names, stage process): the stage frozen with offsets 4 pending in its open transaction."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from eosctl.txn.pendingoffsets import java_string_hash

    bs = apache_kafka.bootstrap
    prefix = "p" + uuid.uuid4().hex[:10]
    while java_string_hash(f"{prefix}.stage") >= 0:  # a negative hash: Utils.abs negates it, a mask would not
        prefix = "p" + uuid.uuid4().hex[:10]
    txnguard.register(prefix)
    names = {"bs": bs, "src": f"{prefix}.src", "out": f"{prefix}.out", "group": f"{prefix}.stage",
             "txid": f"{prefix}.stage-0"}
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(names["src"], 2, 1), NewTopic(names["out"], 1, 1)]).values():
        f.result(60)
    plain = Producer({"bootstrap.servers": bs, "enable.idempotence": True})
    for part in (0, 1):
        for i in range(4):
            plain.produce(names["src"], value=b"r%d-%d" % (part, i), partition=part)
    assert plain.flush(30) == 0
    proc = subprocess.Popen([sys.executable, "-c", STAGE, bs, names["src"], names["out"], names["group"],
                             names["txid"]], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # the stage's own 60 s deadlines bound this read
        assert line == "PENDING\n", f"the stage did not open its second transaction: {line!r}"
        os.kill(proc.pid, signal.SIGSTOP)
        yield names, proc
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            proc.wait(30)
        txnguard.end_ongoing(bs, [prefix])


def _sink(path: Path, src: str) -> Path:
    """A DuckDB sink holding what the first transaction wrote: offsets 0..1 of both partitions."""
    import duckdb

    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE sink (src_topic VARCHAR, src_partition INTEGER, src_offset BIGINT)")
    con.executemany("INSERT INTO sink VALUES (?, ?, ?)", [(src, p, o) for p in (0, 1) for o in (0, 1)])
    con.close()
    return path


def test_a_frozen_stage_s_offsets_show_as_pending_in_its_transaction(apache_kafka, frozen_stage,
                                                                     tmp_path: Path) -> None:
    from eosctl.sandbox import apache_kafka as ak

    names, proc = frozen_stage
    bs, src, group, txid = names["bs"], names["src"], names["group"], names["txid"]
    (described,) = table(ak.tool(apache_kafka, TXN, "--bootstrap-server", bs, "describe",
                                 "--transactional-id", txid).stdout)
    assert described["TransactionState"] == "Ongoing"
    (offsets_tp,) = [tp for tp in described["TopicPartitions"].split(",")
                     if tp.startswith("__consumer_offsets-")]
    n = int(offsets_tp.rsplit("-", 1)[1])
    pid = int(described["ProducerId"])

    (g,) = jdoc("lag", "--bootstrap", bs, "-t", src, "-g", group)["groups"]
    for p in g["partitions"]:
        assert (p["partition"], p["committed"], p["lso"], p["records_behind"]) == (p["partition"], 2, 4, 2)
        pending = p["pending_commit"]
        assert (pending["offsets_topic"], pending["offsets_partition"], pending["problem"]) == (
            "__consumer_offsets", n, None)
        assert [(t["transactional_id"], t["producer_id"], t["coordinator_state"])
                for t in pending["transactions"]] == [(txid, pid, "Ongoing")]
    text = eosctl("lag", "--bootstrap", bs, "-t", src, "-g", group)
    assert text.exit_code == 0, text.output
    assert text.stdout.count(f"pending in {txid} (pid {pid}, Ongoing) on __consumer_offsets-{n}") == 2

    sink = _sink(tmp_path / "sink.duckdb", src)
    ledger = jdoc("ledger", "--bootstrap", bs, "-t", src, "-g", group, "--sink-duckdb", str(sink))
    assert [(p["partition"], p["committed_offset"], p["commit_pending"], p["flags"])
            for p in ledger["partitions"]] == [(0, 2, True, []), (1, 2, True, [])]
    assert [(t["transactional_id"], t["producer_id"]) for t in ledger["pending_commit"]["transactions"]] == [
        (txid, pid)]
    assert f"group {group}'s next offset commit is pending in {txid} (pid {pid}" in eosctl(
        "ledger", "--bootstrap", bs, "-t", src, "-g", group, "--sink-duckdb", str(sink)).stdout

    # txns hanging on the group's offsets partition: held by the coordinator's open transaction.
    time.sleep(1.2)  # older than --max-age 1s by the coordinator's clock
    doc = jdoc("txns", "hanging", "--bootstrap", bs, "-t", src, "-t", "__consumer_offsets", "--max-age", "1s",
               code=1)
    (mine,) = [h for h in doc["hanging"] if h["producer_id"] == pid]
    assert (mine["topic"], mine["partition"], mine["transactional_id"], mine["coordinator_state"],
            mine["rules"], mine["age_source"], mine["counted"]) == (
        "__consumer_offsets", n, txid, "Ongoing", ["lso"], "coordinator", True)
    assert group in mine["groups"]
    assert not [h for h in doc["hanging"] if h["topic"] == src]
    # Kafka's find-hanging agrees that the KIP-664 rule does not apply: its coordinator lists the partition.
    rows = table(ak.tool(apache_kafka, TXN, "--bootstrap-server", bs, "find-hanging", "--topic",
                         "__consumer_offsets", "--partition", str(n),
                         "--max-transaction-timeout", "0").stdout)
    assert [r for r in rows if int(r["ProducerId"]) == pid] == []

    # Resumed, the stage commits: nothing pending, the offsets sent with it committed.
    os.kill(proc.pid, signal.SIGCONT)
    out, _ = proc.communicate("commit\n", timeout=120)
    assert out.strip().splitlines()[-1] == "COMMITTED", out
    (g,) = jdoc("lag", "--bootstrap", bs, "-t", src, "-g", group)["groups"]
    assert [(p["committed"], p["pending_commit"], p["records_behind"]) for p in g["partitions"]] == [
        (4, None, 0), (4, None, 0)]
