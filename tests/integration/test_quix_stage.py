"""A real third-party stage audited by key: a Quix Streams application (tests/quix/stage_app.py).

The stage reads a topic whose input has aborted transactions among the committed ones (unique keys, so an
output derived from aborted input would be a `phantom_key`), upper-cases each value and writes it under the
same key. Run with `processing_guarantee="exactly-once"`, it is SIGKILLed with a transaction open and
restarted: `eosctl audit` with `lineage = "key"` must find nothing, every committed input once. The same app
at-least-once, killed after writing outputs but before committing its input offsets, replays them: the
audit must name exactly those inputs as `duplicate_key`s, which proves the first test can fail.

Quix runs from .venv-quix (`make test` builds it; quixstreams pins an older confluent-kafka than .venv's).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from eosctl.base import procs
from tests.support import helpers
from tests.support.helpers import exited
from tests.support.stage import Stoppable

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
QUIX_VENV = ROOT / ".venv-quix"
APP = ROOT / "tests" / "quix" / "stage_app.py"
PARTITIONS = 3
BATCH = 40  # input records per transaction
BATCHES = 12  # every third one aborted: 320 committed inputs, 160 aborted
STAGE_DELAY = "0.005"  # seconds per record: slow enough to be killed mid-stream, ~2 s for the whole input


def wait_until(what: str, ready: Callable[[], bool], seconds: float, stage: Stage | None = None) -> None:
    """helpers.wait_until, failing at once when the Quix stage exited; its log on failure."""
    helpers.wait_until(what, ready, seconds, gone=exited("the Quix stage", stage and stage.proc),
                       detail=lambda: stage.log_tail() if stage is not None else "")


@pytest.fixture(scope="session")
def quix_python() -> Path:
    """The Quix venv's interpreter. `make test` builds it first; a bare pytest run builds it here the same
    way (one pinned requirements file), so this test never silently skips."""
    if not (QUIX_VENV / ".installed").exists():
        make = subprocess.Popen(["make", "-C", str(ROOT), "quix-venv"], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            out, _ = make.communicate(timeout=600)
        finally:
            if make.poll() is None:  # timed out or interrupted: pip and all it started go too
                os.killpg(make.pid, signal.SIGKILL)
                make.wait()
        if make.returncode != 0:
            pytest.fail(f"`make test` builds .venv-quix; `make quix-venv` failed:\n{out[-2000:]}")
    return QUIX_VENV / "bin" / "python"


class Stage(Stoppable):
    """One run of the Quix app as a subprocess of its own session (so a kill reaches all it started)."""

    def __init__(self, python: Path, log: Path, args: list[str]) -> None:
        self.log = log
        with log.open("ab") as out:
            out.write(f"--- start: {' '.join(args)}\n".encode())
            out.flush()
            self.proc = subprocess.Popen([str(python), str(APP), *args], stdout=out, stderr=subprocess.STDOUT,
                                         cwd=log.parent, preexec_fn=procs.die_with_parent)

    def signal(self, sig: signal.Signals) -> None:
        os.killpg(self.proc.pid, sig)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        """SIGTERM (Quix closes its consumer and producer), SIGKILL if it is not gone in 15 s."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                pass
        self.kill()

    def log_tail(self) -> str:
        """The log's last 40 lines other than `processed N`, and the last of those."""
        lines = self.log.read_text(errors="replace").splitlines()
        processed = [i for i, line in enumerate(lines) if line.startswith("processed ")]
        keep = [line for i, line in enumerate(lines) if i not in set(processed[:-1])]
        return "\n".join(keep[-40:])


@pytest.fixture
def stages(quix_python: Path, tmp_path: Path) -> Iterator[Callable[..., Stage]]:
    """start(*args) -> Stage; every stage started is killed when the test ends, however it ends."""
    started: list[Stage] = []

    def start(*args: str) -> Stage:
        stage = Stage(quix_python, tmp_path / "stage.log", list(args))
        started.append(stage)
        return stage

    yield start
    for stage in started:
        stage.kill()


