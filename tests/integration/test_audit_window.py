"""An audit of a window (`--since`/`--until`, `sink.retention`) on Apache Kafka 4.4: records produced with
explicit timestamps, times mapped to offsets by the broker's ListOffsets by timestamp (issue 53).

Partition 0: offsets 0-9 three days old, 10-19 a day old, 20-24 an hour old; partition 1: 0-4 three days
old, 5-9 a day old. The sink misses 2-3 and 15 of partition 0 and 1 of partition 1: two old losses and
one in yesterday's window."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.helpers import eosctl, eosctl_process

pytestmark = pytest.mark.integration

NOW_MS = int(time.time() * 1000)
HOUR = 3_600_000
AGES = {0: [72] * 10 + [24] * 10 + [1] * 5, 1: [72] * 5 + [24] * 5}  # hours old, by offset
MISSING = {(0, 2), (0, 3), (0, 15), (1, 1)}


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


SINCE, UNTIL = iso(NOW_MS - 36 * HOUR), iso(NOW_MS - 12 * HOUR)


@pytest.fixture(scope="module")
def topic(bootstrap: str) -> str:
    name = "window" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=2, replication_factor=1)])[name].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for partition, ages in AGES.items():
        for i, age in enumerate(ages):
            producer.produce(name, value=f"v{i}".encode(), key=f"k{partition}-{i}".encode(),
                             partition=partition, timestamp=NOW_MS - age * HOUR)
        assert producer.flush(30) == 0  # in offset order, partition by partition
    return name


@pytest.fixture(scope="module")
def sink(topic: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("window") / "sink.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE sink (src_topic VARCHAR, src_partition INTEGER, src_offset BIGINT)")
    con.executemany("INSERT INTO sink VALUES (?, ?, ?)",
                    [(topic, p, o) for p, ages in AGES.items() for o in range(len(ages))
                     if (p, o) not in MISSING])
    con.close()
    return path


def config(tmp_path: Path, bootstrap: str, topic: str, sink: Path, retention: str | None = None) -> Path:
    cfg = tmp_path / "eosctl.toml"
    cfg.write_text(f"""
[clusters.local]
bootstrap_servers = "{bootstrap}"

[pipelines.p]
source_topics = ["{topic}"]

[pipelines.p.sink]
duckdb = "{sink}"
{f'retention = "{retention}"' if retention else ""}
""")
    return cfg


def audit(cfg: Path, *args: str) -> tuple[int, dict]:
    result = eosctl("audit", "-c", str(cfg), "--engine", "local", "--format", "json", *args)
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


def gaps(report: dict) -> list[tuple[int, int, int, int]]:
    return [(f["partition"], f["first_offset"], f["last_offset"], f["count"]) for f in report["findings"]]


def test_since_yesterday_reports_only_the_windows_gap(bootstrap: str, topic: str, sink: Path,
                                                      tmp_path: Path) -> None:
    cfg = config(tmp_path, bootstrap, topic, sink)
    code, whole = audit(cfg)
    assert (code, gaps(whole)) == (1, [(0, 2, 3, 2), (0, 15, 15, 1), (1, 1, 1, 1)])
    assert whole["window"] is None

    code, report = audit(cfg, "--since", SINCE)
    assert (code, gaps(report)) == (1, [(0, 15, 15, 1)])
    windows = {p["partition"]: p["window"] for p in report["partitions"]}
    # the broker's time index: the first record at or after the time; partition 1 has none after --until
    assert windows == {0: {"first_offset": 10, "end_offset": None, "retention_floor": None,
                           "outside_window": 8, "expired": 0},
                       1: {"first_offset": 5, "end_offset": None, "retention_floor": None,
                           "outside_window": 4, "expired": 0}}
    assert [p["expected_records"] for p in report["partitions"]] == [15, 5]
    assert report["window"]["since"] == {"given": SINCE, "timestamp": SINCE.replace("Z", ".000Z")}

    code, report = audit(cfg, "--since", SINCE, "--until", UNTIL)
    assert (code, gaps(report)) == (1, [(0, 15, 15, 1)])
    assert [(p["window"]["first_offset"], p["window"]["end_offset"]) for p in report["partitions"]] == [
        (10, 20), (5, None)]

    # offsets per partition: partition 0 from 16 on, partition 1 unbounded (its old loss is judged)
    code, report = audit(cfg, "--since", f"{topic}:0=16")
    assert (code, gaps(report)) == (1, [(1, 1, 1, 1)])

    text = eosctl("audit", "-c", str(cfg), "--engine", "local", "--since", SINCE)
    assert text.exit_code == 1
    assert f"window judged: since {SINCE}" in text.stdout and "window 10-24, 8 rows outside" in text.stdout


def test_rows_older_than_the_sinks_retention_are_expired_not_gaps(bootstrap: str, topic: str, sink: Path,
                                                                  tmp_path: Path) -> None:
    code, report = audit(config(tmp_path, bootstrap, topic, sink, retention="2d"))
    assert (code, gaps(report)) == (1, [(0, 15, 15, 1)])
    assert [(p["window"]["retention_floor"], p["window"]["expired"]) for p in report["partitions"]] == [
        (10, 2), (5, 1)]
    assert report["window"]["retention"] == "2d"


def test_a_window_that_cannot_be_judged_is_one_line(bootstrap: str, topic: str, sink: Path,
                                                   tmp_path: Path) -> None:
    cfg = config(tmp_path, bootstrap, topic, sink)
    for args, said in ((("--since", "yesterday"), "is neither a time"),
                       (("--since", f"{topic}:9=1"), f"{topic}:9 is not an audited partition"),
                       (("--since", f"{topic}:0=12", "--until", f"{topic}:0=11"), "the window is empty")):
        result = eosctl("audit", "-c", str(cfg), "--engine", "local", *args)
        assert result.exit_code == 2 and said in result.output, result.output
        assert "Traceback" not in result.output


@pytest.mark.spark
@pytest.mark.own_spark
def test_the_spark_engine_judges_the_same_window(bootstrap: str, topic: str, sink: Path,
                                                 tmp_path: Path) -> None:
    cfg = config(tmp_path, bootstrap, topic, sink, retention="2d")
    _, local = audit(cfg, "--until", UNTIL)
    child = eosctl_process("audit", "-c", str(cfg), "--engine", "spark", "--format", "json", "--until", UNTIL,
                           timeout=300)
    assert child.returncode == 1, child.stderr[-3000:]
    spark = json.loads(child.stdout)
    assert gaps(spark) == gaps(local) == [(0, 15, 15, 1)]
    assert [p["window"] for p in spark["partitions"]] == [p["window"] for p in local["partitions"]]
