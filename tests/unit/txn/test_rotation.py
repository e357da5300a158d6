"""Producer-id rotation under transactions v2 (KAFKA-18660) read as one producer session continuing.

The scripted log is what Apache Kafka's coordinator writes when a transaction ends at an exhausted epoch
(TransactionCoordinator.endTransaction allocates ``nextProducerId`` when TransactionMetadata.
isEpochExhausted, epoch >= 32766; prepareAbortOrCommit writes the markers with the old id at epoch + 1;
prepareComplete moves the transactional id to the new id at epoch 0): producer 7 commits at 32765 (marker
32766) and at 32766 (marker 32767), then the same transactional id writes as producer 9 at epoch 0.
"""

from __future__ import annotations

from dataclasses import replace

from rich.console import Console

from eosctl.cluster.wire import Offsets
from eosctl.output.producers import render_producers
from eosctl.report.findings import Finding
from eosctl.rules.causes import Writer, key_cause
from eosctl.txn.fencing import abort_cause, bump_verdict, fencing_events
from eosctl.txn.producers import LOG_SCAN, ProducersReport, from_log, named
from eosctl.txn.rotation import rotations
from tests.unit.cluster.test_model import batch, marker, scan

P, Q = 7, 9
LOG = (batch([0], 0, P, 32765, 0, txn=True) + marker(1, P, 32766, True)
       + batch([0], 2, P, 32766, 0, txn=True) + marker(3, P, 32767, True)
       + batch([0], 4, Q, 0, 0, txn=True) + marker(5, Q, 1, True)
       + batch([0], 6, 11, 0, 0, txn=True) + marker(7, 11, 1, True))  # another id, new at epoch 0 too


def rotated_log():
    log, _ = scan(LOG, Offsets(0, 8, 8))
    return log


def test_the_log_shows_producer_7_continuing_as_producer_9():
    log = rotated_log()
    assert rotations(log) == {Q: P}  # producer 11 is another id: the rotation names the first one only
    assert [(t.producer_id, t.producer_epoch, t.marker_epoch, t.outcome) for t in log.transactions] == [
        (P, 32765, 32766, "COMMIT"), (P, 32766, 32767, "COMMIT"), (Q, 0, 1, "COMMIT"), (11, 0, 1, "COMMIT")]


def test_producers_reads_the_rotation_as_one_session():
    rows = {r.producer_id: r for r in from_log(rotated_log())}
    assert rows[Q].continues_producer_id == P
    assert rows[P].continues_producer_id is None and rows[11].continues_producer_id is None
    assert [fencing_events(p) for p in rotated_log().producers.values()] == [0, 0, 0]
    assert rows[Q].to_dict()["continues_producer_id"] == P


def test_a_key_written_across_the_rotation_is_one_producer_session():
    f = Finding("key_duplicate", "t", 0, 2, 4, 2, key="k", offsets=(2, 4))
    across = key_cause(f, [Writer("t", 0, 2, P, 32766, 3), Writer("t", 0, 4, Q, 0, 5)])
    assert across.rule == "same_session"
    assert "within one producer session" in across.summary
    # A producer id at epoch 0 *before* the exhausted one wrote is no rotation of it: two sessions.
    before = key_cause(f, [Writer("t", 0, 4, P, 32766, 5), Writer("t", 0, 2, Q, 0, 3)])
    assert before.rule == "producer_sessions"
    # Not exhausted: a new producer id at epoch 0 is a new producer session.
    assert key_cause(f, [Writer("t", 0, 2, P, 32000, 3), Writer("t", 0, 4, Q, 0, 5)]).rule == \
        "producer_sessions"


def test_no_rotation_where_the_new_id_is_not_at_epoch_0_or_the_marker_not_at_32767():
    later = (batch([0], 2, P, 32766, 0, txn=True) + marker(3, P, 32767, True)
             + batch([0], 4, Q, 5, 0, txn=True) + marker(5, Q, 6, True))
    assert rotations(scan(later, Offsets(0, 6, 6))[0]) == {}
    # Transactions v1: the marker keeps the epoch, and Q is a new instance (InitProducerId at exhaustion).
    v1 = (batch([0], 2, P, 32766, 0, txn=True) + marker(3, P, 32766, True)
          + batch([0], 4, Q, 0, 0, txn=True) + marker(5, Q, 0, True))
    assert rotations(scan(v1, Offsets(0, 6, 6))[0]) == {}


def test_the_producers_table_names_both_ids_as_one_transactional_id():
    rows = [replace(r, transactional_id="app-0" if r.producer_id == Q else None)
            for r in from_log(rotated_log())]
    rows = named(rows, {Q: P})
    assert [(r.producer_id, r.transactional_id) for r in rows] == [(P, "app-0"), (Q, "app-0"), (11, None)]
    console = Console(width=200, record=True)
    render_producers(console, ProducersReport("t", [0], LOG_SCAN, "read from the log", rows))
    text = console.export_text()
    assert "9 (continues 7)" in text and "11 (continues" not in text and "7 (continues" not in text


def test_a_rotation_on_an_abort_is_no_take_over():
    # EndTxn(ABORT) at the exhausted epoch rotates the same way (prepareAbortOrCommit, prepareComplete).
    data = (batch([0], 0, P, 32765, 0, txn=True) + marker(1, P, 32766, True)
            + batch([0], 2, P, 32766, 0, txn=True) + marker(3, P, 32767, False)
            + batch([0], 4, Q, 0, 0, txn=True) + marker(5, Q, 1, True))
    log = scan(data, Offsets(0, 6, 6))[0]
    assert rotations(log) == {Q: P}
    p = log.producers[P]
    assert fencing_events(p) == 0 and abort_cause(p, 3) is None
    (bump,) = [b for b in p.epoch_bumps if b.offset == 3]
    assert bump_verdict(p, bump) == (
        False, "transactions v2: the id's epoch ran out (32767): the coordinator moved it to a new "
               "producer id at epoch 0 (KAFKA-18660)")


def test_eosctl_log_names_the_new_id_as_the_old_ones_rotation():
    from eosctl.output.log import log_document, render_log

    log = rotated_log()
    log.producers[Q].transactional_id = "app-0"  # the coordinator knows only the id it moved to
    doc = log_document(log, None)
    by_pid = {p["producer_id"]: p for p in doc["producers"]}
    assert [(pid, p["continues_producer_id"], p["transactional_id"], p["fencing_events"])
            for pid, p in by_pid.items()] == [(P, None, "app-0", 0), (Q, P, "app-0", 0), (11, None, None, 0)]
    console = Console(width=240, record=True)
    render_log(console, doc)
    text = console.export_text()
    assert f"{Q} (continues {P})" in text
    assert ("producer-id rotation: continues producer id 7, whose epochs ran out (its marker at 32767; "
            "transactions v2, KAFKA-18660): one session going on, not a new instance") in text
    assert "TAKEOVER" not in text and "took the id over" not in text


def test_explain_names_the_new_id_as_the_old_ones_rotation():
    from eosctl.inspection.explain import Facts, offset_document

    doc = offset_document(Facts(rotated_log(), 4))
    assert doc["producer"]["producer_id"] == Q and doc["producer"]["continues_producer_id"] == P
    assert ("Producer 9 continues producer id 7: the coordinator moved the transactional id to it when that "
            "id's epochs ran out (transactions v2, KAFKA-18660), one session going on, not a new instance."
            ) in doc["summary"]
    other = offset_document(Facts(rotated_log(), 6))  # producer 11: new at epoch 0, no rotation
    assert other["producer"]["continues_producer_id"] is None and "continues" not in other["summary"]
