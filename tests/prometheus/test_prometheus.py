"""`eosctl exporter` against the sandbox, scraped by the session's real Prometheus, checked through its
HTTP API (issue 15):

- a transactional topic fully consumed: eosctl_consumer_lag_records is 0 while eosctl_consumer_lag_offsets
  (HW - committed, what other exporters show) is 1 per partition, the trailing commit marker;
- a planted hanging transaction: the EosctlHangingTransaction alert of the repository's rules fires;
- the reference pipeline with the demo's faults: eosctl_audit_findings equals its manifest's planted
  defects by kind.

One exporter serves both pipelines (two pipelines of one config), as a user would run it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from eosctl.report.findings import KINDS
from tests.support.prometheus import REPO, Exporter

pytestmark = pytest.mark.integration

DEMO_FAULTS = ("duplicate-replay", "skip", "aborted-leak", "upstream-retry", "zombie", "hanging")


def _consumed_to_the_marker(bootstrap: str, manifest: dict) -> str:
    """A group that read every record of the output topic and committed the offset after its last one: the
    partition's final COMMIT marker, so HW - committed is 1 and nothing is left to read."""
    from confluent_kafka import Consumer, TopicPartition

    topic = manifest["output_topic"]
    last: dict[int, dict] = {}
    for m in manifest["markers"]:
        if m["topic"] == topic and m["offset"] >= last.get(m["partition"], {"offset": -1})["offset"]:
            last[m["partition"]] = m
    assert sorted(last) == list(range(manifest["partitions"]))
    assert all(m["type"] == "COMMIT" for m in last.values())
    group = manifest["prefix"] + ".reader"
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, p, m["offset"]) for p, m in last.items()], asynchronous=False)
    finally:
        c.close()
    return group


def _config(path: Path, bootstrap: str, consumed: dict, reader: str, demo: dict) -> None:
    def q(v: object) -> str:
        return json.dumps(v)

    sink = demo["sink"]
    lines = ["[clusters.sandbox]", f"bootstrap_servers = {q(bootstrap)}", "",
             "[pipelines.consumed]", 'cluster = "sandbox"',
             f"source_topics = [{q(consumed['output_topic'])}]",
             f"group = {q(reader)}", f"transactional_id_prefix = {q(consumed['prefix'] + '.')}", "",
             "[pipelines.demo]", 'cluster = "sandbox"', f"source_topics = [{q(demo['output_topic'])}]",
             f"group = {q(demo['groups']['sink'])}", f"transactional_id_prefix = {q(demo['prefix'] + '.')}",
             f"output_topic = {q(demo['output_topic'])}", "", "[pipelines.demo.sink]"]
    lines += [f"{key} = {q(sink[key])}" for key in ("duckdb", "table", "topic_column", "partition_column",
                                                     "offset_column", "key_column", "offsets_table")]
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def served(cluster, bootstrap, prometheus, tmp_path_factory):
    """(manifests, config, address): two pipeline runs, one exporter serving both, scraped by Prometheus."""
    from eosctl.sandbox.pipeline import run_pipeline

    home = tmp_path_factory.mktemp("exporter")
    consumed = run_pipeline(cluster, "x" + uuid.uuid4().hex[:8], home / "consumed", records=30)
    demo = run_pipeline(cluster, "x" + uuid.uuid4().hex[:8], home / "demo", faults=DEMO_FAULTS, records=60)
    reader = _consumed_to_the_marker(bootstrap, consumed)
    config = home / "eosctl.toml"
    _config(config, bootstrap, consumed, reader, demo)
    exporter = Exporter("-c", str(config), "--listen", "127.0.0.1:0", "--interval", "1", "--max-age", "0",
                        "--audit-every", "1h")
    try:
        address = exporter.wait_for(r"serving http://(127\.0\.0\.1:\d+)/metrics for 2 pipeline")[1]
        prometheus.scrape(address)
        yield {"consumed": consumed, "demo": demo}, config, address
    finally:
        assert exporter.stop() == 143


