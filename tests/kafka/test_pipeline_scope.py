"""A pipeline audited hop by hop is its hops' topics, groups and transactional ids, in every command: never
"every topic" (issue 32, item 1). Through the CLI against the scripted broker, next to another pipeline's
open transaction (the demo's) that must stay out of sight."""

from __future__ import annotations

import json
import shlex
import time
from functools import partial
from pathlib import Path

from click.testing import CliRunner

from eosctl.cli import main
from tests.kafkasim import KafkaSim, ProducerRow
from tests.support.helpers import eosctl

OURS, THEIRS = 7001, 7002


cli = partial(eosctl, columns=220)


def two_pipelines(sim: KafkaSim, tmp_path: Path) -> Path:
    """ux1's two hops (orders -> enriched -> sink) with one hanging transaction on ux1.enriched, and the
    demo's topic with its own hanging transaction; a config like `sandbox pipeline --prefix ux1` writes."""
    now = int(time.time() * 1000)
    for topic, pid in (("ux1.enriched", OURS), ("demo.enriched", THEIRS)):
        p = sim.partition(topic, 0)
        p.data(3, timestamp=now)
        p.txn(pid, 0, 2, timestamp=now)
        p.producer_rows = [ProducerRow(pid, 0, 1, now - 7_200_000, current_txn_start_offset=3)]
    sim.partition("ux1.orders", 0).data(4, timestamp=now)
    sim.group("ux1.processor", {("ux1.orders", 0): 4}, state="Empty")
    sim.group("ux1.sink", {("ux1.enriched", 0): 2}, state="Empty")
    sim.group("demo.sink", {("demo.enriched", 0): 1}, state="Empty")
    config = tmp_path / "eosctl.toml"
    config.write_text(f"""
[clusters.c]
bootstrap_servers = "{sim.bootstrap}"
[pipelines."ux1.process"]
source_topics = ["ux1.orders"]
group = "ux1.processor"
transactional_id_prefix = "ux1."
[pipelines."ux1.process".sink]
kafka_topic = "ux1.enriched"
[pipelines.ux1]
source_topics = ["ux1.enriched"]
group = "ux1.sink"
transactional_id_prefix = "ux1."
[pipelines.ux1.sink]
duckdb = "sink.duckdb"
[pipelines."ux1.pipeline"]
hops = ["ux1.process", "ux1"]
""")
    return config


def test_hanging_of_a_hops_pipeline_checks_its_hops_topics_only(kafka_sim: KafkaSim, tmp_path: Path) -> None:
    config = two_pipelines(kafka_sim, tmp_path)
    result = cli("txns", "hanging", "-c", str(config), "-p", "ux1.pipeline", "--format", "json")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert [(h["topic"], h["producer_id"]) for h in doc["hanging"]] == [("ux1.enriched", OURS)]
    assert doc["partitions_checked"] == 2  # ux1.orders[0] and ux1.enriched[0], not demo.enriched


def test_the_abort_hint_works_copied_as_printed(kafka_sim: KafkaSim, tmp_path: Path) -> None:
    config = two_pipelines(kafka_sim, tmp_path)
    text = cli("txns", "hanging", "-c", str(config), "-p", "ux1.pipeline").stdout
    hint = next(line for line in text.splitlines() if line.startswith("to abort one: "))
    command = hint.removeprefix("to abort one: ")
    assert command == (f"eosctl txns abort -c {config.resolve()} -p ux1.pipeline --topic ux1.enriched "
                       "--partition 0 --start-offset 3")
    dry = cli(*shlex.split(command)[1:])  # run as printed, from here: it names the same transaction
    assert dry.exit_code == 0, dry.output
    assert f"producer {OURS} epoch 0" in dry.stdout


def test_lag_of_a_hops_pipeline_is_its_hops_groups(kafka_sim: KafkaSim, tmp_path: Path) -> None:
    config = two_pipelines(kafka_sim, tmp_path)
    result = cli("lag", "-c", str(config), "-p", "ux1.pipeline", "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert sorted({(g["group"], p["topic"]) for g in doc["groups"] for p in g["partitions"]}) == [
        ("ux1.processor", "ux1.orders"), ("ux1.sink", "ux1.enriched")]


def test_exporter_series_of_a_hops_pipeline_are_its_own_and_a_failed_section_says_why(
        kafka_sim: KafkaSim, tmp_path: Path, monkeypatch) -> None:
    from eosctl.base.errors import BrokerError

    config = two_pipelines(kafka_sim, tmp_path)

    def refused(*args, **kwargs):
        raise BrokerError("DescribeProducers timed out")

    monkeypatch.setattr("eosctl.txn.transactions.find_hanging", refused)
    prom = tmp_path / "eosctl.prom"
    result = CliRunner().invoke(main, ["exporter", "-c", str(config), "-p", "ux1.pipeline", "--once",
                                       "--textfile", str(prom), "--audit-every", "0"],
                                env={"EOSCTL_CONFIG": None})
    assert result.exit_code == 0, result.output
    assert ("eosctl exporter: ux1.pipeline: section hanging not read (eosctl_refresh_errors_total): "
            "DescribeProducers timed out") in result.stderr
    series = prom.read_text()
    groups = {line.split('group="', 1)[1].split('"', 1)[0] for line in series.splitlines()
              if 'group="' in line}
    assert groups == {"ux1.processor", "ux1.sink"}  # never the demo's
    assert "demo." not in series


def test_producers_of_a_hops_pipeline_are_its_hops_topics_each(kafka_sim: KafkaSim, tmp_path: Path) -> None:
    config = two_pipelines(kafka_sim, tmp_path)
    result = cli("producers", "-c", str(config), "-p", "ux1.pipeline", "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [(d["topic"], [(p["partition"], p["producer_id"]) for p in d["producers"]]) for d in doc] == [
        ("ux1.orders", []), ("ux1.enriched", [(0, OURS)])]  # never the demo's producer
    text = cli("producers", "-c", str(config), "-p", "ux1.pipeline").stdout
    assert "no producers with a producer id on ux1.orders" in text
    assert "Producers of ux1.enriched (1)" in text and str(THEIRS) not in text
    one = json.loads(cli("producers", "-c", str(config), "-p", "ux1.pipeline", "-t", "ux1.enriched",
                         "--format", "json").stdout)
    assert one["topic"] == "ux1.enriched"  # one topic: the object scripts have always read
    refused = cli("producers", "-c", str(config), "-p", "ux1.pipeline", "-P", "0")
    assert refused.exit_code == 2 and len(refused.output.splitlines()) == 1
    assert ("--partition names partitions of one topic; the pipeline has several (ux1.orders, ux1.enriched): "
            "add --topic") in refused.output