class Hop:
    """The input and output topics of one stage, its group, and the committed inputs it must process."""

    def __init__(self, bootstrap: str) -> None:
        name = f"quix{uuid.uuid4().hex[:8]}"
        self.bootstrap = bootstrap
        self.input, self.output, self.group = f"{name}.in", f"{name}.out", f"{name}.stage"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topics = [NewTopic(t, PARTITIONS, 1) for t in (self.input, self.output)]
        for f in admin.create_topics(topics).values():
            f.result(30)
        # (partition, offset) -> key of each committed / aborted input record, from delivery reports.
        self.committed: dict[tuple[int, int], bytes] = {}
        self.aborted: dict[tuple[int, int], bytes] = {}
        self._produce(name)

    def _produce(self, name: str) -> None:
        """Committed and aborted transactions interleaved in the log, from two producers: the sandbox
        (noida-db 0.2.3) answers a read_committed Fetch with every aborted transaction of the partition,
        also those that ended before the fetch offset (Kafka sends only those the fetched range overlaps).
        librdkafka then takes each later batch of that producer for aborted, so a consumer resuming past
        an aborted transaction of the producer that also committed the rest is served nothing: the
        restarted stage would stall. Aborting from a producer of its own keeps the committed batches out
        of the stale list."""
        producers = {kind: Producer({"bootstrap.servers": self.bootstrap,
                                     "transactional.id": f"{name}.{kind}"}) for kind in ("source", "aborter")}
        for producer in producers.values():
            producer.init_transactions(30)
        for b in range(BATCHES):
            aborted = b % 3 == 1  # its keys are never input to anything: an output of one is a phantom
            producer = producers["aborter" if aborted else "source"]
            delivered: dict[tuple[int, int], bytes] = {}

            def report(err, msg, into=delivered) -> None:
                assert err is None, err
                into[(msg.partition(), msg.offset())] = msg.key()

            producer.begin_transaction()
            for i in range(BATCH):
                producer.produce(self.input, key=f"k{b}-{i}".encode(), value=f"v{b}-{i}".encode(),
                                 on_delivery=report)
            assert producer.flush(30) == 0  # in the log even when aborted
            if aborted:
                producer.abort_transaction(30)
                self.aborted.update(delivered)
            else:
                producer.commit_transaction(30)
                self.committed.update(delivered)

    def args(self) -> list[str]:
        return ["--bootstrap", self.bootstrap, "--group", self.group, "--input", self.input,
                "--output", self.output, "--delay", STAGE_DELAY]

    def ends(self) -> dict[int, int]:
        """Per input partition, one past its last committed record: where the stage's offsets end up."""
        ends = dict.fromkeys(range(PARTITIONS), 0)
        for p, o in self.committed:
            ends[p] = max(ends[p], o + 1)
        return ends

    def group_offsets(self) -> dict[int, int]:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group})
        try:
            tps = consumer.committed([TopicPartition(self.input, p) for p in range(PARTITIONS)], 10)
        finally:
            consumer.close()
        return {tp.partition: tp.offset for tp in tps}  # negative: nothing committed

    def output_ends(self, isolation: str) -> list[int]:
        """The output's high watermarks (read_uncommitted) or last stable offsets (read_committed)."""
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "unused",
                             "isolation.level": isolation})
        try:
            return [consumer.get_watermark_offsets(TopicPartition(self.output, p), 10)[1]
                    for p in range(PARTITIONS)]
        finally:
            consumer.close()

    def output_keys(self, isolation: str) -> list[bytes]:
        """Every output record's key, read from the start to the ends taken first."""
        ends = self.output_ends(isolation)
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "unused",
                             "isolation.level": isolation, "enable.auto.commit": False})
        keys: list[bytes] = []
        try:
            consumer.assign([TopicPartition(self.output, p, 0) for p in range(PARTITIONS) if ends[p] > 0])
            deadline = time.monotonic() + 30
            positions = dict.fromkeys(range(PARTITIONS), 0)
            while any(positions[p] < ends[p] for p in range(PARTITIONS)):
                assert time.monotonic() < deadline, f"output not read to {ends} within 30 s: at {positions}"
                for msg in consumer.consume(500, 0.2):
                    if msg.error() is None and msg.offset() < ends[msg.partition()]:
                        keys.append(msg.key())
                for tp in consumer.position([TopicPartition(self.output, p) for p in range(PARTITIONS)]):
                    positions[tp.partition] = max(positions[tp.partition], tp.offset)
        finally:
            consumer.close()
        return keys

    def caught_up(self) -> bool:
        offsets = self.group_offsets()
        return all(offsets[p] >= end for p, end in self.ends().items())

    def audit(self, config: Path) -> tuple[int, dict, str]:
        config.write_text(f'[clusters.sandbox]\nbootstrap_servers = "{self.bootstrap}"\n\n'
                          f'[pipelines.quix]\nsource_topics = ["{self.input}"]\ngroup = "{self.group}"\n\n'
                          f'[pipelines.quix.sink]\nkafka_topic = "{self.output}"\nlineage = "key"\n')
        result = helpers.eosctl("audit", "-c", str(config), "-p", "quix", "--engine", "local", "--format",
                                "json", columns=None)
        return result.exit_code, json.loads(result.stdout), result.stderr


