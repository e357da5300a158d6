"""`eosctl log`, `ledger` and `snapshot` against the reference pipeline's manifest (ground truth)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from eosctl.base.files import shown
from eosctl.sandbox.pipeline import run_pipeline
from tests.support.helpers import eosctl

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def faulty(cluster, tmp_path_factory) -> tuple[dict, Path]:
    workdir = tmp_path_factory.mktemp("log-ledger")
    prefix = "t" + uuid.uuid4().hex[:10]
    manifest = run_pipeline(cluster, prefix, workdir, faults=["zombie", "duplicate-replay", "skip"],
                            records=60)
    return manifest, workdir


@pytest.fixture(scope="module")
def hanging_run(cluster, tmp_path_factory) -> tuple[dict, Path]:
    """A run that leaves one transaction open on the output topic (and a duplicate for the audit)."""
    workdir = tmp_path_factory.mktemp("snapshot-hanging")
    prefix = "t" + uuid.uuid4().hex[:10]
    manifest = run_pipeline(cluster, prefix, workdir, faults=["hanging", "duplicate-replay"], records=30)
    return manifest, workdir


cli = eosctl  # 200 columns: no cell wraps


def log_json(bootstrap: str, topic: str, partition: int) -> dict:
    result = cli("log", "--bootstrap", bootstrap, "--topic", topic, "--partition", str(partition),
                 "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_log_shows_the_zombie_epoch_bump(faulty, bootstrap):
    # The take-over is one event in every partition: on Apache Kafka the coordinator's ABORT at old+1 and
    # the new instance's data at old+2 (two bumps told as one row); on noida-db one bump straight to the
    # new epoch; where the zombie's open transaction missed a partition, the new instance's data alone.
    manifest, _ = faulty
    (fence,) = manifest["fencing"]
    old, new = fence["old_epoch"], fence["new_epoch"]
    topic = manifest["output_topic"]
    bumps, aborts = {}, []
    for p in range(manifest["partitions"]):
        for prod in log_json(bootstrap, topic, p)["producers"]:
            if prod["producer_id"] == fence["producer_id"]:
                bumps.update({(p, b["offset"]): (b["old_epoch"], b["next_epoch"] or b["new_epoch"],
                                                 b["fencing"]) for b in prod["epoch_bumps"]})
                aborts += [(p, b) for b in prod["epoch_bumps"] if b["marker"] == "ABORT"]
                # one event where the partition saw both instances, none where it saw one
                assert prod["fencing_events"] == len(prod["epoch_bumps"]) <= 1, prod
                assert prod["transactional_id"] == fence["transactional_id"]
    assert bumps and set(bumps.values()) == {(old, new, True)}
    assert aborts, bumps  # the zombie flushed records before the fence: its transaction was aborted
    p, abort = aborts[0]
    text = cli("log", "--bootstrap", bootstrap, "--topic", topic, "--partition", str(p), "--no-batches")
    assert text.exit_code == 0
    story = ("FENCED: a new instance took the id over and the coordinator aborted the old one's transaction "
             f"at offsets {abort['txn_first']}..{abort['txn_last']}")
    assert abort["why"].startswith(story)
    rows = [line for line in text.stdout.splitlines() if f"epoch {old} -> " in line]
    assert len(rows) == 1 and "(FENCED: a new instance took the id over" in rows[0]
    cells = rows[0].split("│")
    assert cells[1].strip() == str(abort["offset"]) and cells[2].strip() == str(fence["producer_id"])


def test_log_aborted_ranges_and_markers_equal_the_manifest(faulty, bootstrap):
    manifest, _ = faulty
    checked = 0
    for topic in (manifest["source_topic"], manifest["output_topic"]):
        for p in range(manifest["partitions"]):
            doc = log_json(bootstrap, topic, p)
            want_aborted = [(r["first_offset"], r["last_offset"], r["producer_id"])
                            for r in manifest["aborted_ranges"] if (r["topic"], r["partition"]) == (topic, p)]
            want_markers = [(m["offset"], m["type"], m["producer_id"])
                            for m in manifest["markers"] if (m["topic"], m["partition"]) == (topic, p)]
            assert [(r["first"], r["last"], r["producer_id"]) for r in doc["aborted_ranges"]] == want_aborted
            assert [(m["offset"], m["type"], m["producer_id"]) for m in doc["markers"]] == want_markers
            checked += len(want_aborted) + len(want_markers)
    assert checked > 0 and any(m["type"] == "ABORT" for m in manifest["markers"])


def test_log_batch_table_is_paged_and_bad_input_is_one_line(faulty, bootstrap):
    manifest, _ = faulty
    topic = manifest["output_topic"]
    result = cli("log", "--bootstrap", bootstrap, "-t", topic, "-P", "0", "--limit", "2", "--format", "json")
    doc = json.loads(result.stdout)
    assert doc["batches_window"] == {"from": 0, "to": 2, "complete": False}
    assert doc["batches"][0]["base_offset"] == 0 and all(b["base_offset"] < 2 for b in doc["batches"])
    assert doc["scanned_to"] == doc["high_watermark"]  # the model still covers the whole range
    result = cli("log", "--bootstrap", bootstrap, "-t", topic, "-P", "9")
    assert result.exit_code == 2
    assert result.stderr.strip() == f"eosctl: error: topic '{topic}' has no partition 9 (it has 3)"


def test_ledger_reports_the_planted_duplicate_and_gap(faulty):
    manifest, workdir = faulty
    hop = ("-c", str(workdir / "eosctl.toml"), "-p", manifest["prefix"])  # the sink hop, not the default
    result = cli("ledger", *hop, "--format", "json")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    flags = sorted((f["kind"], p["topic"], p["partition"], f["first_offset"], f["last_offset"], f["count"])
                   for p in doc["partitions"] for f in p["flags"])
    expected = sorted((f["kind"], f["topic"], f["partition"], f["first_offset"], f["last_offset"], f["count"])
                      for f in manifest["expected_findings"])
    assert flags == expected
    assert {f[0] for f in expected} == {"duplicate", "gap"}
    rows = {p["partition"]: p for p in doc["partitions"]}
    assert sum(p["rows"] for p in rows.values()) == manifest["sink_rows"]
    for p in rows.values():  # the sink stored exactly what the group committed, and every HW was read
        assert p["stored_offset"] == p["committed_offset"] == p["high_watermark"]
    text = cli("ledger", *hop)
    assert text.exit_code == 1
    gap = next(f for f in manifest["expected_findings"] if f["kind"] == "gap")
    assert (f"{gap['count']} committed records missing from the sink at offsets "
            f"{gap['first_offset']}..{gap['last_offset']}") in text.stdout


def test_clean_pipeline_ledger_exits_0(cluster, tmp_path):
    prefix = "t" + uuid.uuid4().hex[:10]
    run_pipeline(cluster, prefix, tmp_path, faults=(), records=30)
    result = cli("ledger", "-c", str(tmp_path / "eosctl.toml"), "-p", prefix)
    assert result.exit_code == 0, result.output
    assert "no flags: the sink agrees with Kafka" in result.stdout


def test_ledger_with_missing_sink_is_one_line(faulty, tmp_path):
    _, workdir = faulty
    missing = tmp_path / "gone.duckdb"
    result = cli("ledger", "-c", str(workdir / "eosctl.toml"), "-p", faulty[0]["prefix"], "--sink-duckdb",
                 str(missing))
    assert result.exit_code == 2
    name = json.loads(json.dumps(faulty[0]["prefix"]))
    assert result.stderr.strip() == (f"eosctl: error: sink file {missing} not found; check "
                                     f"[pipelines.{name}.sink].duckdb or --sink-duckdb")


def test_snapshot_reads_back_with_the_same_numbers(faulty, bootstrap, tmp_path):
    from eosctl.inspection.snapshot import load_snapshot

    manifest, workdir = faulty
    hop = ("-c", str(workdir / "eosctl.toml"), "-p", manifest["prefix"])  # the sink hop, not the default
    out = tmp_path / "incident.duckdb"
    result = cli("snapshot", *hop, "--out", str(out), "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["sections"] == {"logs": "ok", "transactions": "ok", "producers": "ok", "lag": "ok",
                               "hanging": "ok", "ledger": "ok"}
    assert doc["hanging"]["hanging"] == [] and doc["audit_verdict"] is None
    snap = load_snapshot(out)
    assert snap.pipeline == manifest["prefix"] and snap.group == manifest["groups"]["sink"]
    ledger = json.loads(cli("ledger", *hop, "--format", "json").stdout)
    assert snap.ledger.to_dict() == ledger
    topic = manifest["output_topic"]
    for p in range(manifest["partitions"]):
        live = log_json(bootstrap, topic, p)
        log = snap.logs[(topic, p)]
        assert [r.to_dict() for r in log.ranges] == live["ranges"]
        assert [t.to_dict() for t in log.transactions] == live["transactions"]
    assert {t.transactional_id for t in snap.transactions} >= {manifest["transactional_ids"]["processor"]}
    assert {(row.topic, row.partition) for row in snap.lag.partitions} == {(topic, p) for p in range(3)}
    assert all(row.records_behind == 0 for row in snap.lag.partitions)
    # every transaction of this run ended: nothing hangs and nothing is even open
    assert (snap.hanging.max_age_s, snap.hanging.hanging, snap.hanging_candidates) == (900.0, [], [])
    assert snap.hanging.partitions_checked == len(snap.logs) == manifest["partitions"]  # what it captured
    assert cli("snapshot", *hop, "--out", str(out)).exit_code == 2  # never overwrites silently


def _without_age(d: dict) -> dict:
    return {k: v for k, v in d.items() if k != "age_s"}


def test_snapshot_records_the_open_transaction_and_applies_max_age(hanging_run, tmp_path):
    from eosctl.inspection.capture import hanging_at
    from eosctl.inspection.snapshot import load_snapshot

    manifest, workdir = hanging_run
    (h,) = manifest["hanging"]
    hop = ("-c", str(workdir / "eosctl.toml"), "-p", manifest["prefix"])  # the sink hop, not the default
    # default --max-age 15m: the seconds-old transaction is not hanging yet, but it is recorded
    result = cli("snapshot", *hop, "--out", str(tmp_path / "young.duckdb"))
    assert result.exit_code == 0, result.output
    assert ("hanging       ok (0 hanging (open longer than 15m00s), 1 younger open transaction recorded)"
            in result.stdout)
    snap = load_snapshot(tmp_path / "young.duckdb")
    assert (snap.hanging.max_age_s, snap.hanging.hanging) == (900.0, [])
    (c,) = snap.hanging_candidates
    got = (c.topic, c.partition, c.first_offset, c.producer_id, c.transactional_id, c.rules, c.lso, c.hw)
    assert got == (h["topic"], h["partition"], h["first_offset"], h["producer_id"], h["transactional_id"],
                   ("lso",), h["first_offset"], h["last_offset"] + 1)
    assert hanging_at(snap, 0).hanging == [c]
    # --max-age 0: the stored report is what `txns hanging --max-age 0` says live
    result = cli("snapshot", *hop, "--out", str(tmp_path / "now.duckdb"), "--max-age", "0",
                 "--format", "json")
    assert result.exit_code == 0, result.output
    stored = json.loads(result.stdout)["hanging"]
    live = json.loads(cli("txns", "hanging", *hop, "--max-age", "0", "--format", "json").stdout)
    assert [_without_age(x) for x in stored["hanging"]] == [_without_age(x) for x in live["hanging"]]
    assert [_without_age(x.to_dict()) for x in load_snapshot(tmp_path / "now.duckdb").hanging.hanging] == [{
        "topic": h["topic"], "partition": h["partition"], "producer_id": h["producer_id"],
        "producer_epoch": 0, "first_offset": h["first_offset"], "rules": ["lso"], "lso": h["first_offset"],
        "hw": h["last_offset"] + 1, "blocked": h["last_offset"] - h["first_offset"] + 1,
        "transactional_id": h["transactional_id"], "coordinator_state": "Ongoing",
        "age_source": "coordinator", "groups": [], "two_phase": False}]  # dated by the coordinator


def test_snapshot_stores_an_audit_report_file_and_refuses_a_bad_one(hanging_run, tmp_path):
    from eosctl.inspection.snapshot import load_snapshot
    from eosctl.report.findings import AuditReport, Finding

    manifest, workdir = hanging_run
    hop = ("-c", str(workdir / "eosctl.toml"), "-p", manifest["prefix"])  # the sink hop, not the default
    dup = next(f for f in manifest["expected_findings"] if f["kind"] == "duplicate")
    report = AuditReport.build([], [Finding("duplicate", dup["topic"], dup["partition"], dup["first_offset"],
                                            dup["last_offset"], dup["count"])])
    (tmp_path / "audit.json").write_text(report.to_json())
    out = tmp_path / "with-audit.duckdb"
    result = cli("snapshot", *hop, "--out", str(out), "--audit-report", str(tmp_path / "audit.json"))
    assert result.exit_code == 0, result.output
    assert "audit         ok (fail, 1 findings)" in result.stdout
    snap = load_snapshot(out)
    assert (snap.audit, snap.audit_origin) == (report, str(tmp_path / "audit.json"))
    (tmp_path / "bad.json").write_text("{}")
    result = cli("snapshot", *hop, "--out", str(tmp_path / "x.duckdb"), "--audit-report",
                 str(tmp_path / "bad.json"))
    assert result.exit_code == 2 and not (tmp_path / "x.duckdb").exists()
    assert result.stderr.startswith(f"eosctl: error: {shown(str(tmp_path / 'bad.json'))} is not an "
                                    "`eosctl audit "
                                    "--format json` report (no 'verdict' field)")
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.spark
def test_snapshot_with_audit_runs_it_and_the_tui_shows_it(hanging_run, spark, tmp_path):
    from eosctl.inspection.snapshot import load_snapshot
    from tui.sources import SnapshotSource

    manifest, workdir = hanging_run
    out = tmp_path / "audited.duckdb"
    result = cli("snapshot", "-c", str(workdir / "eosctl.toml"), "-p", manifest["prefix"], "--out", str(out),
                 "--with-audit", "--max-age", "0", "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert (doc["sections"]["audit"], doc["audit_verdict"]) == ("ok", "fail")
    snap = load_snapshot(out)
    assert [(f.kind, f.topic, f.partition, f.first_offset, f.last_offset, f.count)
            for f in snap.audit.findings] == [
        (f["kind"], f["topic"], f["partition"], f["first_offset"], f["last_offset"], f["count"])
        for f in manifest["expected_findings"]]
    dash = SnapshotSource(str(out)).fetch()
    assert dash.audit == snap.audit and dash.hanging_checked
    assert [(x.partition, x.first_offset) for x in dash.hanging] == [
        (x["partition"], x["first_offset"]) for x in manifest["hanging"]]
