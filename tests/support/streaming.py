"""A transactional input topic for the framework tests (Spark Structured Streaming, Kafka Connect), and the
test's own raw reads of it: which offsets hold committed, aborted and still-open records; the audit and the
check of its findings' offsets they share; and the Structured Streaming job (tests/streaming/spark_job.py)
as a process of its own, with its checkpoint and the config docs/audit.md gives for its sink.

Committed and aborted transactions alternate (from two producers: aborting from a producer of its own keeps
a resuming read_committed fetch clear of stale aborted lists, see tests/integration/test_quix_stage.py), and
the last transaction stays open until close() aborts it, so the partitions end in records no read_committed
reader may see.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from eosctl.base import procs
from tests.support import helpers
from tests.support.helpers import eosctl, exited
from tests.support.markers import markers_written

PARTITIONS = 2
ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "audit.md"
JOB = ROOT / "tests" / "streaming" / "spark_job.py"
RUN_S = 420  # one run of the job, Spark's start included, on a busy machine
SCHEMA = {"type": "struct", "name": "order", "optional": False,
          "fields": [{"field": "id", "type": "string", "optional": False},
                     {"field": "n", "type": "int32", "optional": False}]}


class TxnTopic:
    def __init__(self, bootstrap: str, prefix: str, transactions: int = 12, per_txn: int = 20,
                 connect_json: bool = False) -> None:
        self.bootstrap = bootstrap
        self.name = f"{prefix}{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(self.name, PARTITIONS, 1)])[self.name].result(30)
        # (partition, offset) -> key, from delivery reports
        self.committed: dict[tuple[int, int], str] = {}
        self.aborted: dict[tuple[int, int], str] = {}
        self.open: dict[tuple[int, int], str] = {}
        self.txn_of: dict[tuple[int, int], str] = {}  # offset -> transactional id of its writer
        self._producers = {kind: Producer({"bootstrap.servers": bootstrap,
                                           "transactional.id": f"{self.name}.{kind}",
                                           "transaction.timeout.ms": 600_000, "linger.ms": 5})
                           for kind in ("source", "aborter", "opener")}
        for p in self._producers.values():
            p.init_transactions(30)
        for t in range(transactions):
            kind = "aborter" if t % 3 == 1 else "source"
            self._txn(kind, t, per_txn, connect_json, "abort" if kind == "aborter" else "commit")
        self._txn("opener", transactions, per_txn // 2, connect_json, "leave open")

    def _txn(self, kind: str, t: int, n: int, connect_json: bool, end: str) -> None:
        producer = self._producers[kind]
        delivered: dict[tuple[int, int], str] = {}

        def report(err, msg) -> None:
            assert err is None, err
            delivered[(msg.partition(), msg.offset())] = msg.key().decode()

        producer.begin_transaction()
        for i in range(n):
            key = f"k{t}-{i}"
            # Kafka Connect's JsonConverter (schemas.enable): the schema beside each value
            value = json.dumps({"schema": SCHEMA, "payload": {"id": key, "n": i}}) if connect_json \
                else f"v{t}-{i}"
            producer.produce(self.name, key=key.encode(), value=value.encode(), partition=i % PARTITIONS,
                             on_delivery=report)
        assert producer.flush(30) == 0
        into = {"commit": self.committed, "abort": self.aborted, "leave open": self.open}[end]
        if end == "commit":
            producer.commit_transaction(30)
        elif end == "abort":
            producer.abort_transaction(30)
        if end != "leave open":
            # Its markers before the next id's records (the offsets the delivery reports gave stay the
            # log's) and before anything reads the topic: a marker still owed holds the LSO below its
            # records, and read("read_committed") would stop short of them.
            markers_written(self.bootstrap, f"{self.name}.{kind}")
        into.update(delivered)
        self.txn_of.update(dict.fromkeys(delivered, f"{self.name}.{kind}"))

    def close(self) -> None:
        """Abort the open transaction (a hanging one would outlive the test on the session's broker), and
        let the producers go (alive, they would retry the broker after the session stops it)."""
        opener = self._producers.pop("opener", None)
        if opener is not None:
            opener.abort_transaction(30)
        self._producers.clear()

    def read(self, isolation: str) -> set[tuple[int, int]]:
        """The test's own read of the topic: (partition, offset) of every record a consumer with this
        isolation level is served, up to the end offsets it may read."""
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"raw-{uuid.uuid4().hex[:6]}",
                             "isolation.level": isolation, "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "enable.partition.eof": True})
        seen: set[tuple[int, int]] = set()
        try:
            consumer.assign([TopicPartition(self.name, p, 0) for p in range(PARTITIONS)])
            at_end: set[int] = set()
            while len(at_end) < PARTITIONS:
                msg = consumer.poll(10)
                assert msg is not None, f"no end of {self.name} within 10 s"
                if msg.error():
                    assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                    at_end.add(msg.partition())
                    continue
                seen.add((msg.partition(), msg.offset()))
        finally:
            consumer.close()
        return seen


def documented_config(section: str, containing: str = "") -> str:
    """The first TOML block of docs/audit.md's section ``section`` (with ``containing`` in it): the config a
    user copies."""
    text = DOCS.read_text().split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    blocks = [b.split("```", 1)[0] for b in text.split("```toml\n")[1:]]
    return next(b for b in blocks if containing in b)


def audit(config: Path, *extra: str) -> tuple[int, dict]:
    """(exit code, report) of `eosctl audit`; exit 2: the report is {"error": its one line}."""
    result = eosctl("audit", "-c", str(config), "--engine", "local", "--format", "json", *extra, columns=None)
    if result.exit_code == 2:
        return 2, {"error": result.stderr}
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


def offsets_found(report: dict, kind: str, held: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """The offsets of ``held`` the report's findings of ``kind`` cover; each finding's count is the number
    of them it covers and its range starts and ends on one (no finding is wider than what it names). A
    range may span offsets that hold no committed record (markers, aborted records): they are not in
    ``held``."""
    out: set[tuple[int, int]] = set()
    for f in report["findings"]:
        if f["kind"] != kind:
            continue
        p = f["partition"]
        mine = {(p, o) for o in range(f["first_offset"], f["last_offset"] + 1) if (p, o) in held}
        assert (p, f["first_offset"]) in mine and (p, f["last_offset"]) in mine, f
        out |= mine
    return out


def dump_log(cluster, topic: str,
             partition: int) -> tuple[list[tuple[int, int, int]], list[tuple[int, int, str]]]:
    """Kafka's DumpLogSegments over the partition's first segment: its data batches (first, last, producer
    id) and its control markers (offset, producer id, COMMIT or ABORT)."""
    from eosctl.sandbox.apache_kafka import tool

    (segment,) = Path(cluster.home).rglob(f"{topic}-{partition}/00000000000000000000.log")
    out = tool(cluster, "org.apache.kafka.tools.DumpLogSegments", "--files", str(segment), "--print-data-log")
    batches, markers, pid = [], [], None
    for line in out.stdout.splitlines():
        fields = dict(re.findall(r"(\w+): (\S+)", line))
        if line.startswith("baseOffset:"):
            pid = int(fields["producerId"])
            if fields["isControl"] == "false":
                batches.append((int(fields["baseOffset"]), int(fields["lastOffset"]), pid))
        elif line.startswith("| offset:") and "endTxnMarker" in fields:
            markers.append((int(fields["offset"]), pid, fields["endTxnMarker"]))
    return batches, markers


def assert_phantom_causes(report: dict, cluster, topic: str) -> None:
    """Each phantom_aborted finding's cause names the transaction (its producer id) and its ABORT marker, as
    Kafka's own DumpLogSegments shows the log (the first ABORT marker of that producer after the records:
    the coordinator writes markers after the commit or abort returns, so other records may come between),
    and the Spark option that keeps them out."""
    for p in range(PARTITIONS):
        batches, markers = dump_log(cluster, topic, p)
        for f in (f for f in report["findings"] if f["kind"] == "phantom_aborted" and f["partition"] == p):
            pid = next(pid for first, last, pid in batches if first <= f["first_offset"] <= last)
            marker = min(o for o, mpid, kind in markers if mpid == pid and kind == "ABORT"
                         and o > f["last_offset"])
            assert f"producer {pid} epoch 0's transaction" in f["cause"]["summary"]
            assert f"ABORT marker at {marker}" in f["cause"]["summary"]
            assert "kafka.isolation.level=read_committed" in f["cause"]["summary"]


def explained(report: dict, tmp_path: Path) -> str:
    """`eosctl explain` of the report, its whitespace folded."""
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(report))
    result = eosctl("explain", str(saved), columns=None, terminal_width=400)
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def spark_jars(*poms: str) -> str:
    """The jars of the poms (eosctl/sandbox/jvm) PySpark doesn't bundle itself, for spark.jars: a second
    copy of an artifact Spark has (Hadoop, Scala, log4j) would shadow or clash with its own."""
    import pyspark

    from eosctl.sandbox import maven

    def artifact(jar: str) -> str:
        return re.sub(r"-[0-9][^-]*\.jar$", "", jar)

    own = {artifact(j) for j in os.listdir(Path(pyspark.__file__).parent / "jars")}
    out = []
    for name in poms:
        directory = maven.jars(name)
        out += [str(directory / j) for j in sorted(os.listdir(directory))
                if j.endswith(".jar") and artifact(j) not in own]
    return ",".join(out)


class Job:
    """One run of spark_job.py, in a process group of its own (a kill reaches its JVM too)."""

    def __init__(self, log: Path, args: list[str]) -> None:
        self.log = log
        with log.open("ab") as out:
            out.write(f"--- start: {' '.join(args)}\n".encode())
            out.flush()
            env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
            self.proc = subprocess.Popen([sys.executable, str(JOB), *args], stdout=out,
                                         stderr=subprocess.STDOUT, env=env,
                                         preexec_fn=procs.die_with_parent)

    def wait_until(self, what: str, ready: Callable[[], bool], seconds: float) -> None:
        """helpers.wait_until, failing at once when the Spark job exited; its log on failure."""
        helpers.wait_until(what, ready, seconds, interval=0.02, gone=exited("the Spark job", self.proc),
                           detail=self.tail)

    def finish(self) -> None:
        try:
            self.proc.wait(RUN_S)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"the Spark job did not finish within {RUN_S} s\n{self.tail()}")
        assert self.proc.returncode == 0, self.tail()

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])


def batches(checkpoint: Path, log: str) -> set[int]:
    """The batch ids in one of the checkpoint's logs (offsets: planned; commits: done)."""
    d = checkpoint / log
    return {int(n) for n in os.listdir(d) if n.isdigit()} if d.is_dir() else set()


