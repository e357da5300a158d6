"""Issue 21: an audit of 1,200 partitions costs a few tasks, not 1,200, and finds exactly what was planted.

The scripted broker (two nodes, leaders alternating) holds a topic of 1,200 small transactional
partitions; the DuckDB sink holds every committed record once except for defects planted at known
offsets. Both engines (the local pool and the suite's SparkSession) must report exactly those findings,
with the partitions' leaders and offsets asked once by the driver (three ListOffsets per leader, none from
the tasks) and each task fetching its partitions together.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from tests.kafkasim import KafkaSim

pytestmark = [pytest.mark.spark]

TOPIC = "wide"
PARTITIONS = 1200
ABORTING = {p for p in range(PARTITIONS) if p % 100 == 50}  # an aborted transaction, then plain data
OPEN = 1199  # ends with a transaction that has no marker yet


def build_log(sim: KafkaSim) -> None:
    """Each partition: a committed transaction at 0..2 (marker 3). ABORTING partitions then have an aborted
    transaction at 4..5 (marker 6) and plain records 7..8; OPEN has an open transaction at 4..5."""
    for p in range(PARTITIONS):
        part = sim.partition(TOPIC, p, leader=p % 2)
        pid = 1000 + p
        part.txn(pid, 0, 3)
        part.commit(pid, 0)
        if p in ABORTING:
            part.txn(pid, 0, 2)
            part.abort(pid, 0)
            part.data(2)
        elif p == OPEN:
            part.txn(pid, 0, 2)


def committed(p: int) -> list[int]:
    return [0, 1, 2, 7, 8] if p in ABORTING else [0, 1, 2]


# (kind, partition, first, last, count): what the sink below gets wrong, and nothing else.
PLANTED = [
    ("gap", 7, 1, 1, 1),
    ("gap", 640, 0, 2, 3),
    ("duplicate", 333, 2, 2, 1),
    ("phantom_aborted", 150, 4, 5, 2),
    ("phantom_marker", 900, 3, 3, 1),
    ("phantom_uncommitted", OPEN, 4, 4, 1),
    ("phantom_beyond_hw", 1100, 50, 50, 1),
    ("phantom_beyond_hw", 5000, 0, 0, 1),  # a partition Kafka doesn't have
    ("key_duplicate", 10, 0, 0, 2),  # key "dup" at wide[10]@0 and wide[20]@0
]


def build_sink(path: Path) -> str:
    rows = []
    for p in range(PARTITIONS):
        for o in committed(p):
            if (p, o) in {(7, 1)} or p == 640:
                continue
            rows.append((TOPIC, p, o, "dup" if (p, o) in {(10, 0), (20, 0)} else f"{p}:{o}"))
    rows += [(TOPIC, 333, 2, "333:2"), (TOPIC, 150, 4, "a"), (TOPIC, 150, 5, "b"), (TOPIC, 900, 3, "m"),
             (TOPIC, OPEN, 4, "u"), (TOPIC, 1100, 50, "h"), (TOPIC, 5000, 0, "x")]
    types = (pa.string(), pa.int32(), pa.int64(), pa.string())
    columns = zip(*rows, strict=True)
    table = pa.table([pa.array(column, ty) for column, ty in zip(columns, types, strict=True)],
                     names=["src_topic", "src_partition", "src_offset", "k"])
    with duckdb.connect(str(path)) as con:
        con.register("rows", table)
        con.execute("create table sink as select * from rows")
    return str(path)


def test_an_audit_of_1200_partitions_finds_exactly_what_was_planted_on_both_engines(
        kafka_sim: KafkaSim, spark, tmp_path: Path) -> None:
    from auditors import engine
    from auditors.plan import AuditInput, TaskSettings
    from auditors.sources import KafkaSource
    from eosctl.config.model import Cluster, Sink

    build_log(kafka_sim)
    sink = Sink(duckdb=build_sink(tmp_path / "sink.duckdb"), key_column="k")
    inp = AuditInput(source=KafkaSource(Cluster(name="sim", bootstrap_servers=kafka_sim.bootstrap)),
                         sink=sink, topics=(TOPIC,),
                         settings=TaskSettings(temp_directory=str(tmp_path / "duckdb")))
    reports = {}
    for name in ("local", "spark"):
        asked = len(kafka_sim.requests)
        report = engine.run(inp, engine.EngineOptions(name, workers=2))
        apis = [api for _, api, _ in kafka_sim.requests[asked:]]
        found = sorted((f.kind, f.partition, f.first_offset, f.last_offset, f.count) for f in report.findings)
        assert found == sorted(PLANTED), name
        (key,) = [f for f in report.findings if f.kind == "key_duplicate"]
        assert (key.key, key.offsets, key.detail) == ("dup", (0, 0), "in wide[10]@0, wide[20]@0")
        assert len(report.partitions) == PARTITIONS + 1
        assert sum(p.expected_records for p in report.partitions) == 3 * PARTITIONS + 2 * len(ABORTING)
        open_p = next(p for p in report.partitions if p.partition == OPEN)
        assert (open_p.last_stable_offset, open_p.high_watermark) == (4, 6)
        # Two slots: one task per leader and one for the partition only the sink names.
        assert report.engine["tasks"] == 3, name
        assert apis.count("ListOffsets") == 6, name  # 3 per leader, by the driver only
        assert apis.count("Fetch") <= 3 * 2 * 2, name  # per task: its leader, a round or two
        reports[name] = report.to_dict()
    assert reports["local"]["findings"] == reports["spark"]["findings"]
    assert reports["local"]["partitions"] == reports["spark"]["partitions"]
