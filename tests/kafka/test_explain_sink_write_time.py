"""`explain` shows when the sink wrote the offset's rows beside the record's timestamp, and the lag between
them, where the sink names a write-time column; where it names none, one short line says so (issue 32,
item 6)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import duckdb

from tests.kafkasim import KafkaSim
from tests.support.helpers import eosctl

WRITTEN = 1_700_000_000_000  # 2023-11-14 22:13:20 UTC, the record's CreateTime


cli = partial(eosctl, env={"EOSCTL_CONFIG": None})


def _setup(kafka_sim: KafkaSim, tmp_path: Path, column: str | None) -> Path:
    p = kafka_sim.partition("t", 0)
    p.data(2, timestamp=WRITTEN)
    db = tmp_path / "sink.duckdb"
    con = duckdb.connect(str(db))
    con.execute("SET TimeZone = 'UTC'")
    con.execute("CREATE TABLE sink (src_topic VARCHAR, src_partition INTEGER, src_offset BIGINT, "
                "written_at TIMESTAMPTZ)")
    # Offset 1 written twice (a replay): 1m30s and 2h05m after the record.
    con.execute("INSERT INTO sink VALUES ('t', 0, 0, TIMESTAMPTZ '2023-11-14 22:13:21+00'), "
                "('t', 0, 1, TIMESTAMPTZ '2023-11-14 22:14:50+00'), "
                "('t', 0, 1, TIMESTAMPTZ '2023-11-15 00:18:20+00')")
    con.close()
    config = tmp_path / "eosctl.toml"
    config.write_text(f'[clusters.c]\nbootstrap_servers = "{kafka_sim.bootstrap}"\n\n'
                      '[pipelines.p]\nsource_topics = ["t"]\n\n[pipelines.p.sink]\n'
                      f'duckdb = "{db}"\n'
                      + (f'write_time_column = "{column}"\n' if column else ""), encoding="utf-8")
    return config


def _row(stdout: str, field: str) -> str:
    line = next(x for x in stdout.splitlines() if x.split("│")[1:2] and x.split("│")[1].strip() == field)
    return line.split("│")[2].strip()


def test_explain_shows_when_the_sink_wrote_each_row(kafka_sim: KafkaSim, tmp_path: Path) -> None:
    config = _setup(kafka_sim, tmp_path, "written_at")
    result = cli("explain", "-c", str(config), "-P", "0", "--offset", "1")
    assert result.exit_code == 0, result.output
    assert _row(result.stdout, "written") == "2023-11-14 22:13:20 UTC (CreateTime, the producer's clock)"
    assert _row(result.stdout, "sink rows") == "2"
    assert _row(result.stdout, "sink wrote") == (
        "2023-11-14 22:14:50 UTC, 1m30s after the record; 2023-11-15 00:18:20 UTC, 2h05m after the record "
        "(written_at)")
    doc = cli("explain", "-c", str(config), "-P", "0", "--offset", "1", "--format", "json")
    written = __import__("json").loads(doc.stdout)["sink"]["written_at"]
    assert [round(w["after_record_ms"]["max_ms"] / 1000) for w in written] == [90, 7_500]


def test_explain_says_in_one_line_when_the_sink_keeps_no_write_time(kafka_sim: KafkaSim,
                                                                     tmp_path: Path) -> None:
    config = _setup(kafka_sim, tmp_path, None)
    result = cli("explain", "-c", str(config), "-P", "0", "--offset", "0")
    assert result.exit_code == 0, result.output
    assert _row(result.stdout, "sink wrote") == "not known: the sink's config names no write_time_column"


def test_a_write_time_column_the_sink_lacks_is_one_line(kafka_sim: KafkaSim, tmp_path: Path) -> None:
    config = _setup(kafka_sim, tmp_path, "ingested_at")
    result = cli("explain", "-c", str(config), "-P", "0", "--offset", "0")
    assert result.exit_code == 2
    assert "lacks column ingested_at (write_time_column)" in result.output
