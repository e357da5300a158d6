"""A Spark Structured Streaming `foreachBatch` that MERGEs into a Delta table by key (tests/streaming/
merge_job.py, on the project's PySpark with delta-spark from Maven Central), audited as a state sink
(issue 51), idempotent and not.

The topic (one partition, one transactional producer, an aborted transaction among the committed ones):
keys k0..k3, each written five times with n = 1, 2, 4, 8, 16 (each key's runs of records add up to
different sums). The job runs to the end; then its last batch's commit is removed from the checkpoint (as a
crash after the sink wrote and before Spark committed the batch leaves it) and the job restarted, which
replays that batch. The overwriting MERGE (upsert) audits clean; the adding MERGE (a running total, audited
as `mode = "aggregate"`, sum of value.n) is off by the replayed batch, each key it touched "counted offsets
... twice" at exactly the batch's records of that key, as the test's own read of the checkpoint and the
topic finds them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from eosctl.base import procs
from tests.support.helpers import eosctl
from tests.support.markers import markers_written
from tests.support.streaming import spark_jars

pytestmark = [pytest.mark.integration, pytest.mark.own_spark]

JOB = Path(__file__).resolve().parents[1] / "streaming" / "merge_job.py"
RUN_S = 420


def write_topic(bootstrap: str) -> tuple[str, dict[int, tuple[str, int]]]:
    """The topic and its committed records: offset -> (key, n)."""
    topic = "merge" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}.writer"})
    p.init_transactions(30)
    committed: dict[int, tuple[str, int]] = {}
    for j in range(5):
        for aborted in ((False, True) if j == 2 else (False,)):
            got: dict[int, tuple[str, int]] = {}
            p.begin_transaction()
            for k in range(4):
                n = 1000 if aborted else 2 ** j
                p.produce(topic, key=f"k{k}".encode(), value=json.dumps({"n": n}).encode(), partition=0,
                          on_delivery=lambda err, msg, kn=(f"k{k}", n), into=got: into.__setitem__(
                              msg.offset(), kn))
            assert p.flush(30) == 0
            if aborted:
                p.abort_transaction(30)
            else:
                p.commit_transaction(30)
                committed.update(got)
    markers_written(bootstrap, f"{topic}.writer")
    return topic, committed


def run_job(bootstrap: str, topic: str, home: Path, queries: list[str]) -> None:
    args = [sys.executable, str(JOB), "--bootstrap", bootstrap, "--topic", topic,
            "--jars", spark_jars("spark-kafka", "spark-delta"), "--max-offsets", "6"]
    for q in queries:
        args += ["--query", q]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    with (home / "job.log").open("ab") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env,
                                preexec_fn=procs.die_with_parent, start_new_session=True)
    try:
        proc.wait(RUN_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait(30)
        pytest.fail("the Spark job did not finish\n" + (home / "job.log").read_text()[-3000:])
    assert proc.returncode == 0, (home / "job.log").read_text()[-3000:]


def end_of(checkpoint: Path, batch: int, topic: str) -> int:
    """The end offset (exclusive) of a batch, from the checkpoint's offsets log (its third line)."""
    return json.loads((checkpoint / "offsets" / str(batch)).read_text().splitlines()[2])[topic]["0"]


def audit(home: Path, bootstrap: str, topic: str, sink: str) -> tuple[int, dict]:
    config = home / f"{uuid.uuid4().hex[:6]}.toml"
    config.write_text(f'[clusters.c]\nbootstrap_servers = "{bootstrap}"\n\n[pipelines.p]\n'
                      f'source_topics = ["{topic}"]\n\n[pipelines.p.sink]\n{sink}')
    r = eosctl("audit", "-c", str(config), "--engine", "local", "--format", "json")
    return r.exit_code, json.loads(r.stdout)


def test_a_replayed_batch_is_clean_in_an_overwriting_merge_and_counted_twice_in_an_adding_one(
        bootstrap, tmp_path):
    topic, committed = write_topic(bootstrap)
    tables = {m: tmp_path / m / "table" for m in ("overwrite", "add")}
    checkpoints = {m: tmp_path / m / "checkpoint" for m in ("overwrite", "add")}
    queries = [f"{m},{tables[m]},{checkpoints[m]}" for m in ("overwrite", "add")]
    run_job(bootstrap, topic, tmp_path, queries)
    # The last batch's commit removed: a crash after the MERGE, before Spark committed the batch.
    last = max(int(n) for n in os.listdir(checkpoints["add"] / "commits") if n.isdigit())
    for c in checkpoints.values():
        for name in (str(last), f".{last}.crc"):
            (c / "commits" / name).unlink(missing_ok=True)
    run_job(bootstrap, topic, tmp_path, queries)
    start, end = end_of(checkpoints["add"], last - 1, topic), end_of(checkpoints["add"], last, topic)
    replayed: dict[str, list[int]] = {}
    for o, (k, _) in sorted(committed.items()):
        if start <= o < end:
            replayed.setdefault(k, []).append(o)
    assert replayed  # the test's own read: the batch held committed records

    code, report = audit(tmp_path, bootstrap, topic, f'delta = "{tables["overwrite"]}"\nmode = "upsert"\n'
                         'key_column = "k"\nvalue_fields = {n = "value.n"}\n')
    assert (code, report["findings"]) == (0, [])
    code, report = audit(tmp_path, bootstrap, topic, f'delta = "{tables["add"]}"\nmode = "aggregate"\n'
                         'key_column = "k"\naggregate = {fn = "sum", field = "value.n", column = "n"}\n')
    assert code == 1
    assert {f["key"]: (f["cause"]["rule"], f["offsets"]) for f in report["findings"]} == {
        k: ("counted_twice", offsets) for k, offsets in replayed.items()}
