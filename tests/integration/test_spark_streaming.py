"""Spark Structured Streaming sinks audited as Spark wrote them (tests/streaming/spark_job.py, a process of
its own on the project's PySpark with spark-sql-kafka 4.2.0 from Maven Central).

Two queries read one transactional topic (committed, aborted and a still-open transaction, tests/
streaminghelp.py) into Parquet file sinks, each with its checkpoint: one with
`kafka.isolation.level=read_committed`, one with Spark's default (the Java consumer's read_uncommitted). The
job is SIGKILLed mid-batch (a batch planned in the checkpoint's offsets log, not committed) and restarted on
the same checkpoints. Expected results come from the test's own reads: the topic with a read_committed and a
read_uncommitted consumer, the tables with Spark's own reader (the suite's `spark` session), which lists only
the files the sink's `_spark_metadata` log committed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner

from eosctl.cli import main
from tests.streaminghelp import TxnTopic, documented_config

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "tests" / "streaming" / "spark_job.py"
MAX_OFFSETS = 40  # records a batch: several batches, so the kill lands between two of them
RUN_S = 420  # one run of the job, Spark's start included, on a busy machine


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


def _die_with_parent() -> None:
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Job:
    """One run of spark_job.py, in a process group of its own (a kill reaches its JVM too)."""

    def __init__(self, log: Path, args: list[str]) -> None:
        self.log = log
        with log.open("ab") as out:
            out.write(f"--- start: {' '.join(args)}\n".encode())
            out.flush()
            env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
            self.proc = subprocess.Popen([sys.executable, str(JOB), *args], stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True, env=env,
                                         preexec_fn=_die_with_parent)

    def wait_until(self, what: str, ready: Callable[[], bool], seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not ready():
            if self.proc.poll() is not None:
                pytest.fail(f"the Spark job exited ({self.proc.returncode}) before {what}:\n{self.tail()}")
            if time.monotonic() > deadline:
                pytest.fail(f"no {what} within {seconds:.0f} s\n{self.tail()}")
            time.sleep(0.02)

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


class Streams:
    """The topic, the queries' directories and the job runs."""

    def __init__(self, bootstrap: str, home: Path, jars: str) -> None:
        self.topic = TxnTopic(bootstrap, "spark")
        self.home, self.jars, self.bootstrap = home, jars, bootstrap
        self.jobs: list[Job] = []
        self.out = {q: home / q / "out" for q in ("committed", "default")}
        self.checkpoint = {q: home / q / "checkpoint" for q in ("committed", "default")}
        # The committed query restarted without its checkpoint: a new one, and smaller batches than its
        # first run's, so it runs to more batch ids than the sink's log holds.
        self.out["fresh"], self.checkpoint["fresh"] = self.out["committed"], home / "fresh-checkpoint"

    def start(self, *queries: str) -> Job:
        """One job running the named queries, each on its checkpoint."""
        args = ["--bootstrap", self.bootstrap, "--topic", self.topic.name, "--jars", self.jars,
                "--max-offsets", str(MAX_OFFSETS)]
        for name in queries:
            isolation = "default" if name == "default" else "read_committed"
            rate = f",{MAX_OFFSETS * 2 // 3}" if name == "fresh" else ""
            args += ["--query", f"parquet,{isolation},{self.out[name]},{self.checkpoint[name]}{rate}"]
        job = Job(self.home / "job.log", args)
        self.jobs.append(job)
        return job

    def config(self, query: str, sink: str | Path | None = None) -> Path:
        """The config of docs/audit.md's Spark section, naming the query's directory (or `sink`) and its
        checkpoint."""
        path = self.home / f"{query}-{uuid.uuid4().hex[:6]}.toml"
        text = (documented_config("Spark Structured Streaming")
                .replace('["orders"]', f'["{self.topic.name}"]')
                .replace("/data/orders", str(sink or self.out[query]))
                .replace("/checkpoints/orders", str(self.checkpoint[query])))
        path.write_text(f'[clusters.local]\nbootstrap_servers = "{self.bootstrap}"\n\n{text}')
        return path


