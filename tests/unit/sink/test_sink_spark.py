"""A Structured Streaming file sink's directory read as Spark reads it (eosctl.sink.spark_files), and the
Kafka offsets its checkpoint keeps (eosctl.sink.spark_checkpoint): the layouts written here are Spark's own
(FileStreamSinkLog: a "v1" line, then one JSON entry per file; compactions every tenth batch as N.compact;
OffsetSeqLog: "v1", the batch's metadata, then one line per source), as tests/integration/
test_spark_streaming.py sees PySpark 4.3.0 write them."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from eosctl.base.errors import SinkError
from eosctl.cli import main
from eosctl.config.model import Sink
from eosctl.sink import StoredOffset, frozen, open_reader
from eosctl.sink.spark_checkpoint import stored_offsets
from eosctl.sink.spark_files import committed_files

WHERE = "pipelines.orders.sink"
COLUMNS = {"topic_column": "topic", "partition_column": "partition", "offset_column": "offset"}


def part(directory: Path, name: str, partition: int, offsets: range) -> Path:
    path = directory / name
    pq.write_table(pa.table({"topic": ["t"] * len(offsets), "partition": pa.array([partition] * len(offsets),
                                                                               pa.int32()),
                             "offset": pa.array(list(offsets), pa.int64())}), path)
    return path


def log(directory: Path, batch: str, *entries: tuple[Path, str]) -> None:
    meta = directory / "_spark_metadata"
    meta.mkdir(exist_ok=True)
    lines = ["v1"] + [json.dumps({"path": f"file://{p}", "size": 1, "isDir": False, "modificationTime": 0,
                                  "blockReplication": 1, "blockSize": 1, "action": action})
                      for p, action in entries]
    (meta / batch).write_text("\n".join(lines))
    (meta / f".{batch}.crc").write_bytes(b"\0")  # Hadoop's checksum beside each: never a batch


def table(tmp_path: Path) -> tuple[Path, list[Path]]:
    """Batches 0..11 with a compaction at 9: files a0..a11; a3 deleted by a later entry; beside them the file
    of batch 11's first run, killed before its log entry (the same offsets as a11)."""
    out = tmp_path / "out"
    out.mkdir()
    files = [part(out, f"part-a{i}.parquet", i % 2, range(i * 10, i * 10 + 10)) for i in range(12)]
    for i in range(9):  # batches before the compaction (Spark may have deleted them: here they stay)
        log(out, str(i), (files[i], "add"))
    log(out, "9.compact", *((f, "add") for f in files[:10]))
    log(out, "10", (files[10], "add"), (files[3], "delete"))
    log(out, "11", (files[11], "add"))
    part(out, "part-a11-killed.parquet", 1, range(110, 120))
    return out, [f for i, f in enumerate(files) if i != 3]


def test_committed_files_are_the_latest_compaction_and_the_batches_after_it(tmp_path):
    out, files = table(tmp_path)
    (out / "_spark_metadata" / "3").unlink()  # below the compaction: not needed
    assert committed_files(str(out)) == sorted(str(f) for f in files)


def test_a_directory_sink_reads_only_the_committed_files_and_freezes_them(tmp_path):
    out, files = table(tmp_path)
    sink = Sink(parquet=str(out), **COLUMNS)
    with open_reader(sink, WHERE) as reader:
        assert sum(s.rows for s in reader.summaries()) == 10 * len(files)
        assert all(s.duplicate_offsets == 0 for s in reader.summaries())
    with frozen(sink, WHERE) as fixed:
        part(out, "part-a13.parquet", 1, range(130, 140))
        log(out, "12", (out / "part-a13.parquet", "add"))  # committed after the freeze: not read
        with open_reader(fixed, WHERE) as reader:
            assert sum(s.rows for s in reader.summaries()) == 10 * len(files)
    # a glob reads the killed run's file too: offsets 110..119 twice
    with open_reader(Sink(parquet=str(out / "*.parquet"), **COLUMNS), WHERE) as reader:
        assert sum(s.duplicate_rows for s in reader.summaries()) == 10