def mid_batch(checkpoint: Path) -> bool:
    """A batch after the first is planned (its offsets written) and not committed: the job is inside it."""
    planned, done = batches(checkpoint, "offsets"), batches(checkpoint, "commits")
    return bool(done) and any(n >= 1 and n not in done for n in planned)


class Sink:
    """One format's queries (parquet or delta): their output directories and checkpoints, and the config
    docs/audit.md gives for them."""

    def __init__(self, streams: Streams, fmt: str, max_offsets: int, fresh_max_offsets: int) -> None:
        self.streams, self.fmt = streams, fmt
        self.max_offsets = {"committed": max_offsets, "default": max_offsets, "fresh": fresh_max_offsets}
        home = streams.home / fmt
        self.out = {q: home / q / "out" for q in ("committed", "default")}
        self.checkpoint = {q: home / q / "checkpoint" for q in ("committed", "default")}
        # The committed query restarted without its checkpoint: a new one.
        self.out["fresh"], self.checkpoint["fresh"] = self.out["committed"], home / "fresh-checkpoint"

    def query(self, name: str) -> list[str]:
        isolation = "default" if name == "default" else "read_committed"
        return ["--query", f"{self.fmt},{isolation},{self.out[name]},{self.checkpoint[name]},"
                           f"{self.max_offsets[name]}"]

    def config(self, query: str, sink: str | Path | None = None) -> Path:
        """The config of docs/audit.md's Spark section for this format, naming the query's directory (or
        `sink`) and its checkpoint."""
        s = self.streams
        path = s.home / f"{self.fmt}-{query}-{uuid.uuid4().hex[:6]}.toml"
        text = (documented_config("Spark Structured Streaming", f'{self.fmt} = "')
                .replace('["orders"]', f'["{s.topic.name}"]')
                .replace("/data/orders", str(sink or self.out[query]))
                .replace("/checkpoints/orders", str(self.checkpoint[query])))
        path.write_text(f'[clusters.local]\nbootstrap_servers = "{s.bootstrap}"\n\n{text}')
        return path


