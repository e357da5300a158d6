"""A Kafka-to-Kafka hop audited like a sink: the reference pipeline's process stage (orders -> enriched).

One pipeline run per module plants the stage's three classic failures at once (stage-replay: duplicates,
stage-skip: a gap, stage-read-uncommitted: outputs derived from aborted input); the manifest knows their
exact input offsets from the stage's own delivery reports, never from reading the log back. Each audit goes
through the CLI on both engines.
"""

from __future__ import annotations

import json
import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from eosctl.cli import main
from eosctl.sandbox.pipeline import run_pipeline
from tests.support.helpers import eosctl

pytestmark = [pytest.mark.integration]

STAGE_FAULTS = ["stage-replay", "stage-skip", "stage-read-uncommitted"]


@pytest.fixture(scope="module")
def run(cluster, tmp_path_factory) -> tuple[Path, dict]:
    workdir = tmp_path_factory.mktemp("hops")
    prefix = f"h{uuid.uuid4().hex[:8]}"
    # upstream-retry too: a key written twice upstream is a key_duplicate on both hops.
    return workdir, run_pipeline(cluster, prefix, workdir, faults=[*STAGE_FAULTS, "upstream-retry"],
                                 records=120)


def audit(*args: str) -> tuple[int, str, str]:
    result = eosctl("audit", *args, columns=None)
    return result.exit_code, result.stdout, result.stderr


def comparable(findings: list[dict]) -> list[tuple]:
    return sorted((f["kind"], f["topic"], f["partition"], f["first_offset"], f["last_offset"], f["count"],
                   f.get("key")) for f in findings)


def _stage(manifest: dict) -> dict:
    return next(h for h in manifest["hops"] if h["name"] == "process")


def test_the_run_planted_every_stage_fault(run):
    _, manifest = run
    planted = {p["fault"] for p in _stage(manifest)["planted"]}
    assert planted == {"stage-replay", "stage-skip"}  # read-uncommitted is the whole run, not a batch
    kinds = {f["kind"]: f["fault"] for f in _stage(manifest)["expected_findings"]}
    assert kinds == {"duplicate": "stage-replay", "gap": "stage-skip",
                     "phantom_aborted": "stage-read-uncommitted", "key_duplicate": "upstream-retry"}


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_the_stage_hop_finds_exactly_what_the_stage_planted(run, engine, request):
    if engine == "spark":
        request.getfixturevalue("spark")  # the suite's session, which the audit borrows
    workdir, manifest = run
    prefix = manifest["prefix"]
    code, out, err = audit("-c", str(workdir / "eosctl.toml"), "-p", f"{prefix}.process", "--engine", engine,
                           "--format", "json")
    assert code == 1, err
    report = json.loads(out)
    assert comparable(report["findings"]) == comparable(_stage(manifest)["expected_findings"])
    # The replayed batch is a duplicate at its exact input offsets; the skipped one a gap at its own.
    replayed = next(p for p in _stage(manifest)["planted"] if p["fault"] == "stage-replay")
    dup = next(f for f in report["findings"] if f["kind"] == "duplicate")
    assert dup["partition"] == replayed["partition"]
    assert replayed["offsets"][0] <= dup["first_offset"] <= dup["last_offset"] <= replayed["offsets"][-1]
    assert report["sink_read_point"]["kind"] == "kafka_topic"
    assert report["sink_read_point"]["source"] == manifest["output_topic"]


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_value_lineage_gives_the_same_findings(run, tmp_path, engine, request):
    if engine == "spark":
        request.getfixturevalue("spark")
    workdir, manifest = run
    prefix = manifest["prefix"]
    config = (workdir / "eosctl.toml").read_text()
    (tmp_path / "eosctl.toml").write_text(config.replace('lineage = "headers"', 'lineage = "value:source"'))
    code, out, err = audit("-c", str(tmp_path / "eosctl.toml"), "-p", f"{prefix}.process",
                           "--engine", engine, "--format", "json")
    assert code == 1, err
    assert comparable(json.loads(out)["findings"]) == comparable(_stage(manifest)["expected_findings"])


