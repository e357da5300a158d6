"""What the tests of real Kafka-to-Kafka stages share (Kafka's transactional copier, Kafka Streams, Flink):
topics, the test's OWN raw reads of both sides (confluent-kafka consumers, never eosctl), a stage process
it kills and restarts, and the hop audit through the CLI.

    hop = Topics(bootstrap, "copy", partitions=2)
    records = read_records(bootstrap, hop.input, "read_committed")  # [(partition, offset, key, value)]
    code, report, err = audit_hop(tmp_path / "eosctl.toml", bootstrap, hop, group, lineage="value")
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from eosctl.sandbox import maven
from tests.support import helpers
from tests.support.helpers import eosctl
from tests.support.jvm import compile_java
from tests.support.markers import markers_written

Record = tuple[int, int, bytes | None, bytes | None]  # partition, offset, key, value
STAGES = Path(__file__).resolve().parents[1] / "stages"


def compiled_stage(main: str, pom: str) -> Callable[..., tuple[Path, Path]]:
    """A module fixture: tests/stages/<main>.java compiled against the jars of eosctl's <pom> pom, as
    (classes, jars); compiled once per test module that binds it (`stage_classes = compiled_stage(...)`)."""

    @pytest.fixture(scope="module")
    def fixture(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
        jars = maven.jars(pom)
        source = (STAGES / f"{main}.java").read_text()
        return compile_java(tmp_path_factory.mktemp(main.lower()), main, source, jars), jars

    return fixture


@dataclass
class Topics:
    """An input and an output topic of one stage, named uniquely for the test."""

    bootstrap: str
    input: str
    output: str

    @classmethod
    def create(cls, bootstrap: str, name: str, partitions: int, out_partitions: int | None = None) -> Topics:
        name = f"{name}{uuid.uuid4().hex[:8]}"
        topics = cls(bootstrap, f"{name}.in", f"{name}.out")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        new = [NewTopic(topics.input, partitions, 1),
               NewTopic(topics.output, out_partitions or partitions, 1)]
        for f in admin.create_topics(new).values():
            f.result(30)
        return topics


def partitions_of(bootstrap: str, topic: str) -> list[int]:
    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return sorted(meta.topics[topic].partitions)


def ends(bootstrap: str, topic: str, isolation: str) -> dict[int, int]:
    """Each partition's high watermark (read_uncommitted) or last stable offset (read_committed)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "isolation.level": isolation})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1]
                for p in partitions_of(bootstrap, topic)}
    finally:
        consumer.close()


def read_records(bootstrap: str, topic: str, isolation: str, seconds: float = 60) -> list[Record]:
    """Every record of ``topic`` as a consumer with that isolation sees it, from the start to the ends taken
    first: (partition, offset, key, value), in partition and offset order."""
    upto = ends(bootstrap, topic, isolation)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "isolation.level": isolation,
                         "enable.auto.commit": False, "enable.partition.eof": True})
    out: list[Record] = []
    pending = {p for p, e in upto.items() if e > 0}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in pending])
        deadline = time.monotonic() + seconds
        while pending:
            assert time.monotonic() < deadline, f"{topic} not read to {upto} within {seconds:.0f} s"
            for m in consumer.consume(1000, 0.2):
                p = m.partition()
                if m.error() is not None:
                    if m.error().code() == -191:  # _PARTITION_EOF: at the end now
                        pending.discard(p)
                    continue
                if m.offset() < upto[p]:
                    out.append((p, m.offset(), m.key(), m.value()))
                if m.offset() + 1 >= upto[p]:
                    pending.discard(p)
    finally:
        consumer.close()
    return sorted(out, key=lambda r: (r[0], r[1]))


def group_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets of ``topic`` (negative: nothing committed). read_uncommitted: the
    offsets committed so far, even while a transaction holds newer ones pending (read_committed asks for
    stable offsets and waits for that transaction)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "isolation.level": "read_uncommitted"})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in partitions_of(bootstrap, topic)], 10)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in tps}


def wait_until(what: str, ready: Callable[[], bool], seconds: float, *stages: Stage) -> None:
    """helpers.wait_until, failing at once when a stage exited badly; the stages' logs on failure."""
    def gone() -> str | None:
        return next((f"{s.name} exited ({s.proc.returncode})" for s in stages if s.exited_badly()), None)
    helpers.wait_until(what, ready, seconds, gone=gone, detail=lambda: "\n".join(s.tail() for s in stages))


def kill_when(stage: Stage, what: str, ready: Callable[[], bool], *,
              before: Callable[[], bool] = lambda: True, seconds: float = 90) -> None:
    """SIGKILL ``stage`` the first time ``ready()`` holds while it is SIGSTOPped (so it can't commit between
    the look and the kill). ``before``: a look taken with the stage running (committed offsets, say), so the
    freeze is tried only once it holds. Between tries the stage runs freely for a random while: a stage that
    commits on a wall-clock interval catches up at once after a freeze, and frozen in step with the probe
    it would always be caught just after that commit, when no transaction is open."""
    def frozen_ready() -> bool:
        if not any(line.startswith("processed ") for line in stage.lines()) or not before():
            return False
        time.sleep(random.uniform(0.05, 0.4))
        return stage.stopped_if(ready)

    wait_until(what, frozen_ready, seconds, stage)
    stage.kill()


