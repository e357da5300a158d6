"""Causes of findings (eosctl.rules.causes) from a scanned log and the sink's sweep, root causes, and the
causes in every renderer (table, JUnit, HTML). No broker: the log is built from batches
(tests/unit/cluster/test_model)."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import replace

from rich.console import Console

from eosctl.cluster.wire import Offsets
from eosctl.output.audit import table
from eosctl.output.html import render_html
from eosctl.output.junit import junit
from eosctl.report.findings import AuditReport, Finding, PartitionSummary
from eosctl.report.rootcauses import root_causes
from eosctl.rules.causes import Writer, explain_partition, key_cause
from eosctl.rules.reconcile import SinkFacts, reconcile_partition
from tests.unit.cluster.test_model import batch, marker, scan

# 0..1 pid 5 epoch 0 (committed by the COMMIT at 4); 2..3 pid 6 epoch 0 (aborted at 5 by an ABORT two
# epochs up: the coordinator fencing it); 6..7 a producer without id; 8..9 pid 5 epoch 0, still open.
LOG = (batch([0, 1], 0, pid=5, epoch=0, seq=0, txn=True) + batch([0, 1], 2, pid=6, epoch=0, seq=0, txn=True)
       + marker(4, 5, 0, True) + marker(5, 6, 2, False) + batch([0, 1], 6)
       + batch([0, 1], 8, pid=5, epoch=0, seq=2, txn=True))
# What the sink holds: (first, last, rows per offset).
ISLANDS = [(0, 0, 1), (2, 3, 1), (4, 4, 1), (6, 6, 2), (8, 8, 1)]


def explained(stored: int | None = 10, committed: int | None = None) -> dict[str, Finding]:
    log, _ = scan(LOG, Offsets(0, 10, 8))
    facts = SinkFacts()
    _, findings = reconcile_partition(log, ISLANDS, facts)
    out = explain_partition(log, findings, facts, stored, committed, "g")
    return {f"{f.kind}@{f.first_offset}": f for f in out}


def cause(f: Finding) -> dict:
    assert f.cause is not None
    return f.cause.to_dict()


def test_the_scan_keeps_each_producer_sessions_data_apart():
    log, _ = scan(LOG, Offsets(0, 10, 8))
    assert [(w.first, w.last, w.producer_id, w.producer_epoch) for w in log.writes] == [
        (0, 1, 5, 0), (6, 7, -1, -1)]


def test_each_kind_names_its_writers_markers_and_the_sink_around_it():
    found = explained()
    assert sorted(found) == ["duplicate@6", "gap@1", "gap@7", "phantom_aborted@2", "phantom_marker@4",
                             "phantom_uncommitted@8"]
    assert cause(found["phantom_aborted@2"])["transactions"] == [
        {"producer_id": 6, "producer_epoch": 0, "first_offset": 2, "last_offset": 3, "outcome": "aborted",
         "marker_offset": 5, "fenced": True}]
    assert "a new instance took the id over" in cause(found["phantom_aborted@2"])["summary"]
    # The fix, as the frameworks that read read_uncommitted by default spell it (docs/audit.md).
    for phantom in ("phantom_aborted@2", "phantom_uncommitted@8"):
        assert "option kafka.isolation.level=read_committed" in cause(found[phantom])["summary"]
        assert "consumer.override.isolation.level=read_committed" in cause(found[phantom])["summary"]
    assert cause(found["phantom_uncommitted@8"])["transactions"] == [
        {"producer_id": 5, "producer_epoch": 0, "first_offset": 8, "last_offset": 8, "outcome": "open",
         "marker_offset": None, "fenced": False}]
    assert cause(found["phantom_marker@4"])["markers"] == [
        {"offset": 4, "type": "COMMIT", "producer_id": 5, "producer_epoch": 0}]
    assert cause(found["duplicate@6"])["rows_per_offset"] == {"min": 2, "max": 2}
    gap = cause(found["gap@1"])
    assert gap["transactions"] == [{"producer_id": 5, "producer_epoch": 0, "first_offset": 1,
                                    "last_offset": 1, "outcome": "committed", "marker_offset": 4,
                                    "fenced": False}]
    assert (gap["sink_before"], gap["sink_after"], gap["passed_by"]) == (0, 2, "stored_offsets")
    plain = cause(found["gap@7"])
    assert plain["transactions"][0]["outcome"] == "non_transactional"
    assert (plain["sink_before"], plain["sink_after"]) == (6, 8)


def test_passed_by_the_group_or_nothing():
    assert cause(explained(None, 9)["gap@7"])["passed_by"] == "committed_offsets"
    assert cause(explained(None, 7)["gap@7"])["passed_by"] is None  # the commit is not past offset 7


def test_key_rules():
    f = Finding("key_duplicate", "t", 0, 1, 2, 2, key="k", offsets=(1, 2))
    rule = {name: key_cause(f, writers).rule for name, writers in {
        "none": [Writer("t", 0, 1, -1, -1, None), Writer("t", 0, 2, -1, -1, None)],
        "restart": [Writer("t", 0, 1, 7, 0, 3), Writer("t", 0, 2, 7, 1, 4)],
        "session": [Writer("t", 0, 1, 7, 0, 3), Writer("t", 0, 2, 7, 0, 5)],
        "txn": [Writer("t", 0, 1, 7, 0, 3), Writer("t", 0, 2, 7, 0, 3)],
    }.items()}
    assert rule == {"none": "non_idempotent", "restart": "producer_sessions", "session": "same_session",
                    "txn": "same_transaction"}
    txns = key_cause(f, [Writer("t", 0, 1, 7, 0, 3), Writer("t", 1, 2, 8, 0, None)]).to_dict()["transactions"]
    assert [(t["topic"], t["partition"], t["producer_id"], t["outcome"]) for t in txns] == [
        ("t", 0, 7, "committed"), ("t", 1, 8, "non_transactional")]


def report() -> AuditReport:
    tail = explain_partition(None, [Finding("gap", "t", 1, 5, 9, 5)])  # nothing after it: a tail gap
    parts = [PartitionSummary("t", 0, 0, 8, 10, 5, 7), PartitionSummary("t", 1, 0, 10, 10, 10, 5)]
    return AuditReport.build(parts, [*explained().values(), *tail])


def test_root_causes_group_the_findings():
    r = report()
    groups = {c.rule: [r.findings[i].kind for i in c.findings] for c in root_causes(r.findings)}
    assert list(groups) == ["sink_reads_aborted", "sink_skipped", "replay", "unexplained"]
    assert sorted(groups["sink_reads_aborted"]) == ["phantom_aborted", "phantom_marker",
                                                    "phantom_uncommitted"]
    assert groups["sink_skipped"] == ["gap", "gap"]
    tail = explain_partition(None, [Finding("gap", "t", 1, 5, 9, 5)], SinkFacts(), None, None)
    assert root_causes(tail)[0].rule == "unexplained"  # no log: no cause
    doc = json.loads(r.to_json())
    assert doc["root_causes"][0]["partitions"] == [{"topic": "t", "partition": 0}]


def test_a_tail_gap_is_not_yet_consumed():
    log, _ = scan(LOG, Offsets(0, 10, 8))
    facts = SinkFacts()
    _, findings = reconcile_partition(log, [(0, 5, 1)], facts)
    (gap,) = explain_partition(log, [f for f in findings if f.kind == "gap"], facts)
    assert gap.cause is not None and gap.cause.passed_by is None and gap.cause.sink_after is None
    assert root_causes([gap])[0].rule == "not_yet_consumed"


def test_the_table_shows_root_causes_first_then_each_findings_cause():
    console = Console(width=250, record=True, color_system=None)
    console.print(table(report()))
    text = console.export_text()
    assert text.index("root causes") < text.index("findings")
    assert "sink_reads_aborted" in text
    assert "sink read aborted data (fenced zombie): pid 6 e0 ABORT@5" in text
    assert "skipped: sink's stored offsets are past it; written by pid 5 e0 COMMIT@4" in text


def test_junit_failures_carry_the_cause():
    suite = ET.fromstring(junit(report()))
    failures = {f.get("message"): f.text for f in suite.iter("failure")}
    message = "phantom_aborted at offsets 2..3 (2): sink read aborted data (fenced zombie): pid 6 e0 ABORT@5"
    assert message in failures
    assert ("aborted when a new instance took the id over and the coordinator aborted the old one's "
            "transaction") in failures[message]


def test_html_lists_root_causes_first_and_links_each_mark_to_its_row():
    r = report()
    html = render_html(r)
    assert html.index('id="root-causes"') < html.index('id="audited"') < html.index('id="gapmap"')
    i = next(i for i, f in enumerate(r.findings) if f.kind == "phantom_aborted")
    assert f'<tr id="finding-{i}" data-kind="phantom_aborted">' in html
    assert re.search(rf'<a href="#finding-{i}"><rect class="f" data-kind="phantom_aborted"', html)
    assert "pid 6 e0 ABORT@5" in html


def test_a_stage_copying_a_duplicate_faithfully_is_blamed_on_its_input():
    from eosctl.report.findings import follow_stages

    source = Finding("key_duplicate", "orders", 0, 1, 2, 2, key="k", offsets=(1, 2))
    source = replace(source, cause=key_cause(source, [Writer("orders", 0, 1, -1, -1, None),
                                                      Writer("orders", 0, 2, -1, -1, None)]))
    copy = Finding("key_duplicate", "enriched", 0, 5, 6, 2, key="k", offsets=(5, 6))
    copy = replace(copy, cause=key_cause(copy, [Writer("enriched", 0, 5, 9, 0, 7),
                                                Writer("enriched", 0, 6, 9, 0, 7)]))
    other = replace(copy, key="other")
    _, followed, alone = follow_stages([[source], [copy, other]])
    assert followed.cause.rule == "non_idempotent" and "copied it faithfully" in followed.cause.summary
    assert [t.topic for t in followed.cause.transactions] == ["enriched", "orders", "orders"]
    assert alone.cause.rule == "same_transaction"


def test_a_key_duplicate_followed_through_the_stages_lineage():
    """eosctl.rules.upstream: copies of two input records carrying the key take the input writers' rule;
    copies
    of one input record are the stage's own replay; an unreadable lineage proves nothing."""
    from eosctl.report.findings import Finding
    from eosctl.rules.causes import Writer, key_cause
    from eosctl.rules.upstream import _followed

    f = Finding("key_duplicate", "out", 1, 38, 39, 2, key="o-60", offsets=(38, 39))
    f = replace(f, cause=key_cause(f, [Writer("out", 1, 38, 1001, 1, 40), Writer("out", 1, 39, 1001, 1, 40)]))
    assert f.cause.rule == "same_transaction"
    writers = {("in", 0, 36): Writer("in", 0, 36, -1, -1, None),
               ("in", 2, 7): Writer("in", 2, 7, -1, -1, None)}

    copied = _followed(f, [("in", 0, 36), ("in", 2, 7)], writers)
    assert copied.cause.rule == "non_idempotent"
    assert [(t.topic, t.partition, t.first_offset, t.producer_id) for t in copied.cause.transactions] == [
        ("out", 1, 38, 1001), ("in", 0, 36, -1), ("in", 2, 7, -1)]
    assert copied.cause.summary.startswith(
        "Key o-60 is at out[1]@38 by producer 1001 epoch 1 (COMMIT at 40), out[1]@39 by producer 1001 "
        "epoch 1 (COMMIT at 40): the stage copied it faithfully from its input, where key o-60 is at "
        "in[0]@36")

    replayed = _followed(f, [("in", 0, 36), ("in", 0, 36)], writers)
    assert replayed.cause.rule == "same_transaction"
    assert replayed.cause.summary.endswith("Every copy derives from the one input record in[0]@36: the stage "
                                           "wrote it more than once (a replay of the stage).")
    assert _followed(f, [("in", 0, 36), None], writers) == f and _followed(f, [("in", 0, 36), None],
                                                                           writers).cause == f.cause
