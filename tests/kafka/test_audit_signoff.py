"""Sign-off through the CLI (issue 32, item 8): with no engine named, a small audit runs on the local engine
and says so and why; with --out the terminal still gets the verdict and the report's path; a duplicate
counts its extra rows; JUnit has one testcase per failing finding (CI viewers show a testcase's first
failure only)."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import duckdb
from click.testing import CliRunner

from eosctl.base.files import shown
from eosctl.cli import main
from tests.kafkasim import KafkaSim


def pipeline(sim: KafkaSim, tmp_path: Path) -> Path:
    """t[0]: 6 committed records. The sink: offset 1 three times more (3 extra rows), offsets 3 and 5
    missing (two gaps)."""
    sim.partition("t", 0).data(6)
    with duckdb.connect(str(tmp_path / "sink.duckdb")) as con:
        con.execute("create table sink (src_topic varchar, src_partition int, src_offset bigint)")
        con.execute("insert into sink values ('t',0,0),('t',0,1),('t',0,1),('t',0,1),('t',0,1),('t',0,2),"
                    "('t',0,4)")
    config = tmp_path / "eosctl.toml"
    config.write_text(f'[clusters.c]\nbootstrap_servers = "{sim.bootstrap}"\n'
                      '[pipelines.p]\nsource_topics = ["t"]\n[pipelines.p.sink]\nduckdb = "sink.duckdb"\n')
    return config


def test_a_small_audit_runs_locally_and_says_so_and_its_verdict_and_path(kafka_sim: KafkaSim,
                                                                         tmp_path: Path) -> None:
    config = pipeline(kafka_sim, tmp_path)
    out = tmp_path / "audit.xml"
    env = {k: v for k, v in os.environ.items() if k != "EOSCTL_CONFIG"}
    result = CliRunner().invoke(main, ["audit", "-c", str(config), "--format", "junit", "--out", str(out)],
                                env=env)
    assert result.exit_code == 1, result.output
    assert "engine: local (6 offsets <= 5,000,000; --engine spark for the other, or set [audit] engine)" \
        in result.stderr
    assert result.stdout.strip() == (f"FAIL: 2 gap (2 offsets), 1 duplicate (3 extra rows); junit report "
                                     f"written to {shown(str(out))}")
    suite = ET.parse(out).getroot()
    cases = [(c.get("name"), [f.get("type") for f in c.iter("failure")]) for c in suite.iter("testcase")]
    assert cases == [("partition 0: duplicate at offsets 1", ["duplicate"]),
                     ("partition 0: gap at offsets 3", ["gap"]), ("partition 0: gap at offsets 5", ["gap"])]
    assert (suite.get("tests"), suite.get("failures")) == ("3", "3")
    again = CliRunner().invoke(main, ["audit", "-c", str(config), "--format", "junit", "--out", str(out)],
                               env=env)
    assert again.exit_code == 2 and "--force" in again.output  # asks before replacing, as snapshot does