class Stoppable:
    """A stage process that can be paused to look at it."""

    signal: Callable[[int], None]  # the subclass's own: it reaches every process of the stage

    def stopped_if(self, ready: Callable[[], bool]) -> bool:
        """SIGSTOP the stage and look: True (it stays stopped) if ``ready()`` holds, else it runs on. A
        stopped stage can't commit between the look and what the test does next (a kill)."""
        self.signal(signal.SIGSTOP)
        if ready():
            return True
        self.signal(signal.SIGCONT)
        return False


class Stage(Stoppable):
    """One run of a stage's process (a JVM or a Python script), its output appended to ``log`` after a
    `--- start` line; it dies with the test process (the starter's preexec) and is killed at the end."""

    def __init__(self, name: str, cmd: list[str], log: Path, env: dict[str, str] | None = None,
                 preexec: Callable[[], None] | None = None) -> None:
        self.name, self.log = name, log
        with log.open("ab") as out:
            out.write(f"--- start {name}\n".encode())
            out.flush()
            self.start_at = log.stat().st_size
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env={**os.environ, **(env or {})}, preexec_fn=preexec)

    def exited_badly(self) -> bool:
        return self.proc.poll() not in (None, 0)

    def lines(self) -> list[str]:
        """This run's output lines."""
        with self.log.open("rb") as f:
            f.seek(self.start_at)
            return f.read().decode(errors="replace").splitlines()

    def json_lines(self) -> list[dict]:
        out = []
        for line in self.lines():
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass  # a line cut by the kill
        return out

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        """SIGKILL (a hard bounce), and reap it."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
        self.proc.wait(30)

    def stop(self, seconds: float = 30) -> None:
        """SIGTERM (the stage closes its clients), SIGKILL if it is not gone in ``seconds``."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(seconds)
            except subprocess.TimeoutExpired:
                pass
        self.kill()

    def tail(self, n: int = 30) -> str:
        return f"--- {self.name}:\n" + "\n".join(self.lines()[-n:])


def audit_hop(config: Path, bootstrap: str, topics: Topics, group: str, lineage: str,
              *args: str) -> tuple[int, dict, str]:
    """`eosctl audit` of the hop (its output a `kafka_topic` sink), local engine, JSON."""
    config.write_text(f'[clusters.c]\nbootstrap_servers = "{bootstrap}"\n\n'
                      f'[pipelines.stage]\nsource_topics = ["{topics.input}"]\ngroup = "{group}"\n\n'
                      f'[pipelines.stage.sink]\nkafka_topic = "{topics.output}"\nlineage = "{lineage}"\n')
    result = eosctl("audit", "-c", str(config), "-p", "stage", "--engine", "local", "--format", "json", *args,
                    columns=None)
    return result.exit_code, json.loads(result.stdout), result.stderr


def covered(findings: list[dict], kind: str, places: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """The (partition, offset) of ``places`` inside a finding of ``kind`` (a run may span markers)."""
    return {(p, o) for f in findings if f["kind"] == kind for (p, o) in places
            if p == f["partition"] and f["first_offset"] <= o <= f["last_offset"]}


def no_fencing(report: dict) -> bool:
    """No finding's cause blames a fencing (a per-transaction epoch bump is no zombie)."""
    return not any(t.get("fenced") for f in report["findings"] for t in (f.get("cause") or {}).get(
        "transactions", ())) and "fenc" not in json.dumps(report.get("root_causes", []))


def write_input(bootstrap: str, topic: str, batches: int, batch: int) -> tuple[dict, dict]:
    """Committed and aborted transactions interleaved in ``topic`` (every third batch aborted), unique keys
    `k{b}-{i}`: an output of an aborted one's key is derived from aborted input. Returns the committed and
    the aborted records' {(partition, offset): key}, from the delivery reports."""
    from confluent_kafka import Producer

    producers = {kind: Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}.{kind}"})
                 for kind in ("source", "aborter")}
    for producer in producers.values():
        producer.init_transactions(30)
    committed: dict[tuple[int, int], bytes] = {}
    aborted: dict[tuple[int, int], bytes] = {}
    for b in range(batches):
        is_aborted = b % 3 == 1
        producer = producers["aborter" if is_aborted else "source"]
        delivered: dict[tuple[int, int], bytes] = {}

        def report(err, msg, into=delivered) -> None:
            assert err is None, err
            into[(msg.partition(), msg.offset())] = msg.key()

        producer.begin_transaction()
        for i in range(batch):
            producer.produce(topic, key=f"k{b}-{i}".encode(), value=f"v{b}-{i}".encode(), on_delivery=report)
        assert producer.flush(30) == 0
        if is_aborted:
            producer.abort_transaction(30)
            aborted.update(delivered)
        else:
            producer.commit_transaction(30)
            committed.update(delivered)
    markers_written(bootstrap, *(f"{topic}.{kind}" for kind in producers))  # the stage reads a settled log
    return committed, aborted
