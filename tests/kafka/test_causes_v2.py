"""Causes under transactions v2 (KIP-890), against the scripted broker: every COMMIT/ABORT marker is one
epoch above its data (TransactionMetadata.prepareAbortOrCommit bumps, TransactionMarkerChannelManager writes
the markers at the new epoch), so an ordinary abort is no fencing; the coordinator's fencing abort is two
epochs up (prepareFenceProducerEpoch, then the v2 bump: TransactionCoordinator.abortTimedOutTransactions)."""

from __future__ import annotations

from eosctl.cluster.logscan import scan_partition
from eosctl.cluster.wire import WireClient
from eosctl.config.model import Cluster
from eosctl.rules.causes import explain_partition
from eosctl.rules.reconcile import SinkFacts, reconcile_partition
from tests.kafkasim import KafkaSim
from tests.support.helpers import eosctl_json

PID = 4100


def v2_log(sim: KafkaSim) -> None:
    """0..1 committed (COMMIT at 2, epoch 1); 3..4 aborted at epoch 1 (ABORT at 5, epoch 2: ordinary);
    6..7 aborted at epoch 2 (ABORT at 8, epoch 4: the coordinator fenced it); 9 committed (COMMIT at 10)."""
    p = sim.partition("t", 0)
    p.txn(PID, 0, 2)
    p.commit(PID, 1)
    p.txn(PID, 1, 2, sequence=0)
    p.abort(PID, 2)
    p.txn(PID, 2, 2, sequence=0)
    p.abort(PID, 4)
    p.txn(PID, 5, 1, sequence=0)
    p.commit(PID, 6)


def test_phantoms_name_ordinary_v2_aborts_and_the_fencing_one(kafka_sim: KafkaSim) -> None:
    v2_log(kafka_sim)
    with WireClient(Cluster("sim", kafka_sim.bootstrap)) as client:
        log = scan_partition(client, "t", 0)
    assert log.producers[PID].protocol == "v2"
    facts = SinkFacts()
    # The sink holds every offset once, markers excluded: the aborted records are phantoms.
    _, findings = reconcile_partition(log, [(0, 1, 1), (3, 4, 1), (6, 7, 1), (9, 9, 1)], facts)
    (phantom,) = explain_partition(log, findings, facts)
    assert phantom.kind == "phantom_aborted" and (phantom.first_offset, phantom.last_offset) == (3, 7)
    assert phantom.cause is not None
    assert [t.to_dict() for t in phantom.cause.transactions] == [
        {"producer_id": PID, "producer_epoch": 1, "first_offset": 3, "last_offset": 4, "outcome": "aborted",
         "marker_offset": 5, "fenced": False},
        {"producer_id": PID, "producer_epoch": 2, "first_offset": 6, "last_offset": 7, "outcome": "aborted",
         "marker_offset": 8, "fenced": True}]


def test_explain_an_offset_of_each_v2_transaction(kafka_sim: KafkaSim) -> None:
    v2_log(kafka_sim)

    def explain(offset: int) -> dict:
        return eosctl_json("explain", "--bootstrap", kafka_sim.bootstrap, "--topic", "t", "--partition", "0",
                           "--offset", str(offset), codes=(0,), columns=None)

    committed, ordinary, fenced, marker = explain(0), explain(3), explain(7), explain(8)
    assert (committed["kind"], committed["transaction"]["marker_offset"]) == ("DATA", 2)
    assert committed["transaction"]["marker_epoch"] == 1 and committed["producer"]["protocol"] == "v2"
    assert (ordinary["kind"], ordinary["transaction"]["fenced"]) == ("ABORTED", False)
    assert (fenced["kind"], fenced["transaction"]["fenced"]) == ("ABORTED", True)
    assert "a new instance took the id over" in fenced["summary"]
    assert fenced["transaction"]["aborted_by"] == "takeover" and ordinary["transaction"]["aborted_by"] is None
    assert (marker["kind"], marker["transaction"]["outcome"], marker["batch"]["producer_epoch"]) == (
        "MARKER", "ABORT", 4)
    # Around offset 7: the ordinary v2 bumps before it counted, the fencing ABORT two epochs up after it
    # with the new instance's first data as one event.
    assert [(e["offset"], e["old_epoch"], e["new_epoch"], e["next_epoch"], e["fencing"])
            for e in fenced["producer"]["epoch_history"]] == [(8, 2, 4, 5, True)]
    assert fenced["producer"]["routine"] == ("transactions v2: 2 commits and 1 abort moved the epoch 0 -> 6 "
                                             "(routine, never fencing)")
