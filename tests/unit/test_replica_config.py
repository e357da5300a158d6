"""A replica hop's config (`kafka_topic` on another cluster, `lineage = "replica"`): a cluster the config
lacks, or a replica of several topics, is one line on stderr and exit 2, before any broker is asked."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from eosctl.cli import main

CONFIG = """
[clusters.src]
bootstrap_servers = "127.0.0.1:1"

{dr}
[pipelines.orders-dr]
cluster = "src"
source_topics = {topics}

[pipelines.orders-dr.sink]
kafka_topic = "src.orders"
cluster = "dr"
lineage = "replica"
"""
DR = '[clusters.dr]\nbootstrap_servers = "127.0.0.1:2"\n'


def run(tmp_path: Path, dr: str, topics: str) -> tuple[int, str]:
    path = tmp_path / "c.toml"
    path.write_text(CONFIG.format(dr=dr, topics=topics))
    result = CliRunner().invoke(main, ["audit", "-c", str(path), "--engine", "local"])
    return result.exit_code, result.stderr


def test_a_replica_on_a_cluster_the_config_lacks_is_one_line_and_exit_2(tmp_path: Path):
    code, err = run(tmp_path, "", '["orders"]')
    assert code == 2 and err.count("\n") == 1
    assert "pipelines.orders-dr.sink.cluster 'dr' is not a [clusters.NAME] (known: src)" in err


def test_a_replica_of_several_topics_is_one_line_and_exit_2(tmp_path: Path):
    code, err = run(tmp_path, DR, '["orders", "refunds"]')
    assert code == 2 and err.count("\n") == 1
    assert "is a replica (sink.lineage = \"replica\") of 2 source topics" in err


def test_replica_is_a_lineage_the_config_accepts(tmp_path: Path):
    from eosctl.config.file import load_config

    path = tmp_path / "c.toml"
    path.write_text(CONFIG.format(dr=DR, topics='["orders"]'))
    sink = load_config(str(path)).pipelines["orders-dr"].sink
    assert sink is not None
    assert (sink.lineage, sink.cluster, sink.kafka_topic) == ("replica", "dr", "src.orders")
