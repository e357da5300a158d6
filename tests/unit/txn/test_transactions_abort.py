"""`eosctl txns abort`, the one command that writes to a cluster: the exact WriteTxnMarkers request it
sends with --yes, and that nothing is sent without it (fake broker and admin client)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from kafka.admin._transactions import AbortTransactionSpec
from kafka.structs import TopicPartition

from eosctl.cluster import clients as cluster_clients
from eosctl.cluster import wire as cluster_wire
from eosctl.cluster.wire import Offsets
from eosctl.txn.transactions import WRITE_TXN_MARKERS_API_KEY
from tests.support import helpers

TP = ("shop.enriched", 2)
# The open transaction holds the LSO at 140; the HW is 146.
OFFSETS = Offsets(0, 146, 140)


class FakeWire:
    timeout_ms = 200

    def __init__(self, *a, **kw) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def leader(self, topic, partition):
        return 1

    def offsets(self, tps):
        return {tp: OFFSETS for tp in tps}

    def brokers(self):
        return [1]

    def request_all(self, calls):
        """The coordinator's answers (eosctl.txn.transactions.coordinator_view asks them raw)."""
        return [_COORDINATOR[type(request).__name__] for _, request in calls]


_COORDINATOR = {
    "ListTransactionsRequest": SimpleNamespace(error_code=0, transaction_states=[
        SimpleNamespace(transactional_id="shop.hanging", producer_id=5001)]),
    "FindCoordinatorRequest": SimpleNamespace(error_code=0, node_id=1),
    # No consumer group on the cluster: the dry run's "which groups it blocks" is empty.
    "ListGroupsRequest": SimpleNamespace(error_code=0, groups=[]),
    "DescribeTransactionsRequest": SimpleNamespace(transaction_states=[SimpleNamespace(
        error_code=0, transactional_id="shop.hanging", producer_id=5001, producer_epoch=3,
        transaction_state="Ongoing", transaction_timeout_ms=60000,
        transaction_start_time_ms=1_795_000_000_000,
        topics=[SimpleNamespace(topic=TP[0], partitions=[TP[1]])])]),
}


class FakeAdmin:
    def __init__(self, coordinator_epoch: int = 4, writes_markers: bool = True) -> None:
        self.aborted: list[AbortTransactionSpec] = []
        self.coordinator_epoch = coordinator_epoch
        self.writes_markers = writes_markers
        self.closed = False

    def describe_producers(self, tps):
        assert tps == [TopicPartition(*TP)]
        open_txn = SimpleNamespace(producer_id=5001, producer_epoch=3, last_sequence=5,
                                   last_timestamp=1_795_000_000_000, coordinator_epoch=self.coordinator_epoch,
                                   current_transaction_start_offset=140)
        done = SimpleNamespace(producer_id=5000, producer_epoch=0, last_sequence=9, last_timestamp=1,
                               coordinator_epoch=4, current_transaction_start_offset=-1)
        return {TopicPartition(*TP): SimpleNamespace(active_producers=[done, open_txn])}

    def api_versions(self):
        versions = {18: (0, 3), 61: (0, 0)}
        if self.writes_markers:
            versions[WRITE_TXN_MARKERS_API_KEY] = (0, 1)
        return versions

    def abort_transaction(self, spec):
        self.aborted.append(spec)

    def close(self):
        self.closed = True


@pytest.fixture
def admin(monkeypatch) -> FakeAdmin:
    fake = FakeAdmin()
    monkeypatch.setattr(cluster_wire, "WireClient", FakeWire)
    monkeypatch.setattr(cluster_clients, "kafka_admin", lambda cluster, timeout=5.0: fake)
    return fake


def abort(*extra: str):
    return helpers.eosctl("txns", "abort", "--bootstrap", "127.0.0.1:9092", "--topic", TP[0], "--partition",
                          str(TP[1]), "--start-offset", "140", *extra, columns=None, check=False)


def test_yes_sends_one_abort_marker_for_exactly_that_transaction(admin):
    result = abort("--yes")
    assert result.exit_code == 0, result.output
    assert admin.aborted == [AbortTransactionSpec(TopicPartition("shop.enriched", 2), producer_id=5001,
                                                  producer_epoch=3, coordinator_epoch=4)]
    assert admin.closed
    assert result.stdout.splitlines()[-1] == ("aborted: ABORT marker written for producer 5001 epoch 3 "
                                              "(transactional id shop.hanging) on shop.enriched[2]")


def test_without_yes_nothing_is_sent(admin):
    result = abort()
    assert result.exit_code == 0, result.output
    assert admin.aborted == []
    assert result.stdout.splitlines()[-1] == "dry run: nothing changed; add --yes to write the ABORT marker"
    result = abort("--format", "json")
    assert admin.aborted == []
    shown = json.loads(result.stdout)
    assert (shown["producer_id"], shown["producer_epoch"], shown["coordinator_epoch"]) == (5001, 3, 4)
    assert (shown["dry_run"], shown["aborted"], shown["blocked"]) == (True, False, 6)


def test_a_producer_without_a_marker_yet_gets_coordinator_epoch_0(admin):
    # DescribeProducers says -1 before the first marker; the leader would reject -1 once it has seen one,
    # so 0 is sent, as kafka-transactions.sh does.
    admin.coordinator_epoch = -1
    assert abort("--yes").exit_code == 0
    assert admin.aborted[0].coordinator_epoch == 0


def test_a_broker_without_write_txn_markers_is_refused_and_nothing_is_sent(admin):
    admin.writes_markers = False
    result = abort("--yes")
    assert result.exit_code == 2
    assert admin.aborted == []
    assert result.stderr == ("eosctl: error: this broker does not support aborting transactions "
                             "(no WriteTxnMarkers API); nothing was changed\n")