def test_a_plain_directory_is_every_file_not_hidden(tmp_path):
    out = tmp_path / "plain"
    out.mkdir()
    part(out, "a.parquet", 0, range(0, 5))
    (out / "_SUCCESS").write_text("")
    (out / ".a.parquet.crc").write_bytes(b"\0")
    with open_reader(Sink(parquet=str(out), **COLUMNS), WHERE) as reader:
        assert [s.rows for s in reader.summaries()] == [5]


def test_a_damaged_or_empty_log_is_one_line(tmp_path):
    out, _ = table(tmp_path)
    (out / "_spark_metadata" / "10").unlink()
    with pytest.raises(SinkError, match=r"batch 10 of the Spark file sink's log is missing"):
        open_reader(Sink(parquet=str(out), **COLUMNS), WHERE)
    (out / "_spark_metadata" / "10").write_text("v9\n")
    with pytest.raises(SinkError, match=r"log of version v9; eosctl reads v1"):
        committed_files(str(out))
    empty = tmp_path / "empty"
    (empty / "_spark_metadata").mkdir(parents=True)
    config = tmp_path / "c.toml"
    config.write_text(f'[clusters.c]\nbootstrap_servers = "127.0.0.1:1"\n[pipelines.orders]\n'
                      f'source_topics = ["t"]\n[pipelines.orders.sink]\nparquet = "{empty}"\n')
    result = CliRunner().invoke(main, ["ledger", "-c", str(config), "--no-scan"])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"eosctl: error: {empty} holds no committed Parquet files yet (a Spark file sink commits a batch's "
        f"files in its _spark_metadata log); check [pipelines.orders.sink].parquet or --sink-parquet"]


def checkpoint(tmp_path: Path, batches: dict[int, dict], commits: list[int]) -> Path:
    ck = tmp_path / "checkpoint"
    for d in ("offsets", "commits"):
        (ck / d).mkdir(parents=True)
    for n, sources in batches.items():
        lines = ["v1", json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 0, "conf": {}})]
        lines += ["-" if s is None else json.dumps(s) for s in sources]
        (ck / "offsets" / str(n)).write_text("\n".join(lines))
    for n in commits:
        (ck / "commits" / str(n)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    return ck


def test_checkpoint_offsets_are_the_last_committed_batchs_end(tmp_path):
    ck = checkpoint(tmp_path, {0: [{"t": {"0": 5, "1": 7}}], 1: [{"t": {"0": 9, "1": 7}}, None],
                               2: [{"t": {"0": 20, "1": 30}}]}, commits=[0, 1])  # batch 2 planned only
    assert stored_offsets(str(ck)) == [StoredOffset("t", 0, 9), StoredOffset("t", 1, 7)]
    assert stored_offsets(str(checkpoint(tmp_path / "new", {0: [{"t": {"0": 1}}]}, []))) == []
    with pytest.raises(SinkError, match=r"is not a Spark checkpoint \(it has no offsets directory\); check "
                                        r"\[sink\]\.spark_checkpoint"):
        stored_offsets(str(tmp_path))


def test_a_frozen_sink_keeps_the_checkpoint_as_it_was(tmp_path):
    out, files = table(tmp_path)
    ck = checkpoint(tmp_path, {0: [{"t": {"0": 5}}], 1: [{"t": {"0": 9}}]}, commits=[0, 1])
    sink = Sink(parquet=str(out), spark_checkpoint=str(ck), **COLUMNS)
    with frozen(sink, WHERE) as fixed:
        # the query goes on: batch 2 commits after the freeze
        (ck / "offsets" / "2").write_text((ck / "offsets" / "1").read_text().replace("9", "30"))
        (ck / "commits" / "2").write_text("v1\n{}")
        with open_reader(fixed, WHERE) as reader:
            assert reader.stored_offsets() == [StoredOffset("t", 0, 9)]
        assert fixed.frozen_from.spark_checkpoint == str(ck)
    with open_reader(sink, WHERE) as reader:
        assert reader.stored_offsets() == [StoredOffset("t", 0, 30)]