class Streams:
    """The topic, each format's queries, and the job runs: one job runs the queries of every format (one
    Spark start for all of them)."""

    def __init__(self, bootstrap: str, home: Path, jars: str,
                 max_offsets: dict[str, tuple[int, int]]) -> None:
        """``max_offsets``: format -> offsets a batch of its queries (maxOffsetsPerTrigger), and of its
        committed query restarted with a fresh checkpoint."""
        self.topic = TxnTopic(bootstrap, "spark-")
        self.home, self.jars, self.bootstrap = home, jars, bootstrap
        self.sinks = {fmt: Sink(self, fmt, *rates) for fmt, rates in max_offsets.items()}
        self.jobs: list[Job] = []

    def start(self, *queries: str) -> Job:
        """One job running the named queries of every format, each on its checkpoint."""
        args = ["--bootstrap", self.bootstrap, "--topic", self.topic.name, "--jars", self.jars]
        for sink in self.sinks.values():
            for name in queries:
                args += sink.query(name)
        job = Job(self.home / "job.log", args)
        self.jobs.append(job)
        return job

    def run_killed_and_restarted(self) -> None:
        """The committed and default queries in one job, SIGKILLed mid-batch (where every committed query
        has a batch after its first planned in its offsets log, not committed), then restarted on their
        checkpoints and run to the end."""
        first = self.start("committed", "default")
        committed = [s.checkpoint["committed"] for s in self.sinks.values()]
        first.wait_until("a batch in progress in every committed query",
                         lambda: all(mid_batch(c) for c in committed), RUN_S)
        first.kill()
        self.start("committed", "default").finish()

    def close(self) -> None:
        for job in self.jobs:
            job.kill()
        self.topic.close()
