"""The Producers view on logs read from the scripted broker: ordinary transactions-v2 markers are neither
marked FENCED nor where Enter jumps; Kafka v1's fencing abort is both (issue 9, case 4)."""

from __future__ import annotations

from datetime import UTC, datetime

from eosctl.cluster.logscan import scan_partition
from eosctl.cluster.wire import WireClient
from eosctl.inspection.capture import Capture
from eosctl.txn.producers import from_log
from tests.kafkasim import KafkaSim
from tui.sources import Dashboard
from tui.views.producers import producer_rows, where

PID = 4000


def dashboard(sim: KafkaSim) -> Dashboard:
    with WireClient(sim.bootstrap) as client:
        log = scan_partition(client, "t", 0)
    return Dashboard(Capture(datetime.fromtimestamp(0, UTC), sim.bootstrap, "p", None, ["t"],
                             producers=from_log(log), logs={("t", 0): log}))


def jump(dash: Dashboard) -> int | None:
    return where(dash, dash.producers[0])


def test_v2_markers_are_not_fencing_and_enter_opens_the_open_transaction(kafka_sim: KafkaSim) -> None:
    p = kafka_sim.partition("t", 0)
    p.txn(PID, 0, 2)
    p.commit(PID, 1)
    for epoch in (1, 2, 3):
        p.txn(PID, epoch, 1, sequence=0)
        p.abort(PID, epoch + 1)
    p.txn(PID, 4, 1, sequence=0)  # open
    dash = dashboard(kafka_sim)
    (row,) = producer_rows(dash)
    assert row.cells[2:4] == (4, "0→1→2→3→4") and row.cells[7] == "" and row.level is None
    assert jump(dash) == 9  # the open transaction, not the first ABORT at offset 4


def test_v1_fencing_abort_is_marked_and_jumped_to(kafka_sim: KafkaSim) -> None:
    p = kafka_sim.partition("t", 0)
    p.txn(PID, 0, 2)
    p.commit(PID, 0)
    p.txn(PID, 0, 1)
    p.abort(PID, 1)  # the coordinator's fencing abort (transactions v1)
    p.txn(PID, 2, 1, sequence=0)
    p.commit(PID, 2)
    dash = dashboard(kafka_sim)
    (row,) = producer_rows(dash)
    assert row.cells[7] == "FENCED x1" and row.level == "warn"
    assert jump(dash) == 4
