"""The one engine policy (auditors.engine): with no engine chosen, the plan's own offsets pick it."""

from __future__ import annotations

from auditors.engine import AUTO, LOCAL_UP_TO, EngineOptions, pick
from auditors.plan import WorkItem
from auditors.sources import Placement
from eosctl.config.model import Config, Spark


def item(partition: int, log_start: int, high_watermark: int) -> WorkItem:
    return WorkItem("t", partition, True, placement=Placement(1, log_start, high_watermark, high_watermark))


def test_up_to_the_limit_the_local_engine_runs_and_past_it_spark_each_saying_why() -> None:
    small = [item(0, 100, 106), WorkItem("gone", 0, False, sink_rows=9)]  # a sink-only partition: no offsets
    assert pick(small) == ("local", "6 offsets <= 5,000,000; --engine spark for the other, or set [audit] "
                                    "engine")
    assert pick([item(0, 0, LOCAL_UP_TO)])[0] == "local"
    big = [item(0, 0, LOCAL_UP_TO), item(1, 7, 8)]
    assert pick(big) == ("spark", "5,000,001 offsets > 5,000,000; --engine local for the other, or set "
                                  "[audit] engine")


def test_every_command_defaults_to_auto_unless_a_flag_or_the_config_names_an_engine(tmp_path) -> None:
    assert EngineOptions.resolve(None).engine == AUTO
    assert EngineOptions.resolve(None, engine="local").engine == "local"
    assert EngineOptions.resolve(None, master="local[2]").engine == "spark"  # Spark's options name Spark
    config = Config(path=tmp_path / "c.toml", clusters={}, pipelines={}, spark=Spark(), audit_engine="spark")
    assert EngineOptions.resolve(config).engine == "spark"
