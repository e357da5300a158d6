"""`explain SNAPSHOT --partition P --offset N` from what the snapshot stored (issue 32, item 7): once
retention moves on, an offset is still explained from the incident file."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

from tests.kafkasim import KafkaSim
from tests.support.helpers import eosctl

cli = partial(eosctl, env={"EOSCTL_CONFIG": None})


def test_an_offset_is_explained_from_the_snapshot_after_retention(kafka_sim: KafkaSim,
                                                                  tmp_path: Path) -> None:
    p = kafka_sim.partition("t", 0)
    p.data(2)
    p.txn(7, 0, 2)
    p.abort(7, 0)
    p.data(1)
    snap = tmp_path / "incident.duckdb"
    made = cli("snapshot", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--out", str(snap))
    assert made.exit_code == 0, made.output
    p.delete_before(5)  # retention moved on: the cluster no longer has offset 3
    result = cli("explain", str(snap), "-P", "0", "--offset", "3", "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert (doc["topic"], doc["partition"], doc["offset"]) == ("t", 0, 3)
    assert doc["transaction"]["outcome"] == "ABORT" and doc["transaction"]["producer_id"] == 7
    text = cli("explain", str(snap), "-P", "0", "--offset", "3")
    assert text.exit_code == 0 and "ABORT" in text.stdout


def test_explain_says_when_the_record_was_written(kafka_sim: KafkaSim) -> None:
    # Issue 32, item 6: explain showed no record timestamps.
    p = kafka_sim.partition("t", 0)
    p.data(2, timestamp=1_700_000_000_000)
    result = cli("explain", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "-P", "0", "--offset", "1")
    assert result.exit_code == 0, result.output
    assert "written" in result.stdout and "2023-11-14 22:13:20 UTC (CreateTime, the producer's clock)" \
        in result.stdout