def test_quix_exactly_once_stage_killed_and_restarted_audits_clean(cluster, stages, tmp_path):
    hop = Hop(cluster.bootstrap_servers)
    n = len(hop.committed)
    assert n == BATCH * 8

    first = stages(*hop.args(), "--guarantee", "exactly-once", "--commit-interval", "0.5")

    def open_with_outputs() -> bool:  # a transaction open with outputs in it
        return hop.output_ends("read_uncommitted") != hop.output_ends("read_committed")

    first_aborted = {p: min(o for q, o in hop.aborted if q == p) for p in range(PARTITIONS)}

    def stopped_mid_transaction() -> bool:
        """Input offsets committed past an aborted input transaction (the restart resumes beyond it) and a
        transaction open, judged with the stage SIGSTOPped (so it can't commit between the look and the
        kill); if not, it runs on."""
        if all(o <= first_aborted[p] for p, o in hop.group_offsets().items()):
            return False
        return first.stopped_if(open_with_outputs)

    wait_until("offsets committed past aborted input, a transaction open", stopped_mid_transaction, 30, first)
    first.kill()
    assert open_with_outputs()  # the kill left a transaction open: outputs the restart must not duplicate
    assert not hop.caught_up()  # and input to process

    # The restart has the same transactional.id: it fences the killed run and aborts its open transaction.
    second = stages(*hop.args(), "--guarantee", "exactly-once", "--commit-interval", "0.5")
    wait_until("input offsets committed to the input's end", hop.caught_up, 40, second)
    second.stop()

    # The killed run's open transaction had outputs the restart wrote again: they are in the log, aborted.
    assert len(hop.output_keys("read_uncommitted")) > n
    code, report, err = hop.audit(tmp_path / "eosctl.toml")
    assert (code, report["findings"]) == (0, []), err
    assert report["summary"]["expected_records"] == n
    assert report["summary"]["sink_rows"] == n
    assert report["sink_read_point"]["lineage"] == "key"


def test_quix_at_least_once_stage_killed_before_its_commit_replays_exact_duplicate_keys(cluster, stages,
                                                                                         tmp_path):
    """The control: the same app at-least-once, its offsets never committed before the kill (a commit
    interval of an hour), so the restart writes every output of the first run again."""
    hop = Hop(cluster.bootstrap_servers)
    n = len(hop.committed)

    first = stages(*hop.args(), "--guarantee", "at-least-once", "--commit-interval", "3600")
    wait_until("30 outputs", lambda: sum(hop.output_ends("read_uncommitted")) >= 30, 30, first)
    first.kill()
    assert all(o < 0 for o in hop.group_offsets().values())  # outputs written, no input offset committed
    replayed = set(hop.output_keys("read_uncommitted"))
    assert len(replayed) >= 30

    second = stages(*hop.args(), "--guarantee", "at-least-once", "--commit-interval", "0.5")
    wait_until("input offsets committed to the input's end", hop.caught_up, 40, second)
    second.stop()

    code, report, err = hop.audit(tmp_path / "eosctl.toml")
    assert code == 1, err
    assert {f["kind"] for f in report["findings"]} == {"duplicate_key"}
    assert {f["topic"] for f in report["findings"]} == {hop.input}
    # Exactly the inputs the first run wrote out, at their input offsets (ranges skip aborted ones).
    found = {(p, o) for f in report["findings"] for (p, o) in hop.committed
             if p == f["partition"] and f["first_offset"] <= o <= f["last_offset"]}
    assert found == {po for po, key in hop.committed.items() if key in replayed}
    assert sum(f["count"] for f in report["findings"]) == len(replayed)
    assert report["summary"]["expected_records"] == n
    assert report["summary"]["sink_rows"] == n + len(replayed)