def test_the_whole_pipeline_hop_by_hop(run):
    workdir, manifest = run
    prefix = manifest["prefix"]
    # No -p: the config `sandbox pipeline` writes makes the whole pipeline its default (issue 32).
    args = ("-c", str(workdir / "eosctl.toml"), "--engine", "local")
    code, out, err = audit(*args, "--format", "json")
    assert code == 1, err
    report = json.loads(out)
    assert [h["name"] for h in report["hops"]] == [f"{prefix}.process", prefix]
    assert [h["topics"] for h in report["hops"]] == [[manifest["source_topic"]], [manifest["output_topic"]]]
    every = [f for hop in manifest["hops"] for f in hop["expected_findings"]]
    assert comparable(report["findings"]) == comparable(every)
    assert [h["findings"] for h in report["hops"]] == [len(h["expected_findings"]) for h in manifest["hops"]]
    # JUnit: one suite per hop, in order, each with its own failures.
    code, xml, _ = audit(*args, "--format", "junit")
    suites = ET.fromstring(xml).findall("testsuite")
    names = [f"eosctl audit: hop {prefix}.process", f"eosctl audit: hop {prefix}"]
    assert [s.get("name") for s in suites] == names
    assert [int(s.get("failures")) for s in suites] == [len(h["expected_findings"]) for h in manifest["hops"]]


