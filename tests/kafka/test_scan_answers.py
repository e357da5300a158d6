"""Issue 9, cases 1-3: every Fetch answer Apache Kafka can give ends in a correct classification after
retries, or in exit 2 with one line naming the partition; never in offsets classified unread.

The CLI runs against the scripted broker (tests/kafkasim), which answers the way Kafka's ReplicaManager
does: errors with no records and -1 offsets, throttled fetches with no partitions (KIP-219), remote
fetches throttled with no records and no error (KIP-405).
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from tests.kafkasim import (
    FENCED_LEADER_EPOCH,
    KAFKA_STORAGE_ERROR,
    UNKNOWN_LEADER_EPOCH,
    KafkaSim,
)
from tests.support.helpers import eosctl

cli = eosctl  # 200 columns: no cell wraps


def log_doc(sim: KafkaSim, topic: str = "t", partition: int = 0) -> dict:
    result = cli("log", "--bootstrap", sim.bootstrap, "--topic", topic, "--partition", str(partition),
                 "--no-batches", "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def ranges(doc: dict) -> list[tuple[int, int, str]]:
    return [(r["first"], r["last"], r["kind"]) for r in doc["ranges"]]


@pytest.fixture
def short_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Give up on a partition that never answers usefully after 1 s instead of 30."""
    monkeypatch.setattr("eosctl.cluster.logscan.RETRY_DEADLINE_S", 1.0, raising=False)


# --- case 1: the solo re-fetch's error ---------------------------------------------------------------

def sink_with(path: Path, rows: dict[int, list[int]]) -> str:
    """A DuckDB sink holding topic t's offsets per partition."""
    values = [("t", p, o) for p, offsets in rows.items() for o in offsets]
    with duckdb.connect(str(path)) as con:
        con.execute("create table sink (src_topic varchar, src_partition int, src_offset bigint)")
        con.executemany("insert into sink values (?, ?, ?)", values)
    return str(path)


def two_partitions(sim: KafkaSim) -> None:
    for partition in (0, 1):
        p = sim.partition("t", partition)
        p.data(5)
        p.data(5)


@pytest.mark.parametrize("how", ["leader moved", FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
                                 KAFKA_STORAGE_ERROR])
def test_ledger_flags_the_gap_when_the_solo_refetch_fails(kafka_sim: KafkaSim, tmp_path: Path, how) -> None:
    """Partition 0 is left empty in the two-partition Fetch (its max_bytes went to partition 1), and
    the re-fetch alone fails: the scan must retry, not call offsets 0..9 holes. The sink misses 3..7."""
    two_partitions(kafka_sim)
    sink = sink_with(tmp_path / "sink.duckdb", {0: [0, 1, 2, 8, 9], 1: list(range(10))})
    kafka_sim.inject("fetch", "t", 0, no_records=True)
    if how == "leader moved":
        kafka_sim.inject("fetch", "t", 0, before=lambda: kafka_sim.move_leader("t", 0, node=1))
    else:
        kafka_sim.inject("fetch", "t", 0, error=how)
    result = cli("ledger", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--sink-duckdb", sink,
                 "--format", "json")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    p0, p1 = doc["partitions"]
    assert (p0["missing_offsets"], p1["missing_offsets"], p1["flags"]) == (5, 0, [])
    assert [(f["kind"], f["first_offset"], f["last_offset"], f["count"]) for f in p0["flags"]] == [
        ("gap", 3, 7, 5)]
    if how == "leader moved":  # the partition was read from its new leader
        assert (1, "t", 0, 0) in kafka_sim.fetches


def test_log_follows_the_leader_moving_before_listoffsets_and_before_fetch(kafka_sim: KafkaSim) -> None:
    """Kafka answers NOT_LEADER_OR_FOLLOWER from the old leader (ReplicaManager.getPartitionOrException);
    the scan looks the leader up again (Metadata) and asks the new one."""
    p = kafka_sim.partition("t", 0)
    p.data(3)
    p.txn(5, 0, 2)
    p.abort(5, 0)
    kafka_sim.inject("list_offsets", "t", 0, before=lambda: kafka_sim.move_leader("t", 0, node=1))
    kafka_sim.inject("fetch", "t", 0, before=lambda: kafka_sim.move_leader("t", 0, node=0))
    doc = log_doc(kafka_sim)
    assert ranges(doc) == [(0, 2, "DATA"), (3, 4, "ABORTED"), (5, 5, "MARKER")]
    assert [(node, offset) for node, _, _, offset in kafka_sim.fetches] == [(1, 0), (0, 0)]


# --- case 2: retention during the scan ---------------------------------------------------------------

def test_log_start_moving_mid_scan_continues_from_listoffsets_earliest(kafka_sim: KafkaSim) -> None:
    """The second Fetch meets retention: Kafka answers OFFSET_OUT_OF_RANGE with log_start_offset -1. The
    scan asks ListOffsets(earliest) and goes on from there; what was removed is below the log start."""
    p = kafka_sim.partition("t", 0)
    for _ in range(4):
        p.data(5, value_size=80_000)  # 400 kB batches: the first 1 MiB Fetch holds two and a piece
    kafka_sim.inject("fetch", "t", 0, after=1, before=lambda: p.delete_before(15))
    doc = log_doc(kafka_sim)
    assert [f[3] for f in kafka_sim.fetches] == [0, 10, 15]
    assert ("t", 0, -2, 0) in kafka_sim.list_offsets[3:]  # asked again after the first Fetch
    assert (doc["log_start_offset"], doc["scanned_from"], doc["scanned_to"]) == (15, 15, 20)
    assert ranges(doc) == [(15, 19, "DATA")] and doc["counts"]["HOLE"] == 0
    assert doc["warnings"] == ["the log start moved from 0 to 15 during the scan (retention): offsets below "
                               "15 can no longer be verified"]


