"""Causes of the reference pipeline's faults, checked against its manifest, and `eosctl explain` on it.

One pipeline run with every fault (as `eosctl demo`), plus two committed records written to the output
topic after the sink stopped (a tail gap: the sink has not consumed them); audited once on the local
engine (tests/integration/test_audit.py::test_engines_agree checks Spark returns the identical report,
causes and root causes included).

The upstream retry is followed through the process stage: audited hop by hop (pipeline
PREFIX.pipeline), the stage hop finds the key twice in PREFIX.orders, written without a producer id
(non_idempotent), and the sink hop's duplicate of that key takes that cause.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka import Producer

from eosctl.cli import main
from eosctl.sandbox.pipeline import run_pipeline
from tests.support.helpers import eosctl_json

pytestmark = [pytest.mark.integration]

TAIL_PARTITION = 2


@pytest.fixture(scope="module")
def run(cluster, tmp_path_factory) -> tuple[Path, dict, dict]:
    """(workdir, manifest, the audit's JSON report)."""
    workdir = tmp_path_factory.mktemp("causes")
    faults = ["duplicate-replay", "skip", "aborted-leak", "upstream-retry", "zombie", "hanging"]
    manifest = run_pipeline(cluster, "c" + workdir.name[-8:].replace("-", ""), workdir, faults=faults,
                            records=60)
    producer = Producer({"bootstrap.servers": manifest["bootstrap"], "enable.idempotence": True})
    for i in range(2):
        producer.produce(manifest["output_topic"], key=f"tail-{i}".encode(), value=b"{}",
                         partition=TAIL_PARTITION)
    assert producer.flush(10) == 0
    return workdir, manifest, audit(workdir)


def sink_hop(workdir: Path) -> tuple[str, ...]:
    """The run's config and its sink hop (the config's default is the whole pipeline, both hops)."""
    prefix = json.loads((workdir / "manifest.json").read_text())["prefix"]
    return ("-c", str(workdir / "eosctl.toml"), "-p", prefix)


def audit(workdir: Path) -> dict:
    return eosctl_json("audit", "--engine", "local", *sink_hop(workdir), codes=(1,), columns=None)


def explain(workdir: Path, partition: int, offset: int) -> dict:
    return eosctl_json("explain", *sink_hop(workdir), "--partition", str(partition), "--offset", str(offset),
                       codes=(0,), columns=None)


def of(report: dict, kind: str) -> list[dict]:
    return [f for f in report["findings"] if f["kind"] == kind]


def test_every_aborted_leak_phantom_names_its_transaction_and_abort_marker(run):
    _, manifest, report = run
    fencing = manifest["fencing"][0]
    phantoms = of(report, "phantom_aborted")
    assert phantoms
    for f in phantoms:
        txns = f["cause"]["transactions"]
        assert sum(t["last_offset"] - t["first_offset"] + 1 for t in txns) == f["count"]
        for t in txns:
            aborted = [r for r in manifest["aborted_ranges"] if (r["topic"], r["partition"]) == (
                f["topic"], f["partition"]) and r["first_offset"] <= t["first_offset"] <= r["last_offset"]]
            assert [(r["producer_id"], r["last_offset"]) for r in aborted] == [(t["producer_id"],
                                                                                t["last_offset"])]
            marker = min(m["offset"] for m in manifest["markers"]
                         if (m["topic"], m["partition"], m["producer_id"], m["type"]) == (
                             f["topic"], f["partition"], t["producer_id"], "ABORT")
                         and m["offset"] > t["last_offset"])
            assert (t["outcome"], t["marker_offset"]) == ("aborted", marker)
            assert t["producer_epoch"] in (fencing["old_epoch"], fencing["new_epoch"])


def test_the_zombies_aborted_transaction_is_fenced(run):
    _, manifest, report = run
    fencing = manifest["fencing"][0]
    fenced = [t for f in of(report, "phantom_aborted") for t in f["cause"]["transactions"] if t["fenced"]]
    assert fenced, "the zombie's transaction was aborted by the fence and leaked into the sink"
    assert {(t["producer_id"], t["producer_epoch"]) for t in fenced} == {(fencing["old_producer_id"],
                                                                          fencing["old_epoch"])}
    assert "a new instance took the id over" in next(
        f for f in of(report, "phantom_aborted") if any(t["fenced"] for t in f["cause"]["transactions"])
    )["cause"]["summary"]


def test_the_skip_gap_was_passed_by_the_stored_offsets_and_the_tail_gap_is_lag(run):
    _, manifest, report = run
    skip = next(e for e in manifest["expected_findings"] if e["fault"] == "skip")
    gaps = {(f["partition"], f["first_offset"]): f for f in of(report, "gap")}
    gap = gaps.pop((skip["partition"], skip["first_offset"]))
    assert (gap["cause"]["passed_by"], gap["cause"]["transactions"][0]["outcome"]) == ("stored_offsets",
                                                                                       "committed")
    assert gap["cause"]["sink_before"] < skip["first_offset"]
    assert gap["cause"]["sink_after"] > skip["last_offset"]
    ((partition, _), tail), = gaps.items()
    assert partition == TAIL_PARTITION and tail["count"] == 2
    assert (tail["cause"]["passed_by"], tail["cause"]["sink_after"]) == (None, None)
    assert tail["cause"]["transactions"][0]["outcome"] == "non_transactional"
    rules = {r["rule"]: r["findings"] for r in report["root_causes"]}
    assert report["findings"].index(tail) in rules["not_yet_consumed"]
    assert report["findings"].index(gap) in rules["sink_skipped"]


def test_the_replay_and_the_upstream_retry(run):
    _, manifest, report = run
    (dup,) = of(report, "duplicate")
    assert dup["cause"]["rows_per_offset"] == {"min": 2, "max": 2}
    (key,) = of(report, "key_duplicate")
    retry = next(e for e in manifest["expected_findings"] if e["fault"] == "upstream-retry")
    # The sink hop alone, but the config names the stage writing its topic: the copies' lineage headers
    # lead to two input records carrying the key, written without a producer id (eosctl.rules.upstream).
    (planted,) = [e for hop in manifest["hops"] for e in hop["expected_findings"]
                  if e["fault"] == "upstream-retry" and e["topic"] == manifest["source_topic"]]
    txns = key["cause"]["transactions"]
    mine = [t for t in txns if t["topic"] == manifest["output_topic"]]
    covered = {o for t in mine for o in range(t["first_offset"], t["last_offset"] + 1)}
    assert covered >= set(retry["offsets"])
    assert {t["producer_id"] for t in mine} == {manifest["fencing"][0]["producer_id"]}  # the process stage
    assert [(t["topic"], t["first_offset"], t["producer_id"], t["outcome"]) for t in txns
            if t["topic"] == manifest["source_topic"]] == [
        (manifest["source_topic"], o, -1, "non_transactional") for o in planted["offsets"]]
    assert key["cause"]["rule"] == "non_idempotent"
    assert "the stage copied it faithfully from its input" in key["cause"]["summary"]
    assert {r["rule"] for r in report["root_causes"]} >= {"sink_reads_aborted", "sink_skipped", "replay",
                                                          "not_yet_consumed"}


def test_the_replay_says_which_sink_batches_wrote_it_first_and_again(run):
    """sink.order_column (the reference sink's sink_batch): the duplicate's cause names, over its offsets,
    the batches of the first writes and of the repeated writes, as the sink's rows have them."""
    import duckdb

    _, manifest, report = run
    (dup,) = of(report, "duplicate")
    with duckdb.connect(manifest["sink"]["duckdb"], read_only=True) as con:
        rows = con.execute(
            "SELECT min(sink_batch), max(sink_batch) FROM orders_sink WHERE src_topic = ? "
            "AND src_partition = ? AND src_offset BETWEEN ? AND ? GROUP BY src_offset",
            [dup["topic"], dup["partition"], dup["first_offset"], dup["last_offset"]]).fetchall()
    firsts, agains = zip(*rows, strict=True)
    assert dup["cause"]["write_order"] == {
        "column": "sink_batch", "first_write": {"min": min(firsts), "max": max(firsts)},
        "repeated_write": {"min": min(agains), "max": max(agains)}}
    assert max(firsts) < min(agains)  # the replay came after the first writes
    first = f"{min(firsts)}" if min(firsts) == max(firsts) else f"{min(firsts)}..{max(firsts)}"
    assert f"By sink_batch, the first writes were at {first}" in dup["cause"]["summary"]


def test_explain_an_aborted_offset_a_marker_an_open_one_a_gap_and_a_duplicate(run):
    workdir, manifest, report = run
    phantom = of(report, "phantom_aborted")[0]
    aborted = explain(workdir, phantom["partition"], phantom["first_offset"])
    t = phantom["cause"]["transactions"][0]
    assert (aborted["kind"], aborted["transaction"]["outcome"], aborted["transaction"]["marker_offset"]) == (
        "ABORTED", "ABORT", t["marker_offset"])
    assert aborted["sink"]["rows"] == 1 and "phantom" in aborted["summary"]

    m = manifest["markers"][0]
    marker = explain(workdir, m["partition"], m["offset"])
    assert (marker["kind"], marker["transaction"]["outcome"], marker["batch"]["is_control"]) == (
        "MARKER", m["type"], True)

    hang = manifest["hanging"][0]
    open_ = explain(workdir, hang["partition"], hang["first_offset"] + 1)
    assert (open_["kind"], open_["transaction"]["outcome"], open_["log"]["last_stable_offset"]) == (
        "OPEN", "OPEN", hang["first_offset"])
    assert open_["group"]["consumed"] is False

    skip = next(e for e in manifest["expected_findings"] if e["fault"] == "skip")
    gap = explain(workdir, skip["partition"], skip["first_offset"])
    assert (gap["kind"], gap["sink"]["rows"], gap["sink"]["stored_past"]) == ("DATA", 0, True)
    assert "missing" in gap["summary"]

    replay = next(e for e in manifest["expected_findings"] if e["fault"] == "duplicate-replay")
    dup = explain(workdir, replay["partition"], replay["first_offset"])
    assert (dup["kind"], dup["sink"]["rows"], dup["group"]["consumed"]) == ("DATA", 2, True)
    assert "duplicate" in dup["summary"]


def test_explain_a_report_lists_its_root_causes(run, tmp_path):
    _, _, report = run
    path = tmp_path / "audit.json"
    path.write_text(json.dumps(report), encoding="utf-8")
    result = CliRunner().invoke(main, ["explain", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [r["rule"] for r in doc["root_causes"]] == [r["rule"] for r in report["root_causes"]]
    assert sorted(f["index"] for r in doc["root_causes"] for f in r["findings"]) == list(
        range(len(report["findings"])))
    table = CliRunner().invoke(main, ["explain", str(path)], env={"COLUMNS": "200"})
    assert table.exit_code == 0 and "sink_reads_aborted" in table.stdout


def test_the_upstream_retry_is_followed_through_the_stage_to_its_non_idempotent_writes(run):
    workdir, manifest, _ = run
    result = CliRunner().invoke(main, ["audit", "--engine", "local", "-c", str(workdir / "eosctl.toml"),
                                       "-p", f"{manifest['prefix']}.pipeline", "--format", "json"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    (planted,) = [e for hop in manifest["hops"] for e in hop["expected_findings"]
                  if e["fault"] == "upstream-retry" and e["topic"] == manifest["source_topic"]]
    keys = {f["topic"]: f for f in of(report, "key_duplicate")}
    source, output = keys[manifest["source_topic"]], keys[manifest["output_topic"]]
    assert source["cause"]["rule"] == "non_idempotent"
    writers = [(t["topic"], t["first_offset"], t["producer_id"], t["outcome"])
               for t in source["cause"]["transactions"]]
    assert writers == [(manifest["source_topic"], o, -1, "non_transactional") for o in planted["offsets"]]
    assert output["cause"]["rule"] == "non_idempotent"
    assert "copied it faithfully" in output["cause"]["summary"]
    assert {t["topic"] for t in output["cause"]["transactions"]} == {manifest["source_topic"],
                                                                     manifest["output_topic"]}
    upstream = next(r for r in report["root_causes"] if r["rule"] == "upstream_retry")
    assert {report["findings"].index(source), report["findings"].index(output)} <= set(upstream["findings"])


def judged(report: dict) -> tuple[list, list]:
    """What a user compares between two reports of the same data: every finding with its cause, and the root
    causes (the engine's timings and the elapsed time aside)."""
    return report["findings"], report["root_causes"]


def test_every_entry_point_gives_the_same_findings_and_causes(run, tmp_path):
    """Issue 55: `eosctl audit`, the TUI, the exporter's continuous audit, `snapshot --with-audit` and the
    demo finish an audit in one place (auditors.passes). The sink hop alone: its key duplicate's cause needs
    the upstream pass (followed back through the stage to the non-idempotent writes), and each entry point
    has it; the whole pipeline (the config's default, both hops): the demo's audit is `eosctl audit -c`'s."""
    import asyncio
    import time

    from eosctl.base.progress import silent
    from eosctl.commands import demo_cmd, exporter_cmd, snapshot_cmd, tui_cmd
    from eosctl.config.target import resolve
    from eosctl.inspection.capture import Capture
    from eosctl.output.terminal import console
    from tests.support.tui import tui_audit

    workdir, manifest, cli = run
    config = str(workdir / "eosctl.toml")
    prefix = manifest["prefix"]
    (key_dup,) = [f for f in of(cli, "key_duplicate") if f["topic"] == manifest["output_topic"]
                  and "copied it faithfully" in f["cause"]["summary"]]
    assert key_dup["cause"]["rule"] == "non_idempotent"  # the upstream pass ran for `eosctl audit`

    target = resolve(config, prefix, None)
    _, tui_report = asyncio.run(tui_audit(["tui", "-c", config, "-p", prefix]))
    assert judged(tui_report.to_dict()) == judged(cli), "the TUI"
    assert judged(tui_cmd.run_audit(target, silent).to_dict()) == judged(cli), "the TUI's run_audit"

    auditor = exporter_cmd._Auditor(str(tmp_path / "states"), 86_400.0, ())  # incremental: a DuckDB sink
    options = exporter_cmd._audit_options([target])
    exported = auditor(target, target.pipeline.sink, options=options, started=time.monotonic())
    assert exported.engine.get("incremental"), exported.engine
    assert judged(exported.to_dict()) == judged(cli), "the exporter"
    full = exporter_cmd._Auditor(None, 86_400.0, ())(target, target.pipeline.sink, options=options)
    assert judged(full.to_dict()) == judged(cli), "the exporter's full audit"

    captured = Capture(captured_at=None, bootstrap=target.cluster.bootstrap_servers,  # type: ignore[arg-type]
                       pipeline=prefix, group=target.group, topics=list(target.topics))
    snapshot_cmd._capture_audit(captured, target, target.pipeline.sink, config)
    assert captured.sections["audit"] == "ok", captured.sections
    assert judged(captured.audit.to_dict()) == judged(cli), "snapshot --with-audit"

    whole = eosctl_json("audit", "--engine", "local", "-c", config, codes=(1,), columns=None)
    assert [h["name"] for h in whole["hops"]] == [f"{prefix}.process", prefix]
    quiet = console(stderr=True)
    demo = demo_cmd._run_audit(Path(config), quiet, quiet)
    assert demo is not None and judged(demo.to_dict()) == judged(whole), "the demo"