def test_a_snapshot_with_audit_of_the_whole_pipeline_audits_each_hop(run, tmp_path):
    """The config's default is the whole pipeline: its snapshot --with-audit stores the hop-by-hop audit
    (it stored none: "no sink and source topics to audit")."""
    workdir, manifest = run
    snap = tmp_path / "incident.duckdb"
    made = CliRunner().invoke(main, ["snapshot", "-c", str(workdir / "eosctl.toml"), "--with-audit",
                                     "--out", str(snap), "--format", "json"])
    assert made.exit_code == 0, made.output
    sections = json.loads(made.stdout)["sections"]
    assert sections["audit"] == "ok"
    prefix = manifest["prefix"]
    assert sections["ledger"] == ("skipped: the pipeline is audited hop by hop and has no sink of its own (a "
                                  f"hop's ledger: -p {prefix}.process or -p {prefix})")
    result = CliRunner().invoke(main, ["explain", str(snap), "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    every = [f for hop in manifest["hops"] for f in hop["expected_findings"]]
    assert doc["verdict"] == "fail"
    assert comparable([f for r in doc["root_causes"] for f in r["findings"]]) == comparable(every)


def test_a_hop_sink_with_bad_lineage_is_one_line(run, tmp_path):
    workdir, manifest = run
    config = (workdir / "eosctl.toml").read_text().replace('lineage = "headers"', 'lineage = "offsets"')
    (tmp_path / "eosctl.toml").write_text(config)
    code, out, err = audit("-c", str(tmp_path / "eosctl.toml"), "-p", f"{manifest['prefix']}.process",
                           "--engine", "local")
    assert code == 2
    assert err.strip().count("\n") == 0
    assert "lineage 'offsets'" in err and "value:PATH" in err


def test_a_stage_running_during_the_audit_gives_no_false_finding(cluster, tmp_path):
    """A read-process-write stage keeps committing (outputs and input offsets in one transaction) while
    the hop is audited: what it committed before the audit is judged, the rest is its lag, never a gap."""
    import threading

    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    total = 1000
    name = f"live{uuid.uuid4().hex[:8]}"
    src, out, group = f"{name}.in", f"{name}.out", f"{name}.stage"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for f in admin.create_topics([NewTopic(t, 2, 1) for t in (src, out)]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for i in range(total):
        producer.produce(src, key=f"k{i}".encode(), value=b"v", partition=i % 2)
    assert producer.flush(30) == 0

    stop = threading.Event()
    batches: list[int] = []

    def stage() -> None:
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                             "enable.auto.commit": False, "isolation.level": "read_committed",
                             "auto.offset.reset": "earliest"})
        writer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": f"{name}.tx"})
        writer.init_transactions(30)
        consumer.assign([TopicPartition(src, p, 0) for p in (0, 1)])
        try:
            while not stop.is_set():
                msgs = [m for m in consumer.consume(5, 0.2) if m.error() is None]
                if not msgs:
                    continue
                writer.begin_transaction()
                for m in msgs:
                    writer.produce(out, key=m.key(), value=m.value(), partition=m.partition(),
                                   headers=[("eos.source.topic", src.encode()),
                                            ("eos.source.partition", str(m.partition()).encode()),
                                            ("eos.source.offset", str(m.offset()).encode())])
                positions = {}
                for m in msgs:
                    positions[m.partition()] = m.offset() + 1
                writer.send_offsets_to_transaction([TopicPartition(src, p, o) for p, o in positions.items()],
                                                   consumer.consumer_group_metadata(), 30)
                writer.commit_transaction(30)
                batches.append(len(msgs))
                time.sleep(0.1)  # slow enough to be mid-stream while the audit reads
        finally:
            consumer.close()

    thread = threading.Thread(target=stage, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while len(batches) < 5:  # the stage is under way
            assert time.monotonic() < deadline and thread.is_alive()
            time.sleep(0.1)
        config = tmp_path / "eosctl.toml"
        config.write_text(f'[clusters.c]\nbootstrap_servers = "{cluster.bootstrap_servers}"\n\n'
                          f'[pipelines.stage]\nsource_topics = ["{src}"]\ngroup = "{group}"\n\n'
                          f'[pipelines.stage.sink]\nkafka_topic = "{out}"\n')
        code, report_json, err = audit("-c", str(config), "--engine", "local", "--format", "json")
        processed_during = sum(batches)
    finally:
        stop.set()
        thread.join(30)
    report = json.loads(report_json)
    assert (code, report["findings"]) == (0, []), err
    assert 0 < sum(p["expected_records"] for p in report["partitions"]) < total  # judged some, not all
    assert processed_during < total  # the stage was still running when the audit read it


KEY_NAMES = {"gap": "lost_key", "duplicate": "duplicate_key", "phantom_aborted": "phantom_key"}


def keyed(findings: list[dict]) -> list[tuple]:
    """Offset lineage's findings as key lineage names them."""
    return comparable([{**f, "kind": KEY_NAMES.get(f["kind"], f["kind"])} for f in findings])


@pytest.fixture(scope="module")
def uncommitted(cluster, tmp_path_factory) -> tuple[Path, dict]:
    """A stage reading its input read_uncommitted: nothing else (a loss or a replay of the same keys is
    what key lineage can't tell from an aborted copy: docs/audit.md; lost_key and duplicate_key are
    test_key_lineage_pairs_outputs_with_inputs_by_key's)."""
    workdir = tmp_path_factory.mktemp("keyhops")
    return workdir, run_pipeline(cluster, f"u{uuid.uuid4().hex[:8]}", workdir,
                                 faults=["stage-read-uncommitted"], records=120)


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_key_lineage_names_the_stage_faults_for_keys_with_outputs_on_both_sides(uncommitted, tmp_path, engine,
                                                                                 request):
    """Audited by key alone, each output derived from an aborted input is a phantom_key at that input's
    offset (the key's outputs and its inputs of any outcome are as many: paired in order), exactly where
    offset lineage finds the phantoms, not a duplicate of the retried copy; outputs named in detail."""
    if engine == "spark":
        request.getfixturevalue("spark")
    workdir, manifest = uncommitted
    config = (workdir / "eosctl.toml").read_text().replace('lineage = "headers"', 'lineage = "key"')
    (tmp_path / "eosctl.toml").write_text(config)
    args = ("-c", str(tmp_path / "eosctl.toml"), "-p", f"{manifest['prefix']}.process", "--engine", engine,
            "--format", "json")
    code, out, err = audit(*args)
    assert code == 1, err
    report = json.loads(out)
    assert keyed(report["findings"]) == keyed(_stage(manifest)["expected_findings"])
    assert {f["kind"] for f in report["findings"]} == {"phantom_key"}
    assert all(f"; outputs {manifest['output_topic']}[" in f["detail"] for f in report["findings"])
    # --fail-on can leave the phantoms out of the verdict (as it can a filtering stage's lost keys).
    code, out, _ = audit(*args, "--fail-on", "lost_key,duplicate_key")
    assert code == 0 and json.loads(out)["fail_on"] == ["lost_key", "duplicate_key"]


def test_key_lineage_pairs_outputs_with_inputs_by_key(cluster, tmp_path, request):
    """No lineage in the records: outputs paired with committed inputs by key, in order. Without
    read-uncommitted input (whose aborted copies share their key with the retried ones, which key lineage
    can't tell apart), key lineage finds exactly what offset lineage finds: the skipped batch as the same
    gap, the replayed one as the same duplicate, the upstream retry as the same key duplicate."""
    workdir = tmp_path / "run"
    manifest = run_pipeline(cluster, f"k{uuid.uuid4().hex[:8]}", workdir,
                            faults=["stage-replay", "stage-skip", "upstream-retry"], records=120)
    config = (workdir / "eosctl.toml").read_text().replace('lineage = "headers"', 'lineage = "key"')
    (tmp_path / "eosctl.toml").write_text(config)
    expected = keyed(_stage(manifest)["expected_findings"])
    for engine in ("local", "spark"):
        if engine == "spark":
            request.getfixturevalue("spark")
        code, out, err = audit("-c", str(tmp_path / "eosctl.toml"), "-p", f"{manifest['prefix']}.process",
                               "--engine", engine, "--format", "json")
        assert code == 1, err
        assert keyed(json.loads(out)["findings"]) == expected, engine
    assert {f["kind"] for f in _stage(manifest)["expected_findings"]} == {"gap", "duplicate", "key_duplicate"}