@pytest.fixture(scope="module")
def streams(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Streams]:
    """Both queries run in one job, SIGKILLed mid-batch, then restarted on their checkpoints and run to the
    end."""
    s = Streams(bootstrap, tmp_path_factory.mktemp("spark-streams"), spark_jars("spark-kafka"))
    try:
        first = s.start("committed", "default")
        first.wait_until("a batch in progress", lambda: mid_batch(s.checkpoint["committed"]), RUN_S)
        first.kill()
        s.start("committed", "default").finish()
        yield s
    finally:
        for job in s.jobs:
            job.kill()
        s.topic.close()


def audit(config: Path, *extra: str) -> tuple[int, dict]:
    """(exit code, report); exit 2: the report is {"error": its one line}."""
    result = CliRunner().invoke(main, ["audit", "-c", str(config), "--engine", "local", "--format", "json",
                                       *extra])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    if result.exit_code == 2:
        return 2, {"error": result.stderr}
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


def table(spark, directory: Path) -> Counter:
    """(partition, offset) -> rows, as Spark reads the sink's directory (its _spark_metadata log)."""
    return Counter((r["partition"], r["offset"]) for r in
                   spark.read.parquet(str(directory)).select("partition", "offset").collect())


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


def test_read_committed_query_killed_and_restarted_audits_clean_and_stray_files_change_nothing(streams,
                                                                                                spark):
    committed = streams.topic.read("read_committed")
    assert committed == set(streams.topic.committed)
    out = streams.out["committed"]
    assert table(spark, out) == Counter(committed)  # every committed record once, as Spark reads it

    code, report = audit(streams.config("committed"))
    assert (code, report["findings"]) == (0, [])
    assert sum(p["sink_rows"] for p in report["partitions"]) == len(committed)

    # A stray part file (what a killed batch leaves, here a copy of a committed one) is not in Spark's table
    # and not in the audit of the directory; a glob over the directory reads its rows twice.
    part = next(p for p in sorted(out.glob("part-*.parquet")))
    planted = out / "part-99999-stray-c000.snappy.parquet"
    shutil.copy(part, planted)
    assert table(spark, out) == Counter(committed)
    assert audit(streams.config("committed"))[0] == 0
    code, report = audit(streams.config("committed", f"{out}/*.parquet"))
    # What the kill left beside the table: part files Spark's reader doesn't list (its inputFiles).
    listed = {urlsplit(f).path for f in spark.read.parquet(str(out)).inputFiles()}
    left = [f for f in out.glob("part-*.parquet") if str(f) not in listed and f != planted]
    if any(f.stat().st_size < 12 or f.read_bytes()[-4:] != b"PAR1" for f in left):
        # a file the kill cut short: a glob can't even be read, the directory audits clean
        assert code == 2 and any(f.name in report["error"] for f in left), report["error"]
    else:
        stray = {(r["partition"], r["offset"]) for f in [planted, *left]
                 for r in spark.read.parquet(str(f)).collect()}
        assert code == 1 and offsets_found(report, "duplicate", committed) == stray


