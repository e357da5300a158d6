"""Spark Structured Streaming sinks audited as Spark wrote them (tests/streaming/spark_job.py, a process of
its own on the project's PySpark 4.2 with spark-sql-kafka 4.2.0 and delta-spark 4.4.0 from Maven Central).

Four queries read one transactional topic (committed, aborted and a still-open transaction, tests/
support/streaming.py), two into Parquet file sinks and two into Delta tables, each with its checkpoint: of
each
format one with `kafka.isolation.level=read_committed`, one with Spark's default (the Java consumer's
read_uncommitted). They run in one job (one Spark start), SIGKILLed mid-batch (a batch planned in each
committed query's offsets log, not committed) and restarted on the same checkpoints. Expected results come
from the test's own reads: the topic with a read_committed and a read_uncommitted consumer, the Parquet
tables with Spark's own reader (the suite's `spark` session), which lists only the files the sink's
`_spark_metadata` log committed, the Delta tables with the `deltalake` library (the version their
`_delta_log` holds).
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner

from eosctl.cli import main
from tests.support.streaming import (
    Sink,
    Streams,
    assert_phantom_causes,
    audit,
    batches,
    explained,
    offsets_found,
    spark_jars,
)

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def streams(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Streams]:
    """The queries run in one job, SIGKILLed mid-batch, then restarted on their checkpoints and run to the
    end. The topic holds ~280 offsets: the file sink's queries run 7 batches (fewer than 10, where its log
    compacts), Delta's, slower to commit one, three; the kill lands inside a batch after the first of both
    committed queries.
    Restarted without its checkpoint, the file sink's committed query runs smaller batches than its first run
    (so to more batch ids than the sink's log holds); Delta's replays in one batch."""
    s = Streams(bootstrap, tmp_path_factory.mktemp("spark-streams"), spark_jars("spark-kafka", "spark-delta"),
                {"parquet": (40, 26), "delta": (100, 1000)})
    try:
        s.run_killed_and_restarted()
        yield s
    finally:
        s.close()


@pytest.fixture(scope="module")
def parquet(streams: Streams) -> Sink:
    return streams.sinks["parquet"]


@pytest.fixture(scope="module")
def delta(streams: Streams) -> Sink:
    return streams.sinks["delta"]


@pytest.fixture(scope="module")
def replayed(streams: Streams, spark) -> dict[str, Counter]:
    """The committed queries restarted with a fresh checkpoint (one job for both formats), after the tests
    of the first run's tables; their tables before."""
    before = {"parquet": table(spark, streams.sinks["parquet"].out["committed"]),
              "delta": delta_table(streams.sinks["delta"].out["committed"])}
    streams.start("fresh").finish()
    return before


def table(spark, directory: Path) -> Counter:
    """(partition, offset) -> rows, as Spark reads the sink's directory (its _spark_metadata log)."""
    return Counter((r["partition"], r["offset"]) for r in
                   spark.read.parquet(str(directory)).select("partition", "offset").collect())


def delta_table(directory: Path) -> Counter:
    """(partition, offset) -> rows of the table's current version."""
    from deltalake import DeltaTable

    rows = DeltaTable(str(directory)).to_pyarrow_table(columns=["partition", "offset"]).to_pylist()
    return Counter((r["partition"], r["offset"]) for r in rows)


def test_read_committed_query_killed_and_restarted_audits_clean_and_stray_files_change_nothing(
        streams, parquet, spark):
    committed = streams.topic.read("read_committed")
    assert committed == set(streams.topic.committed)
    out = parquet.out["committed"]
    assert table(spark, out) == Counter(committed)  # every committed record once, as Spark reads it

    code, report = audit(parquet.config("committed"))
    assert (code, report["findings"]) == (0, [])
    assert sum(p["sink_rows"] for p in report["partitions"]) == len(committed)

    # A stray part file (what a killed batch leaves, here a copy of a committed one) is not in Spark's table
    # and not in the audit of the directory; a glob over the directory reads its rows twice.
    part = next(p for p in sorted(out.glob("part-*.parquet")))
    planted = out / "part-99999-stray-c000.snappy.parquet"
    shutil.copy(part, planted)
    assert table(spark, out) == Counter(committed)
    assert audit(parquet.config("committed"))[0] == 0
    code, report = audit(parquet.config("committed", f"{out}/*.parquet"))
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


def test_default_isolation_lands_aborted_records_found_as_phantoms_naming_the_spark_option(
        streams, parquet, spark, apache_kafka, tmp_path):
    rows = table(spark, parquet.out["default"])
    held = set(rows)
    aborted = held & set(streams.topic.aborted)
    still_open = held & set(streams.topic.open)
    assert aborted and still_open and set(rows.values()) == {1}
    assert held - aborted - still_open == streams.topic.read("read_committed")

    code, report = audit(parquet.config("default"))
    assert code == 1
    assert offsets_found(report, "phantom_aborted", aborted) == aborted
    assert offsets_found(report, "phantom_uncommitted", still_open) == still_open
    assert {f["kind"] for f in report["findings"]} == {"phantom_aborted", "phantom_uncommitted"}

    assert_phantom_causes(report, apache_kafka, streams.topic.name)
    assert "option kafka.isolation.level=read_committed" in explained(report, tmp_path)


def test_delta_read_committed_query_killed_and_restarted_audits_clean_with_the_checkpoints_offsets(
        streams, delta):
    committed = streams.topic.read("read_committed")
    assert committed == set(streams.topic.committed)
    assert delta_table(delta.out["committed"]) == Counter(committed)  # every committed record once

    code, report = audit(delta.config("committed"))
    assert (code, report["findings"]) == (0, [])
    assert sum(p["sink_rows"] for p in report["partitions"]) == len(committed)

    # The stored offsets are the checkpoint's: offsets/N of its last commits/N, the Kafka source's
    # {topic: {partition: next offset}} on its third line.
    checkpoint = delta.checkpoint["committed"]
    last = max(batches(checkpoint, "commits"))
    ends = json.loads((checkpoint / "offsets" / str(last)).read_text().splitlines()[2])[streams.topic.name]
    result = CliRunner().invoke(main, ["ledger", "-c", str(delta.config("committed")), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert {p["partition"]: p["stored_offset"] for p in json.loads(result.stdout)["partitions"]} == \
        {int(p): o for p, o in ends.items()}


def test_delta_default_isolation_lands_aborted_records_found_as_phantoms_naming_the_spark_option(
        streams, delta, apache_kafka, tmp_path):
    rows = delta_table(delta.out["default"])
    held = set(rows)
    aborted = held & set(streams.topic.aborted)
    still_open = held & set(streams.topic.open)
    assert aborted == set(streams.topic.aborted) and still_open and set(rows.values()) == {1}
    assert held - aborted - still_open == streams.topic.read("read_committed")
    # the test's own read_uncommitted read of the topic serves exactly these aborted records
    assert streams.topic.read("read_uncommitted") & set(streams.topic.aborted) == aborted

    code, report = audit(delta.config("default"))
    assert code == 1
    assert offsets_found(report, "phantom_aborted", aborted) == aborted
    assert sum(f["count"] for f in report["findings"] if f["kind"] == "phantom_aborted") == len(aborted)
    assert offsets_found(report, "phantom_uncommitted", still_open) == still_open
    assert {f["kind"] for f in report["findings"]} == {"phantom_aborted", "phantom_uncommitted"}
    assert_phantom_causes(report, apache_kafka, streams.topic.name)
    assert "option kafka.isolation.level=read_committed" in explained(report, tmp_path)


def test_fresh_checkpoint_replays_into_the_table_found_as_duplicates(
        streams, parquet, replayed, spark):
    """A restart without the checkpoint reads from the earliest offset again. The file sink's log skips the
    batch ids it already holds; the new query's later batches write their records a second time."""
    before = replayed["parquet"]
    after = table(spark, parquet.out["committed"])
    twice = {po for po, n in after.items() if n == 2}
    assert twice and set(after) == set(before) and set(after.values()) == {1, 2}

    code, report = audit(parquet.config("committed"))
    assert code == 1
    assert offsets_found(report, "duplicate", set(streams.topic.committed)) == twice
    assert sum(f["count"] for f in report["findings"]) == len(twice)
    assert {f["kind"] for f in report["findings"]} == {"duplicate"}


def test_delta_fresh_checkpoint_replays_every_batch_into_the_table_found_as_duplicates(
        streams, delta, replayed):
    """A restart without the checkpoint is a new query id: Delta's sink skips only the batches its log
    recorded for the old one, so the whole replay lands a second time."""
    before = replayed["delta"]
    after = delta_table(delta.out["committed"])
    twice = {po for po, n in after.items() if n == 2}
    assert set(after) == set(before) and set(after.values()) == {2}
    assert twice == streams.topic.read("read_committed")

    code, report = audit(delta.config("fresh"))
    assert code == 1
    assert offsets_found(report, "duplicate", set(streams.topic.committed)) == twice
    assert sum(f["count"] for f in report["findings"]) == len(twice)
    assert {f["kind"] for f in report["findings"]} == {"duplicate"}


def test_checkpoint_offsets_are_the_stored_offsets_a_gap_is_explained_by(
        streams, parquet, spark):
    """A file lost from the default query's table (its entry dropped from the log, so Spark's reader lacks
    it too): its committed records are a gap below the offsets the checkpoint kept, so the cause says the
    sink's stored offsets passed them; `ledger` shows those offsets. (Last: it changes that table.)"""
    out = parquet.out["default"]
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
    checkpoint = parquet.checkpoint["default"]
    last = max(batches(checkpoint, "commits"))
    ends = json.loads((checkpoint / "offsets" / str(last)).read_text().splitlines()[2])[streams.topic.name]
    assert all(ends[str(p)] > o for p, o in missing)

    code, report = audit(parquet.config("default"))
    assert code == 1
    assert offsets_found(report, "gap", set(streams.topic.committed)) == missing
    for f in report["findings"]:
        if f["kind"] == "gap":
            assert f"stored offsets are already past them (next offset {ends[str(f['partition'])]})" in \
                f["cause"]["summary"]

    result = CliRunner().invoke(main, ["ledger", "-c", str(parquet.config("default")), "--format", "json"])
    assert result.exit_code == 1, result.output
    ledger = json.loads(result.stdout)
    assert {p["partition"]: p["stored_offset"] for p in ledger["partitions"]} == \
        {int(p): o for p, o in ends.items()}
    assert sum(p["missing_offsets"] for p in ledger["partitions"]) == len(missing)