def test_fully_consumed_transactional_topic_is_0_records_behind_and_1_offset(served, prometheus):
    manifests, _, _ = served
    parts = manifests["consumed"]["partitions"]
    records = prometheus.wait_for('eosctl_consumer_lag_records{pipeline="consumed"}',
                                  lambda r: len(r) == parts, "lag_records per partition")
    offsets = prometheus.wait_for('eosctl_consumer_lag_offsets{pipeline="consumed"}',
                                  lambda r: len(r) == parts, "lag_offsets per partition")
    assert sorted((r["metric"]["partition"], r["value"][1]) for r in records) == [
        (str(p), "0") for p in range(parts)]
    assert sorted((r["metric"]["partition"], r["value"][1]) for r in offsets) == [
        (str(p), "1") for p in range(parts)]
    status = prometheus.query('eosctl_consumer_group_status{pipeline="consumed"} == 1')
    assert [r["metric"]["status"] for r in status] == ["OK"]


def test_planted_hanging_transaction_fires_the_alert(served, prometheus):
    manifests, _, _ = served
    (h,) = manifests["demo"]["hanging"]
    firing = prometheus.wait_for('ALERTS{alertname="EosctlHangingTransaction", alertstate="firing"}',
                                 lambda r: len(r) > 0, "a firing EosctlHangingTransaction alert")
    assert [r["metric"]["pipeline"] for r in firing] == ["demo"]
    (age,) = prometheus.query('eosctl_partition_open_transaction_age_seconds{pipeline="demo"}')
    assert (age["metric"]["topic"], age["metric"]["partition"], age["metric"]["producer_id"]) == (
        h["topic"], str(h["partition"]), str(h["producer_id"]))
    (blocked,) = prometheus.query(f'eosctl_partition_blocked_offsets{{pipeline="demo", '
                                  f'partition="{h["partition"]}"}}')
    assert blocked["value"][1] == str(h["last_offset"] - h["first_offset"] + 1)


def test_audit_findings_equal_the_planted_defects_by_kind(served, prometheus):
    manifests, _, _ = served
    planted = Counter(f["kind"] for f in manifests["demo"]["expected_findings"])
    found = prometheus.wait_for('eosctl_audit_findings{pipeline="demo"}', lambda r: len(r) == len(KINDS),
                                "the first audit's findings", timeout=120)
    assert {r["metric"]["kind"]: int(r["value"][1]) for r in found} == {k: planted.get(k, 0) for k in KINDS}
    (passed,) = prometheus.query('eosctl_audit_passed{pipeline="demo"}')
    assert passed["value"][1] == "0"
    firing = prometheus.wait_for('ALERTS{alertname="EosctlAuditFailing", alertstate="firing"}',
                                 lambda r: len(r) > 0, "a firing EosctlAuditFailing alert")
    assert [r["metric"]["pipeline"] for r in firing] == ["demo"]


def test_once_writes_one_reading_to_a_textfile(served, tmp_path):
    manifests, config, _ = served
    out = tmp_path / "eosctl.prom"
    done = subprocess.run([sys.executable, "-m", "eosctl", "exporter", "-c", str(config), "-p", "consumed",
                           "--once", "--textfile", str(out), "--audit-every", "0"], cwd=REPO, timeout=120,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert (done.returncode, done.stderr) == (0, "")
    assert [p.name for p in tmp_path.iterdir()] == ["eosctl.prom"]  # no temp file left behind
    families = {f.name: f for f in text_string_to_metric_families(out.read_text())}
    lag = families["eosctl_consumer_lag_offsets"].samples
    assert sorted((s.labels["partition"], s.value) for s in lag) == [
        (str(p), 1.0) for p in range(manifests["consumed"]["partitions"])]
    assert [s.value for s in families["eosctl_up"].samples] == [1.0]
    assert "eosctl_audit_findings" not in families