def test_ledger_passes_when_retention_removes_offsets_the_sink_holds(kafka_sim: KafkaSim,
                                                                    tmp_path: Path) -> None:
    p = kafka_sim.partition("t", 0)
    p.data(10)
    p.data(10)
    sink = sink_with(tmp_path / "sink.duckdb", {0: list(range(20))})
    kafka_sim.inject("fetch", "t", 0, before=lambda: p.delete_before(10))
    result = cli("ledger", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--sink-duckdb", sink,
                 "--format", "json")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["partitions"]
    assert (row["rows"], row["missing_offsets"], row["flags"]) == (20, 0, [])


def test_the_audit_task_counts_what_retention_removed_as_unverifiable(kafka_sim: KafkaSim,
                                                                       tmp_path: Path) -> None:
    """What one `eosctl audit` task does for its partitions (scan, then reconcile with the sink), run
    in-process: the sink's rows below the moved log start are unverifiable_below, not findings."""
    from auditors.plan import TaskSettings, plan
    from auditors.sources import KafkaSource
    from auditors.task import audit_group, open_task_reader
    from eosctl.config.model import Cluster, Sink

    p = kafka_sim.partition("t", 0)
    p.data(10)
    p.data(10)
    sink = sink_with(tmp_path / "sink.duckdb", {0: list(range(20))})
    source = KafkaSource(Cluster(name="sim", bootstrap_servers=kafka_sim.bootstrap))
    items = plan(source, ["t"], {("t", 0): 20})  # the driver: leaders and offsets, before any task
    kafka_sim.inject("fetch", "t", 0, before=lambda: p.delete_before(10))
    settings = TaskSettings(temp_directory=str(tmp_path / "tmp"))
    with open_task_reader(Sink(duckdb=sink), settings) as reader:
        rows = audit_group(items, source, reader, want_ranges=False, group=None).rows
    row, task = rows  # one summary, no findings; `detail` carries the gap map's log segments
    assert task["rec"] == "task" and task["scan_seconds"] >= 0 and task["reconcile_seconds"] >= 0
    assert {k: v for k, v in row.items() if k != "detail"} == {
        "rec": "summary", "topic": "t", "partition": 0, "log_start_offset": 10, "last_stable_offset": 20,
        "high_watermark": 20, "expected_records": 10, "sink_rows": 20, "unverifiable": 10, "present": True,
            "dead_lettered": None, "filtered": None}


# --- case 3: throttled and empty answers -------------------------------------------------------------

def compacted_log(sim: KafkaSim) -> None:
    """0..4 data, 5..7 removed by the cleaner with their batches (a proven hole), 8..9 data."""
    p = sim.partition("t", 0)
    p.data(5)
    p.skip(3)
    p.data(2)


def test_throttled_fetches_are_retried_after_the_throttle_time(kafka_sim: KafkaSim, tmp_path: Path) -> None:
    """Partition 0, left empty in the two-partition Fetch, is throttled twice when fetched alone (KIP-219:
    no partitions in the answer). The scan waits throttle_time_ms and asks again."""
    two_partitions(kafka_sim)
    sink = sink_with(tmp_path / "sink.duckdb", {0: [0, 1, 2, 8, 9], 1: list(range(10))})
    kafka_sim.inject("fetch", "t", 0, no_records=True)
    kafka_sim.inject("fetch", "t", 0, throttle_ms=300, times=2)
    result = cli("ledger", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--sink-duckdb", sink,
                 "--format", "json")
    assert result.exit_code == 1, result.output
    p0 = json.loads(result.stdout)["partitions"][0]
    assert [(f["kind"], f["first_offset"], f["last_offset"], f["count"]) for f in p0["flags"]] == [
        ("gap", 3, 7, 5)]
    assert len(kafka_sim.fetch_times) == 4  # both partitions, p0 alone (throttled twice), p0 alone
    t = kafka_sim.fetch_times
    assert t[2] - t[1] >= 0.3 and t[3] - t[2] >= 0.3  # never asked again before the throttle time


def test_no_records_below_the_high_watermark_is_retried_not_a_hole(kafka_sim: KafkaSim) -> None:
    compacted_log(kafka_sim)
    kafka_sim.inject("fetch", "t", 0, no_records=True, times=2)
    doc = log_doc(kafka_sim)
    assert ranges(doc) == [(0, 4, "DATA"), (5, 7, "HOLE"), (8, 9, "DATA")]
    assert (doc["counts"]["DATA"], doc["counts"]["HOLE"]) == (7, 3)


@pytest.mark.parametrize(("fault", "why"), [
    ({"throttle_ms": 50}, "the broker left it out of its answer (throttled 50 ms)"),
    ({"no_records": True}, "no records below the high watermark"),
])
def test_a_partition_that_never_answers_is_one_line_and_exit_2(kafka_sim: KafkaSim, short_retries,
                                                               fault, why) -> None:
    compacted_log(kafka_sim)
    kafka_sim.inject("fetch", "t", 0, after=0, times=None, **fault)
    result = cli("log", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--partition", "0")
    assert result.exit_code == 2
    assert result.stderr == f"eosctl: error: cannot read t-0 at offset 0: {why} for 1s; retry later\n"