def test_default_isolation_lands_aborted_records_found_as_phantoms_naming_the_spark_option(streams, spark,
                                                                                           apache_kafka,
                                                                                           tmp_path):
    rows = table(spark, streams.out["default"])
    held = set(rows)
    aborted = held & set(streams.topic.aborted)
    still_open = held & set(streams.topic.open)
    assert aborted and still_open and set(rows.values()) == {1}
    assert held - aborted - still_open == streams.topic.read("read_committed")

    code, report = audit(streams.config("default"))
    assert code == 1
    assert offsets_found(report, "phantom_aborted", aborted) == aborted
    assert offsets_found(report, "phantom_uncommitted", still_open) == still_open
    assert {f["kind"] for f in report["findings"]} == {"phantom_aborted", "phantom_uncommitted"}

    # The cause names the transaction (its producer id) and its ABORT marker, as Kafka's own DumpLogSegments
    # shows the log: the first ABORT marker of that producer after the records (the coordinator writes
    # markers after the commit or abort returns, so other records may come between).
    for p in range(2):
        batches, markers = dump_log(apache_kafka, streams.topic.name, p)
        for f in (f for f in report["findings"] if f["kind"] == "phantom_aborted" and f["partition"] == p):
            pid = next(pid for first, last, pid in batches if first <= f["first_offset"] <= last)
            marker = min(o for o, mpid, kind in markers if mpid == pid and kind == "ABORT"
                         and o > f["last_offset"])
            assert f"producer {pid} epoch 0's transaction" in f["cause"]["summary"]
            assert f"ABORT marker at {marker}" in f["cause"]["summary"]
            assert "kafka.isolation.level=read_committed" in f["cause"]["summary"]

    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(report))
    explained = CliRunner().invoke(main, ["explain", str(saved)], terminal_width=400)
    assert explained.exit_code == 0, explained.output
    assert "option kafka.isolation.level=read_committed" in " ".join(explained.output.split())


def test_fresh_checkpoint_replays_into_the_table_found_as_duplicates(streams, spark):
    """A restart without the checkpoint reads from the earliest offset again. The file sink's log skips the
    batch ids it already holds; the new query's later batches write their records a second time."""
    before = table(spark, streams.out["committed"])
    streams.start("fresh").finish()
    after = table(spark, streams.out["committed"])
    twice = {po for po, n in after.items() if n == 2}
    assert twice and set(after) == set(before) and set(after.values()) == {1, 2}

    code, report = audit(streams.config("committed"))
    assert code == 1
    assert offsets_found(report, "duplicate", set(streams.topic.committed)) == twice
    assert sum(f["count"] for f in report["findings"]) == len(twice)
    assert {f["kind"] for f in report["findings"]} == {"duplicate"}


def test_checkpoint_offsets_are_the_stored_offsets_a_gap_is_explained_by(streams, spark):
    """A file lost from the default query's table (its entry dropped from the log, so Spark's reader lacks
    it too): its committed records are a gap below the offsets the checkpoint kept, so the cause says the
    sink's stored offsets passed them; `ledger` shows those offsets. (Last: it changes that table.)"""
    out = streams.out["default"]
    before = table(spark, out)
    first = out / "_spark_metadata" / "0"
    header, lost, *rest = first.read_text().splitlines()
    first.write_text("\n".join([header, *rest]) + "\n")
    (out / "_spark_metadata" / ".0.crc").unlink(missing_ok=True)  # Hadoop's checksum of the old text
    lost_rows = {(r["partition"], r["offset"]) for r in
                 spark.read.parquet(json.loads(lost)["path"].removeprefix("file://")).collect()}
    assert table(spark, out) == before - Counter(lost_rows)
    missing = lost_rows & set(streams.topic.committed)
    assert missing

    # The checkpoint's own record of where the last committed batch ended: offsets/N of the highest
    # commits/N, its third line the Kafka source's {topic: {partition: next offset}}.
    checkpoint = streams.checkpoint["default"]
    last = max(batches(checkpoint, "commits"))
    ends = json.loads((checkpoint / "offsets" / str(last)).read_text().splitlines()[2])[streams.topic.name]
    assert all(ends[str(p)] > o for p, o in missing)

    code, report = audit(streams.config("default"))
    assert code == 1
    assert offsets_found(report, "gap", set(streams.topic.committed)) == missing
    for f in report["findings"]:
        if f["kind"] == "gap":
            assert f"stored offsets are already past them (next offset {ends[str(f['partition'])]})" in \
                f["cause"]["summary"]

    result = CliRunner().invoke(main, ["ledger", "-c", str(streams.config("default")), "--format", "json"])
    assert result.exit_code == 1, result.output
    ledger = json.loads(result.stdout)
    assert {p["partition"]: p["stored_offset"] for p in ledger["partitions"]} == \
        {int(p): o for p, o in ends.items()}
    assert sum(p["missing_offsets"] for p in ledger["partitions"]) == len(missing)
