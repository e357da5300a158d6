"""Spark Structured Streaming into a Delta table, audited as Spark wrote it (tests/streaming/spark_job.py, a
process of its own on the project's PySpark 4.2 with spark-sql-kafka 4.2.0 and delta-spark 4.4.0 from Maven
Central, the session configured as Delta's docs say).

As tests/integration/test_spark_streaming.py does for the Parquet file sink: two queries read one
transactional topic (committed, aborted and a still-open transaction) into Delta tables, each with its
checkpoint, one with `kafka.isolation.level=read_committed` and one with Spark's default; the job is
SIGKILLed mid-batch and restarted on the same checkpoints. Expected results come from the test's own reads:
the topic with a read_committed and a read_uncommitted consumer, the tables with the `deltalake` library
(the version their `_delta_log` holds).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from eosctl.cli import main
from tests.streaminghelp import (
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
    # Delta commits a batch slower than the file sink: three batches a query (the topic holds ~280 offsets),
    # enough for the kill to land inside one after the first; the replay in one batch.
    s = Streams(bootstrap, tmp_path_factory.mktemp("spark-delta"), spark_jars("spark-kafka", "spark-delta"),
                "delta", max_offsets=100, fresh_max_offsets=1000)
    try:
        s.run_killed_and_restarted()
        yield s
    finally:
        s.close()


def table(directory: Path) -> Counter:
    """(partition, offset) -> rows of the table's current version."""
    from deltalake import DeltaTable

    rows = DeltaTable(str(directory)).to_pyarrow_table(columns=["partition", "offset"]).to_pylist()
    return Counter((r["partition"], r["offset"]) for r in rows)


def test_read_committed_query_killed_and_restarted_audits_clean_with_the_checkpoints_offsets(streams):
    committed = streams.topic.read("read_committed")
    assert committed == set(streams.topic.committed)
    assert table(streams.out["committed"]) == Counter(committed)  # every committed record once

    code, report = audit(streams.config("committed"))
    assert (code, report["findings"]) == (0, [])
    assert sum(p["sink_rows"] for p in report["partitions"]) == len(committed)

    # The stored offsets are the checkpoint's: offsets/N of its last commits/N, the Kafka source's
    # {topic: {partition: next offset}} on its third line.
    checkpoint = streams.checkpoint["committed"]
    last = max(batches(checkpoint, "commits"))
    ends = json.loads((checkpoint / "offsets" / str(last)).read_text().splitlines()[2])[streams.topic.name]
    result = CliRunner().invoke(main, ["ledger", "-c", str(streams.config("committed")), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert {p["partition"]: p["stored_offset"] for p in json.loads(result.stdout)["partitions"]} == \
        {int(p): o for p, o in ends.items()}


def test_default_isolation_lands_aborted_records_found_as_phantoms_naming_the_spark_option(streams,
                                                                                           apache_kafka,
                                                                                           tmp_path):
    rows = table(streams.out["default"])
    held = set(rows)
    aborted = held & set(streams.topic.aborted)
    still_open = held & set(streams.topic.open)
    assert aborted == set(streams.topic.aborted) and still_open and set(rows.values()) == {1}
    assert held - aborted - still_open == streams.topic.read("read_committed")
    # the test's own read_uncommitted read of the topic serves exactly these aborted records
    assert streams.topic.read("read_uncommitted") & set(streams.topic.aborted) == aborted

    code, report = audit(streams.config("default"))
    assert code == 1
    assert offsets_found(report, "phantom_aborted", aborted) == aborted
    assert sum(f["count"] for f in report["findings"] if f["kind"] == "phantom_aborted") == len(aborted)
    assert offsets_found(report, "phantom_uncommitted", still_open) == still_open
    assert {f["kind"] for f in report["findings"]} == {"phantom_aborted", "phantom_uncommitted"}
    assert_phantom_causes(report, apache_kafka, streams.topic.name)
    assert "option kafka.isolation.level=read_committed" in explained(report, tmp_path)


def test_fresh_checkpoint_replays_every_batch_into_the_table_found_as_duplicates(streams):
    """A restart without the checkpoint is a new query id: Delta's sink skips only the batches its log
    recorded for the old one, so the whole replay lands a second time."""
    before = table(streams.out["committed"])
    streams.start("fresh").finish()
    after = table(streams.out["committed"])
    twice = {po for po, n in after.items() if n == 2}
    assert set(after) == set(before) and set(after.values()) == {2}
    assert twice == streams.topic.read("read_committed")

    code, report = audit(streams.config("fresh"))
    assert code == 1
    assert offsets_found(report, "duplicate", set(streams.topic.committed)) == twice
    assert sum(f["count"] for f in report["findings"]) == len(twice)
    assert {f["kind"] for f in report["findings"]} == {"duplicate"}
