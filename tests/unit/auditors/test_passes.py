"""The driver's passes that finish every audit (auditors.passes): in order, each where it applies, the
report's judged by the caller's waivers and levels or else the config's."""

from __future__ import annotations

from pathlib import Path

from auditors import passes
from eosctl.config.model import Cluster, Config, Pipeline, Sink, Spark
from eosctl.config.policy import Level
from eosctl.config.target import Target
from eosctl.report.findings import AuditReport, Finding, PartitionSummary


def report() -> AuditReport:
    return AuditReport.build([PartitionSummary("t", 0, 0, 10, 10, 10, 9, 0)],
                             [Finding("gap", "t", 0, 4, 4, 1)])


def target(levels: tuple[Level, ...] = ()) -> Target:
    config = Config(path=Path("c.toml"), clusters={}, pipelines={}, spark=Spark(), audit_levels=levels)
    pipeline = Pipeline(name="p", cluster="c", source_topics=("t",))
    return Target(Cluster("c", "127.0.0.1:1"), pipeline, config, ("t",), None)


def test_the_report_is_judged_by_the_callers_levels_else_the_configs() -> None:
    assert report().verdict == "fail"
    assert passes.finish(report(), target((Level("gap", 1, None),))).verdict == "pass"  # the config's
    given = passes.Judging(levels=(Level("gap", 1, None),))
    assert passes.finish(report(), target(), judging=given).verdict == "pass"
    assert passes.finish(report(), target()).verdict == "fail"


def test_no_stage_writes_the_topic_so_nothing_is_followed_and_no_frozen_pass_applies_to_a_table() -> None:
    assert passes.upstream_of(target()) is None
    table = Sink(duckdb="x.duckdb", frozen_from=Sink(duckdb="x.duckdb"))
    assert [p.name for p in passes.FROZEN if p.applies(table)] == []
    key_hop = Sink(duckdb="h.duckdb", frozen_from=Sink(kafka_topic="out", lineage="key"))
    assert [p.name for p in passes.FROZEN if p.applies(key_hop)] == ["key lineage", "ahead of commit"]
    replica = Sink(duckdb="r.duckdb", frozen_from=Sink(kafka_topic="src.t", lineage="replica"))
    assert [p.name for p in passes.FROZEN if p.applies(replica)] == ["ahead of commit", "replica"]
